package endpoints

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// TestRandomChangesKeepCountsAndPublished drives a watcher through seeded random sequences of Ingress
// updates, rejections, rendered models and stream services (sorted, unsorted, the same list again),
// EndpointSlices added, moved between Services and deleted, and syncs. After every step each upstream's
// count must be the number of its users; at the end, once every Service is synced, exactly the upstreams
// still used (and the default backend's) must have endpoints published and not removed, and no Service
// entry may be kept with nothing in it.
func TestRandomChangesKeepCountsAndPublished(t *testing.T) {
	svcs := []string{"s0", "s1", "s2"}
	def := types.NamespacedName{Namespace: "ns", Name: "s0"}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		var objs []runtime.Object
		for _, s := range svcs {
			objs = append(objs, gen.Service("ns", s, gen.Port("http", 80)))
		}
		opts := Options{}
		if seed%2 == 0 {
			opts.DefaultBackend = def
		}
		iw := newIdleWatcher(t, opts, objs...)
		randPort := func() intstr.IntOrString {
			if r.IntN(2) == 0 {
				return intstr.FromInt32(80)
			}
			return intstr.FromString("http")
		}
		randList := func() []*nginx.Upstream {
			var l []*nginx.Upstream
			for range r.IntN(4) {
				k := types.NamespacedName{Namespace: "ns", Name: svcs[r.IntN(len(svcs))]}
				switch r.IntN(4) {
				case 0:
					l = append(l, new(nginx.NewServiceIPUpstream(k, randPort())))
				case 1:
					l = append(l, new(nginx.NewStreamUpstream(k, randPort(), r.IntN(2) == 0)))
				default:
					l = append(l, new(nginx.NewUpstream(k, randPort())))
				}
			}
			slices.SortFunc(l, byName)
			l = slices.CompactFunc(l, func(a, b *nginx.Upstream) bool { return a.Name == b.Name })
			if r.IntN(3) == 0 {
				r.Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
			}
			return l
		}
		accepted := map[string][]nginx.Upstream{}
		var model, streams []*nginx.Upstream
		sliceExists := map[string]bool{}
		published := map[nginx.UpstreamName]bool{}
		record := func(svc string) {
			for _, c := range iw.sync(svc) {
				published[c.Upstream.Name] = !c.Removed
			}
		}
		for step := range 60 {
			switch r.IntN(8) {
			case 0, 1:
				name := fmt.Sprintf("i%d", r.IntN(4))
				var paths []networkingv1.HTTPIngressPath
				for i := range r.IntN(3) {
					var port any = 80
					if r.IntN(2) == 0 {
						port = "http"
					}
					paths = append(paths, gen.Path(networkingv1.PathTypePrefix, fmt.Sprintf("/p%d", i), gen.Backend(svcs[r.IntN(len(svcs))], port)))
				}
				o := []gen.IngressOption{gen.Paths(name+".example.com", paths...)}
				if r.IntN(3) == 0 {
					o = append(o, gen.Annotations(nginx.AnnotationServiceUpstream, "true"))
				}
				ing := gen.Ingress("ns", name, o...)
				iw.set(ing)
				accepted[name] = nginx.UpstreamsOf(ing)
			case 2:
				name := fmt.Sprintf("i%d", r.IntN(4))
				iw.reject(name)
				delete(accepted, name)
			case 3:
				if r.IntN(3) != 0 {
					model = randList()
				}
				iw.w.referencesChanged(modelReferrer, model) // a third of the time the same list again
			case 4:
				streams = randList()
				iw.w.referencesChanged(streamsReferrer, streams)
			case 5:
				name := fmt.Sprintf("sl%d", r.IntN(4))
				o := gen.EndpointSlice("ns", name, svcs[r.IntN(len(svcs))], gen.SlicePort("http", 8080), gen.Endpoint(fmt.Sprintf("192.0.2.%d", r.IntN(5)+1)))
				var old any
				if sliceExists[name] {
					old, _, _ = iw.w.slices.GetByKey("ns/" + name)
					if err := iw.w.slices.Update(o); err != nil {
						t.Fatal(err)
					}
				} else if err := iw.w.slices.Add(o); err != nil {
					t.Fatal(err)
				}
				iw.w.sliceChanged(old, o, iw.w.ctrl.Queue())
				sliceExists[name] = true
			case 6:
				name := fmt.Sprintf("sl%d", r.IntN(4))
				if sliceExists[name] {
					old, _, _ := iw.w.slices.GetByKey("ns/" + name)
					if err := iw.w.slices.Delete(old); err != nil {
						t.Fatal(err)
					}
					iw.w.sliceChanged(old, nil, iw.w.ctrl.Queue())
					delete(sliceExists, name)
				}
			case 7:
				record(svcs[r.IntN(len(svcs))])
			}
			want := map[nginx.UpstreamName]int{}
			for _, ups := range accepted {
				for _, u := range ups {
					want[u.Name]++
				}
			}
			for _, u := range slices.Concat(model, streams) {
				want[u.Name]++
			}
			if got := iw.refCounts(); !maps.Equal(got, want) {
				t.Fatalf("seed %d, step %d: counts %v, want %v", seed, step, got, want)
			}
		}
		for _, s := range svcs {
			record(s)
		}
		used := map[nginx.UpstreamName]bool{}
		for _, ups := range accepted {
			for _, u := range ups {
				used[u.Name] = true
			}
		}
		for _, u := range slices.Concat(model, streams) {
			used[u.Name] = true
		}
		if opts.DefaultBackend.Name != "" {
			used[nginx.NewUpstream(def, intstr.FromInt32(80)).Name] = true
		}
		for name := range published { // a published upstream that is not used must have been removed
			if !used[name] {
				used[name] = false
			}
		}
		for name, want := range used {
			if published[name] != want {
				t.Fatalf("seed %d: upstream %s published %v, want %v", seed, name, published[name], want)
			}
		}
	}
}

// hookIndexer runs hook (once) when a sync looks up an EndpointSlice: between the moment the sync has
// read the Service's upstreams and the moment it stores what it published.
type hookIndexer struct {
	cache.Indexer
	hook func()
}

func (h *hookIndexer) GetByKey(key string) (any, bool, error) {
	if f := h.hook; f != nil {
		h.hook = nil
		f()
	}
	return h.Indexer.GetByKey(key)
}

// An upstream whose last user goes, with the Service's last slice, while its first sync runs: the
// Service's entry is dropped under the sync, which must still keep what it published, so that the next
// sync publishes the removal instead of leaving the endpoints in NGINX for good.
func TestUpstreamReleasedDuringItsFirstSyncIsRemoved(t *testing.T) {
	objs := webObjects()
	iw := newIdleWatcher(t, Options{}, objs...)
	web80 := upstreamOf("web", 80)
	iw.set(ingressTo("to-web", "web"))
	slice := objs[2]
	iw.w.slices = &hookIndexer{Indexer: iw.w.slices, hook: func() {
		iw.w.sliceChanged(slice, nil, iw.w.ctrl.Queue())
		iw.remove("to-web")
	}}
	if got := iw.sync("web"); len(got) != 1 || got[0].Removed || got[0].Upstream.Name != web80.Name {
		t.Fatalf("first sync published %+v, want %s's endpoints", got, web80.Name)
	}
	if got := iw.sync("web"); len(got) != 1 || !got[0].Removed || got[0].Upstream.Name != web80.Name {
		t.Fatalf("second sync published %+v, want the removal of %s", got, web80.Name)
	}
	iw.refCounts() // nothing kept
}
