package app

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/endpoints"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/modules/renderer"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// lossyWatch lists and watches objects of one kind through a clientset, and lets a test lose watch events
// and then make the informer list again, as after a watch that expired: what it lost it then learns from
// the new list, deletions as tombstones (cache.DeletedFinalStateUnknown).
type lossyWatch struct {
	client  kubernetes.Interface
	list    func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)
	mu      sync.Mutex
	losing  bool
	// expire ends the current watch with a "resource version too old" error, as the API server does when
	// a watch falls behind: the informer lists again.
	expire chan struct{}
}

// newLossyWatch is a lossyWatch of the objects that a typed client's list and watch return (every
// namespace's).
func newLossyWatch[L runtime.Object](client kubernetes.Interface, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *lossyWatch {
	return &lossyWatch{client: client, expire: make(chan struct{}, 1),
		list:    func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return list(ctx, opts) },
		watchFn: watchFn,
	}
}

// newSliceWatch is a lossyWatch of every EndpointSlice.
func newSliceWatch(client kubernetes.Interface) *lossyWatch {
	return newLossyWatch(client, client.DiscoveryV1().EndpointSlices("").List, client.DiscoveryV1().EndpointSlices("").Watch)
}

func (s *lossyWatch) listWatch() cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  s.list,
		WatchFuncWithContext: s.watch,
	}, s.client)
}

func (s *lossyWatch) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	in, err := s.watchFn(ctx, opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.losing = false
	s.mu.Unlock()
	ch := make(chan watch.Event)
	out := watch.NewProxyWatcher(ch)
	go func() {
		defer in.Stop()
		send := func(ev watch.Event) bool {
			select {
			case ch <- ev:
				return true
			case <-out.StopChan():
				return false
			}
		}
		for {
			select {
			case ev, ok := <-in.ResultChan():
				s.mu.Lock()
				losing := s.losing
				s.mu.Unlock()
				if !ok || (!losing && !send(ev)) {
					return
				}
			case <-s.expire:
				send(watch.Event{Type: watch.Error, Object: &metav1.Status{
					Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version",
				}})
				return
			case <-out.StopChan():
				return
			}
		}
	}()
	return out, nil
}

// lose makes the current watch drop its events until the informer watches again.
func (s *lossyWatch) lose() {
	s.mu.Lock()
	s.losing = true
	s.mu.Unlock()
}

// recordInformer is the informer of one kind in a factory with the app's cache transform (the other kinds'
// informers made as the app makes them), watching through a lossyWatch, and the tombstones its handlers
// were given.
type recordInformer struct {
	cache.SharedIndexInformer
	factory    informers.SharedInformerFactory
	mu         sync.Mutex
	tombstones []any
}

func newRecordInformer(t *testing.T, client kubernetes.Interface, lw *lossyWatch, obj runtime.Object) *recordInformer {
	t.Helper()
	r := &recordInformer{factory: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(cacheTransform))}
	r.SharedIndexInformer = r.factory.InformerFor(obj, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(lw.listWatch(), obj, 0, cache.Indexers{})
	})
	registerUnindexedInformers(r.factory, "")
	if _, err := r.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			r.mu.Lock()
			r.tombstones = append(r.tombstones, d.Obj)
			r.mu.Unlock()
		}
	}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// start starts the factory's informers (stopped when the test ends) and waits until their caches synced.
func (r *recordInformer) start(t *testing.T) {
	t.Helper()
	stop := make(chan struct{})
	r.factory.Start(stop)
	t.Cleanup(func() { close(stop); r.factory.Shutdown() })
	for typ, ok := range r.factory.WaitForCacheSync(t.Context().Done()) {
		if !ok {
			t.Fatalf("cache of %v did not sync", typ)
		}
	}
}

// tombstone waits for the informer's handlers to be given a tombstone, fails unless it is the only one, and
// returns what it carries. Each handler has its own goroutine: this one may see the tombstone after the
// modules did.
func (r *recordInformer) tombstone(t *testing.T, what string) any {
	t.Helper()
	moduletest.Eventually(t, what, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.tombstones) > 0
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.tombstones) != 1 {
		t.Fatalf("%d tombstones, want %s", len(r.tombstones), what)
	}
	return r.tombstones[0]
}

// announceIngress tells the modules that the class filter accepted the Ingress ns/name and that every
// Ingress of the start is announced, as the class filter does once its cache synced.
func announceIngress(t *testing.T, h *moduletest.Harness, ns, name string) {
	t.Helper()
	h.IngressChanges.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: ns, Name: name}, Accepted: true})
	flush, cancel := context.WithTimeout(t.Context(), moduletest.WaitLimit)
	defer cancel()
	if err := h.IngressChanges.Flush(flush); err != nil {
		t.Fatal(err)
	}
	h.Announced.Announce()
}

