package nginx

import (
	"context"
	"fmt"
	"testing"
)

// TestRedirectCodeSettingThroughNginx: through real NGINX, the redirect to HTTPS (force-ssl-redirect) and
// the one to the www twin's host (from-to-www-redirect) answer 308 by default and the ConfigMap's
// http-redirect-code when set.
func TestRedirectCodeSettingThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "http")),
		ingress("default", "tls", annotate(AnnotationForceSSLRedirect, "true"), rule("secure.example", prefix("/", "web", 80))),
		ingress("default", "www", annotate(AnnotationFromToWWWRedirect, "true"), rule("shop.example", prefix("/", "web", 80))),
	}, nil)
	client := proxyClient(cfg.HTTPPort, nil)
	for _, want := range []int{308, 302} {
		data := map[string]string{}
		if want != 308 {
			data["http-redirect-code"] = fmt.Sprint(want)
		}
		s, _, problems := ParseSettings(data, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg.Settings = s
		applyModel(t, rt, m, cfg)
		if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "web", 80).Name: {echoBackend(t, "web")}}); err != nil {
			t.Fatal(err)
		}
		for _, host := range []string{"secure.example", "www.shop.example"} {
			resp, err := client.Get(fmt.Sprintf("http://%s:%d/x", host, cfg.HTTPPort))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want || resp.Header.Get("Location") == "" {
				t.Errorf("%v: %s: %d to %q, want %d", data, host, resp.StatusCode, resp.Header.Get("Location"), want)
			}
		}
	}
	if _, _, problems := ParseSettings(map[string]string{"http-redirect-code": "303"}, nil); len(problems) != 1 {
		t.Errorf("303: problems %v", problems)
	}
}
