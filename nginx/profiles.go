package nginx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Profiles are what NGINX can only do with directives. A route data setting (RouteOptions) travels in
// the routes push and changes without a reload; a profile setting is rendered into nginx.conf as a
// named location per distinct combination (ProfileSettings), which the Lua router enters for the routes
// that use it (ngx.exec). nginx.conf therefore grows with the number of distinct combinations, not with
// the Ingresses: a change that needs a new combination reloads NGINX once, a change to one that exists
// does not. The reloader holds back the routes that name a combination until a configuration with it
// is live.

// ProfileSettings is one combination of profile settings. It is comparable; the zero value is the
// default location's, which needs no profile. Translations and locations hold a *ProfileSettings that
// is nil for the zero value, shared by all the locations of an Ingress (a model has one per path of
// every Ingress, and nearly all of them have none): compare the values, never the pointers.
//
// Adding a setting: a field here (comparable, and valid by construction: the annotation's parser checks
// it, so rendering never fails), its parser in the group's ann_*.go file (Kind: KindProfile), and its
// directives through registerProfileDirectives in the same file.
type ProfileSettings struct {
	// CustomHTTPErrors are the upstream status codes that the default backend answers instead
	// (custom-http-errors), ascending and comma-separated ("404,503"); empty for none.
	CustomHTTPErrors string
	// BackendProtocol is how NGINX talks to the upstream (backend-protocol): "HTTPS", "AUTO_HTTP", "GRPC",
	// "GRPCS" or "H2C"; empty for HTTP.
	BackendProtocol string

	// Backend TLS (proxy-ssl-*, ann_proxyssl.go), set only with HTTPS or GRPCS and a proxy-ssl-secret.
	// ProxySSLFiles is the stem of the Secret's files in BackendTLSDir (BackendTLSFiles.Stem), which
	// hold a client certificate (ProxySSLClientCert) and CA certificates (ProxySSLCA).
	ProxySSLFiles      string
	ProxySSLClientCert bool
	ProxySSLCA         bool
	// ProxySSLVerify verifies the backend's certificate against the CA, to ProxySSLVerifyDepth (set
	// only with ProxySSLVerify).
	ProxySSLVerify      bool
	ProxySSLVerifyDepth int
	// ProxySSLName is the name verified and sent in SNI; empty for NGINX's default.
	ProxySSLName string
	// ProxySSLServerName sends SNI.
	ProxySSLServerName bool
	// ProxySSLProtocols (sorted, space-separated) and ProxySSLCiphers are empty for NGINX's defaults.
	ProxySSLProtocols string
	ProxySSLCiphers   string
	// ClientMaxBodySize is the largest request body in bytes (proxy-body-size), in decimal, "0" for no
	// limit; empty for the default. The router checks a Content-Length against it too (appendBodyLimit).
	ClientMaxBodySize string
	// ClientBodyBufferSize is the size in bytes of the buffer that holds a request body in memory
	// (client-body-buffer-size), in decimal; empty for NGINX's default.
	ClientBodyBufferSize string
	// The proxy buffering group (ann_proxybuffers.go), each empty for the default of every location:
	// ProxyBuffering and ProxyRequestBuffering are "on" or "off"; ProxyBufferSize, ProxyBusyBuffersSize
	// and ProxyMaxTempFileSize are bytes in decimal; ProxyBuffersNumber a number; ProxyHTTPVersion "1.0";
	// ProxyNextUpstream NGINX's conditions, space-separated; ProxyNextUpstreamTimeout "<n>ms".
	ProxyBuffering, ProxyRequestBuffering                     string
	ProxyBufferSize, ProxyBuffersNumber, ProxyBusyBuffersSize string
	ProxyMaxTempFileSize, ProxyHTTPVersion                    string
	ProxyNextUpstream, ProxyNextUpstreamTimeout               string
	// The proxy rewrite group (ann_proxyrewrite.go), each the quoted arguments of its directive, empty
	// for none: proxy_cookie_domain, proxy_cookie_path and proxy_redirect.
	ProxyCookieDomain, ProxyCookiePath, ProxyRedirect string
	// External auth (ann_extauth.go), all empty without auth-url. AuthURL is the auth service's URL,
	// validated (no NGINX variables) and with a path; AuthMethod the auth request's method, empty for the
	// request's own; AuthSignin the URL a 401 redirects to, with AuthSigninRedirectParam the query
	// parameter that gets the request's URL (empty when the URL has it already); AuthResponseHeaders the
	// comma-separated names of the auth answer's headers set on the upstream request; AuthRequestRedirect
	// the X-Auth-Request-Redirect sent, empty for the request's URI; AuthAlwaysSetCookie sends the auth
	// answer's Set-Cookie with every answer.
	AuthURL, AuthMethod, AuthSignin, AuthSigninRedirectParam string
	AuthResponseHeaders, AuthRequestRedirect                 string
	AuthAlwaysSetCookie                                      bool
	// AuthProxySetHeaders are the headers set on the auth request (auth-proxy-set-headers): validated
	// "Name:value" lines, sorted by name, joined by "\n"; empty for none.
	AuthProxySetHeaders string
	// AuthCacheKey, when set, caches the auth service's answers under this key (auth-cache-key): validated
	// variables, each braced ("${remote_user}${http_authorization}"), and the characters A-Z a-z 0-9 - _;
	// AuthCacheDuration are the proxy_cache_valid entries, comma-separated ("200 202 401 5m").
	AuthCacheKey, AuthCacheDuration string
}

