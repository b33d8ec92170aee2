package endpoints

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// blockingResolver never answers until released: a DNS server that hangs. It reports when a lookup starts
// and counts the lookups still in flight.
type blockingResolver struct {
	release  chan struct{}
	entered  chan struct{}
	inFlight *atomic.Int32
}

func (r blockingResolver) LookupIPAddr(ctx context.Context, _ string) ([]net.IPAddr, error) {
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	select {
	case r.entered <- struct{}{}:
	default:
	}
	select {
	case <-r.release:
		return []net.IPAddr{{IP: net.ParseIP("192.0.2.99")}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ingressTo is Ingress ns/name whose default backend is port 80 of Service svc.
func ingressTo(name, svc string) *networkingv1.Ingress {
	return gen.Ingress("ns", name, gen.DefaultBackend(gen.Backend(svc, 80)))
}

// webObjects are Service web (port 80, "http") with one endpoint, 192.0.2.1:8080, and an Ingress to it.
func webObjects() []runtime.Object {
	return []runtime.Object{
		gen.Service("ns", "web", gen.Port("http", 80)),
		ingressTo("to-web", "web"),
		gen.EndpointSlice("ns", "web-1", "web", gen.SlicePort("http", 8080), gen.Endpoint("192.0.2.1")),
	}
}

// externalName is ExternalName Service ns/name, an alias of host, with the unnamed port 80.
func externalName(name, host string) *corev1.Service {
	return gen.Service("ns", name, gen.ExternalName(host), gen.Port("", 80))
}

// cacheRecords makes h's EndpointSlice cache hold records, as the app's cache transform does; call it
// before h starts.
func cacheRecords(tb testing.TB, h *moduletest.Harness) {
	tb.Helper()
	err := h.Factory.Discovery().V1().EndpointSlices().Informer().SetTransform(func(obj any) (any, error) {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
			return NewSliceRecord(s), nil
		}
		return obj, nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// runWatcher starts a watcher over objs and returns the topic it reads IngressChanges from and what it
// publishes. It is stopped when the test ends.
func runWatcher(t *testing.T, opts Options, objs ...runtime.Object) (*pipeline.Topic[modules.IngressChange], *moduletest.Collector[modules.EndpointsChange]) {
	in, _, got, _, _ := runWatcherWithClient(t, opts, objs...)
	return in, got
}

// runWatcherWithClient is runWatcher that also returns the topic of rendered models the watcher reads,
// the fake API it watches and the watcher.
func runWatcherWithClient(t *testing.T, opts Options, objs ...runtime.Object) (*pipeline.Topic[modules.IngressChange], *pipeline.Topic[modules.Rendered], *moduletest.Collector[modules.EndpointsChange], *fake.Clientset, *Watcher) {
	t.Helper()
	h := moduletest.New(t, objs...)
	cacheRecords(t, h)
	rendered := pipeline.NewTopic[modules.Rendered]("rendered")
	out := pipeline.NewTopic[modules.EndpointsChange]("out")
	t.Cleanup(func() { // after the watcher stops: cleanups run last registered first
		rendered.Close()
		out.Close()
	})
	got := moduletest.Collect(out)
	w, err := New(Params{
		Options: opts, Factory: h.Factory, IngressChanges: h.IngressChanges, Endpoints: out, Rendered: rendered,
		Metrics: h.Metrics, Registry: h.Registry, Log: h.Log,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.Run(w)
	return h.IngressChanges, rendered, got, h.Client, w
}

// An upstream that the rendered model still uses keeps its endpoints after the Ingress's current version
// stops naming it (the renderer serves a rejected update's last good version); once the model drops it
// too, it is removed.
func TestUpstreamsOfTheRenderedModelStayWatched(t *testing.T) {
	in, rendered, got, client, w := runWatcherWithClient(t, Options{}, webObjects()...)
	key := types.NamespacedName{Namespace: "ns", Name: "to-web"}
	web := types.NamespacedName{Namespace: "ns", Name: "web"}
	watches := func(name nginx.UpstreamName) bool {
		ups := w.upstreamsOfService(web, nil)
		return slices.ContainsFunc(ups, func(u nginx.Upstream) bool { return u.Name == name })
	}
	in.Publish(modules.IngressChange{Key: key, Accepted: true})
	first := nextChange(t, got)
	if first.Removed || len(first.Endpoints) != 1 {
		t.Fatalf("first change %+v, want web's endpoint", first)
	}
	rendered.Publish(modules.Rendered{Model: nginx.Model{Upstreams: upstreamList(first.Upstream)}})

	// The Ingress now names a Service port that does not exist: the renderer rejects it and keeps serving
	// the last good version, whose upstream is still in the model.
	broken := gen.Ingress("ns", "to-web", gen.DefaultBackend(gen.Backend("web", 81)))
	if _, err := client.NetworkingV1().Ingresses("ns").Update(context.Background(), broken, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the watcher to take in the update", func() bool {
		in.Publish(modules.IngressChange{Key: key, Accepted: true})
		w.mu.Lock()
		defer w.mu.Unlock()
		now, _ := w.byIngress.Get(key)
		return len(now) == 1 && now[0].name != first.Upstream.Name
	})
	if !watches(first.Upstream.Name) {
		t.Fatal("the model's upstream is no longer watched while the model still uses it")
	}

	rendered.Publish(modules.Rendered{Model: nginx.Model{}})
	moduletest.Eventually(t, "the upstream to be dropped with the model", func() bool { return !watches(first.Upstream.Name) })
	for c := nextChange(t, got); c.Upstream.Name != first.Upstream.Name || !c.Removed; c = nextChange(t, got) {
	}
}

// nextChange returns the next published change, failing the test when none comes.
func nextChange(t *testing.T, got *moduletest.Collector[modules.EndpointsChange]) modules.EndpointsChange {
	t.Helper()
	return got.WaitFor(t, "an endpoints change", func(modules.EndpointsChange) bool { return true })[0]
}

// A Service whose ExternalName does not resolve must not hold up the endpoints of other Services.
func TestSlowExternalNameDoesNotBlockOtherServices(t *testing.T) {
	ext := externalName("ext", "slow.example.com")
	release := make(chan struct{})
	resolver := blockingResolver{release: release, entered: make(chan struct{}, 1), inFlight: &atomic.Int32{}}
	in, got := runWatcher(t, Options{Resolver: resolver, ExternalNameRefresh: time.Hour}, append(webObjects(), ext, ingressTo("a", "ext"))...)
	t.Cleanup(func() { close(release) }) // before the watcher stops

	// The ExternalName Service first; once its lookup hangs, the other Service changes.
	in.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: "a"}, Accepted: true})
	select {
	case <-resolver.entered:
	case <-time.After(time.Minute):
		t.Fatal("the ExternalName Service was never resolved")
	}
	in.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: "to-web"}, Accepted: true})

	want := nginx.NewUpstream(types.NamespacedName{Namespace: "ns", Name: "web"}, webPort()).Name
	c := nextChange(t, got)
	if c.Upstream.Name != want {
		t.Fatalf("only web's endpoints can be published while the lookup hangs, got %s", c.Upstream.Name)
	}
	if len(c.Endpoints) != 1 || c.Endpoints[0].Address != "192.0.2.1" || c.Endpoints[0].Port != 8080 {
		t.Fatalf("web endpoints: got %v", c.Endpoints)
	}
	if resolver.inFlight.Load() != 1 {
		t.Fatal("web's endpoints were published only after the ExternalName lookup ended: the lane waited behind it")
	}
}

