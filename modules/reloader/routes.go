package reloader

import (
	"context"
	"strings"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// routeBatch is one routes push: host -> encoded routes (nil for a host that is gone), and the default
// backend when it changed.
type routeBatch = nginx.RouteUpdate

// routeStore is the routes lane's desired state: every server of the model, and the hosts changed since
// the last push. A model arrives as pointers into it (the renderer keeps it anyway); a host's routes are
// encoded for the Lua router only when a push takes them, so a change of one Ingress encodes one host and
// no host's encoding outlives its push (10,000 hosts' routes were megabytes held for nothing).
type routeStore struct {
	servers  map[nginx.Hostname]*nginx.Server
	dirty    map[nginx.Hostname]struct{}
	fallback nginx.UpstreamName
	// fallbackDirty says the default backend changed since the last push.
	fallbackDirty bool
	// fromModel is set once a model has been taken: until then a full push would empty the router.
	fromModel bool
	// live are the profiles (named locations) of the configuration NGINX runs. held are the hosts whose
	// routes name a profile that is not live yet, with the server whose routes NGINX should keep until
	// it is (nil: none, the host is new): they are pushed once a configuration with the profile is live.
	live map[string]bool
	held map[nginx.Hostname]heldHost
	// inFlight are the servers of the batch being pushed (the lane pushes one at a time): a refusal
	// names a route of what was pushed, which a newer model may have changed meanwhile. Dropped once
	// the push is over (stored or failed), so that a full push's servers are not kept to the next.
	inFlight map[nginx.Hostname]*nginx.Server
	// onRefused hears the routes that the data plane refused, by the Ingress that wrote each; a
	// refusal that names no route of the model is logged by the caller (the bool is false).
	onRefused func(modules.RoutesRefused, bool)
}

func newRouteStore() *routeStore {
	return &routeStore{
		servers: map[nginx.Hostname]*nginx.Server{},
		dirty:   map[nginx.Hostname]struct{}{},
		live:    map[string]bool{},
		held:    map[nginx.Hostname]heldHost{},
	}
}

// catchAll stands in for a model without a catch-all server, so that the router always has one.
var catchAll = &nginx.Server{}

// useModel makes m's servers the desired routes. m's slices are not modified afterwards (models are
// immutable once published), so the store keeps pointers into them.
func (s *routeStore) useModel(m *nginx.Model) {
	set := func(srv *nginx.Server) {
		if old, ok := s.servers[srv.Host]; ok && (old == srv || old.Equal(srv)) {
			s.servers[srv.Host] = srv
			return
		}
		before, wasHeld := s.held[srv.Host]
		if !wasHeld {
			before = heldHost{server: s.servers[srv.Host]}
		}
		s.servers[srv.Host] = srv
		if s.needsProfile(srv) {
			s.held[srv.Host] = before
			delete(s.dirty, srv.Host)
			return
		}
		delete(s.held, srv.Host)
		s.dirty[srv.Host] = struct{}{}
	}
	hosts := len(m.Servers)
	if len(m.Servers) == 0 || m.Servers[0].Host != "" {
		set(catchAll)
		hosts++
	}
	for i := range m.Servers {
		set(&m.Servers[i])
	}
	// The store now holds every host of m (and the catch-all); more means hosts m no longer has. Counting
	// instead of keeping a set of m's hosts leaves a change that removes no host without an allocation
	// that grows with the number of hosts.
	if len(s.servers) != hosts {
		for h := range s.servers {
			if h != "" && m.Server(h) == nil {
				delete(s.servers, h)
				delete(s.held, h)
				s.dirty[h] = struct{}{}
			}
		}
	}
	if m.DefaultBackend != s.fallback || !s.fromModel {
		s.fallback, s.fallbackDirty = m.DefaultBackend, true
	}
	s.fromModel = true
}

// take encodes the routes of the batch's hosts: the servers of the model, or for a held host the server
// whose routes NGINX should keep.
func (s *routeStore) take(full bool) (routeBatch, bool) {
	var b routeBatch
	add := func(h nginx.Hostname) {
		srv := s.servers[h] // nil for a host that is gone: the push removes it
		if before, held := s.held[h]; held {
			// What NGINX keeps until the profile is live (nil: nothing, the host is new), never the
			// routes that wait for it. A dirty held host was marked again by a failed or partial push.
			if before.server == nil {
				return
			}
			srv = before.server
		}
		if srv == nil {
			b.Hosts[h] = nil
			return
		}
		b.Hosts[h] = nginx.AppendRouteHostJSON(nil, srv)
		s.inFlight[h] = srv
	}
	if full {
		b.Hosts = make(map[nginx.Hostname][]byte, len(s.servers))
		s.inFlight = make(map[nginx.Hostname]*nginx.Server, len(s.servers))
		for h := range s.servers {
			add(h)
		}
	} else {
		b.Hosts = make(map[nginx.Hostname][]byte, len(s.dirty))
		s.inFlight = make(map[nginx.Hostname]*nginx.Server, len(s.dirty))
		for h := range s.dirty {
			add(h)
		}
	}
	if full || s.fallbackDirty {
		d := s.fallback
		b.DefaultUpstream = &d
	}
	s.dirty = map[nginx.Hostname]struct{}{}
	s.fallbackDirty = false
	return b, full || len(b.Hosts) > 0 || b.DefaultUpstream != nil
}

func (s *routeStore) send(ctx context.Context, a Applier, b routeBatch, full bool) error {
	return a.SetRoutes(ctx, b, full)
}

// names lists the batch's hosts as the data plane names them ("" is the catch-all server).
func (s *routeStore) names(b routeBatch) []string {
	out := make([]string, 0, len(b.Hosts))
	for h := range b.Hosts {
		out = append(out, string(h))
	}
	return out
}

// failed marks the batch's hosts changed again, so the next push carries their current routes. A full
// batch needs nothing here, as the lane pushes everything again.
func (s *routeStore) failed(b routeBatch) {
	s.inFlight = nil
	for h := range b.Hosts {
		s.dirty[h] = struct{}{}
	}
	if b.DefaultUpstream != nil {
		s.fallbackDirty = true
	}
}

// stored marks the hosts that did not fit as changed, so they go out with the next push.
func (s *routeStore) stored(b routeBatch, partial *nginx.DictFullError) {
	s.inFlight = nil
	if partial == nil {
		return
	}
	for _, name := range partial.NotStored {
		if _, ok := b.Hosts[nginx.Hostname(name)]; ok {
			s.dirty[nginx.Hostname(name)] = struct{}{}
		}
	}
}

// heldHost is what NGINX keeps for a held host: the server whose routes were last pushed (nil: none).
type heldHost struct {
	server *nginx.Server
}

// needsProfile reports whether a server's routes name a profile that the running configuration lacks.
func (s *routeStore) needsProfile(srv *nginx.Server) bool {
	for i := range srv.Locations {
		if p := srv.Locations[i].Profile; p != nil && !s.live[p.Name()] {
			return true
		}
	}
	return false
}

// profilesLive records the profiles of the configuration that went live and lets the held hosts whose
// profiles it has go out.
func (s *routeStore) profilesLive(names []string) {
	s.live = make(map[string]bool, len(names))
	for _, n := range names {
		s.live[n] = true
	}
	for h := range s.held {
		if srv := s.servers[h]; srv == nil || !s.needsProfile(srv) {
			delete(s.held, h)
			s.dirty[h] = struct{}{}
		}
	}
	// A configuration older than the model may go live without a profile that pushed routes name
	// (the model dropped it and took it back meanwhile): those routes fall back to the public location
	// in the router (it knows the live profiles) until the configuration with it goes live and they are
	// pushed again.
	for h, srv := range s.servers {
		if _, held := s.held[h]; !held && s.needsProfile(srv) {
			s.held[h] = heldHost{server: srv}
		}
	}
}

// canaryRefusal is how configuration.lua names the route field it refused when the route's canary is at
// fault (normalize_canary: "host h, route i: \"canary\" ...").
const canaryRefusal = `: "canary"`

// refused maps the hosts the data plane refused to the Ingresses whose routes they were.
func (s *routeStore) refused(hosts map[nginx.Hostname]nginx.RouteRefusal) {
	if s.onRefused == nil {
		return
	}
	for h, r := range hosts {
		msg := modules.RoutesRefused{Host: h, Reason: r.Error}
		var locs []*nginx.Location
		if srv := s.inFlight[h]; srv != nil {
			locs = nginx.RouteLocations(srv)
		}
		if r.Route < 1 || r.Route > len(locs) {
			s.onRefused(msg, false)
			continue
		}
		msg.Location = *locs[r.Route-1]
		msg.Ingress = msg.Location.Ingress
		if c := msg.Location.Canary; c != nil && strings.Contains(r.Error, canaryRefusal) {
			// The route's canary object is the canary Ingress's data, not the main Ingress's: the canary
			// is quarantined, and the main keeps serving its path.
			msg.Ingress = c.Ingress
		}
		s.onRefused(msg, true)
	}
}

// complete is true once the routes come from a model: before that a full push holds no routes.
func (s *routeStore) complete() bool { return s.fromModel }
