package nginx

import (
	"strconv"
	"time"
)

// RouteOptions are an Ingress's settings that the Lua router applies per request: route data in the
// annotation registry's terms (KindRouteData). They travel with each route in the routes push, so a
// change of one is a push, never a reload. The translation sets them from the Ingress's annotations
// (one ann_*.go file per group); every location of the Ingress shares the value, which must not be
// modified once translated. nil means none is set.
//
// Adding an option: a field here (comparable, or compared in Equal), its wire form in appendRouteOptions,
// its check in configuration.lua's normalize_host, and its effect in router.lua.
type RouteOptions struct {
	// UseRegex (use-regex) matches the Ingress's paths as regular expressions (see PathRegex).
	UseRegex bool
	// RewriteTarget (rewrite-target) is the path the backend sees, with $0-$9 replaced by the captures
	// of the path's regex; it applies to the paths that differ from it. Empty for none.
	RewriteTarget string
	// XForwardedPrefix (x-forwarded-prefix) is sent as X-Forwarded-Prefix with rewritten requests.
	XForwardedPrefix string
	// UpstreamVhost (upstream-vhost) is the Host header the backend sees instead of the request's.
	UpstreamVhost string
	// RedirectURL, when set, answers every request of the Ingress's paths with RedirectCode and this
	// Location (permanent-redirect, temporal-redirect): a validated absolute http or https URL, sent as
	// written.
	RedirectURL  string
	RedirectCode int
	// AppRoot, when set, answers requests for "/" with a 302 to this path on the requested host
	// (app-root).
	AppRoot string
	// ForceSSLRedirect answers plain HTTP with a 308 to HTTPS even where the host has no TLS
	// (force-ssl-redirect).
	ForceSSLRedirect bool
	// PreserveTrailingSlash keeps a trailing slash of the request URI in redirects to HTTPS, which
	// otherwise drop it, as ingress-nginx does (preserve-trailing-slash).
	PreserveTrailingSlash bool
	// UsePortInRedirects writes the HTTPS port into redirects to HTTPS, 443 too (use-port-in-redirects).
	UsePortInRedirects bool
	// DefaultBackend serves the Ingress's paths whose upstream has no endpoints (default-backend).
	DefaultBackend UpstreamName
	// NoAccessLog leaves the Ingress's requests out of the access log (enable-access-log: false).
	NoAccessLog bool
	// RewriteLog logs the Ingress's path rewrites at notice level (enable-rewrite-log).
	RewriteLog bool
	// EnableCORS answers preflight requests and adds CORS headers with the settings of CORS
	// (enable-cors, cors-*).
	EnableCORS bool
	CORS       CORSOptions
	// Limits are the request and connection limits per client address (limit-rps, limit-rpm,
	// limit-connections, limit-burst-multiplier, limit-allowlist); zero when none is set.
	Limits RateLimits
	// ResponseHeaders are set on the responses of the Ingress's paths (custom-headers): validated
	// "Name:value" lines, sorted by name, joined by "\n"; empty for none.
	ResponseHeaders string
	// ProxyConnectTimeout, ProxySendTimeout and ProxyReadTimeout replace the default timeouts of each
	// try upstream (proxy-connect-timeout, proxy-send-timeout, proxy-read-timeout); 0 keeps the default.
	ProxyConnectTimeout, ProxySendTimeout, ProxyReadTimeout time.Duration
	// NextUpstreamTries, when NextUpstreamTriesSet, bounds the tries of a request (0: each endpoint
	// once) instead of the default 3 (proxy-next-upstream-tries).
	NextUpstreamTries    int
	NextUpstreamTriesSet bool
	// LimitRate bounds the response rate in bytes per second after its first LimitRateAfter bytes
	// (limit-rate, limit-rate-after); 0 for none.
	LimitRate, LimitRateAfter int64
	// ConnectionHeader replaces the Connection header that the backend gets (connection-proxy-header).
	ConnectionHeader string
	// AuthUsers, when set, are the only users admitted (auth-type basic, auth-secret): validated
	// "user:hash\n" lines. They travel once per host entry (AuthUsersID names them there, a hash of
	// their content); AuthChallenge is the WWW-Authenticate value of a 401 (auth-realm).
	AuthUsers, AuthUsersID, AuthChallenge string
	// SatisfyAny lets a client on the source allowlist in without authentication, and any other client
	// with it (satisfy: any); set only with an allowlist and basic or external authentication.
	SatisfyAny bool
	// ClientCertMode, when set, is the client certificate check of the Ingress's routes (auth-tls-secret,
	// auth-tls-verify-client: ClientCertOn, ...). ClientCA are the validated PEM CA certificates the
	// host's handshake verifies with, to ClientCADepth; they travel once per host entry, named by
	// ClientCAID (a hash of both), and are empty with ClientCertOff. ClientCertMatchCN is the PCRE
	// pattern the subject DN must match (auth-tls-match-cn), ClientCertErrorPage the URL of the 302 that
	// replaces a 400 (auth-tls-error-page), ClientCertPass sends the certificate upstream
	// (auth-tls-pass-certificate-to-upstream).
	ClientCertMode, ClientCA, ClientCAID string
	ClientCADepth                        int
	ClientCertMatchCN                    string
	ClientCertErrorPage                  string
	ClientCertPass                       bool
	// Balance are the route's balancing settings (affinity, upstream-hash-by, load-balance); the zero
	// value is round robin. They depend on the path (the cookie's default path), so
	// AppendRouteHostJSON writes them per location (appendBalanceOptions).
	Balance BalanceOptions
}

