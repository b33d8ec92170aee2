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
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// BenchmarkEndpointLane measures the whole endpoint lane with real NGINX: from an EndpointSlice update in the
// API (the local in-process one) through the informer, the endpoint watcher and the reloader's push, to the
// first request that NGINX routes to the new endpoint. It reports the 50th and 99th percentile and the
// reloads that happened during the run (which must be 0).
//
//	go test -run '^$' -bench EndpointLane -benchtime 200x ./app/
func BenchmarkEndpointLane(b *testing.B) {
	d := startDemo(b)
	d.point("web-local", d.backends[0])
	if !d.waitFor("backend-0", 30*time.Second) {
		b.Fatalf("the demo never routed to backend-0; last answer %q", d.get())
	}
	before := d.settledReloads()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next := (i + 1) % 2
		began := time.Now()
		d.point("web-local", d.backends[next])
		if !d.waitFor(fmt.Sprintf("backend-%d", next), 10*time.Second) {
			b.Fatalf("iteration %d: traffic did not move to backend-%d", i, next)
		}
		lat = append(lat, time.Since(began))
	}
	b.StopTimer()
	reportLatencies(b, lat, d.reloads()-before)
}

// BenchmarkCanaryWeightLane measures a canary-weight change end to end with real NGINX: from an update of
// a canary Ingress in the API (the local in-process one) through the informer, translation, merge and the
// reloader's routes push, to the first request that the Lua router sends by the new weight. The weight
// flips between 0 and 100, so one request tells. It reports the 50th and 99th percentile and the reloads
// during the run (which must be 0: a canary is route data).
//
//	go test -run '^$' -bench CanaryWeightLane -benchtime 200x ./app/
func BenchmarkCanaryWeightLane(b *testing.B) {
	d := startDemo(b)
	d.point("web-local", d.backends[0])
	d.point("api-local", d.backends[1])
	ingresses := d.src.Client.NetworkingV1().Ingresses("demo")
	pathType := networkingv1.PathTypePrefix
	canary := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-canary", Namespace: "demo", Annotations: map[string]string{
			nginx.AnnotationCanary: "true", nginx.AnnotationCanaryWeight: "0"}},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("ingress-reactor"),
			Rules: []networkingv1.IngressRule{{Host: "demo.localhost", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "api", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
			}}}},
		},
	}
	if _, err := ingresses.Create(context.Background(), canary, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	setWeight := func(w string) {
		ing, err := ingresses.Get(context.Background(), "demo-canary", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ing.Annotations[nginx.AnnotationCanaryWeight] = w
		if _, err := ingresses.Update(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	setWeight("100")
	if !d.waitFor("backend-1", 30*time.Second) {
		b.Fatalf("the canary never took the demo's traffic; last answer %q", d.get())
	}
	before := d.settledReloads()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		weight, want := "0", "backend-0"
		if i%2 == 1 {
			weight, want = "100", "backend-1"
		}
		began := time.Now()
		setWeight(weight)
		if !d.waitFor(want, 10*time.Second) {
			b.Fatalf("iteration %d: canary-weight %s did not move the traffic to %s", i, weight, want)
		}
		lat = append(lat, time.Since(began))
	}
	b.StopTimer()
	reportLatencies(b, lat, d.reloads()-before)
}

// demo is the whole controller in local mode over examples/local, with real NGINX and two backends
// that answer their names ("backend-0", "backend-1").
type demo struct {
	b        *testing.B
	src      *KubeSource
	reg      *prometheus.Registry
	backends []int
	client   *http.Client
	url      string
}

// startDemo starts the controller; the demo's EndpointSlices still point at the example's ports.
func startDemo(b *testing.B) *demo {
	if _, err := nginx.DetectModules(false); err != nil {
		b.Skipf("NGINX's Lua module is not installed (run make deps): %v", err)
	}
	d := &demo{b: b, backends: make([]int, 2)}
	for i := range d.backends {
		name := fmt.Sprintf("backend-%d", i)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) }))
		b.Cleanup(srv.Close)
		d.backends[i] = srv.Listener.Addr().(*net.TCPAddr).Port
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

	a := New(cfg, zap.NewNop(), fx.Populate(&d.src, &d.reg))
	if err := a.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Stop(context.Background()) })
	d.client = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	d.url = "http://127.0.0.1:" + strconv.Itoa(cfg.HTTPPort) + "/"
	return d
}

// get answers a request for demo.localhost/ with the body, or the error.
func (d *demo) get() string {
	req, _ := http.NewRequest(http.MethodGet, d.url, nil)
	req.Host = "demo.localhost"
	resp, err := d.client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// point makes the demo's EndpointSlice name point at port.
func (d *demo) point(name string, port int) {
	slices := d.src.Client.DiscoveryV1().EndpointSlices("demo")
	s, err := slices.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		d.b.Fatal(err)
	}
	p := int32(port)
	s.Ports = []discoveryv1.EndpointPort{{Name: s.Ports[0].Name, Port: &p}}
	if _, err := slices.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		d.b.Fatal(err)
	}
}

// waitFor polls until a request is answered with want, within limit.
func (d *demo) waitFor(want string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if d.get() == want {
			return true
		}
	}
	return false
}

// reloads sums ingress_reactor_reloads_total.
func (d *demo) reloads() float64 {
	mfs, _ := d.reg.Gather()
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

// settledReloads waits until the first configuration is counted (traffic can flow a moment before) and
// returns the count.
func (d *demo) settledReloads() float64 {
	for deadline := time.Now().Add(10 * time.Second); d.reloads() == 0; {
		if time.Now().After(deadline) {
			d.b.Fatal("the first configuration was never counted in ingress_reactor_reloads_total")
		}
		time.Sleep(time.Millisecond)
	}
	return d.reloads()
}

// reportLatencies reports the 50th and 99th percentile of lat, and the reloads during the run.
func reportLatencies(b *testing.B, lat []time.Duration, reloads float64) {
	sorted := append([]time.Duration(nil), lat...)
	sortDurations(sorted)
	b.ReportMetric(float64(sorted[len(sorted)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(sorted[len(sorted)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(reloads, "reloads")
}

func sortDurations(d []time.Duration) { slices.Sort(d) }
