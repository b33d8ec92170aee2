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
		"redirects: permanent, temporal (which wins over permanent), app-root; before source ranges": {
			objs: []any{web, api,
				ingress("default", "perm", rule("perm.example.com", prefix("/", "web", 80)), annotate(AnnotationPermanentRedirect, "https://new.example.org/landing?from=perm")),
				ingress("default", "perm308", rule("perm308.example.com", prefix("/old", "web", 80)),
					annotate(AnnotationPermanentRedirect, "http://new.example.org", AnnotationPermanentRedirectCode, "308")),
				ingress("default", "temp", rule("temp.example.com", prefix("/", "web", 80)),
					annotate(AnnotationTemporalRedirect, "https://maint.example.org/", AnnotationTemporalRedirectCode, "307",
						AnnotationPermanentRedirect, "https://ignored.example.org/", AnnotationDenylistSourceRange, "0.0.0.0/0")),
				ingress("default", "literal", rule("literal.example.com", exact("/x", "web", 80)), annotate(AnnotationPermanentRedirect, "https://a.example.org/$request_uri")),
				ingress("default", "root", rule("root.example.com", prefix("/", "web", 80), prefix("/api", "api", 80)), annotate(AnnotationAppRoot, "/app1?x=1")),
				ingress("default", "root-no-slash", rule("rootless.example.com", prefix("/app", "web", 80)), annotate(AnnotationAppRoot, "/app"))},
			requests: map[string]string{
				"http://perm.example.com/": "301 https://new.example.org/landing?from=perm", "http://perm.example.com/a/b?c=d": "301 https://new.example.org/landing?from=perm",
				"http://perm308.example.com/old/x": "308 http://new.example.org", "http://perm308.example.com/other": "404",
				"http://temp.example.com/x":    "307 https://maint.example.org/",
				"http://literal.example.com/x": "301 https://a.example.org/$request_uri", "http://literal.example.com/y": "404",
				"http://root.example.com/": "302 http://root.example.com/app1?x=1", "http://Root.Example.com:8080/": "302 http://Root.Example.com:8080/app1?x=1",
				"http://root.example.com/app1": "web", "http://root.example.com/api/": "api", "http://root.example.com/?q": "302 http://root.example.com/app1?x=1",
				"http://rootless.example.com/": "404", "http://rootless.example.com/app": "web",
			},
		},
		"HTTPS redirects: a trailing slash is dropped unless preserved; force-ssl-redirect without TLS, and over ssl-redirect false": {
			objs: []any{web,
				ingress("default", "tls", rule("tls.example.com", prefix("/", "web", 80)), withTLS("cert", "tls.example.com")),
				ingress("default", "keep", rule("keep.example.com", prefix("/", "web", 80)), withTLS("cert", "keep.example.com"),
					annotate(AnnotationPreserveTrailingSlash, "true")),
				ingress("default", "force", rule("force.example.com", prefix("/f", "web", 80)), annotate(AnnotationForceSSLRedirect, "true")),
				ingress("default", "force-off", rule("force-off.example.com", prefix("/", "web", 80)), withTLS("cert", "force-off.example.com"),
					annotate(AnnotationForceSSLRedirect, "true", AnnotationSSLRedirect, "false", AnnotationPreserveTrailingSlash, "1"))},
			requests: map[string]string{
				"http://tls.example.com/": "308 https://tls.example.com:8443", "http://tls.example.com/a/": "308 https://tls.example.com:8443/a",
				"http://tls.example.com/a/?b": "308 https://tls.example.com:8443/a/?b", "http://tls.example.com/a//": "308 https://tls.example.com:8443/a/",
				"http://keep.example.com/": "308 https://keep.example.com:8443/", "http://keep.example.com/a/": "308 https://keep.example.com:8443/a/",
				"http://force.example.com/f/": "308 https://force.example.com:8443/f", "http://force.example.com/g": "404",
				"http://force-off.example.com/x/": "308 https://force-off.example.com:8443/x/",
			},
		},
		"server-alias serves the Ingress's first host's paths; a rule for the host wins over an alias; one namespace per alias host": {
			objs: []any{web, api, other,
				ingress("default", "a", rule("a.example.com", prefix("/", "web", 80), exact("/x", "api", 80)), rule("a2.example.com", prefix("/two", "api", 80)),
					annotate(AnnotationServerAlias, "alias.example.com, Taken.example.com,*.wild.example.com,shared.example.com")),
				ingress("default", "taker", rule("taken.example.com", prefix("/t", "api", 80)), age(time.Hour)),
				ingress("other", "b", rule("b.example.com", prefix("/", "web", 80)), annotate(AnnotationServerAlias, "shared.example.com"), age(-time.Hour)),
				ingress("default", "c", rule("c.example.com", prefix("/c", "api", 80)), annotate(AnnotationServerAlias, "shared.example.com"), age(time.Hour))},
			requests: map[string]string{
				"http://alias.example.com/": "web", "http://alias.example.com/x": "api", "http://alias.example.com/two": "web",
				"http://taken.example.com/t": "api", "http://taken.example.com/": "404",
				"http://x.wild.example.com/x": "api", "http://x.y.wild.example.com/x": "404",
				"http://shared.example.com/": "web", "http://shared.example.com/c": "web",
			},
		},
		"from-to-www-redirect: both ways, yields to a rule for the twin; an alias of the twin wins over the redirect": {
			objs: []any{web, api,
				ingress("default", "apex", rule("example.com", prefix("/", "web", 80)), annotate(AnnotationFromToWWWRedirect, "true")),
				ingress("default", "www", rule("www.example.org", prefix("/", "web", 80)), annotate(AnnotationFromToWWWRedirect, "true")),
				ingress("default", "ruled", rule("example.net", prefix("/", "web", 80)), annotate(AnnotationFromToWWWRedirect, "true")),
				ingress("default", "twin", rule("www.example.net", prefix("/", "api", 80))),
				ingress("default", "aliased", rule("example.info", prefix("/", "web", 80)),
					annotate(AnnotationFromToWWWRedirect, "true", AnnotationServerAlias, "www.example.info"))},
			requests: map[string]string{
				"http://www.example.com/a/b/?c=d": "308 http://example.com/a/b/?c=d", "http://www.example.com/a/": "308 http://example.com/a",
				"http://www.example.com:8080/": "308 http://example.com:8080", "http://example.com/a": "web",
				"http://example.org/x": "308 http://www.example.org/x", "http://www.example.org/x": "web",
				"http://www.example.net/": "api", "http://www.example.info/": "web",
			},
		},
		"default-backend: serves paths whose Service has no endpoints, and the host's unmatched paths": {
			objs: []any{web, api, service("default", "empty", port(80, "")), service("default", "custom", port(8080, ""), port(80, "")),
				service("other", "empty", port(80, "")), service("other", "sorry", port(80, "")),
				ingress("default", "a", rule("a.example.com", prefix("/down", "empty", 80), prefix("/up", "web", 80)),
					annotate(AnnotationDefaultBackend, "custom")),
				ingress("default", "plain", rule("plain.example.com", prefix("/down", "empty", 80))),
				ingress("other", "late", rule("a.example.com", prefix("/late", "empty", 80)), annotate(AnnotationDefaultBackend, "sorry"), age(time.Hour))},
			defaultBackend: dflt,
			requests: map[string]string{
				"http://a.example.com/down": "custom", "http://a.example.com/up": "web", "http://a.example.com/nowhere": "custom",
				"http://a.example.com/late": "sorry", "http://plain.example.com/down": "503", "http://plain.example.com/x": "fallback",
			},
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
				"http://g.example.com/": "308 https://g.example.com:8443", "http://h.example.com/": "web",
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
func modelOutcome(t *testing.T, m *Model, raw string, client netip.Addr, withSeenURI bool) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	host := normalizeHost(req.URL.Host)
	uri := normalizePath(req.URL.Path)
	r := m.Route(host, uri)
	var o *RouteOptions
	if r.Location != nil {
		o = r.Location.Options
	}
	switch {
	case r.Location != nil && r.Location.RedirectHost != "":
		target := req.URL.Scheme + "://" + string(r.Location.RedirectHost)
		if p := req.URL.Port(); p != "" {
			target += ":" + p
		}
		return "308 " + target + strings.TrimSuffix(req.URL.RequestURI(), "/")
	case o != nil && o.AppRoot != "" && uri == "/":
		return "302 " + req.URL.Scheme + "://" + req.URL.Host + o.AppRoot
	case o != nil && o.RedirectURL != "":
		return strconv.Itoa(o.RedirectCode) + " " + o.RedirectURL
	case req.URL.Scheme == "http" && (r.Redirect || o != nil && o.ForceSSLRedirect):
		requestURI := req.URL.RequestURI()
		if o == nil || !o.PreserveTrailingSlash {
			requestURI = strings.TrimSuffix(requestURI, "/")
		}
		return "308 https://" + host + ":" + strconv.Itoa(redirectPort) + requestURI
	case r.Location != nil && !r.Location.Admits(client):
		return "403"
	case r.Upstream == "":
		return "404"
	}
	u, ok := m.Upstream(r.Upstream)
	if !ok {
		t.Fatalf("%s: upstream %s is not in the model", raw, r.Upstream)
	}
	if strings.HasPrefix(u.Service.Name, "empty") { // runCorpus gives these Services no endpoints
		if o == nil || o.DefaultBackend == "" {
			return "503"
		}
		if u, ok = m.Upstream(o.DefaultBackend); !ok {
			t.Fatalf("%s: default backend %s is not in the model", raw, o.DefaultBackend)
		}
	}
	if !withSeenURI {
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
				if !strings.HasPrefix(u.Service.Name, "empty") {
					eps[u.Name] = []Endpoint{backend(u.Service.Name)}
				}
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
				case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
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
			got := RouteHost{Redirect: s.TLS != nil && s.TLS.SSLRedirect, Regex: s.RegexMode(), DefaultBackend: s.DefaultBackend, Routes: []RoutePath{}}
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
				p := RoutePath{Path: e.path, Exact: l.PathType == PathExact && e.re == nil, Upstream: l.Upstream, Redirect: l.SSLRedirect, HostRedirect: l.RedirectHost}
				if l.Profile != nil {
					p.Profile = l.Profile.Name()
					if l.Profile.CustomHTTPErrors != "" {
						p.IngressNamespace, p.IngressName = l.Ingress.Namespace, l.Ingress.Name
						if l.Backend != nil {
							p.ServiceName, p.ServicePort = l.Backend.Service.Name, l.Backend.Port.String()
						}
					}
				}
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
				if o := l.Options; o != nil {
					p.RedirectURL, p.RedirectCode, p.AppRoot, p.DefaultBackend = o.RedirectURL, o.RedirectCode, o.AppRoot, o.DefaultBackend
					p.ForceSSLRedirect, p.PreserveTrailingSlash, p.UsePortInRedirects = o.ForceSSLRedirect, o.PreserveTrailingSlash, o.UsePortInRedirects
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

// TestRouteLocationsFollowTheWireOrder: RouteLocations names, for each route of a host's wire form, the
// location it was written from (a regex host writes its routes in match order, some locations twice),
// so that a refusal's route index finds the Ingress at fault.
func TestRouteLocationsFollowTheWireOrder(t *testing.T) {
	regexHosts := 0
	for name, tc := range routeCorpus() {
		m, _ := buildModel(t, tc.objs, tc.defaultBackend)
		for i := range m.Servers {
			s := &m.Servers[i]
			var wire RouteHost
			if err := json.Unmarshal(AppendRouteHostJSON(nil, s), &wire); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if wire.Regex {
				regexHosts++
			}
			locs := RouteLocations(s)
			if len(locs) != len(wire.Routes) {
				t.Fatalf("%s: host %q: %d locations for %d wire routes", name, s.Host, len(locs), len(wire.Routes))
			}
			for j, r := range wire.Routes {
				l := locs[j]
				if strings.TrimSuffix(r.Path, "/") != strings.TrimSuffix(l.Path, "/") || r.Upstream != l.Upstream {
					t.Errorf("%s: host %q: wire route %d is %s -> %s, RouteLocations names %s -> %s", name, s.Host, j+1, r.Path, r.Upstream, l.Path, l.Upstream)
				}
			}
		}
	}
	if regexHosts == 0 {
		t.Fatal("the corpus has no regex host; the order RouteLocations follows there is untested")
	}
}
