package nginx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	pathpkg "path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	networkingv1 "k8s.io/api/networking/v1"
)

// routeCase is one entry of the routing corpus: Ingresses, and requests with the outcome each must get.
// Outcomes: the name of the Service that answers, "404", "403", or "308 <Location>".
type routeCase struct {
	objs           []any
	defaultBackend *Upstream
	// requests maps "http://host/path" (host as the client sends it, with any case or port) to outcomes.
	requests map[string]string
}

// redirectPort is the HTTPS port written into the corpus's redirects.
const redirectPort = 8443

// routeCorpus runs against the Go model (TestRouteCorpusModel) and through real NGINX and the Lua router
// (TestRouteCorpusNginx): both must give every request its outcome.
func routeCorpus() map[string]routeCase {
	web := service("default", "web", port(80, ""))
	api := service("default", "api", port(80, ""))
	other := service("other", "web", port(80, ""))
	dflt := ptr(up("kube-system", "fallback", 80))
	return map[string]routeCase{
		"Prefix matches element-wise; no match is the built-in 404": {
			objs: []any{web, ingress("default", "a", rule("a.example.com", prefix("/foo", "web", 80)))},
			requests: map[string]string{
				"http://a.example.com/foo": "web", "http://a.example.com/foo/": "web", "http://a.example.com/foo/bar/baz": "web",
				"http://a.example.com/foobar": "404", "http://a.example.com/fo": "404", "http://a.example.com/": "404",
				// NGINX normalizes the path before routing: dot segments, double slashes, percent-encoding.
				"http://a.example.com/x/../foo/./bar": "web", "http://a.example.com//foo": "web", "http://a.example.com/fo%6F/x": "web",
				"http://a.example.com/foo/" + strings.Repeat("a/", 2000): "web", "http://a.example.com/" + strings.Repeat("foo", 1000): "404",
			},
		},
		"Exact wins over Prefix at equal length; Prefix / covers the rest": {
			objs: []any{web, api, ingress("default", "a", rule("a.example.com",
				prefix("/foo", "web", 80), exact("/foo", "api", 80), prefix("/", "web", 80)))},
			requests: map[string]string{
				"http://a.example.com/foo": "api", "http://a.example.com/foo/": "web", "http://a.example.com/foo/x": "web",
				"http://a.example.com/": "web", "http://a.example.com/elsewhere": "web",
			},
		},
		"the longest Prefix wins; a trailing slash on a Prefix path is ignored": {
			objs: []any{web, api, ingress("default", "a", rule("a.example.com", prefix("/a", "web", 80), prefix("/a/b/", "api", 80)))},
			requests: map[string]string{
				"http://a.example.com/a/b/c": "api", "http://a.example.com/a/b": "api", "http://a.example.com/a/bc": "web",
				"http://a.example.com/a": "web", "http://a.example.com/a/": "web",
			},
		},
		"Exact paths ending in /: the path without it belongs to the covering Prefix": {
			objs: []any{web, api, ingress("default", "a", rule("a.example.com", exact("/x/", "api", 80), prefix("/", "web", 80)))},
			requests: map[string]string{
				"http://a.example.com/x/": "api", "http://a.example.com/x": "web", "http://a.example.com/x/y": "web",
			},
		},
		"host, then one-label wildcard, then catch-all; case, port and trailing dot do not matter": {
			objs: []any{web, api,
				ingress("default", "a", rule("a.example.com", prefix("/", "web", 80))),
				ingress("default", "w", rule("*.example.com", prefix("/", "api", 80))),
				ingress("default", "c", rule("", exact("/x", "web", 80)))},
			defaultBackend: dflt,
			requests: map[string]string{
				"http://a.example.com/": "web", "http://A.Example.COM/": "web", "http://a.example.com:8080/p": "web",
				"http://a.example.com./": "web", "http://b.example.com/": "api", "http://b.c.example.com/": "fallback",
				"http://b.c.example.com/x": "web", "http://example.com/": "fallback", "http://unknown.org/x": "web",
				"http://10.1.2.3/x": "web", "http://.example.com/": "fallback",
			},
		},
		"a host's unmatched paths go to the default backend, not to the catch-all rules": {
			objs: []any{web, api,
				ingress("default", "a", rule("a.example.com", prefix("/only", "web", 80))),
				ingress("default", "c", rule("", prefix("/", "api", 80)))},
			requests: map[string]string{
				"http://a.example.com/only/x": "web", "http://a.example.com/other": "404", "http://b.example.com/other": "api",
			},
		},
		"spec.defaultBackend of an Ingress answers what no rule matches": {
			objs: []any{web, api, ingress("default", "d", withDefaultBackend("web", 80)),
				ingress("default", "a", rule("a.example.com", exact("/x", "api", 80)))},
			requests: map[string]string{
				"http://unknown.org/": "web", "http://unknown.org/p/q": "web", "http://a.example.com/x": "api",
			},
		},
		"TLS host: plain HTTP is redirected, the fallback too": {
			objs: []any{web, ingress("default", "a", rule("a.example.com", exact("/x", "web", 80)), withTLS("cert", "a.example.com"))},
			requests: map[string]string{
				"http://a.example.com/x?q=1": "308 https://a.example.com:8443/x?q=1", "http://a.example.com/y": "308 https://a.example.com:8443/y",
				"http://b.example.com/x": "404",
			},
		},
		"ssl-redirect false keeps plain HTTP": {
			objs: []any{web, ingress("default", "a", rule("a.example.com", exact("/x", "web", 80)), withTLS("cert", "a.example.com"),
				annotate(AnnotationSSLRedirect, "false"))},
			requests: map[string]string{"http://a.example.com/x": "web", "http://a.example.com/y": "404"},
		},
		"source ranges: deny first, then allow; the redirect comes before them": {
			objs: []any{web, other,
				ingress("default", "allow-other", rule("a.example.com", prefix("/", "web", 80)), annotate(AnnotationAllowlistSourceRange, "10.0.0.0/8, 2001:db8::/32")),
				ingress("default", "allow-me", rule("b.example.com", prefix("/", "web", 80)), annotate(AnnotationAllowlistSourceRange, "2001:db8::/32, 127.0.0.1")),
				ingress("default", "deny-me", rule("c.example.com", prefix("/", "web", 80)), annotate(AnnotationDenylistSourceRange, "127.0.0.0/8")),
				ingress("default", "deny-beats-allow", rule("d.example.com", prefix("/", "web", 80)),
					annotate(AnnotationDenylistSourceRange, "127.0.0.0/30", AnnotationAllowlistSourceRange, "127.0.0.0/8")),
				ingress("default", "deny-other", rule("e.example.com", prefix("/", "web", 80)), annotate(AnnotationDenylistSourceRange, "127.0.1.0/24, 10.0.0.0/8")),
				ingress("default", "odd-bits", rule("f.example.com", prefix("/", "web", 80)), annotate(AnnotationAllowlistSourceRange, "127.0.0.0/9")),
				ingress("default", "redirect-first", rule("g.example.com", prefix("/", "web", 80)), withTLS("cert", "g.example.com"),
					annotate(AnnotationAllowlistSourceRange, "10.0.0.0/8")),
				ingress("other", "o", rule("h.example.com", prefix("/", "web", 80)))},
			requests: map[string]string{
				"http://a.example.com/": "403", "http://b.example.com/": "web", "http://c.example.com/": "403",
				"http://d.example.com/": "403", "http://e.example.com/": "web", "http://f.example.com/": "web",
				"http://g.example.com/": "308 https://g.example.com:8443/", "http://h.example.com/": "web",
			},
		},
		"use-regex: every path of the host is a case-insensitive regex, in ingress-nginx's order": {
			objs: []any{web, api, other,
				ingress("default", "plain", rule("r.example.com", prefix("/foo", "web", 80), exact("/exact", "api", 80))),
				ingress("default", "rx", rule("r.example.com",
					specific("/foo/bar/[A-Z0-9]{3}", "api", 80), specific("/v[0-9]+/items", "web", 80), specific("/end$", "api", 80),
					specific("/k$", "api", 80)), annotate(AnnotationUseRegex, "true")),
				ingress("other", "o", rule("r.example.com", prefix("/other", "web", 80)))},
			requests: map[string]string{
				"http://r.example.com/foo/bar/abc": "api", "http://r.example.com/foo/bar/bar": "api", "http://r.example.com/FOO/BAR/x1Z": "api",
				"http://r.example.com/foo/bar/ab": "web", "http://r.example.com/Foo/x": "web",
				// ingress-nginx's regex host: a Prefix path /foo is ^/foo, an Exact path a prefix too.
				"http://r.example.com/foobar": "web", "http://r.example.com/exact/more": "api", "http://r.example.com/otherwise": "web",
				"http://r.example.com/V12/items/x": "web", "http://r.example.com/v/items": "404", "http://r.example.com/nothing": "404",
				// Bytes above 0x7f are one character each, as for PCRE; $ is the very end; no Unicode case folding.
				"http://r.example.com/foo/bar/%C3%A9": "web", "http://r.example.com/foo/bar/a%C3%A9": "web",
				"http://r.example.com/end": "api", "http://r.example.com/end%0A": "404", "http://r.example.com/end/": "404",
				"http://r.example.com/k": "api", "http://r.example.com/%E2%84%AA": "404",
			},
		},
		"rewrite-target with captures; the query string is kept; other paths are not rewritten": {
			objs: []any{web, api,
				ingress("default", "rw", rule("rw.example.com", specific("/something(/|$)(.*)", "web", 80)), annotate(AnnotationRewriteTarget, "/$2")),
				ingress("default", "rw2", rule("rw.example.com", specific("/any/(.)(.)", "web", 80)), annotate(AnnotationRewriteTarget, "/x/$1/$2$3$0")),
				ingress("default", "same", rule("rw.example.com", prefix("/", "api", 80)), annotate(AnnotationRewriteTarget, "/")),
				ingress("default", "plain", rule("rw.example.com", prefix("/other", "api", 80)))},
			requests: map[string]string{
				"http://rw.example.com/something": "web /", "http://rw.example.com/something/": "web /",
				"http://rw.example.com/something/new": "web /new", "http://rw.example.com/SOMETHING/a/b?x=1&y": "web /a/b?x=1&y",
				"http://rw.example.com/somethingelse": "api /somethingelse", "http://rw.example.com/other/x?q": "api /other/x?q",
				"http://rw.example.com/any/ab": "web /x/a/b/any/ab", "http://rw.example.com/any/%C3%A9": "web /x/%C3/%A9/any/%C3%A9",
				"http://rw.example.com/": "api /",
			},
		},
	}
}

