//go:build integration

package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// Spelled out rather than imported: they are the user-facing contract (docs/ssl-passthrough.md).
const (
	sslPassthroughAnnotation = "nginx.ingress.kubernetes.io/ssl-passthrough"
	nginxDefaultCertCN       = "Ingress Reactor Fake Certificate"
	passthroughConnections   = "ingress_reactor_passthrough_connections_total"
	// clientIP is a TEST-NET-1 address on the namespace's loopback that test clients connect from, so that
	// NGINX's view of the client address can be told apart from the proxy's own 127.0.0.1.
	clientIP = "192.0.2.250"
)

// startPassthroughReactor starts the binary with the SSL passthrough proxy on its HTTPS port and NGINX's
// TLS listener on a free loopback port.
func startPassthroughReactor(f *harness.Fixture) *harness.Reactor {
	r := f.StartReactor("--enable-ssl-passthrough", "--ssl-passthrough-proxy-port="+strconv.Itoa(harness.FreePort(f.T)))
	r.WaitReady()
	return r
}

// passthroughIngress is an Ingress of the fixture's class that passes host through to service:port.
func passthroughIngress(f *harness.Fixture, name, host, service string, port int32) *networkingv1.Ingress {
	ing := f.Ingress(name, host, harness.IngressBackend{Service: service, Port: port})
	ing.Annotations = map[string]string{sslPassthroughAnnotation: "true"}
	return ing
}

// tlsConn is one TLS connection to the reactor's HTTPS port, made from clientIP, carrying HTTP/1.1
// keep-alive requests.
type tlsConn struct {
	*tls.Conn
	r *bufio.Reader
}

func dialTLS(r *harness.Reactor, sni string) (*tlsConn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(clientIP)}}
	raw, err := d.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.HTTPSPort)))
	if err != nil {
		return nil, err
	}
	_ = raw.SetDeadline(time.Now().Add(harness.DefaultTimeout))
	c := tls.Client(raw, &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // the test inspects the certificate
	if err := c.Handshake(); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("TLS handshake with SNI %q: %w", sni, err)
	}
	return &tlsConn{Conn: c, r: bufio.NewReader(c)}, nil
}

