package modules

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/reference"
)

// fullService is a Service as the API server sends it, with every field a cluster sets.
func fullService() *corev1.Service {
	deleted := metav1.NewTime(time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC))
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "team-a", UID: "3f2a9c1e-0001-4b7d-9e21-000000000001", ResourceVersion: "18400001",
			Generation: 1, CreationTimestamp: metav1.NewTime(deleted.Add(-time.Hour)), DeletionTimestamp: &deleted,
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"ingress-reactor.io/expose": "web.example.com"},
			Finalizers:  []string{"service.kubernetes.io/load-balancer-cleanup"},
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http"), NodePort: 30080},
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353), NodePort: 30053},
				{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 9, TargetPort: intstr.FromInt32(9)},
				{Port: 81},
			},
			Selector:   map[string]string{"app": "web"},
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.1"}}}},
	}
}

// TestServiceRecordKeepsWhatReadersRead: the Service a record builds holds the metadata and spec fields
// modules read, exactly, and nothing else.
func TestServiceRecordKeepsWhatReadersRead(t *testing.T) {
	s := fullService()
	got := NewServiceRecord(s.DeepCopy()).Service()
	want := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
			DeletionTimestamp: s.DeletionTimestamp, Annotations: s.Annotations,
		},
		Spec: corev1.ServiceSpec{
			Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP,
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353)},
				{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 9, TargetPort: intstr.FromInt32(9)},
				{Port: 81},
			},
		},
	}
	if !got.DeletionTimestamp.Equal(want.DeletionTimestamp) {
		t.Errorf("deletion timestamp %v, want %v", got.DeletionTimestamp, want.DeletionTimestamp)
	}
	got.DeletionTimestamp, want.DeletionTimestamp = nil, nil // compared above: the location differs
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Service from the record:\n%+v\nwant\n%+v", got, want)
	}

	for _, c := range []struct {
		name string
		spec corev1.ServiceSpec
	}{
		{"external name", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.net",
			Ports: []corev1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432, TargetPort: intstr.FromInt32(5432)}}}},
		{"headless", corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone}},
		{"node port", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.11"}},
		{"no type, no ports", corev1.ServiceSpec{}},
	} {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", ResourceVersion: "7"}, Spec: c.spec}
		want := s.DeepCopy()
		if got := NewServiceRecord(s).Service(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Service from the record %+v, want %+v", c.name, got, want)
		}
	}

	// Values the API server refuses read as unset (a type) or as no protocol a lookup asks for.
	odd := &corev1.Service{Spec: corev1.ServiceSpec{Type: "Mystery", Ports: []corev1.ServicePort{{Port: 1, Protocol: "QUIC"}}}}
	got = NewServiceRecord(odd).Service()
	if got.Spec.Type != "" || got.Spec.Ports[0].Protocol != UnknownProtocol {
		t.Errorf("type %q, protocol %q: want unset and %q", got.Spec.Type, got.Spec.Ports[0].Protocol, UnknownProtocol)
	}
	// A deletion timestamp that UnixNano cannot hold (the zero time) is still one.
	odd.DeletionTimestamp = &metav1.Time{}
	if got := NewServiceRecord(odd).Service(); got.DeletionTimestamp == nil {
		t.Error("a zero deletion timestamp was lost")
	}
}

// TestServiceRecordIsCompact: ports in a slice of exact length, no annotations map for a Service
// without annotations, the caller's namespace, port names and annotations map kept as they are (the app
// shares them), and the record's own strings in one allocation, none of them the decoded ones.
func TestServiceRecordIsCompact(t *testing.T) {
	s := fullService()
	s.Spec.ExternalName = "unused.example.net"
	ports := make([]corev1.ServicePort, len(s.Spec.Ports), 2*len(s.Spec.Ports))
	copy(ports, s.Spec.Ports)
	s.Spec.Ports = ports
	r := NewServiceRecord(s)

	if len(r.ports) != 4 || cap(r.ports) != 4 {
		t.Errorf("ports: len %d, cap %d; want 4, 4", len(r.ports), cap(r.ports))
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	if !same(r.namespace, s.Namespace) || !same(r.ports[0].name, s.Spec.Ports[0].Name) || !same(r.ports[0].targetName, s.Spec.Ports[0].TargetPort.StrVal) {
		t.Error("the namespace, a port name or a target port name is a copy, not the caller's (shared) string")
	}
	if reflect.ValueOf(r.annotations).UnsafePointer() != reflect.ValueOf(s.Annotations).UnsafePointer() {
		t.Error("the annotations map is not the caller's")
	}
	own := []string{s.Name, string(s.UID), s.ResourceVersion, s.Spec.ClusterIP, s.Spec.ExternalName}
	if want := strings.Join(own, ""); r.text != want {
		t.Errorf("text %q, want %q", r.text, want)
	}
	start, end := uintptr(unsafe.Pointer(unsafe.StringData(r.text))), uintptr(len(r.text))
	end += start
	for i, o := range own {
		p := r.part(i)
		if p != o {
			t.Errorf("part %d is %q, want %q", i, p, o)
		}
		if a := uintptr(unsafe.Pointer(unsafe.StringData(p))); a < start || a+uintptr(len(p)) > end {
			t.Errorf("part %d (%q) is not in the record's one allocation", i, p)
		}
		if same(p, o) {
			t.Errorf("part %d (%q) is the decoded string", i, p)
		}
	}

	plain := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{}}}
	if r := NewServiceRecord(plain); r.annotations != nil || r.ports != nil {
		t.Errorf("a Service without annotations or ports keeps %v, %v; want nil, nil", r.annotations, r.ports)
	}
	if size := unsafe.Sizeof(ServiceRecord{}); size > 96 {
		t.Errorf("a record takes %d bytes, more than its 96-byte size class", size)
	}
}

