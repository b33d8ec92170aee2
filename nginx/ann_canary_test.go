package nginx

import (
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestAnnotationCanary: canary annotations -> the translation's canary rule, its warnings, or the exact
// rejection.
func TestAnnotationCanary(t *testing.T) {
	const p = IngressNginxPrefix
	def := func(r CanaryRule) *CanaryRule {
		if r.WeightTotal == 0 {
			r.WeightTotal = 100
		}
		return &r
	}
	tests := map[string]struct {
		kv       []string
		want     *CanaryRule
		noTLS    bool
		warnings []string
		errs     []string
	}{
		"no canary annotation: a plain Ingress": {kv: []string{AnnotationSSLRedirect, "true"}},
		"canary false: a plain Ingress, its rules ignored with a warning": {
			kv: []string{AnnotationCanary, " False ", AnnotationCanaryWeight, "10", AnnotationCanaryByHeader, "x"},
			warnings: []string{"metadata.annotations: " + p + "canary-by-header, " + p + "canary-weight: ignored, because the Ingress is no canary (" +
				p + "canary is not \"true\")"},
		},
		"canary true: weight 0 of 100, its TLS ignored": {
			kv: []string{AnnotationCanary, "true"}, want: def(CanaryRule{}), noTLS: true,
			warnings: []string{"spec.tls: ignored on a canary Ingress: the main Ingress's TLS serves its requests, as in ingress-nginx"},
		},
		"every rule": {
			kv: []string{AnnotationCanary, "true", AnnotationCanaryByHeader, " X-Canary ", AnnotationCanaryByHeaderValue, "yes please",
				AnnotationCanaryByCookie, "canary.v2", AnnotationCanaryWeight, " 30 ", AnnotationCanaryWeightTotal, "1000"},
			want:  def(CanaryRule{Header: "X-Canary", HeaderValue: "yes please", Cookie: "canary.v2", Weight: 30, WeightTotal: 1000}),
			noTLS: true, warnings: []string{"spec.tls: ignored on a canary Ingress: the main Ingress's TLS serves its requests, as in ingress-nginx"},
		},
		"header pattern, written for PCRE": {
			kv:    []string{AnnotationCanary, "true", AnnotationCanaryByHeader, "X-User", AnnotationCanaryByHeaderPattern, `^(alice|bob)\d*$`},
			want:  def(CanaryRule{Header: "X-User", HeaderPattern: `\A((?:alice|bob))(?:[\x30-\x39])*\z`}),
			noTLS: true, warnings: []string{"spec.tls: ignored on a canary Ingress: the main Ingress's TLS serves its requests, as in ingress-nginx"},
		},
		"header value wins over the pattern; value and pattern need the header": {
			kv:   []string{AnnotationCanary, "true", AnnotationCanaryByHeader, "X-User", AnnotationCanaryByHeaderValue, "a", AnnotationCanaryByHeaderPattern, "b"},
			want: def(CanaryRule{Header: "X-User", HeaderValue: "a"}), noTLS: true,
			warnings: []string{
				"metadata.annotations[" + p + "canary-by-header-pattern]: ignored, because " + p + "canary-by-header-value is set too and wins, as in ingress-nginx",
				"spec.tls: ignored on a canary Ingress: the main Ingress's TLS serves its requests, as in ingress-nginx",
			},
		},
		"value without header": {
			kv: []string{AnnotationCanary, "true", AnnotationCanaryByHeaderValue, "a"}, want: def(CanaryRule{}), noTLS: true,
			warnings: []string{
				"metadata.annotations[" + p + "canary-by-header-value]: has no effect without " + p + "canary-by-header",
				"spec.tls: ignored on a canary Ingress: the main Ingress's TLS serves its requests, as in ingress-nginx",
			},
		},
		"other annotations are ignored on a canary, service-upstream applies, use-regex and rewrite-target read its paths": {
			kv: []string{AnnotationCanary, "true", AnnotationCanaryWeight, "100", AnnotationRewriteTarget, "/x", AnnotationBackendProtocol, "GRPC",
				AnnotationServiceUpstream, "true", AnnotationSSLPassthrough, "false", AnnotationUseRegex, "true", AnnotationEnableCORS, "true"},
			want: def(CanaryRule{Weight: 100}), noTLS: true,
			warnings: []string{
				"metadata.annotations: " + p + "backend-protocol, " + p + "enable-cors: ignored on a canary Ingress: the main Ingress's settings " +
					"apply to the canary's requests, as in ingress-nginx",
				"spec.tls: ignored on a canary Ingress: the main Ingress's TLS serves its requests, as in ingress-nginx",
			},
		},
		"ignored values are not checked on a canary": {
			kv: []string{AnnotationCanary, "true", AnnotationBackendProtocol, "FCGI"}, want: def(CanaryRule{}), noTLS: true,
			warnings: []string{
				"metadata.annotations: " + p + "backend-protocol: ignored on a canary Ingress: the main Ingress's settings apply to the canary's requests, as in ingress-nginx",
				"spec.tls: ignored on a canary Ingress: the main Ingress's TLS serves its requests, as in ingress-nginx",
			},
		},
		"snippets stay refused on a canary": {
			kv:   []string{AnnotationCanary, "true", p + "configuration-snippet", "return 200;"},
			errs: []string{"metadata.annotations[" + p + "configuration-snippet]: " + refusedSnippet},
		},
		"canary not a boolean": {
			kv:   []string{AnnotationCanary, "yes"},
			errs: []string{`metadata.annotations[` + p + `canary]: "yes" is not a boolean (want "true" or "false")`},
		},
		"bad header, cookie, value": {
			kv: []string{AnnotationCanary, "true", AnnotationCanaryByHeader, "X Canary", AnnotationCanaryByCookie, "a;b", AnnotationCanaryByHeaderValue, "a\r\nb"},
			errs: []string{
				`metadata.annotations[` + p + `canary-by-header]: "X Canary" is not a header name (want letters, digits, - and _, at most 256 bytes)`,
				`metadata.annotations[` + p + `canary-by-header-value]: "a\r\nb" is not a header value (want printable ASCII, at most 1024 bytes)`,
				`metadata.annotations[` + p + `canary-by-cookie]: "a;b" is not a cookie name (want letters, digits, -, _ and ., at most 256 bytes)`,
			},
		},
		"a pattern RE2 and PCRE read differently": {
			kv:   []string{AnnotationCanary, "true", AnnotationCanaryByHeader, "X", AnnotationCanaryByHeaderPattern, `\1`},
			errs: []string{`metadata.annotations[` + p + `canary-by-header-pattern]: "\\1": \1 is an octal escape for RE2 and a back-reference for PCRE; neither is supported`},
		},
		"a pattern that does not parse": {
			kv:   []string{AnnotationCanary, "true", AnnotationCanaryByHeader, "X", AnnotationCanaryByHeaderPattern, `(a`},
			errs: []string{`metadata.annotations[` + p + `canary-by-header-pattern]: "(a": not a regular expression that Go's regexp (RE2) accepts: missing closing ) in "(a"`},
		},
		"a pattern that grows past the data plane's limit once written for PCRE": {
			kv: []string{AnnotationCanary, "true", AnnotationCanaryByHeader, "X", AnnotationCanaryByHeaderPattern, strings.Repeat(".", 1024)},
			errs: []string{`metadata.annotations[` + p + `canary-by-header-pattern]: "` + strings.Repeat(".", 64) +
				`"... (1024 bytes): 20480 bytes once written for NGINX's PCRE, more than the limit of 4096`},
		},
		"weights out of range": {
			kv: []string{AnnotationCanary, "true", AnnotationCanaryWeight, "-1", AnnotationCanaryWeightTotal, "10"},
			errs: []string{
				`metadata.annotations[` + p + `canary-weight-total]: "10" is not a whole number from 100 to 1000000`,
				`metadata.annotations[` + p + `canary-weight]: "-1" is not a whole number from 0 to 1000000`,
			},
		},
		"weight not a number": {
			kv:   []string{AnnotationCanary, "true", AnnotationCanaryWeight, "30%"},
			errs: []string{`metadata.annotations[` + p + `canary-weight]: "30%" is not a whole number from 0 to 1000000`},
		},
		"weight over the total": {
			kv: []string{AnnotationCanary, "true", AnnotationCanaryWeight, "101"},
			errs: []string{`metadata.annotations[` + p + `canary-weight]: 101 is more than the total, 100 (` + p +
				`canary-weight-total); ingress-nginx sent every request to the canary then`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.kv...)
			if tc.errs != nil {
				same(t, "rejection", errs, tc.errs)
				return
			}
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			same(t, "canary", got.Canary, tc.want)
			same(t, "warnings", got.Warnings, tc.warnings)
			if (len(got.TLS) == 0) != tc.noTLS {
				t.Errorf("TLS %v, want none: %v", got.TLS, tc.noTLS)
			}
			if got.Canary != nil && (got.Options != nil || got.Profile != nil) {
				t.Errorf("a canary has options %+v, profile %+v", got.Options, got.Profile)
			}
		})
	}
}

