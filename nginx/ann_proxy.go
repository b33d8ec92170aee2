package nginx

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The proxy group: how much of a request body NGINX takes, how long it waits for the backends, and how
// often it tries another endpoint. Body sizes are profile settings (NGINX reads the body with its own
// directives) that the router also receives as route data, because it must check a Content-Length
// before it enters the profile's named location; timeouts and tries are route data that the Lua
// balancer applies per request (ngx.balancer.set_timeouts, set_more_tries), so changing them never
// reloads NGINX.

// Annotations of the proxy group.
const (
	AnnotationProxyBodySize          = IngressNginxPrefix + "proxy-body-size"
	AnnotationClientBodyBufferSize   = IngressNginxPrefix + "client-body-buffer-size"
	AnnotationProxyConnectTimeout    = IngressNginxPrefix + "proxy-connect-timeout"
	AnnotationProxySendTimeout       = IngressNginxPrefix + "proxy-send-timeout"
	AnnotationProxyReadTimeout       = IngressNginxPrefix + "proxy-read-timeout"
	AnnotationProxyNextUpstreamTries = IngressNginxPrefix + "proxy-next-upstream-tries"
	AnnotationLimitRate              = IngressNginxPrefix + "limit-rate"
	AnnotationLimitRateAfter         = IngressNginxPrefix + "limit-rate-after"
	AnnotationConnectionProxyHeader  = IngressNginxPrefix + "connection-proxy-header"
)

// Bounds of the group's values.
const (
	// maxBodySize bounds proxy-body-size: the largest whole number the Lua router holds exactly
	// (configuration.lua refuses a larger "body_limit"), 8 PiB.
	maxBodySize = 1 << 53
	// maxBodyBufferSize bounds client-body-buffer-size: the buffer is memory per request.
	maxBodyBufferSize = 64 << 20
	// maxNextUpstreamTries bounds proxy-next-upstream-tries (0 is no limit: each endpoint once).
	maxNextUpstreamTries = 100
	// maxLimitRate bounds limit-rate and limit-rate-after, in bytes: a terabyte.
	maxLimitRate = 1 << 40
)

// connectionHeader is what connection-proxy-header takes: comma-separated header tokens.
var connectionHeader = regexp.MustCompile(`^[A-Za-z0-9-]+(, ?[A-Za-z0-9-]+)*$`)

const timeoutValues = "a number of seconds (`60`), as ingress-nginx takes it, or an NGINX time (`500ms`, `2m`, `1h 30m`); from 1ms to a year"

