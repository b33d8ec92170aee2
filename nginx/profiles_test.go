package nginx

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestCustomHTTPErrorsProfile runs custom-http-errors through real NGINX: the codes an Ingress lists are
// answered by its default backend, with ingress-nginx's headers, through the profile's named location;
// another Ingress's errors, and the listed Ingress's other answers, pass through.
func TestCustomHTTPErrorsProfile(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/missing") {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "app 404")
			return
		}
		if r.URL.Path == "/teapot" {
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, "app 418")
			return
		}
		_, _ = io.WriteString(w, "app "+r.URL.Path)
	})
	fallback := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		for _, h := range []string{"X-Code", "X-Format", "X-Original-URI", "X-Namespace", "X-Ingress-Name", "X-Service-Name", "X-Service-Port", "X-Request-ID"} {
			w.Header().Set("Seen-"+h, r.Header.Get(h))
		}
		code := 500
		_, _ = fmt.Sscan(r.Header.Get("X-Code"), &code)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "fallback page")
	})
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")), service("default", "fallback", port(8080, "http")),
		ingress("default", "a", annotate(AnnotationCustomHTTPErrors, "503, 404", AnnotationDefaultBackend, "fallback"),
			rule("a.example.com", prefix("/", "app", 80))),
		ingress("default", "b", rule("b.example.com", prefix("/", "app", 80))),
	}, nil)
	if len(m.Profiles) != 1 || m.Profiles[0].CustomHTTPErrors != "404,503" {
		t.Fatalf("profiles %+v, want one with 404,503", m.Profiles)
	}
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{
		up("default", "app", 80).Name:                                       {app},
		NewUpstream(nn("default", "fallback"), intstr.FromInt32(8080)).Name: {fallback},
	}); err != nil {
		t.Fatal(err)
	}

	get := func(host, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Accept", "text/html")
		req.Header.Set("X-Request-ID", "req-7")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, body := get("a.example.com", "/missing?q=1")
	if resp.StatusCode != http.StatusNotFound || body != "fallback page" {
		t.Fatalf("a listed code: %d %q, want 404 from the default backend", resp.StatusCode, body)
	}
	for h, want := range map[string]string{"X-Code": "404", "X-Format": "text/html", "X-Original-URI": "/missing?q=1",
		"X-Namespace": "default", "X-Ingress-Name": "a", "X-Service-Name": "app", "X-Service-Port": "80", "X-Request-ID": "req-7"} {
		if got := resp.Header.Get("Seen-" + h); got != want {
			t.Errorf("the default backend got %s %q, want %q", h, got, want)
		}
	}
	if resp, body := get("a.example.com", "/teapot"); resp.StatusCode != http.StatusTeapot || body != "app 418" {
		t.Errorf("a code the Ingress does not list: %d %q, want the app's 418", resp.StatusCode, body)
	}
	if resp, body := get("a.example.com", "/ok"); resp.StatusCode != http.StatusOK || body != "app /ok" {
		t.Errorf("a 200 of a profile route: %d %q, want the app's answer", resp.StatusCode, body)
	}
	if resp, body := get("b.example.com", "/missing"); resp.StatusCode != http.StatusNotFound || body != "app 404" {
		t.Errorf("another Ingress's 404: %d %q, want the app's own page", resp.StatusCode, body)
	}

	// A route that names a profile this configuration lacks (pushed ahead of its configuration) is served
	// without the profile, not sent to a location NGINX does not have (which would answer 500).
	other := ProfileSettings{CustomHTTPErrors: "404,418"}
	srv := Server{Host: "c.example.com", Locations: []Location{{Path: "/", PathType: PathPrefix, Upstream: up("default", "app", 80).Name,
		Ingress: nn("default", "c"), Profile: &other}}}
	if err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{"c.example.com": AppendRouteHostJSON(nil, &srv)}}); err != nil {
		t.Fatal(err)
	}
	if resp, body := get("c.example.com", "/missing"); resp.StatusCode != http.StatusNotFound || body != "app 404" {
		t.Errorf("a route naming a profile the configuration lacks: %d %q, want the app's own 404", resp.StatusCode, body)
	}
}

