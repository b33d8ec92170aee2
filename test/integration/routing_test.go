//go:build integration

package integration

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// Metrics of the data plane that these tests read, besides harness.ReloadsMetric.
const (
	endpointUpdatesMetric = "ingress_reactor_endpoint_updates_total"
	routeUpdatesMetric    = "ingress_reactor_route_updates_total"
	ingressesRejected     = "ingress_reactor_ingresses_rejected"
	nginxRestartsMetric   = "ingress_reactor_nginx_restarts_total"
	rendersMetric         = "ingress_reactor_renders_total"
)

// Event reasons on Ingresses (modules/renderer's ReasonRejected and ReasonConflict; the
// test spells them out because they are what users and their alerts match on).
const (
	reasonRejected = "Rejected"
	reasonConflict = "Conflict"
)

// routingService creates Service name (port 80, port name "http") served by the given
// backends through one ready EndpointSlice.
func routingService(f *harness.Fixture, name string, backends ...*harness.Backend) {
	f.T.Helper()
	f.CreateService(name, 80, backends[0].Port)
	f.ServeBackends(name, backends...)
}

// requireOnly sends harness.SpreadRequests requests and fails the test unless every
// one of them was answered by backend. Use it once the configuration under test is
// known to be live, to assert a state rather than wait for it.
func requireOnly(t *testing.T, r *harness.Reactor, host, path, backend string) {
	t.Helper()
	counts, err := r.Spread(host, path, harness.SpreadRequests)
	if err != nil {
		t.Fatal(err)
	}
	if counts[backend] != harness.SpreadRequests {
		t.Fatalf("%s%s answered by %v, want all %d requests by backend %q", host, path, counts, harness.SpreadRequests, backend)
	}
}

// requireNotRouted fails the test unless a request for host and path gets a 404 that
// NGINX answered itself. Use it once the configuration under test is known to be live.
func requireNotRouted(t *testing.T, r *harness.Reactor, host, path string) {
	t.Helper()
	resp, err := r.Get(host, path)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusNotFound || resp.Echo != nil {
		t.Fatalf("%s%s answered %s, want 404 from NGINX (not routed)", host, path, resp)
	}
}

// TestRoutingServesIngressHostToBackend: with an IngressClass, Services, their
// EndpointSlices and an Ingress, requests for the Ingress's host reach the right
// backend, with Host and request URI intact; Prefix paths match whole path elements,
// the longest wins, and an Exact path matches only itself; other hosts get NGINX's 404.
func TestRoutingServesIngressHostToBackend(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	api := f.StartBackend("api", false)
	exact := f.StartBackend("exact", false)
	routingService(f, "web", web)
	routingService(f, "api", api)
	routingService(f, "exact", exact)
	r := f.StartReactor()
	r.WaitReady()

	f.CreateIngress(f.Ingress("shop", "shop.example",
		harness.IngressBackend{Path: "/", Service: "web", Port: 80},
		harness.IngressBackend{Path: "/api", Service: "api", Port: 80},
		harness.IngressBackend{Path: "/api/status", PathType: networkingv1.PathTypeExact, Service: "exact", Port: 80},
	))
	resp := r.WaitServedBy("shop.example", "/cart/items?sort=price", "web")
	if resp.Echo.Host != "shop.example" || resp.Echo.URI != "/cart/items?sort=price" {
		t.Errorf("backend saw host %q and URI %q, want shop.example and /cart/items?sort=price", resp.Echo.Host, resp.Echo.URI)
	}

	for _, tc := range []struct{ path, backend string }{
		{"/", "web"},
		{"/api", "api"},
		{"/api/", "api"},
		{"/api/users", "api"},
		{"/apiary", "web"}, // Prefix matches path elements, not string prefixes
		{"/api/status", "exact"},
		{"/api/status/x", "api"}, // Exact does not match below itself
	} {
		requireOnly(t, r, "shop.example", tc.path, tc.backend)
	}
	requireNotRouted(t, r, "elsewhere.example", "/")
}

