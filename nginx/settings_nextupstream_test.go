package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestNextUpstreamSettingsThroughNginx: through real NGINX, with one endpoint answering 503 and one 200,
// the default conditions pass the 503 on, proxy-next-upstream with http_503 retries it on the other
// endpoint, and proxy-next-upstream-tries 1 forbids that retry.
func TestNextUpstreamSettingsThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	bad := httpServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	good := httpServer(t, func(w http.ResponseWriter, r *http.Request) {})
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "http")),
		ingress("default", "web", rule("web.example", prefix("/", "web", 80))),
	}, nil)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}} // one connection: one worker's round robin
	t.Cleanup(client.CloseIdleConnections)
	apply := func(data map[string]string) {
		t.Helper()
		s, _, problems := ParseSettings(data, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg.Settings = s
		applyModel(t, rt, m, cfg)
		if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "web", 80).Name: {bad, good}}); err != nil {
			t.Fatal(err)
		}
	}
	// batch sends 10 requests on one new connection. Right after a reload a connection may still land
	// on a worker of the previous configuration (each worker has its own listening socket with
	// reuse-port, and the old ones close theirs only as they shut down), so callers retry batches until
	// the new configuration answers, for a few seconds.
	batch := func() map[int]int {
		t.Helper()
		client.CloseIdleConnections()
		got := map[int]int{}
		for range 10 {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", cfg.HTTPPort), nil)
			req.Host = "web.example"
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got[resp.StatusCode]++
		}
		return got
	}
	expect := func(what string, data map[string]string, ok func(map[int]int) bool) {
		t.Helper()
		apply(data)
		var got map[int]int
		for deadline := time.Now().Add(5 * time.Second); ; {
			if got = batch(); ok(got) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: statuses %v", what, got)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	expect("default conditions, want both 503 and 200 (round robin, no retry on 503)", map[string]string{},
		func(got map[int]int) bool { return got[503] > 0 && got[200] > 0 })
	expect("http_503 with one try, want some 503", map[string]string{"proxy-next-upstream": "error timeout http_503", "proxy-next-upstream-tries": "1"},
		func(got map[int]int) bool { return got[503] > 0 })
	expect("http_503, want 200 only (retried on the other endpoint)", map[string]string{"proxy-next-upstream": "error timeout http_503"},
		func(got map[int]int) bool { return got[200] == 10 })
	if _, _, problems := ParseSettings(map[string]string{"proxy-next-upstream": "error http_418"}, nil); len(problems) != 1 {
		t.Errorf("http_418: problems %v", problems)
	}
}
