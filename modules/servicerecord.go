package modules

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/internal/strpack"
)

// ServiceRecord is what the shared Service informer's cache holds instead of a Service: of its metadata
// the namespace, name, UID (autoingress writes it into owner references and Events), resource version
// (informers tell updates from resyncs by it), deletion timestamp (autoingress leaves a Service that is
// being deleted alone) and the annotations the app's transform kept (autoingress's, nil for nearly every Service); of its spec the type, cluster IP, external
// name and ports (name, protocol, number and target port). Nothing reads a Service's node ports, labels,
// selector or status. A decoded Service of two ports trimmed to those fields still kept 928 bytes (a
// 592-byte struct, 88 bytes per port); its record keeps 264 (BenchmarkCacheTransformRetained in app).
//
// The app's cache transform converts each Service with NewServiceRecord; that is the one place that does.
// The cache then holds no *corev1.Service, so the informer's generated lister must not be used on it (it
// would panic): modules read it through Services (a lookup by key), and the objects its event handlers
// and tombstones carry through ServiceOf. Both hand out a *corev1.Service built for the caller (Service),
// which the cache never keeps. A record is never modified once built: the cache, event handlers and
// tombstones share it.
type ServiceRecord struct {
	namespace string
	// text holds the name, UID, resource version, cluster IP and external name one after the other; ends
	// says where each of the first four ends (the external name is the rest).
	text string
	ends [4]uint32
	typ  serviceType
	// deletion is the deletion timestamp in nanoseconds since the Unix epoch, 0 when there is none. In
	// the padding after typ it costs nothing: a record takes 96 bytes (a size class) with or without it.
	deletion    int64
	ports       []servicePort
	annotations map[string]string
}

// servicePort is a Service port: its name, protocol, number and target port (a number, or the name of a
// container port when targetName is set).
type servicePort struct {
	name, targetName   string
	port, targetNumber int32
	protocol           protocol
}

// serviceType is a Service's type. A type that Kubernetes does not define (the API server refuses one)
// reads as unset; nothing tells the two apart.
type serviceType uint8

const (
	typeUnset serviceType = iota
	typeClusterIP
	typeNodePort
	typeLoadBalancer
	typeExternalName
)

var serviceTypes = [...]corev1.ServiceType{
	typeUnset:        "",
	typeClusterIP:    corev1.ServiceTypeClusterIP,
	typeNodePort:     corev1.ServiceTypeNodePort,
	typeLoadBalancer: corev1.ServiceTypeLoadBalancer,
	typeExternalName: corev1.ServiceTypeExternalName,
}

func serviceTypeFrom(t corev1.ServiceType) serviceType {
	for i, s := range serviceTypes {
		if s == t {
			return serviceType(i)
		}
	}
	return typeUnset
}

// protocol is a port's protocol.
type protocol uint8

const (
	protocolUnset protocol = iota // read as TCP by every reader, as the API server defaults it
	protocolTCP
	protocolUDP
	protocolSCTP
	protocolOther
)

// UnknownProtocol is the protocol a materialized Service's port has when its Service named one that
// Kubernetes does not define (the API server refuses one): no lookup for TCP or UDP finds that port.
const UnknownProtocol corev1.Protocol = "Unknown"

var protocols = [...]corev1.Protocol{
	protocolUnset: "",
	protocolTCP:   corev1.ProtocolTCP,
	protocolUDP:   corev1.ProtocolUDP,
	protocolSCTP:  corev1.ProtocolSCTP,
	protocolOther: UnknownProtocol,
}

func protocolFrom(p corev1.Protocol) protocol {
	for i, s := range protocols[:protocolOther] {
		if s == p {
			return protocol(i)
		}
	}
	return protocolOther
}

// NewServiceRecord returns the record of s. It keeps s's namespace, port names, target port names and
// annotations map as they are, so values that the caller interned or trimmed in s before the call are
// what the record holds; its own strings (name, UID, resource version, cluster IP, external name) are
// copied into one allocation: kept where the decoder put them, each would pin a small slot amid the
// garbage the rest of the decoded Service leaves behind. Nothing else of s is kept.
func NewServiceRecord(s *corev1.Service) *ServiceRecord {
	r := &ServiceRecord{
		namespace:   s.Namespace,
		typ:         serviceTypeFrom(s.Spec.Type),
		annotations: s.Annotations,
	}
	if len(r.annotations) == 0 {
		r.annotations = nil
	}
	if d := s.DeletionTimestamp; d != nil {
		// Exact from 1678 to 2262. A timestamp at the epoch, or the zero time of an object built by
		// hand, keeps only that there is one.
		if r.deletion = d.UnixNano(); r.deletion == 0 || d.IsZero() {
			r.deletion = 1
		}
	}
	r.text = strpack.Join([]string{s.Name, string(s.UID), s.ResourceVersion, s.Spec.ClusterIP, s.Spec.ExternalName}, r.ends[:])
	if len(s.Spec.Ports) > 0 {
		r.ports = make([]servicePort, len(s.Spec.Ports))
		for i := range s.Spec.Ports {
			p := &s.Spec.Ports[i]
			sp := &r.ports[i]
			sp.name, sp.port, sp.protocol = p.Name, p.Port, protocolFrom(p.Protocol)
			if p.TargetPort.Type == intstr.String {
				sp.targetName = p.TargetPort.StrVal
			} else {
				sp.targetNumber = p.TargetPort.IntVal
			}
		}
	}
	return r
}

