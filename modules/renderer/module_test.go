package renderer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

const ns = "apps"

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

// service is a Service with the given resourceVersion (the fake clientset does not count versions) and
// numbered ports, port N called "pN".
func service(name, rv string, ports ...int32) *corev1.Service {
	opts := []gen.ServiceOption{gen.ResourceVersion(rv)}
	for _, p := range ports {
		opts = append(opts, gen.Port(fmt.Sprintf("p%d", p), p))
	}
	return gen.Service(ns, name, opts...)
}

// ingress routes host+path (Prefix) to port of Service svc. It has resourceVersion "1".
func ingress(name, host, path, svc string, port int, opts ...gen.IngressOption) *networkingv1.Ingress {
	return gen.Ingress(ns, name, append([]gen.IngressOption{gen.Rule(host, path, gen.Backend(svc, port))}, opts...)...)
}

// env is a started Renderer in a moduletest.Harness. The test plays the class filter: it publishes
// IngressChange messages once the informer cache shows the Ingress.
type env struct {
	t        *testing.T
	h        *moduletest.Harness
	r        *Renderer
	changes  *pipeline.Topic[modules.IngressChange]
	out      *pipeline.Topic[modules.Rendered]
	rendered *moduletest.Collector[modules.Rendered]
	rec      *moduletest.Recorder
	markers  int
}

func renderOptions() Options {
	return Options{
		Render: nginx.RenderConfig{
			HTTPPort: 8080, HTTPSPort: 8443, StatusPort: 10246, StatusToken: "0123456789abcdef0123456789abcdef",
			Paths:              nginx.Paths{Prefix: "/var/lib/ingress-reactor"},
			DefaultCertificate: "/ssl/default.crt", DefaultCertificateKey: "/ssl/default.key",
		},
		Translate: nginx.DefaultTranslateOptions(),
	}
}

func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	return newEnvWith(t, renderOptions(), objs...)
}

func newEnvWith(t *testing.T, opts Options, objs ...runtime.Object) *env {
	t.Helper()
	h := moduletest.New(t, objs...)
	out := pipeline.NewTopic[modules.Rendered]("rendered")
	t.Cleanup(out.Close) // after the renderer stops: cleanups run last registered first
	e := &env{t: t, h: h, changes: h.IngressChanges, out: out, rendered: moduletest.Collect(out), rec: h.Recorder}
	r, err := New(Params{
		Options: opts, Factory: h.Factory, IngressChanges: h.IngressChanges, Announced: h.Announced, Rendered: out,
		Recorder: h.Recorder, Metrics: h.Metrics, Registry: h.Registry, Log: h.Log,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.r = r
	h.Start()
	h.Run(r)
	return e
}

// accept announces Ingresses as ours, as the class filter does.
func (e *env) accept(names ...string) {
	for _, n := range names {
		e.changes.Publish(modules.IngressChange{Key: key(n), Accepted: true})
	}
}

// synced fires the class filter's signal as it does: once the renderer has taken in every Ingress
// announced so far.
func (e *env) synced() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), moduletest.WaitLimit)
	defer cancel()
	if err := e.changes.Flush(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.h.Announced.Announce()
}

// next waits for the next published configuration.
func (e *env) next() modules.Rendered {
	e.t.Helper()
	v := e.rendered.WaitFor(e.t, "a published configuration", func(modules.Rendered) bool { return true })[0]
	if strings.HasPrefix(v.Hash, "marker-") {
		e.t.Fatalf("expected a rendered configuration, got nothing")
	}
	return v
}

// published returns the configurations published since the last call and not yet taken. A marker
// published after them arrives after all of them (a subscriber gets values in order).
func (e *env) published() []modules.Rendered {
	e.t.Helper()
	e.markers++
	marker := fmt.Sprintf("marker-%d", e.markers)
	e.out.Publish(modules.Rendered{Hash: marker})
	got := e.rendered.WaitFor(e.t, "the marker "+marker, func(v modules.Rendered) bool { return v.Hash == marker })
	return got[:len(got)-1]
}

