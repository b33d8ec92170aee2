// Package endpoints is the endpoint lane's producer: for every Service port that an accepted Ingress uses,
// it publishes the ready endpoints from the Service's EndpointSlices as an EndpointsChange. It never waits
// for, and never triggers, an NGINX reload.
package endpoints

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// ServiceIPEndpoints returns the one endpoint of svc's port (a number or a name) for service-upstream:
// the Service's cluster IP and the port's number. It is empty when the Service has no such port.
func ServiceIPEndpoints(svc *corev1.Service, port intstr.IntOrString) []nginx.Endpoint {
	sp, ok := nginx.ServicePort(svc, port)
	if !ok {
		return nil
	}
	e := nginx.Endpoint{Address: svc.Spec.ClusterIP, Port: sp.Port}
	if e.Validate() != nil {
		return nil
	}
	return []nginx.Endpoint{e}
}

// Resolve returns the endpoints of svc's port (a number or a name, as an Ingress backend names it) from
// the records of the Service's EndpointSlices. Ready, non-terminating endpoints are used; when there is
// none, serving ones are used instead, as kube-proxy does, so connections drain to terminating pods rather
// than failing. The port of each endpoint comes from the slice port whose name equals the Service port's
// name, so named and numeric target ports both work. The result is sorted and de-duplicated.
func Resolve(svc *corev1.Service, port intstr.IntOrString, slicesOfService []*SliceRecord) []nginx.Endpoint {
	return ResolveProtocol(svc, port, corev1.ProtocolTCP, slicesOfService)
}

// ResolveProtocol is Resolve for the Service port of protocol proto (TCP or UDP) with that number or name.
func ResolveProtocol(svc *corev1.Service, port intstr.IntOrString, proto corev1.Protocol, slicesOfService []*SliceRecord) []nginx.Endpoint {
	sp, ok := servicePort(svc, port, proto)
	if !ok {
		return nil
	}
	want := protocolFrom(proto)
	if want == protocolOther {
		return nil
	}
	var ready, serving []nginx.Endpoint
	for _, slice := range slicesOfService {
		target, ok := slice.port(sp.Name, want)
		if !ok {
			continue // no such port, or not IP addresses (FQDN): NewSliceRecord keeps no ports then
		}
		for _, ep := range slice.endpoints {
			e := nginx.Endpoint{Address: ep.address, Port: target}
			if e.Validate() != nil {
				continue
			}
			switch c := ep.conditions; {
			case c.ready() && !c.terminating():
				ready = append(ready, e)
			case c.serving():
				serving = append(serving, e)
			}
		}
	}
	if len(ready) == 0 {
		ready = serving
	}
	return sortUnique(ready)
}

// servicePort returns svc's port of protocol proto (an empty protocol is TCP) with port's number or name.
func servicePort(svc *corev1.Service, port intstr.IntOrString, proto corev1.Protocol) (corev1.ServicePort, bool) {
	for _, p := range svc.Spec.Ports {
		if protocolOf(p.Protocol) != proto {
			continue
		}
		if port.Type == intstr.String && p.Name == port.StrVal || port.Type == intstr.Int && p.Port == port.IntVal {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

func protocolOf(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// port returns the endpoint port of the slice port of protocol proto named like the Service port ("" for
// unnamed).
func (r *SliceRecord) port(name string, proto protocol) (int32, bool) {
	for _, p := range r.ports {
		if p.name == name && p.hasPort && p.protocol == proto {
			return p.port, true
		}
	}
	return 0, false
}

func sortUnique(eps []nginx.Endpoint) []nginx.Endpoint {
	if len(eps) == 0 {
		return nil
	}
	slices.SortFunc(eps, func(a, b nginx.Endpoint) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
	})
	return slices.Compact(eps)
}

// SafeEndpoints drops endpoints whose address must never be an upstream: loopback (unless allowLoopback),
// link-local, unspecified and multicast addresses. It returns the kept endpoints and how many it dropped.
func SafeEndpoints(eps []nginx.Endpoint, allowLoopback bool) ([]nginx.Endpoint, int) {
	kept := eps[:0:0]
	for _, e := range eps {
		a, err := netip.ParseAddr(e.Address)
		if err != nil {
			continue
		}
		a = a.Unmap()
		if (a.IsLoopback() && !allowLoopback) || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
			a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() {
			continue
		}
		kept = append(kept, e)
	}
	if len(kept) == 0 {
		kept = nil
	}
	return kept, len(eps) - len(kept)
}

// Resolver looks up host names; net.DefaultResolver satisfies it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// ResolveExternalName returns the endpoints of an ExternalName Service: its DNS name resolved now, at the
// Ingress's port number. ExternalName Services have no EndpointSlices; a named port cannot be resolved.
func ResolveExternalName(ctx context.Context, r Resolver, svc *corev1.Service, port intstr.IntOrString) ([]nginx.Endpoint, error) {
	host := svc.Spec.ExternalName
	if host == "" {
		return nil, fmt.Errorf("ExternalName service %s/%s has no spec.externalName", svc.Namespace, svc.Name)
	}
	addrs, err := r.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("ExternalName service %s/%s: resolve %s: %w", svc.Namespace, svc.Name, host, err)
	}
	return ExternalNameEndpoints(svc, port, addrs)
}

// ExternalNameEndpoints returns the endpoints of an ExternalName Service's port given the addresses its
// DNS name resolved to: each address at the Ingress's port number (or the number of the Service port
// it names).
func ExternalNameEndpoints(svc *corev1.Service, port intstr.IntOrString, addrs []net.IPAddr) ([]nginx.Endpoint, error) {
	return ExternalNameEndpointsProtocol(svc, port, corev1.ProtocolTCP, addrs)
}

// ExternalNameEndpointsProtocol is ExternalNameEndpoints for a port of protocol proto (a UDP service's
// port name names a UDP port).
func ExternalNameEndpointsProtocol(svc *corev1.Service, port intstr.IntOrString, proto corev1.Protocol, addrs []net.IPAddr) ([]nginx.Endpoint, error) {
	number := port.IntVal
	if port.Type == intstr.String {
		p, ok := servicePort(svc, port, proto)
		if !ok {
			return nil, fmt.Errorf("ExternalName service %s/%s: port %q is not defined in spec.ports; use a port number", svc.Namespace, svc.Name, port.StrVal)
		}
		number = p.Port
	}
	eps := make([]nginx.Endpoint, 0, len(addrs))
	for _, a := range addrs {
		if a.Zone != "" {
			continue
		}
		e := nginx.Endpoint{Address: a.IP.String(), Port: number}
		if e.Validate() == nil {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("ExternalName service %s/%s: %s has no usable address", svc.Namespace, svc.Name, svc.Spec.ExternalName)
	}
	return sortUnique(eps), nil
}

func endpointsString(eps []nginx.Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = net.JoinHostPort(e.Address, strconv.Itoa(int(e.Port)))
	}
	return out
}