// TestFailingProfiles maps the lines an "nginx -t" message names to the profiles whose locations hold
// them: a profile's named location, or a custom error location of a code it lists; other lines map to
// none.
func TestFailingProfiles(t *testing.T) {
	a := ProfileSettings{CustomHTTPErrors: "404,418"}
	b := ProfileSettings{CustomHTTPErrors: "502"}
	m := Model{Servers: []Server{{Host: ""}}, Profiles: []ProfileSettings{a, b}}
	slicesSortProfiles(m.Profiles)
	conf, _, err := Render(m, baseRenderConfig())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(conf), "\n")
	lineOf := func(contains string, after string) int {
		t.Helper()
		start := 0
		if after != "" {
			for i, l := range lines {
				if strings.Contains(l, after) {
					start = i
					break
				}
			}
		}
		for i := start; i < len(lines); i++ {
			if strings.Contains(lines[i], contains) {
				return i + 1
			}
		}
		t.Fatalf("no line with %q after %q", contains, after)
		return 0
	}
	msg := func(line int) string {
		return fmt.Sprintf(`[emerg] invalid parameter "bogus" in /tmp/ir/nginx.conf.tmp-123:%d`, line)
	}
	tests := map[string]struct {
		line int
		want []ProfileSettings
	}{
		"a's named location":                    {lineOf("error_page 418", "location @"+a.Name()), []ProfileSettings{a}},
		"b's named location, its proxy_pass":    {lineOf("proxy_pass", "location @"+b.Name()), []ProfileSettings{b}},
		"the error location of 418 (a's code)":  {lineOf("proxy_set_header X-Code 418", ""), []ProfileSettings{a}},
		"inside the error location's Lua block": {lineOf("custom_error()", "location @ingress_reactor_error_502"), []ProfileSettings{b}},
		"the public location":                   {lineOf(`require("ingress_reactor.router").route()`, "") + 2, nil},
		"the http block":                        {lineOf("server_tokens", ""), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := FailingProfiles(conf, msg(tc.line), m.Profiles); !slices.Equal(got, tc.want) {
				t.Errorf("line %d (%q): %v, want %v", tc.line, lines[tc.line-1], got, tc.want)
			}
		})
	}
}

func slicesSortProfiles(ps []ProfileSettings) {
	slices.SortFunc(ps, func(x, y ProfileSettings) int { return strings.Compare(x.Name(), y.Name()) })
}

// TestBackendProtocolProfiles: backend-protocol HTTPS and GRPC through real NGINX, each a profile:
// the HTTPS backend gets TLS, the GRPC one HTTP/2 in clear text (grpc_pass); an HTTP route beside them
// keeps plain HTTP/1.1.
func TestBackendProtocolProfiles(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	answer := func(w http.ResponseWriter, r *http.Request) {
		tlsOn := "plain"
		if r.TLS != nil {
			tlsOn = "tls"
		}
		_, _ = io.WriteString(w, r.Proto+" "+tlsOn+" "+r.URL.Path)
	}
	httpsSrv := httptest.NewTLSServer(http.HandlerFunc(answer))
	t.Cleanup(httpsSrv.Close)
	h2c := httptest.NewUnstartedServer(http.HandlerFunc(answer))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c.Config.Protocols = &protocols
	h2c.Start()
	t.Cleanup(h2c.Close)
	endpoint := func(s *httptest.Server) Endpoint {
		return Endpoint{Address: "127.0.0.1", Port: int32(s.Listener.Addr().(*net.TCPAddr).Port)}
	}
	plain := httpServer(t, answer)

	m, _ := buildModel(t, []any{
		service("default", "secure", port(443, "https")), service("default", "grpc", port(50051, "grpc")), service("default", "web", port(80, "http")),
		ingress("default", "secure", annotate(AnnotationBackendProtocol, "https"), rule("secure.example.com", prefix("/", "secure", 443))),
		ingress("default", "grpc", annotate(AnnotationBackendProtocol, "GRPC"), rule("grpc.example.com", prefix("/", "grpc", 50051))),
		ingress("default", "web", rule("web.example.com", prefix("/", "web", 80))),
	}, nil)
	if len(m.Profiles) != 2 {
		t.Fatalf("profiles %+v, want two (HTTPS, GRPC)", m.Profiles)
	}
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{
		up("default", "secure", 443).Name: {endpoint(httpsSrv)},
		up("default", "grpc", 50051).Name: {endpoint(h2c)},
		up("default", "web", 80).Name:     {plain},
	}); err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{
		"secure.example.com": "HTTP/1.1 tls /x",
		"grpc.example.com":   "HTTP/2.0 plain /x",
		"web.example.com":    "HTTP/1.1 plain /x",
	} {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != want {
			t.Errorf("%s: %d %q, want 200 %q", host, resp.StatusCode, body, want)
		}
	}
}

// profileIs reports whether p holds want; a zero want must be nil: translations and locations store no
// zero profile, so that the many without profile settings carry none.
func profileIs(p *ProfileSettings, want ProfileSettings) bool {
	if want.IsZero() {
		return p == nil
	}
	return p != nil && *p == want
}