// TestRoutingIgnoresIngressesOfOtherClasses: Ingresses naming another IngressClass,
// carrying another class in the legacy annotation, or naming no class at all (ours is
// not the default class) get NGINX's 404, while an Ingress of our class routes.
func TestRoutingIgnoresIngressesOfOtherClasses(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)

	otherClass := "other-" + f.ID
	_, err := f.Client.NetworkingV1().IngressClasses().Create(f.Ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: otherClass},
		Spec:       networkingv1.IngressClassSpec{Controller: "example.com/another-controller"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create IngressClass %s: %v", otherClass, err)
	}
	t.Cleanup(func() {
		_ = f.Client.NetworkingV1().IngressClasses().Delete(t.Context(), otherClass, metav1.DeleteOptions{})
	})

	r := f.StartReactor()
	r.WaitReady()

	byClassName := f.Ingress("by-class-name", "other-class.example", harness.IngressBackend{Service: "web", Port: 80})
	byClassName.Spec.IngressClassName = &otherClass
	byAnnotation := f.Ingress("by-annotation", "other-annotation.example", harness.IngressBackend{Service: "web", Port: 80})
	byAnnotation.Spec.IngressClassName = nil
	byAnnotation.Annotations = map[string]string{"kubernetes.io/ingress.class": otherClass}
	classless := f.Ingress("classless", "no-class.example", harness.IngressBackend{Service: "web", Port: 80})
	classless.Spec.IngressClassName = nil
	// Created before ours: by the time ours routes, the controller has seen them too.
	for _, ing := range []*networkingv1.Ingress{byClassName, byAnnotation, classless} {
		f.CreateIngress(ing)
	}
	f.CreateIngress(f.Ingress("ours", "ours.example", harness.IngressBackend{Service: "web", Port: 80}))

	r.WaitServedBy("ours.example", "/", "web")
	r.WaitConfigSettled()
	for _, host := range []string{"other-class.example", "other-annotation.example", "no-class.example"} {
		requireNotRouted(t, r, host, "/")
	}
}

// TestRoutingFollowsEndpointSliceChangesWithoutReload: traffic follows the ready
// endpoints of a Service as its EndpointSlices change (added, removed, not ready,
// terminating, a second slice), falling back to serving-but-terminating endpoints only
// when none is ready; none of these changes reloads NGINX.
func TestRoutingFollowsEndpointSliceChangesWithoutReload(t *testing.T) {
	f := harness.New(t)
	a := f.StartBackend("pod-a", false)
	b := f.StartBackend("pod-b", false)
	c := f.StartBackend("pod-c", false)
	if a.Port != b.Port || a.Port != c.Port {
		t.Fatalf("backends on ports %d, %d, %d; one Service needs one target port", a.Port, b.Port, c.Port)
	}
	routingService(f, "web", a)
	r := f.StartReactor()
	r.WaitReady()
	f.CreateIngress(f.Ingress("web", "web.example", harness.IngressBackend{Service: "web", Port: 80}))
	r.WaitServedBy("web.example", "/", "pod-a")
	reloads := r.WaitConfigSettled()
	changedRenders := r.MetricValue(rendersMetric, map[string]string{"result": "changed"})
	pushes := r.MetricValue(endpointUpdatesMetric, map[string]string{"result": "success"})

	slice := func(eps ...harness.Endpoint) {
		f.ApplyEndpointSlice(f.EndpointSlice("web-1", "web", "http", a.Port, eps...))
	}
	steps := []struct {
		name  string
		apply func()
		want  []string
	}{
		{"second endpoint added", func() { slice(a.Endpoint(), b.Endpoint()) }, []string{"pod-a", "pod-b"}},
		{"first endpoint removed", func() { slice(b.Endpoint()) }, []string{"pod-b"}},
		{"endpoint back but not ready", func() { slice(a.Endpoint().AsNotReady(), b.Endpoint()) }, []string{"pod-b"}},
		{"ready again while the other terminates", func() { slice(a.Endpoint(), b.Endpoint().AsTerminating()) }, []string{"pod-a"}},
		{"only terminating endpoints left serve", func() { slice(a.Endpoint().AsNotReady(), b.Endpoint().AsTerminating()) }, []string{"pod-b"}},
		{"second slice of the Service", func() {
			slice(a.Endpoint())
			f.ApplyEndpointSlice(f.EndpointSlice("web-2", "web", "http", c.Port, c.Endpoint()))
		}, []string{"pod-a", "pod-c"}},
		{"second slice emptied", func() {
			f.ApplyEndpointSlice(f.EndpointSlice("web-2", "web", "http", c.Port))
		}, []string{"pod-a"}},
	}
	for _, step := range steps {
		step.apply()
		counts := r.WaitSpread("web.example", "/", step.want...)
		t.Logf("%s: %v", step.name, counts)
	}

	if got := r.MetricValue(harness.ReloadsMetric, nil); got != reloads {
		t.Errorf("%s went from %g to %g during endpoint changes; endpoint changes must not reload NGINX", harness.ReloadsMetric, reloads, got)
	}
	if got := r.MetricValue(rendersMetric, map[string]string{"result": "changed"}); got != changedRenders {
		t.Errorf("%s{result=changed} went from %g to %g during endpoint changes; they must not change nginx.conf", rendersMetric, changedRenders, got)
	}
	if got := r.MetricValue(endpointUpdatesMetric, map[string]string{"result": "success"}); got <= pushes {
		t.Errorf("%s{result=success} stayed at %g although traffic followed %d endpoint changes", endpointUpdatesMetric, got, len(steps))
	}
}