// updateService writes svc and waits until the renderer's cache shows its resourceVersion.
func (e *env) updateService(svc *corev1.Service) {
	e.t.Helper()
	if _, err := e.h.Client.CoreV1().Services(ns).Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	moduletest.Eventually(e.t, "the service cache to show "+svc.Name+"@"+svc.ResourceVersion, func() bool {
		got, ok := e.r.services.Get(types.NamespacedName{Namespace: ns, Name: svc.Name})
		return ok && got.ResourceVersion == svc.ResourceVersion
	})
}

// updateIngress writes ing, waits until the renderer's cache shows its resourceVersion and announces it.
func (e *env) updateIngress(ing *networkingv1.Ingress) {
	e.t.Helper()
	if _, err := e.h.Client.NetworkingV1().Ingresses(ns).Update(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	moduletest.Eventually(e.t, "the ingress cache to show "+ing.Name+"@"+ing.ResourceVersion, func() bool {
		got, err := e.r.ingresses.Ingresses(ns).Get(ing.Name)
		return err == nil && got.ResourceVersion == ing.ResourceVersion
	})
	e.accept(ing.Name)
}

// metric reads one series from the registry: a counter's or gauge's value, or a histogram's sample
// count. labels are name/value pairs the series must carry; a missing series reads as 0.
func (e *env) metric(name string, labels ...string) float64 {
	e.t.Helper()
	return moduletest.MetricValue(e.t, e.h.Registry, name, labels...)
}

func (e *env) renders(result string) float64 {
	return e.metric("ingress_reactor_renders_total", "result", result)
}

// syncsDone is how many times the renderer's worker finished a sync.
func (e *env) syncsDone() float64 {
	return e.metric("workqueue_work_duration_seconds", "name", "renderer")
}

// settle waits until the renderer has no render queued or running: every key that entered its queue
// has been synced.
func (e *env) settle() {
	e.t.Helper()
	moduletest.Eventually(e.t, "the renderer to become idle", func() bool {
		return e.metric("workqueue_adds_total", "name", "renderer") == e.syncsDone()
	})
}

// served lists the Ingresses that have at least one location in m, by name.
func served(m nginx.Model) []string {
	seen := map[string]bool{}
	for _, s := range m.Servers {
		for _, l := range s.Locations {
			seen[l.Ingress.Name] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// location finds the Ingress that serves host+path in m.
func location(m nginx.Model, host, path string) (string, bool) {
	for _, s := range m.Servers {
		if string(s.Host) != host {
			continue
		}
		for _, l := range s.Locations {
			if l.Path == path {
				return l.Ingress.Name, true
			}
		}
	}
	return "", false
}

func TestFirstRenderWaitsForIngressesAnnounced(t *testing.T) {
	tests := map[string]struct {
		objs []runtime.Object
		// announced are the Ingresses the class filter accepts before it announces them all.
		announced []string
		want      []string
	}{
		"existing ingresses are all in the first configuration": {
			objs: []runtime.Object{
				service("web", "1", 80),
				ingress("a", "a.example", "/", "web", 80),
				ingress("b", "b.example", "/", "web", 80),
			},
			announced: []string{"a", "b"},
			want:      []string{"a", "b"},
		},
		"an empty cluster still gets a configuration": {
			want: []string{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, tc.objs...)
			e.accept(tc.announced...)
			e.r.Trigger() // as a template change would: still no render before the marker
			moduletest.Eventually(t, "the renderer to process the changes", func() bool { return e.syncsDone() >= 1 })
			if got := e.renders("changed") + e.renders("unchanged") + e.renders("error"); got != 0 {
				t.Fatalf("%g renders before the class filter announced every Ingress, want none", got)
			}
			if got := e.published(); len(got) != 0 {
				t.Fatalf("%d configurations published before the class filter announced every Ingress, want none", len(got))
			}

			e.synced()
			v := e.next()
			if got := served(v.Model); !slices.Equal(got, tc.want) {
				t.Errorf("first configuration serves %v, want %v", got, tc.want)
			}
			if v.Hash == "" || len(v.Config) == 0 {
				t.Errorf("published configuration has hash %q and %d bytes", v.Hash, len(v.Config))
			}
			if got := e.renders("changed"); got != 1 {
				t.Errorf("renders_total{result=changed} = %g, want 1", got)
			}
			if got := e.metric("ingress_reactor_config_bytes"); got != float64(len(v.Config)) {
				t.Errorf("config_bytes = %g, want %d", got, len(v.Config))
			}
		})
	}
}

func TestRejectedIngress(t *testing.T) {
	tests := map[string]struct {
		// fix repairs the Ingress "bad", which asks for port 9090 of Service "api" (that has 8080 only).
		fix func(e *env)
	}{
		"fixed by its owner": {fix: func(e *env) {
			e.updateIngress(ingress("bad", "bad.example", "/", "api", 8080, gen.ResourceVersion("2")))
		}},
		"fixed by the service gaining the port": {fix: func(e *env) {
			e.updateService(service("api", "2", 8080, 9090))
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t,
				service("web", "1", 80),
				service("api", "1", 8080),
				ingress("good", "good.example", "/", "web", 80),
				ingress("bad", "bad.example", "/", "api", 9090),
			)
			e.accept("good", "bad")
			e.synced()
			v := e.next()
			if got := served(v.Model); !slices.Equal(got, []string{"good"}) {
				t.Fatalf("configuration serves %v, want only the good Ingress", got)
			}
			rejected := e.rec.WithReason(ReasonRejected)
			if len(rejected) != 1 {
				t.Fatalf("Rejected Events %v, want one", rejected)
			}
			if ev := rejected[0]; ev.Object != ns+"/bad" || ev.Kind != corev1.EventTypeWarning || !strings.Contains(ev.Message, "no TCP port 9090") {
				t.Errorf("Rejected Event %+v, want a Warning on %s/bad naming the missing port", ev, ns)
			}
			if got := e.metric("ingress_reactor_ingresses_rejected"); got != 1 {
				t.Errorf("ingresses_rejected = %g, want 1", got)
			}
			if got := e.metric("ingress_reactor_ingress_rejections_total", "namespace", ns); got != 1 {
				t.Errorf("ingress_rejections_total{namespace=%s} = %g, want 1", ns, got)
			}

			// Renders for other reasons do not repeat the Event.
			for i := 1; i <= 2; i++ {
				e.r.Trigger()
				moduletest.Eventually(t, "a re-render", func() bool { return e.renders("unchanged") >= float64(i) })
			}
			if got := e.rec.WithReason(ReasonRejected); len(got) != 1 {
				t.Errorf("after re-renders: Rejected Events %v, want still one", got)
			}

			tc.fix(e)
			v = e.next()
			if got := served(v.Model); !slices.Equal(got, []string{"bad", "good"}) {
				t.Errorf("after the fix the configuration serves %v, want both Ingresses", got)
			}
			if got := e.metric("ingress_reactor_ingresses_rejected"); got != 0 {
				t.Errorf("after the fix ingresses_rejected = %g, want 0", got)
			}
			if got := e.rec.WithReason(ReasonRejected); len(got) != 1 {
				t.Errorf("after the fix: Rejected Events %v, want no new one", got)
			}
		})
	}
}

func TestConflictingPathGoesToTheOlderIngress(t *testing.T) {
	e := newEnv(t,
		service("web", "1", 80),
		service("other", "1", 80),
		ingress("young", "shared.example", "/app", "other", 80, gen.CreatedAt(time.Hour)),
		ingress("old", "shared.example", "/app", "web", 80),
	)
	e.accept("young", "old")
	e.synced()
	v := e.next()
	if got, _ := location(v.Model, "shared.example", "/app"); got != "old" {
		t.Errorf("shared.example/app is served by %q, want the older Ingress", got)
	}
	conflicts := e.rec.WithReason(ReasonConflict)
	if len(conflicts) != 1 {
		t.Fatalf("Conflict Events %v, want one", conflicts)
	}
	if ev := conflicts[0]; ev.Object != ns+"/young" || ev.Kind != corev1.EventTypeWarning || !strings.Contains(ev.Message, ns+"/old") {
		t.Errorf("Conflict Event %+v, want a Warning on %s/young naming %s/old", ev, ns, ns)
	}
	if got := e.metric("ingress_reactor_ingress_conflicts"); got != 1 {
		t.Errorf("ingress_conflicts = %g, want 1", got)
	}

	e.r.Trigger()
	moduletest.Eventually(t, "a re-render", func() bool { return e.renders("unchanged") >= 1 })
	if got := e.rec.WithReason(ReasonConflict); len(got) != 1 {
		t.Errorf("after a re-render: Conflict Events %v, want still one", got)
	}

	// Once the older Ingress leaves, the younger one gets the path.
	e.changes.Publish(modules.IngressChange{Key: key("old"), Accepted: false})
	v = e.next()
	if got, _ := location(v.Model, "shared.example", "/app"); got != "young" {
		t.Errorf("after the older Ingress left, shared.example/app is served by %q, want young", got)
	}
	if got := e.metric("ingress_reactor_ingress_conflicts"); got != 0 {
		t.Errorf("ingress_conflicts = %g, want 0", got)
	}
}

func TestOnlyChangedConfigurationsArePublished(t *testing.T) {
	e := newEnv(t,
		service("web", "1", 80),
		service("other", "1", 80),
		ingress("a", "a.example", "/", "web", 80),
	)
	e.accept("a")
	e.synced()
	e.next()
	e.settle()
	base := e.renders("unchanged")

	// A render that produces the same configuration publishes nothing.
	e.r.Trigger()
	moduletest.Eventually(t, "a re-render", func() bool { return e.renders("unchanged") >= base+1 })
	e.settle()
	if got := e.published(); len(got) != 0 {
		t.Fatalf("an unchanged configuration was published again (%d times)", len(got))
	}

	// A change to a Service the configuration uses re-renders, even when the result is the same.
	web := service("web", "2", 80)
	web.Labels = map[string]string{"team": "x"}
	e.updateService(web)
	moduletest.Eventually(t, "a re-render after the used service changed", func() bool { return e.renders("unchanged") >= base+2 })
	e.settle()
	if got := e.published(); len(got) != 0 {
		t.Fatalf("a service change without effect published %d configurations", len(got))
	}

	// A Service nobody uses changes. Then the used Service loses the port: the Ingress's
	// current version is rejected, and its last good version stays served (a Warning says so), so the
	// configuration is the same and nothing is published. The renderer hears of both changes in this
	// order, so by the time the second is rendered, a render of the first would have been counted.
	e.updateService(service("other", "2", 81))
	e.updateService(service("web", "3", 8080))
	moduletest.Eventually(t, "a re-render after the used service lost its port", func() bool { return e.renders("unchanged") >= base+3 })
	e.settle()
	if got := e.published(); len(got) != 0 {
		t.Fatalf("the rejected Ingress's last good version is served, yet %d configurations were published", len(got))
	}
	// (Whether a Service no Ingress uses causes a render is TestServiceChangesThatMatter's: counting
	// renders here also counts the informer's late start-up deliveries of the used Service.)
	if got := e.metric("ingress_reactor_ingresses_stale"); got != 1 {
		t.Errorf("ingresses_stale = %g, want 1", got)
	}
	if got := e.renders("changed"); got != 1 {
		t.Errorf("renders_total{result=changed} = %g, want 1", got)
	}
}

func TestServiceChangesThatMatter(t *testing.T) {
	opts := renderOptions()
	opts.DefaultBackend = key("fallback")
	e := newEnvWith(t, opts, service("web", "1", 80), ingress("a", "a.example", "/", "web", 80))
	e.accept("a")
	e.synced()
	e.next()
	tests := map[string]struct {
		svc  *corev1.Service
		want bool
	}{
		"a service an ingress uses": {svc: service("web", "2", 80), want: true},
		"the default backend":       {svc: service("fallback", "1", 80), want: true},
		"an unrelated service":      {svc: service("other", "1", 80), want: false},
		"same name, other namespace": {svc: gen.Service("elsewhere", "web"),
			want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := len(e.r.serviceChanged(tc.svc)) > 0; got != tc.want {
				t.Errorf("a change of %s/%s re-renders: %v, want %v", tc.svc.Namespace, tc.svc.Name, got, tc.want)
			}
		})
	}
}

func TestTLSSecretChangeAlonePublishesNewHostTable(t *testing.T) {
	e := newEnv(t,
		service("web", "1", 80),
		ingress("a", "a.example", "/", "web", 80, gen.TLS("a-tls", "a.example")),
	)
	e.accept("a")
	e.synced()
	first := e.next()
	if got := first.Model.TLSHosts(); !maps.Equal(got, map[nginx.Hostname]types.NamespacedName{"a.example": key("a-tls")}) {
		t.Fatalf("TLS hosts %v, want a.example -> a-tls", got)
	}

	e.updateIngress(ingress("a", "a.example", "/", "web", 80, gen.TLS("a-tls-2", "a.example"), gen.ResourceVersion("2")))
	v := e.next()
	if v.Hash != first.Hash {
		t.Errorf("switching the TLS Secret changed nginx.conf (hash %s -> %s); want the same file", first.Hash, v.Hash)
	}
	if got := v.Model.TLSHosts(); !maps.Equal(got, map[nginx.Hostname]types.NamespacedName{"a.example": key("a-tls-2")}) {
		t.Errorf("TLS hosts after the switch %v, want a.example -> a-tls-2", got)
	}
}

func TestIngressNoLongerAcceptedLeavesTheModel(t *testing.T) {
	e := newEnv(t,
		service("web", "1", 80),
		service("api", "1", 8080),
		ingress("a", "a.example", "/", "web", 80),
		ingress("b", "b.example", "/", "api", 8080),
	)
	e.accept("a", "b")
	e.synced()
	if got := served(e.next().Model); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("configuration serves %v, want a and b", got)
	}

	// The Ingress still exists (for example it moved to another class), but it is no longer ours.
	e.changes.Publish(modules.IngressChange{Key: key("b"), Accepted: false})
	v := e.next()
	if got := served(v.Model); !slices.Equal(got, []string{"a"}) {
		t.Errorf("configuration serves %v, want only a", got)
	}
	for _, u := range v.Model.Upstreams {
		if u.Service == key("api") {
			t.Errorf("upstream %s of the dropped Ingress is still in the model", u.Name)
		}
	}
}