func webPort() intstr.IntOrString { return intstr.FromInt32(80) }

// TestHangingExternalNamesDoNotHoldTheLane: as many ExternalName Services whose DNS lookups hang as the
// lane has workers still leave the lane free: another Service's endpoints are published while every
// lookup is hanging, and each ExternalName Service is published once its answer arrives.
func TestHangingExternalNamesDoNotHoldTheLane(t *testing.T) {
	const hanging = laneWorkers
	objs := webObjects()
	for i := range hanging {
		name := fmt.Sprintf("ext%d", i)
		objs = append(objs, externalName(name, name+".example.com"), ingressTo("to-"+name, name))
	}
	release := make(chan struct{})
	resolver := blockingResolver{release: release, entered: make(chan struct{}, hanging), inFlight: &atomic.Int32{}}
	// Lookups never time out here, so only the lane's design can let web through.
	in, got := runWatcher(t, Options{Resolver: resolver, ExternalNameRefresh: time.Hour, ExternalNameTimeout: time.Hour}, objs...)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})

	for i := range hanging {
		in.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("to-ext%d", i)}, Accepted: true})
	}
	for range hanging {
		select {
		case <-resolver.entered:
		case <-time.After(time.Minute):
			t.Fatal("not every ExternalName Service was looked up")
		}
	}
	in.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: "to-web"}, Accepted: true})
	c := nextChange(t, got)
	if c.Upstream.Service.Name != "web" || len(c.Endpoints) != 1 || c.Endpoints[0].Address != "192.0.2.1" {
		t.Fatalf("first publication while every lookup hangs: %+v, want web's endpoint", c)
	}
	if n := resolver.inFlight.Load(); n != hanging {
		t.Fatalf("web's endpoints were published with %d of %d lookups still hanging: the lane waited behind them", n, hanging)
	}

	close(release)
	released = true
	seen := map[string]bool{}
	for len(seen) < hanging {
		c := nextChange(t, got)
		if len(c.Endpoints) != 1 || c.Endpoints[0].Address != "192.0.2.99" || c.Endpoints[0].Port != 80 {
			t.Fatalf("ExternalName endpoints: got %+v", c)
		}
		seen[c.Upstream.Service.Name] = true
	}
}

