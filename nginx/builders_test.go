package nginx

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Small fixture builders, so the tables below read like the objects they describe.

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type ingressOption func(*networkingv1.Ingress)

func ingress(ns, name string, opts ...ingressOption) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{
		Namespace:         ns,
		Name:              name,
		UID:               types.UID(ns + "/" + name),
		ResourceVersion:   "1",
		CreationTimestamp: metav1.NewTime(epoch),
	}}
	for _, o := range opts {
		o(ing)
	}
	return ing
}

// age makes the Ingress created d after the common epoch.
func age(d time.Duration) ingressOption {
	return func(ing *networkingv1.Ingress) { ing.CreationTimestamp = metav1.NewTime(epoch.Add(d)) }
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) ingressOption {
	return func(ing *networkingv1.Ingress) {
		r := networkingv1.IngressRule{Host: host}
		if paths != nil {
			r.HTTP = &networkingv1.HTTPIngressRuleValue{Paths: paths}
		}
		ing.Spec.Rules = append(ing.Spec.Rules, r)
	}
}

func withDefaultBackend(svc string, port any) ingressOption {
	return func(ing *networkingv1.Ingress) { b := backend(svc, port); ing.Spec.DefaultBackend = &b }
}

// annotate sets annotations from key, value pairs.
func annotate(kv ...string) ingressOption {
	return func(ing *networkingv1.Ingress) {
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			ing.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func withTLS(secret string, hosts ...string) ingressOption {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{SecretName: secret, Hosts: hosts})
	}
}

func path(pt networkingv1.PathType, p, svc string, port any) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: p, PathType: &pt, Backend: backend(svc, port)}
}

func prefix(p, svc string, port any) networkingv1.HTTPIngressPath {
	return path(networkingv1.PathTypePrefix, p, svc, port)
}

func exact(p, svc string, port any) networkingv1.HTTPIngressPath {
	return path(networkingv1.PathTypeExact, p, svc, port)
}

func backend(svc string, port any) networkingv1.IngressBackend {
	b := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc}}
	switch p := port.(type) {
	case int:
		b.Service.Port.Number = int32(p)
	case string:
		b.Service.Port.Name = p
	}
	return b
}

func service(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
	}
}

func port(n int32, name string) corev1.ServicePort {
	return corev1.ServicePort{Port: n, Name: name, TargetPort: intstr.FromInt32(n)}
}

// services is a ServiceLookup over a fixed set.
type services map[types.NamespacedName]*corev1.Service

func servicesOf(objs ...*corev1.Service) services {
	s := services{}
	for _, o := range objs {
		s[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = o
	}
	return s
}

func (s services) Service(key types.NamespacedName) (*corev1.Service, bool) {
	svc, ok := s[key]
	return svc, ok
}

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func up(ns, svc string, port any) Upstream {
	switch p := port.(type) {
	case int:
		return NewUpstream(nn(ns, svc), intstr.FromInt(p))
	case string:
		return NewUpstream(nn(ns, svc), intstr.FromString(p))
	}
	panic("port must be int or string")
}
