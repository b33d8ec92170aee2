package nginx

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed nginx.tmpl
var defaultTemplateText string

// RenderConfig is the controller-level part of nginx.conf: ports, paths, tuning. Zero values of the
// optional fields mean the documented default.
type RenderConfig struct {
	// HTTPPort and HTTPSPort are the public listeners. HTTPSPort 0 disables HTTPS (and redirects).
	HTTPPort  int
	HTTPSPort int
	// StatusPort is the internal server on 127.0.0.1 for the controller (dynamic configuration, config hash).
	StatusPort int
	// StatusToken authorizes writes to the status server: NGINX accepts endpoint and certificate updates
	// only with this value in the StatusTokenHeader header, so another process that can reach the loopback
	// port (a sidecar, or anything on the node with hostNetwork) cannot redirect traffic or swap
	// certificates. 32 to 128 lower-case hex digits; NewStatusToken makes one. It is a secret: nginx.conf
	// is written 0600 and the token is never logged.
	StatusToken string
	// ListenAddress restricts the public listeners to one IPv4 or IPv6 address; empty means all IPv4
	// addresses (and all IPv6 addresses too when IPv6 is set).
	ListenAddress string
	// IPv6 adds [::] listeners next to the IPv4 ones (only when ListenAddress is empty).
	IPv6 bool
	// RedirectHTTPSPort is the HTTPS port written into HTTP->HTTPS redirects, when clients reach NGINX
	// through a port other than HTTPSPort (a Service or a NAT). 0 means HTTPSPort.
	RedirectHTTPSPort int
	// HTTPSListenAddress, when set, puts the HTTPS listener on this one address (instead of ListenAddress,
	// and without an IPv6 twin): with SSL passthrough the proxy owns the public HTTPS port and hands NGINX
	// the TLS connections it does not pass through on a loopback port.
	HTTPSListenAddress string
	// HTTPSProxyProtocol makes the HTTPS listener expect a PROXY protocol header on every connection and
	// take the client's address (and the port it connected to, for X-Forwarded-Port) from it. Only a
	// sender on HTTPSListenAddress, which must then be a loopback address, is trusted.
	HTTPSProxyProtocol bool

	Paths Paths
	// Modules are the load_module paths (see DetectModules); empty for builds with the modules compiled in.
	Modules []string
	// User is the "user" directive (for example "www-data"). It only matters when NGINX starts as root;
	// empty means NGINX's default, "nobody". Workers must be able to traverse Paths.Prefix.
	User string
	// WorkerProcesses is "auto" (the default) or a positive number.
	WorkerProcesses string
	// WorkerConnections defaults to 16384.
	WorkerConnections int
	// WorkerShutdownTimeout bounds how long old workers finish open requests after a reload; default 240s.
	WorkerShutdownTimeout time.Duration
	// ErrorLog is "stderr" (the default: the Process forwards it) or an absolute file path.
	ErrorLog string
	// ErrorLogLevel is one of debug, info, notice (the default), warn, error, crit, alert, emerg.
	ErrorLogLevel string
	// AccessLog is an absolute path, "stdout", or "" for no access log.
	AccessLog string

	// DefaultCertificate and DefaultCertificateKey are PEM files of the certificate served when no
	// Secret matches the SNI name. Required when HTTPSPort is set. NGINX's master reads them, so 0600 is fine.
	DefaultCertificate    string
	DefaultCertificateKey string

	// EndpointsDictMB, CertificatesDictMB, RoutesDictMB and LimitsDictMB size the Lua shared dicts;
	// defaults 32, 16, 32 and 16.
	EndpointsDictMB    int
	CertificatesDictMB int
	RoutesDictMB       int
	LimitsDictMB       int
	// UpstreamKeepalive is the number of idle keepalive connections to upstreams per worker; default 320.
	UpstreamKeepalive int
	// RequestMetrics, when set, makes NGINX aggregate the request metrics (requestmetrics.go).
	RequestMetrics *RequestMetricsConfig
	// ProxyConnectTimeout, ProxyReadTimeout and ProxySendTimeout default to 5s, 60s and 60s.
	ProxyConnectTimeout time.Duration
	ProxyReadTimeout    time.Duration
	ProxySendTimeout    time.Duration
	// ClientMaxBodySize is in bytes; default 1 MiB as with ingress-nginx; NoBodyLimit for none.
	ClientMaxBodySize int64

	// Settings are the ConfigMap's (--configmap); zero means DefaultSettings. Keys that replace a field
	// above (worker-processes, proxy-body-size, ...) win over it when the ConfigMap sets them.
	Settings Settings
}