// specific is an ImplementationSpecific path.
func specific(p, svc string, port any) networkingv1.HTTPIngressPath {
	return path(networkingv1.PathTypeImplementationSpecific, p, svc, port)
}

// withURI says whether an outcome names the URI the backend saw ("web /new?x=1") besides the Service.
func withURI(outcome string) bool {
	return !strings.HasPrefix(outcome, "308 ") && strings.Contains(outcome, " ")
}

// escapeAsNginx escapes a rewritten path as NGINX does before proxying it (ngx_escape_uri).
func escapeAsNginx(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c <= ' ' || c >= 0x7f || c == '#' || c == '%' || c == '?' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// normalizeHost does to a Host header what NGINX does before $host: lower case, no port, no trailing dot.
func normalizeHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// normalizePath does to a decoded path what NGINX does before $uri: dot segments resolved, slashes
// merged, a trailing slash kept.
func normalizePath(p string) string {
	c := pathpkg.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// modelOutcome is the outcome the Go model gives a request.
func modelOutcome(t *testing.T, m *Model, raw string, client netip.Addr, uri bool) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	host := normalizeHost(req.URL.Host)
	r := m.Route(host, normalizePath(req.URL.Path))
	switch {
	case r.Redirect && req.URL.Scheme == "http":
		return "308 https://" + host + ":" + strconv.Itoa(redirectPort) + req.URL.RequestURI()
	case r.Location != nil && !r.Location.Admits(client):
		return "403"
	case r.Upstream == "":
		return "404"
	}
	u, ok := m.Upstream(r.Upstream)
	if !ok {
		t.Fatalf("%s: upstream %s is not in the model", raw, r.Upstream)
	}
	if !uri {
		return u.Service.Name
	}
	seen := req.URL.RequestURI()
	if r.Rewritten != "" {
		seen = escapeAsNginx(r.Rewritten)
		if req.URL.RawQuery != "" {
			seen += "?" + req.URL.RawQuery
		}
	}
	return u.Service.Name + " " + seen
}

func TestRouteCorpusModel(t *testing.T) {
	for name, tc := range routeCorpus() {
		t.Run(name, func(t *testing.T) {
			m, _ := buildModel(t, tc.objs, tc.defaultBackend)
			for req, want := range tc.requests {
				if got := modelOutcome(t, &m, req, netip.MustParseAddr("127.0.0.1"), withURI(want)); got != want {
					t.Errorf("%s: model gives %q, want %q", req, got, want)
				}
			}
		})
	}
}

// TestRouteCorpusNginx runs the corpus through real NGINX: each case's routes and endpoints are pushed
// into one running NGINX (no reload between cases), and every request is sent for real.
func TestRouteCorpusNginx(t *testing.T) {
	runCorpus(t, routeCorpus(), "127.0.0.1")
}

// TestRouteSourceRangesIPv6: clients with IPv6 addresses against IPv6 and IPv4 source ranges.
func TestRouteSourceRangesIPv6(t *testing.T) {
	web := service("default", "web", port(80, ""))
	host := func(name, kind, ranges string) any {
		return ingress("default", name, rule(name+".example.com", prefix("/", "web", 80)), annotate(kind, ranges))
	}
	runCorpus(t, map[string]routeCase{"IPv6 client": {
		objs: []any{web,
			host("allow-me", AnnotationAllowlistSourceRange, "::1/128"),
			host("allow-net", AnnotationAllowlistSourceRange, "::/127, 10.0.0.0/8"),
			host("allow-other", AnnotationAllowlistSourceRange, "2001:db8::/32, 127.0.0.0/8"),
			host("deny-me", AnnotationDenylistSourceRange, "::0/120"),
			host("deny-other", AnnotationDenylistSourceRange, "::2/127, 0.0.0.0/0")},
		requests: map[string]string{
			"http://allow-me.example.com/": "web", "http://allow-net.example.com/": "web", "http://allow-other.example.com/": "403",
			"http://deny-me.example.com/": "403", "http://deny-other.example.com/": "web",
		},
	}}, "::1")
}

// runCorpus runs cases through one NGINX listening on listen (a loopback address, which is also the
// client address the router sees) and checks every request against its outcome and the model's.
func runCorpus(t *testing.T, cases map[string]routeCase, listen string) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.RedirectHTTPSPort = redirectPort
	cfg.ListenAddress = listen
	client := netip.MustParseAddr(listen)
	rt := testRuntime(t, cfg, nil)
	applyModel(t, rt, Model{}, cfg)
	// One backend per Service name, answering with the name.
	backends := map[string]Endpoint{}
	backend := func(name string) Endpoint {
		if ep, ok := backends[name]; ok {
			return ep
		}
		ep := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
			if len(r.RequestURI) < 1000 {
				w.Header().Set("X-Seen-URI", r.RequestURI)
			}
			_, _ = io.WriteString(w, name)
		})
		backends[name] = ep
		return ep
	}
	hc := &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, _ := buildModel(t, tc.objs, tc.defaultBackend)
			eps := map[UpstreamName][]Endpoint{}
			for _, u := range m.Upstreams {
				eps[u.Name] = []Endpoint{backend(u.Service.Name)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := rt.Client().ReplaceEndpoints(ctx, eps); err != nil {
				t.Fatal(err)
			}
			if err := rt.Client().ReplaceRoutes(ctx, routeTable(&m)); err != nil {
				t.Fatal(err)
			}
			for raw, want := range tc.requests {
				req, err := http.NewRequest(http.MethodGet, raw, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = req.URL.Host
				req.URL.Host = netip.AddrPortFrom(client, uint16(cfg.HTTPPort)).String()
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", raw, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got := strconv.Itoa(resp.StatusCode)
				switch resp.StatusCode {
				case http.StatusOK:
					got = string(body)
					if withURI(want) {
						got += " " + resp.Header.Get("X-Seen-URI")
					}
				case http.StatusPermanentRedirect:
					got += " " + resp.Header.Get("Location")
				}
				if got != want {
					t.Errorf("%s: NGINX gives %q, want %q", raw, got, want)
				}
				if model := modelOutcome(t, &m, raw, client, withURI(want)); model != got {
					t.Errorf("%s: NGINX gives %q, the model %q", raw, got, model)
				}
			}
		})
	}
}

