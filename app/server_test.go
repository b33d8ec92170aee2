package app

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestProfilingOnlyForLoopbackClients: with --profiling, /debug/pprof/ answers clients on loopback (kubectl
// port-forward) and refuses the rest of the cluster, while /metrics stays open to everyone.
func TestProfilingOnlyForLoopbackClients(t *testing.T) {
	mux := NewHealthMux(true, prometheus.NewRegistry(), nil, nil)
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