// NoBodyLimit as RenderConfig.ClientMaxBodySize lets request bodies of any size through.
const NoBodyLimit = -1

var logLevels = map[string]bool{"debug": true, "info": true, "notice": true, "warn": true, "error": true, "crit": true, "alert": true, "emerg": true}

// withDefaults fills optional fields and validates the rest.
func (c RenderConfig) withDefaults() (RenderConfig, error) {
	var errs []error
	if c.WorkerProcesses == "" {
		c.WorkerProcesses = "auto"
	}
	if c.WorkerConnections == 0 {
		c.WorkerConnections = 16384
	}
	if c.WorkerShutdownTimeout == 0 {
		c.WorkerShutdownTimeout = 240 * time.Second
	}
	if c.ErrorLog == "" {
		c.ErrorLog = "stderr"
	}
	if c.ErrorLogLevel == "" {
		c.ErrorLogLevel = "notice"
	}
	if c.EndpointsDictMB == 0 {
		c.EndpointsDictMB = 32
	}
	if c.CertificatesDictMB == 0 {
		c.CertificatesDictMB = 16
	}
	if c.RoutesDictMB == 0 {
		c.RoutesDictMB = 32
	}
	if c.LimitsDictMB == 0 {
		c.LimitsDictMB = 16
	}
	if c.UpstreamKeepalive == 0 {
		c.UpstreamKeepalive = 320
	}
	if c.ProxyConnectTimeout == 0 {
		c.ProxyConnectTimeout = 5 * time.Second
	}
	if c.ProxyReadTimeout == 0 {
		c.ProxyReadTimeout = 60 * time.Second
	}
	if c.ProxySendTimeout == 0 {
		c.ProxySendTimeout = 60 * time.Second
	}
	if c.ClientMaxBodySize == 0 {
		c.ClientMaxBodySize = 1 << 20
	}
	if c.RedirectHTTPSPort == 0 {
		c.RedirectHTTPSPort = c.HTTPSPort
	}

	if !validStatusToken(c.StatusToken) {
		errs = append(errs, errors.New("status token must be 32 to 128 lower-case hex digits"))
	}
	ports := map[string]int{"HTTP port": c.HTTPPort, "status port": c.StatusPort}
	if c.HTTPSPort != 0 {
		ports["HTTPS port"] = c.HTTPSPort
	}
	seen := map[int]string{}
	for name, p := range ports {
		if p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s %d out of range 1-65535", name, p))
		} else if other, dup := seen[p]; dup {
			errs = append(errs, fmt.Errorf("%s and %s are both %d", name, other, p))
		}
		seen[p] = name
	}
	if c.RedirectHTTPSPort < 0 || c.RedirectHTTPSPort > 65535 {
		errs = append(errs, fmt.Errorf("redirect HTTPS port %d out of range", c.RedirectHTTPSPort))
	}
	if c.ListenAddress != "" {
		if _, err := netip.ParseAddr(c.ListenAddress); err != nil {
			errs = append(errs, fmt.Errorf("listen address %q is not an IP address", c.ListenAddress))
		}
	}
	if c.HTTPSListenAddress != "" {
		if a, err := netip.ParseAddr(c.HTTPSListenAddress); err != nil || a.Zone() != "" {
			errs = append(errs, fmt.Errorf("HTTPS listen address %q is not an IP address", c.HTTPSListenAddress))
		} else if c.HTTPSProxyProtocol && !a.IsLoopback() {
			errs = append(errs, fmt.Errorf("HTTPS listen address %q: the PROXY protocol is only trusted on a loopback address", c.HTTPSListenAddress))
		}
	} else if c.HTTPSProxyProtocol {
		errs = append(errs, errors.New("the PROXY protocol on the HTTPS listener needs a loopback HTTPS listen address"))
	}
	if !filepath.IsAbs(c.Paths.Prefix) {
		errs = append(errs, fmt.Errorf("nginx prefix %q must be an absolute path", c.Paths.Prefix))
	}
	if c.WorkerProcesses != "auto" {
		if n, err := strconv.Atoi(c.WorkerProcesses); err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("worker processes %q: want auto or a positive number", c.WorkerProcesses))
		}
	}
	if c.User != "" && !validUser(c.User) {
		errs = append(errs, fmt.Errorf("user %q: want a user name, optionally followed by a space and a group name", c.User))
	}
	if !logLevels[c.ErrorLogLevel] {
		errs = append(errs, fmt.Errorf("error log level %q is not an nginx level", c.ErrorLogLevel))
	}
	if c.ErrorLog != "stderr" && !filepath.IsAbs(c.ErrorLog) {
		errs = append(errs, fmt.Errorf("error log %q: want stderr or an absolute path", c.ErrorLog))
	}
	if c.AccessLog != "" && c.AccessLog != "stdout" && !filepath.IsAbs(c.AccessLog) {
		errs = append(errs, fmt.Errorf("access log %q: want stdout, an absolute path, or empty for none", c.AccessLog))
	}
	if c.HTTPSPort != 0 && (!filepath.IsAbs(c.DefaultCertificate) || !filepath.IsAbs(c.DefaultCertificateKey)) {
		errs = append(errs, errors.New("HTTPS needs the default certificate and key as absolute file paths"))
	}
	for _, m := range c.Modules {
		if !filepath.IsAbs(m) {
			errs = append(errs, fmt.Errorf("module %q must be an absolute path", m))
		}
	}
	for name, v := range map[string]int{"worker connections": c.WorkerConnections, "endpoints dict size": c.EndpointsDictMB,
		"certificates dict size": c.CertificatesDictMB, "routes dict size": c.RoutesDictMB, "limits dict size": c.LimitsDictMB, "upstream keepalive": c.UpstreamKeepalive} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", name, v))
		}
	}
	for name, d := range map[string]time.Duration{"worker shutdown timeout": c.WorkerShutdownTimeout, "proxy connect timeout": c.ProxyConnectTimeout,
		"proxy read timeout": c.ProxyReadTimeout, "proxy send timeout": c.ProxySendTimeout} {
		if d < time.Millisecond {
			errs = append(errs, fmt.Errorf("%s must be at least 1ms, got %s", name, d))
		}
	}
	if m := c.RequestMetrics; m != nil {
		if err := m.validate(); err != nil {
			errs = append(errs, fmt.Errorf("request metrics: %w", err))
		} else if m.DictMB == 0 {
			cp := *m
			cp.DictMB = 16
			c.RequestMetrics = &cp
		}
	}
	if c.ClientMaxBodySize < NoBodyLimit {
		errs = append(errs, fmt.Errorf("client max body size must not be negative"))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("invalid nginx configuration settings: %w", errors.Join(errs...))
	}
	return c, nil
}

