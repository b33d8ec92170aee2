package nginx

import (
	"fmt"
	"strconv"
	"strings"
)

// The CORS annotations of ingress-nginx (see RouteOptions.CORS): route data. The Lua router answers
// preflight requests itself and its header filter adds the allow headers to the route's responses.
const (
	AnnotationEnableCORS           = IngressNginxPrefix + "enable-cors"
	AnnotationCORSAllowOrigin      = IngressNginxPrefix + "cors-allow-origin"
	AnnotationCORSAllowMethods     = IngressNginxPrefix + "cors-allow-methods"
	AnnotationCORSAllowHeaders     = IngressNginxPrefix + "cors-allow-headers"
	AnnotationCORSExposeHeaders    = IngressNginxPrefix + "cors-expose-headers"
	AnnotationCORSAllowCredentials = IngressNginxPrefix + "cors-allow-credentials"
	AnnotationCORSMaxAge           = IngressNginxPrefix + "cors-max-age"
)

// ingress-nginx's defaults for CORS.
const (
	DefaultCORSAllowMethods = "GET, PUT, POST, DELETE, PATCH, OPTIONS"
	DefaultCORSAllowHeaders = "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization"
	DefaultCORSMaxAge       = 1728000
)

// maxCORSValue bounds each CORS annotation: the values become response headers.
const maxCORSValue = 4096

// CORSOptions are an Ingress's CORS settings (enable-cors and cors-*), all validated: the header
// values are lists of tokens, so they cannot split or extend a header.
type CORSOptions struct {
	// AllowOrigin is "*" (any origin, answered with a literal "*"), or the allowed origins joined by ","
	// in lower case: "<scheme>://<host>[:<port>]", a host may start with "*." (one label), or "null".
	// Empty allows no origin.
	AllowOrigin      string
	AllowMethods     string
	AllowHeaders     string
	ExposeHeaders    string
	AllowCredentials bool
	MaxAge           int
}

func init() {
	const (
		reject = "An invalid value **rejects the Ingress** (its last good version keeps being served): ingress-nginx used its default instead, which "
		only   = "Has an effect only with `enable-cors: \"true\"` (a Warning says so otherwise); invalid values are reported all the same."
	)
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			{
				Name: "cors-allow-credentials", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "a boolean: `true` or `false`", Default: "`true`: `Access-Control-Allow-Credentials: true` is sent (browsers refuse " +
					"credentialed requests when the allowed origin is `*`, so with the default origin it only matters for a list)",
				Difference: reject + "is `true`, wider than `false`. " + only,
			},
			{
				Name: "cors-allow-headers", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:     "comma-separated header names of letters, digits, `-` and `_`, or `*` (any header, as the Fetch standard defines it); spaces around them are dropped",
				Default:    "`" + DefaultCORSAllowHeaders + "`",
				Difference: "Sent joined by `,`. " + reject + "may allow more. " + only,
			},
			{
				Name: "cors-allow-methods", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:     "comma-separated methods of letters only, or `*` (any method); spaces around them are dropped",
				Default:    "`" + DefaultCORSAllowMethods + "`",
				Difference: "Sent joined by `, `. " + reject + "may allow more. " + only,
			},
			{
				Name: "cors-allow-origin", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "`*`, or comma-separated origins `<scheme>://<host>[:<port>]` (`https://app.example.com`, `http://localhost:8080`), " +
					"a host may start with `*.` for one label of any name (`https://*.example.com` covers `https://a.example.com`, not " +
					"`https://example.com` nor `https://a.b.example.com`), and `null`; compared without regard to case",
				Default: "`*`",
				Difference: "With `*` every response of the paths carries `Access-Control-Allow-Origin: *`, and every `OPTIONS` request is answered " +
					"204, as in ingress-nginx. With a list, a request whose `Origin` is on it gets the headers with its `Origin` echoed, and " +
					"its `OPTIONS` is answered 204; other requests get no CORS headers and go to the backend, as in ingress-nginx. " +
					"The whole `Origin` must match (ingress-nginx anchored its pattern at the end only, so `https://evil.example/https://app.example.com` passed). " +
					"An entry that is not an origin **rejects the Ingress**: ingress-nginx skipped it, or answered every origin (`*`) when the " +
					"value as a whole failed its check. A value without entries allows no origin, with a Warning. " + only,
			},
			{
				Name: "cors-expose-headers", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "comma-separated header names of letters, digits, `-` and `_`, or `*`", Default: "none: no `Access-Control-Expose-Headers`",
				Difference: "Sent joined by `,`. An invalid value is ignored with a Warning (no header is exposed), as ingress-nginx did without a word. " + only,
			},
			{
				Name: "cors-max-age", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "whole seconds, 0 to 2147483647", Default: "`1728000` (20 days)",
				Difference: "An invalid value is ignored with a Warning and the default applies, as in ingress-nginx. " + only,
			},
			{
				Name: "enable-cors", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "a boolean: `true` or `false`", Default: "`false`",
				Difference: "The Lua router answers preflight requests (`OPTIONS`) of an allowed origin with 204 and the CORS headers " +
					"(`Access-Control-Allow-Origin`, `-Credentials` when true, `-Methods`, `-Headers`, `-Expose-Headers` when set, `-Max-Age`) " +
					"without reaching the backend, and sets the same headers on every other response of the Ingress's paths (its own 503s included), " +
					"replacing the backend's, as ingress-nginx did. NGINX drops `Content-Type` and `Content-Length` from a 204, so the preflight " +
					"answer has neither, as in ingress-nginx. CORS comes before the Ingress's redirects and source ranges, as in ingress-nginx: a " +
					"preflight is answered 204 also on a redirected path or for a client the source ranges refuse, and their redirects and 403s " +
					"carry the CORS headers. When an origin of a list is echoed, `Vary: Origin` is added (ingress-nginx did not), so caches " +
					"keep one answer per origin. Preflights do not count against the rate limits, as in ingress-nginx. " +
					"An invalid value **rejects the Ingress**; ingress-nginx turned CORS off.",
			},
		},
		apply: applyCORS,
	})
}