// restrictsAccess reports whether p decides who gets in (external auth), so that a route must never be
// served without it; nil (no profile) does not.
func (p *ProfileSettings) restrictsAccess() bool { return p != nil && p.AuthURL != "" }

// IsZero reports whether p is the default (no profile).
func (p ProfileSettings) IsZero() bool { return p == ProfileSettings{} }

// Name is the named location of p: "ingress_reactor_p" and 16 hex digits of a hash of the settings, so
// equal settings always get the same name and nginx.conf does not change when Ingresses come and go.
func (p ProfileSettings) Name() string {
	// %#v writes every field with its name, in declaration order: distinct settings, distinct text.
	sum := sha256.Sum256(fmt.Appendf(nil, "%#v", p))
	return "ingress_reactor_p" + hex.EncodeToString(sum[:8])
}

// profileDirectiveFuncs write the directives of the profile setting groups, in registration order
// (the order of the ann_*.go files' init functions).
var profileDirectiveFuncs []func(p ProfileSettings, out []string) []string

// registerProfileDirectives adds a group's directives to every profile's named location: f appends the
// directives that p's settings need to out (each without its ";", as NGINX reads it, every value
// validated by the group's parser) and returns it. Called from init functions.
func registerProfileDirectives(f func(p ProfileSettings, out []string) []string) {
	profileDirectiveFuncs = append(profileDirectiveFuncs, f)
}

// appendDirective appends the directive "name value" to out when value is set (the profile settings'
// empty value is the default of every location).
func appendDirective(out []string, name, value string) []string {
	if value == "" {
		return out
	}
	return append(out, name+" "+value)
}

// Directives returns the directives of p's named location before the one that passes the request
// upstream (Pass).
func (p ProfileSettings) Directives() []string {
	var out []string
	for _, f := range profileDirectiveFuncs {
		out = f(p, out)
	}
	return out
}

// ErrorCodes returns CustomHTTPErrors as numbers.
func (p ProfileSettings) ErrorCodes() []int {
	if p.CustomHTTPErrors == "" {
		return nil
	}
	var out []int
	for f := range strings.SplitSeq(p.CustomHTTPErrors, ",") {
		if n, err := strconv.Atoi(f); err == nil && n >= 300 && n <= 599 { // what error_page takes
			out = append(out, n)
		}
	}
	return out
}