func validUser(u string) bool {
	parts := strings.Split(u, " ")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 32 {
			return false
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				return false
			}
		}
	}
	return true
}

// Template renders nginx.conf. The embedded default is DefaultTemplate; ParseTemplate reads an
// operator's replacement (--template).
//
// Templates use text/template's syntax and are executed by tmplexec.go, which reads fields but calls no
// methods (see there why). A template only ever sees the view types below: every string in them is already quoted by Quote,
// every other value is an integer, a boolean or a netip.Prefix (which prints as hex digits, '.', ':'
// and '/' only), so a replacement template cannot inject anything that did not pass validation. A
// replacement must keep the status server and its Lua locations, the balancer upstream and access
// phase, and report {{.ConfigHash}} at /configuration/hash: the controller confirms each reload
// through it.
type Template struct {
	tmpl *tmplSet
}

var defaultTemplate = mustParse(defaultTemplateText)

func mustParse(text string) *Template {
	t, err := ParseTemplate(text)
	if err != nil {
		panic(fmt.Sprintf("embedded nginx.tmpl: %v", err))
	}
	return t
}

// DefaultTemplate returns the embedded template.
func DefaultTemplate() *Template { return defaultTemplate }

// DefaultTemplateText returns the embedded template's source, a starting point for --template.
func DefaultTemplateText() string { return defaultTemplateText }

