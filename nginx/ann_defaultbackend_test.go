package nginx

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestAnnotationDefaultBackend: default-backend -> the route options and the upstream the endpoint lane
// fills, a warning, or the exact rejection.
func TestAnnotationDefaultBackend(t *testing.T) {
	svcs := servicesOf(service("default", "web", port(80, "")), service("default", "sorry", port(8080, "alt"), port(80, "")),
		service("default", "udp", corev1.ServicePort{Port: 53, Protocol: corev1.ProtocolUDP}))
	web, sorry := up("default", "web", 80), up("default", "sorry", 8080)
	tests := map[string]struct {
		value     string
		options   *RouteOptions
		upstreams []Upstream
		warnings  []string
		err       string
	}{
		"the Service's first TCP port": {value: " sorry ", options: &RouteOptions{DefaultBackend: sorry.Name}, upstreams: sortUpstreams([]Upstream{web, sorry})},
		"a Service that does not exist yet": {value: "later", upstreams: []Upstream{web},
			warnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/default-backend]: service default/later does not exist; ignored until it does"}},
		"a Service without TCP port": {value: "udp", upstreams: []Upstream{web},
			warnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/default-backend]: service default/udp has no TCP port; ignored"}},
		"not a Service name": {value: "other/sorry",
			err: `metadata.annotations[nginx.ingress.kubernetes.io/default-backend]: "other/sorry" is not a Service name (want the name of a Service in namespace default)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(AnnotationDefaultBackend, tc.value))
			got, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
			if tc.err != "" {
				if err == nil || err.Error() != "ingress default/a rejected: "+tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			same(t, "options", got.Options, tc.options)
			same(t, "upstreams", got.Upstreams, tc.upstreams)
			same(t, "warnings", got.Warnings, tc.warnings)
		})
	}
}
