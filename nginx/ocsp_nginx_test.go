package nginx

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/ingress-reactor/ingress-reactor/certs/ocsptest"
)

// stapledResponse makes a TLS handshake with NGINX for host and returns the OCSP response it stapled
// (nil: none). Go's client always asks for one.
func stapledResponse(t *testing.T, port int, host string) []byte {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{ServerName: host, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("handshake for %s: %v", host, err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().OCSPResponse
}

// TestOCSPStaplingThroughNginx pushes certificates with and without OCSP responses (enable-ocsp) to a
// real NGINX and checks what its handshakes staple.
func TestOCSPStaplingThroughNginx(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	m, _ := buildModel(t, []any{
		service("default", "a", port(80, "")),
		ingress("default", "a", rule("a.example.com", prefix("/", "a", 80)), withTLS("a-cert", "a.example.com")),
	}, nil)
	applyModel(t, rt, m, cfg)
	starts := rt.Process().Starts()

	ca := ocsptest.NewCA(t)
	chain, key, serial := ca.Issue(t, "a.example.com", "")
	now := time.Now().Truncate(time.Second)
	good := ca.Response(t, serial, ocsp.Good, now.Add(-time.Minute), time.Hour)
	revoked := ca.Response(t, serial, ocsp.Revoked, now.Add(-time.Minute), time.Hour)
	push := func(full bool, pem *CertificatePEM) error {
		u := CertificateUpdate{Certificates: map[string]*CertificatePEM{"default/a-cert": pem}, Hosts: map[Hostname]string{"a.example.com": "default/a-cert"}}
		if full {
			return rt.Client().ReplaceCertificates(ctx, u)
		}
		return rt.Client().PushCertificates(ctx, u)
	}
	stapled := func() bool {
		ids, err := rt.Client().StapledCertificates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ids["default/a-cert"]
	}

	// Without a response (enable-ocsp false): nothing stapled.
	if err := push(true, &CertificatePEM{Cert: chain, Key: key}); err != nil {
		t.Fatal(err)
	}
	if r := stapledResponse(t, cfg.HTTPSPort, "a.example.com"); r != nil {
		t.Fatalf("stapled without a response: %d bytes", len(r))
	}

	// With a good one: stapled byte for byte, and it checks out against the issuer.
	if err := push(false, &CertificatePEM{Cert: chain, Key: key, OCSP: good, OCSPExpires: now.Add(59 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r := stapledResponse(t, cfg.HTTPSPort, "a.example.com")
	if !bytes.Equal(r, good) {
		t.Fatalf("stapled %d bytes, want the good response (%d bytes)", len(r), len(good))
	}
	if parsed, err := ocsp.ParseResponse(r, ca.Cert); err != nil || parsed.Status != ocsp.Good || parsed.SerialNumber.Cmp(serial) != 0 {
		t.Fatalf("stapled response: %+v, %v", parsed, err)
	}
	if !stapled() {
		t.Error("GET /configuration/certificates does not list the staple")
	}
	// Another host (the default certificate) gets none.
	if r := stapledResponse(t, cfg.HTTPSPort, "other.example.com"); r != nil {
		t.Errorf("default certificate stapled %d bytes", len(r))
	}

	// A revoked response replaces it without a reload; a full push keeps it.
	if err := push(false, &CertificatePEM{Cert: chain, Key: key, OCSP: revoked, OCSPExpires: now.Add(59 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if r := stapledResponse(t, cfg.HTTPSPort, "a.example.com"); !bytes.Equal(r, revoked) {
		t.Fatalf("after the revoked push: %d bytes, want the revoked response", len(r))
	}
	if err := push(true, &CertificatePEM{Cert: chain, Key: key, OCSP: revoked, OCSPExpires: now.Add(59 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if r := stapledResponse(t, cfg.HTTPSPort, "a.example.com"); !bytes.Equal(r, revoked) {
		t.Fatalf("after a full push: %d bytes, want the revoked response", len(r))
	}

	// A response pushed already expired is not stapled.
	if err := push(false, &CertificatePEM{Cert: chain, Key: key, OCSP: good, OCSPExpires: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if r := stapledResponse(t, cfg.HTTPSPort, "a.example.com"); r != nil || stapled() {
		t.Fatalf("an expired response is stapled (%d bytes)", len(r))
	}

	// A renewed certificate pushed without a response drops the previous one's.
	if err := push(false, &CertificatePEM{Cert: chain, Key: key, OCSP: good, OCSPExpires: now.Add(59 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	chain2, key2, _ := ca.Issue(t, "a.example.com", "")
	if err := push(false, &CertificatePEM{Cert: chain2, Key: key2}); err != nil {
		t.Fatal(err)
	}
	if r := stapledResponse(t, cfg.HTTPSPort, "a.example.com"); r != nil || stapled() {
		t.Fatalf("the previous certificate's response is stapled to the renewed one (%d bytes)", len(r))
	}

	// Removing the certificate removes its response.
	if err := push(false, &CertificatePEM{Cert: chain, Key: key, OCSP: good, OCSPExpires: now.Add(59 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Client().PushCertificates(ctx, CertificateUpdate{Certificates: map[string]*CertificatePEM{"default/a-cert": nil},
		Hosts: map[Hostname]string{"a.example.com": ""}}); err != nil {
		t.Fatal(err)
	}
	if stapled() {
		t.Error("a removed certificate's response is kept")
	}

	// The data plane refuses a response that is not base64.
	err := rt.Client().post(ctx, "/configuration/certificates", map[string]any{"certificates": map[string]any{
		"default/a-cert": map[string]any{"cert": string(chain), "key": string(key), "ocsp": "%%%", "ocsp_expires": now.Add(time.Hour).Unix()}}})
	if err == nil || !strings.Contains(err.Error(), "ocsp") {
		t.Errorf("a response that is not base64: %v", err)
	}

	if rt.Process().Starts() != starts || strings.Contains(rt.Process().RecentOutput(), "reconfiguring") {
		t.Error("stapling changes reloaded NGINX")
	}
}
