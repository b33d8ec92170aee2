package nginx

import (
	"encoding/hex"
	"net/netip"
	"slices"
	"strconv"
	"strings"
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
	// DefaultBackend answers what no path matches instead of the default upstream (default-backend).
	DefaultBackend UpstreamName `json:"default_backend,omitempty"`
	Routes         []RoutePath  `json:"routes"`
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
	// HostRedirect answers with a 308 to the same URL on this host (from-to-www-redirect).
	HostRedirect Hostname `json:"host_redirect,omitempty"`
	// The redirect options of the route's Ingress (RouteOptions).
	RedirectURL           string       `json:"redirect_url,omitempty"`
	RedirectCode          int          `json:"redirect_code,omitempty"`
	AppRoot               string       `json:"app_root,omitempty"`
	ForceSSLRedirect      bool         `json:"force_ssl_redirect,omitempty"`
	PreserveTrailingSlash bool         `json:"preserve_trailing_slash,omitempty"`
	UsePortInRedirects    bool         `json:"use_port_in_redirects,omitempty"`
	DefaultBackend        UpstreamName `json:"default_backend,omitempty"`
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
		b = append(b, '}')
	}
	return append(b, "]}"...)
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
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
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
	if s.Host != o.Host || (s.TLS == nil) != (o.TLS == nil) || (s.TLS != nil && *s.TLS != *o.TLS) || s.DefaultBackend != o.DefaultBackend {
		return false
	}
	if len(s.Locations) == len(o.Locations) && (len(s.Locations) == 0 || &s.Locations[0] == &o.Locations[0]) {
		return true // the same locations: a Merger shares an unchanged host's between models
	}
	return slices.EqualFunc(s.Locations, o.Locations, func(x, y Location) bool {
		if x.Path != y.Path || x.PathType != y.PathType || x.Upstream != y.Upstream || x.SSLRedirect != y.SSLRedirect || x.Ingress != y.Ingress ||
			!x.Options.Equal(y.Options) || x.RedirectHost != y.RedirectHost {
			return false
		}
		if x.Access == y.Access {
			return true
		}
		if x.Access == nil || y.Access == nil {
			return false
		}
		return slices.Equal(x.Access.Deny, y.Access.Deny) && slices.Equal(x.Access.Allow, y.Access.Allow)
	})
}

// SameRoutes reports whether m and o route every request alike: equal servers and default backend.
func (m *Model) SameRoutes(o *Model) bool {
	return m.DefaultBackend == o.DefaultBackend &&
		slices.EqualFunc(m.Servers, o.Servers, func(a, b Server) bool { return a.Equal(&b) })
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
}

// Route says where the data plane sends a request for host and path (see the matching rules above).
// host must be lower case without a port; path is a normalized URI path.
func (m *Model) Route(host, path string) RouteResult {
	s := m.server(Hostname(host))
	if s == nil && host != "" {
		if dot := strings.IndexByte(host, '.'); dot > 0 {
			s = m.server(Hostname("*" + host[dot:]))
		}
	}
	if s == nil {
		s = m.server("")
	}
	if s == nil {
		return RouteResult{Upstream: m.DefaultBackend}
	}
	r := RouteResult{Server: s.Host}
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

// server returns the server for host h exactly, or nil.
func (m *Model) server(h Hostname) *Server {
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
