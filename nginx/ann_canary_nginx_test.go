package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCanaryThroughNginx runs canary Ingresses through real NGINX and the Lua router: by header
// (always/never, a value, a pattern), by cookie, by weight 0, 30 (a chi-square test over 10,000
// requests) and 100, the precedence header > cookie > weight, a canary without endpoints, and the main
// route's profile applying to the canary's requests. Adding the canaries leaves nginx.conf as it was.
func TestCanaryThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	named := func(name string) Endpoint {
		return httpServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/teapot" {
				w.WriteHeader(http.StatusTeapot)
			}
			_, _ = io.WriteString(w, name)
		})
	}
	mainEP, canaryEP := named("main"), named("canary")
	svcs := []any{service("default", "main", port(80, "")), service("default", "canary", port(80, "")), service("default", "empty", port(80, ""))}
	mainIngress := func(host string, kv ...string) any {
		return ingress("default", "main-"+strings.Split(host, ".")[0], rule(host, prefix("/", "main", 80)), annotate(kv...))
	}
	canary := func(host, svc string, kv ...string) any {
		return ingress("default", "canary-"+strings.Split(host, ".")[0], rule(host, prefix("/", svc, 80)), annotate(append([]string{AnnotationCanary, "true"}, kv...)...))
	}
	mains := []any{
		mainIngress("header.example.com"), mainIngress("value.example.com"), mainIngress("pattern.example.com"),
		mainIngress("w0.example.com"), mainIngress("w30.example.com"), mainIngress("w100.example.com"), mainIngress("empty.example.com"),
		mainIngress("profile.example.com", AnnotationCustomHTTPErrors, "418"),
		ingress("default", "main-down", rule("down.example.com", prefix("/", "empty", 80))),
	}
	canaries := []any{
		canary("header.example.com", "canary", AnnotationCanaryByHeader, "X-Canary", AnnotationCanaryByCookie, "canary_cookie"),
		canary("value.example.com", "canary", AnnotationCanaryByHeader, "X-Canary", AnnotationCanaryByHeaderValue, "v2"),
		canary("pattern.example.com", "canary", AnnotationCanaryByHeader, "X-User", AnnotationCanaryByHeaderPattern, "^(alice|bob)$"),
		canary("w0.example.com", "canary", AnnotationCanaryWeight, "0"),
		canary("w30.example.com", "canary", AnnotationCanaryWeight, "30"),
		canary("w100.example.com", "canary", AnnotationCanaryWeight, "100", AnnotationCanaryByHeader, "X-Canary"),
		canary("empty.example.com", "empty", AnnotationCanaryWeight, "100"),
		canary("profile.example.com", "canary", AnnotationCanaryWeight, "100"),
		canary("down.example.com", "canary", AnnotationCanaryByHeader, "X-Canary"),
	}
	without, _ := buildModel(t, append(svcs, mains...), nil)
	m, conflicts := buildModel(t, append(append(svcs, mains...), canaries...), nil)
	if len(conflicts) != 0 {
		t.Fatalf("conflicts: %+v", conflicts)
	}
	confWithout, _, err := Render(without, cfg)
	if err != nil {
		t.Fatal(err)
	}
	confWith, _, err := Render(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(confWith) != string(confWithout) {
		t.Error("canaries changed nginx.conf: they must be route data only")
	}
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{
		up("default", "main", 80).Name: {mainEP}, up("default", "canary", 80).Name: {canaryEP},
	}); err != nil {
		t.Fatal(err)
	}

	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	t.Cleanup(c.CloseIdleConnections)
	get := func(host, path string, header ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		name, host string
		header     []string
		want       string
	}{
		{"header always", "header.example.com", []string{"X-Canary", "always"}, "canary"},
		{"header never", "header.example.com", []string{"X-Canary", "never"}, "main"},
		{"another header value falls through to the weight (0)", "header.example.com", []string{"X-Canary", "yes"}, "main"},
		{"no header, no cookie: the weight (0)", "header.example.com", nil, "main"},
		{"cookie always", "header.example.com", []string{"Cookie", "a=1; canary_cookie=always"}, "canary"},
		{"header never beats cookie always", "header.example.com", []string{"X-Canary", "never", "Cookie", "canary_cookie=always"}, "main"},
		{"header always beats cookie never", "header.example.com", []string{"X-Canary", "always", "Cookie", "canary_cookie=never"}, "canary"},
		{"another header value falls through to the cookie", "header.example.com", []string{"X-Canary", "maybe", "Cookie", "canary_cookie=always"}, "canary"},
		{"header value matches", "value.example.com", []string{"X-Canary", "v2"}, "canary"},
		{"with a value, always is just another value", "value.example.com", []string{"X-Canary", "always"}, "main"},
		{"pattern matches", "pattern.example.com", []string{"X-User", "bob"}, "canary"},
		{"pattern does not match", "pattern.example.com", []string{"X-User", "bobby"}, "main"},
		{"header never beats weight 100", "w100.example.com", []string{"X-Canary", "never"}, "main"},
		{"a canary without endpoints leaves its requests to the main backend", "empty.example.com", nil, "main"},
		{"the canary serves its requests while the main backend has no endpoints", "down.example.com", []string{"X-Canary", "always"}, "canary"},
	} {
		if code, body := get(tc.host, "/", tc.header...); code != http.StatusOK || body != tc.want {
			t.Errorf("%s: %d %q, want %q", tc.name, code, body, tc.want)
		}
	}
	if code, _ := get("down.example.com", "/"); code != http.StatusServiceUnavailable {
		t.Errorf("a main request while the main backend has no endpoints: %d, want 503", code)
	}
	// The main route's profile (custom-http-errors 418) applies to the canary's requests: NGINX's own
	// page replaces the canary's 418.
	if code, body := get("profile.example.com", "/teapot"); code != http.StatusTeapot || strings.Contains(body, "canary") {
		t.Errorf("canary request of a route with a profile: %d %q, want NGINX's 418 page", code, body)
	}
	if code, body := get("profile.example.com", "/"); code != http.StatusOK || body != "canary" {
		t.Errorf("canary request of a route with a profile: %d %q, want the canary", code, body)
	}

	count := func(host string, n int) (canaries int) {
		for range n {
			code, body := get(host, "/")
			if code != http.StatusOK {
				t.Fatalf("%s: %d %q", host, code, body)
			}
			if body == "canary" {
				canaries++
			}
		}
		return canaries
	}
	if got := count("w0.example.com", 200); got != 0 {
		t.Errorf("weight 0: %d of 200 requests went to the canary", got)
	}
	if got := count("w100.example.com", 200); got != 200 {
		t.Errorf("weight 100: %d of 200 requests went to the canary", got)
	}
	// Weight 30: chi-square against 30/70 over 10,000 requests, one degree of freedom; 10.83 is the
	// 0.1% critical value, so a correct router fails this test once in a thousand runs.
	const n = 10000
	got := count("w30.example.com", n)
	expCanary, expMain := 0.3*n, 0.7*n
	chi2 := sq(float64(got)-expCanary)/expCanary + sq(float64(n-got)-expMain)/expMain
	if chi2 > 10.83 {
		t.Errorf("weight 30: %d of %d requests went to the canary (chi-square %.2f > 10.83)", got, n, chi2)
	}
	t.Logf("weight 30: %d of %d to the canary, chi-square %.2f", got, n, chi2)
}

