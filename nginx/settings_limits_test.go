package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// TestLimitStatusSettingsThroughNginx: through real NGINX, a request over limit-rpm gets the ConfigMap's
// limit-req-status-code and one over limit-connections its limit-conn-status-code.
func TestLimitStatusSettingsThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	s, _, problems := ParseSettings(map[string]string{"limit-req-status-code": "429", "limit-conn-status-code": "507"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	cfg.Settings = s
	rt := testRuntime(t, cfg, nil)
	held, release := make(chan struct{}), make(chan struct{})
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(held)
			<-release
		}
		_, _ = io.WriteString(w, "app")
	})
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "rpm", annotate(AnnotationLimitRPM, "1", AnnotationLimitBurstMultiplier, "1"), rule("rpm.example", prefix("/", "app", 80))),
		ingress("default", "conn", annotate(AnnotationLimitConnections, "1"), rule("conn.example", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	client := proxyClient(cfg.HTTPPort, nil)
	get := func(host, path string) int {
		resp, err := client.Get(fmt.Sprintf("http://%s:%d%s", host, cfg.HTTPPort, path))
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var codes []int
	for range 3 {
		codes = append(codes, get("rpm.example", "/"))
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Errorf("limit-rpm 1 with a burst of 1: statuses %v, want 200 200 429", codes)
	}

	done := make(chan int)
	go func() { done <- get("conn.example", "/hold") }()
	<-held
	if code := get("conn.example", "/"); code != 507 {
		t.Errorf("a second request while one is in progress: %d, want 507", code)
	}
	close(release)
	if code := <-done; code != 200 {
		t.Errorf("the held request: %d", code)
	}
}
