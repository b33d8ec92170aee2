//go:build integration

package integration

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

const informerEvents = "ingress_reactor_informer_events_total"

// TestReactorBecomesReadyAndStopsCleanlyOnSIGTERM: started against a real API server,
// the binary reports itself alive and, once its caches are synced, ready; SIGTERM stops
// it with exit code 0 and without leaving processes behind.
func TestReactorBecomesReadyAndStopsCleanlyOnSIGTERM(t *testing.T) {
	f := harness.New(t)
	r := f.StartReactor()

	r.WaitReady()
	code, body, err := r.GetHealthz("/healthz")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/healthz = %d %q, %v; want 200 while running", code, body, err)
	}
	m, err := r.Metrics()
	if err != nil {
		t.Fatalf("scrape /metrics: %v", err)
	}
	if _, ok := m.Value("go_goroutines", nil); !ok {
		t.Errorf("/metrics lacks the Go collector's go_goroutines")
	}

	if code := r.Stop(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	if _, _, err := r.GetHealthz("/healthz"); err == nil {
		t.Errorf("healthz port still answers after the process exited")
	}
}

// TestReactorDrainsOnSIGTERM: with --shutdown-grace-period, SIGTERM first makes /readyz fail while NGINX
// keeps answering, so load balancers can stop sending before anything stops; a second SIGTERM ends the
// grace period and the process exits cleanly.
func TestReactorDrainsOnSIGTERM(t *testing.T) {
	f := harness.New(t)
	r := f.StartReactor("--shutdown-grace-period=2m")
	r.WaitReady()

	if err := r.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r.Eventually(10*time.Second, "/readyz to fail after SIGTERM", func() (bool, string) {
		code, body, err := r.GetHealthz("/readyz")
		return err == nil && code == http.StatusServiceUnavailable && strings.Contains(body, "shutting down"), fmt.Sprintf("%d %q %v", code, body, err)
	})
	if code, body, err := r.GetHealthz("/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz while draining = %d %q, %v; want 200 (the kubelet must not restart a draining pod)", code, body, err)
	}
	resp, err := r.Get("unknown.example", "/")
	if err != nil || resp.Status != http.StatusNotFound {
		t.Errorf("NGINX while draining: %v, %v; want its 404 for an unknown host", resp, err)
	}
	select {
	case <-r.Exited():
		t.Fatalf("exited during the grace period: %s", r.ExitDescription())
	default:
	}
	if code := r.Stop(t); code != 0 {
		t.Fatalf("exit code after a second SIGTERM = %d, want 0", code)
	}
}

// TestReactorSeesIngressEventsFromTheAPIServer: Ingresses created, updated and deleted
// through the API reach the controller's informer (counted in the informer events
// metric), and only those in the watched namespace do.
func TestReactorSeesIngressEventsFromTheAPIServer(t *testing.T) {
	f := harness.New(t)
	other := harness.New(t) // a namespace the reactor does not watch
	r := f.StartReactor()
	r.WaitReady()

	before := map[string]float64{}
	m, err := r.Metrics()
	if err != nil {
		t.Fatalf("scrape /metrics: %v", err)
	}
	for _, ev := range []string{"add", "update", "delete"} {
		before[ev], _ = m.Value(informerEvents, map[string]string{"resource": "ingresses", "event": ev})
	}
	atLeast := func(ev string, n float64) func(float64) bool {
		return func(v float64) bool { return v >= before[ev]+n }
	}
	labels := func(ev string) map[string]string { return map[string]string{"resource": "ingresses", "event": ev} }

	// Created first, so that a reactor watching every namespace would count it first
	// (one watch delivers events in the order the API server stored them).
	other.CreateIngress(other.Ingress("unwatched", "unwatched.example", harness.IngressBackend{Service: "svc", Port: 80}))
	f.CreateIngress(f.Ingress("demo", "demo.example", harness.IngressBackend{Service: "svc", Port: 80}))
	added := r.WaitMetric(informerEvents, labels("add"), fmt.Sprintf(">= %g", before["add"]+1), atLeast("add", 1))
	if added != before["add"]+1 {
		t.Errorf("%s{event=add} went from %g to %g after one Ingress in the watched namespace; the unwatched one was counted too?",
			informerEvents, before["add"], added)
	}

	f.UpdateIngress("demo", func(ing *networkingv1.Ingress) { ing.Labels = map[string]string{"changed": "yes"} })
	r.WaitMetric(informerEvents, labels("update"), fmt.Sprintf(">= %g", before["update"]+1), atLeast("update", 1))

	f.DeleteIngress("demo")
	r.WaitMetric(informerEvents, labels("delete"), fmt.Sprintf(">= %g", before["delete"]+1), atLeast("delete", 1))
}