// templateProbe is the model and configuration ParseTemplate renders a template with: a catch-all and
// a TLS server, and three profiles (a custom error page, backend TLS, external auth with a cache).
func templateProbe() (Model, RenderConfig) {
	probe := RenderConfig{HTTPPort: 80, HTTPSPort: 443, StatusPort: 10246, StatusToken: strings.Repeat("0", 32), Paths: Paths{Prefix: "/nginx"},
		DefaultCertificate: "/ssl/default.crt", DefaultCertificateKey: "/ssl/default.key"}
	m := Model{Servers: []Server{{Host: ""}, {Host: "example.com", TLS: &ServerTLS{SSLRedirect: true},
		Locations: []Location{{Path: "/", PathType: PathPrefix, Upstream: "probe-upstream-80-00000000", SSLRedirect: true,
			Access: &SourceRanges{Deny: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}}}}}}
	m.Profiles = []ProfileSettings{
		{CustomHTTPErrors: "404"},
		{BackendProtocol: "HTTPS", ProxySSLFiles: "probe_probe_0", ProxySSLCA: true},
		{AuthURL: "http://192.0.2.1/auth", AuthSignin: "https://192.0.2.1/start", AuthSigninRedirectParam: "rd",
			AuthResponseHeaders: "X-Probe-User", AuthCacheKey: "${http_authorization}", AuthCacheDuration: "200 5m"},
	}
	return m, probe
}