func TestBackendWarningIsNotRepeated(t *testing.T) {
	tests := map[string][]runtime.Object{
		"service missing": {
			ingress("a", "a.example", "/", "missing", 80),
		},
		"service missing and a path lost to an older ingress": {
			service("web", "1", 80),
			ingress("old", "a.example", "/", "web", 80),
			ingress("a", "a.example", "/", "missing", 80, gen.CreatedAt(time.Hour)),
		},
	}
	for name, objs := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, objs...)
			e.accept("a", "old")
			e.synced()
			e.next()
			for i := 1; i <= 2; i++ {
				e.r.Trigger()
				moduletest.Eventually(t, "a re-render", func() bool { return e.renders("unchanged") >= float64(i) })
			}
			warnings := e.rec.WithReason(ReasonWarning)
			if len(warnings) != 1 {
				t.Fatalf("BackendWarning Events after three renders: %v, want one", warnings)
			}
			if ev := warnings[0]; ev.Object != ns+"/a" || !strings.Contains(ev.Message, "does not exist") {
				t.Errorf("BackendWarning Event %+v, want one on %s/a about the missing service", ev, ns)
			}
		})
	}
}

// TestDefaultBackendUsesTheFirstTCPPort: a --default-backend-service that lists a UDP port first is
// routed on its first TCP port, the one the endpoint watcher resolves.
func TestDefaultBackendUsesTheFirstTCPPort(t *testing.T) {
	opts := renderOptions()
	opts.DefaultBackend = key("fallback")
	fallback := gen.Service(ns, "fallback", gen.UDPPort("p53", 53), gen.Port("p8080", 8080))
	e := newEnvWith(t, opts, fallback)
	e.synced()
	v := e.next()
	if want := nginx.NewUpstream(key("fallback"), intstr.FromInt32(8080)).Name; v.Model.DefaultBackend != want {
		t.Errorf("default backend upstream %q, want %q (port 8080, the TCP one)", v.Model.DefaultBackend, want)
	}
}

