package nginx

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// authSeen is what the test's auth service saw of one auth request.
type authSeen struct {
	method string
	uri    string
	host   string
	header http.Header
	body   string
}

// TestExtAuthThroughNginx runs external auth through real NGINX with an auth service run by the test:
// its answer decides, it sees ingress-nginx's headers and no body, and the backend is never reached
// unless it said yes.
func TestExtAuthThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	var mu sync.Mutex
	var seen []authSeen
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, authSeen{host: r.Host, method: r.Method, uri: r.RequestURI, header: r.Header.Clone(), body: string(body)})
		mu.Unlock()
		switch r.Header.Get("X-Test-Verdict") {
		case "deny":
			w.Header().Set("WWW-Authenticate", `Bearer realm="test"`)
			w.Header().Set("Set-Cookie", "session=gone")
			w.WriteHeader(http.StatusUnauthorized)
		case "forbid":
			w.WriteHeader(http.StatusForbidden)
		case "broken":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.Header().Set("X-Auth-Request-User", "alice")
			w.Header().Set("X-Auth-Request-Email", "alice@example.com")
			w.Header().Set("Set-Cookie", "session=fresh")
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(auth.Close)
	authAddr := auth.Listener.Addr().String()

	// A closed port: an auth service that cannot be reached.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := l.Addr().String()
	l.Close()

	var backendMu sync.Mutex
	var backendSeen []http.Header
	var backendBodies []string
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		backendMu.Lock()
		backendSeen = append(backendSeen, r.Header.Clone())
		backendBodies = append(backendBodies, string(body))
		backendMu.Unlock()
		_, _ = io.WriteString(w, "app "+r.URL.Path)
	})
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "plain", annotate(AnnotationAuthURL, "http://"+authAddr+"/oauth2/auth?x=1",
			AnnotationAuthResponseHeaders, "X-Auth-Request-User, X-Auth-Request-Email"),
			rule("plain.example.com", prefix("/", "app", 80))),
		ingress("default", "signin", annotate(AnnotationAuthURL, "http://"+authAddr+"/check", AnnotationAuthMethod, "GET",
			AnnotationAuthSignin, "https://login.example.com/oauth2/start?app=1"),
			rule("signin.example.com", prefix("/", "app", 80))),
		ingress("default", "vars", annotate(AnnotationAuthURL, "http://"+authAddr+"/check",
			AnnotationAuthSignin, "https://$host/oauth2/start?rd=$escaped_request_uri"),
			rule("vars.example.com", prefix("/", "app", 80))),
		ingress("default", "param", annotate(AnnotationAuthURL, "http://"+authAddr+"/check",
			AnnotationAuthSignin, "https://login.example.com/start", AnnotationAuthSigninRedirectParam, "next"),
			rule("param.example.com", prefix("/", "app", 80))),
		ingress("default", "always", annotate(AnnotationAuthURL, "http://"+authAddr+"/check", AnnotationAuthAlwaysSetCookie, "true"),
			rule("always.example.com", prefix("/", "app", 80))),
		ingress("default", "down", annotate(AnnotationAuthURL, "http://"+downAddr+"/auth"),
			rule("down.example.com", prefix("/", "app", 80))),
	}, nil)
	if len(m.Profiles) != 6 {
		t.Fatalf("profiles %+v, want six", m.Profiles)
	}
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, host, path, verdict, body string, extra map[string]string) (*http.Response, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("X-Test-Verdict", verdict)
		req.Header.Set("X-Request-ID", "req-42")
		for k, v := range extra {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	lastAuth := func() authSeen {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			t.Fatal("the auth service saw no request")
		}
		s := seen[len(seen)-1]
		seen = nil
		return s
	}
	backendCount := func() int {
		backendMu.Lock()
		defer backendMu.Unlock()
		return len(backendSeen)
	}

	// 2xx: through, with the listed headers, whatever the client claimed.
	resp, body := do(http.MethodPost, "plain.example.com", "/app/page?q=a%20b", "allow", "secret body",
		map[string]string{"X-Auth-Request-User": "mallory", "Cookie": "session=old"})
	if resp.StatusCode != http.StatusOK || body != "app /app/page" {
		t.Fatalf("auth 202: %d %q, want the app's answer", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Set-Cookie"); got != "session=fresh" {
		t.Errorf("auth 202: Set-Cookie %q, want the auth answer's", got)
	}
	a := lastAuth()
	// A subrequest's method is GET, as in ingress-nginx; X-Original-Method tells the request's.
	if a.method != http.MethodGet || a.uri != "/oauth2/auth?x=1" || a.body != "" {
		t.Errorf("auth request %s %s with body %q, want GET /oauth2/auth?x=1 without a body", a.method, a.uri, a.body)
	}
	for h, want := range map[string]string{
		"X-Original-Url": "http://plain.example.com/app/page?q=a%20b", "X-Original-Method": "POST",
		"X-Auth-Request-Redirect": "/app/page?q=a%20b", "X-Sent-From": "nginx-ingress-controller", "X-Real-Ip": "127.0.0.1",
		"X-Forwarded-For": "127.0.0.1", "X-Request-Id": "req-42", "Cookie": "session=old", "Content-Length": "",
		"X-Forwarded-Proto": "", "X-Original-Uri": "",
	} {
		if got := a.header.Get(h); got != want {
			t.Errorf("auth request header %s %q, want %q", h, got, want)
		}
	}
	if host, _, _ := net.SplitHostPort(authAddr); a.host != host {
		t.Errorf("auth request Host %q, want the auth URL's host %s", a.host, host)
	}
	backendMu.Lock()
	h, b := backendSeen[len(backendSeen)-1], backendBodies[len(backendBodies)-1]
	backendMu.Unlock()
	if h.Get("X-Auth-Request-User") != "alice" || h.Get("X-Auth-Request-Email") != "alice@example.com" || b != "secret body" {
		t.Errorf("backend got user %q email %q body %q, want the auth answer's headers and the client's body",
			h.Get("X-Auth-Request-User"), h.Get("X-Auth-Request-Email"), b)
	}
	if h.Get("X-Forwarded-Host") != "plain.example.com" || h.Get("X-Request-Id") != "req-42" {
		t.Errorf("backend lost the usual proxy headers: X-Forwarded-Host %q X-Request-ID %q", h.Get("X-Forwarded-Host"), h.Get("X-Request-Id"))
	}

	// A chunked body never reaches the auth service either.
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://127.0.0.1:%d/chunked", cfg.HTTPPort), io.NopCloser(strings.NewReader("chunked secret")))
	req.Host = "plain.example.com"
	req.ContentLength = -1
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("chunked PUT: %d, want 200", resp.StatusCode)
		}
	}
	if a := lastAuth(); a.body != "" || a.header.Get("Transfer-Encoding") != "" {
		t.Errorf("auth request of a chunked PUT carried body %q (Transfer-Encoding %q)", a.body, a.header.Get("Transfer-Encoding"))
	}

	// 401 without auth-signin, 403, another status: never the backend.
	before := backendCount()
	if resp, _ := do(http.MethodGet, "plain.example.com", "/x", "deny", "", nil); resp.StatusCode != http.StatusUnauthorized ||
		resp.Header.Get("WWW-Authenticate") != `Bearer realm="test"` {
		t.Errorf("auth 401: %d WWW-Authenticate %q, want 401 with the auth service's challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if resp, _ := do(http.MethodGet, "plain.example.com", "/x", "forbid", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("auth 403: %d, want 403", resp.StatusCode)
	}
	if resp, _ := do(http.MethodGet, "plain.example.com", "/x", "broken", "", nil); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("auth 500: %d, want 500", resp.StatusCode)
	}
	if resp, _ := do(http.MethodGet, "down.example.com", "/x", "allow", "", nil); resp.StatusCode < 500 {
		t.Errorf("auth service down: %d, want 5xx", resp.StatusCode)
	}
	if n := backendCount(); n != before {
		t.Errorf("the backend got %d requests that the auth service did not let through", n-before)
	}

	// 401 with auth-signin: a redirect with rd; auth-method.
	resp, _ = do(http.MethodPost, "signin.example.com", "/p/a?b=c%20d", "deny", "", nil)
	want := "https://login.example.com/oauth2/start?app=1&rd=http://signin.example.com" + "%2Fp%2Fa%3Fb%3Dc%2520d"
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
		t.Errorf("auth 401 with auth-signin: %d Location %q, want 302 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	if resp.Header.Get("Set-Cookie") != "session=gone" {
		t.Errorf("signin redirect: Set-Cookie %q, want the auth answer's", resp.Header.Get("Set-Cookie"))
	}
	a = lastAuth()
	if a.method != http.MethodGet || a.uri != "/check" || a.body != "" || a.header.Get("X-Original-Method") != "POST" ||
		a.header.Get("X-Original-Uri") != "/p/a?b=c%20d" || a.header.Get("X-Scheme") != "http" {
		t.Errorf("auth-method GET: %s %s X-Original-Method %q X-Original-URI %q X-Scheme %q", a.method, a.uri,
			a.header.Get("X-Original-Method"), a.header.Get("X-Original-Uri"), a.header.Get("X-Scheme"))
	}
	if resp, _ := do(http.MethodGet, "signin.example.com", "/x", "forbid", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("auth 403 with auth-signin: %d, want 403", resp.StatusCode)
	}

	// The auth answer's Set-Cookie goes with an error answer only with auth-always-set-cookie.
	for host, want := range map[string]string{"plain.example.com": "", "always.example.com": "session=gone"} {
		if resp, _ := do(http.MethodGet, host, "/x", "deny", "", nil); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != want {
			t.Errorf("%s: auth 401: %d Set-Cookie %q, want 401 with %q", host, resp.StatusCode, resp.Header.Get("Set-Cookie"), want)
		}
	}
	for host, want := range map[string]string{
		"vars.example.com":  "https://vars.example.com/oauth2/start?rd=%2Fp%3Fq%3D1",
		"param.example.com": "https://login.example.com/start?next=http://param.example.com%2Fp%3Fq%3D1",
	} {
		if resp, _ := do(http.MethodGet, host, "/p?q=1", "deny", "", nil); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
			t.Errorf("%s: auth 401: %d Location %q, want 302 to %q", host, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}

	// The internal location cannot be asked for from outside.
	loc := m.Profiles[0].authLocation()
	if loc == "" {
		t.Fatal("no auth location")
	}
	if resp, _ := do(http.MethodGet, "plain.example.com", loc, "allow", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET %s from outside: %d, want 404", loc, resp.StatusCode)
	}

	// Routes pushed ahead of (or after) the configuration with their auth profile are refused, never
	// served without it.
	withoutProfiles := m
	withoutProfiles.Profiles = nil
	conf, hash, err := Render(withoutProfiles, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Apply(ctx, conf, hash); err != nil {
		t.Fatal(err)
	}
	if err := rt.Client().ReplaceRoutes(ctx, routeTable(&m)); err != nil {
		t.Fatal(err)
	}
	before = backendCount()
	if resp, _ := do(http.MethodGet, "plain.example.com", "/x", "allow", "", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a route whose auth profile the configuration lacks: %d, want 503", resp.StatusCode)
	}
	if n := backendCount(); n != before {
		t.Error("a route whose auth profile the configuration lacks reached the backend")
	}
}

// TestExtAuthOnOwnHostThroughNginx: auth-url "https://$host/oauth2/auth" (oauth2-proxy's documented form)
// sends the auth request to the route of /oauth2 on the request's own host, by the router's table: its
// answer decides, the request then reaches its own backend (the auth request's upstream never replaces
// the request's), and a host with no route for the auth path denies with 500.
func TestExtAuthOnOwnHostThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	var mu sync.Mutex
	var seen []authSeen
	proxy := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, authSeen{method: r.Method, uri: r.RequestURI, host: r.Host, header: r.Header.Clone()})
		mu.Unlock()
		if r.Header.Get("Cookie") != "session=ok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Auth-Request-User", "alice")
		w.WriteHeader(http.StatusAccepted)
	})
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "app "+r.URL.Path+" user="+r.Header.Get("X-Auth-Request-User"))
	})
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")), service("default", "oauth2-proxy", port(4180, "http")),
		ingress("default", "oauth2", rule("app.example.com", prefix("/oauth2", "oauth2-proxy", 4180))),
		ingress("default", "app", annotate(AnnotationAuthURL, "https://$host/oauth2/auth", AnnotationAuthResponseHeaders, "X-Auth-Request-User"),
			rule("app.example.com", prefix("/", "app", 80)), rule("lonely.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{
		up("default", "app", 80).Name: {app}, up("default", "oauth2-proxy", 4180).Name: {proxy},
	}); err != nil {
		t.Fatal(err)
	}
	get := func(host, path, cookie string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		req.Host = host
		req.Header.Set("X-Forwarded-Uri", "/spoofed")
		req.Header.Set("X-Forwarded-Host", "evil.example")
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("app.example.com", "/page", "session=ok"); code != http.StatusOK || body != "app /page user=alice" {
		t.Errorf("signed in: %d %q, want the app's 200 with the auth answer's user", code, body)
	}
	if code, body := get("app.example.com", "/page", ""); code != http.StatusUnauthorized || strings.Contains(body, "app ") {
		t.Errorf("not signed in: %d %q, want 401 without the app", code, body)
	}
	mu.Lock()
	if len(seen) != 2 || seen[0].uri != "/oauth2/auth" || seen[0].host != "app.example.com" || seen[0].header.Get("X-Forwarded-Proto") != "https" ||
		seen[0].header.Get("X-Original-URL") != "http://app.example.com/page" {
		t.Errorf("the auth service saw %+v; want two requests for /oauth2/auth on the request's host, with X-Forwarded-Proto https and X-Original-URL", seen)
	}
	if len(seen) > 0 && (seen[0].header.Get("X-Forwarded-Uri") != "" || seen[0].header.Get("X-Forwarded-Host") != "app.example.com") {
		t.Errorf("the auth service got the client's X-Forwarded-Uri %q / X-Forwarded-Host %q; want none / the routed host",
			seen[0].header.Get("X-Forwarded-Uri"), seen[0].header.Get("X-Forwarded-Host"))
	}
	mu.Unlock()
	// The /oauth2 paths themselves are served (the sign-in flow), without auth of their own.
	if code, _ := get("app.example.com", "/oauth2/auth", "session=ok"); code != http.StatusAccepted {
		t.Errorf("the auth route itself: %d, want the proxy's 202", code)
	}
	// No route for /oauth2 on this host: denied, never the app.
	if code, body := get("lonely.example.com", "/page", "session=ok"); code != http.StatusInternalServerError || strings.Contains(body, "app ") {
		t.Errorf("no auth route on the host: %d %q, want 500 without the app", code, body)
	}
}

