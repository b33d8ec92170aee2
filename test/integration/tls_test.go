//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// Names the TLS tests read. They are spelled out rather than imported: they are what
// users, dashboards and alerts match on.
const (
	// fakeCertificateCN is the subject CN of the generated default certificate.
	fakeCertificateCN = "Ingress Reactor Fake Certificate"
	// reasonTLSSecretInvalid is the Warning Event reason for an unusable TLS Secret.
	reasonTLSSecretInvalid = "TLSSecretInvalid"
	// sslExpireMetric is the expiry time of each served certificate, per host.
	sslExpireMetric = "ingress_reactor_ssl_expire_time_seconds"
	// sslInvalidMetric counts referenced TLS Secrets that cannot be used.
	sslInvalidMetric = "ingress_reactor_ssl_invalid_secrets"
	// certUpdatesMetric counts certificate pushes to NGINX (no reload).
	certUpdatesMetric = "ingress_reactor_certificate_updates_total"
)

// testCert is a self-signed certificate and its key, PEM encoded, made for one test.
type testCert struct {
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
}

// newTestCert makes a self-signed ECDSA P-256 certificate with subject CN cn and the
// given DNS names, valid from an hour ago for a day.
func newTestCert(t *testing.T, cn string, dnsNames ...string) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return newTestCertWithKey(t, key, cn, dnsNames...)
}

// newTestCertWithKey is newTestCert with the given key.
func newTestCertWithKey(t *testing.T, key crypto.Signer, cn string, dnsNames ...string) testCert {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("serial: %v", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"integration test"}},
		DNSNames:              dnsNames,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour).Truncate(time.Second),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if _, ok := key.(*rsa.PrivateKey); ok {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("create certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse certificate: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal key: %v", err)
	}
	return testCert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Leaf:    leaf,
	}
}

// applyTLSSecret creates Secret name of type kubernetes.io/tls with the given
// certificate and key, or replaces the data of the existing one.
func applyTLSSecret(f *harness.Fixture, name string, certPEM, keyPEM []byte) {
	f.T.Helper()
	api := f.Client.CoreV1().Secrets(f.Namespace)
	data := map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}
	cur, err := api.Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		_, err = api.Create(f.Ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace},
			Type:       corev1.SecretTypeTLS,
			Data:       data,
		}, metav1.CreateOptions{})
		if err != nil {
			f.T.Fatalf("create Secret %s/%s: %v", f.Namespace, name, err)
		}
		return
	}
	cur.Data = data
	if _, err := api.Update(f.Ctx, cur, metav1.UpdateOptions{}); err != nil {
		f.T.Fatalf("update Secret %s/%s: %v", f.Namespace, name, err)
	}
}

// tlsIngress returns (without creating it) an Ingress routing host to service port 80,
// with a spec.tls entry for host and secret.
func tlsIngress(f *harness.Fixture, name, host, secret, service string) *networkingv1.Ingress {
	ing := f.Ingress(name, host, harness.IngressBackend{Service: service, Port: 80})
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: secret}}
	return ing
}

// describeLeaf names a certificate for failure messages.
func describeLeaf(c *x509.Certificate) string {
	if c == nil {
		return "no certificate"
	}
	return fmt.Sprintf("CN=%q SANs=%v serial=%s", c.Subject.CommonName, c.DNSNames, c.SerialNumber)
}

// waitServedCertificate waits until req, sent over HTTPS, is answered 200 by backend
// with a leaf certificate for which match holds, and returns that response. want
// describes the expected certificate.
func waitServedCertificate(r *harness.Reactor, req harness.Request, backend, want string, match func(*x509.Certificate) bool) *harness.Response {
	req.HTTPS = true
	var last *harness.Response
	r.Eventually(harness.DefaultTimeout, fmt.Sprintf("https://%s%s (SNI %q, no SNI %v) to present %s and be served by %q", req.Host, req.Path, req.SNI, req.NoSNI, want, backend), func() (bool, string) {
		resp, err := r.Do(req)
		if err != nil {
			return false, err.Error()
		}
		last = resp
		ok := resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Name == backend &&
			len(resp.PeerCertificates) > 0 && match(resp.PeerCertificates[0])
		return ok, resp.String()
	})
	return last
}

