package nginx

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// TestAnnotationProxyRewrite: the proxy rewrite group's annotations -> the translation's profile, or a
// Warning for an ignored value.
func TestAnnotationProxyRewrite(t *testing.T) {
	p := IngressNginxPrefix
	tests := map[string]struct {
		kv          []string
		opts        func(*TranslateOptions)
		want        ProfileSettings
		wantWarning string
	}{
		"no annotation":     {},
		"cookie domain":     {kv: []string{AnnotationProxyCookieDomain, "backend.local  .example.com"}, want: ProfileSettings{ProxyCookieDomain: `"backend.local" ".example.com"`}},
		"cookie domain off": {kv: []string{AnnotationProxyCookieDomain, "off"}},
		"cookie off cancels the ConfigMap's": {opts: func(o *TranslateOptions) { o.ProxyCookieDomain, o.ProxyCookiePath = true, true },
			kv: []string{AnnotationProxyCookieDomain, "off", AnnotationProxyCookiePath, "off"}, want: ProfileSettings{ProxyCookieDomain: "off", ProxyCookiePath: "off"}},
		"cookie without annotation keeps the ConfigMap's": {opts: func(o *TranslateOptions) { o.ProxyCookieDomain, o.ProxyCookiePath = true, true }},
		"cookie domain regex is ignored": {kv: []string{AnnotationProxyCookieDomain, `~\.(?P<d>[a-z]+)$ $d`},
			wantWarning: "metadata.annotations[" + p + `proxy-cookie-domain]: "~\\.(?P<d>[a-z]+)$ $d" is not off, or a domain and its replacement; ignored`},
		"cookie domain alone is ignored": {kv: []string{AnnotationProxyCookieDomain, "backend.local"},
			wantWarning: "metadata.annotations[" + p + `proxy-cookie-domain]: "backend.local" is not off, or a domain and its replacement; ignored`},
		"cookie path": {kv: []string{AnnotationProxyCookiePath, "/app/ /"}, want: ProfileSettings{ProxyCookiePath: `"/app/" "/"`}},
		"cookie path with a variable is ignored": {kv: []string{AnnotationProxyCookiePath, "/app/ /$uri"},
			wantWarning: "metadata.annotations[" + p + `proxy-cookie-path]: "/app/ /$uri" is not off, or a path and its replacement; ignored`},
		"redirect default rewrites nothing": {kv: []string{AnnotationProxyRedirectFrom, "default"},
			wantWarning: "metadata.annotations[" + p + "proxy-redirect-from]: default rewrites only the URL of NGINX's internal upstream, which no backend sends; ignored"},
		"redirect from and to": {kv: []string{AnnotationProxyRedirectFrom, "http://backend.local/app/", AnnotationProxyRedirectTo, "/"},
			want: ProfileSettings{ProxyRedirect: `"http://backend.local/app/" "/"`}},
		"redirect from off": {kv: []string{AnnotationProxyRedirectFrom, "off", AnnotationProxyRedirectTo, "off"}},
		"redirect to without from": {kv: []string{AnnotationProxyRedirectTo, "/"},
			wantWarning: "metadata.annotations[" + p + "proxy-redirect-to]: has an effect only with " + p + "proxy-redirect-from; ignored"},
		"redirect from without to": {kv: []string{AnnotationProxyRedirectFrom, "/app/"},
			wantWarning: "metadata.annotations[" + p + "proxy-redirect-from]: has an effect only with " + p + "proxy-redirect-to; ignored"},
		"redirect regex is ignored": {kv: []string{AnnotationProxyRedirectFrom, "~^http://(a)", AnnotationProxyRedirectTo, "/"},
			wantWarning: "metadata.annotations[" + p + `proxy-redirect-from]: "~^http://(a)" is not off, default, or a URL or path without regexes and variables; ignored`},
		"redirect to with a variable is ignored": {kv: []string{AnnotationProxyRedirectFrom, "/app/", AnnotationProxyRedirectTo, "$scheme://$host/"},
			wantWarning: "metadata.annotations[" + p + `proxy-redirect-to]: "$scheme://$host/" is not off, default, or a URL or path without regexes and variables; ignored`},
		"redirect to with a semicolon is ignored": {kv: []string{AnnotationProxyRedirectFrom, "/app/", AnnotationProxyRedirectTo, "/; return 200"},
			wantWarning: "metadata.annotations[" + p + `proxy-redirect-to]: "/; return 200" is not off, default, or a URL or path without regexes and variables; ignored`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := DefaultTranslateOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			got, errs := translateAnnotated(t, opts, tc.kv...)
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			if !profileIs(got.Profile, tc.want) {
				t.Errorf("profile %+v, want %+v", got.Profile, tc.want)
			}
			if tc.wantWarning == "" && len(got.Warnings) > 0 || tc.wantWarning != "" && !slices.Contains(got.Warnings, tc.wantWarning) {
				t.Errorf("warnings %q, want %q", got.Warnings, tc.wantWarning)
			}
		})
	}
}

// TestProxyRewriteNginx: Set-Cookie and Location of a backend's answer rewritten by real NGINX for the
// Ingress with the annotations, and passed as they are for another.
func TestProxyRewriteNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "s=1; Domain=backend.local; Path=/app/x")
		w.Header().Set("Location", "http://backend.local/app/next")
		w.WriteHeader(http.StatusFound)
	})
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "rw", annotate(AnnotationProxyCookieDomain, "backend.local example.com", AnnotationProxyCookiePath, "/app/ /",
			AnnotationProxyRedirectFrom, "http://backend.local/app/", AnnotationProxyRedirectTo, "/"), rule("rw.example.com", prefix("/", "app", 80))),
		ingress("default", "plain", rule("plain.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for host, want := range map[string][2]string{
		// NGINX writes a replacement without host as an absolute URL (absolute_redirect, its default).
		"rw.example.com":    {"s=1; Domain=example.com; Path=/x", fmt.Sprintf("http://rw.example.com:%d/next", cfg.HTTPPort)},
		"plain.example.com": {"s=1; Domain=backend.local; Path=/app/x", "http://backend.local/app/next"},
	} {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := [2]string{resp.Header.Get("Set-Cookie"), resp.Header.Get("Location")}; resp.StatusCode != http.StatusFound || got != want {
			t.Errorf("%s: %d, Set-Cookie and Location %q, want 302 and %q", host, resp.StatusCode, got, want)
		}
	}
}