const timeoutDifference = "**Route data**: the Lua balancer sets it per request (`ngx.balancer.set_timeouts`), so a change never reloads " +
	"NGINX and needs no profile; it applies to each try of each endpoint, to gRPC backends as their `grpc_*_timeout`, and, for the read " +
	"timeout, to idle WebSocket connections. ingress-nginx took whole seconds only; NGINX's units are accepted too. An invalid value is " +
	"ignored with a Warning (ingress-nginx used its default)."

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "client-body-buffer-size", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "an NGINX size: bytes, or a number with `k`, `m` or `g` (`16k`); from 1 byte to 64m",
			Default: "NGINX's (two memory pages: 8k or 16k)",
			Difference: "A **profile setting** (`client_body_buffer_size` in the profile's named location): the first Ingress with a new " +
				"combination of profile settings reloads NGINX once. An invalid or out-of-range value is ignored with a Warning.",
		}, {
			Name: "proxy-body-size", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "an NGINX size: bytes, or a number with `k`, `m` or `g` (`8m`); `0` for no limit",
			Default: "`1m`, the controller's default for every route",
			Difference: "A **profile setting** and **route data**: the Lua router answers 413 to a request whose `Content-Length` is over " +
				"its route's limit before it enters the route's named location, and the location's `client_max_body_size` stops a body " +
				"without `Content-Length` (chunked, or HTTP/2) at the limit. Each distinct size is part of a profile: the first Ingress " +
				"with a new combination of profile settings reloads NGINX once. An invalid value **rejects the Ingress** (ingress-nginx " +
				"used the default, which turns away the uploads the owner meant to allow while the Ingress looks served). The 413 carries " +
				"the route's CORS headers, as in ingress-nginx. On routes without a profile, a request without `Content-Length` " +
				"(chunked HTTP/1.1, and any HTTP/2 request without one, GETs included, since NGINX does not tell Lua whether an HTTP/2 " +
				"request has a body) is read in a named location that applies the default limit: one internal redirect per such request.",
		}, {
			Name: "connection-proxy-header", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values:  "comma-separated header tokens (letters, digits and `-`), such as `keep-alive`; at most 256 bytes",
			Default: "`upgrade` for requests that ask for an upgrade (WebSockets), else none (the upstream connection is kept alive)",
			Difference: "**Route data**: the router sets the `Connection` header that the backend gets, so a change never reloads " +
				"NGINX. As in ingress-nginx it replaces the WebSocket default. An invalid value is ignored with a Warning.",
		}, {
			Name: "limit-rate", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values:  "kilobytes per second as a whole number (`100`), as ingress-nginx takes it, or an NGINX size per second (`1m`); `0` for no limit",
			Default: "the ConfigMap's `limit-rate` (`0`: no limit)",
			Difference: "**Route data**: the router sets NGINX's `$limit_rate` for the response, per connection as NGINX's `limit_rate`, " +
				"so a change never reloads NGINX. As in ingress-nginx it takes effect only with `proxy-buffering: \"on\"` (NGINX does not " +
				"limit the rate of unbuffered responses, and buffering is off by default) and never for gRPC backends; without it, a " +
				"Warning. An invalid value is ignored with a Warning.",
		}, {
			Name: "limit-rate-after", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values:  "kilobytes as a whole number (`500`), as ingress-nginx takes it, or an NGINX size (`1m`)",
			Default: "the ConfigMap's `limit-rate-after` (`0`: the limit applies from the first byte)",
			Difference: "**Route data**, with `limit-rate` (alone it has no effect, with a Warning): the response's first bytes are " +
				"sent without the limit (`limit_rate_after`, read from a variable that the router sets). An invalid value is ignored with a Warning.",
		}, {
			Name: "proxy-connect-timeout", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values: timeoutValues, Default: "`5` (seconds)", Difference: timeoutDifference,
		}, {
			Name: "proxy-next-upstream-tries", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values:  "a whole number from 0 to 100; `0` tries every endpoint once",
			Default: "the ConfigMap's `proxy-next-upstream-tries` (`3`)",
			Difference: "**Route data**: the Lua balancer allows that many tries per request (`ngx.balancer.set_more_tries`), never more " +
				"than the upstream's endpoints, each endpoint once, so a change never reloads NGINX. An invalid value is ignored with a Warning.",
		}, {
			Name: "proxy-read-timeout", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values: timeoutValues, Default: "`60` (seconds)", Difference: timeoutDifference,
		}, {
			Name: "proxy-send-timeout", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values: timeoutValues, Default: "`60` (seconds)", Difference: timeoutDifference,
		}},
		apply: applyProxy,
	})
	registerProfileDirectives(proxyBodyDirectives)
}

// proxyBodyDirectives sets the request body limits of p's named location.
func proxyBodyDirectives(p ProfileSettings, out []string) []string {
	out = appendDirective(out, "client_max_body_size", p.ClientMaxBodySize)
	out = appendDirective(out, "client_body_buffer_size", p.ClientBodyBufferSize)
	return out
}

// applyProxy parses the group's annotations into the Ingress's profile and route options.
func applyProxy(t *translator) {
	ann := t.ing.Annotations
	if raw, ok := ann[AnnotationProxyBodySize]; ok {
		n, err := parseNginxSize(raw)
		if err == nil && n > maxBodySize {
			err = errUnit
		}
		if err != nil {
			t.fail("metadata.annotations[%s]: %s is not a size (want bytes, or a number with k, m or g, such as 8m; 0 for no limit)",
				AnnotationProxyBodySize, quoteValue(raw))
		} else {
			t.profile.ClientMaxBodySize = strconv.FormatInt(n, 10)
		}
	}
	if raw, ok := ann[AnnotationClientBodyBufferSize]; ok {
		if n, err := parseNginxSize(raw); err != nil || n < 1 || n > maxBodyBufferSize {
			t.warnIgnored(AnnotationClientBodyBufferSize, raw, "a size from 1 byte to 64m (bytes, or a number with k, m or g)")
		} else {
			t.profile.ClientBodyBufferSize = strconv.FormatInt(n, 10)
		}
	}
	timeouts := []struct {
		key string
		set func(o *RouteOptions, d time.Duration)
	}{
		{AnnotationProxyConnectTimeout, func(o *RouteOptions, d time.Duration) { o.ProxyConnectTimeout = d }},
		{AnnotationProxySendTimeout, func(o *RouteOptions, d time.Duration) { o.ProxySendTimeout = d }},
		{AnnotationProxyReadTimeout, func(o *RouteOptions, d time.Duration) { o.ProxyReadTimeout = d }},
	}
	for _, a := range timeouts {
		raw, ok := ann[a.key]
		if !ok {
			continue
		}
		if d, err := parseNginxTime(raw); err != nil || d < time.Millisecond || d%time.Millisecond != 0 {
			t.warnIgnored(a.key, raw, "a number of seconds, or an NGINX time such as 500ms or 2m, from 1ms to a year")
		} else {
			a.set(t.options(), d)
		}
	}
	t.limitRate()
	if raw, ok := ann[AnnotationConnectionProxyHeader]; ok {
		if v := strings.TrimSpace(raw); len(v) > 256 || !connectionHeader.MatchString(v) {
			t.warnIgnored(AnnotationConnectionProxyHeader, raw, "a list of header tokens such as keep-alive")
		} else {
			t.options().ConnectionHeader = v
		}
	}
	if raw, ok := ann[AnnotationProxyNextUpstreamTries]; ok {
		if n, err := parseDigits(strings.TrimSpace(raw)); err != nil || n > maxNextUpstreamTries {
			t.warnIgnored(AnnotationProxyNextUpstreamTries, raw, "a whole number from 0 to 100")
		} else {
			o := t.options()
			o.NextUpstreamTries, o.NextUpstreamTriesSet = int(n), true
		}
	}
}

