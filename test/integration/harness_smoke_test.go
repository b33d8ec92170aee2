//go:build integration

package integration

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestHarnessBackendsAndEndpointSlices checks the pieces later tests build on, without
// the controller: echoserver backends on TEST-NET-1 answer over HTTP and HTTPS (with the
// SNI the client chose), and the API server accepts EndpointSlices that point at them,
// with the conditions as written.
func TestHarnessBackendsAndEndpointSlices(t *testing.T) {
	f := harness.New(t)
	plain := f.StartBackend("plain", false)
	other := f.StartBackend("other", false)
	secure := f.StartBackend("secure", true)
	if plain.IP == other.IP {
		t.Fatalf("two backends got the same address %s", plain.IP)
	}

	resp, err := harness.DoRequestTo(plain.Addr(), harness.Request{Host: "demo.example", Path: "/a?b=c"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Echo == nil || resp.Echo.Name != "plain" || resp.Echo.Host != "demo.example" || resp.Echo.URI != "/a?b=c" || resp.Echo.Listen != plain.Addr() {
		t.Errorf("plain backend answered %s, want name plain, host demo.example, uri /a?b=c, listen %s", resp, plain.Addr())
	}

	resp, err = harness.DoRequestTo(secure.Addr(), harness.Request{HTTPS: true, Host: "shop.example"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Echo == nil || !resp.Echo.TLS || resp.Echo.SNI != "shop.example" {
		t.Errorf("TLS backend answered %s, want TLS with SNI shop.example", resp)
	}
	if len(resp.PeerCertificates) == 0 || resp.PeerCertificates[0].Subject.CommonName != "secure" {
		t.Errorf("TLS backend's certificate not exposed or not its own: %s", resp)
	}

	f.CreateService("web", 80, plain.Port)
	f.ServeBackends("web", plain)
	slice := f.ApplyEndpointSlice(f.EndpointSlice("web-1", "web", "http", 0,
		plain.Endpoint(), other.Endpoint().AsTerminating()))
	got, err := f.Client.DiscoveryV1().EndpointSlices(f.Namespace).Get(f.Ctx, slice.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Endpoints) != 2 {
		t.Fatalf("EndpointSlice has %d endpoints, want 2", len(got.Endpoints))
	}
	term := got.Endpoints[1]
	if term.Addresses[0] != other.IP || *term.Conditions.Ready || !*term.Conditions.Serving || !*term.Conditions.Terminating {
		t.Errorf("terminating endpoint stored as %v %+v", term.Addresses, term.Conditions)
	}
}