// TestAuthProxySetHeadersThroughNginx: the auth service gets the ConfigMap's headers (replacing the
// client's of the same name, an empty value removing it), the backend does not, and a change of the
// ConfigMap reaches the auth service after its (one) reload.
func TestAuthProxySetHeadersThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	var mu sync.Mutex
	var authSaw, backendSaw http.Header
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		authSaw = r.Header.Clone()
		mu.Unlock()
		if r.Header.Get("X-Tenant") != "acme" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(auth.Close)
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		backendSaw = r.Header.Clone()
		mu.Unlock()
		_, _ = io.WriteString(w, "app")
	})
	cms := configMapLookup{nn("default", "auth-headers"): configMap("default", "auth-headers", "1",
		"X-Tenant", "acme", "X-Empty", "", "X-Quoted", `a "b" \c; }`)}
	svcs := servicesOf(service("default", "app", port(80, "http")))
	ing := ingress("default", "site", annotate(AnnotationAuthURL, "http://"+auth.Listener.Addr().String()+"/check",
		AnnotationAuthProxySetHeaders, "auth-headers"), rule("site.example.com", prefix("/", "app", 80)))
	b := NewModelBuilder()
	build := b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, ConfigMaps: cms, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 {
		t.Fatalf("rejected %+v", build.Rejected)
	}
	applyModel(t, rt, build.Model, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	get := func() int {
		t.Helper()
		req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "site.example.com"
		req.Header.Set("X-Tenant", "forged")
		req.Header.Set("X-Empty", "from-client")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("%d, want 200 (the auth service got X-Tenant %q)", code, authSaw.Values("X-Tenant"))
	}
	mu.Lock()
	if v := authSaw.Values("X-Tenant"); len(v) != 1 || v[0] != "acme" {
		t.Errorf("auth service saw X-Tenant %q, want only the ConfigMap's", v)
	}
	if v := authSaw.Values("X-Empty"); len(v) != 0 {
		t.Errorf("auth service saw X-Empty %q, want it removed", v)
	}
	if v := authSaw.Get("X-Quoted"); v != `a "b" \c; }` {
		t.Errorf("auth service saw X-Quoted %q", v)
	}
	if v := backendSaw.Get("X-Tenant"); v != "forged" || backendSaw.Get("X-Quoted") != "" {
		t.Errorf("backend saw X-Tenant %q, X-Quoted %q: the auth request's headers leaked", v, backendSaw.Get("X-Quoted"))
	}
	mu.Unlock()

	// The ConfigMap changes: a new profile (its headers are in nginx.conf), applied with a reload.
	changed := configMap("default", "auth-headers", "2", "X-Tenant", "other")
	cms[nn("default", "auth-headers")] = changed
	build = b.Update(UpdateInput{Objects: []ObjectRef{{Kind: KindConfigMap, Key: nn("default", "auth-headers")}},
		Get: func(types.NamespacedName) (*networkingv1.Ingress, bool) { return ing, true }, Lookup: svcs, ConfigMaps: cms, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 {
		t.Fatalf("rejected %+v", build.Rejected)
	}
	applyModel(t, rt, build.Model, cfg)
	if code := get(); code != http.StatusForbidden {
		t.Fatalf("after the change: %d, want 403 from the auth service", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if v := authSaw.Values("X-Tenant"); len(v) != 1 || v[0] != "other" {
		t.Errorf("auth service saw X-Tenant %q after the change, want \"other\"", v)
	}
}