// isLeaf matches exactly the certificate c (byte for byte).
func isLeaf(c testCert) func(*x509.Certificate) bool {
	return func(got *x509.Certificate) bool { return bytes.Equal(got.Raw, c.Leaf.Raw) }
}

// isFakeDefault matches the controller's generated default certificate.
func isFakeDefault(got *x509.Certificate) bool { return got.Subject.CommonName == fakeCertificateCN }

// requireCertificate sends req over HTTPS once and fails the test unless backend
// answers 200 presenting exactly c. Use it once the state under test is known to be live.
func requireCertificate(t *testing.T, r *harness.Reactor, req harness.Request, backend string, c testCert) {
	t.Helper()
	req.HTTPS = true
	resp, err := r.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || resp.Echo == nil || resp.Echo.Name != backend {
		t.Fatalf("https://%s%s answered %s, want 200 from backend %q", req.Host, req.Path, resp, backend)
	}
	if len(resp.PeerCertificates) == 0 || !bytes.Equal(resp.PeerCertificates[0].Raw, c.Leaf.Raw) {
		var got *x509.Certificate
		if len(resp.PeerCertificates) > 0 {
			got = resp.PeerCertificates[0]
		}
		t.Fatalf("https://%s%s (SNI %q) presented %s, want %s", req.Host, req.Path, req.SNI, describeLeaf(got), describeLeaf(c.Leaf))
	}
}

// TestTLSTerminatesWithIngressSecret: an Ingress with a tls section is served over
// HTTPS with its Secret's certificate (selected by SNI) and routed to its backend;
// plain HTTP for that host is redirected with 308 to HTTPS, keeping path and query; a
// host without TLS is served over plain HTTP without a redirect; the expiry metric
// carries the certificate's notAfter per host.
func TestTLSTerminatesWithIngressSecret(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	cert := newTestCert(t, "secure.example", "secure.example")
	applyTLSSecret(f, "secure-tls", cert.CertPEM, cert.KeyPEM)
	r := f.StartReactor()
	r.WaitReady()

	f.CreateIngress(tlsIngress(f, "secure", "secure.example", "secure-tls", "web"))
	f.CreateIngress(f.Ingress("plain", "plain.example", harness.IngressBackend{Service: "web", Port: 80}))

	resp := waitServedCertificate(r, harness.Request{Host: "secure.example", Path: "/cart?item=1"}, "web", describeLeaf(cert.Leaf), isLeaf(cert))
	if resp.Echo.Host != "secure.example" || resp.Echo.URI != "/cart?item=1" {
		t.Errorf("backend saw host %q and URI %q, want secure.example and /cart?item=1", resp.Echo.Host, resp.Echo.URI)
	}
	r.WaitServedBy("plain.example", "/", "web")

	redirect, err := r.Get("secure.example", "/cart?item=1")
	if err != nil {
		t.Fatal(err)
	}
	wantLocation := "https://secure.example:" + strconv.Itoa(r.HTTPSPort) + "/cart?item=1"
	if redirect.Status != http.StatusPermanentRedirect || redirect.Header.Get("Location") != wantLocation {
		t.Errorf("http://secure.example/cart?item=1 answered %s Location %q, want 308 to %q", redirect, redirect.Header.Get("Location"), wantLocation)
	}
	plain, err := r.Get("plain.example", "/x?y=1")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Status != http.StatusOK || plain.Echo == nil || plain.Echo.Name != "web" {
		t.Errorf("http://plain.example/x?y=1 (no TLS) answered %s, want 200 from web without a redirect", plain)
	}

	labels := map[string]string{"namespace": f.Namespace, "secret": "secure-tls", "host": "secure.example"}
	want := float64(cert.Leaf.NotAfter.Unix())
	r.WaitMetric(sslExpireMetric, labels, fmt.Sprintf("= %g", want), func(v float64) bool { return v == want })

	// HTTP/2 is offered on TLS listeners; protocols older than TLS 1.2 are refused.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.HTTPSPort))
	h2, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: "secure.example", InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // the test checks the served certificate itself
	if err != nil {
		t.Fatalf("TLS handshake offering h2: %v", err)
	}
	if p := h2.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Errorf("ALPN negotiated %q, want h2", p)
	}
	_ = h2.Close()
	old, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: "secure.example", InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}) //nolint:gosec // deliberately old, to be refused
	if err == nil {
		_ = old.Close()
		t.Errorf("a TLS 1.1 handshake succeeded, want TLS 1.2 and 1.3 only")
	} else if !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("a TLS 1.1 handshake failed with %q, want NGINX's protocol_version alert", err)
	}
}

