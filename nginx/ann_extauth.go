package nginx

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// External authentication (auth-url and its companions): before a request goes upstream, NGINX asks an
// auth service (oauth2-proxy, Authelia, Authentik, ...) with a subrequest that carries the request's
// headers but not its body. 2xx lets the request through, 401 and 403 reach the client (401 as a
// redirect to auth-signin when it is set), anything else, an unreachable service included, is 500.
const (
	AnnotationAuthURL                 = IngressNginxPrefix + "auth-url"
	AnnotationAuthMethod              = IngressNginxPrefix + "auth-method"
	AnnotationAuthSignin              = IngressNginxPrefix + "auth-signin"
	AnnotationAuthSigninRedirectParam = IngressNginxPrefix + "auth-signin-redirect-param"
	AnnotationAuthResponseHeaders     = IngressNginxPrefix + "auth-response-headers"
	AnnotationAuthRequestRedirect     = IngressNginxPrefix + "auth-request-redirect"
	AnnotationAuthAlwaysSetCookie     = IngressNginxPrefix + "auth-always-set-cookie"
	AnnotationAuthProxySetHeaders     = IngressNginxPrefix + "auth-proxy-set-headers"
)

// maxAuthURL bounds the URLs of the group.
const maxAuthURL = 2048

func init() {
	profile := func(name, values, def, diff string) AnnotationSpec {
		return AnnotationSpec{Name: name, Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values: values, Default: def, Difference: diff}
	}
	const needsURL = " Without `auth-url` it is ignored with a Warning."
	const rejects = " An invalid value **rejects the Ingress** (it decides who gets in)."
	registerAnnotationGroup(annotationGroup{
		specs: append([]AnnotationSpec{
			profile("auth-url", "an absolute `http://` or `https://` URL of the auth service: a host name or an IP address "+
				"(IPv6 in brackets), an optional port, and a path and query of URL characters (letters, digits and "+
				"`-._~/?&=%+,:@!*`); at most 2048 bytes",
				"none: no external authentication",
				"A **profile setting**: each distinct auth configuration is a named location with `auth_request` and an "+
					"internal location that calls the service, so the first Ingress with a new one reloads NGINX once. "+
					"The service gets the request's headers, no body, and `X-Original-URL`, `X-Original-Method`, "+
					"`X-Auth-Request-Redirect`, `X-Sent-From`, `X-Real-IP`, `X-Forwarded-For` (the client's address), "+
					"`X-Request-ID` and the URL's host as `Host`, as ingress-nginx sends them. A 2xx answer lets the request "+
					"through; 401 and 403 reach the client (401 with the service's `WWW-Authenticate`); any other answer, and "+
					"a service that cannot be reached, give 500 and never reach the backend. The host may be `$host` (or "+
					"`$http_host`, `$best_http_host`), as oauth2-proxy's documentation writes it (`https://$host/oauth2/auth`): "+
					"the auth request is then routed by this controller's own routes for the request's host and the URL's "+
					"path (the Ingress that serves `/oauth2`), with `Host` the request's host, as it would be when it came "+
					"back through NGINX; that route must send to a Service over HTTP without a profile of its own, else the "+
					"answer is 500. **Differences, on purpose:** "+
					"other NGINX variables are refused, as are quotes, spaces, `;`, braces, `#` and user info "+
					"(ingress-nginx accepted any variable, the way into its configuration-injection CVEs); a host name is "+
					"resolved when NGINX loads its configuration (no `resolver`), so an Ingress whose auth host does not "+
					"resolve is taken out of service by the reload's check rather than failing at request time; "+
					"an auth service in the cluster is best named by its Service's full DNS name. "+
					"The ConfigMap's `global-auth-*` keys give the same auth to every Ingress without an `auth-url` of its own "+
					"(see `enable-global-auth`); `enable-auth-access-log` does not exist yet."+rejects),
			profile("auth-method", "`GET`, `HEAD`, `POST`, `PUT`, `PATCH`, `DELETE`, `CONNECT`, `OPTIONS` or `TRACE`",
				"the request's own method",
				"As ingress-nginx: with a method set, the auth request also carries `X-Original-URI` and `X-Scheme`."+needsURL+rejects),
			profile("auth-signin", "an absolute `http://` or `https://` URL, as for `auth-url`, which may also name the variables "+
				"`$host`, `$http_host`, `$best_http_host`, `$scheme`, `$pass_access_scheme`, `$request_uri` and `$escaped_request_uri` "+
				"(also as `${name}`)",
				"none: a 401 of the auth service reaches the client",
				"A 401 of the auth service becomes a 302 to this URL with the redirect parameter (`rd`, see "+
					"`auth-signin-redirect-param`) set to `$scheme://$host$escaped_request_uri`, unless the URL's query has "+
					"that parameter already (`https://$host/oauth2/start?rd=$escaped_request_uri`, as oauth2-proxy's documentation "+
					"writes it, works as in ingress-nginx); the `Set-Cookie` of the auth answer is sent with it, as ingress-nginx does. "+
					"**Difference, on purpose:** any other NGINX variable is refused (ingress-nginx accepted every variable); the "+
					"URL's own text is quoted into nginx.conf apart from the variables, so it is never read for variables or syntax."+
					needsURL+rejects),
			profile("auth-signin-redirect-param", "a query parameter name: letters, digits, `-`, `_` and `.`",
				"`rd`", "As ingress-nginx."+needsURL+rejects),
			profile("auth-response-headers", "a comma-separated list of header names (letters, digits, `-` and `_`)",
				"none",
				"The headers of the auth service's 2xx answer with these names are set on the request to the backend; a "+
					"header the client sent with such a name is never passed on (the backend can trust it; for a name with `_`, "+
					"the client's spelling with `-` is replaced too), a header the answer lacks is not sent."+needsURL+rejects),
			profile("auth-request-redirect", "a URL or path of URL characters, as for `auth-url`",
				"the request's URI",
				"Sent to the auth service as `X-Auth-Request-Redirect`, as ingress-nginx does."+needsURL+rejects),
			profile("auth-always-set-cookie", "`true` or `false`",
				"`false`: the auth answer's `Set-Cookie` is sent with successful answers only",
				"As ingress-nginx: `true` sends the auth service's `Set-Cookie` with every answer, errors included. "+
					"Like ingress-nginx, only the first `Set-Cookie` of the auth answer is sent."+needsURL+rejects),
			profile("auth-proxy-set-headers", "`namespace/name` of a ConfigMap in the Ingress's own namespace (a bare `name` means "+
				"that namespace too); each entry of its `data` is a header of the auth request: the key its name (letters, digits, "+
				"`-` and `_`, as ingress-nginx accepts, at most 128 bytes), the value its value (printable ASCII and tabs, at most "+
				"4096 bytes, no `$`); at most 64 entries and 16 KiB",
				"none",
				"The headers are set on the request to the auth service (an empty value removes the client's header of that "+
					"name), as ingress-nginx's `proxy_set_header` lines in the auth location; the values are quoted into nginx.conf, so "+
					"a change of the ConfigMap is a new profile (one reload). A ConfigMap in **another namespace is refused** (as "+
					"ingress-nginx without `--allow-cross-namespace-resources`); a missing one, one larger than 16 KiB, a `binaryData` "+
					"entry, a key that is not a header name or a value that is not a header value **rejects the Ingress** with a "+
					"Warning (its last good version keeps being served), as ingress-nginx denied the location. **Differences, on "+
					"purpose:** a value with `$` is refused: ingress-nginx let NGINX expand variables in the values, the way of its "+
					"configuration injections; the headers this controller sets on the auth request itself (`Host`, `X-Original-URL`, "+
					"`X-Original-Method`, `X-Original-URI`, `X-Scheme`, `X-Auth-Request-Redirect`, `X-Sent-From`, `X-Real-IP`, "+
					"`X-Request-ID`, `X-Forwarded-*`) and those that frame the message (`Content-Length`, `Transfer-Encoding`, "+
					"`Connection`, ...) are refused (ingress-nginx sent such a header twice)."+needsURL),
		}, authCacheSpecs()...),
		apply: applyExtAuth,
	})
	registerProfileDirectives(extAuthDirectives)
}

