//go:build integration

package integration

import (
	"testing"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestDefaultBackendServiceAnswersUnmatchedRequests: with --default-backend-service, requests that no rule
// matches go to that Service (its endpoints followed like any other), instead of the built-in 404.
func TestDefaultBackendServiceAnswersUnmatchedRequests(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	fallback := f.StartBackend("fallback", false)
	other := f.StartBackend("fallback-2", false)
	f.CreateService("web", 80, web.Port)
	f.ServeBackends("web", web)
	f.CreateService("fallback", 80, fallback.Port)
	f.ServeBackends("fallback", fallback)
	f.CreateIngress(f.Ingress("web", "known.example", harness.IngressBackend{Path: "/app", Service: "web", Port: 80}))

	r := f.StartReactor("--default-backend-service=" + f.Namespace + "/fallback")
	r.WaitReady()
	r.WaitServedBy("known.example", "/app", "web")
	r.WaitServedBy("unknown.example", "/", "fallback")
	// A known host's unmatched path falls back too.
	r.WaitServedBy("known.example", "/elsewhere", "fallback")

	// The default backend's endpoints follow its EndpointSlice, without a reload.
	reloads := r.WaitConfigSettled()
	f.ServeBackends("fallback", other)
	r.WaitServedBy("unknown.example", "/", "fallback-2")
	if now := r.MetricValue(harness.ReloadsMetric, nil); now != reloads {
		t.Errorf("%s moved from %g to %g on a default-backend endpoint change", harness.ReloadsMetric, reloads, now)
	}
}
