package endpoints

import (
	"context"
	"net"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

func service(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"}, Spec: corev1.ServiceSpec{Ports: ports}}
}

type epOpt func(*discoveryv1.Endpoint)

func notReady(e *discoveryv1.Endpoint)    { e.Conditions.Ready = ptr.To(false) }
func terminating(e *discoveryv1.Endpoint) { e.Conditions.Terminating = ptr.To(true) }
func serving(e *discoveryv1.Endpoint)     { e.Conditions.Serving = ptr.To(true) }
func notServing(e *discoveryv1.Endpoint)  { e.Conditions.Serving = ptr.To(false) }

func ep(addr string, opts ...epOpt) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func slice(portName string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port)}},
		Endpoints:   eps,
	}
}

// records returns the cache records of ss, as the informer cache holds them.
func records(ss ...*discoveryv1.EndpointSlice) []*SliceRecord {
	out := make([]*SliceRecord, len(ss))
	for i, s := range ss {
		out[i] = NewSliceRecord(s)
	}
	return out
}

func TestResolve(t *testing.T) {
	web := corev1.ServicePort{Name: "web", Port: 80, TargetPort: intstr.FromString("http")}
	metrics := corev1.ServicePort{Name: "metrics", Port: 9100}
	tests := map[string]struct {
		svc    *corev1.Service
		port   intstr.IntOrString
		slices []*discoveryv1.EndpointSlice
		want   []nginx.Endpoint
	}{
		"ready endpoints by port number": {
			svc: service(web), port: intstr.FromInt32(80),
			slices: []*discoveryv1.EndpointSlice{slice("web", 8080, ep("192.0.2.2"), ep("192.0.2.1"))},
			want:   []nginx.Endpoint{{Address: "192.0.2.1", Port: 8080}, {Address: "192.0.2.2", Port: 8080}},
		},
		"by port name": {
			svc: service(web), port: intstr.FromString("web"),
			slices: []*discoveryv1.EndpointSlice{slice("web", 8080, ep("192.0.2.1"))},
			want:   []nginx.Endpoint{{Address: "192.0.2.1", Port: 8080}},
		},
		"port picks the slice port of the same name": {
			svc: service(web, metrics), port: intstr.FromInt32(9100),
			slices: []*discoveryv1.EndpointSlice{slice("web", 8080, ep("192.0.2.1")), slice("metrics", 9100, ep("192.0.2.1"))},
			want:   []nginx.Endpoint{{Address: "192.0.2.1", Port: 9100}},
		},
		"one number for UDP and TCP (HTTP/3): the TCP port": {
			svc:  service(corev1.ServicePort{Name: "h3", Port: 443, Protocol: corev1.ProtocolUDP}, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
			port: intstr.FromInt32(443),
			slices: []*discoveryv1.EndpointSlice{{
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports: []discoveryv1.EndpointPort{
					{Name: ptr.To("h3"), Port: ptr.To(int32(8443)), Protocol: ptr.To(corev1.ProtocolUDP)},
					{Name: ptr.To("https"), Port: ptr.To(int32(8444)), Protocol: ptr.To(corev1.ProtocolTCP)},
				},
				Endpoints: []discoveryv1.Endpoint{ep("192.0.2.1")},
			}},
			want: []nginx.Endpoint{{Address: "192.0.2.1", Port: 8444}},
		},
		"unknown service port": {
			svc: service(web), port: intstr.FromInt32(81),
			slices: []*discoveryv1.EndpointSlice{slice("web", 8080, ep("192.0.2.1"))},
		},
		"not ready and terminating are excluded": {
			svc: service(web), port: intstr.FromInt32(80),
			slices: []*discoveryv1.EndpointSlice{slice("web", 8080, ep("192.0.2.1"), ep("192.0.2.2", notReady), ep("192.0.2.3", terminating, serving))},
			want:   []nginx.Endpoint{{Address: "192.0.2.1", Port: 8080}},
		},
		"serving terminating endpoints are used when none is ready": {
			svc: service(web), port: intstr.FromInt32(80),
			slices: []*discoveryv1.EndpointSlice{slice("web", 8080, ep("192.0.2.2", notReady, terminating, serving), ep("192.0.2.3", notReady, terminating, notServing))},
			want:   []nginx.Endpoint{{Address: "192.0.2.2", Port: 8080}},
		},
		"endpoints across slices are merged and de-duplicated": {
			svc: service(web), port: intstr.FromInt32(80),
			slices: []*discoveryv1.EndpointSlice{slice("web", 8080, ep("192.0.2.1")), slice("web", 8080, ep("192.0.2.1"), ep("192.0.2.9"))},
			want:   []nginx.Endpoint{{Address: "192.0.2.1", Port: 8080}, {Address: "192.0.2.9", Port: 8080}},
		},
		"nil ready means ready": {
			svc: service(web), port: intstr.FromInt32(80),
			slices: []*discoveryv1.EndpointSlice{slice("web", 8080, discoveryv1.Endpoint{Addresses: []string{"192.0.2.4"}})},
			want:   []nginx.Endpoint{{Address: "192.0.2.4", Port: 8080}},
		},
		"FQDN slices and invalid addresses are skipped": {
			svc: service(web), port: intstr.FromInt32(80),
			slices: []*discoveryv1.EndpointSlice{
				{AddressType: discoveryv1.AddressTypeFQDN, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("web"), Port: ptr.To(int32(8080))}}, Endpoints: []discoveryv1.Endpoint{ep("example.com")}},
				slice("web", 8080, ep("not-an-ip"), ep("192.0.2.5")),
			},
			want: []nginx.Endpoint{{Address: "192.0.2.5", Port: 8080}},
		},
		"IPv6 slices; the first address of an endpoint only; endpoints without an address are skipped": {
			svc: service(web), port: intstr.FromString("web"),
			slices: []*discoveryv1.EndpointSlice{
				{AddressType: discoveryv1.AddressTypeIPv6, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("web"), Port: ptr.To(int32(8080))}},
					Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"2001:db8::2", "2001:db8::3"}}, {}}},
				slice("web", 8080, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}),
			},
			want: []nginx.Endpoint{{Address: "2001:db8::2", Port: 8080}},
		},
		"a slice port without a number is skipped": {
			svc: service(web), port: intstr.FromString("web"),
			slices: []*discoveryv1.EndpointSlice{
				{AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("web")}}, Endpoints: []discoveryv1.Endpoint{ep("192.0.2.1")}},
				slice("web", 8080, ep("192.0.2.2")),
			},
			want: []nginx.Endpoint{{Address: "192.0.2.2", Port: 8080}},
		},
		"an unset ready condition is ready; an unset serving condition follows ready": {
			svc: service(web), port: intstr.FromString("web"),
			slices: []*discoveryv1.EndpointSlice{slice("web", 8080,
				discoveryv1.Endpoint{Addresses: []string{"192.0.2.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}},
				discoveryv1.Endpoint{Addresses: []string{"192.0.2.2"}, Conditions: discoveryv1.EndpointConditions{Terminating: ptr.To(true)}},
			)},
			want: []nginx.Endpoint{{Address: "192.0.2.2", Port: 8080}},
		},
		"when no slice has a ready endpoint, the serving ones of every slice are used": {
			svc: service(web), port: intstr.FromString("web"),
			slices: []*discoveryv1.EndpointSlice{
				slice("web", 8080, ep("192.0.2.1", notReady, terminating, serving)),
				slice("web", 8080, ep("192.0.2.2", terminating, notServing), ep("192.0.2.3", terminating, serving)),
			},
			want: []nginx.Endpoint{{Address: "192.0.2.1", Port: 8080}, {Address: "192.0.2.3", Port: 8080}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Resolve(tc.svc, tc.port, records(tc.slices...))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Resolve = %v, want %v", got, tc.want)
			}
		})
	}
}