// TestRoutingFollowsIngressUpdatesAndDeletion: changing an Ingress's path or backend, and
// deleting it, take effect through the Lua router without a reload (the old path stops
// routing at once; a deleted Ingress's host gets the 404).
func TestRoutingFollowsIngressUpdatesAndDeletion(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	api := f.StartBackend("api", false)
	routingService(f, "web", web)
	routingService(f, "api", api)
	r := f.StartReactor()
	r.WaitReady()

	f.CreateIngress(f.Ingress("app", "app.example", harness.IngressBackend{Path: "/v1", Service: "web", Port: 80}))
	r.WaitServedBy("app.example", "/v1/items", "web")
	reloads := r.WaitConfigSettled()
	pushes := r.MetricValue(routeUpdatesMetric, map[string]string{"result": "success"})
	requireNotRouted(t, r, "app.example", "/v2")

	f.UpdateIngress("app", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Path = "/v2" })
	r.WaitServedBy("app.example", "/v2/items", "web")
	requireNotRouted(t, r, "app.example", "/v1/items")

	f.UpdateIngress("app", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "api" })
	r.WaitServedBy("app.example", "/v2/items", "api")
	requireOnly(t, r, "app.example", "/v2/items", "api")

	f.DeleteIngress("app")
	r.WaitNotRouted("app.example", "/v2/items")
	if after := r.WaitConfigSettled(); after != reloads {
		t.Errorf("%s went from %g to %g: Ingress changes must not reload NGINX", harness.ReloadsMetric, reloads, after)
	}
	if got := r.MetricValue(routeUpdatesMetric, map[string]string{"result": "success"}); got < pushes+3 {
		t.Errorf("%s{result=success} went from %g to %g for three Ingress changes", routeUpdatesMetric, pushes, got)
	}
}

