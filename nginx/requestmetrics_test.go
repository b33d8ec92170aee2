package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestRequestMetricsSlots(t *testing.T) {
	c := &RequestMetricsConfig{TimeBuckets: []float64{1, 2}, LengthBuckets: []float64{10}, SizeBuckets: []float64{5, 6, 7}}
	tests := map[int]RequestSlot{
		0: {Hist: -1},
		1: {Hist: HistRequestTime, Bucket: -1}, 2: {Hist: HistRequestTime, Bucket: 0}, 4: {Hist: HistRequestTime, Bucket: 2},
		5: {Hist: HistResponseTime, Bucket: -1},
		// 4 time histograms of 4 slots each: request size starts at 17 (sum, 10, +Inf).
		17: {Hist: HistRequestSize, Bucket: -1}, 19: {Hist: HistRequestSize, Bucket: 1},
		20: {Hist: HistResponseSize, Bucket: -1},
		23: {Hist: HistBytesSent, Bucket: -1}, 27: {Hist: HistBytesSent, Bucket: 3},
	}
	for n, want := range tests {
		if got, ok := c.Slot(n); !ok || got != want {
			t.Errorf("slot %d = %+v %v, want %+v", n, got, ok, want)
		}
	}
	if _, ok := c.Slot(28); ok {
		t.Error("slot 28 is past the layout")
	}
}

func TestParseRequestMetricsDump(t *testing.T) {
	body := "generation\tg1\n" +
		"0\tdefault\ta\tweb\t/app\ta.example.com\t\t200\tGET\t3\n" +
		"1\t\t\t\t\t\t\t404\tother\t0.25\n" +
		"dropped\t2\n" +
		"x\tbroken\n"
	d, err := ParseRequestMetricsDump([]byte(body))
	if err == nil || !strings.Contains(err.Error(), "1 malformed") {
		t.Errorf("error %v, want one malformed line", err)
	}
	want := []RequestMetricValue{
		{Slot: 0, Value: 3, Labels: RequestLabels{Namespace: "default", Ingress: "a", Service: "web", Path: "/app", Host: "a.example.com", Status: "200", Method: "GET"}},
		{Slot: 1, Value: 0.25, Labels: RequestLabels{Status: "404", Method: "other"}},
	}
	if d.Generation != "g1" || d.Dropped != 2 || fmt.Sprint(d.Values) != fmt.Sprint(want) {
		t.Errorf("dump %+v", d)
	}
	if _, err := ParseRequestMetricsDump([]byte("0\ta\n")); err == nil {
		t.Error("a dump without generation parsed")
	}
}

func TestRenderRequestMetrics(t *testing.T) {
	cfg := baseRenderConfig()
	conf, _, err := Render(Model{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(conf), "lua_shared_dict ingress_reactor_metrics") || strings.Contains(string(conf), `metrics").log()`) {
		t.Error("request metrics off, but nginx.conf has their dict or log call")
	}
	cfg.RequestMetrics = &RequestMetricsConfig{TimeBuckets: []float64{0.5, 1e7}, LengthBuckets: []float64{10}, SizeBuckets: []float64{1}, PerHost: true}
	conf, _, err = Render(Model{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lua_shared_dict ingress_reactor_metrics 16m;",
		`require("ingress_reactor.metrics").configure({ time = { 0.5, 1e+07, }, length = { 10, }, size = { 1, }, per_host = true, per_undefined_host = false })`,
		`require("ingress_reactor.metrics").log()`} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("nginx.conf lacks %s", want)
		}
	}
	cfg.RequestMetrics.TimeBuckets = []float64{2, 1}
	if _, _, err := Render(Model{}, cfg); err == nil {
		t.Error("decreasing buckets rendered")
	}
}

