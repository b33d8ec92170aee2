package nginx

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// buildModelWith is buildModel with translation options (the ConfigMap's defaults); a rejection or a
// conflict fails the test.
func buildModelWith(t *testing.T, opts TranslateOptions, svcs services, ings ...*networkingv1.Ingress) Model {
	t.Helper()
	m, rejected := translateAndMerge(svcs, opts, ings...)
	if len(rejected) > 0 {
		t.Fatal(rejected)
	}
	return m
}

// translateAndMerge translates ings with opts and merges the accepted ones; it returns the rejections by
// Ingress name.
func translateAndMerge(svcs services, opts TranslateOptions, ings ...*networkingv1.Ingress) (Model, map[string]error) {
	var ts []*IngressTranslation
	rejected := map[string]error{}
	for _, ing := range ings {
		tr, err := TranslateIngress(ing, svcs, opts)
		if err != nil {
			rejected[ing.Name] = err
			continue
		}
		ts = append(ts, tr)
	}
	m, _ := Merge(ts, nil)
	return m, rejected
}

// TestCanaryAffinityNginx runs affinity-canary-behavior through real NGINX: with sticky (the default),
// a client the canary served keeps going to the same canary endpoint by its cookie, whatever the canary
// rules say, and one the main backend served stays there; a canary without endpoints hands its clients
// to the main backend until it has endpoints again; weight 50 splits new clients, each of whom stays on
// its side. With legacy, the canary sets no cookie and its clients are not kept.
func TestCanaryAffinityNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	svcs := servicesOf(service("default", "web", port(80, "")), service("default", "web-v2", port(80, "")))
	pair := func(host string, mainKV, canaryKV []string) []*networkingv1.Ingress {
		name := strings.Split(host, ".")[0]
		return []*networkingv1.Ingress{
			ingress("default", "main-"+name, rule(host, prefix("/", "web", 80)), annotate(mainKV...)),
			ingress("default", "canary-"+name, rule(host, prefix("/", "web-v2", 80)), annotate(append([]string{AnnotationCanary, "true"}, canaryKV...)...)),
		}
	}
	var ings []*networkingv1.Ingress
	ings = append(ings, pair("sticky.example.com", []string{AnnotationAffinity, "cookie"}, []string{AnnotationCanaryByHeader, "X-Canary"})...)
	ings = append(ings, pair("w50.example.com", []string{AnnotationAffinity, "cookie", AnnotationAffinityMode, "persistent", AnnotationSessionCookieName, "W50"},
		[]string{AnnotationCanaryWeight, "50"})...)
	ings = append(ings, pair("legacy.example.com", []string{AnnotationAffinity, "cookie"},
		[]string{AnnotationCanaryByHeader, "X-Canary", AnnotationAffinityCanaryBehavior, "legacy"})...)
	m := buildModelWith(t, DefaultTranslateOptions(), svcs, ings...)
	applyModel(t, rt, m, cfg)
	mains := []Endpoint{echoBackend(t, "main-1"), echoBackend(t, "main-2"), echoBackend(t, "main-3")}
	canaries := []Endpoint{echoBackend(t, "canary-1"), echoBackend(t, "canary-2"), echoBackend(t, "canary-3")}
	push := func(canaryEPs []Endpoint) {
		t.Helper()
		if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{
			up("default", "web", 80).Name: mains, up("default", "web-v2", 80).Name: canaryEPs,
		}); err != nil {
			t.Fatal(err)
		}
	}
	push(canaries)
	hc := proxyClient(cfg.HTTPPort, nil)
	url := func(host string) string { return fmt.Sprintf("http://%s:%d/", host, cfg.HTTPPort) }
	// get sends c's request (its cookie, and header) and returns the backend; the client keeps a new cookie.
	get := func(c *stickyClient, host, name string, header ...string) (string, string) {
		t.Helper()
		if c.cookie != "" {
			header = append(header, "Cookie", c.cookie)
		}
		r := fetch(t, hc, url(host), header...)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d", host, r.status)
		}
		set := r.header.Get("Set-Cookie")
		if v, ok := strings.CutPrefix(set, name+"="); ok {
			c.cookie = name + "=" + strings.SplitN(v, ";", 2)[0]
		}
		return r.echo.Backend, set
	}
	side := func(backend string) string { return strings.SplitN(backend, "-", 2)[0] }

	// sticky: sent to the canary by its header once, then kept there by the cookie alone.
	toCanary := &stickyClient{}
	first, set := get(toCanary, "sticky.example.com", "INGRESSCOOKIE", "X-Canary", "always")
	if side(first) != "canary" || set == "" {
		t.Fatalf("X-Canary: always went to %s, Set-Cookie %q; want the canary and a cookie", first, set)
	}
	for i := range 20 {
		if got, set := get(toCanary, "sticky.example.com", "INGRESSCOOKIE"); got != first || set != "" {
			t.Fatalf("request %d with the canary's cookie %s went to %s (Set-Cookie %q), want %s", i, toCanary.cookie, got, set, first)
		}
	}
	// The cookie decides before the rules, as in ingress-nginx.
	if got, _ := get(toCanary, "sticky.example.com", "INGRESSCOOKIE", "X-Canary", "never"); got != first {
		t.Errorf("X-Canary: never with the canary's cookie went to %s, want %s", got, first)
	}
	// An older cookie of the same name that another host set for the parent domain (tagged with its own
	// upstream) comes first in the Cookie header: the canary's cookie behind it still keeps the client.
	behind := &stickyClient{cookie: "INGRESSCOOKIE=0123456789abcdef|00000000; " + toCanary.cookie}
	for i := range 5 {
		if got, _ := get(behind, "sticky.example.com", "INGRESSCOOKIE"); side(got) != "canary" {
			t.Fatalf("request %d with another host's cookie before the canary's (%s) went to %s, want the canary", i, behind.cookie, got)
		}
	}
	toMain := &stickyClient{}
	mainFirst, _ := get(toMain, "sticky.example.com", "INGRESSCOOKIE")
	if side(mainFirst) != "main" || toMain.cookie == "" || toMain.cookie == toCanary.cookie {
		t.Fatalf("without a header: %s, cookie %q; want the main backend and a cookie of its own", mainFirst, toMain.cookie)
	}
	for i := range 5 {
		if got, _ := get(toMain, "sticky.example.com", "INGRESSCOOKIE", "X-Canary", "always"); got != mainFirst {
			t.Fatalf("request %d with the main's cookie and X-Canary: always went to %s, want %s", i, got, mainFirst)
		}
	}
	// A cookie written before tags (by the previous version) keeps its endpoint and gets the main's tag,
	// which then keeps the client there whatever the rules say.
	untagged := &stickyClient{cookie: "INGRESSCOOKIE=0123456789abcdef"}
	old, set := get(untagged, "sticky.example.com", "INGRESSCOOKIE")
	if side(old) != "main" || !strings.HasPrefix(set, "INGRESSCOOKIE=0123456789abcdef|") {
		t.Fatalf("an untagged cookie went to %s, Set-Cookie %q; want the main backend and its key tagged", old, set)
	}
	for i := range 5 {
		if got, _ := get(untagged, "sticky.example.com", "INGRESSCOOKIE", "X-Canary", "always"); got != old {
			t.Fatalf("request %d with the retagged cookie %s and X-Canary: always went to %s, want %s", i, untagged.cookie, got, old)
		}
	}
	// An untagged cookie of another host before the client's tagged one: no new cookie on each request.
	both := &stickyClient{cookie: "INGRESSCOOKIE=fedcba9876543210; " + untagged.cookie}
	if _, set := get(both, "sticky.example.com", "INGRESSCOOKIE"); set != "" {
		t.Errorf("an untagged cookie before a tagged one (%s): Set-Cookie %q, want none", both.cookie, set)
	}
	// A canary without endpoints leaves its clients to the main backend; they come back after.
	push(nil)
	if got, _ := get(toCanary, "sticky.example.com", "INGRESSCOOKIE"); side(got) != "main" {
		t.Errorf("the canary's client while the canary has no endpoints went to %s, want the main backend", got)
	}
	push(canaries)
	if got, _ := get(toCanary, "sticky.example.com", "INGRESSCOOKIE"); got != first {
		t.Errorf("the canary's client after the canary's endpoints came back went to %s, want %s", got, first)
	}

	// Weight 50: new clients split between both sides, each kept on its own (persistent mode).
	sides := map[string]int{}
	for c := range 30 {
		client := &stickyClient{}
		at, _ := get(client, "w50.example.com", "W50")
		sides[side(at)]++
		for i := range 5 {
			if got, _ := get(client, "w50.example.com", "W50"); got != at {
				t.Fatalf("weight 50: client %d's request %d went to %s, its first to %s", c, i, got, at)
			}
		}
	}
	if sides["main"] == 0 || sides["canary"] == 0 {
		t.Errorf("weight 50: 30 new clients went to %v, want both sides", sides)
	}

	// legacy: the canary has no affinity of its own, so it sets no cookie and keeps nobody.
	legacy := &stickyClient{}
	if got, set := get(legacy, "legacy.example.com", "INGRESSCOOKIE", "X-Canary", "always"); side(got) != "canary" || set != "" {
		t.Fatalf("legacy: X-Canary: always went to %s, Set-Cookie %q; want the canary without a cookie", got, set)
	}
	if got, set := get(legacy, "legacy.example.com", "INGRESSCOOKIE"); side(got) != "main" || set == "" {
		t.Errorf("legacy: the canary's client without the header went to %s (Set-Cookie %q), want the main backend and its cookie", got, set)
	}
}

