package app

import (
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/autoingress"
	"github.com/ingress-reactor/ingress-reactor/modules/endpoints"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// cacheTransform trims objects before they enter the informer caches, keeping only what some module reads
// from the shared caches (the published Service, pods and nodes of status discovery, and the ConfigMaps
// and Secrets of settings and streams come from informers of their own, untouched by this):
//
//   - every object: managedFields and the last-applied annotation (pipeline.StripTransform);
//   - ConfigMaps: generateName, finalizers, owner references and the UID;
//   - a Service becomes a modules.ServiceRecord: its namespace, name, UID (autoingress writes it into
//     owner references and Events), resource version, deletion timestamp and autoingress's
//     annotations (ingress-reactor.io/expose*; nil for nearly every Service); its type, clusterIP,
//     externalName and ports (name, protocol, number, target port), in a value slice of exact length, the
//     record's own strings in one allocation. A trimmed decoded Service kept a 592-byte struct and 88
//     bytes per port; its record takes 96 bytes and 48 per port;
//   - an EndpointSlice becomes an endpoints.SliceRecord: its namespace, name, resource version and
//     Service, and of its ports and endpoints what endpoint resolution reads (a port's name, protocol and
//     number; an endpoint's first address and conditions), in value slices of exact length. A decoded
//     slice keeps a labels map, pointers for every port field and a struct with an addresses slice per
//     endpoint (and in a cluster each endpoint's pod reference, node and zone); its record takes about a
//     quarter of that;
//   - a Secret becomes a modules.SecretRecord: its namespace, name, resource version and type, and the
//     data entries that some module reads: the certificate, key and CA that TLS uses (and ca.crl, which
//     auth-tls-secret refuses) and the entries of basic authentication (the key "auth", and values that
//     are password hashes: nginx.KeepsBasicAuthEntry), in a value slice of exact length whose values are
//     the decoded bytes. Its labels and annotations (cert-manager writes half a dozen on each) and every
//     other entry are dropped. Most Secrets in a cluster are not TLS Secrets (Helm releases, tokens,
//     application credentials); this bounds the memory they take and keeps credentials the controller
//     has no use for out of its memory. A trimmed decoded TLS Secret kept a 304-byte struct and a map of
//     about 400 bytes beside its values; its record takes a quarter of that;
//   - a ConfigMap: its labels and binaryData, and data larger than nginx.MaxConfigMapData (see
//     transformConfigMap).
//
// Values that repeat across objects are shared rather than copied into each: namespaces, port names (and
// a Service port's target port name), published load-balancer addresses, the pointed-to values of an
// Ingress's pathType and class, and a Secret record's well-known data keys (modules.NewSecretRecord).
// Nothing may write into a cached object, so sharing is invisible to readers.
//
// The informer may hand the transform its own output again (client-go requires it to be idempotent):
// a record is returned as it is, and the other kinds' trimming leaves a trimmed object unchanged.
func cacheTransform(obj any) (any, error) {
	switch o := obj.(type) {
	case *endpoints.SliceRecord, *modules.ServiceRecord:
		return o, nil
	case *modules.SecretRecord:
		return o, nil
	case *discoveryv1.EndpointSlice:
		return transformEndpointSlice(o), nil
	case *corev1.Service:
		return transformService(o), nil
	case *corev1.Secret:
		return transformSecret(o), nil
	}
	obj, err := pipeline.StripTransform(obj)
	if err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		transformConfigMap(o)
	case *networkingv1.Ingress:
		transformIngress(o)
	}
	return obj, nil
}

// trimMeta drops the metadata that nothing reads on the kinds that modules only look up by name.
func trimMeta(m *metav1.ObjectMeta) {
	m.Namespace = sharedNamespaces.intern(m.Namespace)
	m.GenerateName, m.Finalizers, m.OwnerReferences, m.UID = "", nil, nil, ""
}

// transformService returns the record the cache keeps of s, with its namespace and port names shared
// with the other records' and only autoingress's annotations (nil for a Service without them). s is the
// decoded object, the transform's own: it is changed in place before the record takes those values.
func transformService(s *corev1.Service) *modules.ServiceRecord {
	s.Namespace = sharedNamespaces.intern(s.Namespace)
	var ann map[string]string
	for k, v := range s.Annotations {
		if strings.HasPrefix(k, autoingress.AnnotationExpose) {
			if ann == nil {
				ann = map[string]string{}
			}
			ann[k] = v
		}
	}
	s.Annotations = ann
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		p.Name = sharedNames.intern(p.Name)
		if p.TargetPort.Type == intstr.String {
			p.TargetPort.StrVal = sharedNames.intern(p.TargetPort.StrVal)
		}
	}
	return modules.NewServiceRecord(s)
}

// transformEndpointSlice returns the record the cache keeps of s, with its namespace and port names
// shared with the other records'. s is the decoded object, the transform's own: its port names are
// replaced in place with the shared copies before the record takes them.
func transformEndpointSlice(s *discoveryv1.EndpointSlice) *endpoints.SliceRecord {
	s.Namespace = sharedNamespaces.intern(s.Namespace)
	for i := range s.Ports {
		if n := s.Ports[i].Name; n != nil {
			*n = sharedNames.intern(*n)
		}
	}
	return endpoints.NewSliceRecord(s)
}