// TestRouteHostJSON checks the hand-written encoder against encoding/json on the wire type.
func TestRouteHostJSON(t *testing.T) {
	for name, tc := range routeCorpus() {
		m, _ := buildModel(t, tc.objs, tc.defaultBackend)
		for i := range m.Servers {
			s := &m.Servers[i]
			var want RouteHost
			if err := json.Unmarshal(AppendRouteHostJSON(nil, s), &want); err != nil {
				t.Fatalf("%s: host %q: %v", name, s.Host, err)
			}
			got := RouteHost{Redirect: s.TLS != nil && s.TLS.SSLRedirect, Regex: s.RegexMode(), Routes: []RoutePath{}}
			type entry struct {
				path string
				l    *Location
				re   *PathRegex
			}
			var entries []entry
			if s.RegexMode() {
				for _, e := range s.regexOrder() {
					entries = append(entries, entry{e.text, e.loc, e.re})
				}
			} else {
				for i := range s.Locations {
					entries = append(entries, entry{s.Locations[i].Path, &s.Locations[i], nil})
				}
			}
			for _, e := range entries {
				l := e.l
				p := RoutePath{Path: e.path, Exact: l.PathType == PathExact && e.re == nil, Upstream: l.Upstream, Redirect: l.SSLRedirect}
				if e.re != nil {
					p.Pattern, p.Literal = e.re.PCRE, e.re.Literal
				}
				if o := l.Options; o.rewrites(l.Path) {
					p.Rewrite, p.XForwardedPrefix = o.RewriteTarget, o.XForwardedPrefix
				}
				if l.Options != nil {
					p.UpstreamVhost = l.Options.UpstreamVhost
				}
				if l.Access != nil {
					for _, d := range l.Access.Deny {
						p.Deny = append(p.Deny, string(appendWirePrefix(nil, d)))
					}
					for _, a := range l.Access.Allow {
						p.Allow = append(p.Allow, string(appendWirePrefix(nil, a)))
					}
				}
				got.Routes = append(got.Routes, p)
			}
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(want)
			if string(a) != string(b) {
				t.Errorf("%s: host %q encodes as %s, want %s", name, s.Host, b, a) // b: decoded encoder output; a: built from the model
			}
		}
	}
	if got := string(appendWirePrefix(nil, netip.MustParsePrefix("10.1.2.3/8"))); got != "0a000000/8" {
		t.Errorf("wire prefix %s", got)
	}
	if got := string(appendJSONString(nil, "/a\"b\\c\x01")); got != `"/a\"b\\c\u0001"` {
		t.Errorf("JSON string %s", got)
	}
}

