package nginx

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestMergerMatchesFullMerge drives a Merger through random sequences of added, replaced, recreated,
// touched (same content, new pointer) and deleted translations, over hosts that share exact and wildcard
// TLS entries, several namespaces, default-backend routes, alias hosts and both ownership modes, and checks after
// every step that it returns exactly what a merge from scratch returns.
func TestMergerMatchesFullMerge(t *testing.T) {
	hosts := []Hostname{"", "a.example.com", "b.example.com", "*.example.com", "x.a.example.com", "c.other.org", "*.other.org", "solo"}
	tlsHosts := []Hostname{"a.example.com", "b.example.com", "*.example.com", "*.a.example.com", "c.other.org", "*.other.org", "solo", "unrouted.example.com"}
	paths := []string{"/", "/api", "/api/v1"}
	namespaces := []string{"ns1", "ns2", "ns3"}
	names := []string{"i1", "i2", "i3", "i4", "i5", "i6", "i7"}
	upstreams := []Upstream{
		NewUpstream(types.NamespacedName{Namespace: "ns1", Name: "web"}, intstr.FromInt32(80)),
		NewUpstream(types.NamespacedName{Namespace: "ns2", Name: "api"}, intstr.FromInt32(8080)),
		NewUpstream(types.NamespacedName{Namespace: "ns3", Name: "web"}, intstr.FromString("http")),
		NewUpstream(types.NamespacedName{Namespace: "ns1", Name: "other"}, intstr.FromInt32(81)),
	}
	accesses := []*SourceRanges{nil, {Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, {Deny: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	random := func(r *rand.Rand, key types.NamespacedName, created time.Time) *IngressTranslation {
		tr := &IngressTranslation{Ingress: key, CreationTimestamp: created, SSLRedirect: r.IntN(3) > 0, Access: accesses[r.IntN(len(accesses))]}
		// A canary (canary: "true") has routes only: no aliases, options, profile or TLS.
		canary := r.IntN(5) == 0
		if canary {
			tr.Canary = &CanaryRule{Weight: r.IntN(101), WeightTotal: 100}
			tr.Access = nil
		}
		if !canary && r.IntN(4) == 0 { // profiles come and go with the Ingresses that use them
			tr.Profile = &ProfileSettings{CustomHTTPErrors: []string{"404", "502", "404,502"}[r.IntN(3)]}
		}
		for range r.IntN(5) {
			rt := Route{Host: hosts[r.IntN(len(hosts))], Path: paths[r.IntN(len(paths))], PathType: PathPrefix, Upstream: upstreams[r.IntN(len(upstreams))].Name}
			if r.IntN(3) == 0 {
				rt.PathType = PathExact
			}
			if r.IntN(5) == 0 {
				rt.Path, rt.PathType, rt.FromDefaultBackend = "/", PathPrefix, true
			}
			if !slices.ContainsFunc(tr.Routes, func(x Route) bool { return x.Host == rt.Host && x.Path == rt.Path && x.PathType == rt.PathType }) {
				tr.Routes = append(tr.Routes, rt)
			}
		}
		// Aliases (server-alias, from-to-www-redirect): hosts the translation's rules do not name, with a
		// copy of its first host's routes or a redirect to it.
		if !canary && len(tr.Routes) > 0 && r.IntN(3) == 0 {
			first := tr.Routes[0].Host
			ruled := func(h Hostname) bool {
				return slices.ContainsFunc(tr.Routes, func(x Route) bool { return x.Host == h })
			}
			for range 1 + r.IntN(2) {
				a := hosts[r.IntN(len(hosts))]
				if a == "" || ruled(a) {
					continue
				}
				if r.IntN(3) == 0 {
					tr.Routes = append(tr.Routes, Route{Host: a, Path: "/", PathType: PathPrefix, Alias: true, RedirectHost: first})
					continue
				}
				for _, x := range tr.Routes {
					if x.Host == first && !x.Alias {
						x.Host, x.Alias = a, true
						tr.Routes = append(tr.Routes, x)
					}
				}
			}
		}
		if !canary && r.IntN(4) == 0 { // default-backend
			tr.Options = &RouteOptions{DefaultBackend: upstreams[r.IntN(len(upstreams))].Name}
		}
		for _, u := range upstreams {
			if slices.ContainsFunc(tr.Routes, func(x Route) bool { return x.Upstream == u.Name }) || tr.Options != nil && tr.Options.DefaultBackend == u.Name {
				tr.Upstreams = append(tr.Upstreams, u)
			}
		}
		slices.SortFunc(tr.Upstreams, func(a, b Upstream) int { return cmpString(string(a.Name), string(b.Name)) })
		tlsEntries := r.IntN(3)
		if canary {
			tlsEntries = 0
		}
		for range tlsEntries {
			h := tlsHosts[r.IntN(len(tlsHosts))]
			if !slices.ContainsFunc(tr.TLS, func(x TLSHost) bool { return x.Host == h }) {
				tr.TLS = append(tr.TLS, TLSHost{Host: h, ServerTLS: ServerTLS{Secret: types.NamespacedName{Namespace: key.Namespace, Name: fmt.Sprintf("cert-%d", r.IntN(2))}, SSLRedirect: r.IntN(2) == 0}})
			}
		}
		return tr
	}

	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		opts := MergeOptions{}
		if seed%2 == 1 {
			opts.Ownership = HostsByNamespace
		}
		if seed%3 == 0 {
			opts.DefaultBackend = &upstreams[0]
		}
		var m Merger
		live := map[types.NamespacedName]*IngressTranslation{}
		for step := range 120 {
			key := types.NamespacedName{Namespace: namespaces[r.IntN(len(namespaces))], Name: names[r.IntN(len(names))]}
			old := live[key]
			action := r.IntN(10)
			switch {
			case old == nil || action < 3: // new, or a new object of the same name
				live[key] = random(r, key, base.Add(time.Duration(r.IntN(4))*time.Minute))
			case action < 6: // changed
				live[key] = random(r, key, old.CreationTimestamp)
			case action < 8: // the cache hands out a new pointer for unchanged content
				cp := *old
				live[key] = &cp
			default:
				delete(live, key)
			}
			if step%37 == 36 { // options change now and then: everything is merged again
				opts.Ownership = map[HostOwnership]HostOwnership{HostsShared: HostsByNamespace, HostsByNamespace: HostsShared, "": HostsByNamespace}[opts.Ownership]
			}
			ts := make([]*IngressTranslation, 0, len(live)+1)
			for _, tr := range live {
				ts = append(ts, tr)
			}
			ts = append(ts, nil)
			r.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })

			got := m.Merge(ts, opts)
			want := MergeAll(ts, opts)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, step %d: incremental merge differs from a merge from scratch\n got: %+v\nwant: %+v", seed, step, got, want)
			}
			if err := checkUpstreamUsers(&m); err != nil {
				t.Fatalf("seed %d, step %d: %v", seed, step, err)
			}
		}
	}
}