// upstreamList is a rendered model's or the stream services' Upstreams list of ups, in their order.
func upstreamList(ups ...nginx.Upstream) []*nginx.Upstream {
	out := make([]*nginx.Upstream, len(ups))
	for i := range ups {
		out[i] = &ups[i]
	}
	return out
}

// TestUpstreamsDiff checks the diff that keeps a rendered model's change from queueing every Service:
// only upstreams that came or went are returned, whatever the order of the lists.
func TestUpstreamsDiff(t *testing.T) {
	u := func(svc string, port int32) *nginx.Upstream {
		up := nginx.NewUpstream(types.NamespacedName{Namespace: "default", Name: svc}, intstr.FromInt32(port))
		return &up
	}
	a, b, c, d := u("a", 80), u("b", 80), u("c", 80), u("c", 81)
	a2, b2 := u("a", 80), u("b", 80) // equal to a and b, allocated apart
	serviceIP := nginx.NewServiceIPUpstream(types.NamespacedName{Namespace: "default", Name: "b"}, intstr.FromInt32(80))
	b3 := &serviceIP
	b3.Name = b.Name // the same name for another upstream: derived names never do that
	type list = []*nginx.Upstream
	tests := map[string]struct {
		before, now, removed, added list
	}{
		"equal":                           {before: list{a, b}, now: list{a, b}},
		"equal values, other pointers":    {before: list{a, b}, now: list{a2, b2}},
		"one added":                       {before: list{a}, now: list{a, c}, added: list{c}},
		"one removed, one added":          {before: list{a, b, c}, now: list{a, c, d}, removed: list{b}, added: list{d}},
		"from nothing":                    {now: list{b, a}, added: list{a, b}},
		"to nothing, unsorted":            {before: list{d, a}, removed: list{a, d}},
		"a duplicate counts twice":        {before: list{a, a}, now: list{a}, removed: list{a}},
		"unsorted on both sides":          {before: list{c, a}, now: list{b, c}, removed: list{a}, added: list{b}},
		"the same name, another upstream": {before: list{a, b}, now: list{a, b3}, removed: list{b}, added: list{b3}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var removed, added list
			diffUpstreams(sortedByName(tc.before), sortedByName(tc.now),
				func(u *nginx.Upstream) { removed = append(removed, u) }, func(u *nginx.Upstream) { added = append(added, u) })
			if !slices.Equal(removed, tc.removed) || !slices.Equal(added, tc.added) {
				t.Errorf("removed %v, added %v; want %v and %v", removed, added, tc.removed, tc.added)
			}
		})
	}
}

// A Service's endpoints follow its EndpointSlices as they come, move to another Service (their
// service-name label changes) and go.
func TestSlicesFollowTheirService(t *testing.T) {
	in, _, got, client, _ := runWatcherWithClient(t, Options{},
		gen.Service("ns", "web", gen.Port("http", 80)), gen.Service("ns", "api", gen.Port("http", 80)),
		ingressTo("to-web", "web"), ingressTo("to-api", "api"),
		gen.EndpointSlice("ns", "web-1", "web", gen.SlicePort("http", 8080), gen.Endpoint("192.0.2.1")))
	ctx := context.Background()
	slicesAPI := client.DiscoveryV1().EndpointSlices("ns")
	// endpointsOf waits until each Service in want has published its endpoints (addresses), in any order.
	endpointsOf := func(want map[string][]string) {
		t.Helper()
		seen := map[string]bool{}
		got.WaitFor(t, fmt.Sprintf("endpoints %v", want), func(c modules.EndpointsChange) bool {
			var addrs []string
			for _, e := range c.Endpoints {
				addrs = append(addrs, e.Address)
			}
			if w, ok := want[c.Upstream.Service.Name]; ok && !c.Removed && slices.Equal(addrs, w) {
				seen[c.Upstream.Service.Name] = true
			}
			return len(seen) == len(want)
		})
	}
	for _, name := range []string{"to-web", "to-api"} {
		in.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: name}, Accepted: true})
	}
	endpointsOf(map[string][]string{"web": {"192.0.2.1"}})

	second := gen.EndpointSlice("ns", "web-2", "web", gen.SlicePort("http", 8080), gen.Endpoint("192.0.2.2"))
	if _, err := slicesAPI.Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	endpointsOf(map[string][]string{"web": {"192.0.2.1", "192.0.2.2"}})

	moved := second.DeepCopy()
	moved.Labels = map[string]string{"kubernetes.io/service-name": "api"}
	moved.ResourceVersion = "2"
	if _, err := slicesAPI.Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	endpointsOf(map[string][]string{"api": {"192.0.2.2"}, "web": {"192.0.2.1"}})

	if err := slicesAPI.Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	endpointsOf(map[string][]string{"web": nil})
}

