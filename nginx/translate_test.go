package nginx

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// same fails the test with both values as JSON when they differ.
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("%s differs\n got: %s\nwant: %s", what, g, w)
	}
}

func TestTranslateIngress(t *testing.T) {
	svcs := servicesOf(
		service("default", "web", port(80, "http"), port(8443, "https")),
		service("default", "api", port(8080, "")),
		&corev1.Service{ObjectMeta: service("default", "ext").ObjectMeta, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.net"}},
	)
	web80, webHTTP, api8080 := up("default", "web", 80), up("default", "web", "http"), up("default", "api", 8080)
	webV := ServiceVersion{Key: nn("default", "web"), ResourceVersion: "1"}
	apiV := ServiceVersion{Key: nn("default", "api"), ResourceVersion: "1"}

	type want struct {
		Routes    []Route
		Upstreams []Upstream
		TLS       []TLSHost
		Services  []ServiceVersion
		Warnings  []string
	}
	tests := map[string]struct {
		ing  *networkingv1.Ingress
		want want
	}{
		"prefix and exact paths, ports by number and by name": {
			ing: ingress("default", "a", rule("foo.example.com",
				prefix("/api", "api", 8080),
				exact("/login", "web", "http"),
				prefix("/", "web", 80),
			)),
			want: want{
				Routes: []Route{
					{Host: "foo.example.com", Path: "/api", PathType: PathPrefix, Upstream: api8080.Name},
					{Host: "foo.example.com", Path: "/login", PathType: PathExact, Upstream: webHTTP.Name},
					{Host: "foo.example.com", Path: "/", PathType: PathPrefix, Upstream: web80.Name},
				},
				Upstreams: sortedUpstreams(api8080, webHTTP, web80),
				Services:  []ServiceVersion{apiV, webV},
			},
		},
		"ImplementationSpecific is Prefix and a Prefix trailing slash is dropped": {
			ing: ingress("default", "a", rule("foo.example.com",
				path(networkingv1.PathTypeImplementationSpecific, "/docs/", "web", 80),
				prefix("/static/", "web", 80),
				exact("/exact/", "web", 80),
			)),
			want: want{
				Routes: []Route{
					{Host: "foo.example.com", Path: "/docs", PathType: PathPrefix, Upstream: web80.Name},
					{Host: "foo.example.com", Path: "/static", PathType: PathPrefix, Upstream: web80.Name},
					{Host: "foo.example.com", Path: "/exact/", PathType: PathExact, Upstream: web80.Name},
				},
				Upstreams: []Upstream{web80},
				Services:  []ServiceVersion{webV},
			},
		},
		"empty ImplementationSpecific path and missing pathType mean everything": {
			ing: ingress("default", "a", rule("foo.example.com",
				networkingv1.HTTPIngressPath{Backend: backend("web", 80)},
			)),
			want: want{
				Routes:    []Route{{Host: "foo.example.com", Path: "/", PathType: PathPrefix, Upstream: web80.Name}},
				Upstreams: []Upstream{web80},
				Services:  []ServiceVersion{webV},
			},
		},
		"a rule without host is served by the catch-all server": {
			ing: ingress("default", "a", rule("", prefix("/", "web", 80))),
			want: want{
				Routes:    []Route{{Host: "", Path: "/", PathType: PathPrefix, Upstream: web80.Name}},
				Upstreams: []Upstream{web80},
				Services:  []ServiceVersion{webV},
			},
		},
		"wildcard host": {
			ing: ingress("default", "a", rule("*.example.com", prefix("/", "web", 80))),
			want: want{
				Routes:    []Route{{Host: "*.example.com", Path: "/", PathType: PathPrefix, Upstream: web80.Name}},
				Upstreams: []Upstream{web80},
				Services:  []ServiceVersion{webV},
			},
		},
		"a missing Service is a warning and the path stays (503 until it exists)": {
			ing: ingress("default", "a", rule("foo.example.com", prefix("/", "nope", "http"))),
			want: want{
				Routes:    []Route{{Host: "foo.example.com", Path: "/", PathType: PathPrefix, Upstream: up("default", "nope", "http").Name}},
				Upstreams: []Upstream{up("default", "nope", "http")},
				Services:  []ServiceVersion{{Key: nn("default", "nope")}},
				Warnings:  []string{`spec.rules[0].http.paths[0].backend: service default/nope does not exist; requests get 503 until it does`},
			},
		},
		"ExternalName Service without ports takes the Ingress's port": {
			ing: ingress("default", "a", rule("foo.example.com", prefix("/", "ext", 443))),
			want: want{
				Routes:    []Route{{Host: "foo.example.com", Path: "/", PathType: PathPrefix, Upstream: up("default", "ext", 443).Name}},
				Upstreams: []Upstream{up("default", "ext", 443)},
				Services:  []ServiceVersion{{Key: nn("default", "ext"), ResourceVersion: "1"}},
			},
		},
		"spec.defaultBackend becomes / of every host that lacks it": {
			ing: ingress("default", "a",
				withDefaultBackend("web", 80),
				rule("a.example.com", prefix("/api", "api", 8080)),
				rule("b.example.com", prefix("/", "api", 8080)),
				rule("c.example.com"),
			),
			want: want{
				Routes: []Route{
					{Host: "a.example.com", Path: "/api", PathType: PathPrefix, Upstream: api8080.Name},
					{Host: "b.example.com", Path: "/", PathType: PathPrefix, Upstream: api8080.Name},
					{Host: "a.example.com", Path: "/", PathType: PathPrefix, Upstream: web80.Name, FromDefaultBackend: true},
					{Host: "c.example.com", Path: "/", PathType: PathPrefix, Upstream: web80.Name, FromDefaultBackend: true},
				},
				Upstreams: sortedUpstreams(api8080, web80),
				Services:  []ServiceVersion{apiV, webV},
			},
		},
		"spec.defaultBackend without rules becomes / of the catch-all server": {
			ing: ingress("default", "a", withDefaultBackend("web", "http")),
			want: want{
				Routes:    []Route{{Host: "", Path: "/", PathType: PathPrefix, Upstream: webHTTP.Name, FromDefaultBackend: true}},
				Upstreams: []Upstream{webHTTP},
				Services:  []ServiceVersion{webV},
			},
		},
		"tls: listed hosts, all rule hosts when none are listed, default certificate without secretName": {
			ing: ingress("default", "a",
				rule("a.example.com", prefix("/", "web", 80)),
				rule("b.example.com", prefix("/", "web", 80)),
				rule("", prefix("/", "web", 80)),
				withTLS("a-cert", "a.example.com", "*.example.com"),
				withTLS("all-cert"),
				withTLS("", "c.example.com"),
			),
			want: want{
				Routes: []Route{
					{Host: "a.example.com", Path: "/", PathType: PathPrefix, Upstream: web80.Name},
					{Host: "b.example.com", Path: "/", PathType: PathPrefix, Upstream: web80.Name},
					{Host: "", Path: "/", PathType: PathPrefix, Upstream: web80.Name},
				},
				Upstreams: []Upstream{web80},
				TLS: []TLSHost{
					{Host: "a.example.com", ServerTLS: ServerTLS{Secret: nn("default", "a-cert"), SSLRedirect: true}},
					{Host: "*.example.com", ServerTLS: ServerTLS{Secret: nn("default", "a-cert"), SSLRedirect: true}},
					{Host: "b.example.com", ServerTLS: ServerTLS{Secret: nn("default", "all-cert"), SSLRedirect: true}},
					{Host: "c.example.com", ServerTLS: ServerTLS{SSLRedirect: true}},
				},
				Services: []ServiceVersion{webV},
				Warnings: []string{`spec.tls: host a.example.com is listed with secrets "a-cert" and "all-cert"; the first one is used`},
			},
		},
		"a path listed twice: the first wins, a warning only when the backends differ": {
			ing: ingress("default", "a",
				rule("foo.example.com", prefix("/a", "web", 80), prefix("/a/", "web", 80), exact("/b", "web", 80)),
				rule("foo.example.com", exact("/b", "api", 8080)),
			),
			want: want{
				Routes: []Route{
					{Host: "foo.example.com", Path: "/a", PathType: PathPrefix, Upstream: web80.Name},
					{Host: "foo.example.com", Path: "/b", PathType: PathExact, Upstream: web80.Name},
				},
				Upstreams: sortedUpstreams(api8080, web80),
				Services:  []ServiceVersion{webV, apiV},
				Warnings:  []string{`spec.rules[1].http.paths[0]: path "/b" (Exact) on host foo.example.com is listed twice with different backends; the first one is used`},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := TranslateIngress(tc.ing, svcs, DefaultTranslateOptions())
			if err != nil {
				t.Fatalf("unexpected rejection: %v", err)
			}
			same(t, "translation", want{got.Routes, got.Upstreams, got.TLS, got.Services, got.Warnings}, tc.want)
			if got.Ingress != nn(tc.ing.Namespace, tc.ing.Name) || got.UID != tc.ing.UID || got.ResourceVersion != "1" || !got.SSLRedirect {
				t.Errorf("identity fields: %v %v %v %v", got.Ingress, got.UID, got.ResourceVersion, got.SSLRedirect)
			}
		})
	}
}

func sortedUpstreams(us ...Upstream) []Upstream {
	us = slices.Clone(us)
	slices.SortFunc(us, func(a, b Upstream) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return us
}

// modelUpstreams is a model's Upstreams list of us: sorted by name, each upstream allocated anew.
func modelUpstreams(us ...Upstream) []*Upstream {
	out := make([]*Upstream, len(us))
	for i, u := range sortedUpstreams(us...) {
		out[i] = &u
	}
	return out
}

func TestTranslateIngressRejects(t *testing.T) {
	svcs := servicesOf(service("default", "web", port(80, "http")),
		service("default", "dns", corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}))
	tests := map[string]struct {
		ing     *networkingv1.Ingress
		wantErr []string
	}{
		"upper-case host": {
			ing:     ingress("default", "a", rule("Foo.example.com", prefix("/", "web", 80))),
			wantErr: []string{`spec.rules[0].host: host "Foo.example.com": upper-case character "F"`},
		},
		"host with a semicolon (config injection)": {
			ing:     ingress("default", "a", rule("a.com;include /etc/passwd", prefix("/", "web", 80))),
			wantErr: []string{`spec.rules[0].host: host "a.com;include /etc/passwd": character ";" is not allowed`},
		},
		"host with a newline": {
			ing:     ingress("default", "a", rule("a.com\nserver_name evil", prefix("/", "web", 80))),
			wantErr: []string{`spec.rules[0].host: host "a.com\nserver_name evil": character 0x0a (control character) is not allowed`},
		},
		"host with a variable": {
			ing:     ingress("default", "a", rule("$host.example.com", prefix("/", "web", 80))),
			wantErr: []string{`character "$" is not allowed`},
		},
		"host with a brace": {
			ing:     ingress("default", "a", rule("a}.example.com", prefix("/", "web", 80))),
			wantErr: []string{`character "}" is not allowed`},
		},
		"host that is an IP address": {
			ing:     ingress("default", "a", rule("10.0.0.1", prefix("/", "web", 80))),
			wantErr: []string{`host "10.0.0.1" must be a DNS name, not an IP address`},
		},
		"wildcard in the middle": {
			ing:     ingress("default", "a", rule("a.*.example.com", prefix("/", "web", 80))),
			wantErr: []string{`host "a.*.example.com": character "*" is not allowed`},
		},
		"path without leading slash": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("api", "web", 80))),
			wantErr: []string{`spec.rules[0].http.paths[0].path: path "api" must start with '/'`},
		},
		"path that closes the location block": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/a}location /x{", "web", 80))),
			wantErr: []string{`path "/a}location /x{": character "}" is not allowed`},
		},
		"path with a semicolon": {
			ing:     ingress("default", "a", rule("a.example.com", exact("/a;return 200", "web", 80))),
			wantErr: []string{`character ";" is not allowed`},
		},
		"path with a newline": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/a\n", "web", 80))),
			wantErr: []string{`character 0x0a (control character) is not allowed`},
		},
		"path with a space": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/a b", "web", 80))),
			wantErr: []string{`character ' ' (space) is not allowed`},
		},
		"path with a variable": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/$uri", "web", 80))),
			wantErr: []string{`character "$" is not allowed`},
		},
		"path with a double quote": {
			ing:     ingress("default", "a", rule("a.example.com", prefix(`/a"b`, "web", 80))),
			wantErr: []string{`character "\"" is not allowed`},
		},
		"path with a single quote": {
			ing:     ingress("default", "a", rule("a.example.com", prefix(`/a'b`, "web", 80))),
			wantErr: []string{`character "'" is not allowed`},
		},
		"path with a hash": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/a#b", "web", 80))),
			wantErr: []string{`character "#" is not allowed`},
		},
		"path with a backslash": {
			ing:     ingress("default", "a", rule("a.example.com", prefix(`/a\b`, "web", 80))),
			wantErr: []string{`character "\\" is not allowed`},
		},
		"regular expression path": {
			ing:     ingress("default", "a", rule("a.example.com", path(networkingv1.PathTypeImplementationSpecific, "/api/(.*)?", "web", 80))),
			wantErr: []string{`character "?" is not allowed`, "regular expressions need the use-regex annotation and pathType ImplementationSpecific"},
		},
		"percent-encoded path": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/a%20b", "web", 80))),
			wantErr: []string{`character "%" is not allowed`},
		},
		"path with a dot segment": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/a/../etc", "web", 80))),
			wantErr: []string{`must not contain "/../"`},
		},
		"path with non-ASCII": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/café", "web", 80))),
			wantErr: []string{`character 0xc3 (non-ASCII) is not allowed`},
		},
		"unknown path type": {
			ing:     ingress("default", "a", rule("a.example.com", path("Regex", "/a", "web", 80))),
			wantErr: []string{`spec.rules[0].http.paths[0].pathType "Regex" is not supported`},
		},
		"resource backend": {
			ing: ingress("default", "a", rule("a.example.com", networkingv1.HTTPIngressPath{
				Path: "/", PathType: ptr(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "StorageBucket", Name: "static"}},
			})),
			wantErr: []string{`spec.rules[0].http.paths[0].backend: resource backends (StorageBucket "static") are not supported; use a Service backend`},
		},
		"port number the Service does not have": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/", "web", 8080))),
			wantErr: []string{`spec.rules[0].http.paths[0].backend: service default/web has no TCP port 8080 (its ports: 80 ("http"))`},
		},
		"port name the Service does not have": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/", "web", "grpc"))),
			wantErr: []string{`service default/web has no TCP port named "grpc"`},
		},
		"no port at all": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/", "web", nil))),
			wantErr: []string{`.service.port: want a port name or a number between 1 and 65535, got 0`},
		},
		"port that exists only for UDP": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/", "dns", 53))),
			wantErr: []string{`service default/dns has no TCP port 53 (its ports: 53/UDP ("dns"))`},
		},
		"bad spec.defaultBackend": {
			ing:     ingress("default", "a", withDefaultBackend("web", 81)),
			wantErr: []string{`spec.defaultBackend: service default/web has no TCP port 81`},
		},
		"bad tls host": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), withTLS("cert", "a.example.com", "b.example.com;")),
			wantErr: []string{`spec.tls[0].hosts[1]: host "b.example.com;"`},
		},
		"several errors are all reported, up to a limit": {
			ing: ingress("default", "a", rule("a.example.com",
				prefix("a", "web", 80), prefix("b", "web", 80), prefix("c", "web", 80),
				prefix("d", "web", 80), prefix("e", "web", 80), prefix("f", "web", 80), prefix("g", "web", 80),
			)),
			wantErr: []string{`paths[0].path: path "a"`, `paths[4].path: path "e"`, "and 2 more errors"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := TranslateIngress(tc.ing, svcs, DefaultTranslateOptions())
			if err == nil {
				t.Fatalf("accepted, want rejection; got %+v", got)
			}
			if !strings.HasPrefix(err.Error(), "ingress default/a rejected: ") {
				t.Errorf("error %q does not name the Ingress", err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestUpstreamNames(t *testing.T) {
	tests := map[string]struct {
		a, b Upstream
	}{
		"dashes in namespace and service": {up("a-b", "c", 80), up("a", "b-c", 80)},
		"port name and number":            {up("a", "b", 80), up("a", "b", "80")},
		"different ports":                 {up("a", "b", 80), up("a", "b", 81)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.a.Name == tc.b.Name {
				t.Errorf("both are %q", tc.a.Name)
			}
			for _, n := range []UpstreamName{tc.a.Name, tc.b.Name} {
				if !ValidUpstreamName(string(n)) {
					t.Errorf("%q is not a valid upstream name", n)
				}
			}
		})
	}
	if got, again := up("default", "web", 80).Name, up("default", "web", 80).Name; got != again || !strings.HasPrefix(string(got), "default-web-80-") {
		t.Errorf("name %q (again %q) is not stable and readable", got, again)
	}
	if n := NewUpstream(nn("Bad_NS", "svc"), up("a", "b", 1).Port).Name; !ValidUpstreamName(string(n)) {
		t.Errorf("hand-made names must still be sanitized, got %q", n)
	}
}

// TestTranslateOptionsRefuse: --disable-catch-all and --disable-svc-external-name reject the Ingresses they
// concern, naming the flag; without the options the same Ingresses translate.
func TestTranslateOptionsRefuse(t *testing.T) {
	svcs := servicesOf(service("default", "web", port(80, "http")),
		&corev1.Service{ObjectMeta: service("default", "ext").ObjectMeta, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.net"}})
	tests := map[string]struct {
		ing     *networkingv1.Ingress
		opts    TranslateOptions
		wantErr string
	}{
		"catch-all": {
			ing:     ingress("default", "a", withDefaultBackend("web", 80)),
			opts:    TranslateOptions{DisableCatchAll: true},
			wantErr: "spec.defaultBackend: catch-all Ingresses are refused by --disable-catch-all",
		},
		"default backend beside rules": {
			ing:     ingress("default", "a", withDefaultBackend("web", 80), rule("a.example.com", prefix("/", "web", 80))),
			opts:    TranslateOptions{DisableCatchAll: true},
			wantErr: "--disable-catch-all",
		},
		"ExternalName backend": {
			ing:     ingress("default", "a", rule("a.example.com", prefix("/", "ext", 443))),
			opts:    TranslateOptions{DisableExternalName: true},
			wantErr: "spec.rules[0].http.paths[0].backend: service default/ext is of type ExternalName, which --disable-svc-external-name refuses",
		},
		"rules without default backend": {
			ing:  ingress("default", "a", rule("a.example.com", prefix("/", "web", 80))),
			opts: TranslateOptions{DisableCatchAll: true, DisableExternalName: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := TranslateIngress(tc.ing, svcs, tc.opts)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
			}
			if _, err := TranslateIngress(tc.ing, svcs, TranslateOptions{}); err != nil {
				t.Errorf("without the option: %v", err)
			}
		})
	}
}

// TestForceSSLRedirectDefault: the ConfigMap's force-ssl-redirect applies to Ingresses without the
// annotation; the annotation overrides it either way.
func TestForceSSLRedirectDefault(t *testing.T) {
	svcs := servicesOf(service("default", "web", port(80, "http")))
	for name, tc := range map[string]struct {
		def        bool
		annotation []string
		want       bool
	}{
		"default off":                       {},
		"ConfigMap on":                      {def: true, want: true},
		"ConfigMap on, annotation false":    {def: true, annotation: []string{AnnotationForceSSLRedirect, "false"}},
		"ConfigMap off, annotation true":    {annotation: []string{AnnotationForceSSLRedirect, "true"}, want: true},
		"ConfigMap on, annotation true too": {def: true, annotation: []string{AnnotationForceSSLRedirect, "true"}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(tc.annotation...))
			tr, err := TranslateIngress(ing, svcs, TranslateOptions{SSLRedirect: true, ForceSSLRedirect: tc.def})
			if err != nil {
				t.Fatal(err)
			}
			if got := tr.Options != nil && tr.Options.ForceSSLRedirect; got != tc.want {
				t.Errorf("force-ssl-redirect %v, want %v", got, tc.want)
			}
		})
	}
}
