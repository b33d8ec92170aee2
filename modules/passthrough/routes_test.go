package passthrough

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/tlsproxy"
)

// passthrough is the annotation that asks for TLS passthrough.
func passthrough() gen.MetaOption { return gen.Annotations(AnnotationSSLPassthrough, "true") }

// rule adds a rule for host whose paths are "path=service:port" (port a number or a name), without a
// path type. Unlike gen.Rule it always adds a rule of its own: the tables need a host twice and rules
// without paths, in the order written.
func rule(host string, paths ...string) gen.IngressFunc {
	return func(ing *networkingv1.Ingress) {
		r := networkingv1.IngressRule{Host: host}
		if len(paths) > 0 {
			r.HTTP = &networkingv1.HTTPIngressRuleValue{}
			for _, p := range paths {
				path, backend, _ := strings.Cut(p, "=")
				r.HTTP.Paths = append(r.HTTP.Paths, networkingv1.HTTPIngressPath{Path: path, Backend: serviceBackend(backend)})
			}
		}
		ing.Spec.Rules = append(ing.Spec.Rules, r)
	}
}

// serviceBackend is gen.Backend of "service:port".
func serviceBackend(s string) networkingv1.IngressBackend {
	svc, port, _ := strings.Cut(s, ":")
	if n := intstr.Parse(port); n.Type == intstr.Int {
		return gen.Backend(svc, int(n.IntVal))
	}
	return gen.Backend(svc, port)
}

func upstream(svc string, port intstr.IntOrString) nginx.Upstream {
	return nginx.NewUpstream(types.NamespacedName{Namespace: "ns", Name: svc}, port)
}

func TestRoutesOf(t *testing.T) {
	tests := map[string]struct {
		ing          *networkingv1.Ingress
		wantEnabled  bool
		want         []HostRoute
		wantProblems []string // substrings, one per problem
	}{
		"no annotation": {
			ing: gen.Ingress("ns", "a", rule("a.example.com", "/=web:443")),
		},
		"a canary is never passed through": {
			ing:          gen.Ingress("ns", "a", gen.Annotations(AnnotationSSLPassthrough, "true", nginx.AnnotationCanary, "true"), rule("a.example.com", "/=web:443")),
			wantProblems: []string{"ignored on a canary Ingress"},
		},
		"annotation false": {
			ing: gen.Ingress("ns", "a", gen.Annotations(AnnotationSSLPassthrough, "false"), rule("a.example.com", "/=web:443")),
		},
		"exact and wildcard hosts, numbered and named ports": {
			ing:         gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/=web:443"), rule("*.apps.example.com", "/=apps:https")),
			wantEnabled: true,
			want: []HostRoute{
				{Host: "a.example.com", Upstream: upstream("web", intstr.FromInt32(443))},
				{Host: "*.apps.example.com", Upstream: upstream("apps", intstr.FromString("https"))},
			},
		},
		"the / path wins over the first path": {
			ing:         gen.Ingress("ns", "a", gen.Annotations(AnnotationSSLPassthrough, "True"), rule("a.example.com", "/api=api:443", "/=web:443")),
			wantEnabled: true,
			want:        []HostRoute{{Host: "a.example.com", Upstream: upstream("web", intstr.FromInt32(443))}},
		},
		"without /, the first path": {
			ing:         gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/api=api:443", "/b=b:443")),
			wantEnabled: true,
			want:        []HostRoute{{Host: "a.example.com", Upstream: upstream("api", intstr.FromInt32(443))}},
		},
		"a rule without paths uses the default backend": {
			ing:         gen.Ingress("ns", "a", passthrough(), gen.DefaultBackend(serviceBackend("web:8443")), rule("a.example.com")),
			wantEnabled: true,
			want:        []HostRoute{{Host: "a.example.com", Upstream: upstream("web", intstr.FromInt32(8443))}},
		},
		"a host twice: the first rule wins": {
			ing:         gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/=one:443"), rule("a.example.com", "/=two:443")),
			wantEnabled: true,
			want:        []HostRoute{{Host: "a.example.com", Upstream: upstream("one", intstr.FromInt32(443))}},
		},
		"PROXY protocol v2": {
			ing:         gen.Ingress("ns", "a", passthrough(), gen.Annotations(AnnotationProxyProtocol, "v2"), rule("a.example.com", "/=web:443")),
			wantEnabled: true,
			want:        []HostRoute{{Host: "a.example.com", Upstream: upstream("web", intstr.FromInt32(443)), ProxyProtocol: tlsproxy.ProxyProtocolV2}},
		},
		"PROXY protocol v1": {
			ing:         gen.Ingress("ns", "a", passthrough(), gen.Annotations(AnnotationProxyProtocol, "v1"), rule("a.example.com", "/=web:443")),
			wantEnabled: true,
			want:        []HostRoute{{Host: "a.example.com", Upstream: upstream("web", intstr.FromInt32(443)), ProxyProtocol: tlsproxy.ProxyProtocolV1}},
		},
		"invalid passthrough value": {
			ing:          gen.Ingress("ns", "a", gen.Annotations(AnnotationSSLPassthrough, "yes please"), rule("a.example.com", "/=web:443")),
			wantProblems: []string{`invalid value "yes please"`},
		},
		"invalid PROXY protocol value": {
			ing:          gen.Ingress("ns", "a", passthrough(), gen.Annotations(AnnotationProxyProtocol, "v3"), rule("a.example.com", "/=web:443")),
			wantProblems: []string{`invalid value "v3"`},
		},
		"rules that cannot be passed through are reported, the others kept": {
			ing: gen.Ingress("ns", "a", passthrough(),
				rule("", "/=web:443"),
				rule("UPPER.example.com", "/=web:443"),
				rule("nobackend.example.com"),
				rule("ok.example.com", "/=web:443")),
			wantEnabled:  true,
			want:         []HostRoute{{Host: "ok.example.com", Upstream: upstream("web", intstr.FromInt32(443))}},
			wantProblems: []string{"rule 1 has no host", "upper-case", "nobackend.example.com: no backend"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, enabled, problems := RoutesOf(tc.ing)
			if enabled != tc.wantEnabled {
				t.Errorf("enabled = %v, want %v", enabled, tc.wantEnabled)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("routes = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("route %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			if len(problems) != len(tc.wantProblems) {
				t.Fatalf("problems = %q, want %d matching %q", problems, len(tc.wantProblems), tc.wantProblems)
			}
			for i, p := range problems {
				if !strings.Contains(p, tc.wantProblems[i]) {
					t.Errorf("problem %d = %q, want it to mention %q", i, p, tc.wantProblems[i])
				}
			}
		})
	}
}

// TestRoutesOfResourceBackend: a rule whose backend is not a Service is reported and skipped.
func TestRoutesOfResourceBackend(t *testing.T) {
	ing := gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/=web:443"))
	ing.Spec.Rules[0].HTTP.Paths[0].Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "assets"}}
	routes, enabled, problems := RoutesOf(ing)
	if !enabled || len(routes) != 0 || len(problems) != 1 || !strings.Contains(problems[0], "resource backends") {
		t.Errorf("got %v, %v, %q; want enabled, no route, one problem about the backend", routes, enabled, problems)
	}
}

