package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// BenchmarkEndpointLane measures the whole endpoint lane with real NGINX: from an EndpointSlice update in the
// API (the local in-process one) through the informer, the endpoint watcher and the reloader's push, to the
// first request that NGINX routes to the new endpoint. It reports the 50th and 99th percentile and the
// reloads that happened during the run (which must be 0).
//
//	go test -run '^$' -bench EndpointLane -benchtime 200x ./app/
func BenchmarkEndpointLane(b *testing.B) {
	if _, err := nginx.DetectModules(false); err != nil {
		b.Skipf("NGINX's Lua module is not installed (run make deps): %v", err)
	}
	backends := make([]int, 2)
	for i := range backends {
		name := fmt.Sprintf("backend-%d", i)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) }))
		b.Cleanup(srv.Close)
		backends[i] = srv.Listener.Addr().(*net.TCPAddr).Port
	}
	dir := b.TempDir()
	for _, f := range []string{"demo.yaml", "ingress.yaml"} {
		data, err := os.ReadFile(filepath.Join("../examples/local", f))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.LocalManifests = dir
	cfg.HealthzHost = "127.0.0.1"
	cfg.HealthzPort = freePort(b)
	cfg.HTTPPort = freePort(b)
	cfg.HTTPSPort = freePort(b)
	cfg.NginxStatusPort = freePort(b)
	// NGINX's workers run as another user when the benchmark runs as root: they must reach the temp paths,
	// so the directory is not under b.TempDir (0700).
	root, err := os.MkdirTemp("", "ingress-reactor-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		b.Fatal(err)
	}
	cfg.NginxDir = filepath.Join(root, "nginx")
	cfg.SSLDir = filepath.Join(root, "ssl")
	cfg.UpdateStatus = false
	cfg.WorkerProcesses = "1"

	var src *KubeSource
	var reg *prometheus.Registry
	a := New(cfg, zap.NewNop(), fx.Populate(&src, &reg))
	if err := a.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Stop(context.Background()) })

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	url := "http://127.0.0.1:" + strconv.Itoa(cfg.HTTPPort) + "/"
	get := func() string {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Host = "demo.localhost"
		resp, err := client.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	slices := src.Client.DiscoveryV1().EndpointSlices("demo")
	point := func(port int) {
		s, err := slices.Get(context.Background(), "web-local", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		p := int32(port)
		s.Ports = []discoveryv1.EndpointPort{{Name: s.Ports[0].Name, Port: &p}}
		s.ResourceVersion = strconv.FormatInt(time.Now().UnixNano(), 10)
		if _, err := slices.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	waitFor := func(want string, limit time.Duration) bool {
		deadline := time.Now().Add(limit)
		for time.Now().Before(deadline) {
			if get() == want {
				return true
			}
		}
		return false
	}
	point(backends[0])
	if !waitFor("backend-0", 30*time.Second) {
		b.Fatalf("the demo never routed to backend-0; last answer %q", get())
	}
	reloads := func() float64 {
		mfs, _ := reg.Gather()
		total := 0.0
		for _, mf := range mfs {
			if mf.GetName() == "ingress_reactor_reloads_total" {
				for _, m := range mf.GetMetric() {
					total += m.GetCounter().GetValue()
				}
			}
		}
		return total
	}
	// Traffic can flow a moment before the first apply is counted; start counting after it.
	for deadline := time.Now().Add(10 * time.Second); reloads() == 0; {
		if time.Now().After(deadline) {
			b.Fatal("the first configuration was never counted in ingress_reactor_reloads_total")
		}
		time.Sleep(time.Millisecond)
	}
	before := reloads()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next := (i + 1) % 2
		began := time.Now()
		point(backends[next])
		if !waitFor(fmt.Sprintf("backend-%d", next), 10*time.Second) {
			b.Fatalf("iteration %d: traffic did not move to backend-%d", i, next)
		}
		lat = append(lat, time.Since(began))
	}
	b.StopTimer()
	slices2 := append([]time.Duration(nil), lat...)
	sortDurations(slices2)
	b.ReportMetric(float64(slices2[len(slices2)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(slices2[len(slices2)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(reloads()-before, "reloads")
}

func sortDurations(d []time.Duration) { slices.Sort(d) }