// TestRoutingRejectsBadIngressAlone: Ingresses the API server accepts but the controller
// cannot serve (a Service port that does not exist, a path with ';', basic auth without its Secret) are rejected with
// a Warning Event and counted, while a good Ingress next to them keeps routing and
// keeps following its updates; fixing a bad Ingress makes it route.
func TestRoutingRejectsBadIngressAlone(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	r := f.StartReactor()
	r.WaitReady()

	f.CreateIngress(f.Ingress("bad-port", "bad-port.example", harness.IngressBackend{Service: "web", Port: 81}))
	f.CreateIngress(f.Ingress("bad-path", "bad-path.example", harness.IngressBackend{Path: "/a;b", Service: "web", Port: 80}))
	// Basic auth whose Secret does not exist: serving it without would expose the backend.
	protected := f.Ingress("protected", "protected.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80})
	protected.Annotations = map[string]string{"nginx.ingress.kubernetes.io/auth-type": "basic", "nginx.ingress.kubernetes.io/auth-secret": "htpasswd"}
	f.CreateIngress(protected)
	f.CreateIngress(f.Ingress("good", "good.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))

	r.WaitServedBy("good.example", "/", "web")
	f.WaitEvent(r, "Ingress", "bad-port", corev1.EventTypeWarning, reasonRejected, "81")
	f.WaitEvent(r, "Ingress", "bad-path", corev1.EventTypeWarning, reasonRejected, `";"`)
	f.WaitEvent(r, "Ingress", "protected", corev1.EventTypeWarning, reasonRejected, "auth-secret]: secret "+f.Namespace+"/htpasswd does not exist")
	r.WaitMetric(ingressesRejected, nil, "== 3", func(v float64) bool { return v == 3 })
	r.WaitConfigSettled()
	requireNotRouted(t, r, "bad-port.example", "/")
	requireNotRouted(t, r, "bad-path.example", "/a;b")
	requireNotRouted(t, r, "protected.example", "/")
	if evs, err := f.Events("Ingress", "good", corev1.EventTypeWarning, ""); err != nil {
		t.Fatal(err)
	} else if len(evs) > 0 {
		t.Errorf("the good Ingress got Warning Events: %s: %s", evs[0].Reason, evs[0].Message)
	}

	// The good Ingress keeps following its changes while the bad ones stay.
	f.UpdateIngress("good", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Path = "/moved" })
	r.WaitServedBy("good.example", "/moved", "web")
	r.WaitNotRouted("good.example", "/")

	// Fixing a bad Ingress serves it.
	f.UpdateIngress("bad-port", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Number = 80 })
	r.WaitServedBy("bad-port.example", "/", "web")
	r.WaitMetric(ingressesRejected, nil, "== 2", func(v float64) bool { return v == 2 })
	requireOnly(t, r, "good.example", "/moved", "web")
}

// TestRoutingConflictOlderIngressWins: when two Ingresses claim the same host and path,
// the older one (by creation time, even though its name sorts last) serves it, the
// younger one's other paths still route, and the younger one gets a Warning Event
// naming the winner; once the winner is deleted, the younger one takes the path over.
func TestRoutingConflictOlderIngressWins(t *testing.T) {
	f := harness.New(t)
	first := f.StartBackend("first", false)
	second := f.StartBackend("second", false)
	routingService(f, "first", first)
	routingService(f, "second", second)
	r := f.StartReactor()
	r.WaitReady()

	older := f.CreateIngress(f.Ingress("zz-older", "shared.example", harness.IngressBackend{Path: "/", Service: "first", Port: 80}))
	r.WaitServedBy("shared.example", "/", "first")
	// creationTimestamp has whole seconds: the younger Ingress must be created in a later
	// second, or the tie would be broken by name (and "aa-younger" sorts first).
	harness.Eventually(t, 5*time.Second, "the clock to pass the older Ingress's creation second", func() (bool, string) {
		now := time.Now()
		return now.Truncate(time.Second).After(older.CreationTimestamp.Time), now.String()
	})
	younger := f.CreateIngress(f.Ingress("aa-younger", "shared.example",
		harness.IngressBackend{Path: "/", Service: "second", Port: 80},
		harness.IngressBackend{Path: "/only-younger", Service: "second", Port: 80},
	))
	if !older.CreationTimestamp.Before(&younger.CreationTimestamp) {
		t.Fatalf("creation timestamps %s and %s are not ordered; the test cannot tell age from name", older.CreationTimestamp, younger.CreationTimestamp)
	}

	r.WaitServedBy("shared.example", "/only-younger", "second")
	r.WaitConfigSettled()
	requireOnly(t, r, "shared.example", "/", "first")
	ev := f.WaitEvent(r, "Ingress", "aa-younger", corev1.EventTypeWarning, reasonConflict, f.Namespace+"/zz-older")
	if !strings.Contains(ev.Message, `"/"`) {
		t.Errorf("Conflict Event %q does not name the contested path \"/\"", ev.Message)
	}
	if evs, err := f.Events("Ingress", "zz-older", corev1.EventTypeWarning, ""); err != nil {
		t.Fatal(err)
	} else if len(evs) > 0 {
		t.Errorf("the winning Ingress got Warning Events: %s: %s", evs[0].Reason, evs[0].Message)
	}

	f.DeleteIngress("zz-older")
	r.WaitServedBy("shared.example", "/", "second")
	r.WaitConfigSettled()
	requireOnly(t, r, "shared.example", "/", "second")
}

// TestRoutingRecoversFromNginxCrash: when the NGINX master dies (SIGKILL), the
// controller starts it again, counts the restart, pushes the endpoints to the fresh
// instance (which starts with none) and keeps following endpoint changes.
func TestRoutingRecoversFromNginxCrash(t *testing.T) {
	f := harness.New(t)
	a := f.StartBackend("pod-a", false)
	b := f.StartBackend("pod-b", false)
	routingService(f, "web", a, b)
	r := f.StartReactor()
	r.WaitReady()
	f.CreateIngress(f.Ingress("web", "web.example", harness.IngressBackend{Service: "web", Port: 80}))
	r.WaitSpread("web.example", "/", "pod-a", "pod-b")
	r.WaitConfigSettled()

	restarts := r.MetricValue(nginxRestartsMetric, nil)
	pid, err := r.NginxMasterPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill NGINX master %d: %v", pid, err)
	}
	t.Logf("killed NGINX master %d", pid)

	r.WaitMetric(nginxRestartsMetric, nil, fmt.Sprintf(">= %g", restarts+1), func(v float64) bool { return v >= restarts+1 })
	r.Eventually(harness.DefaultTimeout, "a new NGINX master PID", func() (bool, string) {
		got, err := r.NginxMasterPID()
		if err != nil {
			return false, err.Error()
		}
		return got != pid, fmt.Sprintf("PID %d", got)
	})
	// Both endpoints: the fresh NGINX got the endpoint lists again.
	r.WaitSpread("web.example", "/", "pod-a", "pod-b")
	r.WaitReady()

	// The endpoint lane works with the new instance.
	f.ServeBackends("web", b)
	r.WaitSpread("web.example", "/", "pod-b")
	if got := r.MetricValue(nginxRestartsMetric, nil); got != restarts+1 {
		t.Errorf("%s = %g after one crash, want %g", nginxRestartsMetric, got, restarts+1)
	}
}

