package nginx

import (
	"encoding/hex"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Routing happens in NGINX's Lua router (lua/ingress_reactor/router.lua), not in server and location
// blocks: nginx.conf has one catch-all server, and the controller pushes each host's routes into a shared
// dict over the status server, like endpoints and certificates. A change of hosts, paths, backends or
// route settings is therefore a push, never a reload.
//
// The router and Model.Route below implement the same matching; a table test runs one corpus against
// both. For a request's host (lower case, without port or trailing dot):
//   - the server is the host's own, else the one-label wildcard that covers it ("*.example.com" covers
//     "a.example.com", not "a.b.example.com", "example.com" nor ".example.com"), else the catch-all
//     server (Host "");
//   - within it, an Exact path equal to the request path wins; else the longest Prefix path that matches
//     element-wise ("/foo" matches "/foo", "/foo/" and "/foo/bar", not "/foobar"); else the server's
//     fallback: the default backend, or a built-in 404.
// The request path is NGINX's normalized $uri (percent-decoded, "." and ".." resolved, slashes merged).

// RouteHost is the wire form of one server for the router: the body of a host entry in a routes push.
// Field order and slice order are fixed, so equal servers encode to equal bytes.
type RouteHost struct {
	// Redirect sends plain-HTTP requests that no path matches (the fallback) to HTTPS.
	Redirect bool `json:"redirect,omitempty"`
	// Regex says that Routes are a match list in order (Server.RegexMode): the first route whose Pattern
	// matches wins.
	Regex bool `json:"regex,omitempty"`
	// DefaultBackend answers what no path matches instead of the default upstream (default-backend).
	DefaultBackend UpstreamName `json:"default_backend,omitempty"`
	// AuthUsers are the user lists of the host's routes with basic authentication, by their ID
	// (RouteOptions.AuthUsersID): each list travels once per host, however many routes share it.
	AuthUsers map[string]string `json:"auth_users,omitempty"`
	Routes    []RoutePath       `json:"routes"`
}

// RoutePath is one path of a host.
type RoutePath struct {
	Path  string `json:"path"`
	Exact bool   `json:"exact,omitempty"`
	// Upstream is empty for the built-in 404.
	Upstream UpstreamName `json:"upstream"`
	// Redirect answers plain-HTTP requests with a 308 to HTTPS.
	Redirect bool `json:"redirect,omitempty"`
	// Deny and Allow are source ranges (SourceRanges) as "<hex of the masked address>/<bits>": 8 hex
	// digits for IPv4, 32 for IPv6. Allow, when not empty, lists the only addresses admitted.
	Deny  []string `json:"deny,omitempty"`
	Allow []string `json:"allow,omitempty"`
	// Pattern is the PCRE pattern of a route of a regex host; Literal its lower-case prefix when the
	// pattern is one (compared without a regex).
	Pattern string `json:"pattern,omitempty"`
	Literal string `json:"literal,omitempty"`
	// Rewrite is the rewrite target; XForwardedPrefix goes with rewritten requests; UpstreamVhost is
	// the Host header the backend sees.
	Rewrite          string `json:"rewrite,omitempty"`
	XForwardedPrefix string `json:"x_forwarded_prefix,omitempty"`
	UpstreamVhost    string `json:"upstream_vhost,omitempty"`
	// HostRedirect answers with a 308 to the same URL on this host (from-to-www-redirect).
	HostRedirect Hostname `json:"host_redirect,omitempty"`
	// Profile names the named location of the route's directive-only settings (ProfileSettings.Name);
	// with custom errors, the error page's headers name the route's Ingress and Service.
	Profile string `json:"profile,omitempty"`
	// ProfileRequired marks a profile that restricts access (external auth): the router refuses the
	// route (503) while its configuration lacks the profile, rather than serve it without.
	ProfileRequired  bool   `json:"profile_required,omitempty"`
	IngressNamespace string `json:"ingress_namespace,omitempty"`
	IngressName      string `json:"ingress_name,omitempty"`
	ServiceName      string `json:"service_name,omitempty"`
	ServicePort      string `json:"service_port,omitempty"`
	// The redirect options of the route's Ingress (RouteOptions).
	RedirectURL           string       `json:"redirect_url,omitempty"`
	RedirectCode          int          `json:"redirect_code,omitempty"`
	AppRoot               string       `json:"app_root,omitempty"`
	ForceSSLRedirect      bool         `json:"force_ssl_redirect,omitempty"`
	PreserveTrailingSlash bool         `json:"preserve_trailing_slash,omitempty"`
	UsePortInRedirects    bool         `json:"use_port_in_redirects,omitempty"`
	DefaultBackend        UpstreamName `json:"default_backend,omitempty"`
	// The logging options (enable-access-log, enable-rewrite-log).
	NoAccessLog bool `json:"no_access_log,omitempty"`
	RewriteLog  bool `json:"rewrite_log,omitempty"`
	// CORS and Limit are the route's CORS settings and rate limits (appendCORSOptions,
	// appendLimitOptions).
	CORS  *RouteCORS  `json:"cors,omitempty"`
	Limit *RouteLimit `json:"limit,omitempty"`
	// Auth admits only the users of the host's AuthUsers list Users (basic authentication).
	Auth *RouteAuth `json:"auth,omitempty"`
}

// RouteAuth is the wire form of a route's basic authentication: the WWW-Authenticate value of its 401
// and the ID of its user list in the host entry.
type RouteAuth struct {
	Challenge string `json:"challenge"`
	Users     string `json:"users"`
}

// RouteCORS is the wire form of CORSOptions: Origins is ["*"] for any origin.
type RouteCORS struct {
	Origins     []string `json:"origins"`
	Methods     string   `json:"methods"`
	Headers     string   `json:"headers"`
	Expose      string   `json:"expose,omitempty"`
	Credentials bool     `json:"credentials"`
	MaxAge      int      `json:"max_age"`
}

// RouteLimit is the wire form of RateLimits: the bursts are rate × multiplier, Allow holds wire prefixes.
type RouteLimit struct {
	Zone     string   `json:"zone"`
	RPS      int      `json:"rps,omitempty"`
	RPSBurst int      `json:"rps_burst,omitempty"`
	RPM      int      `json:"rpm,omitempty"`
	RPMBurst int      `json:"rpm_burst,omitempty"`
	Conn     int      `json:"conn,omitempty"`
	Allow    []string `json:"allow,omitempty"`
}

// AppendRouteHostJSON appends the wire form (RouteHost) of s to b, without reflection: a full push at
// 10,000 hosts encodes every host. Upstream names are [a-z0-9-] by construction; paths passed
// ValidatePath and are escaped all the same.
func AppendRouteHostJSON(b []byte, s *Server) []byte {
	b = append(b, '{')
	if s.TLS != nil && s.TLS.SSLRedirect {
		b = append(b, `"redirect":true,`...)
	}
	if s.DefaultBackend != "" {
		b = append(b, `"default_backend":"`...)
		b = append(b, s.DefaultBackend...)
		b = append(b, `",`...)
		if o := s.DefaultBackendOptions; o != nil && o.ClientCertMode != "" {
			b = append(b, `"fallback_client_cert":`...)
			b = appendClientCertObject(b, o)
			b = append(b, ',')
		}
	}
	b = appendAuthUsers(b, s)
	b = appendClientCA(b, s)
	if s.RegexMode() {
		return appendRegexRoutes(b, s)
	}
	b = append(b, `"routes":[`...)
	for i := range s.Locations {
		l := &s.Locations[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"path":`...)
		b = appendJSONString(b, l.Path)
		if l.PathType == PathExact {
			b = append(b, `,"exact":true`...)
		}
		b = appendRouteFields(b, l)
	}
	return append(b, "]}"...)
}

// appendAuthUsers writes the host's user lists ("auth_users":{id:lines},), each once, in the order of
// the locations that use them.
func appendAuthUsers(b []byte, s *Server) []byte {
	var written []string
	for i := range s.Locations {
		o := s.Locations[i].Options
		if o == nil || o.AuthUsersID == "" || slices.Contains(written, o.AuthUsersID) {
			continue
		}
		if written == nil {
			b = append(b, `"auth_users":{`...)
		} else {
			b = append(b, ',')
		}
		written = append(written, o.AuthUsersID)
		b = append(b, '"')
		b = append(b, o.AuthUsersID...)
		b = append(b, `":`...)
		b = appendJSONString(b, o.AuthUsers)
	}
	if written != nil {
		b = append(b, "},"...)
	}
	return b
}

// appendClientCA writes the CA that the host's handshakes verify client certificates with
// ("client_ca":{"id":..,"pem":..,"depth":n},): the merge leaves one per host (Server.ClientCA).
func appendClientCA(b []byte, s *Server) []byte {
	o := s.ClientCA()
	if o == nil {
		return b
	}
	b = append(b, `"client_ca":{"id":"`...)
	b = append(b, o.ClientCAID...)
	b = append(b, `","pem":`...)
	b = appendJSONString(b, o.ClientCA)
	b = append(b, `,"depth":`...)
	b = strconv.AppendInt(b, int64(o.ClientCADepth), 10)
	return append(b, "},"...)
}

// ClientCA returns the route options that carry the CA the host verifies client certificates with,
// or nil when none of its locations asks for client certificates.
func (s *Server) ClientCA() *RouteOptions {
	for i := range s.Locations {
		if o := s.Locations[i].Options; o != nil && o.ClientCAID != "" {
			return o
		}
	}
	return nil
}

// appendRouteFields writes what a route says besides its path and how it matches, and closes it.
func appendRouteFields(b []byte, l *Location) []byte {
	b = append(b, `,"upstream":"`...)
	b = append(b, l.Upstream...)
	b = append(b, '"')
	if l.SSLRedirect {
		b = append(b, `,"redirect":true`...)
	}
	if l.RedirectHost != "" {
		b = append(b, `,"host_redirect":`...)
		b = appendJSONString(b, string(l.RedirectHost))
	}
	if l.Access != nil {
		b = appendWirePrefixes(b, "deny", l.Access.Deny)
		b = appendWirePrefixes(b, "allow", l.Access.Allow)
	}
	b = appendRouteOptions(b, l.Options)
	b = appendRewriteOptions(b, l)
	b = appendBalanceOptions(b, l)
	b = appendProfile(b, l)
	b = appendCanary(b, l)
	b = appendMetricsLabels(b, l)
	return append(b, '}')
}

// appendMetricsLabels writes the labels of the route's request metrics ("metrics":[namespace, ingress,
// service]); the router adds the path. A route without an Ingress (none today) has none.
func appendMetricsLabels(b []byte, l *Location) []byte {
	if l.Ingress.Name == "" {
		return b
	}
	b = append(b, `,"metrics":[`...)
	b = appendJSONString(b, l.Ingress.Namespace)
	b = append(b, ',')
	b = appendJSONString(b, l.Ingress.Name)
	b = append(b, ',')
	b = appendJSONString(b, l.Service)
	return append(b, ']')
}

func appendWirePrefixes(b []byte, name string, ps []netip.Prefix) []byte {
	if len(ps) == 0 {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":[`...)
	for i, p := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = appendWirePrefix(b, p)
		b = append(b, '"')
	}
	return append(b, ']')
}

// appendWirePrefix writes p as "<hex of the masked address>/<bits>".
func appendWirePrefix(b []byte, p netip.Prefix) []byte {
	p = p.Masked()
	b = hex.AppendEncode(b, p.Addr().AsSlice())
	b = append(b, '/')
	return strconv.AppendInt(b, int64(p.Bits()), 10)
}

// appendJSONString appends s as a JSON string. Validated paths never need an escape; the escapes keep a
// hand-built model from breaking the push.
func appendJSONString[T string | []byte](b []byte, s T) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Equal reports whether s and o are the same server: same host, TLS settings and locations.
func (s *Server) Equal(o *Server) bool {
	if s.Host != o.Host || (s.TLS == nil) != (o.TLS == nil) || (s.TLS != nil && *s.TLS != *o.TLS) || s.DefaultBackend != o.DefaultBackend ||
		!s.DefaultBackendOptions.Equal(o.DefaultBackendOptions) {
		return false
	}
	if len(s.Locations) == len(o.Locations) && (len(s.Locations) == 0 || &s.Locations[0] == &o.Locations[0]) {
		return true // the same locations: a Merger shares an unchanged host's between models
	}
	return slices.EqualFunc(s.Locations, o.Locations, func(x, y Location) bool { return x.Equal(&y) })
}

// Equal reports whether l and o route alike: same path, upstream, Ingress and settings.
func (l *Location) Equal(o *Location) bool {
	if l.Path != o.Path || l.PathType != o.PathType || l.Upstream != o.Upstream || l.SSLRedirect != o.SSLRedirect || l.Ingress != o.Ingress ||
		!l.Options.Equal(o.Options) || l.RedirectHost != o.RedirectHost || !sameProfile(l.Profile, o.Profile) || !l.Canary.Equal(o.Canary) {
		return false
	}
	return sameRanges(l.Access, o.Access)
}

// sameRanges reports whether two source-range restrictions admit the same clients (nil: everyone).
func sameRanges(a, b *SourceRanges) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return slices.Equal(a.Deny, b.Deny) && slices.Equal(a.Allow, b.Allow)
}

// SameRoutes reports whether m and o route every request alike: equal servers and default backend.
func (m *Model) SameRoutes(o *Model) bool {
	return m.DefaultBackend == o.DefaultBackend &&
		slices.EqualFunc(m.Servers, o.Servers, func(a, b Server) bool { return a.Equal(&b) })
}

// RegexMode reports whether the server's paths are matched as regexes: once one location is a regex
// path, every path of the host is, as in ingress-nginx (see regexOrder).
func (s *Server) RegexMode() bool {
	for i := range s.Locations {
		if s.Locations[i].Regex != nil {
			return true
		}
	}
	return false
}

// regexRoute is one entry of a regex-mode server's match list.
type regexRoute struct {
	// text is the path ingress-nginx writes into the location ("^" + text is the regex); it orders the list.
	text string
	loc  *Location
	re   *PathRegex
}

// regexOrder lists the match entries of a server in regex mode, in ingress-nginx's order: descending
// length of the path text, then descending text; the first entry that matches wins. A regex location is
// its own path. Other paths are read as regexes too, as ingress-nginx does (as text when they are no
// regex both engines read alike): an Exact path as "^/p", a Prefix path "/p" as "^/p/" and, unless an
// Exact path "/p" is on the host, "^/p" (ingress-nginx adds that Exact location to every Prefix one).
func (s *Server) regexOrder() []regexRoute {
	out := make([]regexRoute, 0, len(s.Locations)+len(s.Locations)/2)
	for i := range s.Locations {
		l := &s.Locations[i]
		switch {
		case l.Regex != nil:
			out = append(out, regexRoute{l.Path, l, l.Regex})
		case l.PathType == PathExact || l.Path == "/":
			out = append(out, regexRoute{l.Path, l, cachedHostPathRegex(l.Path)})
		default:
			out = append(out, regexRoute{l.Path + "/", l, cachedHostPathRegex(l.Path + "/")})
			if !slices.ContainsFunc(s.Locations, func(o Location) bool { return o.PathType == PathExact && o.Path == l.Path }) {
				out = append(out, regexRoute{l.Path, l, cachedHostPathRegex(l.Path)})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b regexRoute) int {
		if len(a.text) != len(b.text) {
			return len(b.text) - len(a.text)
		}
		return strings.Compare(b.text, a.text)
	})
	return out
}

// appendRegexRoutes writes the routes of a server in regex mode: its match list in order, each entry
// with its PCRE pattern (and its literal prefix, when it is one).
// RouteLocations returns, for each route of s's wire form (AppendRouteHostJSON) in order, the location
// it comes from: a regex host lists its routes in match order, and a Prefix path there can be two routes.
// A data plane's answer that names a route by its index (RouteRefusal) is read with it.
func RouteLocations(s *Server) []*Location {
	if s.RegexMode() {
		order := s.regexOrder()
		out := make([]*Location, len(order))
		for i, e := range order {
			out[i] = e.loc
		}
		return out
	}
	out := make([]*Location, len(s.Locations))
	for i := range s.Locations {
		out[i] = &s.Locations[i]
	}
	return out
}

func appendRegexRoutes(b []byte, s *Server) []byte {
	b = append(b, `"regex":true,"routes":[`...)
	for i, e := range s.regexOrder() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"path":`...)
		b = appendJSONString(b, e.text)
		b = append(b, `,"pattern":`...)
		b = appendJSONString(b, e.re.PCRE)
		if e.re.Literal != "" {
			b = append(b, `,"literal":`...)
			b = appendJSONString(b, e.re.Literal)
		}
		b = appendRouteFields(b, e.loc)
	}
	return append(b, "]}"...)
}

// hostPathRegexCache keeps the patterns of non-regex paths on regex hosts, which every encoding of such a
// host needs again. It is dropped whole when it grows past hostPathRegexCacheMax entries.
var hostPathRegexCache struct {
	sync.Mutex
	m map[string]*PathRegex
}

const hostPathRegexCacheMax = 50000

func cachedHostPathRegex(path string) *PathRegex {
	c := &hostPathRegexCache
	c.Lock()
	r, ok := c.m[path]
	c.Unlock()
	if ok {
		return r
	}
	r = hostPathRegex(path)
	c.Lock()
	if c.m == nil || len(c.m) >= hostPathRegexCacheMax {
		c.m = map[string]*PathRegex{}
	}
	c.m[path] = r
	c.Unlock()
	return r
}

// RouteResult is where Model.Route sends a request.
type RouteResult struct {
	// Server is the host of the server chosen ("" for the catch-all).
	Server Hostname
	// Location is the matching path, or nil for the server's fallback.
	Location *Location
	// Upstream serves the request; empty means the built-in 404.
	Upstream UpstreamName
	// Redirect: a plain-HTTP request is answered with a 308 to HTTPS (when HTTPS is on).
	Redirect bool
	// Rewritten is the path the backend sees when the location's rewrite-target applies; else "".
	Rewritten string
}

// Route says where the data plane sends a request for host and path (see the matching rules above).
// host must be lower case without a port; path is a normalized URI path.
func (m *Model) Route(host, path string) RouteResult {
	s := m.Server(Hostname(host))
	if s == nil && host != "" {
		if dot := strings.IndexByte(host, '.'); dot > 0 {
			s = m.Server(Hostname("*" + host[dot:]))
		}
	}
	if s == nil {
		s = m.Server("")
	}
	if s == nil {
		return RouteResult{Upstream: m.DefaultBackend}
	}
	r := RouteResult{Server: s.Host}
	if s.RegexMode() {
		return m.routeRegex(s, r, path)
	}
	var best *Location
	for i := range s.Locations {
		l := &s.Locations[i]
		if l.PathType == PathExact {
			if l.Path == path {
				best = l
				break
			}
			continue
		}
		if l.Path == "/" || l.Path == path || strings.HasPrefix(path, l.Path+"/") {
			if best == nil || len(l.Path) > len(best.Path) {
				best = l
			}
		}
	}
	if best == nil {
		r.Upstream = m.DefaultBackend
		if s.DefaultBackend != "" {
			r.Upstream = s.DefaultBackend
		}
		r.Redirect = s.TLS != nil && s.TLS.SSLRedirect
		return r
	}
	r.Location, r.Upstream, r.Redirect = best, best.Upstream, best.SSLRedirect
	return r
}

// routeRegex is Route's path matching on a server in regex mode: the first entry of its match list that
// matches, then the rewrite of the path with the captures of that match.
func (m *Model) routeRegex(s *Server, r RouteResult, path string) RouteResult {
	for _, e := range s.regexOrder() {
		caps := e.re.Match(path)
		if caps == nil {
			continue
		}
		l := e.loc
		r.Location, r.Upstream, r.Redirect = l, l.Upstream, l.SSLRedirect
		if l.Options.rewrites(l.Path) {
			r.Rewritten = expandRewrite(l.Options.RewriteTarget, path, caps)
		}
		return r
	}
	r.Upstream = m.DefaultBackend
	r.Redirect = s.TLS != nil && s.TLS.SSLRedirect
	return r
}

// expandRewrite replaces $0-$9 in target with the captures of a match of uri (caps as regexp returns
// them), as NGINX does: one digit, and a group that did not take part or does not exist is empty.
func expandRewrite(target, uri string, caps []int) string {
	var b strings.Builder
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c != '$' || i+1 == len(target) || target[i+1] < '0' || target[i+1] > '9' {
			b.WriteByte(c)
			continue
		}
		i++
		n := int(target[i] - '0')
		if 2*n+1 < len(caps) && caps[2*n] >= 0 {
			b.WriteString(uri[caps[2*n]:caps[2*n+1]])
		}
	}
	return b.String()
}

// Server returns the server for host h exactly, or nil.
func (m *Model) Server(h Hostname) *Server {
	i, ok := slices.BinarySearchFunc(m.Servers, h, func(s Server, h Hostname) int { return strings.Compare(string(s.Host), string(h)) })
	if !ok {
		return nil
	}
	return &m.Servers[i]
}

// Admits says whether a location's source ranges let addr in (the router answers 403 otherwise).
func (l *Location) Admits(addr netip.Addr) bool {
	if l.Access == nil {
		return true
	}
	addr = addr.Unmap()
	for _, p := range l.Access.Deny {
		if p.Contains(addr) {
			return false
		}
	}
	if len(l.Access.Allow) == 0 {
		return true
	}
	for _, p := range l.Access.Allow {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