// profilesOf returns the distinct profiles a server's locations use.
func profilesOf(s *Server) []ProfileSettings {
	var out []ProfileSettings
	for i := range s.Locations {
		if p := s.Locations[i].Profile; p != nil && !slices.Contains(out, *p) {
			out = append(out, *p)
		}
	}
	return out
}

// ProfileNames returns the names of the model's profiles.
func (m *Model) ProfileNames() []string {
	out := make([]string, len(m.Profiles))
	for i, p := range m.Profiles {
		out[i] = p.Name()
	}
	return out
}

// appendProfile writes the route's profile and, for a custom error page, who the route belongs to.
func appendProfile(b []byte, l *Location) []byte {
	if l.Profile == nil {
		return b
	}
	b = append(b, `,"profile":"`...)
	b = append(b, l.Profile.Name()...)
	b = append(b, '"')
	if l.Profile.restrictsAccess() {
		// The router refuses the route rather than serve it without the profile (external auth).
		b = append(b, `,"profile_required":true`...)
	}
	b = appendBodyLimit(b, l.Profile)
	if l.Profile.CustomHTTPErrors == "" {
		return b
	}
	b = append(b, `,"ingress_namespace":`...)
	b = appendJSONString(b, l.Ingress.Namespace)
	b = append(b, `,"ingress_name":`...)
	b = appendJSONString(b, l.Ingress.Name)
	if l.Backend != nil {
		b = append(b, `,"service_name":`...)
		b = appendJSONString(b, l.Backend.Service.Name)
		b = append(b, `,"service_port":`...)
		b = appendJSONString(b, l.Backend.Port.String())
	}
	return b
}

// nginxErrorLine finds the line numbers of nginx.conf that an "nginx -t" message points at.
var nginxErrorLine = regexp.MustCompile(`\.conf[^ :]*:(\d+)`)

// FailingProfiles returns the profiles whose locations in conf hold the lines that an "nginx -t" error
// message (msg) points at: a profile's own named location or the locations beside it (external auth), or a custom error location of a code the
// profile lists; or that a message without a line names (refusedWithoutLine). The caller takes the Ingresses that use them out (quarantine), since nothing else in
// nginx.conf comes from an Ingress. profiles are the model's.
func FailingProfiles(conf []byte, msg string, profiles []ProfileSettings) []ProfileSettings {
	lines := strings.Split(string(conf), "\n")
	var out []ProfileSettings
	add := func(p ProfileSettings) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, m := range nginxErrorLine.FindAllStringSubmatch(msg, -1) {
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > len(lines) {
			continue
		}
		block := enclosingNamedLocation(lines, n-1)
		for _, p := range profiles {
			if block == "@"+p.Name() || (p.AuthURL != "" && (block == p.authLocation() || block == p.signinLocation())) {
				add(p)
			}
			for _, c := range p.ErrorCodes() {
				if block == "@ingress_reactor_error_"+strconv.Itoa(c) {
					add(p)
				}
			}
		}
	}
	// Some errors carry no line: those NGINX finds while it merges a location's settings.
	for _, p := range profiles {
		if p.refusedWithoutLine(msg) {
			add(p)
		}
	}
	return out
}

// enclosingNamedLocation returns the name ("@...") of the named location whose block holds line i, or "".
func enclosingNamedLocation(lines []string, i int) string {
	depth := 0
	for ; i >= 0; i-- {
		line := lines[i]
		depth += strings.Count(line, "}") - strings.Count(line, "{")
		if depth >= 0 {
			continue
		}
		// The block opened on this line holds the line: a location ends the search, an inner block (a
		// Lua block) hands it on to the block around it.
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "location" {
			if strings.HasPrefix(f[1], "@") {
				return f[1]
			}
			// A profile's internal location (external auth's call to its service).
			if len(f) >= 3 && f[1] == "=" && strings.HasPrefix(f[2], "/_ingress_reactor_") {
				return f[2]
			}
			return ""
		}
		depth = 0
	}
	return ""
}