// limitRate parses limit-rate and limit-rate-after: a plain number is kilobytes, as in ingress-nginx.
func (t *translator) limitRate() {
	parse := func(key string) (int64, bool) {
		raw, ok := t.ing.Annotations[key]
		if !ok {
			return 0, false
		}
		v := strings.TrimSpace(raw)
		n, err := parseDigits(v)
		if err == nil {
			if n > maxLimitRate>>10 {
				err = errUnit
			}
			n <<= 10
		} else {
			n, err = parseNginxSize(v)
		}
		if err != nil || n > maxLimitRate {
			t.warnIgnored(key, raw, "a number of kilobytes, or an NGINX size such as 1m, up to 1024g")
			return 0, false
		}
		return n, true
	}
	rate, _ := parse(AnnotationLimitRate)
	after, afterSet := parse(AnnotationLimitRateAfter)
	if rate == 0 {
		if afterSet && after > 0 {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has an effect only with %s; ignored",
				AnnotationLimitRateAfter, AnnotationLimitRate))
		}
		return
	}
	o := t.options()
	o.LimitRate, o.LimitRateAfter = rate, after
	// NGINX applies limit_rate only to buffered responses: proxying without buffering (proxy_buffering
	// off, the default of every location as in ingress-nginx, and always for gRPC) resets it.
	// ingress-nginx documents that limit-rate "must be used with proxy-buffering enabled"; say so.
	if t.profile.usesGRPC() {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has no effect with a gRPC backend "+
			"(NGINX does not buffer gRPC responses, and limits the rate of buffered responses only)", AnnotationLimitRate))
	} else if strings.ToLower(strings.TrimSpace(t.ing.Annotations[AnnotationProxyBuffering])) != "on" {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has an effect only with %s: \"on\" "+
			"(NGINX limits the rate of buffered responses only, and proxy buffering is off by default)", AnnotationLimitRate, AnnotationProxyBuffering))
	}
}

// warnIgnored reports an annotation value that is ignored because it is not what the annotation takes
// (want describes what it takes).
func (t *translator) warnIgnored(key, raw, want string) {
	t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is not %s; ignored", key, quoteValue(raw), want))
}

// appendProxyOptions writes the proxy group's route data: "upstream_options" for the Lua balancer
// (connect, send and read timeouts in milliseconds, 0 for the default, and the tries, -1 for the
// default) when any is set.
func appendProxyOptions(b []byte, o *RouteOptions) []byte {
	if o.ProxyConnectTimeout == 0 && o.ProxySendTimeout == 0 && o.ProxyReadTimeout == 0 && !o.NextUpstreamTriesSet {
		return b
	}
	tries := -1
	if o.NextUpstreamTriesSet {
		tries = o.NextUpstreamTries
	}
	b = append(b, `,"upstream_options":[`...)
	b = strconv.AppendInt(b, o.ProxyConnectTimeout.Milliseconds(), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, o.ProxySendTimeout.Milliseconds(), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, o.ProxyReadTimeout.Milliseconds(), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(tries), 10)
	return append(b, ']')
}

// appendProxyHeaderOptions writes the route data that the router sets as NGINX variables:
// "limit_rate" (bytes per second and the bytes sent before the limit) and "connection_header".
func appendProxyHeaderOptions(b []byte, o *RouteOptions) []byte {
	if o.LimitRate > 0 {
		b = append(b, `,"limit_rate":[`...)
		b = strconv.AppendInt(b, o.LimitRate, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, o.LimitRateAfter, 10)
		b = append(b, ']')
	}
	if o.ConnectionHeader != "" {
		b = append(b, `,"connection_header":`...)
		b = appendJSONString(b, o.ConnectionHeader)
	}
	return b
}

// appendBodyLimit writes the route's body limit (proxy-body-size) for the Lua router's Content-Length
// check: "body_limit" in bytes, 0 for none.
func appendBodyLimit(b []byte, p *ProfileSettings) []byte {
	if p.ClientMaxBodySize == "" {
		return b
	}
	b = append(b, `,"body_limit":`...)
	return append(b, p.ClientMaxBodySize...)
}