// service-upstream: the Ingress that asks for it gets the Service's cluster IP and port (a named port
// looked up) as its one endpoint, under an upstream of its own, while another Ingress to the same
// Service port keeps the Pods; a change of the cluster IP is followed, and a headless Service falls
// back to its Pods.
func TestServiceUpstreamPublishesTheClusterIP(t *testing.T) {
	withIP := func(ip string) gen.ServiceFunc {
		return func(s *corev1.Service) { s.Spec.ClusterIP = ip }
	}
	vip := gen.Ingress("ns", "vip", gen.Annotations(nginx.AnnotationServiceUpstream, "true"),
		gen.DefaultBackend(gen.Backend("web", "http")))
	in, _, got, client, _ := runWatcherWithClient(t, Options{}, append(webObjects(), vip)...)
	ctx := context.Background()
	svcs := client.CoreV1().Services("ns")
	svc, err := svcs.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	withIP("10.0.0.10")(svc)
	svc.ResourceVersion = "2"
	if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vipUp := nginx.NewServiceIPUpstream(types.NamespacedName{Namespace: "ns", Name: "web"}, intstr.FromString("http"))
	podsUp := nginx.NewUpstream(types.NamespacedName{Namespace: "ns", Name: "web"}, intstr.FromInt32(80))
	if vipUp.Name == podsUp.Name || !strings.Contains(string(vipUp.Name), "-vip-") {
		t.Fatalf("service-upstream upstream name %q, want one of its own (pods: %q)", vipUp.Name, podsUp.Name)
	}
	// waitFor waits until every upstream in want has published exactly its endpoints.
	waitFor := func(want map[nginx.UpstreamName][]nginx.Endpoint) {
		t.Helper()
		seen := map[nginx.UpstreamName]bool{}
		got.WaitFor(t, fmt.Sprintf("endpoints %v", want), func(c modules.EndpointsChange) bool {
			if w, ok := want[c.Upstream.Name]; ok && !c.Removed {
				seen[c.Upstream.Name] = slices.Equal(c.Endpoints, w)
			}
			for name := range want {
				if !seen[name] {
					return false
				}
			}
			return true
		})
	}
	for _, name := range []string{"to-web", "vip"} {
		in.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: name}, Accepted: true})
	}
	waitFor(map[nginx.UpstreamName][]nginx.Endpoint{
		vipUp.Name:  {{Address: "10.0.0.10", Port: 80}},
		podsUp.Name: {{Address: "192.0.2.1", Port: 8080}},
	})

	svc, _ = svcs.Get(ctx, "web", metav1.GetOptions{})
	withIP("10.0.0.11")(svc)
	svc.ResourceVersion = "3"
	if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(map[nginx.UpstreamName][]nginx.Endpoint{vipUp.Name: {{Address: "10.0.0.11", Port: 80}}})

	svc, _ = svcs.Get(ctx, "web", metav1.GetOptions{})
	withIP(corev1.ClusterIPNone)(svc)
	svc.ResourceVersion = "4"
	if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(map[nginx.UpstreamName][]nginx.Endpoint{vipUp.Name: {{Address: "192.0.2.1", Port: 8080}}})
}

// The upstreams of the TCP and UDP services (StreamUpstreams) are watched like the Ingresses': each gets
// the endpoints of its protocol's Service port, and is removed when the services stop naming it.
func TestStreamUpstreamsAreWatched(t *testing.T) {
	h := moduletest.New(t,
		gen.Service("ns", "dns", gen.Port("dns-tcp", 53), gen.UDPPort("dns", 53)),
		gen.EndpointSlice("ns", "dns-1", "dns", gen.SlicePort("dns-tcp", 5300),
			gen.EndpointSliceFunc(func(e *discoveryv1.EndpointSlice) {
				e.Ports = append(e.Ports, discoveryv1.EndpointPort{Name: ptr.To("dns"), Port: ptr.To(int32(5353)), Protocol: ptr.To(corev1.ProtocolUDP)})
			}), gen.Endpoint("192.0.2.7")),
	)
	cacheRecords(t, h)
	streams := pipeline.NewTopic[modules.StreamUpstreams]("streams")
	out := pipeline.NewTopic[modules.EndpointsChange]("out")
	t.Cleanup(func() { streams.Close(); out.Close() })
	got := moduletest.Collect(out)
	w, err := New(Params{Factory: h.Factory, IngressChanges: h.IngressChanges, Endpoints: out, Streams: streams,
		Metrics: h.Metrics, Registry: h.Registry, Log: h.Log})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.Run(w)

	svc := types.NamespacedName{Namespace: "ns", Name: "dns"}
	tcp := nginx.NewStreamUpstream(svc, intstr.FromInt32(53), false)
	udp := nginx.NewStreamUpstream(svc, intstr.FromString("dns"), true)
	streams.Publish(modules.StreamUpstreams{Upstreams: upstreamList(tcp, udp)})
	want := map[nginx.UpstreamName]int32{tcp.Name: 5300, udp.Name: 5353}
	seen := map[nginx.UpstreamName]int32{}
	got.WaitFor(t, "both stream upstreams' endpoints", func(c modules.EndpointsChange) bool {
		if len(c.Endpoints) == 1 && c.Endpoints[0].Address == "192.0.2.7" {
			seen[c.Upstream.Name] = c.Endpoints[0].Port
		}
		return len(seen) == 2
	})
	if !maps.Equal(seen, want) {
		t.Fatalf("endpoint ports %v, want %v (each protocol's own port)", seen, want)
	}
	streams.Publish(modules.StreamUpstreams{Upstreams: upstreamList(tcp)})
	got.WaitFor(t, "the UDP upstream's removal", func(c modules.EndpointsChange) bool { return c.Removed && c.Upstream.Name == udp.Name })
}

