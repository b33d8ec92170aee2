package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestAnnotationRewrite: the regex and rewrite annotations become the translation's RouteOptions; an
// invalid value rejects the Ingress with a message naming the annotation and the value.
func TestAnnotationRewrite(t *testing.T) {
	const targetWant = " (want a path of letters, digits, -._~/: and captures $0-$9)"
	tests := map[string]struct {
		annotations  []string
		want         *RouteOptions
		wantWarnings []string
		wantErrs     []string
	}{
		"none":                            {},
		"use-regex true, with spaces":     {annotations: []string{AnnotationUseRegex, " true "}, want: &RouteOptions{UseRegex: true}},
		"use-regex false sets nothing":    {annotations: []string{AnnotationUseRegex, "false"}},
		"an empty rewrite-target is none": {annotations: []string{AnnotationRewriteTarget, ""}},
		"rewrite-target with captures and x-forwarded-prefix": {
			annotations: []string{AnnotationRewriteTarget, "/api/$1/$2", AnnotationXForwardedPrefix, "/svc"},
			want:        &RouteOptions{RewriteTarget: "/api/$1/$2", XForwardedPrefix: "/svc"},
		},
		"upstream-vhost with a port, trimmed": {
			annotations: []string{AnnotationUpstreamVhost, " backend.internal:8080 "},
			want:        &RouteOptions{UpstreamVhost: "backend.internal:8080"},
		},
		"x-forwarded-prefix without rewrite-target has no effect, and says so": {
			annotations: []string{AnnotationXForwardedPrefix, "/svc"},
			wantWarnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/x-forwarded-prefix]: has no effect without " +
				"nginx.ingress.kubernetes.io/rewrite-target (the header goes with rewritten requests only, as in ingress-nginx)"},
		},
		"invalid values are named, quoted and cut": {
			annotations: []string{
				AnnotationUseRegex, "yes",
				AnnotationRewriteTarget, "/$host",
				AnnotationXForwardedPrefix, "/a b",
				AnnotationUpstreamVhost, "$service_name.$namespace.svc",
			},
			wantErrs: []string{
				`metadata.annotations[nginx.ingress.kubernetes.io/use-regex]: "yes" is not a boolean (want "true" or "false")`,
				`metadata.annotations[nginx.ingress.kubernetes.io/rewrite-target]: "/$host" has a $ that is not a capture $0-$9 (NGINX variables are not supported)` + targetWant,
				`metadata.annotations[nginx.ingress.kubernetes.io/x-forwarded-prefix]: "/a b" is not allowed (want letters, digits and -._~/:)`,
				`metadata.annotations[nginx.ingress.kubernetes.io/upstream-vhost]: "$service_name.$namespace.svc" is not a host name: NGINX variables are not supported`,
			},
		},
		"injection attempts": {
			annotations: []string{AnnotationRewriteTarget, "/x; return 200 \"\n", AnnotationUpstreamVhost, "a.example.com\"; x"},
			wantErrs: []string{
				`metadata.annotations[nginx.ingress.kubernetes.io/rewrite-target]: "/x; return 200 \"\n" has a character that is not allowed` + targetWant,
				`metadata.annotations[nginx.ingress.kubernetes.io/upstream-vhost]: "a.example.com\"; x" is not a host name (want letters, digits, '-' and '.', optionally with :port)`,
			},
		},
		"a bad port": {
			annotations: []string{AnnotationUpstreamVhost, "a.example.com:0"},
			wantErrs:    []string{`metadata.annotations[nginx.ingress.kubernetes.io/upstream-vhost]: "a.example.com:0" has an invalid port (want host or host:port with a port in 1-65535)`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.annotations...)
			same(t, "rejection", errs, tc.wantErrs)
			if got == nil {
				return
			}
			same(t, "options", got.Options, tc.want)
			same(t, "warnings", got.Warnings, tc.wantWarnings)
		})
	}
}

