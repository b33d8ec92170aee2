//go:build integration

package integration

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestCanaryFlaggerSequence drives a canary as Flagger and Argo Rollouts do, through the API server, the
// binary and NGINX: a canary Ingress appears with weight 0 (only its header reaches it), its weight moves
// to 50 and 100, then it goes away, and the main Ingress serves everything again. None of it reloads
// NGINX. The canary's other annotations are ignored with a Warning Event, and a second canary for the same
// path is not used and gets a Conflict Event.
func TestCanaryFlaggerSequence(t *testing.T) {
	f := harness.New(t)
	routingService(f, "app", f.StartBackend("stable", false))
	routingService(f, "app-canary", f.StartBackend("canary", false))
	routingService(f, "app-other", f.StartBackend("other", false))
	f.CreateIngress(f.Ingress("app", "canary.example", prefixPath("/", "app")))

	r := f.StartReactor()
	r.WaitReady()
	r.WaitServedBy("canary.example", "/", "stable")
	reloads := r.WaitConfigSettled()

	header := func(v string) harness.Request {
		return harness.Request{Host: "canary.example", Path: "/", Header: http.Header{"X-Canary": {v}}}
	}
	canary := annotate(f.Ingress("app-canary", "canary.example", prefixPath("/", "app-canary")),
		"canary", "true", "canary-weight", "0", "canary-by-header", "X-Canary", "proxy-read-timeout", "5")
	f.CreateIngress(canary)
	waitFor(r, header("always"), "200 from the canary", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Name == "canary"
	})
	requireOnly(t, r, "canary.example", "/", "stable") // weight 0
	f.WaitEvent(r, "Ingress", "app-canary", corev1.EventTypeWarning, reasonWarning, ingressNginx+"proxy-read-timeout: ignored on a canary Ingress")
	checkServed(t, r, header("never"), "stable")

	setWeight := func(w string) {
		f.UpdateIngress("app-canary", func(ing *networkingv1.Ingress) { annotate(ing, "canary-weight", w) })
	}
	setWeight("50")
	r.WaitSpread("canary.example", "/", "canary", "stable")
	setWeight("100")
	r.WaitSpread("canary.example", "/", "canary")
	checkServed(t, r, header("never"), "stable")

	// A second canary for the path: the first stays, the second is told.
	f.CreateIngress(annotate(f.Ingress("app-other", "canary.example", prefixPath("/", "app-other")), "canary", "true", "canary-weight", "100"))
	f.WaitEvent(r, "Ingress", "app-other", corev1.EventTypeWarning, reasonConflict, "has one canary", f.Namespace+"/app-canary")
	requireOnly(t, r, "canary.example", "/", "canary")

	f.DeleteIngress("app-other")
	f.DeleteIngress("app-canary")
	r.WaitSpread("canary.example", "/", "stable")
	if got := r.WaitConfigSettled(); got != reloads {
		t.Errorf("%s went from %g to %g: canaries are route data and must never reload NGINX", harness.ReloadsMetric, reloads, got)
	}
}