var (
	authMethods       = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE"}
	authHeaderName    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	authRedirectParam = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	// selfAuthURL is an auth-url on the request's own host: the scheme, the variable and the rest.
	selfAuthURL = regexp.MustCompile(`^(https?)://\$(host|http_host|best_http_host|\{host\}|\{http_host\}|\{best_http_host\})([/?].*)?$`)
	// authHostLabel is one label of a DNS name.
	authHostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// applyExtAuth reads the external auth annotations into the Ingress's profile.
func applyExtAuth(t *translator) {
	a := t.ing.Annotations
	rawURL, ok := a[AnnotationAuthURL]
	if !ok {
		for _, key := range []string{AnnotationAuthMethod, AnnotationAuthSignin, AnnotationAuthSigninRedirectParam,
			AnnotationAuthResponseHeaders, AnnotationAuthRequestRedirect, AnnotationAuthAlwaysSetCookie, AnnotationAuthProxySetHeaders,
			AnnotationAuthCacheKey, AnnotationAuthCacheDuration} {
			if _, set := a[key]; set {
				t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: applies only with %s; ignored", key, AnnotationAuthURL))
			}
		}
		return
	}
	p := &t.profile
	// The $host form (oauth2-proxy's documented one) is the auth service on the request's own host: its
	// path is routed by the router's own table, as the request would be when it came back through NGINX.
	u, ok := parseAuthURL(strings.TrimSpace(rawURL))
	if !ok {
		t.fail("metadata.annotations[%s]: %s: %s", AnnotationAuthURL, quoteValue(rawURL), authURLWant)
		return
	}
	p.AuthURL = u
	if raw, set := a[AnnotationAuthMethod]; set {
		m := strings.TrimSpace(raw)
		if !slices.Contains(authMethods, m) {
			t.fail("metadata.annotations[%s]: %s is not a method (want one of %s)", AnnotationAuthMethod, quoteValue(raw), strings.Join(authMethods, ", "))
		}
		p.AuthMethod = m
	}
	if raw, set := a[AnnotationAuthSignin]; set {
		v := strings.TrimSpace(raw)
		checked, ok := signinStructure(v)
		if !ok {
			t.fail("metadata.annotations[%s]: %s names an NGINX variable other than %s", AnnotationAuthSignin, quoteValue(raw), signinVariableList())
			return
		}
		if _, ok := t.checkAuthURL(AnnotationAuthSignin, raw, checked); ok {
			p.AuthSignin = v
			param := "rd"
			if rawParam, set := a[AnnotationAuthSigninRedirectParam]; set {
				param = strings.TrimSpace(rawParam)
				if !authRedirectParam.MatchString(param) {
					t.fail("metadata.annotations[%s]: %s is not a query parameter name (letters, digits, -, _ and .)", AnnotationAuthSigninRedirectParam, quoteValue(rawParam))
				}
			}
			// A URL that names the parameter already is used as it is, as ingress-nginx does.
			if signinNeedsParam(checked, param) {
				p.AuthSigninRedirectParam = param
			}
		}
	} else if _, set := a[AnnotationAuthSigninRedirectParam]; set {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: applies only with %s; ignored", AnnotationAuthSigninRedirectParam, AnnotationAuthSignin))
	}
	if raw, set := a[AnnotationAuthResponseHeaders]; set {
		names, why := parseAuthResponseHeaders(raw)
		if why != "" {
			t.fail("metadata.annotations[%s]: %s", AnnotationAuthResponseHeaders, why)
			return
		}
		p.AuthResponseHeaders = names
	}
	if raw, set := a[AnnotationAuthRequestRedirect]; set {
		v := strings.TrimSpace(raw)
		if v != "" {
			if !validAuthRequestRedirect(v) {
				t.fail("metadata.annotations[%s]: %s: want a URL or path of URL characters (letters, digits and -._~/?&=%%+,:@!*), at most 2048 bytes",
					AnnotationAuthRequestRedirect, quoteValue(raw))
			}
			p.AuthRequestRedirect = v
		}
	}
	if _, set := a[AnnotationAuthAlwaysSetCookie]; set {
		if b, ok := t.parseBoolAnnotation(AnnotationAuthAlwaysSetCookie); ok {
			p.AuthAlwaysSetCookie = b
		}
	}
	if _, set := a[AnnotationAuthProxySetHeaders]; set {
		p.AuthProxySetHeaders = t.authProxySetHeaders()
	}
	t.applyAuthCache(p)
}

// signinStructure returns a signin URL with every variable standing for "x", to check its structure;
// ok is false when it names a variable that is not one of signinVariables.
func signinStructure(v string) (string, bool) {
	parts, ok := splitSigninURL(v)
	if !ok {
		return "", false
	}
	var checked strings.Builder
	for _, part := range parts {
		if part.variable {
			checked.WriteString("x")
		} else {
			checked.WriteString(part.text)
		}
	}
	return checked.String(), true
}

// signinNeedsParam reports whether the signin URL (its structure, see signinStructure) lacks the
// redirect parameter, which is then appended; a URL that names it already is used as it is, as
// ingress-nginx does.
func signinNeedsParam(checked, param string) bool {
	pu, err := url.Parse(checked)
	return err == nil && pu.Query().Get(param) == ""
}

// parseAuthResponseHeaders returns the header names of an auth-response-headers value, comma-separated
// and without duplicates, or why it is not accepted.
func parseAuthResponseHeaders(raw string) (string, string) {
	var names []string
	for f := range strings.SplitSeq(raw, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !authHeaderName.MatchString(f) {
			return "", fmt.Sprintf("%s is not a header name (letters, digits, - and _)", quoteValue(f))
		}
		if !containsFold(names, f) {
			names = append(names, f)
		}
	}
	if len(names) > 32 {
		return "", fmt.Sprintf("lists %d headers; at most 32", len(names))
	}
	return strings.Join(names, ","), ""
}

// validAuthRequestRedirect reports whether v (trimmed, not empty) may be sent as X-Auth-Request-Redirect.
func validAuthRequestRedirect(v string) bool {
	return authURLChars(v) && len(v) <= maxAuthURL
}

// Bounds of auth-proxy-set-headers.
const maxAuthProxySetHeaders = 64

// authRequestOwnHeaders are the headers that the auth location sets itself (auxiliaryLocations) and
// those that frame the message: auth-proxy-set-headers may not set them (lower case).
var authRequestOwnHeaders = []string{
	"host", "x-original-url", "x-original-method", "x-original-uri", "x-scheme", "x-auth-request-redirect", "x-sent-from",
	"x-real-ip", "x-request-id", "x-forwarded-for", "x-forwarded-host", "x-forwarded-uri", "x-forwarded-method",
	"x-forwarded-proto", "x-forwarded-port", "content-length", "transfer-encoding", "connection", "keep-alive",
	"proxy-connection", "te", "trailer", "upgrade", "expect",
}

// authProxySetHeaders reads the ConfigMap of auth-proxy-set-headers into "Name:value" lines, sorted by
// name and joined by "\n", or rejects the Ingress.
func (t *translator) authProxySetHeaders() string {
	key, ok := t.ownObjectKey(AnnotationAuthProxySetHeaders, "ConfigMap", "default/auth-headers")
	if !ok {
		return ""
	}
	ref := ObjectRef{Kind: KindConfigMap, Key: key}
	cm, ok := t.lk.configMap(key)
	if !ok {
		t.recordMissing(ref)
		t.fail("metadata.annotations[%s]: configmap %s does not exist; the Ingress is not served until it does", AnnotationAuthProxySetHeaders, key)
		return ""
	}
	t.recordObject(ref, cm.ResourceVersion)
	fail := func(format string, args ...any) string {
		t.fail("metadata.annotations[%s]: configmap %s: %s; the Ingress is not served until it is fixed", AnnotationAuthProxySetHeaders, key, fmt.Sprintf(format, args...))
		return ""
	}
	if size, dropped := cm.Annotations[ConfigMapDataDroppedAnnotation]; dropped {
		return fail("its data (%s bytes) is larger than the %d bytes accepted", quoteValue(size), MaxConfigMapData)
	}
	if len(cm.Data) > maxAuthProxySetHeaders {
		return fail("%d entries, more than the %d accepted", len(cm.Data), maxAuthProxySetHeaders)
	}
	if len(cm.BinaryData) > 0 {
		return fail("binaryData cannot be a header value")
	}
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(cm.Data)) {
		value := strings.Trim(cm.Data[name], " \t")
		switch {
		case !authHeaderName.MatchString(name):
			return fail("key %s is not a header name (letters, digits, - and _, at most 128 bytes)", quoteValue(name))
		case slices.Contains(authRequestOwnHeaders, strings.ToLower(name)):
			return fail("header %s is set by the controller or frames the request, and cannot be set", name)
		case strings.Contains(value, "$"):
			return fail("the value of %s has a '$': NGINX variables are not expanded here, and no value with one is sent", name)
		case len(value) > maxHeaderValue || strings.ContainsFunc(value, func(r rune) bool { return r != '\t' && (r < 0x20 || r > 0x7e) }):
			return fail("the value of %s is not a header value (printable ASCII and tabs, at most %d bytes)", name, maxHeaderValue)
		}
		lines = append(lines, name+":"+value)
	}
	return strings.Join(lines, "\n")
}

