package autoingress

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
)

// Test fixtures live in namespace "ns"; the controller's default class is "reactor".
const (
	testNS    = "ns"
	testClass = "reactor"
	svcUID    = types.UID("svc-uid")
)

type svcOpt = gen.ServiceOption

// service returns Service ns/name with one port http=80 and uid svcUID.
func service(name string, opts ...svcOpt) *corev1.Service {
	base := []svcOpt{
		gen.ServiceFunc(func(s *corev1.Service) { s.UID = svcUID }),
		gen.TargetPort("http", 80, intstr.FromInt32(8080)),
	}
	return gen.Service(testNS, name, append(base, opts...)...)
}

// annotated sets annotations from key, value pairs.
func annotated(kv ...string) svcOpt { return gen.Annotations(kv...) }

func exposed(host string) svcOpt { return annotated(AnnotationExpose, host) }

func ports(ps ...corev1.ServicePort) svcOpt {
	return gen.ServiceFunc(func(s *corev1.Service) { s.Spec.Ports = ps })
}

func port(name string, n int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

func TestParseExpose(t *testing.T) {
	prefix, exact := networkingv1.PathTypePrefix, networkingv1.PathTypeExact
	tests := map[string]struct {
		svc *corev1.Service
		// want is compared when wantErrs is empty.
		want Expose
		// wantErrs are substrings the error must contain (each names the annotation at fault).
		wantErrs []string
	}{
		"host only: defaults for everything else": {
			svc:  service("web", exposed("app.example.com")),
			want: Expose{Host: "app.example.com", Path: "/", PathType: prefix, Port: networkingv1.ServiceBackendPort{Number: 80}, IngressClass: testClass},
		},
		"surrounding whitespace is ignored": {
			svc:  service("web", exposed(" app.example.com\n")),
			want: Expose{Host: "app.example.com", Path: "/", PathType: prefix, Port: networkingv1.ServiceBackendPort{Number: 80}, IngressClass: testClass},
		},
		"wildcard host": {
			svc:  service("web", exposed("*.example.com")),
			want: Expose{Host: "*.example.com", Path: "/", PathType: prefix, Port: networkingv1.ServiceBackendPort{Number: 80}, IngressClass: testClass},
		},
		"every companion set": {
			svc: service("web", exposed("api.example.com"), ports(port("http", 80), port("admin", 9000)), annotated(
				AnnotationPath, "/v1/users",
				AnnotationPathType, "Exact",
				AnnotationPort, "admin",
				AnnotationTLSSecret, "api-tls",
				AnnotationIngressClass, "internal",
			)),
			want: Expose{Host: "api.example.com", Path: "/v1/users", PathType: exact, Port: networkingv1.ServiceBackendPort{Name: "admin"},
				TLSSecret: "api-tls", IngressClass: "internal"},
		},
		"port by number among several": {
			svc:  service("web", exposed("a.example"), ports(port("http", 80), port("", 9000)), annotated(AnnotationPort, "9000")),
			want: Expose{Host: "a.example", Path: "/", PathType: prefix, Port: networkingv1.ServiceBackendPort{Number: 9000}, IngressClass: testClass},
		},
		"the one TCP port next to a UDP one (HTTP/3 on the same number)": {
			svc:  service("web", exposed("a.example"), ports(corev1.ServicePort{Name: "h3", Port: 443, Protocol: corev1.ProtocolUDP}, port("https", 443))),
			want: Expose{Host: "a.example", Path: "/", PathType: prefix, Port: networkingv1.ServiceBackendPort{Number: 443}, IngressClass: testClass},
		},
		"service without ports takes any port number": {
			svc:  service("ext", exposed("a.example"), ports(), annotated(AnnotationPort, "443")),
			want: Expose{Host: "a.example", Path: "/", PathType: prefix, Port: networkingv1.ServiceBackendPort{Number: 443}, IngressClass: testClass},
		},

		"empty host":               {svc: service("web", exposed("")), wantErrs: []string{AnnotationExpose + ": host must not be empty"}},
		"upper-case host":          {svc: service("web", exposed("App.Example.com")), wantErrs: []string{AnnotationExpose + ":", "upper-case"}},
		"ip address host":          {svc: service("web", exposed("192.0.2.1")), wantErrs: []string{AnnotationExpose + ":", "not an IP address"}},
		"host with a port":         {svc: service("web", exposed("a.example:8080")), wantErrs: []string{AnnotationExpose + ":", `":"`}},
		"wildcard in the middle":   {svc: service("web", exposed("a.*.example")), wantErrs: []string{AnnotationExpose + ":"}},
		"label longer than 63":     {svc: service("web", exposed(strings.Repeat("a", 64)+".example")), wantErrs: []string{AnnotationExpose + ":", "longer than 63"}},
		"relative path":            {svc: service("web", exposed("a.example"), annotated(AnnotationPath, "api")), wantErrs: []string{AnnotationPath + ":", "must start with '/'"}},
		"path with nginx syntax":   {svc: service("web", exposed("a.example"), annotated(AnnotationPath, "/a;b")), wantErrs: []string{AnnotationPath + ":", `";"`}},
		"path with a dot segment":  {svc: service("web", exposed("a.example"), annotated(AnnotationPath, "/a/../b")), wantErrs: []string{AnnotationPath + ":", "/../"}},
		"regex path type":          {svc: service("web", exposed("a.example"), annotated(AnnotationPathType, "ImplementationSpecific")), wantErrs: []string{AnnotationPathType + ":", "Prefix or Exact"}},
		"several ports, none said": {svc: service("web", exposed("a.example"), ports(port("http", 80), port("grpc", 81))), wantErrs: []string{AnnotationPort + ":", `has 2 TCP ports (its ports: 80 ("http"), 81 ("grpc"))`}},
		"no ports, none said":      {svc: service("web", exposed("a.example"), ports()), wantErrs: []string{AnnotationPort + ":", "no ports"}},
		"unknown port name":        {svc: service("web", exposed("a.example"), annotated(AnnotationPort, "grpc")), wantErrs: []string{AnnotationPort + ":", `no TCP port named "grpc" (its ports: 80 ("http"))`}},
		"unknown port number":      {svc: service("web", exposed("a.example"), annotated(AnnotationPort, "8080")), wantErrs: []string{AnnotationPort + ":", "no TCP port 8080"}},
		"a UDP port by name":       {svc: service("dns", exposed("a.example"), ports(corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}), annotated(AnnotationPort, "dns")), wantErrs: []string{AnnotationPort + ":", `no TCP port named "dns" (its ports: 53/UDP ("dns"))`}},
		"port out of range":        {svc: service("web", exposed("a.example"), ports(), annotated(AnnotationPort, "70000")), wantErrs: []string{AnnotationPort + ":", "out of range"}},
		"empty port":               {svc: service("web", exposed("a.example"), annotated(AnnotationPort, "")), wantErrs: []string{AnnotationPort + ":", "must not be empty"}},
		"bad secret name":          {svc: service("web", exposed("a.example"), annotated(AnnotationTLSSecret, "My_Secret")), wantErrs: []string{AnnotationTLSSecret + ":", "not a valid Secret name"}},
		"bad class name":           {svc: service("web", exposed("a.example"), annotated(AnnotationIngressClass, "-x")), wantErrs: []string{AnnotationIngressClass + ":", "not a valid IngressClass name"}},
		"every problem is reported at once": {
			svc:      service("web", exposed("A"), annotated(AnnotationPath, "x", AnnotationTLSSecret, "_")),
			wantErrs: []string{AnnotationExpose + ":", AnnotationPath + ":", AnnotationTLSSecret + ":"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseExpose(tc.svc, testClass)
			if len(tc.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("ParseExpose accepted %v as %+v; want an error containing %q", tc.svc.Annotations, got, tc.wantErrs)
				}
				for _, w := range tc.wantErrs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseExpose: %v", err)
			}
			if got != tc.want {
				t.Errorf("ParseExpose = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseExposeWithoutAnyClass(t *testing.T) {
	_, err := ParseExpose(service("web", exposed("a.example")), "")
	if err == nil || !strings.Contains(err.Error(), AnnotationIngressClass) {
		t.Fatalf("no --ingress-class and no class annotation: error = %v, want one naming %s", err, AnnotationIngressClass)
	}
	e, err := ParseExpose(service("web", exposed("a.example"), annotated(AnnotationIngressClass, "public")), "")
	if err != nil || e.IngressClass != "public" {
		t.Fatalf("class from the annotation alone: got %+v, %v", e, err)
	}
}

func TestDesiredIngress(t *testing.T) {
	svc := service("web", exposed("api.example.com"))
	got := DesiredIngress(svc, Expose{
		Host: "api.example.com", Path: "/v1", PathType: networkingv1.PathTypeExact,
		Port: networkingv1.ServiceBackendPort{Name: "http"}, TLSSecret: "api-tls", IngressClass: "internal",
	})
	want := ingress("web",
		ownedBy("web", svcUID),
		managed(),
		withClass("internal"),
		withRule("api.example.com", "/v1", networkingv1.PathTypeExact, networkingv1.ServiceBackendPort{Name: "http"}),
		withTLS("api.example.com", "api-tls"),
	)
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("DesiredIngress =\n%+v\nwant\n%+v", got, want)
	}
	// blockOwnerDeletion=true would need update on services/finalizers where the OwnerReferencesPermissionEnforcement
	// admission plugin is on; garbage collection needs only the controller reference.
	ref := got.OwnerReferences[0]
	if ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion == nil || *ref.BlockOwnerDeletion {
		t.Errorf("owner reference %+v: want controller=true and blockOwnerDeletion=false", ref)
	}
}

func TestClaimOf(t *testing.T) {
	noClass := gen.IngressFunc(func(i *networkingv1.Ingress) { i.Spec.IngressClassName = nil })
	tests := map[string]struct {
		svc   *corev1.Service
		owned *networkingv1.Ingress
		ours  string
		want  claim
	}{
		"names our class":                        {svc: service("web", annotated(AnnotationIngressClass, "a")), ours: "a", want: claimOurs},
		"names our class, spaces around it":      {svc: service("web", annotated(AnnotationIngressClass, " a ")), ours: "a", want: claimOurs},
		"names our class, ingress of another":    {svc: service("web", annotated(AnnotationIngressClass, "a")), owned: generated("web", "x", withClass("b")), ours: "a", want: claimOurs},
		"names another class":                    {svc: service("web", annotated(AnnotationIngressClass, "b")), ours: "a", want: claimNamedOther},
		"names another class, ingress of ours":   {svc: service("web", annotated(AnnotationIngressClass, "b")), owned: generated("web", "x", withClass("a")), ours: "a", want: claimNamedOther},
		"names an invalid class: ours to report": {svc: service("web", annotated(AnnotationIngressClass, "B C")), ours: "a", want: claimOurs},
		"names a class, we have none of our own": {svc: service("web", annotated(AnnotationIngressClass, "b")), ours: "", want: claimOurs},
		"names none, no ingress yet":             {svc: service("web"), ours: "a", want: claimOurs},
		"names none, ingress of our class":       {svc: service("web"), owned: generated("web", "x", withClass("a")), ours: "a", want: claimOurs},
		"names none, ingress of another class":   {svc: service("web"), owned: generated("web", "x", withClass("b")), ours: "a", want: claimHeldByOther},
		"names none, ingress without a class":    {svc: service("web"), owned: generated("web", "x", noClass), ours: "a", want: claimOurs},
		"names none, we have none, ingress of b": {svc: service("web"), owned: generated("web", "x", withClass("b")), ours: "", want: claimHeldByOther},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := claimOf(tc.svc, tc.owned, tc.ours); got != tc.want {
				t.Errorf("claimOf = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestControlledBy(t *testing.T) {
	svc := service("web")
	tests := map[string]struct {
		ing  *networkingv1.Ingress
		want bool
	}{
		"our controller reference": {ing: ingress("web", ownedBy("web", svcUID)), want: true},
		"no owner":                 {ing: ingress("web")},
		"earlier service of the same name": {
			ing: ingress("web", ownedBy("web", "old-uid")),
		},
		"owned but not as controller": {ing: ingress("web", gen.IngressFunc(func(i *networkingv1.Ingress) {
			i.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: svcUID}}
		}))},
		"controlled by another kind with the same uid": {ing: ingress("web", gen.IngressFunc(func(i *networkingv1.Ingress) {
			yes := true
			i.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: svcUID, Controller: &yes}}
		}))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ControlledBy(tc.ing, svc); got != tc.want {
				t.Errorf("ControlledBy = %v, want %v", got, tc.want)
			}
		})
	}
}

// Ingress builders for expected and pre-existing objects.

type ingOpt = gen.IngressOption

// ingress also describes the Ingresses the module computes, which carry no server-set metadata: the
// builder's UID, resource version and creation time are cleared before opts apply.
func ingress(name string, opts ...ingOpt) *networkingv1.Ingress {
	unset := gen.IngressFunc(func(i *networkingv1.Ingress) {
		i.UID, i.ResourceVersion, i.CreationTimestamp = "", "", metav1.Time{}
	})
	return gen.Ingress(testNS, name, append([]ingOpt{unset}, opts...)...)
}

func ownedBy(svcName string, uid types.UID) ingOpt {
	return gen.IngressFunc(func(i *networkingv1.Ingress) {
		yes, no := true, false
		i.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Service", Name: svcName, UID: uid, Controller: &yes, BlockOwnerDeletion: &no,
		}}
	})
}

func managed() ingOpt { return withLabel(LabelManagedBy, ManagedByValue) }

func withLabel(k, v string) ingOpt { return gen.Labels(k, v) }

func withAnnotation(k, v string) ingOpt { return gen.Annotations(k, v) }

func withClass(c string) ingOpt { return gen.Class(c) }

// withRule sets the single rule: host and path to the Service named like the Ingress.
func withRule(host, path string, pt networkingv1.PathType, p networkingv1.ServiceBackendPort) ingOpt {
	return gen.IngressFunc(func(i *networkingv1.Ingress) {
		backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: i.Name, Port: p}}
		i.Spec.Rules = nil
		gen.Paths(host, gen.Path(pt, path, backend))(i)
	})
}

func withTLS(host, secret string) ingOpt { return gen.TLS(secret, host) }

// generated is what the module creates for a Service exposed at host with defaults, port 80.
func generated(name, host string, extra ...ingOpt) *networkingv1.Ingress {
	opts := append([]ingOpt{
		ownedBy(name, svcUID), managed(), withClass(testClass),
		withRule(host, "/", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Number: 80}),
	}, extra...)
	return ingress(name, opts...)
}
