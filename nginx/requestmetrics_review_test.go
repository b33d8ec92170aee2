package nginx

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"
)

// TestRequestMetricsGenerationSurvivesFullDict: clients that choose their Host header
// (--metrics-per-undefined-host) fill the dict and push older values out. The dict's generation must not
// be one of them: without it every read fails (the metrics freeze), and the next reload would make a
// new generation over the old values, which the controller would then count twice.
func TestRequestMetricsGenerationSurvivesFullDict(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	cfg.RequestMetrics = &RequestMetricsConfig{TimeBuckets: DefaultTimeBuckets, LengthBuckets: DefaultLengthBuckets, SizeBuckets: DefaultSizeBuckets,
		PerHost: true, PerUndefinedHost: true, DictMB: 1}
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	m, _ := buildModel(t, nil, nil)
	applyModel(t, rt, m, cfg)
	d, err := rt.Client().RequestMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gen := d.Generation
	n := 0
	for round := 0; d.Dropped == 0; round++ {
		if round == 20 {
			t.Fatalf("the 1 MB dict is not full after %d hosts", n)
		}
		// More series in one round than the dict holds: the generation, read at the last dump, is
		// the oldest key long before the round ends.
		for range 3000 {
			req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", cfg.HTTPPort), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = fmt.Sprintf("h%d.example", n)
			n++
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		time.Sleep(1100 * time.Millisecond) // one flush (every second), not an assertion
		if d, err = rt.Client().RequestMetrics(ctx); err != nil {
			t.Fatalf("after %d hosts: %v", n, err)
		}
		if d.Generation != gen {
			t.Fatalf("generation %q after %d hosts, want %q", d.Generation, n, gen)
		}
	}
	// A reload keeps the generation.
	cfg.Settings = DefaultSettings()
	cfg.Settings.KeepAliveRequests = 99
	applyModel(t, rt, m, cfg)
	if d, err = rt.Client().RequestMetrics(ctx); err != nil || d.Generation != gen {
		t.Fatalf("after a reload: generation %q (%v), want %q", d.Generation, err, gen)
	}
}

// TestRequestMetricsRequestEndingAfterReload: a request still running when a reload begins ends in the
// old worker after its flush timer ran for the last time; it is counted all the same.
func TestRequestMetricsRequestEndingAfterReload(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	cfg.RequestMetrics = testRequestMetrics()
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	started, release := make(chan struct{}, 1), make(chan struct{})
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
	})
	m, _ := buildModelWithServices(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "a", rule("a.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/slow", cfg.HTTPPort), nil)
		req.Host = "a.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-started
	cfg.Settings = DefaultSettings()
	cfg.Settings.KeepAliveRequests = 99
	applyModel(t, rt, m, cfg)
	time.Sleep(200 * time.Millisecond) // the old worker's exit begins; not an assertion
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := RequestLabels{Namespace: "default", Ingress: "a", Service: "app", Path: "/", Host: "a.example.com", Status: "200", Method: "GET"}
	eventually(t, "the request that ended after the reload counted", 10*time.Second, func() bool {
		d, err := rt.Client().RequestMetrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range d.Values {
			if v.Slot == 0 && v.Labels == want {
				return v.Value == 1
			}
		}
		return false
	})
}

// TestRequestMetricsLogPhaseWarnsNothing: metrics.lua's log phase reads $ingress_reactor_metrics for
// every request, also those of the status server (pushes, probes, scrapes) and those NGINX refuses before
// any location, where nothing set it: none may log "using uninitialized variable".
func TestRequestMetricsLogPhaseWarnsNothing(t *testing.T) {
	requireNginx(t)
	dir := nginxDir(t)
	cfg := testRenderConfig(t, dir)
	cfg.HTTPSPort = 0
	cfg.ErrorLog = filepath.Join(dir.Prefix, "metrics-error.log")
	cfg.RequestMetrics = testRequestMetrics()
	rt := testRuntime(t, cfg, nil)
	m, _ := buildModel(t, nil, nil)
	applyModel(t, rt, m, cfg)
	if _, err := rt.Client().RequestMetrics(context.Background()); err != nil {
		t.Fatal(err)
	}
	garbageLeavesNoUninitializedWarning(t, cfg)
}

// TestClientRefusesAnswerOverLimit: an answer larger than the client reads is an error, never a cut
// answer (a cut request metrics dump would make values look evicted, then count them again).
func TestClientRefusesAnswerOverLimit(t *testing.T) {
	line := []byte("0\tdefault\ta\tweb\t/\t\t\t200\tGET\t1\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "generation\tg1\n")
		for n := 0; n <= maxAnswerBytes; n += len(line) {
			_, _ = w.Write(line)
		}
	}))
	t.Cleanup(srv.Close)
	c := NewClient(srv.Listener.Addr().(*net.TCPAddr).Port, "")
	// The collector applies a dump that has a generation even when some lines were malformed.
	if d, err := c.RequestMetrics(context.Background()); err == nil || d.Generation != "" {
		t.Fatalf("an answer over %d bytes: %d values of generation %q to apply (%v), want none", maxAnswerBytes, len(d.Values), d.Generation, err)
	}
}