// ParseTemplate parses a template and renders it once with a small model, so that a mistake (an
// unknown field, a missing config hash) is reported now rather than at the first Ingress.
func ParseTemplate(text string) (*Template, error) {
	tmpl, err := parseTmplSet("nginx.conf", text)
	if err != nil {
		return nil, fmt.Errorf("parse nginx template: %w", err)
	}
	t := &Template{tmpl: tmpl}
	m, probe := templateProbe()
	probeProfile, tlsProfile, authProfile := m.Profiles[0], m.Profiles[1], m.Profiles[2]
	conf, _, err := t.Render(m, probe)
	if err != nil && strings.Contains(err.Error(), "can't evaluate field Servers") {
		return nil, fmt.Errorf("%w (hosts and paths are no longer in nginx.conf: the Lua router serves them; start again from the embedded template, nginx/nginx.tmpl)", err)
	}
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(conf, []byte("/configuration/hash")) {
		return nil, errors.New("nginx template must serve /configuration/hash with {{.ConfigHash}}: the controller confirms reloads through it")
	}
	if !bytes.Contains(conf, []byte(`set $ingress_reactor_token "`+probe.StatusToken+`";`)) {
		return nil, errors.New("nginx template must keep \"set $ingress_reactor_token {{.StatusToken}};\" in the status server: NGINX refuses endpoint and certificate updates without it")
	}
	for _, need := range []struct{ text, why string }{
		{`require("ingress_reactor.router").route()`, "the public server's rewrite_by_lua_block that calls require(\"ingress_reactor.router\").route(): routes live in the Lua router, not in nginx.conf"},
		{"location = /configuration/routes", "the status server's location = /configuration/routes: the controller pushes routes through it"},
		{"lua_shared_dict ingress_reactor_routes", "lua_shared_dict ingress_reactor_routes {{.RoutesDictMB}}m: the router reads routes from it"},
		{"set $ingress_reactor_https 1;", "\"set $ingress_reactor_https 1;\" in the public location when HTTPS is on ({{if .HTTPS}}): without it no request is redirected to HTTPS"},
		{`set_profiles({"` + probeProfile.Name() + `", "` + tlsProfile.Name() + `", "` + authProfile.Name() + `", })`, "the init_by_lua_block's require(\"ingress_reactor.router\").set_profiles({ {{range .Profiles}}\"{{.Name}}\", {{end}} }): the router enters only the profiles nginx.conf has"},
		{`set $ingress_reactor_error_upstream "";`, "the public location's \"set $ingress_reactor_error_upstream \"\";\" and the other $ingress_reactor_error_* variables: custom error pages read them"},
		{"location @" + probeProfile.Name() + " {", "a named location per profile ({{range .Profiles}} location @{{.Name}} ...): the router sends the routes that use one there"},
		{"location @ingress_reactor_error_404 {", "a named location per custom error code ({{range .ErrorCodes}} location @ingress_reactor_error_{{.}} ...): custom-http-errors sends the errors there"},
		{`require("ingress_reactor.configuration").authorize()`, "the status server's access_by_lua_block that calls require(\"ingress_reactor.configuration\").authorize(): without it any local process could read and change the dynamic configuration"},
		{`require("ingress_reactor.router").log()`, "the http block's log_by_lua_block that calls require(\"ingress_reactor.router\").log(): limit-connections gives connections back in it"},
		{`set $ingress_reactor_limit_conn "";`, "the public location's \"set $ingress_reactor_limit_conn \"\";\" and \"set $ingress_reactor_cors \"\";\": limit-connections and enable-cors pass what the router decided in them"},
		{`require("ingress_reactor.router").header_filter()`, "the header_filter_by_lua_block that calls require(\"ingress_reactor.router\").header_filter() in the public location and each profile's: custom-headers and enable-cors set their headers there"},
		{"upstream upstream_balancer_https {", "an upstream block per backend protocol ({{range .ProtocolUpstreams}} upstream {{.}} ...) " +
			"and the map $scheme $ingress_reactor_auto_upstream: protocols must not share idle connections"},
		{`require("ingress_reactor.router").set_body_limit(`, "the init_by_lua_block's require(\"ingress_reactor.router\").set_body_limit({{.ClientMaxBodySize}}): " +
			"without it no route's Content-Length is checked against its proxy-body-size (named locations skip NGINX's own check)"},
		{"map $scheme $ingress_reactor_auto_upstream", "the map $scheme $ingress_reactor_auto_upstream that picks the pool of backend-protocol AUTO_HTTP"},
		{"upstream " + tlsProfile.OwnUpstream() + " {", "an upstream block per profile that has one ({{range .Profiles}}{{if .Upstream}} upstream {{.Upstream}} ...): " +
			"backend TLS profiles must not share idle connections with other profiles"},
		{`set $ingress_reactor_response_headers "";`, "the public location's \"set $ingress_reactor_response_headers \"\";\": custom-headers travel in it"},
		{`set $ingress_reactor_satisfied "";`, "the public location's \"set $ingress_reactor_satisfied \"\";\": satisfy any tells the auth request in it that the router let the request in"},
		{`set $ingress_reactor_balance "";`, "the public location's \"set $ingress_reactor_balance \"\";\": affinity, upstream-hash-by and load-balance travel in it"},
		{`require("ingress_reactor.balancer").log()`, "the http block's log_by_lua_block that calls require(\"ingress_reactor.balancer\").log(): load-balance ewma measures endpoints in it"},
		{`set $ingress_reactor_auth_route "";`, "the public location's \"set $ingress_reactor_auth_route \"\";\": auth-cache-key caches the auth answers per route with it"},
	} {
		if !bytes.Contains(conf, []byte(need.text)) {
			return nil, errors.New("nginx template must keep " + need.why)
		}
	}
	if bytes.Count(conf, []byte(`require("ingress_reactor.router").header_filter()`)) < 2+len(m.Profiles) {
		return nil, errors.New("nginx template must keep the header_filter_by_lua_block that calls require(\"ingress_reactor.router\").header_filter() " +
			"in the public location, in location @ingress_reactor_default and in each profile's named location: custom-headers, enable-cors " +
			"and HSTS set their headers there")
	}
	for _, need := range []struct{ text, why string }{
		{"location = " + authProfile.authLocation() + " {", "the locations beside each profile's named location ({{range .Profiles}}{{range .Auxiliary}} location {{.Name}} ...): " +
			"external auth (auth-url) calls its service and redirects to auth-signin from them"},
		{"location " + authProfile.signinLocation() + " {", "the locations beside each profile's named location ({{range .Profiles}}{{range .Auxiliary}} location {{.Name}} ...): " +
			"external auth (auth-url) calls its service and redirects to auth-signin from them"},
		{"keys_zone=" + authCacheZone + ":", "the http block's {{if .AuthCache}} proxy_cache_path {{.AuthCache}} ... keys_zone=" + authCacheZone +
			":...: auth-cache-key caches the auth service's answers there"},
	} {
		if !bytes.Contains(conf, []byte(need.text)) {
			return nil, errors.New("nginx template must keep " + need.why)
		}
	}
	// The http block, the custom error location of 404 and the auth profile's named location.
	if bytes.Count(conf, []byte("proxy_set_header Host $ingress_reactor_proxy_host;")) < 3 {
		return nil, errors.New("nginx template must keep the http block's proxy_set_header lines in each profile's named location that sets " +
			"headers of its own ({{if .ProxyHeaders}}{{template \"ingress_reactor_proxy_headers\" $}}{{end}}): NGINX does not inherit them " +
			"into a location with proxy_set_header lines, and auth-response-headers sets some")
	}
	return t, nil
}

