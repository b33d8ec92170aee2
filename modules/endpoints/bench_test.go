package endpoints

import (
	"context"
	"fmt"
	"github.com/ingress-reactor/ingress-reactor/internal/heapstat"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	networkingv1 "k8s.io/api/networking/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// benchIngresses is the scale of the memory benchmarks: Ingresses, each with its own Service and
// EndpointSlice.
const benchIngresses = 10_000

// benchIngress is Ingress ns/ing-i, routing / by port number and /api by port name to Service svc-i (or
// svc-other, which is not otherwise used).
func benchIngress(i int, svc string) *networkingv1.Ingress {
	return gen.Ingress("ns", fmt.Sprintf("ing-%05d", i), gen.Paths(fmt.Sprintf("h%05d.example.com", i),
		gen.Path(networkingv1.PathTypePrefix, "/", gen.Backend(svc, 80)),
		gen.Path(networkingv1.PathTypePrefix, "/api", gen.Backend(svc, "http"))))
}

func benchService(i int) string { return fmt.Sprintf("svc-%05d", i) }

// benchUpstreams are the upstreams of benchIngress(i, svc), as the renderer lists them.
func benchUpstreams(svc string) []*nginx.Upstream {
	k := types.NamespacedName{Namespace: "ns", Name: svc}
	byNumber, byName := nginx.NewUpstream(k, intstr.FromInt32(80)), nginx.NewUpstream(k, intstr.FromString("http"))
	return []*nginx.Upstream{&byNumber, &byName}
}

// watcherAtScale is a watcher over benchIngresses Ingresses, Services and EndpointSlices (and Service
// svc-other with its slice), none of them announced yet, and the rendered model of all the Ingresses.
type watcherAtScale struct {
	h         *moduletest.Harness
	w         *Watcher
	rendered  *pipeline.Topic[modules.Rendered]
	out       *pipeline.Topic[modules.EndpointsChange]
	published atomic.Int64
	wake      chan struct{} // a value when published has grown
	timeout   *time.Timer
	model     nginx.Model
}

func newWatcherAtScale(b *testing.B) *watcherAtScale {
	b.Helper()
	objs := make([]kruntime.Object, 0, 3*benchIngresses+2)
	var ups []*nginx.Upstream
	addService := func(i int, svc string) {
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		objs = append(objs,
			gen.Service("ns", svc, gen.Port("http", 80)),
			gen.EndpointSlice("ns", svc+"-1", svc, gen.SlicePort("http", 8080), gen.Endpoint(ip)))
	}
	for i := range benchIngresses {
		svc := benchService(i)
		addService(i, svc)
		objs = append(objs, benchIngress(i, svc))
		ups = append(ups, benchUpstreams(svc)...)
	}
	addService(benchIngresses, "svc-other")
	s := &watcherAtScale{h: moduletest.New(b, objs...)}
	cacheRecords(b, s.h)
	s.model = nginx.Model{Upstreams: sortedByName(ups)}
	s.rendered = pipeline.NewTopic[modules.Rendered]("rendered")
	s.out = pipeline.NewTopic[modules.EndpointsChange]("out")
	b.Cleanup(func() { s.rendered.Close(); s.out.Close() })
	s.wake = make(chan struct{}, 1)
	// Counted, not kept: a collector would hold every endpoint list twice over.
	s.out.Subscribe(func(modules.EndpointsChange) {
		s.published.Add(1)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	})
	// The informers run, their caches filled, before the watcher registers its handlers.
	s.h.Factory.Discovery().V1().EndpointSlices().Informer()
	s.h.Factory.Core().V1().Services().Informer()
	s.h.Factory.Networking().V1().Ingresses().Informer()
	s.h.Start()
	return s
}

// start builds and starts the watcher; its handlers are handed every cached object.
func (s *watcherAtScale) start(b *testing.B) {
	b.Helper()
	w, err := New(Params{
		Factory: s.h.Factory, IngressChanges: s.h.IngressChanges, Endpoints: s.out, Rendered: s.rendered,
		// Not the harness's logger, which keeps every debug entry.
		Metrics: s.h.Metrics, Registry: s.h.Registry, Log: zap.NewNop(),
	})
	if err != nil {
		b.Fatal(err)
	}
	s.w = w
	s.h.Run(w)
}

// waitPublished waits until n endpoint changes in all have been published.
func (s *watcherAtScale) waitPublished(b *testing.B, n int64) {
	b.Helper()
	if s.timeout == nil {
		s.timeout = time.NewTimer(time.Minute)
	} else {
		s.timeout.Reset(time.Minute) // not a timer per wait: the change benchmark counts allocations
	}
	defer s.timeout.Stop()
	for s.published.Load() < n {
		select {
		case <-s.wake:
		case <-s.timeout.C:
			b.Fatalf("%d endpoint changes published, want %d", s.published.Load(), n)
		}
	}
}

// announceAll announces every Ingress and the model, and waits until every upstream's endpoints are out.
func (s *watcherAtScale) announceAll(b *testing.B) {
	b.Helper()
	for i := range benchIngresses {
		s.h.IngressChanges.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("ing-%05d", i)}, Accepted: true})
	}
	s.rendered.Publish(modules.Rendered{Model: s.model})
	s.waitPublished(b, 2*benchIngresses)
	ctx := context.Background()
	if err := s.h.IngressChanges.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.rendered.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWatcherMemory reports the heap the watcher keeps per Ingress once benchIngresses Ingresses,
