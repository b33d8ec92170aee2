package nginx

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// buildModel translates every Ingress in objs (with the Services in objs) and merges the accepted ones.
// Locations' Service (the request metrics' label, derived from Upstream) is left out, so that the
// tables need not repeat it; buildModelWithServices keeps it.
func buildModel(t *testing.T, objs []any, defaultBackend *Upstream) (Model, []Conflict) {
	t.Helper()
	m, conflicts := buildModelWithServices(t, objs, defaultBackend)
	for i := range m.Servers {
		for j := range m.Servers[i].Locations {
			m.Servers[i].Locations[j].Service = ""
		}
	}
	return m, conflicts
}

// buildModelWithServices is buildModel with the Locations' Service.
func buildModelWithServices(t *testing.T, objs []any, defaultBackend *Upstream) (Model, []Conflict) {
	t.Helper()
	svcs, ings := splitObjects(t, objs)
	var ts []*IngressTranslation
	for _, ing := range ings {
		tr, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
		if err != nil {
			continue // rejected alone
		}
		ts = append(ts, tr)
	}
	return Merge(ts, defaultBackend)
}

// splitObjects sorts a test's objects into Services and Ingresses; anything else fails the test.
func splitObjects(t *testing.T, objs []any) (services, []*networkingv1.Ingress) {
	t.Helper()
	svcs := services{}
	var ings []*networkingv1.Ingress
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Service:
			svcs[nn(o.Namespace, o.Name)] = o
		case *networkingv1.Ingress:
			ings = append(ings, o)
		default:
			t.Fatalf("unexpected object %T", o)
		}
	}
	return svcs, ings
}

