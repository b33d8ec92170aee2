package nginx

import (
	"fmt"
	"strings"
)

// The ConfigMap's routing defaults (issue #18): service-upstream, proxy-redirect-from and -to,
// no-tls-redirect-locations, relative-redirects and grpc-buffer-size-kb.

// RoutingSettings are those keys, validated.
type RoutingSettings struct {
	// ServiceUpstream is the default of the service-upstream annotation.
	ServiceUpstream bool
	// ProxyRedirectFrom and ProxyRedirectTo are the defaults of the proxy-redirect-from and -to
	// annotations: a URL or path each (checked as the annotations' are), "" for off.
	ProxyRedirectFrom, ProxyRedirectTo string
	// NoTLSRedirectLocations are the path prefixes (comma-separated) whose routes are never redirected
	// to HTTPS (no-tls-redirect-locations).
	NoTLSRedirectLocations string
	// RelativeRedirects turns NGINX's absolute_redirect off; GRPCBufferSizeKB is grpc_buffer_size in KB
	// (0: NGINX's default).
	RelativeRedirects bool
	GRPCBufferSizeKB  int
}

func init() {
	redirectSide := func(annotation string) func(v string) (string, error) {
		return func(v string) (string, error) {
			switch {
			case v == "off" || v == "default" && annotation == "proxy-redirect-from":
				return "", nil
			case !redirectURL.MatchString(v) || strings.HasPrefix(v, "~"):
				return "", fmt.Errorf("want off, or a URL or path without regular expressions and variables (as the annotation %s)", annotation)
			}
			return v, nil
		}
	}
	const redirectDiff = "Printed in NGINX's http block, so every location without the annotations has it; an Ingress that sets either " +
		"annotation gets the pair of its own values and, for the one it lacks, the ConfigMap's (as ingress-nginx combined them). " +
		"Values are checked as the annotations' are: regular expressions and NGINX variables are refused (ingress-nginx wrote the " +
		"value into nginx.conf as it was)."
	registerSettings(
		settingKey{Name: "service-upstream", Default: "false", Values: boolValues,
			Doc: "The default of the service-upstream annotation: `true` sends the requests of every Ingress without the annotation to its " +
				"Services' cluster IPs and ports (kube-proxy picks the Pod) instead of the Pods.",
			Difference: "As for the annotation, the upstream is the Ingress's own: a change of this key renames upstreams and pushes their " +
				"endpoints, without a reload.",
			set: boolField(func(s *Settings) *bool { return &s.Routing.ServiceUpstream })},
		settingKey{Name: "proxy-redirect-from", Default: "off", Values: "`off`, `default` (the same: it rewrites only the URL of NGINX's internal upstream), or a URL or path",
			Doc: "The default of the proxy-redirect-from annotation: the start of the backends' `Location` and `Refresh` headers that " +
				"proxy-redirect-to replaces. It has an effect only with proxy-redirect-to.",
			Difference: redirectDiff,
			set:        settingsField(func(s *Settings) *string { return &s.Routing.ProxyRedirectFrom }, redirectSide("proxy-redirect-from"))},
		settingKey{Name: "proxy-redirect-to", Default: "off", Values: "`off`, or a URL or path",
			Doc:        "The default of the proxy-redirect-to annotation: what replaces proxy-redirect-from.",
			Difference: redirectDiff,
			set:        settingsField(func(s *Settings) *string { return &s.Routing.ProxyRedirectTo }, redirectSide("proxy-redirect-to"))},
		settingKey{Name: "no-tls-redirect-locations", Default: "/.well-known/acme-challenge",
			Values: "a comma-separated list of path prefixes, each starting with `/`, of printable ASCII without spaces, quotes, `;`, `$`, braces or `\\`; at most 64",
			Doc: "Plain HTTP to the routes of an Ingress whose path starts with one of these is served, never redirected to HTTPS (neither " +
				"by ssl-redirect nor by force-ssl-redirect), as ingress-nginx compares them: the Ingress's path, not the request's. By " +
				"default the ACME HTTP-01 challenges of cert-manager's solver Ingresses reach it over HTTP on hosts with TLS.",
			Difference: "Applied by the Lua router: a change reloads NGINX once, never per route. An invalid value keeps the last good " +
				"one, or the default.",
			set: settingsField(func(s *Settings) *string { return &s.Routing.NoTLSRedirectLocations }, parseNoAuthLocations)},
	)
}

// proxyRedirect returns the http block's proxy_redirect arguments: the ConfigMap's pair, quoted, or off.
func (r RoutingSettings) proxyRedirect(q *quoter) string {
	if r.ProxyRedirectFrom == "" || r.ProxyRedirectTo == "" {
		return "off"
	}
	return q.quote(r.ProxyRedirectFrom) + " " + q.quote(r.ProxyRedirectTo)
}

// noTLSRedirectLocations returns the prefixes quoted, as Lua strings of set_no_tls_redirect_locations.
func (r RoutingSettings) noTLSRedirectLocations(q *quoter) []string {
	var out []string
	if r.NoTLSRedirectLocations == "" {
		return nil
	}
	for p := range strings.SplitSeq(r.NoTLSRedirectLocations, ",") {
		out = append(out, q.quote(p))
	}
	return out
}

// The ConfigMap's relative-redirects and grpc-buffer-size-kb: http-level directives.
func init() {
	registerSettings(
		settingKey{Name: "relative-redirects", Default: "false", Values: boolValues,
			Doc: "`true`: the redirects NGINX writes itself (a `Location` of a backend that proxy-redirect-to turned into a path, " +
				"a directory's slash) keep a relative `Location` (absolute_redirect off) instead of naming the scheme, host and port.",
			Difference: "The redirects the Lua router writes (to HTTPS, app-root, permanent-redirect, from-to-www-redirect) are absolute " +
				"URLs whatever this says, as ingress-nginx's were; the annotation relative-redirects is not supported.",
			set: boolField(func(s *Settings) *bool { return &s.Routing.RelativeRedirects })},
		settingKey{Name: "grpc-buffer-size-kb", Default: "0", Values: "a number of KB from 0 (NGINX's default: one memory page) to 1024",
			Doc: "grpc_buffer_size, in KB: the buffer for the first part of gRPC backends' responses.",
			set: intField(func(s *Settings) *int { return &s.Routing.GRPCBufferSizeKB }, 0, 1024)},
	)
}
