//go:build integration

package integration

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestTLSEntryOfAnotherNamespaceDoesNotTakeTheHost: namespace A serves plain.example without TLS;
// namespace B then routes only plain.example/b-only and lists plain.example under spec.tls with its own
// Secret. A's paths keep plain HTTP (before, they answered 308 to HTTPS) and HTTPS on the host does not
// present B's certificate (before, A's backend was served behind it); B gets a Warning Event that says
// why its entry does not choose the host's certificate.
func TestTLSEntryOfAnotherNamespaceDoesNotTakeTheHost(t *testing.T) {
	a := harness.New(t)
	b := harness.New(t)
	webA := a.StartBackend("web-a", false)
	routingService(a, "web-a", webA)
	webB := b.StartBackend("web-b", false)
	routingService(b, "web-b", webB)
	bCert := newTestCert(t, "plain.example", "plain.example")
	applyTLSSecret(b, "b-tls", bCert.CertPEM, bCert.KeyPEM)

	r := a.StartReactor("--watch-namespace=")
	r.WaitReady()
	a.CreateIngress(a.Ingress("plain", "plain.example", harness.IngressBackend{Service: "web-a", Port: 80}))
	r.WaitServedBy("plain.example", "/", "web-a")
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has whole seconds: B's Ingress is the younger one

	ing := b.Ingress("b", "plain.example", harness.IngressBackend{Path: "/b-only", Service: "web-b", Port: 80})
	class := a.IngressClass
	ing.Spec.IngressClassName = &class
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"plain.example"}, SecretName: "b-tls"}}
	b.CreateIngress(ing)

	// Plain HTTP for both: the host serves no TLS, since A routes its oldest rule and lists none.
	r.WaitServedBy("plain.example", "/b-only", "web-b")
	resp, err := r.Get("plain.example", "/")
	if err != nil || resp.Status != http.StatusOK || resp.Echo == nil || resp.Echo.Name != "web-a" {
		t.Fatalf("GET http://plain.example/ after B's TLS entry: %v, %v; want 200 from web-a, no redirect", resp, err)
	}
	waitServedCertificate(r, harness.Request{Host: "plain.example"}, "web-a", "the fake default certificate, not B's", isFakeDefault)
	ev := b.WaitEvent(r, "Ingress", "b", corev1.EventTypeWarning, reasonConflict, "does not choose the host's certificate", a.Namespace+"/plain")
	t.Logf("Event on B's Ingress: %s", ev.Message)
}

// sharedHostFixtures makes namespaces A and B with a backend each; A's Ingress routes shop.example/ and
// is the older one. The reactor watches both namespaces with extraArgs.
func sharedHostFixtures(t *testing.T, extraArgs ...string) (a, b *harness.Fixture, r *harness.Reactor) {
	a = harness.New(t)
	b = harness.New(t)
	routingService(a, "web-a", a.StartBackend("web-a", false))
	routingService(b, "web-b", b.StartBackend("web-b", false))
	r = a.StartReactor(append([]string{"--watch-namespace="}, extraArgs...)...)
	r.WaitReady()
	a.CreateIngress(a.Ingress("site", "shop.example", harness.IngressBackend{Service: "web-a", Port: 80}))
	r.WaitServedBy("shop.example", "/", "web-a")
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has whole seconds: B's Ingress is the younger one
	return a, b, r
}

// createIn creates an Ingress in fixture b that belongs to a's IngressClass (the reactor serves a's class).
func createIn(a, b *harness.Fixture, name, host string, paths ...harness.IngressBackend) {
	ing := b.Ingress(name, host, paths...)
	class := a.IngressClass
	ing.Spec.IngressClassName = &class
	b.CreateIngress(ing)
}

// TestSharedHostTakeoverIsAnnounced: with shared hosts (the default), namespace B's Prefix /login on A's
// host is served by B, and both Ingresses get a Normal PathTakeover Event naming the other (before,
// nobody was told).
func TestSharedHostTakeoverIsAnnounced(t *testing.T) {
	a, b, r := sharedHostFixtures(t)
	createIn(a, b, "login", "shop.example", harness.IngressBackend{Path: "/login", Service: "web-b", Port: 80})
	r.WaitServedBy("shop.example", "/login", "web-b")
	r.WaitServedBy("shop.example", "/", "web-a")
	b.WaitEvent(r, "Ingress", "login", corev1.EventTypeNormal, "PathTakeover", `path "/login" (Prefix) on host shop.example takes requests`, a.Namespace+"/site")
	a.WaitEvent(r, "Ingress", "site", corev1.EventTypeNormal, "PathTakeover", "now go to Ingress "+b.Namespace+"/login")
}

// TestHostOwnershipByNamespace: with --host-ownership=namespace, B's rule on A's host is not served (A
// keeps /login) and B gets a Warning naming the owner, while B's own host is served.
func TestHostOwnershipByNamespace(t *testing.T) {
	a, b, r := sharedHostFixtures(t, "--host-ownership=namespace")
	createIn(a, b, "login", "shop.example", harness.IngressBackend{Path: "/login", Service: "web-b", Port: 80})
	createIn(a, b, "own", "b.example", harness.IngressBackend{Service: "web-b", Port: 80})
	r.WaitServedBy("b.example", "/", "web-b")
	b.WaitEvent(r, "Ingress", "login", corev1.EventTypeWarning, reasonConflict, "namespace "+a.Namespace+" owns the host")
	resp, err := r.Get("shop.example", "/login")
	if err != nil || resp.Status != http.StatusOK || resp.Echo == nil || resp.Echo.Name != "web-a" {
		t.Fatalf("GET shop.example/login: %v, %v; want 200 from web-a, the owner's backend", resp, err)
	}
}

// TestRejectedUpdateKeepsTheLastGoodVersion: namespace A's Ingress owns shop.example/ and B's younger
// Ingress for the same path loses. A typo in an update of A's Ingress is rejected with a Warning saying
// that the previous version is still served, and it is: B does not take the path (before, A's Ingress
// dropped out and B's took its traffic). A valid update ends it.
func TestRejectedUpdateKeepsTheLastGoodVersion(t *testing.T) {
	a, b, r := sharedHostFixtures(t)
	createIn(a, b, "rival", "shop.example", harness.IngressBackend{Service: "web-b", Port: 80})
	b.WaitEvent(r, "Ingress", "rival", corev1.EventTypeWarning, reasonConflict, a.Namespace+"/site")

	a.UpdateIngress("site", func(ing *networkingv1.Ingress) {
		ing.Annotations = map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "flase"}
	})
	a.WaitEvent(r, "Ingress", "site", corev1.EventTypeWarning, reasonRejected, "last good version is still served")
	r.WaitMetric("ingress_reactor_ingresses_stale", nil, "= 1", func(v float64) bool { return v == 1 })
	for range 20 {
		resp, err := r.Get("shop.example", "/")
		if err != nil || resp.Status != http.StatusOK || resp.Echo == nil || resp.Echo.Name != "web-a" {
			t.Fatalf("GET shop.example/ after A's rejected update: %v, %v; want 200 from web-a", resp, err)
		}
	}

	a.UpdateIngress("site", func(ing *networkingv1.Ingress) {
		ing.Annotations = map[string]string{"nginx.ingress.kubernetes.io/ssl-redirect": "false"}
	})
	r.WaitMetric("ingress_reactor_ingresses_stale", nil, "= 0", func(v float64) bool { return v == 0 })
	r.WaitServedBy("shop.example", "/", "web-a")
}