type fakeResolver map[string][]net.IPAddr

func (f fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestResolveExternalName(t *testing.T) {
	svc := gen.Service("ns", "ext", gen.ExternalName("db.example.com"), gen.Port("pg", 5432))
	r := fakeResolver{"db.example.com": {{IP: net.ParseIP("192.0.2.7")}, {IP: net.ParseIP("2001:db8::1")}}}
	got, err := ResolveExternalName(context.Background(), r, svc, intstr.FromString("pg"))
	if err != nil {
		t.Fatal(err)
	}
	want := []nginx.Endpoint{{Address: "192.0.2.7", Port: 5432}, {Address: "2001:db8::1", Port: 5432}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A UDP service names the Service's UDP port.
	udp := gen.Service("ns", "dns", gen.ExternalName("db.example.com"), gen.Port("dns-tcp", 5300), gen.UDPPort("dns", 5353))
	if got, err := ExternalNameEndpointsProtocol(udp, intstr.FromString("dns"), corev1.ProtocolUDP, r["db.example.com"]); err != nil || !slices.Equal(got, []nginx.Endpoint{{Address: "192.0.2.7", Port: 5353}, {Address: "2001:db8::1", Port: 5353}}) {
		t.Errorf("UDP port by name: got %v, %v", got, err)
	}
	if _, err := ExternalNameEndpointsProtocol(udp, intstr.FromString("dns-tcp"), corev1.ProtocolUDP, r["db.example.com"]); err == nil {
		t.Error("a UDP service naming a TCP port: want an error")
	}
	if _, err := ResolveExternalName(context.Background(), r, svc, intstr.FromString("nope")); err == nil {
		t.Fatal("unknown named port: want an error")
	}
	svc.Spec.ExternalName = "missing.example.com"
	if _, err := ResolveExternalName(context.Background(), r, svc, intstr.FromInt32(80)); err == nil {
		t.Fatal("unresolvable name: want an error")
	}
}

func TestSafeEndpoints(t *testing.T) {
	eps := []nginx.Endpoint{
		{Address: "192.0.2.1", Port: 80}, {Address: "127.0.0.1", Port: 10246}, {Address: "::1", Port: 10246},
		{Address: "169.254.169.254", Port: 80}, {Address: "0.0.0.0", Port: 80}, {Address: "224.0.0.1", Port: 80},
		{Address: "::ffff:127.0.0.1", Port: 10246}, {Address: "2001:db8::1", Port: 80},
	}
	got, dropped := SafeEndpoints(eps, false)
	want := []nginx.Endpoint{{Address: "192.0.2.1", Port: 80}, {Address: "2001:db8::1", Port: 80}}
	if !slices.Equal(got, want) || dropped != 6 {
		t.Fatalf("cluster mode: got %v (dropped %d), want %v (dropped 6)", got, dropped, want)
	}
	got, _ = SafeEndpoints(eps, true)
	if len(got) != 5 {
		t.Fatalf("local mode keeps loopback: got %v", got)
	}
}

// TestResolveProtocol: a Service with a TCP and a UDP port of the same number (DNS) gives each protocol
// the endpoints' port of its own protocol; an unnamed slice port without a protocol is TCP.
func TestResolveProtocol(t *testing.T) {
	svc := service(
		corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
	)
	s := &discoveryv1.EndpointSlice{
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns-tcp"), Port: ptr.To(int32(5300))},
			{Name: ptr.To("dns"), Port: ptr.To(int32(5353)), Protocol: ptr.To(corev1.ProtocolUDP)},
		},
		Endpoints: []discoveryv1.Endpoint{ep("192.0.2.1")},
	}
	for _, tc := range []struct {
		proto corev1.Protocol
		port  intstr.IntOrString
		want  []nginx.Endpoint
	}{
		{corev1.ProtocolTCP, intstr.FromInt32(53), []nginx.Endpoint{{Address: "192.0.2.1", Port: 5300}}},
		{corev1.ProtocolUDP, intstr.FromInt32(53), []nginx.Endpoint{{Address: "192.0.2.1", Port: 5353}}},
		{corev1.ProtocolUDP, intstr.FromString("dns"), []nginx.Endpoint{{Address: "192.0.2.1", Port: 5353}}},
		{corev1.ProtocolUDP, intstr.FromString("dns-tcp"), nil},
		{corev1.ProtocolTCP, intstr.FromString("dns"), nil},
	} {
		got := ResolveProtocol(svc, tc.port, tc.proto, records(s))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s port %s: got %v, want %v", tc.proto, tc.port.String(), got, tc.want)
		}
	}
}
