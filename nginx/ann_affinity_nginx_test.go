package nginx

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests in this file run the balancing group through real NGINX, the Lua router and balancer.

// stickyClient is one browser: it keeps the affinity cookie that NGINX sets.
type stickyClient struct {
	cookie string // "NAME=value", or "" before the first answer with one
}

// get sends a request for url with the client's cookie and returns the backend that answered and the
// Set-Cookie header of the answer; the client keeps a new cookie.
func (c *stickyClient) get(t *testing.T, hc *http.Client, url, name string) (backend, setCookie string, status int) {
	t.Helper()
	var header []string
	if c.cookie != "" {
		header = []string{"Cookie", c.cookie}
	}
	r := fetch(t, hc, url, header...)
	setCookie = r.header.Get("Set-Cookie")
	if v, ok := strings.CutPrefix(setCookie, name+"="); ok {
		c.cookie = name + "=" + strings.SplitN(v, ";", 2)[0]
	}
	return r.echo.Backend, setCookie, r.status
}

// TestAffinityNginx: cookie affinity keeps a client on its endpoint over 20 requests, in balanced mode
// (also through a profile's named location) and in persistent mode; the cookie shows no address and
// carries the annotations' attributes; adding an endpoint keeps every persistent session and moves
// balanced sessions only to the new endpoint; removing one moves only its own sessions.
func TestAffinityNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	m, _ := buildModel(t, []any{service("default", "app", port(80, "")),
		ingress("default", "balanced", annotate(AnnotationAffinity, "cookie", AnnotationSessionCookieMaxAge, "3600",
			AnnotationSessionCookieSameSite, "lax"), rule("balanced.example.com", prefix("/app", "app", 80))),
		ingress("default", "persistent", annotate(AnnotationAffinity, "cookie", AnnotationAffinityMode, "persistent",
			AnnotationSessionCookieName, "ROUTE", AnnotationSessionCookiePath, "/", AnnotationSessionCookieDomain, "persistent.example.com",
			AnnotationSessionCookieSecure, "true"), rule("persistent.example.com", prefix("/", "app", 80))),
		ingress("default", "profile", annotate(AnnotationAffinity, "cookie", AnnotationProxyBodySize, "2k"),
			rule("profile.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	backends := map[string]Endpoint{}
	for _, name := range []string{"a", "b", "c", "d"} {
		backends[name] = echoBackend(t, name)
	}
	push := func(names ...string) {
		t.Helper()
		var eps []Endpoint
		for _, n := range names {
			eps = append(eps, backends[n])
		}
		if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: eps}); err != nil {
			t.Fatal(err)
		}
	}
	push("a", "b", "c")
	hc := proxyClient(cfg.HTTPPort, nil)
	base := func(host string) string { return fmt.Sprintf("http://%s:%d", host, cfg.HTTPPort) }

	// One client each: 20 requests, one endpoint, one Set-Cookie (the first answer's).
	for _, tc := range []struct{ host, path, name, attrs string }{
		{"balanced.example.com", "/app/x", "INGRESSCOOKIE", "; Path=/app; Max-Age=3600; HttpOnly; SameSite=Lax"},
		{"persistent.example.com", "/", "ROUTE", "; Path=/; Domain=persistent.example.com; Secure; HttpOnly"},
		{"profile.example.com", "/", "INGRESSCOOKIE", "; Path=/; HttpOnly"},
	} {
		c := &stickyClient{}
		first, set, status := c.get(t, hc, base(tc.host)+tc.path, tc.name)
		if status != http.StatusOK || c.cookie == "" || !strings.HasSuffix(set, tc.attrs) {
			t.Fatalf("%s: first answer %d, Set-Cookie %q; want 200 and a cookie %s=...%s", tc.host, status, set, tc.name, tc.attrs)
		}
		if ep := backends[first]; strings.Contains(c.cookie, "127.0.0.1") || strings.Contains(c.cookie, fmt.Sprint(ep.Port)) {
			t.Errorf("%s: cookie %q shows its endpoint %s:%d", tc.host, c.cookie, ep.Address, ep.Port)
		}
		for i := range 20 {
			got, set, _ := c.get(t, hc, base(tc.host)+tc.path, tc.name)
			if got != first || set != "" {
				t.Fatalf("%s: request %d with cookie %s went to %s (Set-Cookie %q), the first to %s", tc.host, i, c.cookie, got, set, first)
			}
		}
	}

	// Over HTTPS the cookie is Secure without session-cookie-secure.
	hs := proxyClient(cfg.HTTPSPort, &tls.Config{InsecureSkipVerify: true})
	if _, set, status := (&stickyClient{}).get(t, hs, fmt.Sprintf("https://balanced.example.com:%d/app", cfg.HTTPSPort), "INGRESSCOOKIE"); status != http.StatusOK ||
		!strings.HasSuffix(set, "; Path=/app; Max-Age=3600; Secure; HttpOnly; SameSite=Lax") {
		t.Errorf("over HTTPS: %d, Set-Cookie %q; want a Secure cookie", status, set)
	}

	// 40 clients per mode; then an endpoint is added, then one removed.
	clients := func(host string, name string) ([]*stickyClient, []string) {
		cs, at := make([]*stickyClient, 40), make([]string, 40)
		for i := range cs {
			cs[i] = &stickyClient{}
			at[i], _, _ = cs[i].get(t, hc, base(host)+"/app", name)
		}
		return cs, at
	}
	balanced, balancedAt := clients("balanced.example.com", "INGRESSCOOKIE")
	persistent, persistentAt := clients("persistent.example.com", "ROUTE")
	for _, at := range [][]string{balancedAt, persistentAt} {
		count := map[string]int{}
		for _, b := range at {
			count[b]++
		}
		if len(count) != 3 {
			t.Errorf("40 new clients went to %v, want all of a, b and c", count)
		}
	}
	push("a", "b", "c", "d")
	moved := 0
	for i, c := range balanced {
		got, _, _ := c.get(t, hc, base("balanced.example.com")+"/app", "INGRESSCOOKIE")
		switch {
		case got == balancedAt[i]:
		case got == "d":
			moved++
			balancedAt[i] = "d"
		default:
			t.Errorf("balanced client %d moved from %s to %s when d was added; a session moves to the new endpoint or stays", i, balancedAt[i], got)
		}
	}
	t.Logf("balanced: %d of 40 sessions moved to the new endpoint d", moved)
	if moved == 0 || moved > 25 {
		t.Errorf("balanced: %d of 40 sessions moved to the new endpoint, want some (about a quarter)", moved)
	}
	for i, c := range persistent {
		if got, set, _ := c.get(t, hc, base("persistent.example.com")+"/", "ROUTE"); got != persistentAt[i] || set != "" {
			t.Errorf("persistent client %d: %s (Set-Cookie %q) after d was added, before %s", i, got, set, persistentAt[i])
		}
	}
	newcomers := map[string]int{}
	for range 40 {
		got, _, _ := (&stickyClient{}).get(t, hc, base("persistent.example.com")+"/", "ROUTE")
		newcomers[got]++
	}
	if newcomers["d"] == 0 {
		t.Errorf("persistent: new clients went to %v, never to the new endpoint d", newcomers)
	}

	push("a", "c", "d") // b is gone
	for i, c := range balanced {
		got, _, _ := c.get(t, hc, base("balanced.example.com")+"/app", "INGRESSCOOKIE")
		if balancedAt[i] != "b" && got != balancedAt[i] || got == "b" {
			t.Errorf("balanced client %d of %s went to %s after b was removed", i, balancedAt[i], got)
		}
	}
	for i, c := range persistent {
		got, set, _ := c.get(t, hc, base("persistent.example.com")+"/", "ROUTE")
		switch {
		case persistentAt[i] == "b" && (got == "b" || set == ""):
			t.Errorf("persistent client %d of b: %s (Set-Cookie %q), want another endpoint and a new cookie", i, got, set)
		case persistentAt[i] != "b" && (got != persistentAt[i] || set != ""):
			t.Errorf("persistent client %d of %s went to %s (Set-Cookie %q) after b was removed", i, persistentAt[i], got, set)
		}
	}
	// A cookie no endpoint has is replaced.
	forged := &stickyClient{cookie: "ROUTE=0123456789abcdef01234567"}
	if _, set, status := forged.get(t, hc, base("persistent.example.com")+"/", "ROUTE"); status != http.StatusOK || set == "" {
		t.Errorf("a forged cookie: %d, Set-Cookie %q; want 200 and a new cookie", status, set)
	}
}

// TestAffinityChangeOnFailureNginx: when the endpoint of a client's cookie fails, the request fails
// too (retries go to the same endpoint), unless session-cookie-change-on-failure sends the retry to
// another endpoint, whose cookie the client then gets.
func TestAffinityChangeOnFailureNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	m, _ := buildModel(t, []any{service("default", "app", port(80, "")),
		ingress("default", "stay", annotate(AnnotationAffinity, "cookie"), rule("stay.example.com", prefix("/", "app", 80))),
		ingress("default", "change", annotate(AnnotationAffinity, "cookie", AnnotationSessionCookieChangeOnFailure, "true"),
			rule("change.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	var servers []*httptest.Server
	var eps []Endpoint
	for _, name := range []string{"a", "b", "c"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprintf(w, `{"Backend":%q}`, name)
		}))
		t.Cleanup(srv.Close)
		servers = append(servers, srv)
		eps = append(eps, endpointOf(srv))
	}
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: eps}); err != nil {
		t.Fatal(err)
	}
	hc := proxyClient(cfg.HTTPPort, nil)
	// A cookie of c (balanced cookies are the same for every Ingress of an upstream).
	var onC *stickyClient
	for range 200 {
		c := &stickyClient{}
		if got, _, _ := c.get(t, hc, fmt.Sprintf("http://stay.example.com:%d/", cfg.HTTPPort), "INGRESSCOOKIE"); got == "c" {
			onC = c
			break
		}
	}
	if onC == nil {
		t.Fatal("200 new clients, none on c")
	}
	servers[2].Close()
	stay := *onC
	if _, _, status := stay.get(t, hc, fmt.Sprintf("http://stay.example.com:%d/", cfg.HTTPPort), "INGRESSCOOKIE"); status != http.StatusBadGateway {
		t.Errorf("without change-on-failure, the cookie's failed endpoint: %d, want 502", status)
	}
	change := *onC
	got, set, status := change.get(t, hc, fmt.Sprintf("http://change.example.com:%d/", cfg.HTTPPort), "INGRESSCOOKIE")
	if status != http.StatusOK || got == "c" || set == "" {
		t.Fatalf("with change-on-failure: %d from %q, Set-Cookie %q; want 200 from a or b and a new cookie", status, got, set)
	}
	for range 5 {
		if again, _, _ := change.get(t, hc, fmt.Sprintf("http://change.example.com:%d/", cfg.HTTPPort), "INGRESSCOOKIE"); again != got {
			t.Errorf("after the change, the new cookie went to %s, want %s", again, got)
		}
	}
}