// TestBackendShapesNameOneUpstream: for every shape of backend, the upstream NGINX routes a host to (the
// translation), the one the endpoint lane fills (nginx.UpstreamsOf, which modules/endpoints watches) and
// the one the passthrough table sends the host to are the same, and a backend that cannot be an upstream
// is one for none of them.
func TestBackendShapesNameOneUpstream(t *testing.T) {
	web := gen.Service("ns", "web", gen.Port("https", 443), gen.UDPPort("quic", 443))
	lookup := nginx.ServiceLookupFunc(func(k types.NamespacedName) (*corev1.Service, bool) {
		return web, k == types.NamespacedName{Namespace: "ns", Name: "web"}
	})
	resource := gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/=web:443"))
	resource.Spec.Rules[0].HTTP.Paths[0].Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "assets"}}
	tests := map[string]struct {
		ing  *networkingv1.Ingress
		want *nginx.Upstream // nil: no upstream anywhere
	}{
		"numbered port": {ing: gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/=web:443")), want: ptr(upstream("web", intstr.FromInt32(443)))},
		"named port":    {ing: gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/=web:https")), want: ptr(upstream("web", intstr.FromString("https")))},
		"default backend": {
			ing:  gen.Ingress("ns", "a", passthrough(), rule("a.example.com"), gen.DefaultBackend(serviceBackend("web:443"))),
			want: ptr(upstream("web", intstr.FromInt32(443))),
		},
		"resource backend": {ing: resource},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var routed []nginx.Upstream
			if tr, err := nginx.TranslateIngress(tc.ing, lookup, nginx.DefaultTranslateOptions()); err == nil {
				for _, r := range tr.Routes {
					if r.Host == "a.example.com" && r.Path == "/" {
						i := slices.IndexFunc(tr.Upstreams, func(u nginx.Upstream) bool { return u.Name == r.Upstream })
						routed = append(routed, tr.Upstreams[i])
					}
				}
			}
			endpointLane := nginx.UpstreamsOf(tc.ing)
			var passedThrough []nginx.Upstream
			routes, _, _ := RoutesOf(tc.ing)
			for _, r := range routes {
				passedThrough = append(passedThrough, r.Upstream)
			}
			var want []nginx.Upstream
			if tc.want != nil {
				want = []nginx.Upstream{*tc.want}
			}
			for consumer, got := range map[string][]nginx.Upstream{"NGINX": routed, "endpoint lane": endpointLane, "passthrough": passedThrough} {
				if !slices.Equal(got, want) {
					t.Errorf("%s upstreams = %+v, want %+v", consumer, got, want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
