package status

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseAddresses(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []Address
		wantErr string
	}{
		"empty":                {in: "", want: nil},
		"one IPv4":             {in: "192.0.2.10", want: []Address{ip("192.0.2.10")}},
		"IPv6 canonical form":  {in: "2001:DB8:0:0::1", want: []Address{ip("2001:db8::1")}},
		"IPv4-mapped IPv6":     {in: "::ffff:192.0.2.1", want: []Address{ip("192.0.2.1")}},
		"hostname lower-cased": {in: "LB.Example.COM.", want: []Address{host("lb.example.com")}},
		"mixed, spaces, blanks and duplicates are sorted and merged": {
			in:   " lb.example.com, 192.0.2.10 ,,2001:db8::1,192.0.2.9,192.0.2.10",
			want: []Address{ip("192.0.2.9"), ip("192.0.2.10"), ip("2001:db8::1"), host("lb.example.com")},
		},
		"not a name":      {in: "192.0.2.1,not_a_host", wantErr: `"not_a_host" is neither`},
		"URL is rejected": {in: "http://lb.example.com", wantErr: "neither an IP address nor a DNS name"},
		"zoned IPv6":      {in: "fe80::1%eth0", wantErr: "zoned"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseAddresses(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseAddresses(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAddresses(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseAddresses(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestEqualIgnoresOrderAndDuplicates(t *testing.T) {
	port := func(p int32) []networkingv1.IngressPortStatus {
		return []networkingv1.IngressPortStatus{{Port: p, Protocol: corev1.ProtocolTCP}}
	}
	tests := map[string]struct {
		a, b []Address
		want bool
	}{
		"both empty":                {a: nil, b: []Address{}, want: true},
		"same order":                {a: []Address{ip("192.0.2.1"), host("a.example")}, b: []Address{ip("192.0.2.1"), host("a.example")}, want: true},
		"other order":               {a: []Address{host("a.example"), ip("192.0.2.1")}, b: []Address{ip("192.0.2.1"), host("a.example")}, want: true},
		"duplicate in one":          {a: []Address{ip("192.0.2.1"), ip("192.0.2.1")}, b: []Address{ip("192.0.2.1")}, want: true},
		"different IP":              {a: []Address{ip("192.0.2.1")}, b: []Address{ip("192.0.2.2")}, want: false},
		"empty against one":         {a: nil, b: []Address{ip("192.0.2.1")}, want: false},
		"IP and hostname in one":    {a: []Address{{IP: "192.0.2.1", Hostname: "a.example"}}, b: []Address{ip("192.0.2.1")}, want: false},
		"ports differ":              {a: []Address{{IP: "192.0.2.1", Ports: port(80)}}, b: []Address{ip("192.0.2.1")}, want: false},
		"same ports in other order": {a: []Address{{IP: "192.0.2.1", Ports: append(port(443), port(80)...)}}, b: []Address{{IP: "192.0.2.1", Ports: append(port(80), port(443)...)}}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Equal(tc.a, tc.b); got != tc.want {
				t.Errorf("Equal(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := Equal(tc.b, tc.a); got != tc.want {
				t.Errorf("Equal is not symmetric for %v and %v", tc.a, tc.b)
			}
		})
	}
}

func TestNormalizeSortsIPsNumericallyBeforeHostnames(t *testing.T) {
	in := []Address{host("b.example"), ip("10.0.0.10"), host("a.example"), ip("2001:db8::1"), ip("10.0.0.9")}
	want := []Address{ip("10.0.0.9"), ip("10.0.0.10"), ip("2001:db8::1"), host("a.example"), host("b.example")}
	if got := Normalize(in); !reflect.DeepEqual(got, want) {
		t.Errorf("Normalize = %v, want %v", String(got), String(want))
	}
	if in[0].Hostname != "b.example" {
		t.Errorf("Normalize changed its input: %v", in)
	}
}

func TestRemoveTakesBackOnlyPublishedAddresses(t *testing.T) {
	tests := map[string]struct {
		current, published, want []Address
	}{
		"all ours": {current: []Address{ip("192.0.2.1"), host("lb.example")}, published: []Address{host("lb.example"), ip("192.0.2.1")}, want: nil},
		"someone else's stays": {
			current: []Address{ip("192.0.2.1"), ip("198.51.100.7")}, published: []Address{ip("192.0.2.1")}, want: []Address{ip("198.51.100.7")},
		},
		"nothing published": {current: []Address{ip("192.0.2.1")}, published: nil, want: []Address{ip("192.0.2.1")}},
		"ports ignored": {
			current:   []Address{{IP: "192.0.2.1", Ports: []networkingv1.IngressPortStatus{{Port: 80}}}},
			published: []Address{ip("192.0.2.1")}, want: nil,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Remove(tc.current, tc.published); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Remove(%v, %v) = %v, want %v", tc.current, tc.published, got, tc.want)
			}
			if want := len(tc.want) != len(tc.current); Overlaps(tc.current, tc.published) != want {
				t.Errorf("Overlaps(%v, %v) = %v, want %v", tc.current, tc.published, !want, want)
			}
		})
	}
}

func TestServiceAddresses(t *testing.T) {
	svc := func(typ corev1.ServiceType, lb []corev1.LoadBalancerIngress, external ...string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: testNamespace},
			Spec:       corev1.ServiceSpec{Type: typ, ExternalIPs: external},
			Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: lb}},
		}
	}
	tests := map[string]struct {
		svc  *corev1.Service
		want []Address
	}{
		"load balancer IPs": {
			svc:  svc(corev1.ServiceTypeLoadBalancer, []corev1.LoadBalancerIngress{{IP: "203.0.113.2"}, {IP: "203.0.113.1"}}),
			want: []Address{ip("203.0.113.1"), ip("203.0.113.2")},
		},
		"load balancer hostname": {
			svc:  svc(corev1.ServiceTypeLoadBalancer, []corev1.LoadBalancerIngress{{Hostname: "abc.elb.example"}}),
			want: []Address{host("abc.elb.example")},
		},
		"load balancer with IP and hostname keeps both": {
			svc:  svc(corev1.ServiceTypeLoadBalancer, []corev1.LoadBalancerIngress{{IP: "203.0.113.1", Hostname: "lb.example"}}),
			want: []Address{{IP: "203.0.113.1", Hostname: "lb.example"}},
		},
		"load balancer wins over external IPs": {
			svc:  svc(corev1.ServiceTypeLoadBalancer, []corev1.LoadBalancerIngress{{IP: "203.0.113.1"}}, "198.51.100.1"),
			want: []Address{ip("203.0.113.1")},
		},
		"pending load balancer falls back to external IPs": {
			svc:  svc(corev1.ServiceTypeLoadBalancer, nil, "198.51.100.2", "198.51.100.1"),
			want: []Address{ip("198.51.100.1"), ip("198.51.100.2")},
		},
		"ClusterIP with external IPs":                      {svc: svc(corev1.ServiceTypeClusterIP, nil, "198.51.100.1"), want: []Address{ip("198.51.100.1")}},
		"ClusterIP without external IPs publishes nothing": {svc: svc(corev1.ServiceTypeClusterIP, nil), want: nil},
		"ExternalName publishes its name": {
			svc:  &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "Edge.Example.NET."}},
			want: []Address{host("edge.example.net")},
		},
		"nil": {svc: nil, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ServiceAddresses(tc.svc); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ServiceAddresses = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeAddresses(t *testing.T) {
	tests := map[string]struct {
		node          *corev1.Node
		internalFirst bool
		want          []Address
	}{
		"internal first (--report-node-internal-ip-address)": {
			node:          node("n", "ExternalIP=203.0.113.1", "InternalIP=10.0.0.1"),
			internalFirst: true,
			want:          []Address{ip("10.0.0.1")},
		},
		"internal first falls back to external": {
			node:          node("n", "ExternalIP=203.0.113.1", "Hostname=n"),
			internalFirst: true,
			want:          []Address{ip("203.0.113.1")},
		},
		"external preferred": {
			node: node("n", "InternalIP=10.0.0.1", "ExternalIP=203.0.113.1", "Hostname=n"),
			want: []Address{ip("203.0.113.1")},
		},
		"internal when no external": {node: node("n", "Hostname=n", "InternalIP=10.0.0.1"), want: []Address{ip("10.0.0.1")}},
		"dual-stack external": {
			node: node("n", "ExternalIP=2001:db8::5", "ExternalIP=203.0.113.1", "InternalIP=10.0.0.1"),
			want: []Address{ip("203.0.113.1"), ip("2001:db8::5")},
		},
		"hostname only publishes nothing": {node: node("n", "Hostname=n"), want: nil},
		"unknown node":                    {node: nil, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := NodeAddresses(tc.node, tc.internalFirst); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NodeAddresses = %v, want %v", got, tc.want)
			}
		})
	}
}