// TestRoutingReadyOnlyOnceConfigIsLive: /readyz stays unready while no configuration
// could be made live, and once it reports ready, the Ingresses that existed at start
// already route (so a rolling update that waits for readiness drops no traffic).
func TestRoutingReadyOnlyOnceConfigIsLive(t *testing.T) {
	t.Run("no configuration live", func(t *testing.T) {
		f := harness.New(t)
		// An "nginx" that fails every command: no configuration can pass its test.
		r := f.StartReactor("--nginx-binary=/bin/false")
		r.WaitMetric(harness.ReloadsMetric, map[string]string{"result": "failure"}, ">= 1", func(v float64) bool { return v >= 1 })
		code, body, err := r.GetHealthz("/readyz")
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusOK {
			t.Errorf("/readyz = 200 %q although no configuration was applied", body)
		}
		if code, body, err := r.GetHealthz("/healthz"); err != nil || code != http.StatusOK {
			t.Errorf("/healthz = %d %q, %v; want 200: the process is alive, only not ready", code, body, err)
		}
	})

	t.Run("ready means routing", func(t *testing.T) {
		f := harness.New(t)
		web := f.StartBackend("web", false)
		routingService(f, "web", web)
		f.CreateIngress(f.Ingress("web", "ready.example", harness.IngressBackend{Service: "web", Port: 80}))
		r := f.StartReactor()
		r.WaitReady()
		resp, err := r.Get("ready.example", "/")
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusOK || resp.Echo == nil || resp.Echo.Name != "web" {
			t.Errorf("first request after /readyz turned 200 answered %s, want 200 from backend web", resp)
		}
	})
}
