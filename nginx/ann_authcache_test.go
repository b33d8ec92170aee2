package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAnnotationAuthCache: auth-cache-key and auth-cache-duration -> the profile's cache settings and the
// auth location's directives, a Warning, or the Ingress rejected.
func TestAnnotationAuthCache(t *testing.T) {
	const authURL = "http://auth.example.com/check"
	key := func(v string) []string { return []string{AnnotationAuthURL, authURL, AnnotationAuthCacheKey, v} }
	tests := map[string]struct {
		kv          []string
		wantKey     string
		wantDur     string
		wantWarning string
		wantErr     string
	}{
		"ingress-nginx's example, the default duration": {kv: key("$remote_user$http_authorization"),
			wantKey: "${remote_user}${http_authorization}", wantDur: "200 202 401 5m"},
		"braces, literals and a cookie": {kv: key(" ${cookie__oauth2_proxy}-x_${host} "), wantKey: "${cookie__oauth2_proxy}-x_${host}", wantDur: "200 202 401 5m"},
		"durations": {kv: append(key("$http_authorization"), AnnotationAuthCacheDuration, "200  202 10m, ,401 5m,30s"),
			wantKey: "${http_authorization}", wantDur: "200 202 10m,401 5m,30s"},
		"an empty duration is the default": {kv: append(key("$http_authorization"), AnnotationAuthCacheDuration, " , "),
			wantKey: "${http_authorization}", wantDur: "200 202 401 5m"},
		"duration without a key": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthCacheDuration, "200 5m"},
			wantWarning: "metadata.annotations[" + AnnotationAuthCacheDuration + "]: applies only with " + AnnotationAuthCacheKey + "; ignored"},
		"key without auth-url": {kv: []string{AnnotationAuthCacheKey, "$http_authorization"},
			wantWarning: "metadata.annotations[" + AnnotationAuthCacheKey + "]: applies only with " + AnnotationAuthURL + "; ignored"},
		"another variable": {kv: key("$request_body"), wantErr: `auth-cache-key]: "$request_body" names the variable "$request_body", which is not one of`},
		"upper case":       {kv: key("$HTTP_AUTHORIZATION"), wantErr: `names the variable "$HTTP_AUTHORIZATION"`},
		"an empty name":    {kv: key("$"), wantErr: `names the variable "$"`},
		"a bare brace":     {kv: key("a{b}"), wantErr: `auth-cache-key]: "a{b}" has a brace outside ${name}`},
		"unclosed":         {kv: key("${host"), wantErr: `has an unclosed ${`},
		"syntax": {kv: key("$http_authorization; } location / { return 200; } #"),
			wantErr: "is not NGINX variables and the characters A-Z a-z 0-9 - _"},
		"too long":            {kv: key(strings.Repeat("a", 257)), wantErr: "at most 256 bytes"},
		"no time":             {kv: append(key("$host"), AnnotationAuthCacheDuration, "200 202"), wantErr: `auth-cache-duration]: entry "200 202" does not end in a time`},
		"two times":           {kv: append(key("$host"), AnnotationAuthCacheDuration, "200 1h 30m"), wantErr: `entry "200 1h 30m" has "1h", which is not an HTTP status code`},
		"a code out of range": {kv: append(key("$host"), AnnotationAuthCacheDuration, "600 5m"), wantErr: `has "600", which is not an HTTP status code`},
		"any, as NGINX and ingress-nginx take it": {kv: append(key("$host"), AnnotationAuthCacheDuration, "any 5m, 200 any 1h"),
			wantKey: "${host}", wantDur: "any 5m,200 any 1h"},
		"milliseconds, which proxy_cache_valid refuses": {kv: append(key("$host"), AnnotationAuthCacheDuration, "200 500ms"), wantErr: `entry "200 500ms" does not end in a time`},
		"another word": {kv: append(key("$host"), AnnotationAuthCacheDuration, "all 5m"), wantErr: `has "all", which is not an HTTP status code`},
		"over a year":  {kv: append(key("$host"), AnnotationAuthCacheDuration, "200 2y"), wantErr: "is longer than a year"},
		"injection":    {kv: append(key("$host"), AnnotationAuthCacheDuration, "200 5m; proxy_cache off"), wantErr: `entry "200 5m; proxy_cache off" does not end in a time`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.kv...)
			if tc.wantErr != "" {
				if got != nil || !strings.Contains(fmt.Sprint(errs), tc.wantErr) {
					t.Fatalf("got %+v, errors %q, want the Ingress rejected with %q", got, errs, tc.wantErr)
				}
				return
			}
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			if valueOf(got.Profile).AuthCacheKey != tc.wantKey || valueOf(got.Profile).AuthCacheDuration != tc.wantDur {
				t.Fatalf("key %q duration %q, want %q %q", valueOf(got.Profile).AuthCacheKey, valueOf(got.Profile).AuthCacheDuration, tc.wantKey, tc.wantDur)
			}
			if tc.wantWarning != "" && !slices.Contains(got.Warnings, tc.wantWarning) {
				t.Fatalf("warnings %q, want %q", got.Warnings, tc.wantWarning)
			}
			m := Model{Servers: []Server{{Host: ""}}}
			if got.Profile != nil {
				m.Profiles = []ProfileSettings{*got.Profile}
			}
			conf, _, err := Render(m, baseRenderConfig())
			if err != nil {
				t.Fatal(err)
			}
			c := string(conf)
			if strings.Contains(c, "proxy_cache_path") != (tc.wantKey != "") || strings.Contains(strings.ReplaceAll(c, "ignore_invalid_headers", ""), "invalid") {
				t.Fatalf("proxy_cache_path rendered: %v, want %v (or an invalid value):\n%s", strings.Contains(c, "proxy_cache_path"), tc.wantKey != "", c)
			}
			if tc.wantKey == "" {
				return
			}
			for _, want := range append([]string{"proxy_cache ingress_reactor_auth_cache;",
				"proxy_cache_key ${host}:" + valueOf(got.Profile).Name() + ":${ingress_reactor_auth_route}:" + tc.wantKey + ";"},
				func() (out []string) {
					for d := range strings.SplitSeq(tc.wantDur, ",") {
						out = append(out, "proxy_cache_valid "+d+";")
					}
					return out
				}()...) {
				if !strings.Contains(c, want) {
					t.Errorf("nginx.conf lacks %q", want)
				}
			}
		})
	}
}