// TestMergeCanary: a canary Ingress adds its upstream to the main Ingress's locations with the same
// path and path type, of its own namespace; it never serves a path by itself, and a path has one canary.
func TestMergeCanary(t *testing.T) {
	web := service("default", "web", port(80, "http"))
	web2 := service("default", "web-v2", port(80, "http"))
	web3 := service("default", "web-v3", port(80, "http"))
	other := service("other", "web-v2", port(80, "http"))
	web80, v280 := up("default", "web", 80), up("default", "web-v2", 80)
	catchAll := Server{Host: ""}
	const host = "app.example.com"
	weight := func(w int) *CanaryRule { return &CanaryRule{Weight: w, WeightTotal: 100} }
	main := ingress("default", "main", rule(host, prefix("/", "web", 80), exact("/api", "web", 80)), annotate(IngressNginxPrefix+"upstream-vhost", "internal.example.com"))
	mainOpts := &RouteOptions{UpstreamVhost: "internal.example.com"}

	tests := map[string]struct {
		objs          []any
		want          Model
		wantConflicts []Conflict
	}{
		"a canary adds its upstream to the main's path; the main's settings stay": {
			objs: []any{web, web2, main,
				ingress("default", "canary", age(-time.Hour), annotate(AnnotationCanary, "true", AnnotationCanaryWeight, "30"), rule(host, prefix("/", "web-v2", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: host, Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "main"), Options: mainOpts,
						Canary: &LocationCanary{Upstream: v280.Name, Ingress: nn("default", "canary"), Rule: weight(30)}},
					{Path: "/api", PathType: PathExact, Upstream: web80.Name, Ingress: nn("default", "main"), Options: mainOpts},
				}}},
				Upstreams: modelUpstreams(web80, v280),
			},
		},
		"a canary path the main lacks, or of another path type, is not served": {
			objs: []any{web, web2, main,
				ingress("default", "canary", annotate(AnnotationCanary, "true"), rule(host, prefix("/api", "web-v2", 80), prefix("/new", "web-v2", 80))),
				ingress("default", "lonely", annotate(AnnotationCanary, "true"), rule("nomain.example.com", prefix("/", "web-v2", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: host, Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "main"), Options: mainOpts},
					{Path: "/api", PathType: PathExact, Upstream: web80.Name, Ingress: nn("default", "main"), Options: mainOpts},
				}}},
				Upstreams: modelUpstreams(web80),
			},
			wantConflicts: []Conflict{
				{Kind: ConflictCanaryNoMain, Loser: nn("default", "canary"), Host: host, Path: "/api", PathType: PathPrefix},
				{Kind: ConflictCanaryNoMain, Loser: nn("default", "canary"), Host: host, Path: "/new", PathType: PathPrefix},
				{Kind: ConflictCanaryNoMain, Loser: nn("default", "lonely"), Host: "nomain.example.com", Path: "/", PathType: PathPrefix},
			},
		},
		"one canary per path: the oldest; another namespace's canary is refused": {
			objs: []any{web, web2, web3, other, main,
				ingress("default", "canary-b", age(-time.Hour), annotate(AnnotationCanary, "true", AnnotationCanaryWeight, "5"), rule(host, prefix("/", "web-v3", 80))),
				ingress("default", "canary-a", age(-2*time.Hour), annotate(AnnotationCanary, "true", AnnotationCanaryWeight, "7"), rule(host, prefix("/", "web-v2", 80))),
				ingress("other", "canary", age(-3*time.Hour), annotate(AnnotationCanary, "true", AnnotationCanaryWeight, "100"), rule(host, prefix("/", "web-v2", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: host, Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "main"), Options: mainOpts,
						Canary: &LocationCanary{Upstream: v280.Name, Ingress: nn("default", "canary-a"), Rule: weight(7)}},
					{Path: "/api", PathType: PathExact, Upstream: web80.Name, Ingress: nn("default", "main"), Options: mainOpts},
				}}},
				Upstreams: modelUpstreams(web80, v280),
			},
			wantConflicts: []Conflict{
				{Kind: ConflictCanary, Loser: nn("default", "canary-b"), Winner: nn("default", "canary-a"), Host: host, Path: "/", PathType: PathPrefix},
				{Kind: ConflictCanaryNamespace, Loser: nn("other", "canary"), Winner: nn("default", "main"), Host: host, Path: "/", PathType: PathPrefix},
			},
		},
		"a canary's spec.defaultBackend never splits the main's / of a host its rules name": {
			objs: []any{web, web2, web3, main,
				ingress("default", "canary", annotate(AnnotationCanary, "true", AnnotationCanaryWeight, "100"),
					withDefaultBackend("web-v3", 80), rule(host, exact("/api", "web-v2", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: host, Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "main"), Options: mainOpts},
					{Path: "/api", PathType: PathExact, Upstream: web80.Name, Ingress: nn("default", "main"), Options: mainOpts,
						Canary: &LocationCanary{Upstream: v280.Name, Ingress: nn("default", "canary"), Rule: weight(100)}},
				}}},
				Upstreams: modelUpstreams(web80, v280),
			},
		},
		"an older canary never wins the path from the main Ingress": {
			objs: []any{web, web2,
				ingress("default", "canary", annotate(AnnotationCanary, "true", AnnotationCanaryWeight, "100"), rule(host, prefix("/", "web-v2", 80))),
				ingress("default", "main", age(time.Hour), rule(host, prefix("/", "web", 80))),
			},
			want: Model{
				Servers: []Server{catchAll, {Host: host, Locations: []Location{
					{Path: "/", PathType: PathPrefix, Upstream: web80.Name, Ingress: nn("default", "main"),
						Canary: &LocationCanary{Upstream: v280.Name, Ingress: nn("default", "canary"), Rule: weight(100)}},
				}}},
				Upstreams: modelUpstreams(web80, v280),
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, conflicts := buildModel(t, tc.objs, nil)
			same(t, "model", got, tc.want)
			same(t, "conflicts", conflicts, tc.wantConflicts)
			reversed := make([]any, len(tc.objs))
			for i, o := range tc.objs {
				reversed[len(tc.objs)-1-i] = o
			}
			again, _ := buildModel(t, reversed, nil)
			same(t, "model from reversed input", again, got)
			for _, c := range conflicts {
				if !strings.Contains(c.Message(), "canary") {
					t.Errorf("message %q", c.Message())
				}
			}
		})
	}
}

