package nginx

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestAnnotationHostAliases: server-alias and from-to-www-redirect -> the translation's alias routes and
// derived TLS entries, its warnings, or the exact rejection.
func TestAnnotationHostAliases(t *testing.T) {
	svcs := servicesOf(service("default", "web", port(80, "")), service("default", "api", port(80, "")))
	web, api := up("default", "web", 80).Name, up("default", "api", 80).Name
	cert := nn("default", "cert")
	tests := map[string]struct {
		ing      *networkingv1.Ingress
		routes   []Route
		tls      []TLSHost
		warnings []string
		errs     string
	}{
		"aliases copy the first host's routes, folded to lower case, without duplicates": {
			ing: ingress("default", "a", rule("a.example.com", prefix("/", "web", 80), exact("/x", "api", 80)),
				annotate(AnnotationServerAlias, " Alias.example.com,,alias.example.com , *.example.org")),
			routes: []Route{
				{Host: "a.example.com", Path: "/", PathType: PathPrefix, Upstream: web},
				{Host: "a.example.com", Path: "/x", PathType: PathExact, Upstream: api},
				{Host: "alias.example.com", Path: "/", PathType: PathPrefix, Upstream: web, Alias: true},
				{Host: "alias.example.com", Path: "/x", PathType: PathExact, Upstream: api, Alias: true},
				{Host: "*.example.org", Path: "/", PathType: PathPrefix, Upstream: web, Alias: true},
				{Host: "*.example.org", Path: "/x", PathType: PathExact, Upstream: api, Alias: true},
			},
		},
		"an alias presents the first host's certificate unless tls covers it": {
			ing: ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), withTLS("cert", "a.example.com"), withTLS("own", "*.example.net"),
				annotate(AnnotationServerAlias, "alias.example.com,b.example.net")),
			routes: []Route{
				{Host: "a.example.com", Path: "/", PathType: PathPrefix, Upstream: web},
				{Host: "alias.example.com", Path: "/", PathType: PathPrefix, Upstream: web, Alias: true},
				{Host: "b.example.net", Path: "/", PathType: PathPrefix, Upstream: web, Alias: true},
			},
			tls: []TLSHost{{Host: "a.example.com", ServerTLS: ServerTLS{Secret: cert, SSLRedirect: true}}, {Host: "*.example.net", ServerTLS: ServerTLS{Secret: nn("default", "own"), SSLRedirect: true}}, {Host: "alias.example.com", ServerTLS: ServerTLS{Secret: cert, SSLRedirect: true}}},
		},
		"several hosts: the first one's paths, with a warning; an alias that is an own host is ignored": {
			ing: ingress("default", "a", rule("a.example.com", prefix("/a", "web", 80)), rule("b.example.com", prefix("/b", "api", 80)),
				annotate(AnnotationServerAlias, "b.example.com, c.example.com")),
			routes: []Route{
				{Host: "a.example.com", Path: "/a", PathType: PathPrefix, Upstream: web},
				{Host: "b.example.com", Path: "/b", PathType: PathPrefix, Upstream: api},
				{Host: "c.example.com", Path: "/a", PathType: PathPrefix, Upstream: web, Alias: true},
			},
			warnings: []string{
				"metadata.annotations[nginx.ingress.kubernetes.io/server-alias]: b.example.com is a host of the Ingress's rules; ignored as an alias",
				"metadata.annotations[nginx.ingress.kubernetes.io/server-alias]: the aliases serve the paths of host a.example.com, the Ingress's first; its other hosts have none",
			},
		},
		"from-to-www-redirect: a redirect route on each host's twin, with the host's certificate": {
			ing: ingress("default", "a", rule("example.com", prefix("/", "web", 80)), rule("www.example.org", prefix("/", "web", 80)), rule("", prefix("/", "web", 80)),
				rule("*.example.net", prefix("/", "web", 80)), withTLS("cert", "example.com"), annotate(AnnotationFromToWWWRedirect, "true")),
			routes: []Route{
				{Host: "example.com", Path: "/", PathType: PathPrefix, Upstream: web},
				{Host: "www.example.org", Path: "/", PathType: PathPrefix, Upstream: web},
				{Host: "", Path: "/", PathType: PathPrefix, Upstream: web},
				{Host: "*.example.net", Path: "/", PathType: PathPrefix, Upstream: web},
				{Host: "www.example.com", Path: "/", PathType: PathPrefix, Alias: true, RedirectHost: "example.com"},
				{Host: "example.org", Path: "/", PathType: PathPrefix, Alias: true, RedirectHost: "www.example.org"},
			},
			tls: []TLSHost{{Host: "example.com", ServerTLS: ServerTLS{Secret: cert, SSLRedirect: true}}, {Host: "www.example.com", ServerTLS: ServerTLS{Secret: cert, SSLRedirect: true}}},
		},
		"from-to-www-redirect: no twin when the Ingress routes it or has it as an alias": {
			ing: ingress("default", "a", rule("example.com", prefix("/", "web", 80)), rule("www.example.com", prefix("/w", "web", 80)),
				rule("example.org", prefix("/", "api", 80)), annotate(AnnotationFromToWWWRedirect, "1", AnnotationServerAlias, "www.example.org")),
			routes: []Route{
				{Host: "example.com", Path: "/", PathType: PathPrefix, Upstream: web},
				{Host: "www.example.com", Path: "/w", PathType: PathPrefix, Upstream: web},
				{Host: "example.org", Path: "/", PathType: PathPrefix, Upstream: api},
				{Host: "www.example.org", Path: "/", PathType: PathPrefix, Upstream: web, Alias: true},
			},
			warnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/server-alias]: the aliases serve the paths of host example.com, the Ingress's first; its other hosts have none"},
		},
		"from-to-www-redirect false": {
			ing:    ingress("default", "a", rule("example.com", prefix("/", "web", 80)), annotate(AnnotationFromToWWWRedirect, "false")),
			routes: []Route{{Host: "example.com", Path: "/", PathType: PathPrefix, Upstream: web}},
		},
		"an alias that is no host name": {
			ing:  ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(AnnotationServerAlias, "ok.example.com, bad_host;}")),
			errs: `metadata.annotations[nginx.ingress.kubernetes.io/server-alias]: entry "bad_host;}" is not a host name (want a name like "www.example.com" or a wildcard like "*.example.com")`,
		},
		"an IP address is no alias": {
			ing:  ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(AnnotationServerAlias, "10.0.0.1")),
			errs: `metadata.annotations[nginx.ingress.kubernetes.io/server-alias]: entry "10.0.0.1" is not a host name (want a name like "www.example.com" or a wildcard like "*.example.com")`,
		},
		"from-to-www-redirect not a boolean": {
			ing:  ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(AnnotationFromToWWWRedirect, "www")),
			errs: `metadata.annotations[nginx.ingress.kubernetes.io/from-to-www-redirect]: "www" is not a boolean (want "true" or "false")`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := TranslateIngress(tc.ing, svcs, DefaultTranslateOptions())
			if tc.errs != "" {
				if err == nil || err.Error() != "ingress default/a rejected: "+tc.errs {
					t.Fatalf("err = %v, want %q", err, tc.errs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			same(t, "routes", got.Routes, tc.routes)
			same(t, "tls", got.TLS, tc.tls)
			same(t, "warnings", got.Warnings, tc.warnings)
		})
	}
}