// Render renders the embedded template; see Template.Render.
func Render(m Model, cfg RenderConfig) (conf []byte, hash string, err error) {
	return defaultTemplate.Render(m, cfg)
}

// hashPlaceholder stands for the config hash while rendering. It contains '%', which no validated
// value can, so it is never confused with a host or a path.
const hashPlaceholder = "%ingress-reactor-config-hash%"

// tokenPlaceholder stands for the status token while rendering and hashing, so the hash (the
// ingress_reactor_config_hash metric) is equal on every replica that serves the same configuration, though
// each has its own token.
const tokenPlaceholder = "%ingress-reactor-status-token%"

// Render returns nginx.conf for m and cfg, and the configuration's hash: the hex SHA-256 of the
// rendered text (with the hash itself left out), which the status server reports at
// GET /configuration/hash. Equal inputs give equal bytes and hashes.
//
// Hosts and paths are not in nginx.conf: the Lua router serves them from the routes the controller
// pushes (see routes.go), so today the text depends on cfg alone and a change of Ingresses renders the
// same configuration, which the reloader does not reload. m stays a parameter for the settings that
// NGINX can only take as directives.
func (t *Template) Render(m Model, cfg RenderConfig) (conf []byte, hash string, err error) {
	data, cfg, err := renderView(m, cfg)
	if err != nil {
		return nil, "", err
	}
	var buf bytes.Buffer
	buf.Grow(16 << 10)
	if err := t.tmpl.execute(&buf, data); err != nil {
		return nil, "", fmt.Errorf("render nginx template: %w", err)
	}
	conf = buf.Bytes()
	sum := sha256.Sum256(conf)
	hash = hex.EncodeToString(sum[:])
	conf = bytes.ReplaceAll(conf, []byte(hashPlaceholder), []byte(hash))
	conf = bytes.ReplaceAll(conf, []byte(tokenPlaceholder), []byte(cfg.StatusToken)) // hex digits, validated
	return conf, hash, nil
}

// renderView is what the template sees for m and cfg, and cfg with the settings and defaults applied.
func renderView(m Model, cfg RenderConfig) (*view, RenderConfig, error) {
	if !cfg.Settings.loaded {
		cfg.Settings = DefaultSettings()
	}
	cfg = cfg.Settings.overlay(cfg)
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, cfg, err
	}
	data, err := newView(cfg)
	if err != nil {
		return nil, cfg, err
	}
	data.ProtocolUpstreams = ProtocolUpstreams
	if m.usesAuthCache() {
		q := quoter{}
		if data.AuthCache = q.quote(cfg.Paths.AuthCacheDir()); q.err != nil {
			return nil, cfg, q.err
		}
	}
	data.NoSessionCache = m.ClientCertificates()
	data.ClientCADigest = m.ClientCADigest()
	for _, p := range m.Profiles {
		data.Profiles = append(data.Profiles, profileView{Name: p.Name(), Directives: p.Directives(), Pass: p.Pass(), Upstream: p.OwnUpstream(),
			ProxyHeaders: p.authSetsUpstreamHeaders(), Auxiliary: p.auxiliaryLocations()})
		for _, c := range p.ErrorCodes() {
			if !slices.Contains(data.ErrorCodes, c) {
				data.ErrorCodes = append(data.ErrorCodes, c)
			}
		}
	}
	slices.Sort(data.ErrorCodes)
	return data, cfg, nil
}

// The view: what templates see. Strings are quoted nginx strings, ready to print.