// options returns the translation's route options, allocating them on first use.
func (t *translator) options() *RouteOptions {
	if t.out.Options == nil {
		t.out.Options = &RouteOptions{}
	}
	return t.out.Options
}

// Equal reports whether o and p set the same options; nil equals nil only.
func (o *RouteOptions) Equal(p *RouteOptions) bool {
	if o == nil || p == nil {
		return o == p
	}
	return *o == *p
}

// appendRouteOptions appends the wire form of o's fields to a route object being written (each as
// `,"name":value`). Nothing is written for nil.
func appendRouteOptions(b []byte, o *RouteOptions) []byte {
	if o == nil {
		return b
	}
	b = appendRedirectOptions(b, o)
	b = appendLoggingOptions(b, o)
	b = appendCORSOptions(b, o)
	b = appendLimitOptions(b, o)
	if o.ResponseHeaders != "" {
		b = append(b, `,"response_headers":`...)
		b = appendJSONString(b, o.ResponseHeaders)
	}
	b = appendProxyOptions(b, o)
	b = appendProxyHeaderOptions(b, o)
	if o.AuthUsersID != "" {
		b = append(b, `,"auth":{"challenge":`...)
		b = appendJSONString(b, o.AuthChallenge)
		b = append(b, `,"users":"`...)
		b = append(b, o.AuthUsersID...)
		b = append(b, `"}`...)
	}
	if o.SatisfyAny {
		b = append(b, `,"satisfy_any":true`...)
	}
	return appendClientCertOptions(b, o)
}

// appendClientCertOptions writes the client certificate group's options (ann_clientcert.go); the CA
// itself is the host's (appendClientCA).
func appendClientCertOptions(b []byte, o *RouteOptions) []byte {
	if o.ClientCertMode == "" {
		return b
	}
	b = append(b, `,"client_cert":`...)
	return appendClientCertObject(b, o)
}

// appendClientCertObject writes o's client certificate check as an object: {"mode":..,"ca":..,...}.
func appendClientCertObject(b []byte, o *RouteOptions) []byte {
	b = append(b, `{"mode":`...)
	b = appendJSONString(b, o.ClientCertMode)
	if o.ClientCAID != "" {
		b = append(b, `,"ca":"`...)
		b = append(b, o.ClientCAID...)
		b = append(b, '"')
	}
	if o.ClientCertMatchCN != "" {
		b = append(b, `,"match_cn":`...)
		b = appendJSONString(b, o.ClientCertMatchCN)
	}
	if o.ClientCertErrorPage != "" {
		b = append(b, `,"error_page":`...)
		b = appendJSONString(b, o.ClientCertErrorPage)
	}
	if o.ClientCertPass {
		b = append(b, `,"pass_cert":true`...)
	}
	return append(b, '}')
}

// appendRedirectOptions writes the redirect group's options (ann_redirect.go).
func appendRedirectOptions(b []byte, o *RouteOptions) []byte {
	if o.RedirectURL != "" {
		b = append(b, `,"redirect_url":`...)
		b = appendJSONString(b, o.RedirectURL)
		b = append(b, `,"redirect_code":`...)
		b = strconv.AppendInt(b, int64(o.RedirectCode), 10)
	}
	if o.AppRoot != "" {
		b = append(b, `,"app_root":`...)
		b = appendJSONString(b, o.AppRoot)
	}
	if o.ForceSSLRedirect {
		b = append(b, `,"force_ssl_redirect":true`...)
	}
	if o.PreserveTrailingSlash {
		b = append(b, `,"preserve_trailing_slash":true`...)
	}
	if o.UsePortInRedirects {
		b = append(b, `,"use_port_in_redirects":true`...)
	}
	if o.DefaultBackend != "" {
		b = append(b, `,"default_backend":"`...)
		b = append(b, o.DefaultBackend...)
		b = append(b, '"')
	}
	return b
}

// appendRewriteOptions writes the rewrite group's fields of location l: "rewrite" and
// "x_forwarded_prefix" when the target rewrites its path, "upstream_vhost" whenever it is set. They
// depend on the path, so AppendRouteHostJSON calls it per location.
func appendRewriteOptions(b []byte, l *Location) []byte {
	o := l.Options
	if o == nil {
		return b
	}
	if o.rewrites(l.Path) {
		b = append(b, `,"rewrite":`...)
		b = appendJSONString(b, o.RewriteTarget)
		if o.XForwardedPrefix != "" {
			b = append(b, `,"x_forwarded_prefix":`...)
			b = appendJSONString(b, o.XForwardedPrefix)
		}
	}
	if o.UpstreamVhost != "" {
		b = append(b, `,"upstream_vhost":`...)
		b = appendJSONString(b, o.UpstreamVhost)
	}
	return b
}

// rewrites reports whether the rewrite target applies to path: as in ingress-nginx, a path equal to the
// target is not rewritten.
func (o *RouteOptions) rewrites(path string) bool {
	return o != nil && o.RewriteTarget != "" && o.RewriteTarget != path
}

// regexPath reports whether path is matched as a regular expression: with use-regex, or when the
// rewrite target applies to it (ingress-nginx's rule).
func (o *RouteOptions) regexPath(path string) bool {
	return o != nil && (o.UseRegex || o.rewrites(path))
}
