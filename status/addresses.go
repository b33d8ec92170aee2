package status

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Address is one entry of an Ingress's status.loadBalancer.ingress.
type Address = networkingv1.IngressLoadBalancerIngress

// ParseAddresses parses --publish-status-address: a comma-separated list of IP addresses and DNS names.
// IPs become Address.IP (in canonical form), names become Address.Hostname (lower case). Blank items are
// skipped; the result is normalised (see Normalize).
func ParseAddresses(list string) ([]Address, error) {
	var out []Address
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if ip, err := netip.ParseAddr(item); err == nil {
			if ip.Zone() != "" {
				return nil, fmt.Errorf("address %q: zoned IPv6 addresses cannot be published", item)
			}
			out = append(out, Address{IP: ip.Unmap().String()})
			continue
		}
		host := strings.ToLower(strings.TrimSuffix(item, "."))
		if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
			return nil, fmt.Errorf("address %q is neither an IP address nor a DNS name: %s", item, strings.Join(errs, "; "))
		}
		out = append(out, Address{Hostname: host})
	}
	return Normalize(out), nil
}

// Normalize returns a sorted copy of addrs without duplicates: IP entries first, in address order, then
// hostnames in lexical order. Port lists are sorted too. Two lists that differ only in order or
// repetition normalise to the same list; nil and empty both normalise to nil.
func Normalize(addrs []Address) []Address {
	if len(addrs) == 0 {
		return nil
	}
	out := make([]Address, len(addrs))
	for i, a := range addrs {
		out[i] = a
		if len(a.Ports) > 0 {
			out[i].Ports = slices.Clone(a.Ports)
			slices.SortFunc(out[i].Ports, comparePorts)
		}
	}
	slices.SortFunc(out, compareAddresses)
	return slices.CompactFunc(out, func(a, b Address) bool { return compareAddresses(a, b) == 0 })
}

// Equal reports whether two address lists are the same once normalised.
func Equal(a, b []Address) bool {
	na, nb := Normalize(a), Normalize(b)
	return slices.EqualFunc(na, nb, func(x, y Address) bool { return compareAddresses(x, y) == 0 })
}

// Remove returns the normalised entries of current whose IP and hostname match no entry of published
// (ports are ignored). It is how a replica takes back what it published without touching entries that
// someone else wrote.
func Remove(current, published []Address) []Address {
	type ipHost struct{ ip, host string }
	drop := make(map[ipHost]bool, len(published))
	for _, p := range published {
		drop[ipHost{p.IP, p.Hostname}] = true
	}
	kept := slices.DeleteFunc(slices.Clone(current), func(a Address) bool { return drop[ipHost{a.IP, a.Hostname}] })
	return Normalize(kept)
}

// Overlaps reports whether current holds an entry (by IP and hostname) of published.
func Overlaps(current, published []Address) bool {
	return len(Remove(current, published)) != len(Normalize(current))
}

// String formats addresses for logs and messages: "192.0.2.1,lb.example.com".
func String(addrs []Address) string {
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		switch {
		case a.IP != "" && a.Hostname != "":
			parts = append(parts, a.IP+"("+a.Hostname+")")
		case a.IP != "":
			parts = append(parts, a.IP)
		default:
			parts = append(parts, a.Hostname)
		}
	}
	return strings.Join(parts, ",")
}

// ServiceAddresses returns the addresses a --publish-service Service makes an Ingress reachable on: its
// load balancer's entries (IP and hostname as the Service reports them), or, while it has none, its
// spec.externalIPs. An ExternalName Service publishes its external name.
func ServiceAddresses(svc *corev1.Service) []Address {
	if svc == nil {
		return nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if svc.Spec.ExternalName == "" {
			return nil
		}
		return []Address{{Hostname: strings.ToLower(strings.TrimSuffix(svc.Spec.ExternalName, "."))}}
	}
	var out []Address
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		if lb.IP == "" && lb.Hostname == "" {
			continue
		}
		out = append(out, Address{IP: lb.IP, Hostname: lb.Hostname})
	}
	if len(out) == 0 {
		for _, ip := range svc.Spec.ExternalIPs {
			if ip = strings.TrimSpace(ip); ip != "" {
				out = append(out, Address{IP: ip})
			}
		}
	}
	return Normalize(out)
}

// NodeAddresses returns a node's ExternalIP addresses or, when it has none, its InternalIP addresses
// (every one of the chosen type, so dual-stack nodes publish both families). With internalFirst
// (--report-node-internal-ip-address) the order is the other way round.
func NodeAddresses(node *corev1.Node, internalFirst bool) []Address {
	if node == nil {
		return nil
	}
	order := []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP}
	if internalFirst {
		order[0], order[1] = order[1], order[0]
	}
	for _, typ := range order {
		var out []Address
		for _, a := range node.Status.Addresses {
			if a.Type == typ && a.Address != "" {
				out = append(out, Address{IP: a.Address})
			}
		}
		if len(out) > 0 {
			return Normalize(out)
		}
	}
	return nil
}

func compareAddresses(a, b Address) int {
	// IP entries sort before hostname-only entries; IPs that parse sort in address order.
	if c := cmp.Compare(boolRank(a.IP == ""), boolRank(b.IP == "")); c != 0 {
		return c
	}
	if a.IP != b.IP {
		ia, ea := netip.ParseAddr(a.IP)
		ib, eb := netip.ParseAddr(b.IP)
		if ea == nil && eb == nil {
			if c := ia.Compare(ib); c != 0 {
				return c
			}
		}
		if c := strings.Compare(a.IP, b.IP); c != 0 {
			return c
		}
	}
	if c := strings.Compare(a.Hostname, b.Hostname); c != 0 {
		return c
	}
	return slices.CompareFunc(a.Ports, b.Ports, comparePorts)
}

func comparePorts(a, b networkingv1.IngressPortStatus) int {
	if c := cmp.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	if c := strings.Compare(string(a.Protocol), string(b.Protocol)); c != 0 {
		return c
	}
	return strings.Compare(derefString(a.Error), derefString(b.Error))
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
