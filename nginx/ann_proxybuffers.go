package nginx

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The proxy buffering group: how NGINX buffers requests and responses, which HTTP version it speaks to
// the backends, and when it passes a request to the next endpoint. All are profile settings (directives
// of the profile's named location). A value equal to the default of every location (ingress-nginx's
// defaults, in nginx.tmpl) asks for nothing and needs no profile.

// Annotations of the proxy buffering group.
const (
	AnnotationProxyBuffering           = IngressNginxPrefix + "proxy-buffering"
	AnnotationProxyRequestBuffering    = IngressNginxPrefix + "proxy-request-buffering"
	AnnotationProxyBufferSize          = IngressNginxPrefix + "proxy-buffer-size"
	AnnotationProxyBuffersNumber       = IngressNginxPrefix + "proxy-buffers-number"
	AnnotationProxyBusyBuffersSize     = IngressNginxPrefix + "proxy-busy-buffers-size"
	AnnotationProxyMaxTempFileSize     = IngressNginxPrefix + "proxy-max-temp-file-size"
	AnnotationProxyHTTPVersion         = IngressNginxPrefix + "proxy-http-version"
	AnnotationProxyNextUpstream        = IngressNginxPrefix + "proxy-next-upstream"
	AnnotationProxyNextUpstreamTimeout = IngressNginxPrefix + "proxy-next-upstream-timeout"
)

// The defaults of every location (nginx.tmpl), ingress-nginx's.
const (
	defaultProxyBufferSize    = 4 << 10
	defaultProxyBuffersNumber = 4
)

// Bounds of the group's values: the buffers are memory per request.
const (
	maxProxyBufferSize    = 16 << 20
	maxProxyBuffersNumber = 256
)

// nextUpstreamConditions are the conditions of proxy_next_upstream (and grpc_next_upstream) that
// ingress-nginx accepts, in the order they are written.
var nextUpstreamConditions = []string{"error", "timeout", "invalid_header", "http_500", "http_502", "http_503", "http_504",
	"http_403", "http_404", "http_429", "non_idempotent", "off"}

const profileKindText = "A **profile setting**: the first Ingress with a new combination of profile settings reloads NGINX once; "

func init() {
	onOff := "`on` or `off`"
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "proxy-buffer-size", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "an NGINX size (`8k`, `16k`), from 1 byte to 16m",
			Default: "`4k`",
			Difference: profileKindText + "as in ingress-nginx it sets `proxy_buffer_size` and the size of each of the `proxy_buffers` " +
				"(`grpc_buffer_size` for gRPC backends). An invalid value, or one that NGINX would refuse with the other buffer settings, is " +
				"ignored with a Warning.",
		}, {
			Name: "proxy-buffering", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values: onOff + " (any case)", Default: "`off`",
			Difference: profileKindText + "`off` asks for nothing. Not applied to gRPC backends (NGINX's gRPC module does not buffer). " +
				"An invalid value is ignored with a Warning.",
		}, {
			Name: "proxy-buffers-number", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "a whole number from 2 to 256 (3 and more unless `proxy-busy-buffers-size` allows fewer, as NGINX requires)",
			Default: "`4`",
			Difference: profileKindText + "not applied to gRPC backends. A value NGINX would refuse (its configuration test failed in " +
				"ingress-nginx) is ignored with a Warning.",
		}, {
			Name: "proxy-busy-buffers-size", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:     "an NGINX size from the buffer size up to the size of all buffers but one, as NGINX requires",
			Default:    "NGINX's: two buffers",
			Difference: profileKindText + "not applied to gRPC backends. A value NGINX would refuse is ignored with a Warning.",
		}, {
			Name: "proxy-http-version", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values: "`1.0` or `1.1`", Default: "`1.1`",
			Difference: profileKindText + "`1.1` asks for nothing. Not applied to gRPC backends (HTTP/2). An invalid value is ignored with a Warning.",
		}, {
			Name: "proxy-max-temp-file-size", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:     "an NGINX size; `0` turns off buffering of responses to temporary files; else at least the buffer size, as NGINX requires",
			Default:    "`1024m`",
			Difference: profileKindText + "not applied to gRPC backends. A value NGINX would refuse is ignored with a Warning.",
		}, {
			Name: "proxy-next-upstream", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values: "space-separated conditions of NGINX's `proxy_next_upstream` that ingress-nginx accepts: `error`, `timeout`, " +
				"`invalid_header`, `http_500`, `http_502`, `http_503`, `http_504`, `http_403`, `http_404`, `http_429`, `non_idempotent`, `off`",
			Default: "the ConfigMap's `proxy-next-upstream` (`error timeout`)",
			Difference: profileKindText + "`grpc_next_upstream` for gRPC backends. Repeated conditions are written once (NGINX warns about " +
				"them). An invalid value is ignored with a Warning.",
		}, {
			Name: "proxy-next-upstream-timeout", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "a number of seconds, as ingress-nginx takes it, or an NGINX time (`1500ms`); `0` for no limit",
			Default: "the ConfigMap's `proxy-next-upstream-timeout` (`0`: no limit)",
			Difference: profileKindText + "`0` asks for nothing; `grpc_next_upstream_timeout` for gRPC backends. An invalid value is ignored " +
				"with a Warning.",
		}, {
			Name: "proxy-request-buffering", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values: onOff + " (any case)", Default: "`on`",
			Difference: profileKindText + "`on` asks for nothing. Not applied to gRPC backends (NGINX's gRPC module streams request " +
				"bodies). An invalid value is ignored with a Warning.",
		}},
		apply: applyProxyBuffers,
	})
	registerProfileDirectives(proxyBufferDirectives)
}