// authProxySetHeaderLines returns AuthProxySetHeaders as name and value pairs.
func (p ProfileSettings) authProxySetHeaderLines() [][2]string {
	if p.AuthProxySetHeaders == "" {
		return nil
	}
	var out [][2]string
	for line := range strings.SplitSeq(p.AuthProxySetHeaders, "\n") {
		name, value, _ := strings.Cut(line, ":")
		out = append(out, [2]string{name, value})
	}
	return out
}

// containsFold reports whether list holds s, ignoring case (header names).
func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// authURLChars reports whether s holds only URL characters that are literal in nginx.conf: no '$'
// (variables), quotes, backslashes, spaces, ';', braces, '#', control bytes or non-ASCII; every '%' starts
// an escape.
func authURLChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~/?&=+,:@!*[]", c) >= 0:
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// checkAuthURL checks v, the value of annotation key (raw, for the message), as authURL does.
func (t *translator) checkAuthURL(key, raw, v string) (string, bool) {
	u, ok := normalizeAuthURL(v)
	if !ok {
		t.fail("metadata.annotations[%s]: %s: %s", key, quoteValue(raw), authURLWant)
	}
	return u, ok
}

// authURLWant says what an auth URL may be.
const authURLWant = "want an absolute http:// or https:// URL with a host name or IP address, an optional port and a path and query of " +
	"letters, digits and -._~/?&=%+,:@!* (no NGINX variables, spaces, quotes, ';', braces or '#'), at most 2048 bytes"