// TestServiceRecordKeysLikeItsService: the informer keys a record as it keys its Service, and
// meta.Accessor reads its key, UID and resource version (resyncs are told from updates by it).
func TestServiceRecordKeysLikeItsService(t *testing.T) {
	s := fullService()
	r := NewServiceRecord(s.DeepCopy())
	for _, f := range []cache.KeyFunc{cache.MetaNamespaceKeyFunc, cache.DeletionHandlingMetaNamespaceKeyFunc} {
		want, _ := f(s)
		if got, err := f(r); err != nil || got != want {
			t.Errorf("key %q (%v), want %q", got, err, want)
		}
	}
	m, err := meta.Accessor(r)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetNamespace() != s.Namespace || m.GetName() != s.Name || m.GetUID() != s.UID || m.GetResourceVersion() != s.ResourceVersion {
		t.Errorf("metadata %+v, want the Service's key, UID and resource version", m)
	}
	if r.GetName() != s.Name || r.GetNamespace() != s.Namespace || r.GetUID() != s.UID || r.GetResourceVersion() != s.ResourceVersion {
		t.Error("the record's getters differ from the Service")
	}
	// An Event recorder refers to the Service it is given as to the Service itself.
	got, err := reference.GetReference(scheme.Scheme, r.Service())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := reference.GetReference(scheme.Scheme, s)
	if *got != *want {
		t.Errorf("Event reference %+v, want %+v", got, want)
	}
}

// TestServiceOfAndServices: records, Services cached without the transform and tombstones of either
// read as Services; a lookup by key finds each kind and nothing else.
func TestServiceOfAndServices(t *testing.T) {
	s := fullService()
	r := NewServiceRecord(s.DeepCopy())
	plain := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "team-a"}}
	for name, obj := range map[string]any{
		"record":          r,
		"tombstone":       cache.DeletedFinalStateUnknown{Key: "team-a/web", Obj: r},
		"service":         plain,
		"plain tombstone": cache.DeletedFinalStateUnknown{Key: "team-a/plain", Obj: plain},
		"empty tombstone": cache.DeletedFinalStateUnknown{Key: "team-a/web"},
		"another kind":    &corev1.Secret{},
		"nothing":         nil,
		"nil record":      (*ServiceRecord)(nil),
		"nil service":     (*corev1.Service)(nil),
	} {
		svc, ok := ServiceOf(obj)
		switch name {
		case "record", "tombstone":
			if !ok || svc.Name != "web" || svc.UID != s.UID || len(svc.Spec.Ports) != 4 {
				t.Errorf("%s: %+v, %v; want the record's Service", name, svc, ok)
			}
		case "service", "plain tombstone":
			if !ok || svc != plain {
				t.Errorf("%s: %+v, %v; want the Service itself", name, svc, ok)
			}
		default:
			if ok || svc != nil {
				t.Errorf("%s: %+v, %v; want none", name, svc, ok)
			}
		}
	}

	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range []any{r, plain} {
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	services := Services{store: store}
	if svc, ok := services.Get(types.NamespacedName{Namespace: "team-a", Name: "web"}); !ok || svc.ResourceVersion != s.ResourceVersion {
		t.Errorf("lookup of the record: %+v, %v", svc, ok)
	}
	if svc, ok := services.Get(types.NamespacedName{Namespace: "team-a", Name: "plain"}); !ok || svc != plain {
		t.Errorf("lookup of the plain Service: %+v, %v", svc, ok)
	}
	if svc, ok := services.Get(types.NamespacedName{Namespace: "team-b", Name: "web"}); ok || svc != nil {
		t.Errorf("lookup of a missing Service: %+v, %v", svc, ok)
	}
	// Each lookup builds its own Service: a caller's change never reaches the next one.
	a, _ := services.Get(types.NamespacedName{Namespace: "team-a", Name: "web"})
	a.Spec.Ports[0].Port = 1
	if b, _ := services.Get(types.NamespacedName{Namespace: "team-a", Name: "web"}); b.Spec.Ports[0].Port != 80 {
		t.Error("a lookup returned a Service another lookup changed")
	}
}
