//go:build integration

package harness

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Backends bind TEST-NET-1 (192.0.2.0/24) addresses, which hack/in-netns.sh puts on
// the private namespace's loopback; the API server rejects loopback addresses in
// EndpointSlices, so 127.0.0.1 cannot be used.
const (
	backendNet       = "192.0.2."
	backendHTTPPort  = 8080
	backendHTTPSPort = 8443
)

// backendAddrs hands out distinct backend addresses across the run: each backend gets
// its own IP, and backends of the same kind share a port (as pods of a Service do) until
// the 254 addresses are used up, after which the port moves on.
var backendAddrs struct {
	mu   sync.Mutex
	next int
}

func nextBackendAddr(basePort int) (string, int) {
	backendAddrs.mu.Lock()
	defer backendAddrs.mu.Unlock()
	n := backendAddrs.next
	backendAddrs.next++
	return backendNet + strconv.Itoa(1+n%254), basePort + 2*(n/254)
}

// RequireNetns fails the test unless TEST-NET-1 addresses can be bound here, which is
// the case inside hack/in-netns.sh.
func RequireNetns(t testing.TB) {
	t.Helper()
	l, err := net.Listen("tcp", backendNet+"254:0")
	if err != nil {
		t.Fatalf("cannot bind %s254 (%v): integration tests must run inside the private network namespace; "+
			"run them with `hack/in-netns.sh go test -tags integration ./test/integration/...` (make test-integration does)", backendNet, err)
	}
	_ = l.Close()
}

// Backend is a running echoserver bound to a TEST-NET-1 address.
type Backend struct {
	*Process
	// Name is the echoserver's --name; responses carry it.
	Name string
	// IP and Port are where it listens.
	IP   string
	Port int
	// TLS reports whether it serves HTTPS (self-signed certificate).
	TLS bool
}

// Addr is IP:Port.
func (b *Backend) Addr() string { return net.JoinHostPort(b.IP, strconv.Itoa(b.Port)) }

// StartBackend starts an echoserver named name on a fresh TEST-NET-1 address and waits
// until it accepts connections. With tls it serves HTTPS with a self-signed
// certificate. It is stopped when the test ends.
func (f *Fixture) StartBackend(name string, tls bool) *Backend {
	f.T.Helper()
	var args []string
	if tls {
		args = []string{"--tls"}
	}
	return f.startBackend(name, tls, args)
}

// StartTLSBackend is StartBackend for an HTTPS backend that serves the certificate and key in the
// given PEM files (a certificate a test issued, which its CA verifies).
func (f *Fixture) StartTLSBackend(name, certFile, keyFile string) *Backend {
	f.T.Helper()
	return f.startBackend(name, true, []string{"--tls-cert=" + certFile, "--tls-key=" + keyFile})
}

func (f *Fixture) startBackend(name string, tls bool, extra []string) *Backend {
	f.T.Helper()
	RequireNetns(f.T)
	base := backendHTTPPort
	if tls {
		base = backendHTTPSPort
	}
	ip, port := nextBackendAddr(base)
	b := &Backend{Name: name, IP: ip, Port: port, TLS: tls}
	args := append([]string{"--name=" + name, "--listen=" + b.Addr(), "--shutdown-timeout=5s"}, extra...)
	b.Process = StartProcess(f.T, "echoserver "+name, f.Env.EchoserverBinary, args, nil)
	seen, ok := poll(DefaultTimeout, b.ExitDescription, func() (bool, string) {
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			return false, err.Error()
		}
		_ = c.Close()
		return true, ""
	})
	if !ok {
		f.T.Fatalf("echoserver %s did not accept connections on %s: %s", name, b.Addr(), seen)
	}
	return b
}

// Endpoint is one address of an EndpointSlice with its conditions.
type Endpoint struct {
	// IP is the endpoint address.
	IP string
	// Port is the target port; every endpoint of one slice must share it.
	Port int
	// Ready, Serving and Terminating are the EndpointSlice conditions.
	Ready, Serving, Terminating bool
}

// Endpoint returns b as a ready, serving endpoint.
func (b *Backend) Endpoint() Endpoint {
	return Endpoint{IP: b.IP, Port: b.Port, Ready: true, Serving: true}
}

// AsTerminating returns e as a terminating endpoint that still serves (the state of a
// pod during its grace period).
func (e Endpoint) AsTerminating() Endpoint {
	e.Ready, e.Serving, e.Terminating = false, true, true
	return e
}

// AsNotReady returns e as neither ready nor serving.
func (e Endpoint) AsNotReady() Endpoint {
	e.Ready, e.Serving, e.Terminating = false, false, false
	return e
}

// EndpointSlice returns (without creating it) an IPv4 EndpointSlice named name for
// Service service, with one TCP port named portName (the port of the endpoints, or
// port when there are none).
func (f *Fixture) EndpointSlice(name, service, portName string, port int, eps ...Endpoint) *discoveryv1.EndpointSlice {
	f.T.Helper()
	if len(eps) > 0 {
		port = eps[0].Port
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: f.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   "integration-test",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	p32 := int32(port)
	proto := corev1.ProtocolTCP
	pn := portName
	slice.Ports = []discoveryv1.EndpointPort{{Name: &pn, Port: &p32, Protocol: &proto}}
	for _, e := range eps {
		if e.Port != port {
			f.T.Fatalf("EndpointSlice %s: endpoint %s has port %d, others %d; one slice has one port set", name, e.IP, e.Port, port)
		}
		ready, serving, terminating := e.Ready, e.Serving, e.Terminating
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{e.IP},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		})
	}
	return slice
}

// ApplyEndpointSlice creates the slice, or replaces the endpoints and ports of the
// existing one with the same name; it fails the test on error.
func (f *Fixture) ApplyEndpointSlice(slice *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	f.T.Helper()
	api := f.Client.DiscoveryV1().EndpointSlices(slice.Namespace)
	out, err := api.Create(f.Ctx, slice, metav1.CreateOptions{})
	if err == nil {
		return out
	}
	if !apierrors.IsAlreadyExists(err) {
		f.T.Fatalf("create EndpointSlice %s/%s: %v", slice.Namespace, slice.Name, err)
	}
	for attempt := 0; ; attempt++ {
		cur, err := api.Get(f.Ctx, slice.Name, metav1.GetOptions{})
		if err != nil {
			f.T.Fatalf("get EndpointSlice %s/%s: %v", slice.Namespace, slice.Name, err)
		}
		cur.Labels, cur.Endpoints, cur.Ports = slice.Labels, slice.Endpoints, slice.Ports
		out, err = api.Update(f.Ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			return out
		}
		if attempt >= 5 || !apierrors.IsConflict(err) {
			f.T.Fatalf("update EndpointSlice %s/%s: %v", slice.Namespace, slice.Name, err)
		}
	}
}

// ServeBackends is the common case in one call: it creates (or updates) the
// EndpointSlice "<service>-1" for Service service with port name "http" and the given
// backends as ready endpoints.
func (f *Fixture) ServeBackends(service string, backends ...*Backend) *discoveryv1.EndpointSlice {
	f.T.Helper()
	if len(backends) == 0 {
		f.T.Fatal("ServeBackends needs at least one backend; use EndpointSlice for an empty slice")
	}
	eps := make([]Endpoint, len(backends))
	for i, b := range backends {
		eps[i] = b.Endpoint()
	}
	return f.ApplyEndpointSlice(f.EndpointSlice(fmt.Sprintf("%s-1", service), service, "http", 0, eps...))
}
