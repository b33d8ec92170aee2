package endpoints

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SliceRecord is what the EndpointSlice informer's cache holds instead of an EndpointSlice: its key, its
// resource version, its Service, and of its ports and endpoints only what Resolve reads, in value slices
// of exact length. Every Service of an Ingress has a slice or more, and a decoded slice keeps a labels
// map, an Endpoint struct with an addresses slice per endpoint and a pointer per port field: a slice of
// two ports and three endpoints kept 1,184 bytes after the transform trimmed it, its record keeps 306
// (BenchmarkCacheTransformRetained in app).
//
// The app's cache transform converts each slice with NewSliceRecord; that is the one place that does.
// The cache then holds no *discoveryv1.EndpointSlice, so the informer's generated lister must not be
// used on it (it would panic); the endpoints module reads the cache by key. A record is never modified
// once built: the cache, event handlers and tombstones share it.
type SliceRecord struct {
	namespace, name, resourceVersion string
	// service is the kubernetes.io/service-name label; "" (no label) means the slice belongs to no Service.
	service string
	// ports and endpoints are nil for a slice whose addresses are not IP addresses (FQDN): Resolve skips
	// it, as it skips any slice without the port it looks for.
	ports     []slicePort
	endpoints []sliceEndpoint
}

// slicePort is an EndpointSlice port: its name ("" when unset), protocol, and number if it has one.
type slicePort struct {
	name     string
	port     int32
	protocol protocol
	hasPort  bool
}

// protocol is a port's protocol; an unset one is TCP, as Resolve has always read it.
type protocol uint8

const (
	protocolTCP protocol = iota
	protocolUDP
	protocolSCTP
	protocolOther // a protocol Kubernetes does not define; no lookup asks for it
)

func protocolFrom(p corev1.Protocol) protocol {
	switch p {
	case "", corev1.ProtocolTCP:
		return protocolTCP
	case corev1.ProtocolUDP:
		return protocolUDP
	case corev1.ProtocolSCTP:
		return protocolSCTP
	}
	return protocolOther
}

// sliceEndpoint is an endpoint's first address (the others are the same endpoint, by the API's contract)
// and its conditions, each of which may be unset.
type sliceEndpoint struct {
	address    string
	conditions conditions
}

// conditions holds an endpoint's ready, serving and terminating conditions as two bits each: set, and
// true.
type conditions uint8

const (
	readySet conditions = 1 << iota
	readyTrue
	servingSet
	servingTrue
	terminatingSet
	terminatingTrue
)

func conditionsFrom(c discoveryv1.EndpointConditions) conditions {
	var out conditions
	bit := func(b *bool, set, isTrue conditions) {
		if b != nil {
			out |= set
			if *b {
				out |= isTrue
			}
		}
	}
	bit(c.Ready, readySet, readyTrue)
	bit(c.Serving, servingSet, servingTrue)
	bit(c.Terminating, terminatingSet, terminatingTrue)
	return out
}

// ready is the Ready condition, true when unset (the API's reading of an unknown state).
func (c conditions) ready() bool { return c&readySet == 0 || c&readyTrue != 0 }

// serving is the Serving condition; when unset, it is the Ready condition.
func (c conditions) serving() bool {
	if c&servingSet == 0 {
		return c.ready()
	}
	return c&servingTrue != 0
}

// terminating is the Terminating condition, false when unset.
func (c conditions) terminating() bool { return c&terminatingTrue != 0 }

// NewSliceRecord returns the record of s. It keeps s's namespace and port names as they are, so values
// that the caller interned in s before the call stay shared; its own strings (name, resource version,
// Service name, addresses) are copied into one allocation: kept where the decoder put them, each would
// pin a small slot amid the garbage the rest of the decoded slice leaves behind. Nothing of s is kept.
func NewSliceRecord(s *discoveryv1.EndpointSlice) *SliceRecord {
	svc := s.Labels[discoveryv1.LabelServiceName]
	// A slice named after its Service (the EndpointSlice controller's "<service>-<suffix>") takes the
	// Service's name from its own.
	svcInName := len(svc) <= len(s.Name) && s.Name[:len(svc)] == svc
	ip := s.AddressType == discoveryv1.AddressTypeIPv4 || s.AddressType == discoveryv1.AddressTypeIPv6
	size, endpoints := len(s.Name)+len(s.ResourceVersion), 0
	if !svcInName {
		size += len(svc)
	}
	if ip {
		for i := range s.Endpoints {
			if a := s.Endpoints[i].Addresses; len(a) > 0 {
				size += len(a[0])
				endpoints++
			}
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(s.Name)
	b.WriteString(s.ResourceVersion)
	if !svcInName {
		b.WriteString(svc)
	}
	if ip {
		for i := range s.Endpoints {
			if a := s.Endpoints[i].Addresses; len(a) > 0 {
				b.WriteString(a[0])
			}
		}
	}
	text := b.String()
	take := func(n int) string {
		t := text[:n]
		text = text[n:]
		return t
	}
	r := &SliceRecord{namespace: s.Namespace, name: take(len(s.Name)), resourceVersion: take(len(s.ResourceVersion))}
	if svcInName {
		r.service = r.name[:len(svc)]
	} else {
		r.service = take(len(svc))
	}
	if !ip {
		return r
	}
	if len(s.Ports) > 0 {
		r.ports = make([]slicePort, len(s.Ports))
		for i, p := range s.Ports {
			sp := &r.ports[i]
			if p.Name != nil {
				sp.name = *p.Name
			}
			if p.Port != nil {
				sp.port, sp.hasPort = *p.Port, true
			}
			if p.Protocol != nil {
				sp.protocol = protocolFrom(*p.Protocol)
			}
		}
	}
	if endpoints > 0 {
		r.endpoints = make([]sliceEndpoint, 0, endpoints)
		for i := range s.Endpoints {
			if e := &s.Endpoints[i]; len(e.Addresses) > 0 {
				r.endpoints = append(r.endpoints, sliceEndpoint{address: take(len(e.Addresses[0])), conditions: conditionsFrom(e.Conditions)})
			}
		}
	}
	return r
}

// ServiceName returns the name of the Service the slice belongs to ("" when it has no
// kubernetes.io/service-name label).
func (r *SliceRecord) ServiceName() string { return r.service }

// GetNamespace returns the slice's namespace.
func (r *SliceRecord) GetNamespace() string { return r.namespace }

// GetName returns the slice's name.
func (r *SliceRecord) GetName() string { return r.name }

// GetResourceVersion returns the slice's resource version: informers tell updates from resyncs by it.
func (r *SliceRecord) GetResourceVersion() string { return r.resourceVersion }

// GetObjectMeta makes the record readable by meta.Accessor, which the informer's key function, its
// update handling and the handlers' resource-version filters use. The metadata is built on each call,
// garbage once read rather than kept in every record, and holds only the namespace, name and resource
// version (no labels: ServiceName is the service-name label).
func (r *SliceRecord) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: r.namespace, Name: r.name, ResourceVersion: r.resourceVersion}
}