// parseAuthURL checks an auth-url value (trimmed) as applyExtAuth does, the $host form included, and
// returns the URL the profile gets.
func parseAuthURL(v string) (string, bool) {
	if m := selfAuthURL.FindStringSubmatch(v); m != nil {
		if _, ok := normalizeAuthURL(m[1] + "://x" + m[3]); !ok {
			return "", false
		}
		if m[3] == "" || m[3][0] == '?' {
			return m[1] + "://$host/" + m[3], true
		}
		return m[1] + "://$host" + m[3], true
	}
	return normalizeAuthURL(v)
}

// normalizeAuthURL checks v, an absolute URL without variables, and returns it with "/" as the path
// when it has none.
func normalizeAuthURL(v string) (string, bool) {
	if v == "" || len(v) > maxAuthURL || !authURLChars(v) {
		return "", false
	}
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return "", false
	}
	u, err := url.Parse(v)
	if err != nil || u.User != nil || u.Opaque != "" || u.Fragment != "" || strings.Contains(rest, "@") {
		return "", false
	}
	host := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() || a.Zone() != "" {
			return "", false
		}
	} else if _, err := netip.ParseAddr(host); err != nil && !validAuthHostName(strings.ToLower(host)) {
		return "", false
	}
	if port := u.Port(); port != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || len(port) > 5 {
			return "", false
		}
	}
	if strings.ContainsAny(u.Host, "[]") && !strings.HasPrefix(u.Host, "[") || strings.ContainsAny(u.RawQuery, "[]") ||
		strings.ContainsAny(u.EscapedPath(), "[]") {
		return "", false
	}
	// The path and query as written, with "/" for a missing path ("http://host?x" too).
	i := strings.IndexAny(rest, "/?")
	if i < 0 {
		return scheme + "://" + rest + "/", true
	}
	if rest[i] == '?' {
		return scheme + "://" + rest[:i] + "/" + rest[i:], true
	}
	return v, true
}