// proxyBufferDirectives writes the group's directives into p's named location.
func proxyBufferDirectives(p ProfileSettings, out []string) []string {
	if p.usesGRPC() {
		out = appendDirective(out, "grpc_buffer_size", p.ProxyBufferSize)
		out = appendDirective(out, "grpc_next_upstream", p.ProxyNextUpstream)
		out = appendDirective(out, "grpc_next_upstream_timeout", p.ProxyNextUpstreamTimeout)
		return out
	}
	out = appendDirective(out, "proxy_buffering", p.ProxyBuffering)
	out = appendDirective(out, "proxy_request_buffering", p.ProxyRequestBuffering)
	if p.ProxyBufferSize != "" || p.ProxyBuffersNumber != "" {
		size, number := p.ProxyBufferSize, p.ProxyBuffersNumber
		if size == "" {
			size = strconv.Itoa(defaultProxyBufferSize)
		}
		if number == "" {
			number = strconv.Itoa(defaultProxyBuffersNumber)
		}
		out = append(out, "proxy_buffer_size "+size, "proxy_buffers "+number+" "+size)
	}
	out = appendDirective(out, "proxy_busy_buffers_size", p.ProxyBusyBuffersSize)
	out = appendDirective(out, "proxy_max_temp_file_size", p.ProxyMaxTempFileSize)
	out = appendDirective(out, "proxy_http_version", p.ProxyHTTPVersion)
	out = appendDirective(out, "proxy_next_upstream", p.ProxyNextUpstream)
	out = appendDirective(out, "proxy_next_upstream_timeout", p.ProxyNextUpstreamTimeout)
	return out
}

// applyProxyBuffers parses the group's annotations into the Ingress's profile.
func applyProxyBuffers(t *translator) {
	ann := t.ing.Annotations
	p := &t.profile
	onOff := func(key, deflt string, set *string) {
		raw, ok := ann[key]
		if !ok {
			return
		}
		switch v := strings.ToLower(strings.TrimSpace(raw)); v {
		case deflt:
		case "on", "off":
			*set = v
		default:
			t.warnIgnored(key, raw, "on or off")
		}
	}
	onOff(AnnotationProxyBuffering, "off", &p.ProxyBuffering)
	onOff(AnnotationProxyRequestBuffering, "on", &p.ProxyRequestBuffering)
	if raw, ok := ann[AnnotationProxyHTTPVersion]; ok {
		switch v := strings.TrimSpace(raw); v {
		case "1.1":
		case "1.0":
			p.ProxyHTTPVersion = v
		default:
			t.warnIgnored(AnnotationProxyHTTPVersion, raw, "1.0 or 1.1")
		}
	}
	if raw, ok := ann[AnnotationProxyNextUpstream]; ok {
		if v, ok := nextUpstream(raw); ok && v != "error timeout" { // the default
			p.ProxyNextUpstream = v
		} else if !ok {
			t.warnIgnored(AnnotationProxyNextUpstream, raw, "a list of proxy_next_upstream conditions ("+strings.Join(nextUpstreamConditions, ", ")+")")
		}
	}
	if raw, ok := ann[AnnotationProxyNextUpstreamTimeout]; ok {
		d, err := parseNginxTime(raw)
		switch {
		case err != nil:
			t.warnIgnored(AnnotationProxyNextUpstreamTimeout, raw, "a number of seconds, or an NGINX time such as 1500ms, up to a year")
		case d > 0:
			p.ProxyNextUpstreamTimeout = strconv.FormatInt(d.Milliseconds(), 10) + "ms"
		}
	}
	t.proxyBufferSizes()
}

