// Package gen builds the Kubernetes objects tests feed the controller: Ingresses, IngressClasses,
// Services, EndpointSlices and Secrets, each from a namespace, a name and small options, after
// cert-manager's test/unit/gen. A table reads like the objects it describes:
//
//	gen.Ingress("apps", "web", gen.Class("reactor"), gen.Rule("web.example", "/", gen.Backend("web", 80)))
//
// Every object starts with ResourceVersion "1" and, where it matters for ordering, the creation time
// Epoch. Options that set metadata (Annotations, Labels, CreatedAt, ...) work on every kind.
package gen

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Epoch is the creation time of every object built here, unless CreatedAt moves it.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// MetaOption changes an object's metadata; it is an option of every kind.
type MetaOption func(metav1.Object)

// Annotations sets annotations from key, value pairs.
func Annotations(kv ...string) MetaOption {
	return func(o metav1.Object) { o.SetAnnotations(merged(o.GetAnnotations(), kv)) }
}

// Labels sets labels from key, value pairs.
func Labels(kv ...string) MetaOption {
	return func(o metav1.Object) { o.SetLabels(merged(o.GetLabels(), kv)) }
}

// CreatedAt makes the object created d after Epoch, for tests of who came first.
func CreatedAt(d time.Duration) MetaOption {
	return func(o metav1.Object) { o.SetCreationTimestamp(metav1.NewTime(Epoch.Add(d))) }
}

// ResourceVersion sets the resource version, for tests of update filters.
func ResourceVersion(rv string) MetaOption {
	return func(o metav1.Object) { o.SetResourceVersion(rv) }
}

// Generation sets metadata.generation.
func Generation(g int64) MetaOption {
	return func(o metav1.Object) { o.SetGeneration(g) }
}

func merged(m map[string]string, kv []string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func meta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
		ResourceVersion: "1", CreationTimestamp: metav1.NewTime(Epoch),
	}
}

// IngressOption changes an Ingress; MetaOption is one too.
type IngressOption interface{ applyIngress(*networkingv1.Ingress) }

// IngressFunc is an IngressOption written in place.
type IngressFunc func(*networkingv1.Ingress)

func (f IngressFunc) applyIngress(i *networkingv1.Ingress) { f(i) }
func (f MetaOption) applyIngress(i *networkingv1.Ingress)  { f(i) }

// Ingress returns Ingress ns/name with the options applied in order.
func Ingress(ns, name string, opts ...IngressOption) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: meta(ns, name)}
	for _, o := range opts {
		o.applyIngress(ing)
	}
	return ing
}

// Class sets spec.ingressClassName.
func Class(name string) IngressFunc {
	return func(i *networkingv1.Ingress) { i.Spec.IngressClassName = ptr.To(name) }
}

// Rule routes the Prefix path on host to backend. Rules of one host gather in one rule, in order.
func Rule(host, path string, backend networkingv1.IngressBackend) IngressFunc {
	return Paths(host, Path(networkingv1.PathTypePrefix, path, backend))
}

// Paths adds paths to the rule of host, creating it; no path at all makes a rule without http.
func Paths(host string, paths ...networkingv1.HTTPIngressPath) IngressFunc {
	return func(i *networkingv1.Ingress) {
		for k := range i.Spec.Rules {
			if r := &i.Spec.Rules[k]; r.Host == host && r.HTTP != nil && len(paths) > 0 {
				r.HTTP.Paths = append(r.HTTP.Paths, paths...)
				return
			}
		}
		r := networkingv1.IngressRule{Host: host}
		if len(paths) > 0 {
			r.HTTP = &networkingv1.HTTPIngressRuleValue{Paths: paths}
		}
		i.Spec.Rules = append(i.Spec.Rules, r)
	}
}

// Path is one HTTP path of a rule.
func Path(pt networkingv1.PathType, path string, backend networkingv1.IngressBackend) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: path, PathType: ptr.To(pt), Backend: backend}
}

// Backend is a Service backend; port is a port number (int) or a port name (string).
func Backend(svc string, port any) networkingv1.IngressBackend {
	b := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc}}
	switch p := port.(type) {
	case int:
		b.Service.Port.Number = int32(p)
	case int32:
		b.Service.Port.Number = p
	case string:
		b.Service.Port.Name = p
	default:
		panic("gen.Backend: port must be an int or a string")
	}
	return b
}

// DefaultBackend sets spec.defaultBackend.
func DefaultBackend(b networkingv1.IngressBackend) IngressFunc {
	return func(i *networkingv1.Ingress) { i.Spec.DefaultBackend = &b }
}

// TLS adds a spec.tls entry: secret for hosts.
func TLS(secret string, hosts ...string) IngressFunc {
	return func(i *networkingv1.Ingress) {
		i.Spec.TLS = append(i.Spec.TLS, networkingv1.IngressTLS{SecretName: secret, Hosts: hosts})
	}
}