// hookedServices is a Service lookup that calls hook (once) on the first lookup of a Service, in the
// middle of a render's translation.
type hookedServices struct {
	modules.Services
	once sync.Once
	hook func()
}

func (h *hookedServices) Get(key types.NamespacedName) (*corev1.Service, bool) {
	h.once.Do(h.hook)
	return h.Services.Get(key)
}

// TestIngressLeavingDuringARenderLeavesNoCacheEntry: an Ingress that stops being ours while a render is
// translating it leaves nothing behind in the translation cache once the next render has run (the
// entry the racing render stored used to stay forever: nothing evicted it again).
func TestIngressLeavingDuringARenderLeavesNoCacheEntry(t *testing.T) {
	e := newEnv(t, service("web", "1", 80), ingress("a", "a.example", "/", "web", 80))
	e.r.services = &hookedServices{Services: modules.NewServices(e.h.Factory), hook: func() {
		e.changes.Publish(modules.IngressChange{Key: key("a"), Accepted: false})
		ctx, cancel := context.WithTimeout(context.Background(), moduletest.WaitLimit)
		defer cancel()
		if err := e.changes.Flush(ctx); err != nil { // the renderer has taken the change in
			t.Error(err)
		}
	}}
	e.accept("a")
	e.synced()
	// The render that raced the change, then the one the change queued.
	moduletest.Eventually(t, "two renders", func() bool { return e.syncsDone() >= 2 })
	e.settle()
	if n := e.r.builder.Cached(); n != 0 {
		t.Errorf("translation cache holds %d entries after the only Ingress left, want 0", n)
	}
}