func TestMerge(t *testing.T) {
	web := service("default", "web", port(80, "http"))
	api := service("default", "api", port(8080, "http"))
	web80, api8080 := up("default", "web", 80), up("default", "api", 8080)
	catchAll := Server{Host: ""}
	defaultBE := up("kube-system", "default-http-backend", 80)
	adminAccess := &SourceRanges{Deny: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	everyone := &SourceRanges{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}

	tests := map[string]struct {
		objs           []any
		defaultBackend *Upstream
		want           Model
		wantConflicts  []Conflict
	}{
		"nothing: only the catch-all server (built-in 404)": {
			want: Model{Servers: []Server{catchAll}, Upstreams: []*Upstream{}},
		},
		"--default-backend-service is the catch-all's fallback and an upstream": {
			defaultBackend: &defaultBE,
			want:           Model{Servers: []Server{catchAll}, Upstreams: modelUpstreams(defaultBE), DefaultBackend: defaultBE.Name},
		},
		"two Ingresses for one host merge, locations sorted": {
			objs: []any{web, api,
				ingress("default", "a", rule("foo.example.com", prefix("/web", "web", 80))),
				ingress("default", "b", rule("foo.example.com", prefix("/api", "api", 8080), exact("/api", "web", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "foo.example.com", Locations: []Location{
					{Path: "/api", PathType: PathExact, Upstream: web80.Name, Ingress: nn("default", "b")},
					{Path: "/api", PathType: PathPrefix, Upstream: api8080.Name, Ingress: nn("default", "b")},
					{Path: "/web", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "a")},
				}}},
				Upstreams: modelUpstreams(api8080, web80),
			},
		},
		"conflicting path: the oldest Ingress wins, the younger one gets a conflict": {
			objs: []any{web, api,
				ingress("default", "young", age(time.Hour), rule("foo.example.com", prefix("/", "api", 8080), prefix("/only-young", "api", 8080))),
				ingress("default", "old", rule("foo.example.com", prefix("/", "web", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "foo.example.com", Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "old")},
					{Path: "/only-young", PathType: PathPrefix, Upstream: api8080.Name, Ingress: nn("default", "young")},
				}}},
				Upstreams: modelUpstreams(api8080, web80),
			},
			wantConflicts: []Conflict{{Kind: ConflictPath, Loser: nn("default", "young"), Winner: nn("default", "old"), Host: "foo.example.com", Path: "/", PathType: PathPrefix}},
		},
		"same age: namespace/name decides": {
			objs: []any{web, api,
				ingress("default", "b", rule("foo.example.com", prefix("/", "api", 8080))),
				ingress("default", "a", rule("foo.example.com", prefix("/", "web", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "foo.example.com", Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "a")},
				}}},
				Upstreams: modelUpstreams(web80),
			},
			wantConflicts: []Conflict{{Kind: ConflictPath, Loser: nn("default", "b"), Winner: nn("default", "a"), Host: "foo.example.com", Path: "/", PathType: PathPrefix}},
		},
		"Prefix /foo and /foo/ are the same path": {
			objs: []any{web, api,
				ingress("default", "a", rule("foo.example.com", prefix("/foo", "web", 80))),
				ingress("default", "b", age(time.Second), rule("foo.example.com", prefix("/foo/", "api", 8080))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "foo.example.com", Locations: []Location{
					{Path: "/foo", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "a")},
				}}},
				Upstreams: modelUpstreams(web80),
			},
			wantConflicts: []Conflict{{Kind: ConflictPath, Loser: nn("default", "b"), Winner: nn("default", "a"), Host: "foo.example.com", Path: "/foo", PathType: PathPrefix}},
		},
		"a rejected Ingress is left out; the others are served": {
			objs: []any{web,
				ingress("default", "bad", rule("foo.example.com", prefix("/a;b", "web", 80))),
				ingress("default", "good", rule("foo.example.com", prefix("/good", "web", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "foo.example.com", Locations: []Location{
					{Path: "/good", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "good")},
				}}},
				Upstreams: modelUpstreams(web80),
			},
		},
		"spec.defaultBackend yields silently to an explicit / of a younger Ingress": {
			objs: []any{web, api,
				ingress("default", "old", withDefaultBackend("web", 80), rule("foo.example.com", prefix("/x", "web", 80))),
				ingress("default", "young", age(time.Hour), rule("foo.example.com", prefix("/", "api", 8080))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "foo.example.com", Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: api8080.Name, Ingress: nn("default", "young")},
					{Path: "/x", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "old")},
				}}},
				Upstreams: modelUpstreams(api8080, web80),
			},
		},
		"spec.defaultBackend without rules takes the catch-all's /; two of them conflict": {
			objs: []any{web, api,
				ingress("default", "old", withDefaultBackend("web", 80)),
				ingress("default", "young", age(time.Hour), withDefaultBackend("api", 8080)),
			},
			defaultBackend: &defaultBE,
			want: Model{
				Servers: []Server{{Host: "", Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "old")},
				}}},
				Upstreams:      modelUpstreams(defaultBE, web80),
				DefaultBackend: defaultBE.Name,
			},
			wantConflicts: []Conflict{{Kind: ConflictPath, Loser: nn("default", "young"), Winner: nn("default", "old"), Host: "", Path: "/", PathType: PathPrefix}},
		},
		"TLS: exact host, wildcard covers one label, redirect flags; a host without TLS is not redirected": {
			objs: []any{web,
				ingress("default", "a",
					rule("a.example.com", prefix("/", "web", 80)),
					rule("b.example.com", prefix("/", "web", 80)),
					rule("c.sub.example.com", prefix("/", "web", 80)),
					rule("*.sub.example.com", prefix("/", "web", 80)),
					rule("plain.test", prefix("/", "web", 80)),
					withTLS("a-cert", "a.example.com"),
					withTLS("wild-cert", "*.example.com"),
				),
				ingress("default", "b", rule("a.example.com", prefix("/b", "web", 80))),
			},
			want: Model{
				Servers: []Server{
					catchAll,
					// A wildcard host is covered only by the same wildcard, never by a shorter one.
					{Host: "*.sub.example.com", Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "a")},
					}},
					{Host: "a.example.com", TLS: &ServerTLS{Secret: nn("default", "a-cert"), SSLRedirect: true}, Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "a"), SSLRedirect: true},
						{Path: "/b", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "b"), SSLRedirect: true},
					}},
					{Host: "b.example.com", TLS: &ServerTLS{Secret: nn("default", "wild-cert"), SSLRedirect: true}, Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "a"), SSLRedirect: true},
					}},
					// Two labels below the wildcard: not covered, so plain HTTP and no redirect.
					{Host: "c.sub.example.com", Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "a")},
					}},
					{Host: "plain.test", Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "a")},
					}},
				},
				Upstreams: modelUpstreams(web80),
			},
		},
		"TLS: two Secrets for one host, the oldest wins": {
			objs: []any{web,
				ingress("default", "old", rule("a.example.com", prefix("/", "web", 80)), withTLS("old-cert", "a.example.com")),
				ingress("default", "young", age(time.Minute), rule("a.example.com", prefix("/y", "web", 80)), withTLS("young-cert", "a.example.com")),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "a.example.com", TLS: &ServerTLS{Secret: nn("default", "old-cert"), SSLRedirect: true}, Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "old"), SSLRedirect: true},
					{Path: "/y", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "young"), SSLRedirect: true},
				}}},
				Upstreams: modelUpstreams(web80),
			},
			wantConflicts: []Conflict{{Kind: ConflictTLS, Loser: nn("default", "young"), Winner: nn("default", "old"), Host: "a.example.com"}},
		},
		"TLS applies only to hosts its own namespace routes": {
			objs: []any{web, service("team-b", "web", port(80, "http")), service("team-c", "web", port(80, "http")),
				// team-a serves victim.example.com without TLS and shares shared.example.com with team-b.
				ingress("team-a", "site", age(time.Minute),
					rule("victim.example.com", prefix("/", "web", 80)),
					rule("shared.example.com", prefix("/a", "web", 80))),
				// team-b (older) lists both hosts: shared.example.com it routes too, victim.example.com it does not.
				ingress("team-b", "evil",
					rule("shared.example.com", prefix("/b", "web", 80)),
					withTLS("b-cert", "victim.example.com", "shared.example.com")),
				// team-c's wildcard covers its own host, never team-a's.
				ingress("team-c", "wild", rule("c.example.com", prefix("/", "web", 80)), withTLS("c-wild", "*.example.com")),
			},
			want: Model{
				Servers: []Server{
					catchAll,
					{Host: "c.example.com", TLS: &ServerTLS{Secret: nn("team-c", "c-wild"), SSLRedirect: true}, Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: up("team-c", "web", 80).Name, Ingress: nn("team-c", "wild"), SSLRedirect: true},
					}},
					{Host: "shared.example.com", TLS: &ServerTLS{Secret: nn("team-b", "b-cert"), SSLRedirect: true}, Locations: []Location{
						// team-a lists no TLS for the host: its path keeps plain HTTP.
						{Path: "/a", PathType: PathPrefix, Upstream: up("team-a", "web", 80).Name, Ingress: nn("team-a", "site")},
						{Path: "/b", PathType: PathPrefix, Upstream: up("team-b", "web", 80).Name, Ingress: nn("team-b", "evil"), SSLRedirect: true},
					}},
					{Host: "victim.example.com", Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: up("team-a", "web", 80).Name, Ingress: nn("team-a", "site")},
					}},
				},
				Upstreams: modelUpstreams(up("team-a", "web", 80), up("team-b", "web", 80), up("team-c", "web", 80)),
			},
			wantConflicts: []Conflict{{Kind: ConflictTLSNamespace, Loser: nn("team-b", "evil"), Host: "victim.example.com"}},
		},
		"another namespace's TLS entry neither certifies nor redirects an older namespace's host": {
			objs: []any{service("team-a", "web", port(80, "http")), service("team-b", "web", port(80, "http")),
				ingress("team-a", "plain", rule("plain.example", prefix("/", "web", 80))),
				ingress("team-b", "b", age(time.Minute), rule("plain.example", prefix("/b-only", "web", 80)), withTLS("b-tls", "plain.example")),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "plain.example", Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: up("team-a", "web", 80).Name, Ingress: nn("team-a", "plain")},
					{Path: "/b-only", PathType: PathPrefix, Upstream: up("team-b", "web", 80).Name, Ingress: nn("team-b", "b")},
				}}},
				Upstreams: modelUpstreams(up("team-a", "web", 80), up("team-b", "web", 80)),
			},
			wantConflicts: []Conflict{{Kind: ConflictTLSHost, Loser: nn("team-b", "b"), Winner: nn("team-a", "plain"), Host: "plain.example"}},
		},
		"on a shared host the oldest rule's namespace chooses the certificate; each namespace's own entry redirects its paths": {
			objs: []any{service("team-a", "web", port(80, "http")), service("team-b", "web", port(80, "http")), service("team-c", "web", port(80, "http")),
				ingress("team-a", "site", rule("shop.example", prefix("/", "web", 80)), withTLS("a-tls", "shop.example")),
				ingress("team-b", "b", age(time.Minute), rule("shop.example", prefix("/b", "web", 80)), withTLS("b-tls", "shop.example")),
				ingress("team-c", "c", age(2*time.Minute), rule("shop.example", prefix("/c", "web", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "shop.example", TLS: &ServerTLS{Secret: nn("team-a", "a-tls"), SSLRedirect: true}, Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: up("team-a", "web", 80).Name, Ingress: nn("team-a", "site"), SSLRedirect: true},
					{Path: "/b", PathType: PathPrefix, Upstream: up("team-b", "web", 80).Name, Ingress: nn("team-b", "b"), SSLRedirect: true},
					{Path: "/c", PathType: PathPrefix, Upstream: up("team-c", "web", 80).Name, Ingress: nn("team-c", "c")},
				}}},
				Upstreams: modelUpstreams(up("team-a", "web", 80), up("team-b", "web", 80), up("team-c", "web", 80)),
			},
			wantConflicts: []Conflict{{Kind: ConflictTLSHost, Loser: nn("team-b", "b"), Winner: nn("team-a", "site"), Host: "shop.example"}},
		},
		"TLS of the Ingress that routes the host wins over an older one that does not": {
			objs: []any{web,
				ingress("default", "old", rule("bar.example.com", prefix("/", "web", 80)), withTLS("s-old", "foo.example.com")),
				ingress("default", "new", age(time.Minute), rule("foo.example.com", prefix("/", "web", 80)), withTLS("s-new", "foo.example.com")),
			},
			want: Model{
				Servers: []Server{catchAll,
					{Host: "bar.example.com", Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "old")},
					}},
					{Host: "foo.example.com", TLS: &ServerTLS{Secret: nn("default", "s-new"), SSLRedirect: true}, Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "new"), SSLRedirect: true},
					}},
				},
				Upstreams: modelUpstreams(web80),
			},
			wantConflicts: []Conflict{{Kind: ConflictTLS, Loser: nn("default", "old"), Winner: nn("default", "new"), Host: "foo.example.com"}},
		},
		"wildcard TLS: conflicts name the served host, one per host": {
			objs: []any{web,
				ingress("default", "x", rule("a.example.com", prefix("/", "web", 80)), withTLS("s1", "*.example.com")),
				ingress("default", "y", age(time.Minute), rule("b.example.com", prefix("/", "web", 80)), withTLS("s2", "*.example.com")),
			},
			want: Model{
				Servers: []Server{catchAll,
					{Host: "a.example.com", TLS: &ServerTLS{Secret: nn("default", "s1"), SSLRedirect: true}, Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "x"), SSLRedirect: true},
					}},
					{Host: "b.example.com", TLS: &ServerTLS{Secret: nn("default", "s2"), SSLRedirect: true}, Locations: []Location{
						{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "y"), SSLRedirect: true},
					}},
				},
				Upstreams: modelUpstreams(web80),
			},
			wantConflicts: []Conflict{
				{Kind: ConflictTLS, Loser: nn("default", "x"), Winner: nn("default", "y"), Host: "b.example.com"},
				{Kind: ConflictTLS, Loser: nn("default", "y"), Winner: nn("default", "x"), Host: "a.example.com"},
			},
		},
		"TLS from another Ingress of the same namespace applies": {
			objs: []any{web,
				ingress("default", "certs", withTLS("a-cert", "a.example.com")),
				ingress("default", "app", rule("a.example.com", prefix("/", "web", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "a.example.com", TLS: &ServerTLS{Secret: nn("default", "a-cert"), SSLRedirect: true}, Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "app"), SSLRedirect: true},
				}}},
				Upstreams: modelUpstreams(web80),
			},
		},
		"source ranges follow their Ingress's locations; Ingresses sharing a host keep their own": {
			objs: []any{web, api,
				ingress("default", "admin", withDefaultBackend("web", 80), annotate(
					AnnotationAllowlistSourceRange, "10.0.0.0/8", AnnotationDenylistSourceRange, "10.9.0.0/16"),
					rule("shared.example", prefix("/admin", "api", 8080), exact("/status", "web", 80))),
				ingress("default", "public", rule("shared.example", prefix("/public", "web", 80))),
				ingress("default", "cm-acme-http-solver", annotate(AnnotationWhitelistSourceRange, "0.0.0.0/0,::/0"),
					rule("shared.example", path(networkingv1.PathTypeImplementationSpecific, "/.well-known/acme-challenge/token", "web", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "shared.example", Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "admin"), Access: adminAccess},
					{Path: "/.well-known/acme-challenge/token", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "cm-acme-http-solver"), Access: everyone},
					{Path: "/admin", PathType: PathPrefix, Upstream: api8080.Name, Ingress: nn("default", "admin"), Access: adminAccess},
					{Path: "/public", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "public")},
					{Path: "/status", PathType: PathExact, Upstream: web80.Name, Ingress: nn("default", "admin"), Access: adminAccess},
				}}},
				Upstreams: modelUpstreams(api8080, web80),
			},
		},
		"a conflicting path keeps the winner's source ranges, not the loser's": {
			objs: []any{web,
				ingress("default", "old", rule("a.example.com", prefix("/", "web", 80))),
				ingress("default", "young", age(time.Minute), annotate(AnnotationDenylistSourceRange, "0.0.0.0/0"), rule("a.example.com", prefix("/", "web", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "a.example.com", Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "old")},
				}}},
				Upstreams: modelUpstreams(web80),
			},
			wantConflicts: []Conflict{{Kind: ConflictPath, Loser: nn("default", "young"), Winner: nn("default", "old"), Host: "a.example.com", Path: "/", PathType: PathPrefix}},
		},
		"upstreams of losing routes are not in the model": {
			objs: []any{web, api,
				ingress("default", "old", rule("a.example.com", prefix("/", "web", 80))),
				ingress("default", "young", age(time.Minute), rule("a.example.com", prefix("/", "api", 8080))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: "a.example.com", Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "old")},
				}}},
				Upstreams: modelUpstreams(web80),
			},
			wantConflicts: []Conflict{{Kind: ConflictPath, Loser: nn("default", "young"), Winner: nn("default", "old"), Host: "a.example.com", Path: "/", PathType: PathPrefix}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, conflicts := buildModel(t, tc.objs, tc.defaultBackend)
			same(t, "model", got, tc.want)
			same(t, "conflicts", conflicts, tc.wantConflicts)
			// The input order must not matter.
			reversed := make([]any, len(tc.objs))
			for i, o := range tc.objs {
				reversed[len(tc.objs)-1-i] = o
			}
			again, _ := buildModel(t, reversed, tc.defaultBackend)
			same(t, "model from reversed input", again, got)
		})
	}
}