// certificate returns the leaf certificate's common name.
func (c *tlsConn) certificate() string {
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// get sends GET path with Host host on the connection and returns the echoserver's answer.
func (c *tlsConn) get(host, path string) (*harness.EchoResponse, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var echo harness.EchoResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &echo) != nil || echo.Name == "" {
		return nil, fmt.Errorf("status %d, body %q", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return &echo, nil
}

// request makes one connection and one request, and returns the certificate and the answer.
func request(r *harness.Reactor, host string) (cert string, echo *harness.EchoResponse, err error) {
	c, err := dialTLS(r, host)
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	echo, err = c.get(host, "/passthrough")
	return c.certificate(), echo, err
}

// waitServedByOverTLS waits until a fresh connection for host is answered by the backend named want.
func waitServedByOverTLS(r *harness.Reactor, host, want string) (cert string, echo *harness.EchoResponse) {
	r.Eventually(harness.DefaultTimeout, fmt.Sprintf("https://%s to be answered by %s", host, want), func() (bool, string) {
		var err error
		cert, echo, err = request(r, host)
		if err != nil {
			return false, err.Error()
		}
		return echo.Name == want, fmt.Sprintf("answered by %q with certificate %q", echo.Name, cert)
	})
	return cert, echo
}

// TestPassthroughAndTerminatedTLSShareThePort: on the one HTTPS port, a passthrough Ingress's host reaches
// its HTTPS backend undecrypted (the client sees the backend's own certificate and the backend sees the
// client's SNI), while a normal Ingress's host is terminated by NGINX (default certificate), which learns
// the real client address through the PROXY protocol.
func TestPassthroughAndTerminatedTLSShareThePort(t *testing.T) {
	f := harness.New(t)
	secure := f.StartBackend("passthrough-secure", true)
	plain := f.StartBackend("passthrough-plain", false)
	f.CreateService("secure", 443, secure.Port)
	f.ServeBackends("secure", secure)
	f.CreateService("plain", 80, plain.Port)
	f.ServeBackends("plain", plain)
	r := startPassthroughReactor(f)

	const passHost, termHost = "secure.passthrough.example", "plain.passthrough.example"
	f.CreateIngress(passthroughIngress(f, "secure", passHost, "secure", 443))
	terminated := f.Ingress("plain", termHost, harness.IngressBackend{Service: "plain", Port: 80})
	terminated.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{termHost}}} // no Secret: NGINX's default certificate
	f.CreateIngress(terminated)

	cert, echo := waitServedByOverTLS(r, passHost, secure.Name)
	if cert != secure.Name {
		t.Errorf("passthrough host presented certificate %q, want the backend's own (%q)", cert, secure.Name)
	}
	if !echo.TLS || echo.SNI != passHost {
		t.Errorf("backend saw TLS=%v SNI=%q, want the client's own TLS session with SNI %q", echo.TLS, echo.SNI, passHost)
	}
	if host, _, _ := net.SplitHostPort(echo.RemoteAddr); host == clientIP {
		t.Errorf("backend saw the client's address %s: no PROXY protocol was asked for, it should see the proxy", echo.RemoteAddr)
	}

	cert, echo = waitServedByOverTLS(r, termHost, plain.Name)
	if cert != nginxDefaultCertCN {
		t.Errorf("terminated host presented certificate %q, want NGINX's default %q", cert, nginxDefaultCertCN)
	}
	if echo.TLS {
		t.Error("the plain backend saw TLS: NGINX did not terminate")
	}
	if got := strings.Join(echo.Headers["X-Real-Ip"], ","); got != clientIP {
		t.Errorf("NGINX passed X-Real-IP %q, want the client's %s (from the PROXY protocol)", got, clientIP)
	}
	if got := strings.Join(echo.Headers["X-Forwarded-Proto"], ","); got != "https" {
		t.Errorf("X-Forwarded-Proto %q, want https", got)
	}

	// No SNI at all: NGINX answers with its default certificate rather than the connection being dropped.
	c, err := dialTLS(r, "")
	if err != nil {
		t.Fatalf("connection without SNI: %v", err)
	}
	if got := c.certificate(); got != nginxDefaultCertCN {
		t.Errorf("without SNI the certificate is %q, want NGINX's default", got)
	}
	_ = c.Close()

	r.WaitMetric(passthroughConnections, map[string]string{"route": "passthrough"}, ">= 1", func(v float64) bool { return v >= 1 })
	r.WaitMetric(passthroughConnections, map[string]string{"route": "nginx"}, ">= 2", func(v float64) bool { return v >= 2 })

	// Dropping the annotation hands the host back to NGINX.
	f.UpdateIngress("secure", func(ing *networkingv1.Ingress) { delete(ing.Annotations, sslPassthroughAnnotation) })
	r.Eventually(harness.DefaultTimeout, "the un-annotated host to be terminated by NGINX", func() (bool, string) {
		c, err := dialTLS(r, passHost)
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		return c.certificate() == nginxDefaultCertCN, "certificate " + c.certificate()
	})
}

// TestPassthroughFollowsEndpointsWithoutBreakingConnections: when the Service's endpoints change, new
// connections go to the new endpoint while a connection already open keeps working with its backend.
func TestPassthroughFollowsEndpointsWithoutBreakingConnections(t *testing.T) {
	f := harness.New(t)
	first := f.StartBackend("passthrough-first", true)
	second := f.StartBackend("passthrough-second", true)
	f.CreateService("app", 443, first.Port)
	f.ServeBackends("app", first)
	r := startPassthroughReactor(f)

	const host = "app.passthrough.example"
	f.CreateIngress(passthroughIngress(f, "app", host, "app", 443))
	waitServedByOverTLS(r, host, first.Name)

	open, err := dialTLS(r, host)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if echo, err := open.get(host, "/before"); err != nil || echo.Name != first.Name {
		t.Fatalf("long-lived connection: %v, %v; want an answer from %s", echo, err, first.Name)
	}

	if first.Port != second.Port {
		t.Fatalf("backends listen on ports %d and %d; the test needs one EndpointSlice port", first.Port, second.Port)
	}
	f.ServeBackends("app", second)
	waitServedByOverTLS(r, host, second.Name)

	for i := range 3 {
		echo, err := open.get(host, fmt.Sprintf("/after-%d", i))
		if err != nil {
			t.Fatalf("the connection opened before the endpoint change broke: %v", err)
		}
		if echo.Name != first.Name {
			t.Fatalf("the open connection is now answered by %q, want its original backend %q", echo.Name, first.Name)
		}
	}
}