// TestRoutesDictFull fills a 1 MB routes dict with hosts of two paths (the flag's help says how many fit):
// the push that does not fit answers a *DictFullError naming the hosts left out, and everything else
// is live.
func TestRoutesDictFull(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	cfg.RoutesDictMB = 1
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	applyModel(t, rt, Model{}, cfg)

	host := func(i int) Hostname { return Hostname(fmt.Sprintf("host-%05d.tenant-%03d.example.com", i, i%100)) }
	server := func(i int) []byte {
		up := up(fmt.Sprintf("tenant-%03d", i%100), fmt.Sprintf("service-%05d", i), 80).Name
		return AppendRouteHostJSON(nil, &Server{Host: host(i), Locations: []Location{
			{Path: "/api", PathType: PathPrefix, Upstream: up}, {Path: "/", PathType: PathPrefix, Upstream: up}}})
	}
	const batch = 500
	stored := 0
	var full *DictFullError
	for round := 0; full == nil; round++ {
		if round == 40 {
			t.Fatal("1 MB holds 20,000 hosts?")
		}
		u := RouteUpdate{Hosts: map[Hostname][]byte{}}
		for i := round * batch; i < (round+1)*batch; i++ {
			u.Hosts[host(i)] = server(i)
		}
		err := rt.Client().PushRoutes(ctx, u)
		if err != nil && !errors.As(err, &full) {
			t.Fatalf("push: %v", err)
		}
		stored += batch
		if full != nil {
			stored -= len(full.NotStored)
			if !strings.Contains(err.Error(), "routes dict full: raise --routes-dict-size (now 1 MB)") {
				t.Errorf("the error does not name the cause: %v", err)
			}
		}
	}
	t.Logf("%d hosts of two paths fit into 1 MB", stored)
	if stored < 2400 {
		t.Errorf("only %d hosts fit into 1 MB; --routes-dict-size's help promises about 2,500", stored)
	}
	live, _, err := rt.Client().Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := live[""]; !ok || len(live) != stored+1 {
		t.Errorf("%d hosts live, want the %d stored and the catch-all", len(live), stored)
	}
	for _, h := range full.NotStored {
		if _, ok := live[Hostname(h)]; ok {
			t.Errorf("host %s reported not stored is live", h)
		}
	}

	// A stored host whose changed routes no longer fit answers 503, not with its previous routes.
	backend := httpServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "previous routes") })
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("tenant-000", "service-00000", 80).Name: {backend}}); err != nil {
		t.Fatal(err)
	}
	get := func() int {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api", cfg.HTTPPort), nil)
		req.Host = string(host(0))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("host %s before the change: %d", host(0), code)
	}
	big := Server{Host: host(0)}
	for i := range 3000 {
		big.Locations = append(big.Locations, Location{Path: fmt.Sprintf("/path-%04d", i), PathType: PathPrefix, Upstream: "x"})
	}
	err = rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{host(0): AppendRouteHostJSON(nil, &big)}})
	if !errors.As(err, &full) || !slices.Equal(full.NotStored, []string{string(host(0))}) {
		t.Fatalf("push of a host too big: %v", err)
	}
	if code := get(); code != http.StatusServiceUnavailable {
		t.Errorf("a host whose changed routes did not fit answers %d, want 503", code)
	}
}

