package nginx

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// The redirect annotations of ingress-nginx (see RouteOptions): every one is route data.
const (
	AnnotationPermanentRedirect     = IngressNginxPrefix + "permanent-redirect"
	AnnotationPermanentRedirectCode = IngressNginxPrefix + "permanent-redirect-code"
	AnnotationTemporalRedirect      = IngressNginxPrefix + "temporal-redirect"
	AnnotationTemporalRedirectCode  = IngressNginxPrefix + "temporal-redirect-code"
	AnnotationAppRoot               = IngressNginxPrefix + "app-root"
	AnnotationForceSSLRedirect      = IngressNginxPrefix + "force-ssl-redirect"
	AnnotationPreserveTrailingSlash = IngressNginxPrefix + "preserve-trailing-slash"
	AnnotationUsePortInRedirects    = IngressNginxPrefix + "use-port-in-redirects"
)

// maxRedirectTarget bounds a redirect URL or app root: a Location header, not a document.
const maxRedirectTarget = 2048

func init() {
	const (
		boolean = "a boolean: `true` or `false` (as Go's strconv.ParseBool, which ingress-nginx uses too); spaces around it are trimmed"
		invalid = "An invalid value **rejects the Ingress** (its last good version keeps being served); ingress-nginx logged it and used the default."
		target  = "an absolute `http://` or `https://` URL with a host, at most 2048 bytes of printable ASCII (percent-encode anything else)"
		literal = "The URL is sent exactly as written: NGINX variables such as `$request_uri` are **not** expanded (ingress-nginx's documentation " +
			"does not describe them; its template let NGINX expand them), and a value that looks like one gets a Warning. " +
			"Comes before source ranges and the HTTPS redirect, as in ingress-nginx. An invalid URL **rejects the Ingress**; " +
			"ingress-nginx checked only the scheme of `temporal-redirect`."
		codes = "Codes that are no redirect a client follows (300, 304, 305, 306), which ingress-nginx accepted, and codes out of its range, which it replaced " +
			"by the default without a word, **reject the Ingress**."
	)
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			{
				Name: "app-root", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "a path starting with a single `/` (a query may follow), at most 2048 bytes of printable ASCII",
				Default: "none",
				Difference: "A request for `/` that the Ingress's paths serve gets a 302 to the path on the requested host and scheme, as in ingress-nginx. " +
					"ingress-nginx redirected `/` on the whole host (server-wide); here only when `/` routes to this Ingress (a path `/` of it, " +
					"as in ingress-nginx's example), so it never takes `/` from another Ingress. " + invalid,
			},
			{
				Name: "force-ssl-redirect", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: boolean, Default: "`false`",
				Difference: "Plain HTTP to the Ingress's paths gets a 308 (the ConfigMap's `http-redirect-code`) to HTTPS even without a `tls` section (TLS ended before the controller), " +
					"also when `ssl-redirect` is `false`, as in ingress-nginx. The scheme checked is the connection's (`X-Forwarded-Proto` is not trusted). " + invalid,
			},
			{
				Name: "permanent-redirect", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: target, Default: "none",
				Difference: "Every request of the Ingress's paths gets a 301 (or `permanent-redirect-code`) to the URL. " + literal,
			},
			{
				Name: "permanent-redirect-code", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "`301`, `302`, `303`, `307` or `308`", Default: "`301`",
				Difference: "Has an effect only with `permanent-redirect` (a Warning says so otherwise). " + codes,
			},
			{
				Name: "preserve-trailing-slash", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: boolean, Default: "`false`: a redirect to HTTPS drops one trailing `/` of the request URI (`/a/` becomes `/a`, `/` becomes nothing), as in ingress-nginx",
				Difference: invalid,
			},
			{
				Name: "temporal-redirect", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: target, Default: "none",
				Difference: "Every request of the Ingress's paths gets a 302 (or `temporal-redirect-code`) to the URL; it wins over `permanent-redirect`, " +
					"as in ingress-nginx (with a Warning). " + literal,
			},
			{
				Name: "temporal-redirect-code", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "`301`, `302`, `303` or `307`", Default: "`302`",
				Difference: "Has an effect only with `temporal-redirect` (a Warning says so otherwise). " + codes,
			},
			{
				Name: "use-port-in-redirects", Origin: OriginUndocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: boolean, Default: "`false`: the HTTPS port is written only when it is not 443 (`--https-port`, or the port clients use)",
				Difference: "Writes the HTTPS port into the Ingress's redirects to HTTPS, 443 too. ingress-nginx also read it from its ConfigMap, " +
					"which is not here yet (#18); there it also set NGINX's `port_in_redirect`, which has nothing to act on here (redirects are absolute). " + invalid,
			},
		},
		apply: applyRedirects,
	})
}