// TestBalanceSettingsNginx: the ConfigMap's upstream-hash-by balances the Ingresses without balancing
// annotations through real NGINX (a key keeps its endpoint), and an Ingress's load-balance round_robin
// keeps round robin.
func TestBalanceSettingsNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	s, _, problems := ParseSettings(map[string]string{"upstream-hash-by": "$arg_user", "load-balance": "ewma"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	cfg.Settings = s
	m := buildModelWith(t, s.TranslateOptions(DefaultTranslateOptions()), servicesOf(service("default", "app", port(80, ""))),
		ingress("default", "hashed", rule("hashed.example.com", prefix("/", "app", 80))),
		ingress("default", "rr", rule("rr.example.com", prefix("/", "app", 80)), annotate(AnnotationLoadBalance, "round_robin")))
	applyModel(t, rt, m, cfg)
	var eps []Endpoint
	for _, name := range []string{"a", "b", "c", "d"} {
		eps = append(eps, echoBackend(t, name))
	}
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: eps}); err != nil {
		t.Fatal(err)
	}
	hc := proxyClient(cfg.HTTPPort, nil)
	seen := map[string]bool{}
	for user := range 20 {
		u := fmt.Sprintf("http://hashed.example.com:%d/?user=u%d", cfg.HTTPPort, user)
		first := fetch(t, hc, u).echo.Backend
		seen[first] = true
		for range 5 {
			if got := fetch(t, hc, u); got.echo.Backend != first {
				t.Fatalf("user u%d went to %s, then to %q (%d)", user, first, got.echo.Backend, got.status)
			}
		}
	}
	if len(seen) < 3 {
		t.Errorf("20 users went to %v only", seen)
	}
	rr := map[string]int{}
	for range 8 {
		rr[fetch(t, hc, fmt.Sprintf("http://rr.example.com:%d/?user=u1", cfg.HTTPPort)).echo.Backend]++
	}
	if len(rr) != 4 {
		t.Errorf("round robin: 8 requests of one user went to %v, want every endpoint twice", rr)
	}
}
