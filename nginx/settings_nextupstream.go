package nginx

import (
	"fmt"
	"strings"
	"time"
)

// The ConfigMap keys of retries on another endpoint (issue #18).

// NextUpstreamSettings are the defaults of the proxy-next-upstream annotations.
type NextUpstreamSettings struct {
	// Conditions is proxy-next-upstream in its written form (see nextUpstream).
	Conditions string
	// Timeout bounds the time of all tries (0: none); Tries the endpoints one request tries (0: each once).
	Timeout time.Duration
	Tries   int
}

// proxyNextUpstream is the http block's proxy_next_upstream: the conditions, with non_idempotent when
// retry-non-idempotent asks for it.
func (n NextUpstreamSettings) proxyNextUpstream(retryNonIdempotent bool) string {
	c := n.Conditions
	if c == "" {
		c = "error timeout"
	}
	if retryNonIdempotent && c != "off" && !strings.Contains(c, "non_idempotent") {
		c, _ = nextUpstream(c + " non_idempotent")
	}
	return c
}

// nextUpstreamView is what the template sees of the timeout and tries.
type nextUpstreamView struct {
	TimeoutMS int64
	Tries     int
}

func init() {
	registerSettings(
		settingKey{Name: "proxy-next-upstream", Default: "error timeout",
			Values: "conditions of NGINX's `proxy_next_upstream` separated by spaces: `" + strings.Join(nextUpstreamConditions, "`, `") + "`",
			Doc: "When a request is tried on another endpoint (proxy_next_upstream), for the Ingresses without the proxy-next-upstream " +
				"annotation; retry-non-idempotent adds `non_idempotent`.",
			Difference: "Not applied to gRPC backends (NGINX's default for grpc_next_upstream applies, as in ingress-nginx); an Ingress whose " +
				"annotation says `error timeout` gets this key's value.",
			set: settingsField(func(s *Settings) *string { return &s.NextUpstream.Conditions }, func(v string) (string, error) {
				c, ok := nextUpstream(v)
				if !ok {
					return "", fmt.Errorf("want conditions among %s", strings.Join(nextUpstreamConditions, ", "))
				}
				return c, nil
			})},
		settingKey{Name: "proxy-next-upstream-timeout", Default: "0", Values: secondsValue + ", from 0 (no limit) to 1h",
			Doc: "How long a request may spend trying endpoints (proxy_next_upstream_timeout), for the Ingresses without the annotation.",
			set: secondsField(func(s *Settings) *time.Duration { return &s.NextUpstream.Timeout }, 0, time.Hour)},
		settingKey{Name: "proxy-next-upstream-tries", Default: "3", Values: fmt.Sprintf("a number from 0 (each endpoint once) to %d", maxNextUpstreamTries),
			Doc:        "How many endpoints one request tries at most, for the Ingresses without the proxy-next-upstream-tries annotation.",
			Difference: "The Lua balancer counts the tries and never tries an endpoint twice; `0` tries each endpoint once.",
			set:        intField(func(s *Settings) *int { return &s.NextUpstream.Tries }, 0, maxNextUpstreamTries)},
	)
}
