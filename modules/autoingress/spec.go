package autoingress

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// The annotations a Service carries to ask for an Ingress. Only AnnotationExpose is required; the others
// refine the generated Ingress and are ignored without it.
const (
	// AnnotationExpose is the host name to serve, e.g. "app.example.com" or "*.example.com".
	AnnotationExpose = "ingress-reactor.io/expose"
	// AnnotationPath is the HTTP path routed to the Service; "/" when absent.
	AnnotationPath = "ingress-reactor.io/expose-path"
	// AnnotationPathType is Prefix (the default) or Exact.
	AnnotationPathType = "ingress-reactor.io/expose-path-type"
	// AnnotationPort is the Service port to route to, by name or number. Without it the Service must have
	// exactly one port.
	AnnotationPort = "ingress-reactor.io/expose-port"
	// AnnotationTLSSecret names a Secret of type kubernetes.io/tls in the Service's namespace; with it the
	// host is also served over HTTPS with that certificate.
	AnnotationTLSSecret = "ingress-reactor.io/expose-tls-secret"
	// AnnotationIngressClass is the spec.ingressClassName of the Ingress, and so the ingress-reactor instance
	// (the one whose --ingress-class it is) that creates and manages it; see claimOf. The controller's
	// --ingress-class when absent.
	AnnotationIngressClass = "ingress-reactor.io/expose-ingress-class"
)

// Labels put on every generated Ingress, so operators can list them
// (kubectl get ingress -l app.kubernetes.io/managed-by=ingress-reactor-autoingress).
const (
	// LabelManagedBy is the standard managed-by label key.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value on generated Ingresses.
	ManagedByValue = "ingress-reactor-autoingress"
)

// Expose is what a Service's annotations ask for, validated and with defaults applied.
type Expose struct {
	// Host is the rule's host (a DNS name or a wildcard).
	Host string
	// Path and PathType form the rule's single path.
	Path     string
	PathType networkingv1.PathType
	// Port is the backend's Service port, by number or by name as the user wrote it.
	Port networkingv1.ServiceBackendPort
	// TLSSecret, when set, adds a TLS section for Host with this Secret.
	TLSSecret string
	// IngressClass is spec.ingressClassName.
	IngressClass string
}

// Requested reports whether svc carries AnnotationExpose, whatever its value.
func Requested(svc *corev1.Service) bool {
	_, ok := svc.Annotations[AnnotationExpose]
	return ok
}

// NamedClass returns the IngressClass svc names in AnnotationIngressClass, trimmed; ok is false without the
// annotation.
func NamedClass(svc *corev1.Service) (class string, ok bool) {
	v, ok := svc.Annotations[AnnotationIngressClass]
	return strings.TrimSpace(v), ok
}

// claim is how the controller instance of one IngressClass stands towards an annotated Service.
type claim int

const (
	// claimOurs: this instance reconciles the Service.
	claimOurs claim = iota
	// claimNamedOther: the Service names another IngressClass; the instance of that class reconciles it.
	claimNamedOther
	// claimHeldByOther: the Service names no class, and the Ingress it controls names another one (set by
	// another instance, or by hand); this instance leaves it alone.
	claimHeldByOther
)

// claimOf decides whether the instance whose --ingress-class is ours reconciles svc, so that instances of
// different classes never write the same Ingress with different content (each would undo the other's
// write, and every write wakes the other up again). owned is the Ingress svc controls, nil when there is
// none or it is being deleted.
//
// A Service that names a class belongs to the instance of that class. An instance without a class of its
// own takes any named class, and an invalid name is claimed so that ParseExpose reports it. A Service that
// names no class belongs to every instance until one has created its Ingress, and from then on to the
// instance whose class the Ingress names: the first to create it wins, the others back off. An Ingress
// without a class is claimed again; no instance writes one, so no instance fights over it.
func claimOf(svc *corev1.Service, owned *networkingv1.Ingress, ours string) claim {
	if named, ok := NamedClass(svc); ok {
		if ours == "" || named == ours || len(validation.IsDNS1123Subdomain(named)) > 0 {
			return claimOurs
		}
		return claimNamedOther
	}
	if owned != nil && owned.Spec.IngressClassName != nil && *owned.Spec.IngressClassName != ours {
		return claimHeldByOther
	}
	return claimOurs
}

// ParseExpose reads and validates svc's expose annotations. defaultClass is used when the Service names no
// IngressClass. Every problem is reported, joined into one error, each naming its annotation; the caller
// must check Requested first.
func ParseExpose(svc *corev1.Service, defaultClass string) (Expose, error) {
	ann := svc.Annotations
	get := func(key string) (string, bool) {
		v, ok := ann[key]
		return strings.TrimSpace(v), ok
	}
	var errs []error
	fail := func(key string, err error) { errs = append(errs, fmt.Errorf("%s: %w", key, err)) }

	e := Expose{Path: "/", PathType: networkingv1.PathTypePrefix, IngressClass: defaultClass}

	e.Host, _ = get(AnnotationExpose)
	if err := nginx.ValidateHost(e.Host); err != nil {
		fail(AnnotationExpose, err)
	}
	if v, ok := get(AnnotationPath); ok {
		e.Path = v
		if err := nginx.ValidatePath(v); err != nil {
			fail(AnnotationPath, err)
		}
	}
	if v, ok := get(AnnotationPathType); ok {
		switch networkingv1.PathType(v) {
		case networkingv1.PathTypePrefix, networkingv1.PathTypeExact:
			e.PathType = networkingv1.PathType(v)
		default:
			fail(AnnotationPathType, fmt.Errorf("%q is not supported; use %s or %s", v, networkingv1.PathTypePrefix, networkingv1.PathTypeExact))
		}
	}
	port, err := servicePort(svc, ann)
	if err != nil {
		fail(AnnotationPort, err)
	}
	e.Port = port
	if v, ok := get(AnnotationTLSSecret); ok {
		e.TLSSecret = v
		if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			fail(AnnotationTLSSecret, fmt.Errorf("%q is not a valid Secret name: %s", v, strings.Join(msgs, "; ")))
		}
	}
	if v, ok := NamedClass(svc); ok {
		e.IngressClass = v
		if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			fail(AnnotationIngressClass, fmt.Errorf("%q is not a valid IngressClass name: %s", v, strings.Join(msgs, "; ")))
		}
	}
	if e.IngressClass == "" {
		fail(AnnotationIngressClass, errors.New("no IngressClass: set this annotation or the controller's --ingress-class"))
	}
	if len(errs) > 0 {
		return Expose{}, errors.Join(errs...)
	}
	return e, nil
}