// validAuthHostName reports whether h is a DNS name: lower-case labels of letters, digits and '-'.
func validAuthHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for l := range strings.SplitSeq(strings.TrimSuffix(h, "."), ".") {
		if !authHostLabel.MatchString(l) {
			return false
		}
	}
	return true
}

// authLocation is the URI of the internal location that calls p's auth service, empty without auth-url.
func (p ProfileSettings) authLocation() string {
	if p.AuthURL == "" {
		return ""
	}
	return "/_ingress_reactor_auth_" + strings.TrimPrefix(p.Name(), "ingress_reactor_")
}

// signinLocation is the named location that redirects a 401 of p's auth service to auth-signin.
func (p ProfileSettings) signinLocation() string {
	if p.AuthURL == "" || p.AuthSignin == "" {
		return ""
	}
	return "@" + p.Name() + "_signin"
}

// authResponseHeaderNames returns AuthResponseHeaders as a list.
func (p ProfileSettings) authResponseHeaderNames() []string {
	if p.AuthResponseHeaders == "" {
		return nil
	}
	return strings.Split(p.AuthResponseHeaders, ",")
}

// mustQuote quotes a value that the group's parser validated; a value that cannot be quoted (which the
// parser makes impossible) becomes one that fails "nginx -t", so the profile is quarantined rather than
// served with something else.
func quoteValidated(s string) string {
	q, err := Quote(s)
	if err != nil {
		return "\"\" invalid"
	}
	return q
}