func TestConflictMessage(t *testing.T) {
	tests := map[string]struct {
		c    Conflict
		want string
	}{
		"path": {
			c:    Conflict{Kind: ConflictPath, Loser: nn("ns", "b"), Winner: nn("ns", "a"), Host: "foo.example.com", Path: "/api", PathType: PathPrefix},
			want: `path "/api" (Prefix) on host foo.example.com is already served by Ingress ns/a, which is older; this Ingress's path is ignored`,
		},
		"catch-all path": {
			c:    Conflict{Kind: ConflictPath, Loser: nn("ns", "b"), Winner: nn("ns", "a"), Path: "/", PathType: PathExact},
			want: `path "/" (Exact) on host (any) is already served by Ingress ns/a, which is older; this Ingress's path is ignored`,
		},
		"tls": {
			c:    Conflict{Kind: ConflictTLS, Loser: nn("ns", "b"), Winner: nn("ns", "a"), Host: "foo.example.com"},
			want: `TLS for host foo.example.com is served with the secret of Ingress ns/a (an Ingress that routes the host comes first, then the oldest); this Ingress's TLS entry for the host is ignored`,
		},
		"tls of a namespace sharing the host": {
			c:    Conflict{Kind: ConflictTLSHost, Loser: nn("b", "y"), Winner: nn("a", "x"), Host: "foo.example.com"},
			want: `TLS for host foo.example.com does not choose the host's certificate: namespaces share the host and Ingress a/x, of another namespace, routes its oldest rule, so only that namespace's TLS entries do; this Ingress's paths are redirected to HTTPS only when the host serves TLS`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.c.Message(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestModelLookups(t *testing.T) {
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "")),
		ingress("default", "a",
			rule("a.example.com", prefix("/", "web", 80)),
			rule("b.example.com", prefix("/", "web", 80)),
			rule("c.example.com", prefix("/", "web", 80)),
			withTLS("a-cert", "a.example.com"),
			withTLS("", "b.example.com"),
		),
	}, nil)
	same(t, "TLS hosts", m.TLSHosts(), map[Hostname]types.NamespacedName{"a.example.com": nn("default", "a-cert")})
	if u, ok := m.Upstream(up("default", "web", 80).Name); !ok || u.Service != nn("default", "web") {
		t.Errorf("Upstream lookup: %v %v", u, ok)
	}
	if _, ok := m.Upstream("nope"); ok {
		t.Error("found an upstream that does not exist")
	}
}