// TestUDPStreamUpstreamOfAnExternalNameService: a UDP service naming an ExternalName Service's UDP port
// gets that port's number.
func TestUDPStreamUpstreamOfAnExternalNameService(t *testing.T) {
	h := moduletest.New(t, gen.Service("ns", "dns", gen.ExternalName("dns.example.com"), gen.Port("dns-tcp", 5300), gen.UDPPort("dns", 5353)))
	cacheRecords(t, h)
	streams := pipeline.NewTopic[modules.StreamUpstreams]("streams")
	out := pipeline.NewTopic[modules.EndpointsChange]("out")
	t.Cleanup(func() { streams.Close(); out.Close() })
	got := moduletest.Collect(out)
	w, err := New(Params{Options: Options{Resolver: fakeResolver{"dns.example.com": {{IP: net.ParseIP("192.0.2.7")}}}},
		Factory: h.Factory, IngressChanges: h.IngressChanges, Endpoints: out, Streams: streams,
		Metrics: h.Metrics, Registry: h.Registry, Log: h.Log})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.Run(w)

	udp := nginx.NewStreamUpstream(types.NamespacedName{Namespace: "ns", Name: "dns"}, intstr.FromString("dns"), true)
	streams.Publish(modules.StreamUpstreams{Upstreams: upstreamList(udp)})
	msgs := got.WaitFor(t, "the UDP upstream's endpoints", func(c modules.EndpointsChange) bool { return c.Upstream.Name == udp.Name })
	c := msgs[len(msgs)-1]
	if want := []nginx.Endpoint{{Address: "192.0.2.7", Port: 5353}}; !slices.Equal(c.Endpoints, want) {
		t.Fatalf("endpoints %v, want %v (the UDP port named dns)", c.Endpoints, want)
	}
}

// idleWatcher is a watcher whose informers and workers do not run: the test fills its caches and calls
// its handlers and sync itself, so that every step has had all its effects when the call returns.
type idleWatcher struct {
	t         *testing.T
	w         *Watcher
	ingresses cache.Indexer
	out       *pipeline.Topic[modules.EndpointsChange]
	got       *moduletest.Collector[modules.EndpointsChange]
}

func newIdleWatcher(t *testing.T, opts Options, objs ...runtime.Object) *idleWatcher {
	t.Helper()
	h := moduletest.New(t)
	out := pipeline.NewTopic[modules.EndpointsChange]("out")
	t.Cleanup(out.Close)
	iw := &idleWatcher{t: t, out: out, got: moduletest.Collect(out)}
	w, err := New(Params{Options: opts, Factory: h.Factory, IngressChanges: h.IngressChanges, Endpoints: out,
		Metrics: h.Metrics, Registry: h.Registry, Log: h.Log})
	if err != nil {
		t.Fatal(err)
	}
	iw.w = w
	iw.ingresses = h.Factory.Networking().V1().Ingresses().Informer().GetIndexer()
	services := h.Factory.Core().V1().Services().Informer().GetIndexer()
	slices := h.Factory.Discovery().V1().EndpointSlices().Informer().GetIndexer()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *networkingv1.Ingress:
			err = iw.ingresses.Add(o)
		case *corev1.Service:
			err = services.Add(o)
		case *discoveryv1.EndpointSlice:
			r := NewSliceRecord(o)
			err = slices.Add(r)
			w.sliceChanged(nil, r, w.ctrl.Queue())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return iw
}