// TestMergeCanaryRegexPaths: a canary copied from a main Ingress with regex paths (use-regex and
// rewrite-target, as Flagger copies every annotation) has the same paths, and is the canary of each.
func TestMergeCanaryRegexPaths(t *testing.T) {
	const host = "regex.example.com"
	specific := func(p, svc string) networkingv1.HTTPIngressPath {
		return path(networkingv1.PathTypeImplementationSpecific, p, svc, 80)
	}
	m, conflicts := buildModel(t, []any{service("default", "web", port(80, "")), service("default", "web-v2", port(80, "")),
		ingress("default", "main", annotate(AnnotationUseRegex, "true", AnnotationRewriteTarget, "/$2"),
			rule(host, specific("/v[0-9]+/items", "web"), specific("/something(/|$)(.*)", "web"))),
		ingress("default", "canary", annotate(AnnotationCanary, "true", AnnotationCanaryWeight, "10", AnnotationUseRegex, "true", AnnotationRewriteTarget, "/$2"),
			rule(host, specific("/v[0-9]+/items", "web-v2"), specific("/something(/|$)(.*)", "web-v2"))),
	}, nil)
	if len(conflicts) != 0 {
		t.Fatalf("conflicts %+v", conflicts)
	}
	s := m.Server(host)
	if s == nil || len(s.Locations) != 2 {
		t.Fatalf("server %+v", s)
	}
	for _, l := range s.Locations {
		if l.Canary == nil || l.Canary.Upstream != up("default", "web-v2", 80).Name || l.Options == nil || l.Options.RewriteTarget != "/$2" {
			t.Errorf("location %s: canary %+v, options %+v; want the canary's upstream and the main's rewrite", l.Path, l.Canary, l.Options)
		}
	}
}