// TestTLSRotationWithoutReload: replacing the certificate in the Secret makes NGINX
// present the new one without reloading (the reloads counter stays put), and a
// keep-alive connection opened before the rotation keeps working after it.
func TestTLSRotationWithoutReload(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	first := newTestCert(t, "first", "rotate.example")
	applyTLSSecret(f, "rotate-tls", first.CertPEM, first.KeyPEM)
	r := f.StartReactor()
	r.WaitReady()
	f.CreateIngress(tlsIngress(f, "rotate", "rotate.example", "rotate-tls", "web"))

	req := harness.Request{Host: "rotate.example"}
	waitServedCertificate(r, req, "web", describeLeaf(first.Leaf), isLeaf(first))
	reloads := r.WaitConfigSettled()
	pushes := r.MetricValue(certUpdatesMetric, map[string]string{"result": "success"})

	// A client connected before the rotation.
	conn := dialKeepAlive(t, r, "rotate.example")
	if got := conn.get(t, "rotate.example", "/before"); got != http.StatusOK {
		t.Fatalf("keep-alive request before rotation answered %d, want 200", got)
	}

	second := newTestCert(t, "second", "rotate.example")
	applyTLSSecret(f, "rotate-tls", second.CertPEM, second.KeyPEM)
	waitServedCertificate(r, req, "web", describeLeaf(second.Leaf), isLeaf(second))

	if got := conn.get(t, "rotate.example", "/after"); got != http.StatusOK {
		t.Fatalf("keep-alive request on a connection opened before the rotation answered %d, want 200", got)
	}
	if !bytes.Equal(conn.leaf().Raw, first.Leaf.Raw) {
		t.Errorf("the connection opened before the rotation presents %s, want the first certificate", describeLeaf(conn.leaf()))
	}
	if got := r.WaitConfigSettled(); got != reloads {
		t.Errorf("%s went from %g to %g during a certificate rotation, want no reload", harness.ReloadsMetric, reloads, got)
	}
	if got := r.MetricValue(certUpdatesMetric, map[string]string{"result": "success"}); got <= pushes {
		t.Errorf("%s{result=success} stayed at %g, want a certificate push for the rotation", certUpdatesMetric, got)
	}
}

// keepAliveConn is one TLS connection to NGINX that carries several HTTP/1.1 requests.
type keepAliveConn struct {
	conn *tls.Conn
	rd   *bufio.Reader
}

// dialKeepAlive opens a TLS connection to the reactor's HTTPS port with SNI sni; it is
// closed when the test ends.
func dialKeepAlive(t *testing.T, r *harness.Reactor, sni string) *keepAliveConn {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.HTTPSPort))
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // the test checks the served certificate itself
	if err != nil {
		t.Fatalf("dial %s with SNI %q: %v", addr, sni, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &keepAliveConn{conn: conn, rd: bufio.NewReader(conn)}
}

// get sends GET path with Host host on the connection and returns the status code.
func (c *keepAliveConn) get(t *testing.T, host, path string) int {
	t.Helper()
	if err := c.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c.conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host); err != nil {
		t.Fatalf("write request %s on the kept-alive connection: %v", path, err)
	}
	resp, err := http.ReadResponse(c.rd, nil)
	if err != nil {
		t.Fatalf("read response to %s on the kept-alive connection: %v", path, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("read body of %s on the kept-alive connection: %v", path, err)
	}
	return resp.StatusCode
}

func (c *keepAliveConn) leaf() *x509.Certificate {
	st := c.conn.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return nil
	}
	return st.PeerCertificates[0]
}