// TestProxySSLSecretChanges: an Ingress whose proxy-ssl-secret does not exist is rejected; the Secret's
// creation re-renders it (served, its backend TLS files written 0600 before the configuration is
// published); a change of another Secret does not re-render.
func TestProxySSLSecretChanges(t *testing.T) {
	opts := renderOptions()
	opts.Render.Paths = nginx.Paths{Prefix: t.TempDir()}
	e := newEnvWith(t, opts, service("web", "1", 443), ingress("a", "a.example", "/", "web", 443,
		gen.Annotations(nginx.AnnotationBackendProtocol, "HTTPS", nginx.AnnotationProxySSLSecret, "backend-ca", nginx.AnnotationProxySSLVerify, "on")))
	e.accept("a")
	e.synced()
	if got := served(e.next().Model); len(got) != 0 {
		t.Fatalf("serves %v before the Secret exists", got)
	}
	if evs := e.rec.WithReason(ReasonRejected); len(evs) != 1 || !strings.Contains(evs[0].Message, "secret "+ns+"/backend-ca does not exist") {
		t.Fatalf("Rejected Events %+v", evs)
	}
	if e.r.objectChanged(nginx.KindSecret, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}}) != nil {
		t.Error("a change of a Secret no Ingress names re-renders")
	}

	if _, err := e.h.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend-ca", ResourceVersion: "1"},
		Data:       map[string][]byte{"ca.crt": selfSignedPEM(t)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := e.next()
	if got := served(v.Model); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("serves %v once the Secret exists, want a", got)
	}
	if len(v.Model.Profiles) != 1 || v.Model.Profiles[0].ProxySSLFiles == "" {
		t.Fatalf("profiles %+v, want one with backend TLS files", v.Model.Profiles)
	}
	file := filepath.Join(opts.Render.Paths.Prefix, nginx.BackendTLSDir, v.Model.Profiles[0].ProxySSLFiles+"-ca.pem")
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the CA file: %v, %v; want it written 0600 before the configuration is published", fi, err)
	}
	if !strings.Contains(string(v.Config), nginx.BackendTLSDir+"/"+v.Model.Profiles[0].ProxySSLFiles+"-ca.pem") {
		t.Error("nginx.conf does not name the CA file")
	}
}

// selfSignedPEM is a self-signed certificate, PEM encoded.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "backend CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