// set stores ing and tells the watcher it was accepted.
func (iw *idleWatcher) set(ing *networkingv1.Ingress) []types.NamespacedName {
	iw.t.Helper()
	if err := iw.ingresses.Update(ing); err != nil {
		iw.t.Fatal(err)
	}
	return iw.w.ingressChanged(modules.IngressChange{Key: types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}, Accepted: true})
}

// reject tells the watcher Ingress ns/name is no longer accepted; it stays in the cache.
func (iw *idleWatcher) reject(name string) []types.NamespacedName {
	return iw.w.ingressChanged(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: name}})
}

// remove deletes Ingress ns/name and tells the watcher.
func (iw *idleWatcher) remove(name string) []types.NamespacedName {
	iw.t.Helper()
	if err := iw.ingresses.Delete(gen.Ingress("ns", name)); err != nil {
		iw.t.Fatal(err)
	}
	return iw.reject(name)
}

// sync syncs Service ns/svc and returns what it published.
func (iw *idleWatcher) sync(svc string) []modules.EndpointsChange {
	iw.t.Helper()
	if err := iw.w.sync(context.Background(), types.NamespacedName{Namespace: "ns", Name: svc}); err != nil {
		iw.t.Fatal(err)
	}
	if err := iw.out.Flush(context.Background()); err != nil {
		iw.t.Fatal(err)
	}
	return iw.got.Take()
}

// refCounts returns, per upstream, how many referrers the watcher counts, checking that each is kept
// under its own Service and stands for the upstream it was given.
func (iw *idleWatcher) refCounts() map[nginx.UpstreamName]int {
	iw.t.Helper()
	iw.w.mu.Lock()
	defer iw.w.mu.Unlock()
	out := map[nginx.UpstreamName]int{}
	for key, s := range iw.w.watched.All() {
		for _, r := range s.refs {
			if r.n == 0 {
				continue // kept until its removal is published
			}
			up := r.upstream(key)
			var want nginx.Upstream
			switch {
			case up.ServiceIP:
				want = nginx.NewServiceIPUpstream(key, up.Port)
			case up.UDP || strings.HasPrefix(string(up.Name), "tcp-"):
				want = nginx.NewStreamUpstream(key, up.Port, up.UDP)
			default:
				want = nginx.NewUpstream(key, up.Port)
			}
			if up != want {
				iw.t.Errorf("Service %s holds upstream %+v, want %+v", key, up, want)
			}
			if r.n <= 0 {
				iw.t.Errorf("upstream %s kept with count %d", r.name, r.n)
			}
			out[r.name] = int(r.n)
		}
		if len(s.refs) == 0 && s.slices == "" && key != iw.w.opts.DefaultBackend {
			iw.t.Errorf("Service %s kept with nothing to keep", key)
		}
	}
	for key, ups := range iw.w.byIngress.All() {
		if len(ups) == 0 {
			iw.t.Errorf("Ingress %s kept with no upstream", key)
		}
	}
	return out
}

func upstreamOf(svc string, port any) nginx.Upstream {
	k := types.NamespacedName{Namespace: "ns", Name: svc}
	if name, ok := port.(string); ok {
		return nginx.NewUpstream(k, intstr.FromString(name))
	}
	return nginx.NewUpstream(k, intstr.FromInt32(int32(port.(int))))
}