// TestTLSBrokenSecretFallsBackToDefault: a Secret whose key does not belong to its
// certificate makes its host present the default certificate (still routed), puts a
// Warning Event on the Ingress and counts in the invalid-secrets metric, while another
// TLS host keeps its certificate; fixing the Secret brings the certificate back.
func TestTLSBrokenSecretFallsBackToDefault(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	good := newTestCert(t, "broken.example", "broken.example")
	other := newTestCert(t, "other.example", "other.example")
	stranger := newTestCert(t, "stranger")
	applyTLSSecret(f, "broken-tls", good.CertPEM, good.KeyPEM)
	applyTLSSecret(f, "other-tls", other.CertPEM, other.KeyPEM)
	r := f.StartReactor()
	r.WaitReady()
	f.CreateIngress(tlsIngress(f, "broken", "broken.example", "broken-tls", "web"))
	f.CreateIngress(tlsIngress(f, "other", "other.example", "other-tls", "web"))

	brokenReq := harness.Request{Host: "broken.example"}
	otherReq := harness.Request{Host: "other.example"}
	waitServedCertificate(r, brokenReq, "web", describeLeaf(good.Leaf), isLeaf(good))
	waitServedCertificate(r, otherReq, "web", describeLeaf(other.Leaf), isLeaf(other))
	r.WaitMetric(sslInvalidMetric, nil, "= 0", func(v float64) bool { return v == 0 })

	// The certificate stays, the key is another one's.
	applyTLSSecret(f, "broken-tls", good.CertPEM, stranger.KeyPEM)
	waitServedCertificate(r, brokenReq, "web", "the fake default certificate", isFakeDefault)
	ev := f.WaitEvent(r, "Ingress", "broken", corev1.EventTypeWarning, reasonTLSSecretInvalid, f.Namespace+"/broken-tls")
	for _, line := range strings.Split(string(stranger.KeyPEM)+string(good.KeyPEM), "\n") {
		if len(line) > 8 && strings.Contains(ev.Message, line) {
			t.Errorf("Event message shows key material: %q", ev.Message)
		}
	}
	r.WaitMetric(sslInvalidMetric, nil, "= 1", func(v float64) bool { return v == 1 })
	requireCertificate(t, r, otherReq, "web", other)
	if evs, err := f.Events("Ingress", "other", corev1.EventTypeWarning, reasonTLSSecretInvalid); err != nil || len(evs) != 0 {
		t.Errorf("Ingress other (its Secret is fine) has %d %s Events (%v), want none", len(evs), reasonTLSSecretInvalid, err)
	}

	applyTLSSecret(f, "broken-tls", good.CertPEM, good.KeyPEM)
	waitServedCertificate(r, brokenReq, "web", describeLeaf(good.Leaf), isLeaf(good))
	r.WaitMetric(sslInvalidMetric, nil, "= 0", func(v float64) bool { return v == 0 })
	requireCertificate(t, r, otherReq, "web", other)
}

// TestTLSOversizedChainRejected: a Secret whose tls.crt holds more certificates than a chain sanely
// has is refused with a Warning Event naming the limit, and its host presents the default certificate
// (before, a chain of any size was served and broke handshakes of clients that cap the Certificate
// message); once the chain is trimmed the host presents its own certificate.
func TestTLSOversizedChainRejected(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	good := newTestCert(t, "chain.example", "chain.example")
	padding := newTestCert(t, "padding intermediate")
	oversized := slices.Clone(good.CertPEM)
	for range 10 {
		oversized = append(oversized, padding.CertPEM...)
	}
	applyTLSSecret(f, "chain-tls", oversized, good.KeyPEM)
	r := f.StartReactor()
	r.WaitReady()
	f.CreateIngress(tlsIngress(f, "chain", "chain.example", "chain-tls", "web"))

	req := harness.Request{Host: "chain.example"}
	waitServedCertificate(r, req, "web", "the fake default certificate", isFakeDefault)
	ev := f.WaitEvent(r, "Ingress", "chain", corev1.EventTypeWarning, reasonTLSSecretInvalid, "11 certificates, more than the 10 accepted")
	if !strings.Contains(ev.Message, f.Namespace+"/chain-tls") {
		t.Errorf("Event message %q does not name the Secret", ev.Message)
	}
	r.WaitMetric(sslInvalidMetric, nil, "= 1", func(v float64) bool { return v == 1 })

	applyTLSSecret(f, "chain-tls", append(slices.Clone(good.CertPEM), padding.CertPEM...), good.KeyPEM)
	waitServedCertificate(r, req, "web", describeLeaf(good.Leaf), isLeaf(good))
	r.WaitMetric(sslInvalidMetric, nil, "= 0", func(v float64) bool { return v == 0 })
}