// with a Service and an EndpointSlice each, and the rendered model of them all are taken in and their
// endpoints published: its slice index, reference counts and published lists, its queue's and its
// informer handlers' buffers. The informer caches and the model are there before the first reading:
// they are the informers' and the renderer's memory.
//
//	go test -run '^$' -bench BenchmarkWatcherMemory -benchtime 1x ./modules/endpoints/
func BenchmarkWatcherMemory(b *testing.B) {
	for range b.N {
		b.StopTimer()
		s := newWatcherAtScale(b)
		before := heapstat.Live()
		b.StartTimer()
		s.start(b)
		s.announceAll(b)
		b.StopTimer()
		after := heapstat.Live()
		runtime.KeepAlive(s)
		b.ReportMetric(float64(int64(after)-int64(before))/benchIngresses, "retained-B/ingress")
	}
}

// BenchmarkWatcherIngressChange reports what one Ingress change costs at benchIngresses Ingresses: the
// Ingress moves to another Service (and back, every other iteration), the renderer publishes the model
// with its upstreams replaced, and the watcher publishes the new upstreams' endpoints and removes the
// old ones. The models are built beforehand: they are the renderer's work.
//
//	go test -run '^$' -bench BenchmarkWatcherIngressChange -benchtime 2000x ./modules/endpoints/
func BenchmarkWatcherIngressChange(b *testing.B) {
	s := newWatcherAtScale(b)
	s.start(b)
	s.announceAll(b)
	const moved = benchIngresses / 2
	movedKey := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("ing-%05d", moved)}
	versions := [2]*networkingv1.Ingress{benchIngress(moved, "svc-other"), benchIngress(moved, benchService(moved))}
	var otherModel nginx.Model
	for _, u := range s.model.Upstreams {
		if u.Service.Name != benchService(moved) {
			otherModel.Upstreams = append(otherModel.Upstreams, u)
		}
	}
	otherModel.Upstreams = sortedByName(append(otherModel.Upstreams, benchUpstreams("svc-other")...))
	models := [2]nginx.Model{otherModel, s.model}
	indexer := s.h.Factory.Networking().V1().Ingresses().Informer().GetIndexer()
	published := s.published.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := indexer.Update(versions[i%2]); err != nil {
			b.Fatal(err)
		}
		s.h.IngressChanges.Publish(modules.IngressChange{Key: movedKey, Accepted: true})
		s.rendered.Publish(modules.Rendered{Model: models[i%2]})
		// Two upstreams come (their endpoints) and two go (their removal).
		published += 4
		s.waitPublished(b, published)
	}
}
