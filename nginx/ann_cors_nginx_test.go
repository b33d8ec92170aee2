package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// corsHeaders are the response headers enable-cors sets.
var corsHeaders = []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Allow-Methods",
	"Access-Control-Allow-Headers", "Access-Control-Expose-Headers", "Access-Control-Max-Age"}

// TestCORSThroughNginx runs enable-cors through real NGINX: preflights of allowed origins are answered
// 204 by the router with the CORS headers and never reach the backend; other origins' requests reach
// it without CORS headers; actual responses carry the headers (replacing the backend's), also through
// a profile's named location; "*" answers every request.
func TestCORSThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	var reached atomic.Int32
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Access-Control-Allow-Origin", "https://from-the-backend.example")
		_, _ = io.WriteString(w, "app "+r.Method)
	})
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "list", annotate(AnnotationEnableCORS, "true",
			AnnotationCORSAllowOrigin, "https://app.example.com, https://*.example.org:8443",
			AnnotationCORSAllowMethods, "GET, POST", AnnotationCORSAllowCredentials, "false",
			AnnotationCORSExposeHeaders, "X-Total, X-Page", AnnotationCORSMaxAge, "600"),
			rule("list.example.com", prefix("/", "app", 80))),
		ingress("default", "any", annotate(AnnotationEnableCORS, "true"), rule("any.example.com", prefix("/", "app", 80))),
		ingress("default", "profile", annotate(AnnotationEnableCORS, "true", AnnotationCORSAllowOrigin, "https://app.example.com",
			AnnotationCustomHTTPErrors, "418"), rule("profile.example.com", prefix("/", "app", 80))),
		ingress("default", "none", rule("none.example.com", prefix("/", "app", 80))),
		ingress("default", "moved", annotate(AnnotationEnableCORS, "true", AnnotationCORSAllowOrigin, "https://app.example.com",
			AnnotationPermanentRedirect, "https://elsewhere.example/"), rule("moved.example.com", prefix("/", "app", 80))),
		ingress("default", "denied", annotate(AnnotationEnableCORS, "true", AnnotationDenylistSourceRange, "127.0.0.0/8"),
			rule("denied.example.com", prefix("/", "app", 80))),
	}, nil)
	if len(m.Profiles) != 1 {
		t.Fatalf("profiles %+v, want one", m.Profiles)
	}
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}

	do := func(method, host, origin string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	listHeaders := func(origin string) map[string]string {
		return map[string]string{"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "",
			"Access-Control-Allow-Methods": "GET, POST", "Access-Control-Allow-Headers": DefaultCORSAllowHeaders,
			"Access-Control-Expose-Headers": "X-Total,X-Page", "Access-Control-Max-Age": "600"}
	}
	check := func(what string, resp *http.Response, want map[string]string) {
		t.Helper()
		for _, h := range corsHeaders {
			if got := resp.Header.Values(h); len(got) > 1 || resp.Header.Get(h) != want[h] {
				t.Errorf("%s: %s %q, want %q", what, h, got, want[h])
			}
		}
	}

	// A preflight of an allowed origin: 204 from the router, the backend never sees it.
	before := reached.Load()
	resp, body := do(http.MethodOptions, "list.example.com", "https://app.example.com")
	if resp.StatusCode != http.StatusNoContent || body != "" {
		t.Fatalf("preflight of an allowed origin: %d %q, want 204 without a body", resp.StatusCode, body)
	}
	check("preflight", resp, listHeaders("https://app.example.com"))
	if got := resp.Header.Values("Vary"); len(got) != 1 || got[0] != "Origin" {
		t.Errorf("preflight with an echoed origin: Vary %q, want Origin", got)
	}
	if cl := resp.Header.Values("Content-Length"); len(cl) > 0 {
		t.Errorf("preflight: Content-Length %q on a 204", cl)
	}
	if reached.Load() != before {
		t.Error("the preflight reached the backend")
	}

	// One wildcard label, with the port.
	for origin, allowed := range map[string]bool{
		"https://x-1.example.org:8443":                 true,
		"HTTPS://X-1.Example.ORG:8443":                 true,
		"https://a.b.example.org:8443":                 false,
		"https://example.org:8443":                     false,
		"https://.example.org:8443":                    false,
		"https://x.example.org":                        false,
		"http://x.example.org:8443":                    false,
		"https://evil.example/https://app.example.com": false,
		"https://app.example.com.evil.example":         false,
	} {
		resp, body := do(http.MethodOptions, "list.example.com", origin)
		if allowed {
			if resp.StatusCode != http.StatusNoContent {
				t.Errorf("preflight of %q: %d, want 204", origin, resp.StatusCode)
			}
			check("preflight of "+origin, resp, listHeaders(origin))
			continue
		}
		// Not allowed: the request goes to the backend like any other, whose own header passes.
		if resp.StatusCode != http.StatusOK || body != "app OPTIONS" {
			t.Errorf("OPTIONS from %q: %d %q, want the backend's answer", origin, resp.StatusCode, body)
		}
		check("OPTIONS from "+origin, resp, map[string]string{"Access-Control-Allow-Origin": "https://from-the-backend.example"})
	}

	// An actual request of an allowed origin: the backend answers, the CORS headers replace its own.
	resp, body = do(http.MethodGet, "list.example.com", "https://app.example.com")
	if resp.StatusCode != http.StatusOK || body != "app GET" {
		t.Fatalf("GET from an allowed origin: %d %q", resp.StatusCode, body)
	}
	check("GET from an allowed origin", resp, listHeaders("https://app.example.com"))
	resp, _ = do(http.MethodGet, "list.example.com", "")
	check("GET without Origin", resp, map[string]string{"Access-Control-Allow-Origin": "https://from-the-backend.example"})

	// "*" (the default): every request, with or without an Origin, and every OPTIONS is a preflight.
	anyHeaders := map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Methods": DefaultCORSAllowMethods, "Access-Control-Allow-Headers": DefaultCORSAllowHeaders,
		"Access-Control-Max-Age": "1728000"}
	resp, body = do(http.MethodGet, "any.example.com", "")
	if resp.StatusCode != http.StatusOK || body != "app GET" {
		t.Fatalf("GET with cors-allow-origin *: %d %q", resp.StatusCode, body)
	}
	check("GET with *", resp, anyHeaders)
	resp, _ = do(http.MethodOptions, "any.example.com", "https://whoever.example")
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("OPTIONS with *: %d, want 204", resp.StatusCode)
	}
	check("OPTIONS with *", resp, anyHeaders)

	// Through a profile's named location (ngx.exec): the header filter there adds the headers.
	resp, body = do(http.MethodGet, "profile.example.com", "https://app.example.com")
	if resp.StatusCode != http.StatusOK || body != "app GET" {
		t.Fatalf("GET through a profile: %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example.com" {
		t.Errorf("GET through a profile: Access-Control-Allow-Origin %q, want the request's origin", got)
	}
	if got := resp.Header.Get("Access-Control-Allow-Credentials"); got != "true" {
		t.Errorf("GET through a profile: Access-Control-Allow-Credentials %q, want true (the default)", got)
	}

	// CORS comes before the route's redirect and source ranges, as in ingress-nginx: the preflight is
	// answered, and the redirect and the 403 carry the headers.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		host, method, origin string
		status               int
		allowOrigin          string
	}{
		{"moved.example.com", http.MethodOptions, "https://app.example.com", http.StatusNoContent, "https://app.example.com"},
		{"moved.example.com", http.MethodGet, "https://app.example.com", http.StatusMovedPermanently, "https://app.example.com"},
		{"moved.example.com", http.MethodGet, "https://other.example", http.StatusMovedPermanently, ""},
		{"denied.example.com", http.MethodOptions, "https://whoever.example", http.StatusNoContent, "*"},
		{"denied.example.com", http.MethodGet, "https://whoever.example", http.StatusForbidden, "*"},
	} {
		req, _ := http.NewRequest(tc.method, fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), nil)
		req.Host = tc.host
		req.Header.Set("Origin", tc.origin)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Access-Control-Allow-Origin") != tc.allowOrigin {
			t.Errorf("%s %s from %s: %d with Access-Control-Allow-Origin %q, want %d with %q", tc.method, tc.host, tc.origin,
				resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), tc.status, tc.allowOrigin)
		}
	}

	// A body over the limit: 413, with the CORS headers (as ingress-nginx, whose 413 came from the location
	// that set them).
	big, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), strings.NewReader(strings.Repeat("b", 2<<20)))
	big.Host = "list.example.com"
	big.Header.Set("Origin", "https://app.example.com")
	if resp, err := noRedirect.Do(big); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
			t.Errorf("a body over the limit: %d with Access-Control-Allow-Origin %q, want 413 with the origin", resp.StatusCode,
				resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}

	// Without enable-cors nothing changes.
	resp, _ = do(http.MethodOptions, "none.example.com", "https://app.example.com")
	if resp.StatusCode != http.StatusOK {
		t.Errorf("OPTIONS without enable-cors: %d, want the backend's 200", resp.StatusCode)
	}
	check("without enable-cors", resp, map[string]string{"Access-Control-Allow-Origin": "https://from-the-backend.example"})
}
