package endpoints

import (
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
)

// TestSliceRecord: a record keeps what Resolve and the informer read, in slices of exact length, and
// nothing of a slice whose addresses are not IPs.
func TestSliceRecord(t *testing.T) {
	s := gen.EndpointSlice("ns", "web-x7k2p", "web", gen.SlicePort("http", 8080), gen.ResourceVersion("7"),
		gen.Endpoint("192.0.2.1"), gen.Endpoint("192.0.2.2", gen.Terminating(true)))
	s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{}) // no address
	s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To("dns"), Port: ptr.To(int32(53)), Protocol: ptr.To(corev1.ProtocolUDP)},
		discoveryv1.EndpointPort{})
	r := NewSliceRecord(s)

	want := []sliceEndpoint{
		{address: "192.0.2.1", conditions: readySet | readyTrue | servingSet | servingTrue | terminatingSet},
		{address: "192.0.2.2", conditions: readySet | servingSet | servingTrue | terminatingSet | terminatingTrue},
	}
	if len(r.endpoints) != len(want) || cap(r.endpoints) != len(want) || r.endpoints[0] != want[0] || r.endpoints[1] != want[1] {
		t.Errorf("endpoints %+v (capacity %d), want %+v", r.endpoints, cap(r.endpoints), want)
	}
	wantPorts := []slicePort{{name: "http", port: 8080, hasPort: true}, {name: "dns", port: 53, protocol: protocolUDP, hasPort: true}, {}}
	if len(r.ports) != len(wantPorts) || cap(r.ports) != len(wantPorts) || r.ports[0] != wantPorts[0] || r.ports[1] != wantPorts[1] || r.ports[2] != wantPorts[2] {
		t.Errorf("ports %+v, want %+v", r.ports, wantPorts)
	}
	if r.ServiceName() != "web" || unsafe.StringData(r.service) != unsafe.StringData(r.name) {
		t.Errorf("Service %q, want web sharing the slice name's bytes", r.ServiceName())
	}
	if unsafe.StringData(r.name) == unsafe.StringData(s.Name) || unsafe.StringData(r.endpoints[0].address) == unsafe.StringData(s.Endpoints[0].Addresses[0]) {
		t.Error("the record keeps the decoded slice's strings, and the slots they sit in")
	}
	if key, err := cache.MetaNamespaceKeyFunc(r); err != nil || key != "ns/web-x7k2p" {
		t.Errorf("key %q (%v), want ns/web-x7k2p", key, err)
	}
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(cache.DeletedFinalStateUnknown{Key: "ns/web-x7k2p", Obj: r}); err != nil || key != "ns/web-x7k2p" {
		t.Errorf("tombstone key %q (%v)", key, err)
	}
	m, err := meta.Accessor(r)
	if err != nil || m.GetNamespace() != "ns" || m.GetName() != "web-x7k2p" || m.GetResourceVersion() != "7" {
		t.Errorf("meta.Accessor: %v, %v", m, err)
	}

	// A slice of a Service whose name is not the slice name's start, and one without the label.
	other := NewSliceRecord(gen.EndpointSlice("ns", "custom", "web"))
	if other.ServiceName() != "web" {
		t.Errorf("Service %q, want web", other.ServiceName())
	}
	unlabelled := gen.EndpointSlice("ns", "web-1", "web", gen.SlicePort("http", 8080), gen.Endpoint("192.0.2.1"))
	unlabelled.Labels = nil
	if NewSliceRecord(unlabelled).ServiceName() != "" {
		t.Error("a slice without the service-name label belongs to a Service")
	}

	fqdn := gen.EndpointSlice("ns", "ext-1", "ext", gen.SlicePort("http", 80), gen.Endpoint("example.com"))
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	if r := NewSliceRecord(fqdn); r.ports != nil || r.endpoints != nil || r.ServiceName() != "ext" {
		t.Errorf("FQDN slice record %+v, want its key and Service only", r)
	}
}

// TestProtocolOfSlicePorts: an unset or empty protocol is TCP; SCTP and unknown protocols match no TCP or
// UDP lookup.
func TestProtocolOfSlicePorts(t *testing.T) {
	svc := service(corev1.ServicePort{Name: "p", Port: 1}, corev1.ServicePort{Name: "p", Port: 1, Protocol: corev1.ProtocolUDP})
	for _, tc := range []struct {
		proto    *corev1.Protocol
		tcp, udp bool
	}{
		{nil, true, false},
		{ptr.To(corev1.Protocol("")), true, false},
		{ptr.To(corev1.ProtocolTCP), true, false},
		{ptr.To(corev1.ProtocolUDP), false, true},
		{ptr.To(corev1.ProtocolSCTP), false, false},
		{ptr.To(corev1.Protocol("QUIC")), false, false},
	} {
		s := slice("p", 8080, ep("192.0.2.1"))
		s.Ports[0].Protocol = tc.proto
		tcp := len(ResolveProtocol(svc, intstr.FromInt32(1), corev1.ProtocolTCP, records(s))) == 1
		udp := len(ResolveProtocol(svc, intstr.FromInt32(1), corev1.ProtocolUDP, records(s))) == 1
		if tcp != tc.tcp || udp != tc.udp {
			t.Errorf("slice port protocol %v: TCP %v, UDP %v; want %v, %v", ptr.Deref(tc.proto, "<unset>"), tcp, udp, tc.tcp, tc.udp)
		}
	}
}