// endpointOf returns a test server as an endpoint.
func endpointOf(srv *httptest.Server) Endpoint {
	var ep Endpoint
	_, _ = fmt.Sscanf(strings.TrimPrefix(srv.URL, "http://127.0.0.1:"), "%d", &ep.Port)
	ep.Address = "127.0.0.1"
	return ep
}

// TestUpstreamHashByNginx: upstream-hash-by $arg_x sends equal x to equal endpoints, different x to
// several, and the keys of an endpoint that refuses connections to the next one; with a subset of 2, a
// key goes to at most 2 endpoints (the refusing one's are retried elsewhere).
func TestUpstreamHashByNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	m, _ := buildModel(t, []any{service("default", "app", port(80, "")),
		ingress("default", "hash", annotate(AnnotationUpstreamHashBy, "$arg_x"), rule("hash.example.com", prefix("/", "app", 80))),
		ingress("default", "subset", annotate(AnnotationUpstreamHashBy, "${arg_x}-v1", AnnotationUpstreamHashBySubset, "true",
			AnnotationUpstreamHashBySubsetSize, "2"), rule("subset.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	var eps []Endpoint
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		eps = append(eps, echoBackend(t, name))
	}
	// And one that refuses connections: its keys are retried on the next endpoint of the ring.
	eps = append(eps, Endpoint{Address: "127.0.0.1", Port: int32(freePort(t))})
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: eps}); err != nil {
		t.Fatal(err)
	}
	hc := proxyClient(cfg.HTTPPort, nil)
	seen := map[string]bool{}
	for x := range 30 {
		url := fmt.Sprintf("http://hash.example.com:%d/?x=%d", cfg.HTTPPort, x)
		r := fetch(t, hc, url)
		if r.status != http.StatusOK {
			t.Fatalf("x=%d: %d, want 200 (a failed endpoint's keys go to the next one)", x, r.status)
		}
		first := r.echo.Backend
		seen[first] = true
		for range 5 {
			if got := fetch(t, hc, url); got.echo.Backend != first {
				t.Fatalf("x=%d went to %s, then to %q (%d)", x, first, got.echo.Backend, got.status)
			}
		}
	}
	if len(seen) < 4 {
		t.Errorf("30 keys went to %v only", seen)
	}
	for x := range 10 {
		url := fmt.Sprintf("http://subset.example.com:%d/?x=%d", cfg.HTTPPort, x)
		got := map[string]bool{}
		for range 20 {
			got[fetch(t, hc, url).echo.Backend] = true
		}
		if len(got) > 2 {
			t.Errorf("subset of 2: x=%d went to %v", x, got)
		}
	}
}