// proxyBufferSizes parses the buffer sizes and keeps the ones that NGINX accepts together: two buffers
// at least, the busy buffers from one buffer up to all buffers but one (twice the buffer size when not
// set), and temporary files off or at least one buffer.
func (t *translator) proxyBufferSizes() {
	ann := t.ing.Annotations
	size := func(key string, lo, hi int64, want string) (int64, bool) {
		raw, ok := ann[key]
		if !ok {
			return 0, false
		}
		n, err := parseNginxSize(raw)
		if err != nil || n < lo || n > hi {
			t.warnIgnored(key, raw, want)
			return 0, false
		}
		return n, true
	}
	p := &t.profile
	buffer := int64(defaultProxyBufferSize)
	if n, ok := size(AnnotationProxyBufferSize, 1, maxProxyBufferSize, "a size from 1 byte to 16m"); ok {
		buffer = n
		p.ProxyBufferSize = strconv.FormatInt(n, 10)
	}
	number := int64(defaultProxyBuffersNumber)
	numberSet := false
	if raw, ok := ann[AnnotationProxyBuffersNumber]; ok {
		if n, err := parseDigits(strings.TrimSpace(raw)); err != nil || n < 2 || n > maxProxyBuffersNumber {
			t.warnIgnored(AnnotationProxyBuffersNumber, raw, "a whole number from 2 to 256")
		} else {
			number, numberSet = n, true
		}
	}
	busy, busySet := size(AnnotationProxyBusyBuffersSize, 1, int64(maxProxyBuffersNumber)*maxProxyBufferSize, "an NGINX size")
	if busySet && (busy < buffer || busy > (number-1)*buffer) {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is not from the buffer size (%d bytes) to the size of all "+
			"buffers but one (%d bytes), which NGINX requires; ignored", AnnotationProxyBusyBuffersSize, quoteValue(ann[AnnotationProxyBusyBuffersSize]),
			buffer, (number-1)*buffer))
		busySet = false
	}
	if !busySet && numberSet && 2*buffer > (number-1)*buffer {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %d buffers leave no room for NGINX's busy buffers (two "+
			"buffers; set %s to one buffer for fewer than 3 buffers); ignored", AnnotationProxyBuffersNumber, number, AnnotationProxyBusyBuffersSize))
		numberSet = false
	}
	if numberSet {
		p.ProxyBuffersNumber = strconv.FormatInt(number, 10)
	}
	if busySet {
		p.ProxyBusyBuffersSize = strconv.FormatInt(busy, 10)
	}
	if n, ok := size(AnnotationProxyMaxTempFileSize, 0, 1<<50, "an NGINX size"); ok {
		if n != 0 && n < buffer {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is neither 0 nor at least the buffer size (%d bytes), "+
				"which NGINX requires; ignored", AnnotationProxyMaxTempFileSize, quoteValue(ann[AnnotationProxyMaxTempFileSize]), buffer))
		} else {
			p.ProxyMaxTempFileSize = strconv.FormatInt(n, 10)
		}
	}
}

// nextUpstream parses a list of proxy_next_upstream conditions into its written form: each once, in
// nextUpstreamConditions' order, "off" alone.
func nextUpstream(raw string) (string, bool) {
	fields := strings.Fields(raw)
	if len(fields) == 0 {
		return "", false
	}
	for _, f := range fields {
		if !slices.Contains(nextUpstreamConditions, f) {
			return "", false
		}
	}
	if slices.Contains(fields, "off") {
		return "off", true
	}
	var out []string
	for _, c := range nextUpstreamConditions {
		if slices.Contains(fields, c) {
			out = append(out, c)
		}
	}
	return strings.Join(out, " "), true
}