// TestTLSSecretKeysStayOffTheDisk: a referenced Secret's certificate is served without
// its private key ever reaching the ssl directory (NGINX's workers get it through Lua);
// the directory (mode 0700) holds only mode 0600 files, and a Secret file an earlier
// version left there is removed at start.
func TestTLSSecretKeysStayOffTheDisk(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	cert := newTestCert(t, "files.example", "files.example")
	applyTLSSecret(f, "files-tls", cert.CertPEM, cert.KeyPEM)
	// An ssl directory where an earlier version kept the Secret's certificate and key.
	sslDir := filepath.Join(t.TempDir(), "ssl")
	if err := os.MkdirAll(sslDir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(sslDir, f.Namespace+"_files-tls.pem")
	if err := os.WriteFile(stale, append(append([]byte{}, cert.CertPEM...), cert.KeyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	r := f.StartReactor("--ssl-dir=" + sslDir)
	r.SSLDir = sslDir
	r.WaitReady()
	f.CreateIngress(tlsIngress(f, "files", "files.example", "files-tls", "web"))
	waitServedCertificate(r, harness.Request{Host: "files.example"}, "web", describeLeaf(cert.Leaf), isLeaf(cert))

	dir, err := os.Stat(r.SSLDir)
	if err != nil {
		t.Fatal(err)
	}
	if dir.Mode().Perm() != 0o700 {
		t.Errorf("ssl dir %s has mode %o, want 0700", r.SSLDir, dir.Mode().Perm())
	}
	entries, err := os.ReadDir(r.SSLDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() || info.Mode().Perm() != 0o600 {
			t.Errorf("%s in the ssl dir has mode %s, want a regular file with mode 0600", e.Name(), info.Mode())
		}
		content, err := os.ReadFile(filepath.Join(r.SSLDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(content, bytes.TrimSpace(cert.KeyPEM)) {
			t.Errorf("%s in the ssl dir holds the Secret's private key", e.Name())
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the referenced Secret has a certificate file, or the one an earlier version wrote is still there (stat: %v)", err)
	}

	f.DeleteIngress("files")
	r.Eventually(harness.DefaultTimeout, "the expiry metric of the unreferenced Secret to be gone", func() (bool, string) {
		m, err := r.Metrics()
		if err != nil {
			return false, err.Error()
		}
		_, found := m.Value(sslExpireMetric, map[string]string{"namespace": f.Namespace, "secret": "files-tls"})
		return !found, m.Describe(sslExpireMetric)
	})
}

// TestTLSDefaultSSLCertificateFlag: with --default-ssl-certificate, a host that has no
// certificate of its own and a client that sends no SNI get that Secret's certificate,
// while a host with its own Secret keeps it.
func TestTLSDefaultSSLCertificateFlag(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	def := newTestCert(t, "default.example", "default.example")
	own := newTestCert(t, "own.example", "own.example")
	applyTLSSecret(f, "default-tls", def.CertPEM, def.KeyPEM)
	applyTLSSecret(f, "own-tls", own.CertPEM, own.KeyPEM)
	r := f.StartReactor("--default-ssl-certificate=" + f.Namespace + "/default-tls")
	r.WaitReady()
	f.CreateIngress(f.Ingress("nocert", "nocert.example", harness.IngressBackend{Service: "web", Port: 80}))
	f.CreateIngress(tlsIngress(f, "own", "own.example", "own-tls", "web"))

	waitServedCertificate(r, harness.Request{Host: "nocert.example"}, "web", describeLeaf(def.Leaf), isLeaf(def))
	waitServedCertificate(r, harness.Request{Host: "nocert.example", NoSNI: true}, "web", describeLeaf(def.Leaf), isLeaf(def))
	waitServedCertificate(r, harness.Request{Host: "own.example"}, "web", describeLeaf(own.Leaf), isLeaf(own))
	// A name no Ingress knows gets it too.
	resp, err := r.Do(harness.Request{HTTPS: true, Host: "unknown.example"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.PeerCertificates) == 0 || !bytes.Equal(resp.PeerCertificates[0].Raw, def.Leaf.Raw) {
		t.Errorf("https://unknown.example answered %s, want the --default-ssl-certificate", resp)
	}
}

// TestTLSIngressSwitchesSecret: pointing an Ingress's tls section at another Secret
// makes its host present that Secret's certificate. nginx.conf does not change (the
// Secret is not in it), so NGINX is not reloaded and the reloads counter stays put.
func TestTLSIngressSwitchesSecret(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	oldCert := newTestCert(t, "old", "switch.example")
	newCert := newTestCert(t, "new", "switch.example")
	applyTLSSecret(f, "old-tls", oldCert.CertPEM, oldCert.KeyPEM)
	applyTLSSecret(f, "new-tls", newCert.CertPEM, newCert.KeyPEM)
	r := f.StartReactor()
	r.WaitReady()
	f.CreateIngress(tlsIngress(f, "switch", "switch.example", "old-tls", "web"))
	req := harness.Request{Host: "switch.example"}
	waitServedCertificate(r, req, "web", describeLeaf(oldCert.Leaf), isLeaf(oldCert))
	reloads := r.WaitConfigSettled()

	f.UpdateIngress("switch", func(ing *networkingv1.Ingress) { ing.Spec.TLS[0].SecretName = "new-tls" })
	waitServedCertificate(r, req, "web", describeLeaf(newCert.Leaf), isLeaf(newCert))
	// The new host table reached the reloader in the same Rendered message that would
	// have queued an apply, so a counted apply is visible by now (or very soon after).
	if got := r.WaitConfigSettled(); got != reloads {
		t.Errorf("%s went from %g to %g when an Ingress switched Secrets, want no reload", harness.ReloadsMetric, reloads, got)
	}
}

// TestTLSCertificatesSurviveNginxCrash: a fresh NGINX (after its master was killed)
// holds no pushed certificates; the controller pushes them again, so TLS hosts present
// their own certificates, not the default one, and rotation keeps working.
func TestTLSCertificatesSurviveNginxCrash(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	cert := newTestCert(t, "crash.example", "crash.example")
	applyTLSSecret(f, "crash-tls", cert.CertPEM, cert.KeyPEM)
	r := f.StartReactor()
	r.WaitReady()
	f.CreateIngress(tlsIngress(f, "crash", "crash.example", "crash-tls", "web"))
	req := harness.Request{Host: "crash.example"}
	waitServedCertificate(r, req, "web", describeLeaf(cert.Leaf), isLeaf(cert))
	r.WaitConfigSettled()

	restarts := r.MetricValue(nginxRestartsMetric, nil)
	pid, err := r.NginxMasterPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill NGINX master %d: %v", pid, err)
	}
	r.WaitMetric(nginxRestartsMetric, nil, fmt.Sprintf(">= %g", restarts+1), func(v float64) bool { return v >= restarts+1 })
	r.Eventually(harness.DefaultTimeout, "a new NGINX master PID", func() (bool, string) {
		got, err := r.NginxMasterPID()
		if err != nil {
			return false, err.Error()
		}
		return got != pid, fmt.Sprintf("PID %d", got)
	})
	waitServedCertificate(r, req, "web", describeLeaf(cert.Leaf), isLeaf(cert))

	rotated := newTestCert(t, "crash.example rotated", "crash.example")
	applyTLSSecret(f, "crash-tls", rotated.CertPEM, rotated.KeyPEM)
	waitServedCertificate(r, req, "web", describeLeaf(rotated.Leaf), isLeaf(rotated))
}

// TestTLSWildcardHost: a wildcard rule host with a wildcard TLS entry presents its
// certificate for names one label below it, and the default certificate for the bare
// domain (which the wildcard does not cover).
func TestTLSWildcardHost(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	cert := newTestCert(t, "wildcard", "*.wild.example")
	applyTLSSecret(f, "wild-tls", cert.CertPEM, cert.KeyPEM)
	r := f.StartReactor()
	r.WaitReady()
	f.CreateIngress(tlsIngress(f, "wild", "*.wild.example", "wild-tls", "web"))

	waitServedCertificate(r, harness.Request{Host: "a.wild.example"}, "web", describeLeaf(cert.Leaf), isLeaf(cert))
	requireCertificate(t, r, harness.Request{Host: "b.wild.example"}, "web", cert)
	resp, err := r.Do(harness.Request{HTTPS: true, Host: "wild.example"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.PeerCertificates) == 0 || !isFakeDefault(resp.PeerCertificates[0]) {
		t.Errorf("https://wild.example answered %s, want the default certificate (*.wild.example does not cover it)", resp)
	}
	// An Ingress wildcard covers exactly one label: a deeper name is neither routed nor given its certificate.
	deep, err := r.Do(harness.Request{HTTPS: true, Host: "a.b.wild.example"})
	if err != nil {
		t.Fatal(err)
	}
	if deep.Echo != nil {
		t.Errorf("https://a.b.wild.example was routed to %s; *.wild.example must not cover two labels", deep.Echo.Name)
	}
	if len(deep.PeerCertificates) == 0 || !isFakeDefault(deep.PeerCertificates[0]) {
		t.Errorf("https://a.b.wild.example answered %s, want the default certificate", deep)
	}
}

// TestTLSDefaultSSLCertificateRotation: updating the --default-ssl-certificate Secret
// changes what hosts without a certificate get, without a reload; breaking it falls
// back to the generated certificate.
func TestTLSDefaultSSLCertificateRotation(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	first := newTestCert(t, "default one", "default.example")
	applyTLSSecret(f, "default-tls", first.CertPEM, first.KeyPEM)
	r := f.StartReactor("--default-ssl-certificate=" + f.Namespace + "/default-tls")
	r.WaitReady()
	f.CreateIngress(f.Ingress("nocert", "nocert.example", harness.IngressBackend{Service: "web", Port: 80}))
	req := harness.Request{Host: "nocert.example"}
	waitServedCertificate(r, req, "web", describeLeaf(first.Leaf), isLeaf(first))
	reloads := r.WaitConfigSettled()

	second := newTestCert(t, "default two", "default.example")
	applyTLSSecret(f, "default-tls", second.CertPEM, second.KeyPEM)
	waitServedCertificate(r, req, "web", describeLeaf(second.Leaf), isLeaf(second))
	if got := r.WaitConfigSettled(); got != reloads {
		t.Errorf("%s went from %g to %g when the default certificate rotated, want no reload", harness.ReloadsMetric, reloads, got)
	}

	applyTLSSecret(f, "default-tls", second.CertPEM, first.KeyPEM)
	waitServedCertificate(r, req, "web", "the generated default certificate", isFakeDefault)
	r.WaitMetric(sslInvalidMetric, nil, "= 1", func(v float64) bool { return v == 1 })
}

// TestTLSRotationLatency measures how long a certificate rotation takes end to end:
// from the Secret update returning from the API server to the first TLS handshake that
// presents the new certificate (handshakes are retried every millisecond). It is a
// measurement, run on request only, that reports percentiles; it fails only when a
// rotation does not arrive or NGINX reloads. docs/benchmarks-tls.md has the command:
//
//	TLS_ROTATION_SAMPLES=50 hack/in-netns.sh go test -tags integration -count=1 \
//	    -run TestTLSRotationLatency -v ./test/integration/
func TestTLSRotationLatency(t *testing.T) {
	// In the normal suite a few rotations check that each one arrives without a reload; the variable asks
	// for a measurement with more samples.
	samples, _ := strconv.Atoi(os.Getenv("TLS_ROTATION_SAMPLES"))
	if samples <= 0 {
		samples = 5
	}
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	// Certificates are made up front so that key generation is not timed.
	pool := make([]testCert, samples+1)
	for i := range pool {
		pool[i] = newTestCert(t, fmt.Sprintf("rotation %d", i), "latency.example")
	}
	applyTLSSecret(f, "latency-tls", pool[0].CertPEM, pool[0].KeyPEM)
	r := f.StartReactor("--log-level=info")
	r.WaitReady()
	f.CreateIngress(tlsIngress(f, "latency", "latency.example", "latency-tls", "web"))
	waitServedCertificate(r, harness.Request{Host: "latency.example"}, "web", describeLeaf(pool[0].Leaf), isLeaf(pool[0]))
	reloads := r.WaitConfigSettled()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.HTTPSPort))
	leafNow := func() ([]byte, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{ServerName: "latency.example", InsecureSkipVerify: true}) //nolint:gosec // the test checks the served certificate itself
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw, nil
	}
	var handshake time.Duration
	var durations []time.Duration
	for i := 1; i <= samples; i++ {
		c := pool[i]
		api := f.Client.CoreV1().Secrets(f.Namespace)
		cur, err := api.Get(f.Ctx, "latency-tls", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Data = map[string][]byte{corev1.TLSCertKey: c.CertPEM, corev1.TLSPrivateKeyKey: c.KeyPEM}
		if _, err := api.Update(f.Ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		deadline := start.Add(harness.DefaultTimeout)
		for {
			began := time.Now()
			raw, err := leafNow()
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			handshake = time.Since(began)
			if bytes.Equal(raw, c.Leaf.Raw) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rotation %d not served after %s", i, harness.DefaultTimeout)
			}
			time.Sleep(time.Millisecond)
		}
		durations = append(durations, time.Since(start))
	}
	slices.Sort(durations)
	pct := func(p float64) time.Duration { return durations[int(p*float64(len(durations)-1))] }
	t.Logf("certificate rotation, Secret update to first handshake with the new certificate, %d samples: "+
		"min %s p50 %s p90 %s max %s (one handshake takes about %s)",
		len(durations), durations[0], pct(0.5), pct(0.9), durations[len(durations)-1], handshake)
	if got := r.WaitConfigSettled(); got != reloads {
		t.Errorf("%s went from %g to %g during %d rotations, want no reload", harness.ReloadsMetric, reloads, got, samples)
	}
	if sum, count := r.MetricValue("ingress_reactor_reload_duration_seconds_sum", nil), r.MetricValue("ingress_reactor_reload_duration_seconds_count", nil); count > 0 {
		t.Logf("for comparison, the %g configuration applies of this run (test, reload, confirm) took %.1f ms on average", count, 1000*sum/count)
	}
}

// TestTLSKeyTypes: certificates with RSA, ECDSA and Ed25519 keys are all served for
// their hosts, over TLS 1.2 (RSA and ECDSA) and TLS 1.3.
func TestTLSKeyTypes(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  crypto.Signer
		tls2 bool // TLS 1.2 clients can use it with the configured cipher list
	}{
		{"rsa", rsaKey, true},
		{"p384", p384, true},
		{"ed25519", edKey, false}, // TLS 1.2 has no Ed25519 cipher suite in the list
	}
	r := f.StartReactor()
	r.WaitReady()
	for _, tc := range tests {
		host := tc.name + ".keys.example"
		c := newTestCertWithKey(t, tc.key, host, host)
		applyTLSSecret(f, tc.name+"-tls", c.CertPEM, c.KeyPEM)
		f.CreateIngress(tlsIngress(f, tc.name, host, tc.name+"-tls", "web"))
		waitServedCertificate(r, harness.Request{Host: host}, "web", describeLeaf(c.Leaf), isLeaf(c))
		if !tc.tls2 {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.HTTPSPort))
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
			&tls.Config{ServerName: host, InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}) //nolint:gosec // the test checks the served certificate itself
		if err != nil {
			t.Errorf("%s: TLS 1.2 handshake: %v", tc.name, err)
			continue
		}
		if leaf := conn.ConnectionState().PeerCertificates[0]; !bytes.Equal(leaf.Raw, c.Leaf.Raw) {
			t.Errorf("%s: TLS 1.2 handshake presented %s, want %s", tc.name, describeLeaf(leaf), describeLeaf(c.Leaf))
		}
		_ = conn.Close()
	}
}
