package nginx

import (
	"strconv"
	"strings"
)

// unsupportedAnnotations lists the ingress-nginx annotations that are not supported (yet), with the
// reason and the issue that plans them. Supporting one moves it from here to its group file (ann_*.go).
//
// The names are every annotation in ingress-nginx's annotations documentation, the ones its annotation
// parsers read without documenting them, and retired ones its documentation listed once.
func unsupportedAnnotations() []AnnotationSpec {
	var out []AnnotationSpec
	add := func(template AnnotationSpec, names ...string) {
		for _, n := range names {
			s := template
			s.Name = n
			if s.Origin == "" {
				s.Origin = OriginDocumented
			}
			out = append(out, s)
		}
	}
	undocumented := func(s AnnotationSpec) AnnotationSpec { s.Origin = OriginUndocumented; return s }

	// Access restrictions: refused until supported, because serving the Ingress without them would open
	// what its owner closed.
	const refuseOpen = "On purpose: ingress-nginx applies it; here the Ingress is refused rather than served without the restriction."
	waf := AnnotationSpec{Status: AnnotationRefused, Reason: refusedAccess, RestrictsAccess: true,
		Difference: refuseOpen + " There is no web application firewall (ModSecurity) here, and none is planned. `\"false\"` is accepted."}
	wafSwitch := waf
	wafSwitch.inert = isFalse
	add(wafSwitch, "enable-modsecurity", "enable-owasp-core-rules")
	add(waf, "modsecurity-transaction-id")

	// Snippets: never applied.
	const neverSnippet = "On purpose, for good: raw NGINX configuration from Ingress owners is the injection path this project " +
		"removes (ingress-nginx refused snippets by default since 1.9). Typed annotations and ConfigMap keys replace the common uses: " +
		"[migration.md](migration.md#replacing-snippets) lists them (response headers: `custom-headers`; CORS: `enable-cors`; " +
		"`proxy_*` directives: the `proxy-*` annotations; the ConfigMap's `add-headers`/`proxy-set-headers`/`hide-headers` for every " +
		"Ingress: [configmap.md](configmap.md))."
	snippetAccess := AnnotationSpec{Status: AnnotationRefused, Reason: refusedAccess, RestrictsAccess: true, Difference: neverSnippet}
	add(snippetAccess, "auth-snippet", "modsecurity-snippet")
	add(AnnotationSpec{Status: AnnotationRefused, Reason: refusedSnippet, Difference: neverSnippet},
		"configuration-snippet", "server-snippet", "stream-snippet")

	// Ignored, planned.
	planned := func(issue string) AnnotationSpec {
		return AnnotationSpec{Status: AnnotationIgnored, Planned: issue, Reason: "not supported yet"}
	}
	// Idle connections to the auth service only save connection set-ups: without them every auth request
	// opens its own connection, and who gets in does not change.
	authKeepalive := planned("#16")
	authKeepalive.Reason = "NGINX opens a new connection to the `auth-url` service for every auth request (NGINX's " +
		"`auth_request` cannot use an upstream's idle connections, which ingress-nginx worked around in Lua); who gets in " +
		"is the same"
	add(authKeepalive, "auth-keepalive", "auth-keepalive-requests", "auth-keepalive-share-vars", "auth-keepalive-timeout")

	// Ignored, not planned.
	notPlanned := func(why string) AnnotationSpec { return AnnotationSpec{Status: AnnotationIgnored, Reason: why} }
	add(notPlanned("per-host TLS ciphers are not planned; the ConfigMap's `ssl-ciphers` (#18) will set them for every host"),
		"ssl-ciphers", "ssl-prefer-server-ciphers")
	add(notPlanned("there is no tracing here, and none is planned"), "enable-opentelemetry", "opentelemetry-trust-incoming-span")
	add(undocumented(notPlanned("there is no tracing here, and none is planned")), "opentelemetry-operation-name")
	add(notPlanned("request mirroring is not planned"), "mirror-host", "mirror-request-body", "mirror-target")
	add(notPlanned("HTTP/2 server push is gone from browsers, and ingress-nginx's code no longer reads it either"), "http2-push-preload")
	add(undocumented(notPlanned("FastCGI backends are not supported (#15 refuses `backend-protocol: FCGI`)")),
		"fastcgi-index", "fastcgi-params-configmap")
	add(undocumented(notPlanned("not planned; NGINX's default (absolute redirects) applies")), "relative-redirects")
	add(undocumented(notPlanned("custom-http-errors always intercepts the codes it lists")), "disable-proxy-intercept-errors")

	// Retired by ingress-nginx: it ignores them too.
	retired := func(instead string) AnnotationSpec {
		s := AnnotationSpec{Status: AnnotationIgnored, Origin: OriginRetired, Reason: "ingress-nginx removed it and ignores it too"}
		if instead != "" {
			s.Reason += "; it was replaced by `" + instead + "`"
		}
		return s
	}
	add(retired(""),
		"add-base-url", "base-url-scheme", "enable-influxdb", "enable-opentracing", "global-rate-limit",
		"global-rate-limit-ignored-cidrs", "global-rate-limit-key", "global-rate-limit-window", "influxdb-host",
		"influxdb-measurement", "influxdb-port", "influxdb-server-name", "lua-resty-waf",
		"lua-resty-waf-allow-unknown-content", "lua-resty-waf-allow-unknown-content-types", "lua-resty-waf-debug",
		"lua-resty-waf-disable-multipart-body", "lua-resty-waf-extra-rules",
		"lua-resty-waf-ignore-rulesets", "lua-resty-waf-process-multipart-body", "lua-resty-waf-score", "lua-resty-waf-score-threshold",
		"opentracing-trust-incoming-span", "session-cookie-hash", "upstream-fail-timeout", "upstream-max-fails")
	add(retired("backend-protocol"), "grpc-backend", "secure-backends")
	add(retired("proxy-ssl-secret"), "secure-verify-ca-secret")
	add(retired("mirror-target"), "mirror-uri")
	return out
}

// isFalse reports values that parse as boolean false: a switch set to off asks for nothing.
func isFalse(v string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && !b
}