// view is the template's root value.
type view struct {
	// ConfigHash is the quoted config hash, for GET /configuration/hash.
	ConfigHash string
	Modules    []string
	User       string // quoted user and optional group, or "" for no user directive
	// WorkerProcesses is "auto" or a number, unquoted (both are safe literals).
	WorkerProcesses          string
	WorkerConnections        int
	WorkerShutdownTimeoutSec int
	PIDFile                  string
	ErrorLog                 string
	ErrorLogLevel            string
	AccessLog                string // quoted, or "" for off
	LuaPackagePath           string
	TempDir                  tempDirs
	EndpointsDictMB          int
	CertificatesDictMB       int
	RoutesDictMB             int
	LimitsDictMB             int
	UpstreamKeepalive        int
	// Metrics is the Lua table of metrics.lua's configure (numbers and booleans), "" with request
	// metrics off; MetricsDictMB sizes their dict.
	Metrics               string
	MetricsDictMB         int
	ProxyConnectTimeoutMS int64
	ProxyReadTimeoutMS    int64
	ProxySendTimeoutMS    int64
	ClientMaxBodySize     int64
	// Settings are the ConfigMap's, ready to print.
	Settings settingsView

	// HTTPListen and HTTPSListen are the quoted listen addresses ("80", "127.0.0.1:80", "[::]:80").
	HTTPListen  []string
	HTTPSListen []string
	// HTTPS is false when HTTPS is disabled.
	HTTPS bool
	// HTTPSProxyProtocol adds "proxy_protocol" to the HTTPS listener; RealIPFrom is then the quoted address
	// whose PROXY headers are trusted.
	HTTPSProxyProtocol    bool
	RealIPFrom            string
	DefaultCertificate    string
	DefaultCertificateKey string
	// RedirectPortSuffix is the quoted ":8443" when redirects need a port, else the quoted "".
	RedirectPortSuffix string
	StatusListen       string
	StatusToken        string
	// Profiles are the named locations of the model's profiles; ErrorCodes the distinct codes their
	// custom error pages take, each with a named location of its own. Names and codes are generated
	// (hex digits, numbers 300-599), never user text.
	Profiles []profileView
	// ProtocolUpstreams are the upstream blocks of the backend protocols (nginx.ProtocolUpstreams).
	ProtocolUpstreams []string
	ErrorCodes        []int
	// NoSessionCache turns NGINX's TLS session cache off: some host verifies client certificates
	// (Model.ClientCertificates).
	NoSessionCache bool
	// ClientCADigest changes with the CA of any host that verifies client certificates, so that the
	// change reloads NGINX (Model.ClientCADigest).
	ClientCADigest string
	// AuthCache is the quoted directory of external auth's answer cache while some profile uses it
	// (auth-cache-key), else "".
	AuthCache string
}

// profileView is one profile's named location.
type profileView struct {
	Name string
	// Directives are the settings' directives (ProfileSettings.Directives), each without its ";".
	Directives []string
	// Pass is the directive and URL that send the request upstream, for example
	// "grpc_pass grpc://upstream_balancer".
	Pass string
	// Upstream, when set, is an upstream block of the profile's own that Pass names
	// (ProfileSettings.OwnUpstream): the template renders it like upstream_balancer.
	Upstream string
	// ProxyHeaders repeats the http block's proxy_set_header lines in the named location, which sets
	// request headers of its own (auth-response-headers) and so inherits none.
	ProxyHeaders bool
	// Auxiliary are the locations beside the named location that the settings need (external auth).
	Auxiliary []auxiliaryLocation
}

type tempDirs struct {
	ClientBody, Proxy, FastCGI, UWSGI, SCGI string
}