// applyCORS reads the CORS annotations into the Ingress's route options. Values whose loss or default
// would let more origins, methods, headers or credentials through reject the Ingress; the others
// (exposed headers, max age) fall back with a Warning.
func applyCORS(t *translator) {
	a := t.ing.Annotations
	enabled := false
	if _, ok := a[AnnotationEnableCORS]; ok {
		enabled, _ = t.parseBoolAnnotation(AnnotationEnableCORS)
	}
	c := CORSOptions{AllowOrigin: "*", AllowMethods: DefaultCORSAllowMethods, AllowHeaders: DefaultCORSAllowHeaders,
		AllowCredentials: true, MaxAge: DefaultCORSMaxAge}
	valid := true
	if _, ok := a[AnnotationCORSAllowOrigin]; ok {
		c.AllowOrigin, ok = t.corsOrigins(enabled)
		valid = valid && ok
	}
	if v, ok := t.corsList(AnnotationCORSAllowMethods, func(s string) bool { return s == "*" || isCORSMethod(s) }, ", ",
		"methods of letters only (GET, PUT, POST), or *"); ok {
		c.AllowMethods = v
	} else if _, set := a[AnnotationCORSAllowMethods]; set {
		valid = false
	}
	if v, ok := t.corsList(AnnotationCORSAllowHeaders, func(s string) bool { return s == "*" || isCORSHeader(s) }, ",",
		"header names of letters, digits, - and _, or *"); ok {
		c.AllowHeaders = v
	} else if _, set := a[AnnotationCORSAllowHeaders]; set {
		valid = false
	}
	if _, ok := a[AnnotationCORSAllowCredentials]; ok {
		var b bool
		if b, ok = t.parseBoolAnnotation(AnnotationCORSAllowCredentials); ok {
			c.AllowCredentials = b
		}
		valid = valid && ok
	}
	if raw, ok := a[AnnotationCORSExposeHeaders]; ok {
		if v, ok := corsTokens(raw, func(s string) bool { return s == "*" || isCORSHeader(s) }, ","); ok && v != "" {
			c.ExposeHeaders = v
		} else {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is not a list of header names (letters, digits, - and _) or *; ignored, no header is exposed",
				AnnotationCORSExposeHeaders, quoteValue(raw)))
		}
	}
	if raw, ok := a[AnnotationCORSMaxAge]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(raw)); err == nil && n >= 0 && n <= 1<<31-1 {
			c.MaxAge = n
		} else {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is not a number of seconds from 0 to 2147483647; the default %d applies",
				AnnotationCORSMaxAge, quoteValue(raw), DefaultCORSMaxAge))
		}
	}
	if !enabled {
		var set []string
		for _, k := range []string{AnnotationCORSAllowCredentials, AnnotationCORSAllowHeaders, AnnotationCORSAllowMethods, AnnotationCORSAllowOrigin,
			AnnotationCORSExposeHeaders, AnnotationCORSMaxAge} {
			if _, ok := a[k]; ok {
				set = append(set, k)
			}
		}
		if len(set) > 0 {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations: %s: no effect without %s: \"true\"", strings.Join(set, ", "), AnnotationEnableCORS))
		}
		return
	}
	if valid {
		t.options().CORS = c
		t.options().EnableCORS = true
	}
}