// applyRedirects reads the redirect annotations into the Ingress's route options. Every invalid value
// rejects the Ingress: guessing would send its clients somewhere its owner did not write.
func applyRedirects(t *translator) {
	a := t.ing.Annotations
	// The codes are checked even when their URL is missing: a typo in one must not wait for the URL.
	temporalCode, temporalOK := t.redirectCode(AnnotationTemporalRedirectCode, 302, 301, 302, 303, 307)
	permanentCode, permanentOK := t.redirectCode(AnnotationPermanentRedirectCode, 301, 301, 302, 303, 307, 308)
	if _, ok := a[AnnotationTemporalRedirect]; ok {
		if url, ok := t.redirectURL(AnnotationTemporalRedirect); ok && temporalOK {
			t.options().RedirectURL, t.options().RedirectCode = url, temporalCode
		}
		if _, both := a[AnnotationPermanentRedirect]; both {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: ignored, because %s is set too and wins, as in ingress-nginx",
				AnnotationPermanentRedirect, AnnotationTemporalRedirect))
		}
	} else if _, ok := a[AnnotationPermanentRedirect]; ok {
		if url, ok := t.redirectURL(AnnotationPermanentRedirect); ok && permanentOK {
			t.options().RedirectURL, t.options().RedirectCode = url, permanentCode
		}
	}
	for _, pair := range [][2]string{{AnnotationPermanentRedirectCode, AnnotationPermanentRedirect}, {AnnotationTemporalRedirectCode, AnnotationTemporalRedirect}} {
		if _, code := a[pair[0]]; code {
			if _, url := a[pair[1]]; !url {
				t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has no effect without %s", pair[0], pair[1]))
			}
		}
	}
	if _, ok := a[AnnotationAppRoot]; ok {
		if root, ok := t.appRoot(); ok {
			t.options().AppRoot = root
		}
	}
	for _, flag := range []struct {
		key string
		set func(o *RouteOptions)
	}{
		{AnnotationForceSSLRedirect, func(o *RouteOptions) { o.ForceSSLRedirect = true }},
		{AnnotationPreserveTrailingSlash, func(o *RouteOptions) { o.PreserveTrailingSlash = true }},
		{AnnotationUsePortInRedirects, func(o *RouteOptions) { o.UsePortInRedirects = true }},
	} {
		if _, ok := a[flag.key]; !ok {
			continue
		}
		if b, ok := t.parseBoolAnnotation(flag.key); ok && b {
			flag.set(t.options())
		}
	}
}

// settingsDefaults applies the ConfigMap's defaults of route data that no annotation of the Ingress
// overrides (the annotation's group runs only when one of its annotations is present): an Ingress with
// force-ssl-redirect "false" keeps plain HTTP whatever the ConfigMap says.
func (t *translator) settingsDefaults() {
	if _, set := t.ing.Annotations[AnnotationForceSSLRedirect]; t.opts.ForceSSLRedirect && !set {
		t.options().ForceSSLRedirect = true
	}
	t.balanceDefaults()
	t.globalAuthDefaults()
	t.customHTTPErrorsDefault()
	t.limitRateDefault()
	t.sourceRangeDefaults()
}

// redirectURL checks the redirect target of annotation key: an absolute http or https URL with a host,
// printable ASCII only (no spaces or control bytes, so it cannot split or extend the Location header).
func (t *translator) redirectURL(key string) (string, bool) {
	raw := t.ing.Annotations[key]
	v := strings.TrimSpace(raw)
	const want = "want an absolute http:// or https:// URL with a host, at most 2048 bytes of printable ASCII"
	if len(v) > maxRedirectTarget || !printableASCII(v) {
		t.fail("metadata.annotations[%s]: %s: %s", key, quoteValue(raw), want)
		return "", false
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		!strings.HasPrefix(strings.ToLower(v), u.Scheme+"://") {
		t.fail("metadata.annotations[%s]: %s: %s", key, quoteValue(raw), want)
		return "", false
	}
	if looksLikeNginxVariable(v) {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf(
			"metadata.annotations[%s]: %s is sent as written: NGINX variables are not expanded in redirect URLs", key, quoteValue(raw)))
	}
	return v, true
}

// redirectCode parses the status code of annotation key, or returns def when it is not set.
func (t *translator) redirectCode(key string, def int, allowed ...int) (int, bool) {
	raw, ok := t.ing.Annotations[key]
	if !ok {
		return def, true
	}
	code, err := strconv.Atoi(strings.TrimSpace(raw))
	for _, c := range allowed {
		if err == nil && code == c {
			return code, true
		}
	}
	names := make([]string, len(allowed))
	for i, c := range allowed {
		names[i] = strconv.Itoa(c)
	}
	t.fail("metadata.annotations[%s]: %s is not a redirect status code (want one of %s)", key, quoteValue(raw), strings.Join(names, ", "))
	return 0, false
}

// appRoot checks the app-root annotation: a path (with an optional query) of printable ASCII, which the
// router appends to the request's scheme and host.
func (t *translator) appRoot() (string, bool) {
	raw := t.ing.Annotations[AnnotationAppRoot]
	v := strings.TrimSpace(raw)
	if !strings.HasPrefix(v, "/") || strings.HasPrefix(v, "//") || len(v) > maxRedirectTarget || !printableASCII(v) || strings.ContainsRune(v, '\\') {
		t.fail("metadata.annotations[%s]: %s: want a path starting with a single /, at most 2048 bytes of printable ASCII", AnnotationAppRoot, quoteValue(raw))
		return "", false
	}
	return v, true
}

// printableASCII reports whether s holds only bytes 0x21-0x7e: no spaces, control bytes or non-ASCII.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// looksLikeNginxVariable reports a "$" followed by a letter, '_' or '{': what NGINX would have taken
// for a variable in ingress-nginx's configuration.
func looksLikeNginxVariable(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if c := s[i+1]; s[i] == '$' && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '{') {
			return true
		}
	}
	return false
}