func newView(cfg RenderConfig) (*view, error) {
	q := quoter{}
	v := &view{
		ConfigHash:               q.quote(hashPlaceholder),
		User:                     quoteUser(&q, cfg.User),
		WorkerProcesses:          cfg.WorkerProcesses,
		WorkerConnections:        cfg.WorkerConnections,
		WorkerShutdownTimeoutSec: int(cfg.WorkerShutdownTimeout.Round(time.Second) / time.Second),
		PIDFile:                  q.quote(cfg.Paths.PIDFile()),
		ErrorLog:                 q.quote(cfg.ErrorLog),
		ErrorLogLevel:            cfg.ErrorLogLevel,
		AccessLog:                q.quoteOptional(accessLogPath(cfg.AccessLog)),
		LuaPackagePath:           q.quote(cfg.Paths.LuaDir() + "/?.lua;;"),
		TempDir: tempDirs{
			ClientBody: q.quote(filepath.Join(cfg.Paths.TempDir(), "client_body")),
			Proxy:      q.quote(filepath.Join(cfg.Paths.TempDir(), "proxy")),
			FastCGI:    q.quote(filepath.Join(cfg.Paths.TempDir(), "fastcgi")),
			UWSGI:      q.quote(filepath.Join(cfg.Paths.TempDir(), "uwsgi")),
			SCGI:       q.quote(filepath.Join(cfg.Paths.TempDir(), "scgi")),
		},
		EndpointsDictMB:       cfg.EndpointsDictMB,
		CertificatesDictMB:    cfg.CertificatesDictMB,
		RoutesDictMB:          cfg.RoutesDictMB,
		LimitsDictMB:          cfg.LimitsDictMB,
		UpstreamKeepalive:     cfg.UpstreamKeepalive,
		ProxyConnectTimeoutMS: cfg.ProxyConnectTimeout.Milliseconds(),
		ProxyReadTimeoutMS:    cfg.ProxyReadTimeout.Milliseconds(),
		ProxySendTimeoutMS:    cfg.ProxySendTimeout.Milliseconds(),
		ClientMaxBodySize:     max(cfg.ClientMaxBodySize, 0),
		Settings:              newSettingsView(&q, cfg.Settings),
		HTTPS:                 cfg.HTTPSPort != 0,
		StatusListen:          q.quote(fmt.Sprintf("127.0.0.1:%d", cfg.StatusPort)),
		StatusToken:           q.quote(tokenPlaceholder),
	}
	for _, mod := range cfg.Modules {
		v.Modules = append(v.Modules, q.quote(mod))
	}
	v.Settings.SSLDHParam = q.quoteOptional(cfg.Settings.DHParamFile(cfg.Paths))
	if m := cfg.RequestMetrics; m != nil {
		v.Metrics, v.MetricsDictMB = m.luaTable(), m.DictMB
	}
	v.HTTPListen = listens(&q, cfg, cfg.HTTPPort)
	if v.HTTPS {
		v.HTTPSListen = listens(&q, cfg, cfg.HTTPSPort)
		if cfg.HTTPSListenAddress != "" {
			a := netip.MustParseAddr(cfg.HTTPSListenAddress)
			v.HTTPSListen = []string{q.quote(netip.AddrPortFrom(a, uint16(cfg.HTTPSPort)).String())}
		}
		if cfg.HTTPSProxyProtocol {
			v.HTTPSProxyProtocol = true
			v.RealIPFrom = q.quote(cfg.HTTPSListenAddress)
		}
		v.DefaultCertificate = q.quote(cfg.DefaultCertificate)
		v.DefaultCertificateKey = q.quote(cfg.DefaultCertificateKey)
		suffix := ""
		if cfg.RedirectHTTPSPort != 443 {
			suffix = ":" + strconv.Itoa(cfg.RedirectHTTPSPort)
		}
		v.RedirectPortSuffix = q.quote(suffix)
	}

	if q.err != nil {
		return nil, q.err
	}
	return v, nil
}

// quoteUser quotes "user [group]" as one or two arguments.
func quoteUser(q *quoter, u string) string {
	if u == "" {
		return ""
	}
	parts := strings.Fields(u)
	for i, p := range parts {
		parts[i] = q.quote(p)
	}
	return strings.Join(parts, " ")
}

// accessLogPath maps "stdout", which nginx does not know, to the device file.
func accessLogPath(p string) string {
	if p == "stdout" {
		return "/dev/stdout"
	}
	return p
}

// quoter applies Quote and keeps the first error, so view building reads straight.
type quoter struct {
	buf []byte
	err error
}

func (q *quoter) quote(s string) string {
	var err error
	q.buf, err = appendQuoted(q.buf[:0], s)
	if err != nil {
		if q.err == nil {
			q.err = err
		}
		return `""`
	}
	return string(q.buf)
}

func (q *quoter) quoteOptional(s string) string {
	if s == "" {
		return ""
	}
	return q.quote(s)
}