// servicePort resolves AnnotationPort against the Service's TCP ports (a port number may also be listed for
// UDP, as for HTTP/3; only TCP carries HTTP). A number must be one of those port numbers (any port 1-65535
// for a Service without ports, such as most ExternalName Services); a name must be one of their names.
// Without the annotation the Service's only TCP port is used.
func servicePort(svc *corev1.Service, ann map[string]string) (networkingv1.ServiceBackendPort, error) {
	var tcp []corev1.ServicePort
	for _, p := range svc.Spec.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			tcp = append(tcp, p)
		}
	}
	v, ok := ann[AnnotationPort]
	v = strings.TrimSpace(v)
	switch {
	case !ok && len(tcp) == 1:
		return networkingv1.ServiceBackendPort{Number: tcp[0].Port}, nil
	case !ok && len(svc.Spec.Ports) == 0:
		return networkingv1.ServiceBackendPort{}, errors.New("the Service has no ports; set this annotation to the port number to route to")
	case !ok:
		return networkingv1.ServiceBackendPort{}, fmt.Errorf("the Service has %d TCP ports (its ports: %s); set this annotation to the one to route to",
			len(tcp), nginx.DescribePorts(svc.Spec.Ports))
	case v == "":
		return networkingv1.ServiceBackendPort{}, errors.New("must not be empty; give a port name or number")
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 1 || n > 65535 {
			return networkingv1.ServiceBackendPort{}, fmt.Errorf("port %d is out of range 1-65535", n)
		}
		if len(svc.Spec.Ports) == 0 {
			return networkingv1.ServiceBackendPort{Number: int32(n)}, nil
		}
		if _, ok := nginx.ServicePort(svc, intstr.FromInt(n)); ok {
			return networkingv1.ServiceBackendPort{Number: int32(n)}, nil
		}
		return networkingv1.ServiceBackendPort{}, fmt.Errorf("the Service has no TCP port %d (its ports: %s)", n, nginx.DescribePorts(svc.Spec.Ports))
	}
	if len(svc.Spec.Ports) == 0 {
		return networkingv1.ServiceBackendPort{}, fmt.Errorf("the Service has no ports, so port name %q cannot be resolved; give a port number", v)
	}
	if _, ok := nginx.ServicePort(svc, intstr.FromString(v)); ok {
		return networkingv1.ServiceBackendPort{Name: v}, nil
	}
	return networkingv1.ServiceBackendPort{}, fmt.Errorf("the Service has no TCP port named %q (its ports: %s)", v, nginx.DescribePorts(svc.Spec.Ports))
}

// DesiredIngress returns the Ingress that e asks for on behalf of svc: same name and namespace, labelled as
// ours, controlled by svc (garbage collection deletes it with the Service).
func DesiredIngress(svc *corev1.Service, e Expose) *networkingv1.Ingress {
	pathType := e.PathType
	class := e.IngressClass
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{
			Name:            svc.Name,
			Namespace:       svc.Namespace,
			Labels:          map[string]string{LabelManagedBy: ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{serviceControllerRef(svc)},
		},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{
				Host: e.Host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path:     e.Path,
						PathType: &pathType,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: svc.Name,
							Port: e.Port,
						}},
					}},
				}},
			}},
		},
	}
	if e.TLSSecret != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{e.Host}, SecretName: e.TLSSecret}}
	}
	return ing
}

// serviceControllerRef is a controller reference to svc that does not block svc's deletion.
// blockOwnerDeletion=true (what metav1.NewControllerRef sets) only makes a foreground deletion of the Service
// wait for the Ingress, and where the OwnerReferencesPermissionEnforcement admission plugin is on (OpenShift's
// default) it needs update on services/finalizers, without which every create is refused. Garbage
// collection deletes the Ingress with the Service either way.
func serviceControllerRef(svc *corev1.Service) metav1.OwnerReference {
	ref := metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))
	block := false
	ref.BlockOwnerDeletion = &block
	return *ref
}

// ControlledBy reports whether ing's controller owner reference points at svc (same UID). An Ingress left
// over from an earlier Service of the same name is not controlled by the current one.
func ControlledBy(ing *networkingv1.Ingress, svc *corev1.Service) bool {
	ref := metav1.GetControllerOfNoCopy(ing)
	return ref != nil && ref.UID == svc.UID && isServiceRef(ref)
}

// isServiceRef reports whether an owner reference points at a core/v1 Service.
func isServiceRef(ref *metav1.OwnerReference) bool {
	return ref.Kind == "Service" && ref.APIVersion == corev1.SchemeGroupVersion.String()
}