// newRecordRenderer is the renderer module on factory's caches, with what it renders collected.
func newRecordRenderer(t *testing.T, h *moduletest.Harness, factory informers.SharedInformerFactory) (*renderer.Renderer, *moduletest.Collector[modules.Rendered]) {
	t.Helper()
	rendered := pipeline.NewTopic[modules.Rendered]("rendered")
	t.Cleanup(rendered.Close)
	renders := moduletest.Collect(rendered)
	r, err := renderer.New(renderer.Params{
		Options: renderer.Options{
			Render: nginx.RenderConfig{HTTPPort: 8080, HTTPSPort: 8443, StatusPort: 10246, StatusToken: "0123456789abcdef0123456789abcdef",
				Paths: nginx.Paths{Prefix: "/var/lib/ingress-reactor"}, DefaultCertificate: "/ssl/default.crt", DefaultCertificateKey: "/ssl/default.key"},
			Translate: nginx.DefaultTranslateOptions(),
		},
		Factory: factory, IngressChanges: h.IngressChanges, Announced: h.Announced, Rendered: rendered,
		Recorder: h.Recorder, Metrics: h.Metrics, Registry: h.Registry, Log: h.Log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, renders
}

// TestEndpointSliceCacheOfRecords: through a real informer with the cache transform, the EndpointSlice
// cache holds records, keyed by namespace and name, and the endpoints module publishes the endpoints of
// slices as they are added, updated and deleted, a deletion learnt from a new list (a tombstone) too.
func TestEndpointSliceCacheOfRecords(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset(
		gen.Service("ns", "web", gen.Port("http", 80)),
		gen.Ingress("ns", "to-web", gen.DefaultBackend(gen.Backend("web", 80))),
		gen.EndpointSlice("ns", "web-1", "web", gen.SlicePort("http", 8080), gen.Endpoint("192.0.2.1")),
	)
	sw := newSliceWatch(client)
	sliceInf := newRecordInformer(t, client, sw, &discoveryv1.EndpointSlice{})
	factory := sliceInf.factory

	h := moduletest.New(t)
	out := pipeline.NewTopic[modules.EndpointsChange]("endpoints")
	t.Cleanup(out.Close)
	got := moduletest.Collect(out)
	w, err := endpoints.New(endpoints.Params{Factory: factory, IngressChanges: h.IngressChanges, Endpoints: out,
		Metrics: h.Metrics, Registry: h.Registry, Log: h.Log})
	if err != nil {
		t.Fatal(err)
	}
	sliceInf.start(t)
	h.Run(w)
	h.IngressChanges.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: "to-web"}, Accepted: true})

	waitFor := func(what string, want ...nginx.Endpoint) {
		t.Helper()
		got.WaitFor(t, what, func(c modules.EndpointsChange) bool { return !c.Removed && slices.Equal(c.Endpoints, want) })
	}
	ep := func(addr string) nginx.Endpoint { return nginx.Endpoint{Address: addr, Port: 8080} }
	waitFor("the first slice's endpoint", ep("192.0.2.1"))

	o, exists, err := sliceInf.GetIndexer().GetByKey("ns/web-1")
	if r, ok := o.(*endpoints.SliceRecord); err != nil || !exists || !ok || r.ServiceName() != "web" {
		t.Fatalf("the cache holds %#v under ns/web-1 (exists %v, %v), want the slice's record", o, exists, err)
	}

	slicesAPI := client.DiscoveryV1().EndpointSlices("ns")
	update := gen.EndpointSlice("ns", "web-1", "web", gen.SlicePort("http", 8080), gen.Endpoint("192.0.2.2"),
		gen.Endpoint("192.0.2.9", gen.NotReady()), gen.ResourceVersion("2")) // the fake API sets none
	if _, err := slicesAPI.Update(ctx, update, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the updated slice's ready endpoint", ep("192.0.2.2"))

	second := gen.EndpointSlice("ns", "web-2", "web", gen.SlicePort("http", 8080), gen.Endpoint("192.0.2.3"))
	if _, err := slicesAPI.Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the endpoints of both slices", ep("192.0.2.2"), ep("192.0.2.3"))

	if err := slicesAPI.Delete(ctx, "web-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the first slice's endpoint after the second's deletion", ep("192.0.2.2"))
	if _, exists, _ := sliceInf.GetIndexer().GetByKey("ns/web-2"); exists {
		t.Error("the deleted slice is still cached")
	}

	// The informer misses the deletion of web-1 and learns of it from the next list.
	sw.lose()
	if err := slicesAPI.Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sw.expire <- struct{}{}
	waitFor("no endpoints once the tombstone of the last slice arrives")
	if _, exists, _ := sliceInf.GetIndexer().GetByKey("ns/web-1"); exists {
		t.Error("the slice deleted while the watch was losing events is still cached")
	}
	tomb := sliceInf.tombstone(t, "the tombstone of web-1")
	if r, ok := tomb.(*endpoints.SliceRecord); !ok || r.GetName() != "web-1" {
		t.Errorf("the tombstone carries %#v, want web-1's record", tomb)
	}
}