// extAuthDirectives sends the requests of a profile with auth-url through auth_request.
func extAuthDirectives(p ProfileSettings, out []string) []string {
	loc := p.authLocation()
	if loc == "" {
		return out
	}
	out = append(out,
		"auth_request "+loc,
		"auth_request_set $ingress_reactor_auth_cookie $upstream_http_set_cookie")
	if p.AuthAlwaysSetCookie {
		out = append(out, "add_header Set-Cookie $ingress_reactor_auth_cookie always")
	} else {
		out = append(out, "add_header Set-Cookie $ingress_reactor_auth_cookie")
	}
	set := "proxy_set_header"
	if p.usesGRPC() {
		set = "grpc_set_header"
	}
	names := p.authResponseHeaderNames()
	for i, h := range names {
		v := "$ingress_reactor_auth_header_" + strconv.Itoa(i)
		out = append(out,
			"auth_request_set "+v+" $upstream_http_"+strings.ReplaceAll(strings.ToLower(h), "-", "_"),
			set+" "+quoteValidated(h)+" "+v)
		// Many backends read X_User and X-User as one header: a client's X-User must not stand in for
		// the auth answer's X_User.
		if dashed := strings.ReplaceAll(h, "_", "-"); dashed != h && !containsFold(names, dashed) {
			out = append(out, set+" "+quoteValidated(dashed)+" "+v)
		}
	}
	if s := p.signinLocation(); s != "" {
		out = append(out, "error_page 401 = "+s)
	}
	return out
}

