package reloader

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// TestEndpointStoreMatchesAMap drives the endpoint store with random changes, pushes (full or not) and
// failed pushes, and checks every push against a plain map of the same changes: the store's compact
// table must hold exactly what the map holds, through its rebuilds.
func TestEndpointStoreMatchesAMap(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 2))
		s := newEndpointStore()
		want := map[nginx.UpstreamName][]nginx.Endpoint{}
		dirty := map[nginx.UpstreamName]bool{}
		// Enough upstreams for the table's rebuilds, few enough that names come back after a removal.
		names := 200 + r.IntN(3000)
		for step := range 20_000 {
			name := nginx.UpstreamName(fmt.Sprintf("ns-svc-%05d-80", r.IntN(names)))
			switch op := r.IntN(100); {
			case op < 55:
				var eps []nginx.Endpoint // nil: the upstream has no endpoint, which differs from removed
				for i := range r.IntN(3) {
					eps = append(eps, nginx.Endpoint{Address: fmt.Sprintf("10.0.%d.%d", step%250, i), Port: 8080})
				}
				s.apply(modules.EndpointsChange{Upstream: nginx.Upstream{Name: name}, Endpoints: eps})
				want[name] = eps
				dirty[name] = true
			case op < 90:
				s.apply(modules.EndpointsChange{Upstream: nginx.Upstream{Name: name}, Removed: true})
				delete(want, name)
				dirty[name] = true
			case op < 99:
				full := r.IntN(10) == 0
				batch, send := s.take(full)
				wantBatch := map[nginx.UpstreamName][]nginx.Endpoint{}
				if full {
					wantBatch = maps.Clone(want)
				} else {
					for n := range dirty {
						wantBatch[n] = want[n]
					}
				}
				if send != (full || len(wantBatch) > 0) {
					t.Fatalf("seed %d step %d: take(%v) says send %v for %d upstreams", seed, step, full, send, len(wantBatch))
				}
				if !maps.EqualFunc(batch, wantBatch, slices.Equal) {
					t.Fatalf("seed %d step %d: take(%v) = %d upstreams, want %d", seed, step, full, len(batch), len(wantBatch))
				}
				for n, eps := range batch {
					if _, present := want[n]; full && present && eps == nil != (want[n] == nil) {
						t.Fatalf("seed %d step %d: upstream %s sent as %v, want %v", seed, step, n, eps, want[n])
					}
				}
				clear(dirty)
				if r.IntN(4) == 0 { // the push failed: its upstreams go out again
					s.failed(batch)
					for n := range batch {
						dirty[n] = true
					}
				}
			default:
				if got, want := s.lists.Len(), len(want); got != want {
					t.Fatalf("seed %d step %d: %d upstreams, want %d", seed, step, got, want)
				}
				for n, eps := range want {
					if got, ok := s.lists.Get(n); !ok || !slices.Equal(got, eps) {
						t.Fatalf("seed %d step %d: upstream %s = %v, %v; want %v", seed, step, n, got, ok, eps)
					}
				}
			}
		}
	}
}

// TestEndpointStoreFullPushHoldsEmptyUpstreams checks that an upstream without endpoints is part of a
// full push (the data plane answers 503 for it), and a removed one is not.
func TestEndpointStoreFullPushHoldsEmptyUpstreams(t *testing.T) {
	s := newEndpointStore()
	s.apply(modules.EndpointsChange{Upstream: nginx.Upstream{Name: "empty"}})
	s.apply(modules.EndpointsChange{Upstream: nginx.Upstream{Name: "gone"}, Endpoints: []nginx.Endpoint{{Address: "10.0.0.1", Port: 80}}})
	s.apply(modules.EndpointsChange{Upstream: nginx.Upstream{Name: "gone"}, Removed: true})
	s.lists.Compact()
	s.apply(modules.EndpointsChange{Upstream: nginx.Upstream{Name: "later"}, Endpoints: []nginx.Endpoint{{Address: "10.0.0.2", Port: 80}}})
	batch, _ := s.take(true)
	if _, ok := batch["empty"]; !ok || len(batch) != 2 || batch["later"] == nil {
		t.Fatalf("full push = %v, want empty (no endpoints) and later", batch)
	}
}

