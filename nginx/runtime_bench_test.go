package nginx

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	networkingv1 "k8s.io/api/networking/v1"
)

// BenchmarkEndpointSwitch measures the endpoint lane inside the data plane: from pushing a new endpoint
// list to the first request that reaches the new endpoint, with real NGINX and no reload.
func BenchmarkEndpointSwitch(b *testing.B) {
	requireNginx(b)
	paths := nginxDir(b)
	cfg := testRenderConfig(b, paths)
	cfg.HTTPSPort = 0
	rt := benchRuntime(b, cfg)
	svc := service("default", "a", port(80, ""))
	m, _ := Merge([]*IngressTranslation{mustTranslate(b, ingress("default", "a", rule("a.example.com", prefix("/", "a", 80))), servicesOf(svc))}, nil)
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
	var eps [2]Endpoint
	for i := range eps {
		name := fmt.Sprint(i)
		srv := httpServer(b, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(name)) })
		eps[i] = srv
	}
	upA := up("default", "a", 80).Name
	c := proxyClient(cfg.HTTPPort, nil)
	url := fmt.Sprintf("http://a.example.com:%d/", cfg.HTTPPort)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		want := fmt.Sprint(i % 2)
		if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{upA: {eps[i%2]}}); err != nil {
			b.Fatal(err)
		}
		for {
			resp, err := c.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 8)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			if string(body[:n]) == want {
				break
			}
		}
	}
}

// BenchmarkNginxTest measures "nginx -t" on the rendered configuration. Hosts and paths are not in it
// (the Lua router serves them), so the cost is the same at any number of Ingresses; the Ingresses are
// there to show it. NGINX re-parses the same configuration on every reload, so this is also the
// reload's CPU cost.
func BenchmarkNginxTest(b *testing.B) {
	requireNginx(b)
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			paths := nginxDir(b)
			cfg := testRenderConfig(b, paths)
			m, _ := Merge(benchTranslations(n), nil)
			conf, _, err := Render(m, cfg)
			if err != nil {
				b.Fatal(err)
			}
			file := filepath.Join(paths.Prefix, "bench.conf")
			if err := os.WriteFile(file, conf, 0o600); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := Test(context.Background(), "", paths, file); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApply measures a change of nginx.conf end to end (a setting, since Ingress changes do not
// reach nginx.conf): write, nginx -t, SIGHUP and the wait until the new configuration serves.
func BenchmarkApply(b *testing.B) {
	requireNginx(b)
	paths := nginxDir(b)
	cfg := testRenderConfig(b, paths)
	rt := benchRuntime(b, cfg)
	var (
		confs  [2][]byte
		hashes [2]string
		err    error
	)
	for i := range confs {
		cfg.ClientMaxBodySize = int64(i + 1) // two configurations that differ
		if confs[i], hashes[i], err = Render(Model{}, cfg); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		i++
		if err := rt.Apply(context.Background(), confs[i%2], hashes[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRuntime is a Runtime for cfg that nothing has started yet, stopped when the benchmark ends.
func benchRuntime(b *testing.B, cfg RenderConfig) *Runtime {
	b.Helper()
	rt, err := NewRuntime(RuntimeConfig{Process: ProcessConfig{Paths: cfg.Paths, Log: zap.NewNop()}, StatusPort: cfg.StatusPort,
		StatusToken: cfg.StatusToken, ConfirmTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Stop(context.Background()) })
	return rt
}

func mustTranslate(b testing.TB, ing *networkingv1.Ingress, svcs services) *IngressTranslation {
	b.Helper()
	t, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
	if err != nil {
		b.Fatal(err)
	}
	return t
}
