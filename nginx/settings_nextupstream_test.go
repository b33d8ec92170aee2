package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
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
	statuses := func(data map[string]string) map[int]int {
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
		// A kept-alive connection may still be held by a worker of the configuration before this one,
		// which finishes its requests after the reload: start on a new connection.
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
	if got := statuses(map[string]string{}); got[503] == 0 || got[200] == 0 {
		t.Errorf("default conditions: statuses %v, want both 503 and 200 (round robin, no retry on 503)", got)
	}
	if got := statuses(map[string]string{"proxy-next-upstream": "error timeout http_503", "proxy-next-upstream-tries": "1"}); got[503] == 0 {
		t.Errorf("http_503 with one try: statuses %v, want some 503", got)
	}
	if got := statuses(map[string]string{"proxy-next-upstream": "error timeout http_503"}); got[200] != 10 {
		t.Errorf("http_503: statuses %v, want 200 only (retried on the other endpoint)", got)
	}
	if _, _, problems := ParseSettings(map[string]string{"proxy-next-upstream": "error http_418"}, nil); len(problems) != 1 {
		t.Errorf("http_418: problems %v", problems)
	}
}