// FuzzAppendRouteHostJSON: whatever a path holds, the hand-written encoder writes valid JSON that
// decodes to the same path (for valid UTF-8, which is all encoding/json keeps).
func FuzzAppendRouteHostJSON(f *testing.F) {
	for _, p := range []string{"/", "/a\"b", "/\\", "/\x00\x1f\x7f", "/ü", "/a b"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		s := Server{Host: "a.example.com", TLS: &ServerTLS{SSLRedirect: true}, Locations: []Location{
			{Path: p, PathType: PathExact, Upstream: "up-1", SSLRedirect: true,
				Access: &SourceRanges{Deny: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}}}
		b := AppendRouteHostJSON(nil, &s)
		var h RouteHost
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatalf("path %q encodes as invalid JSON %s: %v", p, b, err)
		}
		if utf8.ValidString(p) && (len(h.Routes) != 1 || h.Routes[0].Path != p || !h.Redirect || h.Routes[0].Deny[0] != "0a000000/8") {
			t.Fatalf("path %q round-trips as %+v", p, h)
		}
	})
}

// TestRoutesRefusedAlone: a host entry the data plane refuses (here a route over the length limit that
// a custom template may lower) is refused alone with the route's index, keeps the routes it had, and
// the rest of the push is live.
func TestRoutesRefusedAlone(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	applyModel(t, rt, Model{}, cfg)

	web := up("default", "web", 80).Name
	entry := func(host Hostname, paths ...string) []byte {
		s := &Server{Host: host}
		for _, p := range paths {
			s.Locations = append(s.Locations, Location{Path: p, PathType: PathPrefix, Upstream: web})
		}
		return AppendRouteHostJSON(nil, s)
	}
	if err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{"a.example.com": entry("a.example.com", "/old")}}); err != nil {
		t.Fatal(err)
	}
	long := "/" + strings.Repeat("x", 5000)
	err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{
		"a.example.com": entry("a.example.com", "/fine", long),
		"b.example.com": entry("b.example.com", "/b"),
	}})
	refused := RefusedRoutes(err)
	if len(refused) != 1 || refused["a.example.com"].Route != 2 || !strings.Contains(refused["a.example.com"].Error, "longer than 4096 bytes") {
		t.Fatalf("push answered %v (refused %+v); want a.example.com's route 2 refused for its length", err, refused)
	}
	live, _, err := rt.Client().Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := live["a.example.com"].Routes; len(got) != 1 || got[0].Path != "/old" {
		t.Errorf("the refused host holds %+v, want the routes it had (/old)", got)
	}
	if _, ok := live["b.example.com"]; !ok {
		t.Error("the host pushed beside the refused one is not live")
	}
}
