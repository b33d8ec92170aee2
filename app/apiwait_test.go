package app

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
)

// flakyServer is an HTTP server on a fixed loopback port that can go away (connections refused) and
// come back on the same port, as an API server does when it restarts.
type flakyServer struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	srv  *http.Server
}

func newFlakyServer(t *testing.T) *flakyServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &flakyServer{t: t, addr: ln.Addr().String()}
	f.serve(ln)
	t.Cleanup(f.down)
	return f
}

func (f *flakyServer) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok " + r.URL.Path))
	}), ReadHeaderTimeout: 5 * time.Second}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (f *flakyServer) down() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		_ = f.srv.Close()
		f.srv = nil
	}
}

func (f *flakyServer) up() {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Fatalf("listen again on %s: %v", f.addr, err)
	}
	f.serve(ln)
}

func newTestWaiter(t *testing.T) (*apiWaiter, prometheus.Gauge, *observer.ObservedLogs, *http.Client) {
	core, logs := observer.New(zap.InfoLevel)
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_reachable"})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	w := newAPIWaiter(zap.New(core), g, stop)
	w.interval = 20 * time.Millisecond
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return w, g, logs, &http.Client{Transport: w.wrap(tr)}
}

func get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// TestAPIWaiterHoldsReadsThroughAnOutage: a list sent while the API server is down neither fails nor
// waits for a backoff: it is answered as soon as the server is back, the loss and the return are logged
// once each, and the reachable gauge follows.
func TestAPIWaiterHoldsReadsThroughAnOutage(t *testing.T) {
	srv := newFlakyServer(t)
	_, gauge, logs, client := newTestWaiter(t)
	ctx := context.Background()
	if body, err := get(ctx, client, "http://"+srv.addr+"/api/v1/services"); err != nil || body != "ok /api/v1/services" {
		t.Fatalf("GET while up: %q, %v", body, err)
	}
	srv.down()
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 2)
	for range 2 {
		go func() {
			body, err := get(ctx, client, "http://"+srv.addr+"/api/v1/services?watch=true")
			done <- result{body, err}
		}()
	}
	moduletest.Eventually(t, "the outage to be noticed", func() bool { return testutil.ToFloat64(gauge) == 0 })
	select {
	case r := <-done:
		t.Fatalf("a read returned during the outage: %q, %v", r.body, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	srv.up()
	for range 2 {
		r := <-done
		if r.err != nil || r.body != "ok /api/v1/services" {
			t.Errorf("read held through the outage: %q, %v; want the server's answer", r.body, r.err)
		}
	}
	if got := testutil.ToFloat64(gauge); got != 1 {
		t.Errorf("reachable gauge after the return = %v, want 1", got)
	}
	if n := logs.FilterMessageSnippet("lost the connection").Len(); n != 1 {
		t.Errorf("%d 'lost the connection' lines, want 1 for two waiting reads", n)
	}
	if n := logs.FilterMessageSnippet("answers again").Len(); n != 1 {
		t.Errorf("%d 'answers again' lines, want 1", n)
	}
}

// TestAPIWaiterFailsWritesAndCancelledReads: writes are not held (their callers retry and have
// deadlines), and a held read gives up when its context ends.
func TestAPIWaiterFailsWritesAndCancelledReads(t *testing.T) {
	srv := newFlakyServer(t)
	_, _, _, client := newTestWaiter(t)
	srv.down()
	req, _ := http.NewRequest(http.MethodPatch, "http://"+srv.addr+"/apis/x", strings.NewReader("{}"))
	if _, err := client.Do(req); err == nil {
		t.Error("a PATCH to an unreachable API server succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := get(ctx, client, "http://"+srv.addr+"/api/v1/services")
	if err == nil {
		t.Fatal("a read whose context ended succeeded with the API server down")
	}
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "refused") {
		t.Errorf("read error = %v, want the deadline or the connection failure", err)
	}
}