// TestAuthCacheThroughNginx: with auth-cache-key, the auth service is asked once per key and route while
// the answer is valid, 200 and 401 alike; another key, another path of the Ingress (whose profile is the
// same), another profile or another host asks it again.
func TestAuthCacheThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	var calls atomic.Int32
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer good" || strings.Contains(r.Header.Get("X-Original-URL"), "/admin") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(auth.Close)
	var reached atomic.Int32
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, "app")
	})
	authURL := "http://" + auth.Listener.Addr().String() + "/check"
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "cached", annotate(AnnotationAuthURL, authURL, AnnotationAuthCacheKey, "$http_authorization",
			AnnotationAuthCacheDuration, "200 401 10m"), rule("cached.example.com", prefix("/", "app", 80), prefix("/admin", "app", 80)), rule("twin.example.com", prefix("/", "app", 80))),
		ingress("default", "uncached", annotate(AnnotationAuthURL, authURL), rule("uncached.example.com", prefix("/", "app", 80))),
	}, nil)
	if len(m.Profiles) != 2 {
		t.Fatalf("profiles %+v, want two", m.Profiles)
	}
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	get := func(host, path, authorization string) int {
		t.Helper()
		req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Authorization", authorization)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	steps := []struct {
		what, host, path, authorization string
		want                            int
		wantAsked                       bool
	}{
		{"first good request: asked", "cached.example.com", "/x", "Bearer good", 200, true},
		{"same key: from the cache", "cached.example.com", "/x", "Bearer good", 200, false},
		{"same key, same route, another URI: from the cache", "cached.example.com", "/y", "Bearer good", 200, false},
		{"same key, another path of the Ingress (same profile): asked, and it says no", "cached.example.com", "/admin/x", "Bearer good", 401, true},
		{"the other path's 401 is cached for it", "cached.example.com", "/admin/x", "Bearer good", 401, false},
		{"another key: asked", "cached.example.com", "/x", "Bearer bad", 401, true},
		{"a cached 401 stays 401", "cached.example.com", "/x", "Bearer bad", 401, false},
		{"the good key still passes from the cache", "cached.example.com", "/x", "Bearer good", 200, false},
		{"another host of the Ingress: its own entries", "twin.example.com", "/x", "Bearer good", 200, true},
		{"another profile without a cache: asked each time", "uncached.example.com", "/x", "Bearer good", 200, true},
		{"... and again", "uncached.example.com", "/x", "Bearer good", 200, true},
	}
	for _, s := range steps {
		before, reachedBefore := calls.Load(), reached.Load()
		if code := get(s.host, s.path, s.authorization); code != s.want {
			t.Fatalf("%s: %d, want %d", s.what, code, s.want)
		}
		if asked := calls.Load() != before; asked != s.wantAsked {
			t.Fatalf("%s: auth service asked %v, want %v", s.what, asked, s.wantAsked)
		}
		if got := reached.Load() != reachedBefore; got != (s.want == 200) {
			t.Fatalf("%s: backend reached %v", s.what, got)
		}
	}
}