func sq(x float64) float64 { return x * x }

// TestCanaryRouteDataIsChecked: the data plane refuses a route whose canary object is malformed (which a
// hand-built or corrupted push could carry), naming the route, and keeps the hosts around it.
func TestCanaryRouteDataIsChecked(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	applyModel(t, rt, Model{}, cfg)

	bad := map[string]string{
		"no upstream":                          `"canary":{"weight":1,"total":100}`,
		"upstream with a slash":                `"canary":{"upstream":"a/b","weight":1,"total":100}`,
		"weight over the total":                `"canary":{"upstream":"up-2","weight":101,"total":100}`,
		"fractional weight":                    `"canary":{"upstream":"up-2","weight":1.5,"total":100}`,
		"header with a colon":                  `"canary":{"upstream":"up-2","weight":0,"total":100,"header":"a:b"}`,
		"cookie with a semicolon":              `"canary":{"upstream":"up-2","weight":0,"total":100,"cookie":"a;b"}`,
		"value without header":                 `"canary":{"upstream":"up-2","weight":0,"total":100,"header_value":"x"}`,
		"value with a newline":                 `"canary":{"upstream":"up-2","weight":0,"total":100,"header":"X","header_value":"a\nb"}`,
		"pattern that won't build":             `"canary":{"upstream":"up-2","weight":0,"total":100,"header":"X","header_pattern":"(a"}`,
		"balance cookie name with a semicolon": `"canary":{"upstream":"up-2","weight":0,"total":100,"balance":{"cookie":{"name":"a;b","path":"/"}}}`,
		"balance neither hash nor cookie":      `"canary":{"upstream":"up-2","weight":0,"total":100,"balance":{"lb":"least_conn"}}`,
	}
	hosts := map[Hostname][]byte{}
	names := map[Hostname]string{}
	i := 0
	for what, field := range bad {
		i++
		h := Hostname(fmt.Sprintf("h%d.example.com", i))
		hosts[h] = []byte(`{"routes":[{"path":"/","upstream":"up-1",` + field + `}]}`)
		names[h] = what
	}
	hosts["good.example.com"] = []byte(`{"routes":[{"path":"/","upstream":"up-1","canary":{"upstream":"up-2","weight":3,"total":1000,` +
		`"header":"X-Canary","header_pattern":"\\A(a|b)\\z","cookie":"c.v2","balance":{"cookie":{"name":"S","path":"/"}}}}]}`)
	refused := RefusedRoutes(rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: hosts}))
	for h, what := range names {
		if r, ok := refused[h]; !ok || r.Route != 1 || !strings.Contains(r.Error, "canary") {
			t.Errorf("%s: not refused (%+v)", what, r)
		}
	}
	if _, ok := refused["good.example.com"]; ok || len(refused) != len(bad) {
		t.Errorf("refused %d hosts (%+v), want exactly the %d bad ones", len(refused), refused["good.example.com"], len(bad))
	}
}