// TestLoadBalanceEWMANginx: with load-balance ewma, most requests go to the faster of two endpoints
// (one worker, so that one set of statistics sees every request); round robin splits them evenly.
func TestLoadBalanceEWMANginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.WorkerProcesses = "1"
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	m, _ := buildModel(t, []any{service("default", "app", port(80, "")),
		ingress("default", "ewma", annotate(AnnotationLoadBalance, "ewma"), rule("ewma.example.com", prefix("/", "app", 80))),
		ingress("default", "rr", rule("rr.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	slow := httpServer(t, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(40 * time.Millisecond)
		_, _ = fmt.Fprint(w, `{"Backend":"slow"}`)
	})
	fast := httpServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprint(w, `{"Backend":"fast"}`) })
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {slow, fast}}); err != nil {
		t.Fatal(err)
	}
	hc := proxyClient(cfg.HTTPPort, nil)
	count := func(host string) map[string]int {
		n := map[string]int{}
		for range 40 {
			n[fetch(t, hc, fmt.Sprintf("http://%s:%d/", host, cfg.HTTPPort)).echo.Backend]++
		}
		return n
	}
	if n := count("ewma.example.com"); n["fast"] < 34 {
		t.Errorf("ewma: %v of 40 requests, want most to the fast endpoint", n)
	}
	if n := count("rr.example.com"); n["fast"] != 20 {
		t.Errorf("round robin: %v of 40 requests, want 20 each", n)
	}
}