// TestRegexPaths: which paths become regexes, and the refusals of what RE2 and PCRE read differently.
func TestRegexPaths(t *testing.T) {
	svcs := servicesOf(service("default", "web", port(80, "")))
	tests := map[string]struct {
		opts      ingressOption
		paths     []string // ImplementationSpecific
		wantRegex []bool
		wantErr   string
	}{
		"use-regex: every path": {
			opts: annotate(AnnotationUseRegex, "true"), paths: []string{"/a/(.*)", "/b/"}, wantRegex: []bool{true, true},
		},
		"rewrite-target: every path but the target's own": {
			opts: annotate(AnnotationRewriteTarget, "/"), paths: []string{"/", "/x"}, wantRegex: []bool{false, true},
		},
		"without the annotations regex characters are refused": {
			opts: annotate(), paths: []string{"/a[0-9]"}, wantErr: `character "[" is not allowed`,
		},
		`\p`:                   {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/\pL`}, wantErr: `\p (Unicode classes)`},
		`\s`:                   {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/a\sb`}, wantErr: `\s differs between RE2 and PCRE`},
		`\x`:                   {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/\x41`}, wantErr: `\x escapes are not supported`},
		"back-reference":       {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/(a)\1`}, wantErr: `\1 is an octal escape for RE2 and a back-reference for PCRE`},
		"(?m)":                 {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/(?m)a$`}, wantErr: `the multi-line flag (?m)`},
		"{,n}":                 {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/a{,3}`}, wantErr: `"{," is a literal for RE2`},
		"[[:ascii:]]":          {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/[[:ascii:]]`}, wantErr: `tells DEL (0x7f) from bytes above it`},
		"empty repeated group": {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/(a*)*`}, wantErr: `repeated group that can match the empty string`},
		"lookahead (not RE2)":  {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/(?=a)`}, wantErr: `not a regular expression that Go's regexp (RE2) accepts`},
		"space":                {opts: annotate(AnnotationUseRegex, "true"), paths: []string{`/a b`}, wantErr: `character ' ' (space) is not allowed in a regular expression path`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var ps []networkingv1.HTTPIngressPath
			for _, p := range tc.paths {
				ps = append(ps, specific(p, "web", 80))
			}
			ing := ingress("default", "a", rule("a.example.com", ps...), tc.opts)
			got, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.wantRegex {
				if (got.Routes[i].Regex != nil) != want {
					t.Errorf("path %s: regex %v, want %v", got.Routes[i].Path, got.Routes[i].Regex != nil, want)
				}
			}
		})
	}
}

// TestPathRegexAgreesWithPCRE runs patterns and request paths through real NGINX (each pattern the regex
// path of its own host, rewritten to show the captures) and through the Go model: the backend must see
// what the model says, or both must find no match.
func TestPathRegexAgreesWithPCRE(t *testing.T) {
	patterns := []string{
		`/a(.*)`, `/(.+?)(b*)`, `/x(a|ab)(c|bcd)(d*)`, `/[^/]+/(\d+)`, `/(\w+)\b`, `/(?i:K)(.)`, `/(?-i:Case)(.?)`, `/(.)\B(.)`,
		`/u(?U)(a+)(a*)`, `/s(?s:(.))`, `/e(a{2,3})(a{0,1})`, `/\Q.*\E(.*)`, `/([[:alpha:]]+)([[:punct:]]?)`, `/opt/?(x)?`,
		`/(?:ab|a)(b?)`, `/end$`, `/([^a])`, `/(\W)(\D)`, `/z+(z*)`, `/v[0-9]+/(.*)$`,
	}
	subjects := []string{
		"/a", "/abc", "/x/abcd", "/xabcd", "/12/345", "/k%C3%A9", "/K%E2%84%AA", "/%E2%84%AAx", "/caseX", "/CASEx", "/ab",
		"/uaaa", "/s%0A", "/eaaaa", "/.*x", "/abc!", "/opt", "/optx", "/opt/x", "/end", "/end%0A", "/%C3%A9%C3", "/%7F",
		"/zzz", "/v12/x/y", "/%FF%FE", "/-5",
	}
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	applyModel(t, rt, Model{}, cfg)
	backend := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.RequestURI+" "+r.Host+" "+r.Header.Get("X-Forwarded-Prefix"))
	})
	up := NewUpstream(types.NamespacedName{Namespace: "default", Name: "web"}, intstr.FromInt32(80))
	m := Model{Servers: []Server{{Host: ""}}, Upstreams: []*Upstream{&up}}
	opts := &RouteOptions{RewriteTarget: "/~$0~$1~$2~$3", XForwardedPrefix: "/pre", UpstreamVhost: "vhost.internal:81"}
	for i, p := range patterns {
		re, err := CompilePathRegex(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		m.Servers = append(m.Servers, Server{Host: Hostname(fmt.Sprintf("p%02d.example.com", i)),
			Locations: []Location{{Path: p, PathType: PathPrefix, Upstream: up.Name, Options: opts, Regex: re}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Client().ReplaceEndpoints(ctx, map[UpstreamName][]Endpoint{up.Name: {backend}}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Client().ReplaceRoutes(ctx, routeTable(&m)); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	matched := 0
	for i, p := range patterns {
		host := fmt.Sprintf("p%02d.example.com", i)
		for _, subject := range subjects {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, subject), nil)
			req.Host = host
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got := fmt.Sprintf("%d %s", resp.StatusCode, body)
			r := m.Route(host, normalizePath(req.URL.Path))
			want := "404 "
			if r.Location != nil {
				want = "200 " + escapeAsNginx(r.Rewritten) + " vhost.internal:81 /pre"
				matched++
			}
			if resp.StatusCode == http.StatusNotFound {
				got = "404 "
			}
			if got != want {
				t.Errorf("pattern %s, path %s: NGINX gives %q, the model %q (PCRE %s)", p, subject, got, want, m.Servers[1+i].Locations[0].Regex.PCRE)
			}
		}
	}
	t.Logf("%d of %d requests matched", matched, len(patterns)*len(subjects))
	if matched == 0 {
		t.Error("no request matched: the test compares nothing")
	}
}