// TestAliasTenancy: an alias host yields to any Ingress whose rules name it, in both ownership modes
// and whatever the ages; among aliases, the oldest Ingress's namespace serves the host.
func TestAliasTenancy(t *testing.T) {
	objs := []any{service("team-a", "web", port(80, "")), service("team-b", "web", port(80, "")), service("team-c", "web", port(80, "")),
		// team-a is the oldest and aliases a host that team-b's younger rules name.
		ingress("team-a", "site", rule("a.example", prefix("/", "web", 80)), annotate(AnnotationServerAlias, "taken.example, free.example"), age(-time.Hour)),
		ingress("team-b", "taker", rule("taken.example", prefix("/b", "web", 80)), age(time.Hour)),
		ingress("team-c", "late", rule("c.example", prefix("/c", "web", 80)), annotate(AnnotationServerAlias, "free.example")),
	}
	for _, ownership := range []HostOwnership{HostsShared, HostsByNamespace} {
		t.Run(string(ownership), func(t *testing.T) {
			res := mergeAll(t, objs, MergeOptions{Ownership: ownership})
			taken, _ := server(res.Model, "taken.example")
			if len(taken.Locations) != 1 || taken.Locations[0].Ingress != nn("team-b", "taker") {
				t.Errorf("taken.example serves %+v, want team-b's rule only", taken.Locations)
			}
			free, _ := server(res.Model, "free.example")
			if len(free.Locations) != 1 || free.Locations[0].Ingress != nn("team-a", "site") || free.Locations[0].Path != "/" {
				t.Errorf("free.example serves %+v, want team-a's alias of /", free.Locations)
			}
			same(t, "conflicts", res.Conflicts, []Conflict{
				{Kind: ConflictAliasRule, Loser: nn("team-a", "site"), Winner: nn("team-b", "taker"), Host: "taken.example"},
				{Kind: ConflictAliasNamespace, Loser: nn("team-c", "late"), Winner: nn("team-a", "site"), Host: "free.example"},
			})
		})
	}
	c := Conflict{Kind: ConflictAliasRule, Loser: nn("team-a", "site"), Winner: nn("team-b", "taker"), Host: "taken.example"}
	if want := "alias host taken.example (server-alias or from-to-www-redirect) is not served by this Ingress: Ingress team-b/taker names the host in its rules, and rules win over aliases"; c.Message() != want {
		t.Errorf("message %q", c.Message())
	}
}