// transformSecret returns the record the cache keeps of s: its namespace shared with the other records',
// and only the data entries that some module reads (nil for the many Secrets without any). s is the
// decoded object, the transform's own: the dropped entries are deleted from its map before the record
// takes the rest.
func transformSecret(s *corev1.Secret) *modules.SecretRecord {
	s.Namespace = sharedNamespaces.intern(s.Namespace)
	for k, v := range s.Data {
		if !keepSecretEntry(k, v) {
			delete(s.Data, k)
		}
	}
	return modules.NewSecretRecord(s)
}

// keepSecretEntry reports whether a Secret's data entry is one that some module reads: the certificate,
// key and CA of TLS, the CRL that auth-tls-secret refuses, and basic authentication's entries.
func keepSecretEntry(k string, v []byte) bool {
	return k == certs.CertKey || k == certs.PrivateKeyKey || k == certs.CAKey || k == nginx.ClientCRLKey ||
		nginx.KeepsBasicAuthEntry(k, v)
}

// transformConfigMap: only custom-headers and auth-proxy-set-headers read ConfigMaps (their data, at most
// nginx.MaxConfigMapData bytes): a larger one is kept without its data, marked so that the translation
// can say why.
func transformConfigMap(c *corev1.ConfigMap) {
	trimMeta(&c.ObjectMeta)
	c.Labels, c.BinaryData, c.Immutable = nil, nil, nil
	size := 0
	for k, v := range c.Data {
		size += len(k) + len(v)
	}
	if size > nginx.MaxConfigMapData {
		c.Data = nil
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[nginx.ConfigMapDataDroppedAnnotation] = strconv.Itoa(size)
	}
}

// transformIngress keeps every field (the translation, autoingress and the status writer read nearly all
// of them) and shares the values that repeat across Ingresses.
func transformIngress(ing *networkingv1.Ingress) {
	ing.Namespace = sharedNamespaces.intern(ing.Namespace)
	ing.Spec.IngressClassName = sharedStringPtrs.intern(ing.Spec.IngressClassName)
	shareBackend := func(b *networkingv1.IngressBackend) {
		if b != nil && b.Service != nil {
			b.Service.Port.Name = sharedNames.intern(b.Service.Port.Name)
		}
	}
	shareBackend(ing.Spec.DefaultBackend)
	for i := range ing.Spec.Rules {
		if http := ing.Spec.Rules[i].HTTP; http != nil {
			for j := range http.Paths {
				p := &http.Paths[j]
				p.PathType = sharedPathType(p.PathType)
				shareBackend(&p.Backend)
			}
		}
	}
	// Every Ingress of the class publishes the same addresses.
	lb := ing.Status.LoadBalancer.Ingress
	for i := range lb {
		lb[i].IP = sharedAddresses.intern(lb[i].IP)
		lb[i].Hostname = sharedAddresses.intern(lb[i].Hostname)
	}
}

// The values shared pointers point at. Nothing writes through a cached object's pointers.
var (
	sharedPrefix, sharedExact, sharedImplSp = networkingv1.PathTypePrefix, networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific
)

// sharedPtr returns the one of shared that points at a value equal to *p, or p when none does (nil for nil).
func sharedPtr[T comparable](p *T, shared ...*T) *T {
	if p == nil {
		return nil
	}
	for _, s := range shared {
		if *s == *p {
			return s
		}
	}
	return p
}

func sharedPathType(p *networkingv1.PathType) *networkingv1.PathType {
	return sharedPtr(p, &sharedPrefix, &sharedExact, &sharedImplSp)
}

// maxShared bounds each intern table: a cluster has far fewer namespaces, port names and published
// addresses, and values past the bound are simply kept unshared, so no input makes a table grow without end.
// Each kind of value has a table of its own, so that many distinct values of one kind (every Ingress of
// another controller publishing its own load balancer) cannot crowd out another.
const maxShared = 4096

// maxSharedLen is the longest string an intern table keeps (a DNS name is at most 253 bytes).
const maxSharedLen = 256

var (
	sharedNamespaces = &stringTable{}
	sharedNames      = &stringTable{}            // port names (of Services and EndpointSlices)
	sharedAddresses  = &stringTable{}            // load-balancer addresses in Ingress status
	sharedStringPtrs = &ptrInternTable[string]{} // IngressClass names
)

// internTable maps a value to the one copy of it that objects share, for at most maxShared values. It is
// safe for concurrent use (each informer transforms on its own goroutine).
type internTable[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

// lookup returns the shared copy for k, making v that copy if k is new and the table has room.
func (t *internTable[K, V]) lookup(k K, v V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.m[k]; ok {
		return s
	}
	if t.m == nil {
		t.m = map[K]V{}
	}
	if len(t.m) < maxShared {
		t.m[k] = v
	}
	return v
}

// stringTable shares equal strings.
type stringTable struct {
	t internTable[string, string]
}

// intern returns the shared copy of s (equal to s).
func (t *stringTable) intern(s string) string {
	if s == "" || len(s) > maxSharedLen {
		return s
	}
	return t.t.lookup(s, s)
}

// ptrInternTable shares pointers to equal values.
type ptrInternTable[T comparable] struct {
	t internTable[T, *T]
}

// intern returns a shared pointer to a value equal to *p (nil for nil).
func (t *ptrInternTable[T]) intern(p *T) *T {
	if p == nil {
		return nil
	}
	if s, ok := any(*p).(string); ok && len(s) > maxSharedLen {
		return p
	}
	return t.t.lookup(*p, p)
}
