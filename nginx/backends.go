package nginx

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file is the one place that says how an Ingress backend becomes an upstream. The translation, the
// endpoint lane and the passthrough table all name upstreams through it, so a Service port an Ingress
// routes to is always the upstream whose endpoints are pushed.

// BackendError says why an Ingress backend cannot be an upstream.
type BackendError struct {
	// Field is the part of the backend at fault, relative to it ("service.port"); "" for the backend as
	// a whole.
	Field string
	// Reason is the user-facing explanation.
	Reason string
}

// Error returns the reason, prefixed with the field at fault.
func (e *BackendError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// BackendUpstream names the upstream an Ingress backend in namespace sends traffic to: its Service and
// that Service's port, by number or by name as the backend states it. It does not look the Service up.
// The error is a *BackendError: a resource backend, no Service name, or a port that is not exactly one
// of a name and a number between 1 and 65535.
func BackendUpstream(namespace string, b *networkingv1.IngressBackend) (Upstream, error) {
	if b.Resource != nil {
		return Upstream{}, &BackendError{Reason: fmt.Sprintf("resource backends (%s %q) are not supported; use a Service backend", b.Resource.Kind, b.Resource.Name)}
	}
	if b.Service == nil || b.Service.Name == "" {
		return Upstream{}, &BackendError{Reason: "no service name"}
	}
	var port intstr.IntOrString
	switch sp := b.Service.Port; {
	case sp.Name != "" && sp.Number != 0:
		return Upstream{}, &BackendError{Field: "service.port", Reason: "set either name or number, not both"}
	case sp.Name != "":
		port = intstr.FromString(sp.Name)
	case sp.Number > 0 && sp.Number <= 65535:
		port = intstr.FromInt32(sp.Number)
	default:
		return Upstream{}, &BackendError{Field: "service.port", Reason: fmt.Sprintf("want a port name or a number between 1 and 65535, got %d", sp.Number)}
	}
	return NewUpstream(types.NamespacedName{Namespace: namespace, Name: b.Service.Name}, port), nil
}

// Backends yields every backend an Ingress names: spec.defaultBackend first, when set, then each path's
// backend in spec order.
func Backends(ing *networkingv1.Ingress) iter.Seq[*networkingv1.IngressBackend] {
	return func(yield func(*networkingv1.IngressBackend) bool) {
		if b := ing.Spec.DefaultBackend; b != nil && !yield(b) {
			return
		}
		for i := range ing.Spec.Rules {
			http := ing.Spec.Rules[i].HTTP
			if http == nil {
				continue
			}
			for j := range http.Paths {
				if !yield(&http.Paths[j].Backend) {
					return
				}
			}
		}
	}
}

// IngressUpstream names the upstream of one of ing's backends: BackendUpstream, as the Ingress's
// service-upstream annotation asks (its Pods, or the Service's cluster IP). The translation, which
// rejects an invalid service-upstream value, and the endpoint lane both name upstreams through it.
// The ConfigMap's service-upstream (the default of Ingresses without the annotation) is the
// translation's: the endpoint lane watches the upstreams it names through the rendered model.
func IngressUpstream(ing *networkingv1.Ingress, b *networkingv1.IngressBackend) (Upstream, error) {
	return ingressUpstream(ing, b, false)
}

// ingressUpstream is IngressUpstream with def the service-upstream of an Ingress without the annotation.
func ingressUpstream(ing *networkingv1.Ingress, b *networkingv1.IngressBackend, def bool) (Upstream, error) {
	up, err := BackendUpstream(ing.Namespace, b)
	if err == nil && serviceUpstream(ing, def) {
		up = NewServiceIPUpstream(up.Service, up.Port)
	}
	return up, err
}

// UpstreamsOf lists the upstreams an Ingress's backends name, sorted by name and unique. Backends that
// cannot be upstreams are skipped; the translation reports them. Unlike the translation it does not ask
// whether the Service has the port, so an upstream is known before its Service is.
func UpstreamsOf(ing *networkingv1.Ingress) []Upstream {
	var ups []Upstream
	for b := range Backends(ing) {
		if up, err := IngressUpstream(ing, b); err == nil {
			ups = append(ups, up)
		}
	}
	return sortUpstreams(ups)
}

// ServicesOf lists the Services an Ingress's backends (and its default-backend annotation) name, in the
// Ingress's namespace, sorted and unique.
func ServicesOf(ing *networkingv1.Ingress) []types.NamespacedName {
	var out []types.NamespacedName
	for b := range Backends(ing) {
		if b.Service != nil && b.Service.Name != "" {
			out = append(out, types.NamespacedName{Namespace: ing.Namespace, Name: b.Service.Name})
		}
	}
	if name, ok := ing.Annotations[AnnotationDefaultBackend]; ok {
		if name = strings.TrimSpace(name); validateLabel(name) == nil {
			out = append(out, types.NamespacedName{Namespace: ing.Namespace, Name: name})
		}
	}
	slices.SortFunc(out, compareKeys)
	return slices.Compact(out)
}

// SecretsOf lists the TLS Secrets an Ingress references (spec.tls[].secretName), sorted and unique.
func SecretsOf(ing *networkingv1.Ingress) []types.NamespacedName {
	var out []types.NamespacedName
	for _, t := range ing.Spec.TLS {
		if t.SecretName != "" {
			out = append(out, types.NamespacedName{Namespace: ing.Namespace, Name: t.SecretName})
		}
	}
	slices.SortFunc(out, compareKeys)
	return slices.Compact(out)
}

// DefaultBackendUpstream names the upstream of --default-backend-service: the Service's first TCP port,
// the one a Service given without a port is reached on. It is false when the Service has no TCP port.
func DefaultBackendUpstream(key types.NamespacedName, svc *corev1.Service) (Upstream, bool) {
	port, ok := FirstTCPPort(svc)
	if !ok {
		return Upstream{}, false
	}
	return NewUpstream(key, intstr.FromInt32(port)), true
}

func sortUpstreams(ups []Upstream) []Upstream {
	slices.SortFunc(ups, func(a, b Upstream) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return slices.CompactFunc(ups, func(a, b Upstream) bool { return a.Name == b.Name })
}

func compareKeys(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