// authSetsUpstreamHeaders reports whether p's named location sets request headers of its own
// (auth-response-headers), so that it must repeat the http block's proxy_set_header lines, which NGINX
// no longer inherits then.
func (p ProfileSettings) authSetsUpstreamHeaders() bool {
	return p.AuthURL != "" && p.AuthResponseHeaders != "" && !p.usesGRPC()
}

// auxiliaryLocations returns the locations beside p's named location that its settings need: the
// internal location that calls the auth service and the one that redirects to auth-signin.
func (p ProfileSettings) auxiliaryLocations() []auxiliaryLocation {
	loc := p.authLocation()
	if loc == "" {
		return nil
	}
	auth := []string{
		"internal",
		"proxy_pass_request_body off",
		`proxy_set_header Content-Length ""`,
		`proxy_set_header Transfer-Encoding ""`,
		"proxy_set_header X-Request-ID $ingress_reactor_request_id",
	}
	if p.AuthMethod != "" {
		auth = append(auth,
			"proxy_method "+p.AuthMethod,
			"proxy_set_header X-Original-URI $request_uri",
			"proxy_set_header X-Scheme $scheme")
	}
	redirect := "$request_uri"
	if p.AuthRequestRedirect != "" {
		redirect = quoteValidated(p.AuthRequestRedirect)
	}
	self := selfAuthURL.FindStringSubmatch(p.AuthURL)
	host := "$host"
	if self == nil {
		host = ""
		if u, err := url.Parse(p.AuthURL); err == nil {
			host = quoteValidated(u.Hostname())
		}
	}
	auth = append(auth,
		"proxy_set_header Host "+host,
		// The host the request was routed by ($host): a request in absolute form ("GET http://a/ HTTP/1.1")
		// is routed by its request line whatever its Host header says, and an auth service that decides
		// per domain (Authelia) must judge the host served, not the one the client wrote in Host. The Host
		// header is kept (its port) only when it names that host.
		authOriginalHostLua,
		"proxy_set_header X-Original-URL $scheme://$ingress_reactor_auth_host$request_uri",
		// Forward-auth services also read these; the client's own must not reach them.
		"proxy_set_header X-Forwarded-Host $ingress_reactor_auth_host",
		`proxy_set_header X-Forwarded-Uri ""`,
		`proxy_set_header X-Forwarded-Method ""`,
		"proxy_set_header X-Original-Method $request_method",
		`proxy_set_header X-Sent-From "nginx-ingress-controller"`,
		"proxy_set_header X-Real-IP $remote_addr",
		"proxy_set_header X-Forwarded-For $remote_addr",
		"proxy_set_header X-Auth-Request-Redirect "+redirect,
		"proxy_intercept_errors off")
	for _, h := range p.authProxySetHeaderLines() {
		auth = append(auth, "proxy_set_header "+quoteValidated(h[0])+" "+quoteValidated(h[1]))
	}
	auth = append(auth, p.authCacheDirectives()...)
	if self != nil {
		// The request's own host: the router picks the route of the URL's path in its table and the
		// balancer its endpoint, as for the request itself; the backend sees the URL's scheme.
		auth = append(auth,
			"proxy_set_header X-Forwarded-Proto "+self[1],
			"set $ingress_reactor_auth_uri "+quoteValidated(self[3]),
			`set $ingress_reactor_auth_upstream ""`,
			// The one-line form: the template ends each directive with ";", which a block cannot take.
			`rewrite_by_lua 'require("ingress_reactor.router").route_auth()'`,
			"proxy_pass http://upstream_balancer")
	} else {
		auth = append(auth,
			// satisfy any: the router let the request in already, the service is not asked.
			`rewrite_by_lua 'require("ingress_reactor.router").auth_satisfied()'`,
			`proxy_set_header X-Forwarded-Proto ""`,
			"proxy_ssl_server_name on",
			"proxy_pass "+quoteValidated(p.AuthURL))
	}
	out := []auxiliaryLocation{{Name: "= " + loc, Directives: auth}}
	if s := p.signinLocation(); s != "" {
		out = append(out, auxiliaryLocation{Name: s, Directives: p.signinDirectives()})
	}
	return out
}