// checkUpstreamUsers compares the Merger's upstream list and the counts beside it with the simple
// representation they replace: a map from each upstream name to the hosts that use it (and the
// default backend), counted from the servers.
func checkUpstreamUsers(m *Merger) error {
	want := map[UpstreamName]int32{}
	if db := m.opts.DefaultBackend; db != nil {
		want[db.Name]++
	}
	for i := range m.servers {
		for _, n := range upstreamNamesOf(&m.servers[i]) {
			want[n]++
		}
	}
	got := map[UpstreamName]int32{}
	if len(m.upstreamUsers) != len(m.upstreamList) {
		return fmt.Errorf("%d upstreams, %d counts", len(m.upstreamList), len(m.upstreamUsers))
	}
	for i, u := range m.upstreamList {
		if i > 0 && m.upstreamList[i-1].Name >= u.Name {
			return fmt.Errorf("upstreams not sorted and unique at %s", u.Name)
		}
		got[u.Name] = m.upstreamUsers[i]
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("upstream users %v, want %v", got, want)
	}
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestMergerKeepsEarlierModels checks that a model the Merger returned is not changed by later merges:
// the reloader and the renderer keep the previous model to compare with the next.
func TestMergerKeepsEarlierModels(t *testing.T) {
	web := NewUpstream(types.NamespacedName{Namespace: "default", Name: "web"}, intstr.FromInt32(80))
	api := NewUpstream(types.NamespacedName{Namespace: "default", Name: "api"}, intstr.FromInt32(80))
	tr := func(name string, host Hostname, up Upstream) *IngressTranslation {
		return &IngressTranslation{Ingress: types.NamespacedName{Namespace: "default", Name: name},
			Routes: []Route{{Host: host, Path: "/", PathType: PathPrefix, Upstream: up.Name}}, Upstreams: []Upstream{up}}
	}
	var m Merger
	a, b := tr("a", "a.example.com", web), tr("b", "b.example.com", web)
	first := m.Merge([]*IngressTranslation{a, b}, MergeOptions{})
	firstCopy := MergeAll([]*IngressTranslation{a, b}, MergeOptions{})
	m.Merge([]*IngressTranslation{tr("a", "a.example.com", api), tr("c", "c.example.com", api)}, MergeOptions{})
	if !reflect.DeepEqual(first, firstCopy) {
		t.Fatalf("a later merge changed an earlier result\n now: %+v\nwant: %+v", first, firstCopy)
	}
}

// TestMergerSharesUpstreams checks that a merge copies no Upstream: one that comes into use is the
// translation's own, the others are the very Upstreams of the previous model (at 10,000 Ingresses a
// change copies pointers, not 20,000 Upstreams), and the previous model's list stays as it was.
func TestMergerSharesUpstreams(t *testing.T) {
	up := func(svc string) Upstream {
		return NewUpstream(types.NamespacedName{Namespace: "default", Name: svc}, intstr.FromInt32(80))
	}
	web, api, other := up("web"), up("api"), up("other")
	tr := func(name string, u Upstream) *IngressTranslation {
		return &IngressTranslation{Ingress: types.NamespacedName{Namespace: "default", Name: name},
			Routes: []Route{{Host: Hostname(name + ".example.com"), Path: "/", PathType: PathPrefix, Upstream: u.Name}}, Upstreams: []Upstream{u}}
	}
	db := up("default-backend")
	opts := MergeOptions{DefaultBackend: &db}
	var m Merger
	a := tr("a", web)
	first := m.Merge([]*IngressTranslation{a, tr("b", api)}, opts).Model
	firstList := slices.Clone(first.Upstreams)
	changed := tr("a", other)
	second := m.Apply(map[types.NamespacedName]TranslationChange{{Namespace: "default", Name: "a"}: {Old: a, New: changed}}, opts).Model

	byName := func(m Model) map[UpstreamName]*Upstream {
		out := map[UpstreamName]*Upstream{}
		for _, u := range m.Upstreams {
			out[u.Name] = u
		}
		return out
	}
	before, after := byName(first), byName(second)
	if want := modelUpstreams(api, db, other); !reflect.DeepEqual(second.Upstreams, want) {
		t.Fatalf("upstreams after the change: %v, want %v", second.Upstreams, want)
	}
	if after[other.Name] != &changed.Upstreams[0] {
		t.Errorf("upstream %s is a copy; want the translation's own", other.Name)
	}
	for _, kept := range []UpstreamName{api.Name, db.Name} {
		if after[kept] != before[kept] {
			t.Errorf("upstream %s was allocated again; want the previous model's", kept)
		}
	}
	if !slices.Equal(first.Upstreams, firstList) || !reflect.DeepEqual(first.Upstreams, modelUpstreams(api, db, web)) {
		t.Errorf("the change altered the previous model's upstreams: %v", first.Upstreams)
	}
	db.Port = intstr.FromInt32(81) // the caller's Upstream is not the models'
	if got, _ := second.Upstream(db.Name); got.Port != intstr.FromInt32(80) {
		t.Errorf("the default backend upstream follows the caller's variable: port %v", got.Port)
	}
}
