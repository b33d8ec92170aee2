package nginx

import (
	"cmp"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestBackendUpstream(t *testing.T) {
	tests := map[string]struct {
		b         networkingv1.IngressBackend
		want      Upstream
		wantField string // the field at fault; "-" for no error
		wantErr   string
	}{
		"numbered port": {b: backend("web", 80), want: up("ns", "web", 80), wantField: "-"},
		"named port":    {b: backend("web", "http"), want: up("ns", "web", "http"), wantField: "-"},
		"resource": {
			b:       networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "assets"}},
			wantErr: `resource backends (Bucket "assets") are not supported; use a Service backend`,
		},
		"no service name": {b: backend("", 80), wantErr: "no service name"},
		"both name and number": {
			b:         networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Name: "http", Number: 80}}},
			wantField: "service.port", wantErr: "service.port: set either name or number, not both",
		},
		"no port":      {b: backend("web", nil), wantField: "service.port", wantErr: "service.port: want a port name or a number between 1 and 65535, got 0"},
		"port too big": {b: backend("web", 70000), wantField: "service.port", wantErr: "service.port: want a port name or a number between 1 and 65535, got 70000"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := BackendUpstream("ns", &tc.b)
			if tc.wantField == "-" {
				if err != nil || got != tc.want {
					t.Fatalf("BackendUpstream = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			be, ok := err.(*BackendError)
			if !ok || be.Error() != tc.wantErr || be.Field != tc.wantField {
				t.Fatalf("error = %#v, want a *BackendError %q at field %q", err, tc.wantErr, tc.wantField)
			}
		})
	}
}

func TestUpstreamsServicesAndSecretsOf(t *testing.T) {
	ing := ingress("ns", "shop",
		withDefaultBackend("fallback", 8080),
		rule("a.example", prefix("/", "web", 80), prefix("/api", "api", "grpc"), prefix("/again", "web", 80)),
		rule("b.example", prefix("/", "web", "http")),
		withTLS("b-tls", "b.example"), withTLS("a-tls", "a.example"), withTLS("b-tls"), withTLS("", "c.example"),
	)
	ing.Spec.Rules[1].HTTP.Paths = append(ing.Spec.Rules[1].HTTP.Paths, networkingv1.HTTPIngressPath{
		Path: "/bucket", Backend: networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}},
	})

	wantUps := []Upstream{up("ns", "api", "grpc"), up("ns", "fallback", 8080), up("ns", "web", 80), up("ns", "web", "http")}
	slices.SortFunc(wantUps, func(a, b Upstream) int { return cmp.Compare(a.Name, b.Name) })
	if got := UpstreamsOf(ing); !slices.Equal(got, wantUps) {
		t.Errorf("UpstreamsOf = %v, want %v", got, wantUps)
	}
	if got, want := ServicesOf(ing), []types.NamespacedName{nn("ns", "api"), nn("ns", "fallback"), nn("ns", "web")}; !slices.Equal(got, want) {
		t.Errorf("ServicesOf = %v, want %v", got, want)
	}
	if got, want := SecretsOf(ing), []types.NamespacedName{nn("ns", "a-tls"), nn("ns", "b-tls")}; !slices.Equal(got, want) {
		t.Errorf("SecretsOf = %v, want %v", got, want)
	}
}