// TestBalanceRouteDataRefused: the data plane refuses a route whose balancing settings are not what
// the controller writes, alone, with the route's index.
func TestBalanceRouteDataRefused(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	applyModel(t, rt, Model{}, cfg)
	web := string(up("default", "web", 80).Name)
	for field, want := range map[string]string{
		`"balance":"ewma"`:                                               `"balance" must be an object`,
		`"balance":{}`:                                                   `"balance" must have "hash", "lb" or "cookie"`,
		`"balance":{"lb":"random"}`:                                      `"balance" "lb" must be "ewma"`,
		`"balance":{"hash":"$request_body"}`:                             `variable $request_body is not one an expression may use`,
		`"balance":{"hash":"$ingress_reactor_token"}`:                    `is not one an expression may use`,
		`"balance":{"hash":"$arg_x;"}`:                                   `is not a letter, digit`,
		`"balance":{"hash":"text"}`:                                      `no variable`,
		`"balance":{"hash":"$arg_x","subset":0}`:                         `"subset" must be a whole number`,
		`"balance":{"cookie":{"name":"a;b","path":"/"}}`:                 `needs a "name" of token characters`,
		`"balance":{"cookie":{"name":"a","path":"/;Domain=x"}}`:          `cookie "path" must be a path`,
		`"balance":{"cookie":{"name":"a","path":"/\r\nX: 1"}}`:           `cookie "path" must be a path`,
		`"balance":{"cookie":{"name":"a","path":"/","domain":"a;b"}}`:    `cookie "domain" must be a domain name`,
		`"balance":{"cookie":{"name":"a","path":"/","samesite":"x"}}`:    `cookie "samesite" must be None, Lax or Strict`,
		`"balance":{"cookie":{"name":"a","path":"/","max_age":-1}}`:      `cookie "max_age" must be whole seconds`,
		`"balance":{"cookie":{"name":"a","path":"/","persistent":true}}`: `persistent cookie needs a hex "key"`,
	} {
		entry := `{"routes":[{"path":"/ok","upstream":"` + web + `"},{"path":"/","upstream":"` + web + `",` + field + `}]}`
		err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{"a.example.com": []byte(entry)}})
		refused := RefusedRoutes(err)
		if r, ok := refused["a.example.com"]; !ok || r.Route != 2 || !strings.Contains(r.Error, want) {
			t.Errorf("%s: push answered %v (refused %+v); want route 2 refused: %s", field, err, refused, want)
		}
	}
}

