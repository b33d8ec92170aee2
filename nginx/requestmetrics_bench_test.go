package nginx

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkRequestMetrics measures the cost of request metrics: requests per second through one NGINX
// worker with --enable-metrics and without, same model, same backend, 4 keep-alive connections. Each
// iteration sends a burst of 500 requests to each, in alternating order, so that the load of the machine
// weighs on both alike; it reports both rates and the median of the bursts' rate with metrics relative to
// the rate without:
//
//	go test -run '^$' -bench RequestMetrics -benchtime 200x ./nginx/
func BenchmarkRequestMetrics(b *testing.B) {
	requireNginx(b)
	backend := httpServer(b, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	svc := service("default", "a", port(80, ""))
	m, _ := Merge([]*IngressTranslation{mustTranslate(b, ingress("default", "a", rule("a.example.com", prefix("/app", "a", 80))), servicesOf(svc))}, nil)
	start := func(metrics bool) int {
		cfg := testRenderConfig(b, nginxDir(b))
		cfg.HTTPSPort = 0
		cfg.WorkerProcesses = "1"
		if metrics {
			cfg.RequestMetrics = testRequestMetrics()
		}
		rt := benchRuntime(b, cfg)
		conf, hash, err := Render(m, cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if err := rt.Apply(ctx, conf, hash); err != nil {
			b.Fatal(err)
		}
		if err := rt.Client().ReplaceRoutes(ctx, routeTable(&m)); err != nil {
			b.Fatal(err)
		}
		if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "a", 80).Name: {backend}}); err != nil {
			b.Fatal(err)
		}
		return cfg.HTTPPort
	}
	off, on := start(false), start(true)
	var offTime, onTime time.Duration
	var ratios []float64
	const burst = 500
	i := 0
	for b.Loop() {
		first, second := off, on
		if i%2 == 1 {
			first, second = on, off
		}
		t1, t2 := load(b, first, 4, burst), load(b, second, 4, burst)
		if i%2 == 1 {
			t1, t2 = t2, t1
		}
		offTime += t1
		onTime += t2
		ratios = append(ratios, t1.Seconds()/t2.Seconds())
		i++
	}
	slices.Sort(ratios)
	b.ReportMetric(float64(i*burst)/offTime.Seconds(), "off-req/s")
	b.ReportMetric(float64(i*burst)/onTime.Seconds(), "on-req/s")
	// The median of the bursts' ratios: a burst slowed down by another process's load weighs little.
	b.ReportMetric(100*ratios[len(ratios)/2], "on/off-%")
}

// load sends n GETs of distinct URIs over conns keep-alive connections and returns how long they took.
func load(b *testing.B, httpPort, conns, n int) time.Duration {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)))
	}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, conns)
	began := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				resp, err := c.Get(fmt.Sprintf("http://a.example.com/app/%d", i))
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	took := time.Since(began)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return took
}