// TestMergeCanaryOnServerAlias: a server-alias host serves the main Ingress's paths, as ingress-nginx's
// aliases were other names of the same server, so the canary splits its requests too; a change of the
// canary's weight reaches the alias host in an incremental merge.
func TestMergeCanaryOnServerAlias(t *testing.T) {
	const host, alias = "app.example.com", "alias.example.com"
	svcs := services{nn("default", "web"): service("default", "web", port(80, "")), nn("default", "web-v2"): service("default", "web-v2", port(80, ""))}
	translate := func(ing *networkingv1.Ingress) *IngressTranslation {
		t.Helper()
		tr, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	main := translate(ingress("default", "main", annotate(AnnotationServerAlias, alias), rule(host, prefix("/", "web", 80))))
	canary := func(weight string) *IngressTranslation {
		return translate(ingress("default", "canary", annotate(AnnotationCanary, "true", AnnotationCanaryWeight, weight), rule(host, prefix("/", "web-v2", 80))))
	}
	check := func(what string, res MergeResult, weight int) {
		t.Helper()
		for _, h := range []Hostname{host, alias} {
			s := res.Model.Server(h)
			if s == nil || len(s.Locations) != 1 || s.Locations[0].Canary == nil || s.Locations[0].Canary.Rule.Weight != weight ||
				s.Locations[0].Canary.Upstream != up("default", "web-v2", 80).Name {
				t.Errorf("%s: host %s: %+v, want the canary at weight %d", what, h, s, weight)
			}
		}
	}
	var m Merger
	check("first merge", m.Merge([]*IngressTranslation{main, canary("10")}, MergeOptions{}), 10)
	check("weight changed", m.Merge([]*IngressTranslation{main, canary("60")}, MergeOptions{}), 60)
	res := m.Merge([]*IngressTranslation{main}, MergeOptions{})
	if s := res.Model.Server(alias); s == nil || s.Locations[0].Canary != nil {
		t.Errorf("canary gone: alias host %+v, want no canary", s)
	}
}
