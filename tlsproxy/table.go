package tlsproxy

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync/atomic"
)

// Route sends the TLS connections for one host name, undecrypted, to a set of backends.
type Route struct {
	// Host is an exact, lowercase DNS name, or "*." followed by one: a wildcard that matches exactly one
	// more label ("*.example.com" matches "a.example.com", not "example.com" or "a.b.example.com"), as
	// Ingress hosts do.
	Host string
	// Backend names the backend in logs and metrics (the upstream name); it must not be empty.
	Backend string
	// Endpoints are the addresses connections are spread over, round-robin. A route without endpoints
	// still claims its host: its connections are closed rather than handed to NGINX, whose certificate the
	// client does not expect.
	Endpoints []netip.AddrPort
	// ProxyProtocol is the header sent to the endpoint before the client's bytes.
	ProxyProtocol ProxyProtocol
}

// route is a Route in a Table, with its round-robin position.
type route struct {
	Route
	next atomic.Uint32
}

// pick returns the endpoints in the order to try them: round-robin start, then the following ones.
func (r *route) pick(dst []netip.AddrPort, attempts int) []netip.AddrPort {
	n := len(r.Endpoints)
	if n == 0 {
		return dst[:0]
	}
	start := int(r.next.Add(1) % uint32(n))
	dst = dst[:0]
	for i := 0; i < n && i < attempts; i++ {
		dst = append(dst, r.Endpoints[(start+i)%n])
	}
	return dst
}

// Table maps server names to routes: a map of exact names, then a map of wildcard suffixes, so a lookup
// costs at most two map accesses whatever the number of hosts. A Table is immutable once built; the
// proxy replaces it as a whole (see Proxy.SetTable), so a lookup never sees a half-updated table.
type Table struct {
	exact    map[string]*route
	wildcard map[string]*route // keyed by the part after "*."
}

// NewTable builds a table from routes. When two routes claim the same host, the first one wins (callers
// order routes by precedence). Routes with an empty Host or Backend are skipped.
func NewTable(routes []Route) *Table {
	t := &Table{exact: make(map[string]*route, len(routes)), wildcard: map[string]*route{}}
	for _, r := range routes {
		if r.Host == "" || r.Backend == "" {
			continue
		}
		m, key := t.exact, r.Host
		if suffix, ok := strings.CutPrefix(r.Host, "*."); ok {
			m, key = t.wildcard, suffix
		}
		if _, dup := m[key]; dup {
			continue
		}
		e := &route{Route: r}
		e.Endpoints = append([]netip.AddrPort(nil), r.Endpoints...)
		// A random start keeps frequent table rebuilds from always favouring the first endpoint.
		e.next.Store(rand.Uint32())
		m[key] = e
	}
	return t
}

// Len returns the number of hosts in the table.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.exact) + len(t.wildcard)
}

// Lookup returns the route for a server name (lowercase, as ClientHello.ServerName is): the exact name
// first, then the wildcard of its parent domain.
func (t *Table) Lookup(serverName string) (Route, bool) {
	r := t.lookup(serverName)
	if r == nil {
		return Route{}, false
	}
	return r.Route, true
}

func (t *Table) lookup(serverName string) *route {
	if t == nil || serverName == "" {
		return nil
	}
	if r, ok := t.exact[serverName]; ok {
		return r
	}
	if i := strings.IndexByte(serverName, '.'); i > 0 {
		if r, ok := t.wildcard[serverName[i+1:]]; ok {
			return r
		}
	}
	return nil
}
