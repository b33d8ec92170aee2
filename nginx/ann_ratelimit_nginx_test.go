package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestRateLimitsThroughNginx runs the rate limit annotations through real NGINX (two workers sharing
// the counters): limit-rpm with a burst multiplier of 1 admits exactly two of five quick requests and
// answers the rest 503, another Ingress keeps its own counters, limit-rps refuses a burst over its
// limit, limit-whitelist exempts the client, and limit-connections refuses the request beyond the
// limit while the others are in progress and admits again once they end.
func TestRateLimitsThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	var mu sync.Mutex
	holding := 0
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			mu.Lock()
			holding++
			mu.Unlock()
			arrived <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "app")
	})
	backend := func(host string) ingressOption { return rule(host, prefix("/", "app", 80)) }
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "rpm", annotate(AnnotationLimitRPM, "1", AnnotationLimitBurstMultiplier, "1"), backend("rpm.example.com")),
		ingress("default", "rpm2", annotate(AnnotationLimitRPM, "1", AnnotationLimitBurstMultiplier, "1"), backend("rpm2.example.com")),
		ingress("default", "rps", annotate(AnnotationLimitRPS, "1", AnnotationLimitBurstMultiplier, "1"), backend("rps.example.com")),
		ingress("default", "allowed", annotate(AnnotationLimitRPM, "1", AnnotationLimitBurstMultiplier, "0",
			AnnotationLimitWhitelist, "10.0.0.0/8, 127.0.0.1"), backend("allowed.example.com")),
		ingress("default", "conn", annotate(AnnotationLimitConnections, "2", AnnotationCustomHTTPErrors, "418"), backend("conn.example.com")),
		ingress("default", "cors", annotate(AnnotationLimitRPM, "1", AnnotationLimitBurstMultiplier, "0", AnnotationEnableCORS, "true"),
			backend("cors.example.com")),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}

	var do func(host, path string) *http.Response
	get := func(host, path string) int {
		t.Helper()
		resp := do(host, path)
		if resp == nil {
			return 0
		}
		return resp.StatusCode
	}
	do = func(host, path string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		if err != nil {
			t.Error(err)
			return nil
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp
	}
	burst := func(host string, n int) map[int]int {
		t.Helper()
		codes := map[int]int{}
		for range n {
			codes[get(host, "/")]++
		}
		return codes
	}

	// One request a minute with a burst of one: two pass at once (as limit_req with burst=1 nodelay),
	// the next within the minute is refused.
	if got := burst("rpm.example.com", 5); got[200] != 2 || got[503] != 3 {
		t.Errorf("limit-rpm 1, burst multiplier 1: %v, want 2 × 200 and 3 × 503", got)
	}
	if got := burst("rpm2.example.com", 3); got[200] != 2 || got[503] != 1 {
		t.Errorf("another Ingress's limit-rpm: %v, want its own counters (2 × 200, 1 × 503)", got)
	}
	// One a second: how many pass depends on how fast the requests go, but not all of 8 quick ones.
	if got := burst("rps.example.com", 8); got[200] < 1 || got[503] < 1 || got[200]+got[503] != 8 {
		t.Errorf("limit-rps 1, burst multiplier 1: %v, want some 200 and some 503", got)
	}
	if got := burst("allowed.example.com", 5); got[200] != 5 {
		t.Errorf("limit-whitelist with the client's address: %v, want every request admitted", got)
	}
	// A request over the limit of a CORS route carries the CORS headers, so a browser's script can read
	// the 503 (as with ingress-nginx's more_set_headers).
	if code := get("cors.example.com", "/"); code != 200 {
		t.Errorf("the first request of a CORS route: %d, want 200", code)
	}
	if resp := do("cors.example.com", "/"); resp == nil || resp.StatusCode != 503 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("a CORS route over its limit: %+v, want 503 with Access-Control-Allow-Origin *", resp)
	}

	// Two requests in progress: the third is refused; once they end, requests pass again.
	var wg sync.WaitGroup
	held := make([]int, 2)
	for i := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held[i] = get("conn.example.com", "/hold")
		}()
	}
	<-arrived
	<-arrived
	if code := get("conn.example.com", "/"); code != 503 {
		t.Errorf("a third request while two are in progress: %d, want 503", code)
	}
	close(release)
	wg.Wait()
	if held[0] != 200 || held[1] != 200 {
		t.Errorf("the held requests: %v, want 200 each", held)
	}
	for i := range 4 {
		if code := get("conn.example.com", "/"); code != 200 {
			t.Errorf("request %d after the held ones ended: %d, want 200 (their connections given back)", i, code)
		}
	}
}