// authOriginalHostLua sets $ingress_reactor_auth_host to the request's Host header when it names the host
// the request was routed by ($host, lower case), with its port, and to $host otherwise.
const authOriginalHostLua = `set_by_lua $ingress_reactor_auth_host "local h, hh = ngx.var.host or '', ngx.var.http_host ` +
	`if hh then local l = hh:lower() if l == h or (l:sub(1, #h + 1) == h .. ':' and l:sub(#h + 2):match('^[0-9]+$')) then return hh end end ` +
	`return h"`

// auxiliaryLocation is a location that a profile's settings need beside its named location.
type auxiliaryLocation struct {
	// Name is what follows "location": "= /uri" or "@name", generated, never user text.
	Name string
	// Directives are its directives, each without its ";", every value validated and quoted.
	Directives []string
}

// signinVariables are the NGINX variables that auth-signin may name, as ingress-nginx's users write them
// (oauth2-proxy's documentation has https://$host/oauth2/start?rd=$escaped_request_uri), and the
// variable of nginx.conf that each becomes. Their values are the request's, which NGINX has parsed (no
// line breaks), and they only ever go into the Location of the redirect.
var signinVariables = map[string]string{
	"host": "host", "http_host": "http_host", "best_http_host": "ingress_reactor_pass_host",
	"scheme": "scheme", "pass_access_scheme": "ingress_reactor_pass_scheme",
	"request_uri": "request_uri", "escaped_request_uri": "ingress_reactor_escaped_request_uri",
}

// signinVariableList names signinVariables for messages and docs.
func signinVariableList() string {
	return "$host, $http_host, $best_http_host, $scheme, $pass_access_scheme, $request_uri and $escaped_request_uri"
}

// signinPart is literal text of a signin URL, or (variable) the name of one of signinVariables.
type signinPart struct {
	text     string
	variable bool
}

// splitSigninURL splits s at its variables ("$name" or "${name}"); ok is false for a '$' that does not
// start one of signinVariables.
func splitSigninURL(s string) (parts []signinPart, ok bool) {
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			if s != "" {
				parts = append(parts, signinPart{text: s})
			}
			return parts, true
		}
		if i > 0 {
			parts = append(parts, signinPart{text: s[:i]})
		}
		s = s[i+1:]
		var name string
		if strings.HasPrefix(s, "{") {
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return nil, false
			}
			name, s = s[1:end], s[end+1:]
		} else {
			n := 0
			for n < len(s) && (s[n] == '_' || 'a' <= s[n] && s[n] <= 'z' || 'A' <= s[n] && s[n] <= 'Z' || '0' <= s[n] && s[n] <= '9') {
				n++
			}
			name, s = s[:n], s[n:]
		}
		if _, known := signinVariables[name]; !known {
			return nil, false
		}
		parts = append(parts, signinPart{text: name, variable: true})
	}
}

// signinDirectives redirects to auth-signin with the auth answer's Set-Cookie: the URL's literal parts
// are quoted into variables of their own, so that no user text is ever read for variables.
func (p ProfileSettings) signinDirectives() []string {
	target := p.AuthSignin
	if p.AuthSigninRedirectParam != "" {
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + p.AuthSigninRedirectParam + "=$pass_access_scheme://$best_http_host$escaped_request_uri"
	}
	out := []string{
		"add_header Set-Cookie $ingress_reactor_auth_cookie",
		`set_by_lua $ingress_reactor_escaped_request_uri "return ngx.escape_uri(ngx.var.request_uri)"`,
	}
	parts, ok := splitSigninURL(target)
	if !ok {
		return append(out, `return 302 "" invalid`) // the parser made this impossible; nginx -t quarantines it
	}
	var location strings.Builder
	for i, part := range parts {
		if part.variable {
			location.WriteString("${" + signinVariables[part.text] + "}")
			continue
		}
		v := "ingress_reactor_signin_" + strconv.Itoa(i)
		out = append(out, "set $"+v+" "+quoteValidated(part.text))
		location.WriteString("${" + v + "}")
	}
	return append(out, "return 302 "+location.String())
}
