package app

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingress-reactor/ingress-reactor/modules"
)

// TestProfilingOnlyForLoopbackClients: with --profiling, /debug/pprof/ answers clients on loopback (kubectl
// port-forward) and refuses the rest of the cluster, while /metrics stays open to everyone.
func TestProfilingOnlyForLoopbackClients(t *testing.T) {
	mux := NewHealthMux(true, "/healthz", prometheus.NewRegistry(), nil, nil, nil)
	for remote, want := range map[string]int{
		"127.0.0.1:40000":      http.StatusOK,
		"[::1]:40000":          http.StatusOK,
		"[::ffff:127.0.0.1]:1": http.StatusOK,
		"10.1.2.3:40000":       http.StatusForbidden,
		"[2001:db8::1]:40000":  http.StatusForbidden,
		"not-an-address":       http.StatusForbidden,
	} {
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("/debug/pprof/ from %s: %d, want %d", remote, rec.Code, want)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr = "10.1.2.3:40000"
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("/metrics from the cluster: %d, want 200", rec.Code)
	}
}

// TestHealthCheckPathAnswersLikeHealthz: --health-check-path (ingress-nginx's probes may use another path)
// runs the same checks as /healthz, which keeps answering.
func TestHealthCheckPathAnswersLikeHealthz(t *testing.T) {
	failing := true
	live := []modules.ReadyCheck{{Name: "nginx", Check: func() error {
		if failing {
			return errors.New("not running")
		}
		return nil
	}}}
	mux := NewHealthMux(false, "/custom-health", prometheus.NewRegistry(), nil, nil, live)
	get := func(path string) int {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	for _, path := range []string{"/healthz", "/custom-health"} {
		if code := get(path); code != http.StatusServiceUnavailable {
			t.Errorf("%s with a failing check: %d, want 503", path, code)
		}
	}
	failing = false
	for _, path := range []string{"/healthz", "/custom-health"} {
		if code := get(path); code != http.StatusOK {
			t.Errorf("%s with passing checks: %d, want 200", path, code)
		}
	}
}