// TestBalancingLua runs the unit tests of the balancing methods (testdata/lua/balancing_test.lua) in a
// minimal NGINX with the embedded Lua modules: hash ring balance and stability under endpoint churn,
// EWMA picking the faster endpoint, expressions and cookies.
func TestBalancingLua(t *testing.T) {
	bin := requireNginx(t)
	paths := nginxDir(t)
	mods, err := DetectModules(false)
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "lua", "balancing_test.lua"))
	if err != nil {
		t.Fatal(err)
	}
	var loads strings.Builder
	for _, m := range mods {
		fmt.Fprintf(&loads, "load_module %s;\n", m)
	}
	port := freePort(t)
	conf := fmt.Sprintf(`%s
daemon off;
master_process off;
error_log %[2]s/error.log notice;
pid %[2]s/nginx.pid;
events {}
http {
	access_log off;
	client_body_temp_path %[2]s/body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	lua_package_path %[3]q;
	server {
		listen 127.0.0.1:%[4]d;
		location / {
			content_by_lua_file %[5]s;
		}
	}
}
`, loads.String(), paths.Prefix, paths.LuaDir()+"/?.lua;;", port, script)
	confFile := filepath.Join(paths.Prefix, "balancing.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", paths.Prefix, "-c", confFile)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(paths.Prefix, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", out, log)
		}
	})
	var resp *http.Response
	for i := 0; ; i++ {
		resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err == nil {
			break
		}
		if i == 200 {
			t.Fatalf("nginx does not answer on %d: %v", port, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("Lua unit tests: %d\n%s", resp.StatusCode, body)
	}
	log, _ := os.ReadFile(filepath.Join(paths.Prefix, "error.log"))
	for _, line := range strings.Split(string(log), "\n") {
		if _, timing, ok := strings.Cut(line, "[lua] balancing_test.lua:"); ok {
			t.Log(timing)
		}
	}
}

// TestAffinityCookieNameIsExactNginx: the affinity cookie is found by its exact name, and the first
// usable cookie of that name counts. NGINX's $cookie_<name> matches names in any case and takes the
// first one, so an application's own cookie "route", or an older "ROUTE" that another host set for the
// parent domain, sent before the affinity cookie took its place: every request got a new endpoint and a
// new cookie.
func TestAffinityCookieNameIsExactNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	m, _ := buildModel(t, []any{service("default", "app", port(80, "")),
		ingress("default", "b", annotate(AnnotationAffinity, "cookie", AnnotationSessionCookieName, "ROUTE"),
			rule("b.example.com", prefix("/", "app", 80))),
		ingress("default", "p", annotate(AnnotationAffinity, "cookie", AnnotationAffinityMode, "persistent",
			AnnotationSessionCookieName, "ROUTE"), rule("p.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	eps := []Endpoint{echoBackend(t, "a"), echoBackend(t, "b"), echoBackend(t, "c")}
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "app", 80).Name: eps}); err != nil {
		t.Fatal(err)
	}
	hc := proxyClient(cfg.HTTPPort, nil)
	url := fmt.Sprintf("http://b.example.com:%d/", cfg.HTTPPort)
	c := &stickyClient{}
	first, _, status := c.get(t, hc, url, "ROUTE")
	if status != http.StatusOK || c.cookie == "" {
		t.Fatalf("first request: %d, cookie %q", status, c.cookie)
	}
	for i := range 10 {
		r := fetch(t, hc, url, "Cookie", "route=app-session; "+c.cookie)
		if r.echo.Backend != first || r.header.Get("Set-Cookie") != "" {
			t.Fatalf("request %d with route=app-session; %s went to %s (Set-Cookie %q), want %s and no new cookie",
				i, c.cookie, r.echo.Backend, r.header.Get("Set-Cookie"), first)
		}
	}
	// Persistent: a token of another Ingress's key (a cookie for the parent domain) comes first.
	purl := fmt.Sprintf("http://p.example.com:%d/", cfg.HTTPPort)
	p := &stickyClient{}
	pfirst, _, status := p.get(t, hc, purl, "ROUTE")
	if status != http.StatusOK || p.cookie == "" {
		t.Fatalf("persistent, first request: %d, cookie %q", status, p.cookie)
	}
	for i := range 10 {
		r := fetch(t, hc, purl, "Cookie", "ROUTE=0123456789abcdef01234567; "+p.cookie)
		if r.echo.Backend != pfirst || r.header.Get("Set-Cookie") != "" {
			t.Fatalf("persistent request %d with a foreign ROUTE first, then %s, went to %s (Set-Cookie %q), want %s and no new cookie",
				i, p.cookie, r.echo.Backend, r.header.Get("Set-Cookie"), pfirst)
		}
	}
}
