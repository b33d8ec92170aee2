//go:build integration

package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// clientCA is a CA that issues client certificates.
type clientCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newClientCA(t *testing.T, cn string) *clientCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &clientCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a client certificate for cn.
func (ca *clientCA) issue(t *testing.T, cn string) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestAnnotationsClientCert: client certificate authentication through the real binary. An Ingress whose
// auth-tls-secret does not exist is rejected; once it exists, the host's handshakes verify client
// certificates: none gets 400, the CA's gets through with the ssl-client-* headers, a CN that
// auth-tls-match-cn does not match gets 403, a host without auth-tls does not ask. A new CA in the
// Secret applies to new connections without a reload; an injection through auth-tls-match-cn is
// rejected alone.
func TestAnnotationsClientCert(t *testing.T) {
	f := harness.New(t)
	routingService(f, "web", f.StartBackend("web", false))
	f.CreateIngress(annotate(f.Ingress("mtls", "mtls.example", prefixPath("/", "web")),
		"auth-tls-secret", "client-ca", "auth-tls-match-cn", "CN=(alice|bob)$"))
	f.CreateIngress(annotate(f.Ingress("inject", "inject.example", prefixPath("/", "web")),
		"auth-tls-secret", "client-ca", "auth-tls-match-cn", "CN=x\" ) { return 200; } } #"))
	f.CreateIngress(f.Ingress("plain", "plain.example", prefixPath("/", "web")))
	r := f.StartReactor()
	r.WaitReady()
	f.WaitEvent(r, "Ingress", "mtls", corev1.EventTypeWarning, reasonRejected,
		ingressNginx+"auth-tls-secret", "secret "+f.Namespace+"/client-ca does not exist")
	f.WaitEvent(r, "Ingress", "inject", corev1.EventTypeWarning, reasonRejected,
		ingressNginx+"auth-tls-match-cn", "not a regular expression that Go's regexp (RE2) accepts")
	r.WaitConfigSettled()
	requireNotRouted(t, r, "mtls.example", "/")

	ca := newClientCA(t, "client-ca")
	alice, carol := ca.issue(t, "alice"), ca.issue(t, "carol")
	f.CreateObjects(1, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "client-ca", Namespace: f.Namespace},
		Data: map[string][]byte{"ca.crt": ca.pem}})
	req := func(host string, cert *tls.Certificate) harness.Request {
		return harness.Request{HTTPS: true, Host: host, Path: "/", ClientCertificate: cert}
	}
	waitFor(r, req("mtls.example", alice), "alice served", func(resp *harness.Response) bool { return resp.Status == http.StatusOK && resp.Echo != nil })
	resp := send(t, r, req("mtls.example", alice))
	if h := resp.Echo.Headers; len(h["Ssl-Client-Verify"]) != 1 || h["Ssl-Client-Verify"][0] != "SUCCESS" || h["Ssl-Client-Subject-Dn"][0] != "CN=alice" {
		t.Errorf("the backend got %v", resp.Echo.Headers)
	}
	if resp := send(t, r, req("mtls.example", nil)); resp.Status != http.StatusBadRequest || resp.Echo != nil {
		t.Errorf("no certificate: %s, want 400", resp)
	}
	if resp := send(t, r, req("mtls.example", carol)); resp.Status != http.StatusForbidden || resp.Echo != nil {
		t.Errorf("a CN that does not match: %s, want 403", resp)
	}
	checkServed(t, r, req("plain.example", nil), "web")
	requireNotRouted(t, r, "inject.example", "/")
	reloads := r.WaitConfigSettled()

	// Another CA in the Secret: alice's certificate no longer verifies, and NGINX reloads once, so that
	// connections whose handshake the old CA verified drain (nginx.Model.ClientCADigest).
	other := newClientCA(t, "other-ca")
	api := f.Client.CoreV1().Secrets(f.Namespace)
	cur, err := api.Get(f.Ctx, "client-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Data["ca.crt"] = other.pem
	if _, err := api.Update(f.Ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(r, req("mtls.example", alice), "400 for a certificate of the old CA", func(resp *harness.Response) bool {
		return resp.Status == http.StatusBadRequest && resp.Echo == nil
	})
	checkServed(t, r, req("mtls.example", other.issue(t, "bob")), "web")
	// The reload may come after the routes (the reloader paces reloads), so wait for it, then for NGINX
	// to run what it loaded.
	r.WaitMetric(harness.ReloadsMetric, nil, "to count the CA change's reload", func(v float64) bool { return v > reloads })
	if got := r.WaitConfigSettled(); got != reloads+1 {
		t.Errorf("%s went from %g to %g for a new CA; want one reload", harness.ReloadsMetric, reloads, got)
	}
}