// corsOrigins checks cors-allow-origin: "*" when any entry is "*" (as ingress-nginx), else the
// canonical list. Every entry must be an origin; an empty list is allowed with a Warning (when CORS is
// on).
func (t *translator) corsOrigins(enabled bool) (string, bool) {
	raw := t.ing.Annotations[AnnotationCORSAllowOrigin]
	if len(raw) > maxCORSValue {
		t.fail("metadata.annotations[%s]: %s: longer than %d bytes", AnnotationCORSAllowOrigin, quoteValue(raw), maxCORSValue)
		return "", false
	}
	var out []string
	anyOrigin, valid := false, true
	for entry := range strings.SplitSeq(raw, ",") {
		entry = strings.TrimSpace(entry)
		switch {
		case entry == "":
		case entry == "*":
			anyOrigin = true
		default:
			o, ok := canonicalOrigin(entry)
			if !ok {
				t.fail("metadata.annotations[%s]: entry %s is not an origin (want *, null, or <scheme>://<host>[:<port>] without a path, "+
					"where the host may start with *. for one label, as https://*.example.com)", AnnotationCORSAllowOrigin, quoteValue(entry))
				valid = false
				continue
			}
			if !containsString(out, o) {
				out = append(out, o)
			}
		}
	}
	if !valid {
		return "", false
	}
	if anyOrigin {
		return "*", true
	}
	if len(out) == 0 && enabled {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: lists no origin, so no request gets CORS headers", AnnotationCORSAllowOrigin))
	}
	return strings.Join(out, ","), true
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// canonicalOrigin checks an allowed origin and returns it in lower case: "null", or a scheme (a letter,
// then letters, digits, '+', '-' or '.'), "://", a host name of letters, digits and '-' in dot-separated
// labels (the first may be "*": one label of any name), and an optional port 1-65535.
func canonicalOrigin(s string) (string, bool) {
	s = strings.ToLower(s)
	if s == "null" {
		return s, true
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" || !('a' <= scheme[0] && scheme[0] <= 'z') {
		return "", false
	}
	for i := 0; i < len(scheme); i++ {
		if c := scheme[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return "", false
		}
	}
	host, port, hasPort := strings.Cut(rest, ":")
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' || port[0] == '+' {
			return "", false
		}
	}
	if host == "" || len(host) > 253 {
		return "", false
	}
	for i, label := range strings.Split(host, ".") {
		if i == 0 && label == "*" && strings.Contains(host, ".") {
			continue
		}
		if label == "" || len(label) > 63 {
			return "", false
		}
		for j := 0; j < len(label); j++ {
			if c := label[j]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return "", false
			}
		}
	}
	return s, true
}

// corsList checks a list annotation of tokens and returns its entries joined by sep; false when it is
// absent or invalid (rejected, with want in the message).
func (t *translator) corsList(key string, valid func(string) bool, sep, want string) (string, bool) {
	raw, ok := t.ing.Annotations[key]
	if !ok {
		return "", false
	}
	v, ok := corsTokens(raw, valid, sep)
	if !ok || v == "" {
		t.fail("metadata.annotations[%s]: %s: want comma-separated %s", key, quoteValue(raw), want)
		return "", false
	}
	return v, true
}

// corsTokens splits a comma-separated list, drops spaces around entries and blank entries, and joins
// the entries by sep; false when an entry is not valid or the value is too long.
func corsTokens(raw string, valid func(string) bool, sep string) (string, bool) {
	if len(raw) > maxCORSValue {
		return "", false
	}
	var out []string
	for entry := range strings.SplitSeq(raw, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if !valid(entry) {
			return "", false
		}
		out = append(out, entry)
	}
	return strings.Join(out, sep), true
}

func isCORSMethod(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return s != ""
}

func isCORSHeader(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return s != ""
}

// appendCORSOptions writes the CORS group's options (ann_cors.go) as
// ,"cors":{"origins":[...],"methods":"...","headers":"...","expose":"...","credentials":bool,"max_age":n}.
func appendCORSOptions(b []byte, o *RouteOptions) []byte {
	c := &o.CORS
	if !o.EnableCORS || c.AllowOrigin == "" {
		return b // no origin is allowed: the router has nothing to do
	}
	b = append(b, `,"cors":{"origins":[`...)
	for i, origin := range strings.Split(c.AllowOrigin, ",") {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, origin)
	}
	b = append(b, `],"methods":`...)
	b = appendJSONString(b, c.AllowMethods)
	b = append(b, `,"headers":`...)
	b = appendJSONString(b, c.AllowHeaders)
	if c.ExposeHeaders != "" {
		b = append(b, `,"expose":`...)
		b = appendJSONString(b, c.ExposeHeaders)
	}
	b = append(b, `,"credentials":`...)
	b = strconv.AppendBool(b, c.AllowCredentials)
	b = append(b, `,"max_age":`...)
	b = strconv.AppendInt(b, int64(c.MaxAge), 10)
	return append(b, '}')
}