// LoadBalancer sets status.loadBalancer.ingress to the IP addresses.
func LoadBalancer(ips ...string) IngressFunc {
	return func(i *networkingv1.Ingress) {
		i.Status.LoadBalancer.Ingress = nil
		for _, ip := range ips {
			i.Status.LoadBalancer.Ingress = append(i.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
	}
}

// IngressClassOption changes an IngressClass; MetaOption is one too.
type IngressClassOption interface {
	applyIngressClass(*networkingv1.IngressClass)
}

// IngressClassFunc is an IngressClassOption written in place.
type IngressClassFunc func(*networkingv1.IngressClass)

func (f IngressClassFunc) applyIngressClass(c *networkingv1.IngressClass) { f(c) }
func (f MetaOption) applyIngressClass(c *networkingv1.IngressClass)       { f(c) }

// IngressClass returns the cluster-scoped IngressClass name whose spec.controller is controller.
func IngressClass(name, controller string, opts ...IngressClassOption) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{ObjectMeta: meta("", name), Spec: networkingv1.IngressClassSpec{Controller: controller}}
	for _, o := range opts {
		o.applyIngressClass(c)
	}
	return c
}

// DefaultClass marks an IngressClass as the cluster's default.
func DefaultClass() MetaOption {
	return Annotations(networkingv1.AnnotationIsDefaultIngressClass, "true")
}

// ServiceOption changes a Service; MetaOption is one too.
type ServiceOption interface{ applyService(*corev1.Service) }

// ServiceFunc is a ServiceOption written in place.
type ServiceFunc func(*corev1.Service)

func (f ServiceFunc) applyService(s *corev1.Service) { f(s) }
func (f MetaOption) applyService(s *corev1.Service)  { f(s) }

// Service returns ClusterIP Service ns/name with the options applied in order.
func Service(ns, name string, opts ...ServiceOption) *corev1.Service {
	s := &corev1.Service{ObjectMeta: meta(ns, name), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	for _, o := range opts {
		o.applyService(s)
	}
	return s
}

// Port adds a TCP port called name (may be empty) whose target port is the same number.
func Port(name string, port int32) ServiceFunc {
	return TargetPort(name, port, intstr.FromInt32(port))
}

// TargetPort adds a TCP port called name that forwards to target (a number or a container port's name).
func TargetPort(name string, port int32, target intstr.IntOrString) ServiceFunc {
	return func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP})
	}
}

// UDPPort adds a UDP port called name whose target port is the same number, for tests that a UDP port
// never becomes an upstream.
func UDPPort(name string, port int32) ServiceFunc {
	return func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolUDP})
	}
}

// ExternalName makes the Service an alias of host.
func ExternalName(host string) ServiceFunc {
	return func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeExternalName
		s.Spec.ExternalName = host
	}
}

// EndpointSliceOption changes an EndpointSlice; MetaOption is one too.
type EndpointSliceOption interface {
	applyEndpointSlice(*discoveryv1.EndpointSlice)
}

// EndpointSliceFunc is an EndpointSliceOption written in place.
type EndpointSliceFunc func(*discoveryv1.EndpointSlice)

func (f EndpointSliceFunc) applyEndpointSlice(e *discoveryv1.EndpointSlice) { f(e) }
func (f MetaOption) applyEndpointSlice(e *discoveryv1.EndpointSlice)        { f(e) }

// EndpointSlice returns an IPv4 EndpointSlice ns/name of Service service.
func EndpointSlice(ns, name, service string, opts ...EndpointSliceOption) *discoveryv1.EndpointSlice {
	e := &discoveryv1.EndpointSlice{ObjectMeta: meta(ns, name), AddressType: discoveryv1.AddressTypeIPv4}
	e.Labels = map[string]string{discoveryv1.LabelServiceName: service}
	for _, o := range opts {
		o.applyEndpointSlice(e)
	}
	return e
}

// SlicePort adds a TCP port called name (the Service port's name, may be empty).
func SlicePort(name string, port int32) EndpointSliceFunc {
	return func(e *discoveryv1.EndpointSlice) {
		e.Ports = append(e.Ports, discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
}

// EndpointOption changes one endpoint of a slice.
type EndpointOption func(*discoveryv1.Endpoint)

// NotReady clears the endpoint's ready condition.
func NotReady() EndpointOption {
	return func(ep *discoveryv1.Endpoint) { ep.Conditions.Ready = ptr.To(false) }
}

// Terminating marks the endpoint as terminating and, unless serving is false, still serving.
func Terminating(serving bool) EndpointOption {
	return func(ep *discoveryv1.Endpoint) {
		ep.Conditions.Ready = ptr.To(false)
		ep.Conditions.Terminating = ptr.To(true)
		ep.Conditions.Serving = ptr.To(serving)
	}
}

// Endpoint adds a ready, serving endpoint at ip.
func Endpoint(ip string, opts ...EndpointOption) EndpointSliceFunc {
	return func(e *discoveryv1.EndpointSlice) {
		ep := discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		}
		for _, o := range opts {
			o(&ep)
		}
		e.Endpoints = append(e.Endpoints, ep)
	}
}

// SecretOption changes a Secret; MetaOption is one too.
type SecretOption interface{ applySecret(*corev1.Secret) }

// SecretFunc is a SecretOption written in place.
type SecretFunc func(*corev1.Secret)

func (f SecretFunc) applySecret(s *corev1.Secret) { f(s) }
func (f MetaOption) applySecret(s *corev1.Secret) { f(s) }

// Secret returns an Opaque Secret ns/name with the options applied in order.
func Secret(ns, name string, opts ...SecretOption) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: meta(ns, name), Type: corev1.SecretTypeOpaque}
	for _, o := range opts {
		o.applySecret(s)
	}
	return s
}

// TLSData makes the Secret a kubernetes.io/tls Secret holding PEM certificate and key.
func TLSData(certPEM, keyPEM []byte) SecretFunc {
	return func(s *corev1.Secret) {
		s.Type = corev1.SecretTypeTLS
		s.Data = map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}
	}
}

// Data sets one data key.
func Data(key string, value []byte) SecretFunc {
	return func(s *corev1.Secret) {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[key] = value
	}
}
