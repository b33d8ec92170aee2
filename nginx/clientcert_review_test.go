package nginx

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestClientCertVerdictOutlivesCAChange: a connection whose handshake verified a client certificate
// with the host's CA keeps passing the host's routes after the host's CA changes to another CA (a
// Secret rotated to drop a compromised CA, or the host passing to another namespace's Ingress with its
// own CA): the router compares the route's CA with the CA the SNI name has now, not the one the
// handshake verified with.
func TestClientCertVerdictOutlivesCAChange(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	oldCA, newCA := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
	alice := clientPair(t, oldCA, "alice")
	app := echoBackend(t, "app")
	svcs := servicesOf(service("default", "app", port(80, "http")))
	ings := []*networkingv1.Ingress{ingress("default", "mtls", annotate(AnnotationAuthTLSSecret, "client-ca"), rule("mtls.example.com", prefix("/", "app", 80)))}
	build := func(ca []byte) Model {
		secrets := secretLookup{nn("default", "client-ca"): clientCASecret("client-ca", map[string][]byte{"ca.crt": ca})}
		b := NewModelBuilder().Build(BuildInput{Ingresses: ings, Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
		if len(b.Rejected) != 0 {
			t.Fatalf("rejected %+v", b.Rejected)
		}
		return b.Model
	}
	applyModel(t, rt, build(oldCA.pem), cfg)
	if err := rt.Client().ReplaceCertificates(ctx, CertificateUpdate{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{ServerName: "mtls.example.com", InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return alice, nil }}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.HTTPSPort)), conf)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	get := func() int {
		req, _ := http.NewRequest("GET", "https://mtls.example.com/", nil)
		if err := req.Write(conn); err != nil {
			return 0 // closed: the reload drained the connection
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = bufio.NewReader(resp.Body).WriteTo(discard{})
		return resp.StatusCode
	}
	if s := get(); s != http.StatusOK {
		t.Fatalf("old CA's certificate before the change: %d", s)
	}
	// The host's CA becomes newCA (same Ingress, Secret rotated): pushed, no reload.
	applyModel(t, rt, build(newCA.pem), cfg)
	// A new connection with alice's certificate is refused...
	r := clientCertGetStatus(t, cfg.HTTPSPort, alice)
	if r != http.StatusBadRequest {
		t.Fatalf("new connection with the old CA's certificate: %d, want 400", r)
	}
	// ...and so must the old connection be (or closed).
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if s := get(); s == http.StatusOK {
		t.Fatalf("the connection verified with the old CA still passes the route that now wants the new CA: %d", s)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func clientCertGetStatus(t *testing.T, port int, cert *tls.Certificate) int {
	t.Helper()
	conf := &tls.Config{ServerName: "mtls.example.com", InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), conf)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest("GET", "https://mtls.example.com/", nil)
	req.Close = true
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