// TestRequestMetricsThroughNginx sends requests of known statuses, methods and sizes through NGINX and
// reads the aggregated dict: counts by route labels, host labels, bounded methods, histogram sums; a
// reload keeps the counters.
func TestRequestMetricsThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	cfg.RequestMetrics = testRequestMetrics()
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/app/missing") {
			w.WriteHeader(http.StatusNotFound)
		}
		_, _ = io.WriteString(w, strings.Repeat("x", 1000))
	})
	m, _ := buildModelWithServices(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "a", rule("a.example.com", prefix("/app", "app", 80))),
		ingress("default", "w", rule("*.wild.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	send := func(method, host, path string) {
		t.Helper()
		req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := range 3 {
		send(http.MethodGet, "a.example.com", fmt.Sprintf("/app/%d", i)) // distinct URIs, one path label
	}
	send(http.MethodGet, "a.example.com", "/app/missing")
	send("BREW", "a.example.com", "/app/x")
	send(http.MethodGet, "x.wild.example.com", "/y")
	send(http.MethodGet, "unknown.example.com", "/z") // the catch-all: 404 without ingress labels
	a := func(status, method string) RequestLabels {
		return RequestLabels{Namespace: "default", Ingress: "a", Service: "app", Path: "/app", Host: "a.example.com", Status: status, Method: method}
	}
	want := map[RequestLabels]float64{
		a("200", "GET"):   3,
		a("404", "GET"):   1,
		a("200", "other"): 1,
		{Namespace: "default", Ingress: "w", Service: "app", Path: "/", Host: "*.wild.example.com", Status: "200", Method: "GET"}: 1,
		{Status: "404", Method: "GET"}: 1,
	}
	requests := func() (map[RequestLabels]float64, RequestMetricsDump) {
		d, err := rt.Client().RequestMetrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return requestCounts(d), d
	}
	var got map[RequestLabels]float64
	var dump RequestMetricsDump
	eventually(t, "request counts", 10*time.Second, func() bool {
		got, dump = requests()
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	// Histograms: 3 responses of 1000 body bytes (plus headers) are in the bytes_sent histogram's
	// 10000 bucket, and the request sizes add up.
	sums := map[RequestSlot]float64{}
	for _, v := range dump.Values {
		if v.Labels == a("200", "GET") {
			s, _ := cfg.RequestMetrics.Slot(v.Slot)
			sums[s] += v.Value
		}
	}
	if n := sums[RequestSlot{Hist: HistBytesSent, Bucket: 3}]; n != 3 {
		t.Errorf("bytes_sent in the 10000 bucket: %v, want 3 (%v)", n, sums)
	}
	if s := sums[RequestSlot{Hist: HistResponseSize, Bucket: -1}]; s < 3000 || s > 4000 {
		t.Errorf("response size sum %v, want 3 × (1000 + headers)", s)
	}
	if s := sums[RequestSlot{Hist: HistRequestSize, Bucket: -1}]; s < 3*40 {
		t.Errorf("request size sum %v, want 3 requests' lengths", s)
	}
	var upstreamTimes float64
	for b := range len(DefaultTimeBuckets) + 1 {
		upstreamTimes += sums[RequestSlot{Hist: HistConnectTime, Bucket: b}]
	}
	if upstreamTimes != 3 {
		t.Errorf("connect times observed %v, want 3", upstreamTimes)
	}
	gen := dump.Generation

	// A reload (another configuration) keeps the dict and its generation: the counters go on.
	cfg.Settings = DefaultSettings()
	cfg.Settings.KeepAliveRequests = 99
	applyModel(t, rt, m, cfg)
	send(http.MethodGet, "a.example.com", "/app/after-reload")
	want[a("200", "GET")] = 4
	eventually(t, "request counts after a reload", 10*time.Second, func() bool {
		got, dump = requests()
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	if dump.Generation != gen {
		t.Errorf("generation %q after a reload, want %q", dump.Generation, gen)
	}

	// An Ingress no longer served: its values leave the dict, the others stay.
	if err := rt.Client().ForgetRequestMetrics(ctx, []types.NamespacedName{{Namespace: "default", Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	for l := range want {
		if l.Ingress == "a" {
			delete(want, l)
		}
	}
	if got, _ = requests(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after forgetting Ingress a: %v, want %v", got, want)
	}
}

// TestRequestMetricsCanaryLabel: a request the canary serves is labelled with the canary's upstream, the
// main route's Ingress, Service and path.
func TestRequestMetricsCanaryLabel(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	cfg.RequestMetrics = testRequestMetrics()
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	m, _ := buildModelWithServices(t, []any{
		service("default", "main", port(80, "")), service("default", "canary", port(80, "")),
		ingress("default", "main", rule("c.example.com", prefix("/", "main", 80))),
		ingress("default", "canary", rule("c.example.com", prefix("/", "canary", 80)), annotate(AnnotationCanary, "true", AnnotationCanaryByHeader, "X-Canary")),
	}, nil)
	applyModel(t, rt, m, cfg)
	canaryUp := up("default", "canary", 80).Name
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "main", 80).Name: {echoBackend(t, "main")}, canaryUp: {echoBackend(t, "canary")}}); err != nil {
		t.Fatal(err)
	}
	c := proxyClient(cfg.HTTPPort, nil)
	if r := fetch(t, c, "http://c.example.com/x", "X-Canary", "always"); r.echo.Backend != "canary" {
		t.Fatalf("X-Canary: always served by %q", r.echo.Backend)
	}
	if r := fetch(t, c, "http://c.example.com/x"); r.echo.Backend != "main" {
		t.Fatalf("without the header served by %q", r.echo.Backend)
	}
	main := RequestLabels{Namespace: "default", Ingress: "main", Service: "main", Path: "/", Host: "c.example.com", Status: "200", Method: "GET"}
	canary := main
	canary.Canary = string(canaryUp)
	want := fmt.Sprint(map[RequestLabels]float64{main: 1, canary: 1})
	eventually(t, "a request of each", 10*time.Second, func() bool {
		d, err := rt.Client().RequestMetrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(requestCounts(d)) == want
	})
}

// requestCounts sums a dump's request counter (slot 0) by label set.
func requestCounts(d RequestMetricsDump) map[RequestLabels]float64 {
	got := map[RequestLabels]float64{}
	for _, v := range d.Values {
		if v.Slot == 0 {
			got[v.Labels] += v.Value
		}
	}
	return got
}