// TestReferenceCounts follows the count of users of each upstream (Ingresses, the rendered model, the
// stream services) through changes, and the Services each change queues: a wrong count either keeps
// publishing endpoints nobody uses or removes those still in use.
func TestReferenceCounts(t *testing.T) {
	to := func(name string, backends ...networkingv1.IngressBackend) *networkingv1.Ingress {
		var paths []networkingv1.HTTPIngressPath
		for i, b := range backends {
			paths = append(paths, gen.Path(networkingv1.PathTypePrefix, fmt.Sprintf("/p%d", i), b))
		}
		return gen.Ingress("ns", name, gen.Paths(name+".example.com", paths...))
	}
	web80, webHTTP, api80 := upstreamOf("web", 80), upstreamOf("web", "http"), upstreamOf("api", 80)
	model := func(ups ...nginx.Upstream) func(*idleWatcher) []types.NamespacedName {
		return func(iw *idleWatcher) []types.NamespacedName {
			return iw.w.referencesChanged(modelReferrer, upstreamList(ups...))
		}
	}
	streams := func(ups ...nginx.Upstream) func(*idleWatcher) []types.NamespacedName {
		return func(iw *idleWatcher) []types.NamespacedName {
			return iw.w.referencesChanged(streamsReferrer, upstreamList(ups...))
		}
	}
	set := func(ing *networkingv1.Ingress) func(*idleWatcher) []types.NamespacedName {
		return func(iw *idleWatcher) []types.NamespacedName { return iw.set(ing) }
	}
	remove := func(name string) func(*idleWatcher) []types.NamespacedName {
		return func(iw *idleWatcher) []types.NamespacedName { return iw.remove(name) }
	}
	reject := func(name string) func(*idleWatcher) []types.NamespacedName {
		return func(iw *idleWatcher) []types.NamespacedName { return iw.reject(name) }
	}
	sameModel := upstreamList(api80, web80)
	type step struct {
		do       func(*idleWatcher) []types.NamespacedName
		affected []string // the Services queued
		refs     map[nginx.UpstreamName]int
	}
	tests := map[string][]step{
		"Ingresses sharing a Service port": {
			{do: set(to("a", gen.Backend("web", 80))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
			{do: set(to("b", gen.Backend("web", 80))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 2}},
			{do: set(to("c", gen.Backend("web", 80), gen.Backend("web", 80))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 3}},
			{do: set(to("c", gen.Backend("web", 80))), refs: map[nginx.UpstreamName]int{web80.Name: 3}},
			{do: reject("b"), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 2}},
			{do: reject("b"), refs: map[nginx.UpstreamName]int{web80.Name: 2}},
			{do: remove("a"), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
			{do: remove("c"), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{}},
		},
		"an Ingress switching Service and port": {
			{do: set(to("a", gen.Backend("web", 80))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
			{do: set(to("b", gen.Backend("web", 80))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 2}},
			{do: set(to("a", gen.Backend("api", 80))), affected: []string{"api", "web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1, api80.Name: 1}},
			{do: set(to("b", gen.Backend("web", "http"))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{webHTTP.Name: 1, api80.Name: 1}},
			{do: set(to("a", gen.Backend("web", "http"), gen.Backend("api", 80))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{webHTTP.Name: 2, api80.Name: 1}},
			{do: set(to("a", gen.Backend("web", 80))), affected: []string{"api", "web"}, refs: map[nginx.UpstreamName]int{webHTTP.Name: 1, web80.Name: 1}},
			{do: remove("a"), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{webHTTP.Name: 1}},
			{do: remove("b"), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{}},
		},
		"the model adding and dropping upstreams that Ingresses use too": {
			{do: model(api80, web80), affected: []string{"api", "web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1, api80.Name: 1}},
			{do: set(to("a", gen.Backend("web", 80))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 2, api80.Name: 1}},
			{do: model(web80), affected: []string{"api"}, refs: map[nginx.UpstreamName]int{web80.Name: 2}},
			{do: model(web80, webHTTP), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 2, webHTTP.Name: 1}},
			{do: model(), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
			{do: remove("a"), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{}},
		},
		"the model keeping a rejected Ingress's upstream": {
			{do: set(to("a", gen.Backend("web", 80))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
			{do: model(web80), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 2}},
			{do: reject("a"), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
			{do: set(to("a", gen.Backend("web", 80))), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 2}},
			{do: model(), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
		},
		"the same model again, and an equal one": {
			{do: func(iw *idleWatcher) []types.NamespacedName { return iw.w.referencesChanged(modelReferrer, sameModel) }, affected: []string{"api", "web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1, api80.Name: 1}},
			{do: func(iw *idleWatcher) []types.NamespacedName { return iw.w.referencesChanged(modelReferrer, sameModel) },
				refs: map[nginx.UpstreamName]int{web80.Name: 1, api80.Name: 1}},
			{do: model(api80, web80), refs: map[nginx.UpstreamName]int{web80.Name: 1, api80.Name: 1}},
		},
		"an unsorted model list": {
			{do: model(web80, api80, webHTTP), affected: []string{"api", "web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1, webHTTP.Name: 1, api80.Name: 1}},
			{do: model(webHTTP, web80), affected: []string{"api"}, refs: map[nginx.UpstreamName]int{web80.Name: 1, webHTTP.Name: 1}},
			{do: model(web80), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
		},
		"the stream services and the model sharing an upstream": {
			{do: streams(web80), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
			{do: model(web80), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 2}},
			{do: streams(), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{web80.Name: 1}},
			{do: model(), affected: []string{"web"}, refs: map[nginx.UpstreamName]int{}},
		},
		"an Ingress never accepted, removed": {
			{do: remove("ghost"), refs: map[nginx.UpstreamName]int{}},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			iw := newIdleWatcher(t, Options{}, to("ghost", gen.Backend("web", 80)))
			for i, s := range steps {
				var affected []string
				for _, k := range s.do(iw) {
					affected = append(affected, k.Name)
				}
				slices.Sort(affected)
				if !slices.Equal(affected, s.affected) {
					t.Errorf("step %d: queued %v, want %v", i, affected, s.affected)
				}
				if got := iw.refCounts(); !maps.Equal(got, s.refs) {
					t.Errorf("step %d: counts %v, want %v", i, got, s.refs)
				}
			}
		})
	}
}

// An upstream that several Ingresses and the model use keeps its endpoints until its last user goes;
// then its removal is published once, and the watcher keeps nothing of it but the Service's slice.
func TestSharedUpstreamIsRemovedWithItsLastUser(t *testing.T) {
	iw := newIdleWatcher(t, Options{}, webObjects()[0], webObjects()[2], ingressTo("a", "web"), ingressTo("b", "web"))
	web80 := upstreamOf("web", 80)
	iw.w.ingressChanged(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: "a"}, Accepted: true})
	iw.w.ingressChanged(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: "b"}, Accepted: true})
	iw.w.referencesChanged(modelReferrer, upstreamList(web80))
	got := iw.sync("web")
	if want := []nginx.Endpoint{{Address: "192.0.2.1", Port: 8080}}; len(got) != 1 || got[0].Upstream != web80 || got[0].Removed || !slices.Equal(got[0].Endpoints, want) {
		t.Fatalf("first sync published %+v, want %s's endpoints %v", got, web80.Name, want)
	}
	for _, step := range []func(){
		func() { iw.remove("a") },
		func() { iw.reject("b") },
		func() { iw.set(ingressTo("b", "web")) },
		func() { iw.remove("b") },
	} {
		step()
		if got := iw.sync("web"); len(got) != 0 {
			t.Fatalf("published %+v while the upstream is still in use", got)
		}
	}
	iw.w.referencesChanged(modelReferrer, nil)
	got = iw.sync("web")
	if len(got) != 1 || !got[0].Removed || got[0].Upstream.Name != web80.Name {
		t.Fatalf("after its last user went: published %+v, want the removal of %s", got, web80.Name)
	}
	if got := iw.sync("web"); len(got) != 0 {
		t.Fatalf("published %+v after the removal", got)
	}
	iw.w.mu.Lock()
	s := iw.w.service(types.NamespacedName{Namespace: "ns", Name: "web"})
	iw.w.mu.Unlock()
	if s == nil || len(s.refs) != 0 || s.slices != "web-1" {
		t.Fatalf("kept for web: %+v, want its slice's name only", s)
	}
	if iw.w.usedService(types.NamespacedName{Namespace: "ns", Name: "web"}) != nil {
		t.Fatal("web is still used")
	}
}

// The default backend Service is watched without any Ingress and stays watched when the last Ingress
// using it goes.
func TestDefaultBackendStaysWatched(t *testing.T) {
	def := types.NamespacedName{Namespace: "ns", Name: "web"}
	iw := newIdleWatcher(t, Options{DefaultBackend: def}, webObjects()[0], webObjects()[2], ingressTo("a", "web"))
	web80 := upstreamOf("web", 80)
	if got := iw.sync("web"); len(got) != 1 || got[0].Upstream.Name != web80.Name || len(got[0].Endpoints) != 1 {
		t.Fatalf("default backend published %+v, want %s's endpoint", got, web80.Name)
	}
	iw.set(ingressTo("a", "web"))
	iw.remove("a")
	if got := iw.sync("web"); len(got) != 0 {
		t.Fatalf("published %+v, want nothing: the default backend still uses its port", got)
	}
	if iw.w.usedService(def) == nil {
		t.Fatal("the default backend is no longer watched")
	}
}

// An upstream released while its Service's sync publishes its endpoints (its entry dropped, as nothing
// was published for it when the release came) is kept by what the sync stores back, and the next sync
// publishes its removal: the data plane must not keep the endpoints of an upstream nothing uses.
func TestUpstreamReleasedDuringItsSyncIsRemoved(t *testing.T) {
	iw := newIdleWatcher(t, Options{}, webObjects()[0], webObjects()[2], ingressTo("a", "web"))
	web80 := upstreamOf("web", 80)
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	iw.w.ingressChanged(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: "a"}, Accepted: true})
	iw.remove("a") // the release, while a sync (below) publishes the endpoints it read before it
	iw.w.mu.Lock()
	if s := iw.w.service(key); s != nil && len(s.refs) != 0 {
		t.Errorf("kept %+v for an upstream neither used nor published", s.refs)
	}
	eps := []nginx.Endpoint{{Address: "192.0.2.1", Port: 8080}}
	s := iw.w.serviceEntry(key)
	iw.w.storePublished(s, []published{{name: web80.Name, endpoints: eps}})
	iw.w.tidy(key, s)
	iw.w.mu.Unlock()
	got := iw.sync("web")
	if len(got) != 1 || !got[0].Removed || got[0].Upstream.Name != web80.Name {
		t.Fatalf("published %+v, want the removal of %s", got, web80.Name)
	}
	iw.w.mu.Lock()
	defer iw.w.mu.Unlock()
	if s := iw.w.service(key); s != nil && len(s.refs) != 0 {
		t.Fatalf("kept %+v after the removal was published", s.refs)
	}
}
