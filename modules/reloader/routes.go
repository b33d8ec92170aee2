package reloader

import (
	"context"
	"slices"
	"strings"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// routeBatch is one routes push: host -> encoded routes (nil for a host that is gone), and the default
// backend when it changed.
type routeBatch = nginx.RouteUpdate

// routeStore is the routes lane's desired state: every server of the model, and the hosts changed since
// the last push. It keeps the model's own server list (the renderer keeps it anyway), not a map of its
// servers (about 45 bytes per host at 10,000), and compares a new model with the last in one walk, as
// both are sorted by host. A host's routes are encoded for the Lua router only when a push takes them,
// so a change of one Ingress encodes one host and no host's encoding outlives its push (10,000 hosts'
// routes were megabytes held for nothing).
type routeStore struct {
	// servers are those of the latest model, sorted by host; when the model has no catch-all server,
	// catchAll stands in for it (list).
	servers  []nginx.Server
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
		dirty: map[nginx.Hostname]struct{}{},
		live:  map[string]bool{},
		held:  map[nginx.Hostname]heldHost{},
	}
}

// catchAll stands in for a model without a catch-all server, so that the router always has one.
var catchAll = &nginx.Server{}

// serverList is a model's servers, sorted by host, with catchAll first when the model has no catch-all
// server of its own.
type serverList struct {
	servers  []nginx.Server
	catchAll bool
}

func listOf(servers []nginx.Server) serverList {
	return serverList{servers: servers, catchAll: len(servers) == 0 || servers[0].Host != ""}
}

func (l serverList) len() int {
	if l.catchAll {
		return len(l.servers) + 1
	}
	return len(l.servers)
}

func (l serverList) at(i int) *nginx.Server {
	if l.catchAll {
		if i == 0 {
			return catchAll
		}
		i--
	}
	return &l.servers[i]
}

// find returns the server of host h, or nil.
func (l serverList) find(h nginx.Hostname) *nginx.Server {
	if h == "" && l.catchAll {
		return catchAll
	}
	i, ok := slices.BinarySearchFunc(l.servers, h, func(s nginx.Server, h nginx.Hostname) int { return strings.Compare(string(s.Host), string(h)) })
	if !ok {
		return nil
	}
	return &l.servers[i]
}

// list returns the store's servers; empty until a model has been taken.
func (s *routeStore) list() serverList {
	if !s.fromModel {
		return serverList{}
	}
	return listOf(s.servers)
}

// useModel makes m's servers the desired routes. m's slices are not modified afterwards (models are
// immutable once published), so the store keeps them. The last model's servers and m's are walked
// together, both sorted by host: a change that removes no host allocates nothing that grows with the
// number of hosts.
func (s *routeStore) useModel(m *nginx.Model) {
	// set takes srv, the server of its host in m; old is the host's server in the last model (nil: none).
	set := func(old, srv *nginx.Server) {
		if old != nil && (old == srv || old.Equal(srv)) {
			return
		}
		before, wasHeld := s.held[srv.Host]
		if !wasHeld {
			before = heldHost{server: old}
		}
		if s.needsProfile(srv) {
			s.held[srv.Host] = before
			delete(s.dirty, srv.Host)
			return
		}
		delete(s.held, srv.Host)
		s.dirty[srv.Host] = struct{}{}
	}
	before, now := s.list(), listOf(m.Servers)
	i, j := 0, 0
	for i < before.len() || j < now.len() {
		switch {
		case j == now.len() || i < before.len() && before.at(i).Host < now.at(j).Host:
			// A host m no longer has (never the catch-all, which every model has).
			h := before.at(i).Host
			delete(s.held, h)
			s.dirty[h] = struct{}{}
			i++
		case i == before.len() || now.at(j).Host < before.at(i).Host:
			set(nil, now.at(j))
			j++
		default:
			set(before.at(i), now.at(j))
			i, j = i+1, j+1
		}
	}
	s.servers = m.Servers
	if m.DefaultBackend != s.fallback || !s.fromModel {
		s.fallback, s.fallbackDirty = m.DefaultBackend, true
	}
	s.fromModel = true
}

// take encodes the routes of the batch's hosts: the servers of the model, or for a held host the server
// whose routes NGINX should keep.
func (s *routeStore) take(full bool) (routeBatch, bool) {
	var b routeBatch
	servers := s.list()
	add := func(h nginx.Hostname) {
		srv := servers.find(h) // nil for a host that is gone: the push removes it
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
		b.Hosts = make(map[nginx.Hostname][]byte, servers.len())
		s.inFlight = make(map[nginx.Hostname]*nginx.Server, servers.len())
		for i := range servers.len() {
			add(servers.at(i).Host)
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
	servers := s.list()
	for h := range s.held {
		if srv := servers.find(h); srv == nil || !s.needsProfile(srv) {
			delete(s.held, h)
			s.dirty[h] = struct{}{}
		}
	}
	// A configuration older than the model may go live without a profile that pushed routes name
	// (the model dropped it and took it back meanwhile): those routes fall back to the public location
	// in the router (it knows the live profiles) until the configuration with it goes live and they are
	// pushed again.
	for i := range servers.len() {
		srv := servers.at(i)
		if _, held := s.held[srv.Host]; !held && s.needsProfile(srv) {
			s.held[srv.Host] = heldHost{server: srv}
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