// TestCertStateMatchesAHostMap drives the certificate state with random models, certificate changes and
// pushes, and checks that each push equals the difference between what a plain host map and the
// certificates make desired and what the previous pushes sent: the state compares models without a
// host table of its own and skips the diff when nothing changed, which must never leave a change unsent.
func TestCertStateMatchesAHostMap(t *testing.T) {
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 3))
		s := newCertState()
		hosts := map[nginx.Hostname]types.NamespacedName{} // the reference's host table
		usable := map[types.NamespacedName]string{}        // Secret -> content hash
		var def types.NamespacedName
		// What the reference's data plane holds.
		heldCerts := map[string]string{}
		heldHosts := map[nginx.Hostname]string{}
		secretNames := 1 + r.IntN(12)
		hostNames := 1 + r.IntN(16)
		randomSecret := func() types.NamespacedName { return secret(fmt.Sprintf("s%d", r.IntN(secretNames))) }
		for step := range 400 {
			switch op := r.IntN(10); {
			case op < 3: // a new model: some hosts change Secret, gain or lose TLS, come or go
				if r.IntN(3) > 0 {
					for range 1 + r.IntN(3) {
						h := nginx.Hostname(fmt.Sprintf("h%02d.example", r.IntN(hostNames)))
						if r.IntN(3) == 0 {
							delete(hosts, h)
						} else {
							hosts[h] = randomSecret()
						}
					}
				}
				m := tlsModel(hosts)
				if r.IntN(2) == 0 { // a host without TLS, or with the default certificate
					m.Servers = append(m.Servers, nginx.Server{Host: "zz-plain.example", TLS: &nginx.ServerTLS{}})
				}
				s.useModel(m)
			case op < 6:
				sec := randomSecret()
				if r.IntN(3) == 0 {
					s.apply(modules.CertChange{Secret: sec})
					delete(usable, sec)
				} else {
					v := fmt.Sprint(r.IntN(3))
					s.apply(set(sec.Name, v))
					usable[sec] = sec.Name + "@" + v
				}
			case op < 7:
				def = randomSecret()
				c := set(def.Name, "d")
				c.Default = true
				s.apply(c)
				usable[def] = def.Name + "@d"
			default:
				full := r.IntN(8) == 0
				b, send := s.take(full)
				// The reference: what is desired now, against what was sent.
				wantCerts, wantHosts := map[string]string{}, map[nginx.Hostname]string{}
				use := func(h nginx.Hostname, sec types.NamespacedName) {
					if hash, ok := usable[sec]; ok {
						wantCerts[nginx.CertificateID(sec)] = hash
						wantHosts[h] = nginx.CertificateID(sec)
					}
				}
				for h, sec := range hosts {
					use(h, sec)
				}
				if def.Name != "" {
					use(defaultCertificateHost, def)
				}
				diff := push{certs: map[string]string{}, hosts: map[nginx.Hostname]string{}}
				for id, hash := range wantCerts {
					if full || heldCerts[id] != hash {
						diff.certs[id] = hash
					}
				}
				for h, id := range wantHosts {
					if full || heldHosts[h] != id {
						diff.hosts[h] = id
					}
				}
				if !full {
					for id := range heldCerts {
						if _, ok := wantCerts[id]; !ok {
							diff.certs[id] = removed
						}
					}
					for h := range heldHosts {
						if _, ok := wantHosts[h]; !ok {
							diff.hosts[h] = ""
						}
					}
				}
				got := asPush(b.update)
				if send != (full || len(diff.certs) > 0 || len(diff.hosts) > 0) || send &&
					(!maps.Equal(got.certs, diff.certs) || !maps.Equal(got.hosts, diff.hosts)) {
					t.Fatalf("seed %d step %d: take(%v) = %v, %v; want certs %v hosts %v", seed, step, full, send, got, diff.certs, diff.hosts)
				}
				if !send {
					continue
				}
				if r.IntN(5) == 0 {
					s.failed(b)
					continue
				}
				s.stored(b, nil)
				heldCerts, heldHosts = wantCerts, wantHosts
			}
		}
	}
}

// TestRouteStoreFollowsRandomModels drives the route store with random models (hosts come, go and
// change upstream; with and without a catch-all server; models repeated) and pushes, full or not, some
// failing, and keeps a data-plane route table from what the pushes carry. After every successful push
// the table must equal the encoding of the latest model's servers, with the stand-in catch-all when
// the model has none: the store walks each model against the last one instead of keeping a map of
// servers, and must never miss a host that came, changed or went.
func TestRouteStoreFollowsRandomModels(t *testing.T) {
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 4))
		s := newRouteStore()
		table := map[nginx.Hostname]string{}
		ups := map[nginx.Hostname]nginx.UpstreamName{}
		withCatchAll, pendingFull := true, false
		var m *nginx.Model
		for step := range 300 {
			if r.IntN(3) > 0 || m == nil {
				for range r.IntN(4) {
					h := nginx.Hostname(fmt.Sprintf("h%02d.example", r.IntN(20)))
					if r.IntN(3) == 0 {
						delete(ups, h)
					} else {
						ups[h] = nginx.UpstreamName(fmt.Sprintf("up-%d", r.IntN(3)))
					}
				}
				if r.IntN(5) == 0 {
					withCatchAll = !withCatchAll
				}
				m = &nginx.Model{}
				if withCatchAll {
					m.Servers = append(m.Servers, nginx.Server{Host: "", Locations: routesTo("fallback", nginx.ProfileSettings{})})
				}
				for _, h := range slices.Sorted(maps.Keys(ups)) {
					m.Servers = append(m.Servers, nginx.Server{Host: h, Locations: routesTo(ups[h], nginx.ProfileSettings{})})
				}
			} else if r.IntN(2) == 0 {
				// The same servers again in a new list, as a model that changed something else.
				m = &nginx.Model{Servers: slices.Clone(m.Servers)}
			}
			s.useModel(m)
			full := pendingFull || r.IntN(6) == 0
			b, send := s.take(full)
			if !send {
				continue
			}
			if r.IntN(5) == 0 {
				s.failed(b)
				pendingFull = full // as the lane does: a failed full push is pushed in full again
				continue
			}
			pendingFull = false
			s.stored(b, nil)
			if full {
				clear(table)
			}
			for h, e := range b.Hosts {
				if e == nil {
					delete(table, h)
				} else {
					table[h] = string(e)
				}
			}
			// A push that failed leaves its hosts dirty; the table is checked once nothing is pending.
			if len(s.dirty) > 0 {
				continue
			}
			want := encodedAs(m)
			if !withCatchAll {
				want[""] = string(nginx.AppendRouteHostJSON(nil, catchAll))
			}
			if !maps.Equal(table, want) {
				t.Fatalf("seed %d step %d: the data plane holds %d hosts %v, want %d %v", seed, step, len(table), slices.Sorted(maps.Keys(table)), len(want), slices.Sorted(maps.Keys(want)))
			}
		}
	}
}
