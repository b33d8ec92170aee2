package nginx

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestHeaderSettings: hide-headers and allow-backend-server-header values, and what is refused.
func TestHeaderSettings(t *testing.T) {
	cases := map[string]struct {
		value   string
		want    []string
		problem string
	}{
		"commas and spaces": {value: "X-Powered-By, X-AspNet-Version Via", want: []string{"X-Powered-By", "X-AspNet-Version", "Via"}},
		"underscore":        {value: "X_Internal", want: []string{"X_Internal"}},
		"empty":             {value: ""},
		"a colon":           {value: "X-A: b", problem: "not a valid header name"},
		"a semicolon":       {value: "X-A;proxy_pass_header Server", problem: "not a valid header name"},
		"a variable":        {value: "$http_x", problem: "not a valid header name"},
		"too many":          {value: strings.Repeat("X-A ", maxHiddenHeaders+1), problem: "at most"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, _, problems := ParseSettings(map[string]string{"hide-headers": tc.value}, nil)
			if tc.problem != "" {
				if len(problems) != 1 || !strings.Contains(problems[0].Reason, tc.problem) {
					t.Fatalf("problems %v, want one with %q", problems, tc.problem)
				}
				return
			}
			if len(problems) > 0 || !slices.Equal(s.Headers.Hide, tc.want) {
				t.Errorf("hide %q, problems %v; want %q", s.Headers.Hide, problems, tc.want)
			}
		})
	}
	if _, _, problems := ParseSettings(map[string]string{"allow-backend-server-header": "yes"}, nil); len(problems) != 1 {
		t.Errorf("allow-backend-server-header: yes: problems %v", problems)
	}
}

// TestHeaderSettingsThroughNginx: by default clients see NGINX's Server header and every other header
// of the backend; with the keys set, the backend's Server header and not the hidden ones.
func TestHeaderSettingsThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	backend := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "backend/1")
		w.Header().Set("X-Powered-By", "php")
		w.Header().Set("X-Kept", "yes")
		w.Header().Set("X-Internal", "secret")
	})
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "http")),
		ingress("default", "web", rule("web.example", prefix("/", "web", 80))),
	}, nil)
	client := proxyClient(cfg.HTTPPort, nil)
	check := func(data map[string]string, want map[string]string) {
		t.Helper()
		s, _, problems := ParseSettings(data, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg.Settings = s
		applyModel(t, rt, m, cfg)
		if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "web", 80).Name: {backend}}); err != nil {
			t.Fatal(err)
		}
		resp, err := client.Get(fmt.Sprintf("http://web.example:%d/", cfg.HTTPPort))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for h, v := range want {
			if got := resp.Header.Get(h); got != v {
				t.Errorf("%v: %s %q, want %q", data, h, got, v)
			}
		}
	}
	check(map[string]string{}, map[string]string{"Server": "nginx", "X-Powered-By": "php", "X-Kept": "yes", "X-Internal": "secret"})
	check(map[string]string{"hide-headers": "X-Powered-By,x-internal", "allow-backend-server-header": "true"},
		map[string]string{"Server": "backend/1", "X-Powered-By": "", "X-Kept": "yes", "X-Internal": ""})
}

// TestGlobalAllowedResponseHeaders: the ConfigMap's list restricts the names custom-headers may set (in
// any case); without it every valid name is allowed.
func TestGlobalAllowedResponseHeaders(t *testing.T) {
	cms := configMapLookup{nn("default", "h"): configMap("default", "h", "1", "X-Frame-Options", "DENY", "X-Other", "1")}
	lk := Lookups{Services: servicesOf(service("default", "web", port(80, "http"))), ConfigMaps: cms}
	ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(AnnotationCustomHeaders, "h"))
	for _, tc := range []struct {
		allowed, wantErr string
	}{
		{allowed: ""},
		{allowed: "x-frame-options, X-OTHER"},
		{allowed: "X-Frame-Options", wantErr: "header X-Other is not among the ConfigMap's global-allowed-response-headers"},
	} {
		s, _, problems := ParseSettings(map[string]string{"global-allowed-response-headers": tc.allowed}, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		got, err := TranslateIngressWith(ing, lk, s.TranslateOptions(DefaultTranslateOptions()))
		switch {
		case tc.wantErr == "" && (err != nil || got.Options == nil || got.Options.ResponseHeaders != "X-Frame-Options:DENY\nX-Other:1"):
			t.Errorf("allowed %q: %+v, %v", tc.allowed, got, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("allowed %q: error %v, want %q", tc.allowed, err, tc.wantErr)
		}
	}
	if _, _, problems := ParseSettings(map[string]string{"global-allowed-response-headers": "X-A;B"}, nil); len(problems) != 1 {
		t.Errorf("X-A;B: problems %v", problems)
	}
}