// TestCORSAndLimitsRefusedByNginx: the data plane checks the CORS and limit objects of a routes push
// itself (configuration.lua), so that a hand-written or corrupted push cannot put text into response
// headers or set a limit the controller would not: each bad object is refused with its route, a good
// one is taken.
func TestCORSAndLimitsRefusedByNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	applyModel(t, rt, Model{}, cfg)

	const cors = `"methods":"GET","headers":"A","credentials":true,"max_age":5`
	bad := map[string]string{
		"origin with a newline":   `"cors":{"origins":["https://a.example.com\r\nX: 1"],` + cors + `}`,
		"origin with a path":      `"cors":{"origins":["https://a.example.com/x"],` + cors + `}`,
		"two wildcard labels":     `"cors":{"origins":["https://*.*.example.com"],` + cors + `}`,
		"origins not a list":      `"cors":{"origins":"*",` + cors + `}`,
		"methods with a colon":    `"cors":{"origins":["*"],"methods":"GET: x","headers":"A","credentials":true,"max_age":5}`,
		"headers with a newline":  `"cors":{"origins":["*"],"methods":"GET","headers":"A\nB","credentials":true,"max_age":5}`,
		"expose with a semicolon": `"cors":{"origins":["*"],` + cors + `,"expose":"a;b"}`,
		"credentials a string":    `"cors":{"origins":["*"],"methods":"GET","headers":"A","credentials":"true","max_age":5}`,
		"max age fractional":      `"cors":{"origins":["*"],"methods":"GET","headers":"A","credentials":true,"max_age":1.5}`,
		"zone not hex":            `"limit":{"zone":"a:b","rps":1}`,
		"no limit":                `"limit":{"zone":"ab"}`,
		"rps zero":                `"limit":{"zone":"ab","rps":0}`,
		"rpm fractional":          `"limit":{"zone":"ab","rpm":1.5}`,
		"negative burst":          `"limit":{"zone":"ab","rps":1,"rps_burst":-1}`,
		"allowlist not ranges":    `"limit":{"zone":"ab","conn":1,"allow":["10.0.0.0/8"]}`,
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
	hosts["good.example.com"] = []byte(`{"routes":[{"path":"/","upstream":"up-1","cors":{"origins":["https://*.example.com:8443","null"],` + cors +
		`,"expose":"*,X-A"},"limit":{"zone":"0123abcd","rps":1,"rps_burst":5,"rpm":2,"conn":3,"allow":["7f000001/32"]}}]}`)
	err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: hosts})
	refused := RefusedRoutes(err)
	for h, what := range names {
		if r, ok := refused[h]; !ok || r.Route != 1 {
			t.Errorf("%s: not refused (%+v)", what, r)
		}
	}
	if _, ok := refused["good.example.com"]; ok || len(refused) != len(bad) {
		t.Errorf("refused %d hosts (%+v), want exactly the %d bad ones", len(refused), refused["good.example.com"], len(bad))
	}
	live, _, err := rt.Client().Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := live["good.example.com"].Routes
	if len(good) != 1 {
		t.Fatalf("good.example.com holds %+v", good)
	}
	same(t, "stored CORS", good[0].CORS, &RouteCORS{Origins: []string{"https://*.example.com:8443", "null"}, Methods: "GET", Headers: "A",
		Expose: "*,X-A", Credentials: true, MaxAge: 5})
	same(t, "stored limit", good[0].Limit, &RouteLimit{Zone: "0123abcd", RPS: 1, RPSBurst: 5, RPM: 2, Conn: 3, Allow: []string{"7f000001/32"}})
}

// TestRaisedRateLimitTakesEffect: a client that spent limit-rpm 1 is admitted soon after the limit is
// raised to 600 a minute, as with NGINX's limit_req (which keeps the excess in requests); a bucket
// that kept the old rate's debt would refuse it for the rest of the minute.
func TestRaisedRateLimitTakesEffect(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "app") })
	model := func(rpm string) Model {
		m, _ := buildModel(t, []any{
			service("default", "app", port(80, "http")),
			ingress("default", "lim", annotate(AnnotationLimitRPM, rpm, AnnotationLimitBurstMultiplier, "0"), rule("lim.example.com", prefix("/", "app", 80))),
		}, nil)
		return m
	}
	applyModel(t, rt, model("1"), cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	get := func() int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "lim.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := get(), get(); a != 200 || b != 503 {
		t.Fatalf("limit-rpm 1 without burst: %d, %d, want 200, 503", a, b)
	}
	applyModel(t, rt, model("600"), cfg) // one request every 100 ms
	time.Sleep(300 * time.Millisecond)
	if code := get(); code != 200 {
		t.Errorf("300 ms after limit-rpm went from 1 to 600: %d, want 200", code)
	}
}

// TestLimitsLogPhaseWarnsNothing: the http block's log_by_lua_block reads $ingress_reactor_limit_conn
// for every request; requests of the status server (pushes, probes) and requests NGINX refuses before
// any location must not log "using uninitialized variable" each.
func TestLimitsLogPhaseWarnsNothing(t *testing.T) {
	requireNginx(t)
	dir := nginxDir(t)
	cfg := testRenderConfig(t, dir)
	cfg.HTTPSPort = 0
	cfg.ErrorLog = filepath.Join(dir.Prefix, "limits-error.log")
	rt := testRuntime(t, cfg, nil)
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "conn", annotate(AnnotationLimitConnections, "1"), rule("conn.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if _, _, err := rt.Client().Routes(context.Background()); err != nil {
		t.Fatal(err)
	}
	garbageLeavesNoUninitializedWarning(t, cfg)
}