func (r *ServiceRecord) part(i int) string {
	start := uint32(0)
	if i > 0 {
		start = r.ends[i-1]
	}
	if i == len(r.ends) {
		return r.text[start:]
	}
	return r.text[start:r.ends[i]]
}

// GetNamespace returns the Service's namespace.
func (r *ServiceRecord) GetNamespace() string { return r.namespace }

// GetName returns the Service's name.
func (r *ServiceRecord) GetName() string { return r.part(0) }

// GetUID returns the Service's UID.
func (r *ServiceRecord) GetUID() types.UID { return types.UID(r.part(1)) }

// GetResourceVersion returns the Service's resource version: informers tell updates from resyncs by it.
func (r *ServiceRecord) GetResourceVersion() string { return r.part(2) }

// GetObjectMeta makes the record readable by meta.Accessor, which the informer's key function, its
// update handling and the handlers' key functions and resource-version filters use. The metadata is
// built on each call, garbage once read rather than kept in every record, and holds the namespace, name,
// UID and resource version only.
func (r *ServiceRecord) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: r.namespace, Name: r.GetName(), UID: r.GetUID(), ResourceVersion: r.GetResourceVersion()}
}

// Service returns a new Service holding what the record keeps: in its metadata the namespace, name,
// UID, resource version, annotations and deletion timestamp; in its spec the type, ports, cluster IP and external
// name. It is the caller's, garbage once read; its annotations map is the record's own and must not be
// written to (nothing writes into objects read from an informer cache).
func (r *ServiceRecord) Service() *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       r.namespace,
			Name:            r.GetName(),
			UID:             r.GetUID(),
			ResourceVersion: r.GetResourceVersion(),
			Annotations:     r.annotations,
		},
		Spec: corev1.ServiceSpec{
			Type:         serviceTypes[r.typ],
			ClusterIP:    r.part(3),
			ExternalName: r.part(4),
		},
	}
	if r.deletion != 0 {
		s.DeletionTimestamp = &metav1.Time{Time: time.Unix(0, r.deletion)}
	}
	if len(r.ports) > 0 {
		s.Spec.Ports = make([]corev1.ServicePort, len(r.ports))
		for i, p := range r.ports {
			sp := &s.Spec.Ports[i]
			sp.Name, sp.Port, sp.Protocol = p.name, p.port, protocols[p.protocol]
			if p.targetName != "" {
				sp.TargetPort = intstr.FromString(p.targetName)
			} else {
				sp.TargetPort = intstr.FromInt32(p.targetNumber)
			}
		}
	}
	return s
}

// ServiceOf returns the Service that an object of the shared Service informer stands for: a record's
// Service (built for the caller), a *corev1.Service as it is (a cache filled without the app's
// transform, as in module tests), or either of them in a tombstone (cache.DeletedFinalStateUnknown).
// ok is false for anything else, a tombstone without its object too.
func ServiceOf(obj any) (svc *corev1.Service, ok bool) {
	if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = tomb.Obj
	}
	switch o := obj.(type) {
	case *ServiceRecord:
		if o != nil {
			return o.Service(), true
		}
	case *corev1.Service:
		if o != nil {
			return o, true
		}
	}
	return nil, false
}

// Services looks Services up in the shared Service informer's cache by namespace and name. It replaces the
// generated Service lister, which cannot read the ServiceRecords that the cache holds.
type Services struct {
	store cache.Store
}

// NewServices returns the lookup of the factory's Service informer (which it registers, as the
// lister would).
func NewServices(f informers.SharedInformerFactory) Services {
	return Services{store: f.Core().V1().Services().Informer().GetStore()}
}

// Get returns the cached Service key (built for the caller: see ServiceOf), and false when the cache holds
// none.
func (s Services) Get(key types.NamespacedName) (*corev1.Service, bool) {
	obj, exists, err := s.store.GetByKey(key.Namespace + "/" + key.Name)
	if err != nil || !exists {
		return nil, false
	}
	return ServiceOf(obj)
}
