//go:build integration

package integration

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/certs/ocsptest"
	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// stapledStatus makes a handshake with NGINX for sni and describes the OCSP response it stapled:
// "none", or its status for serial in the CA's signature ("good", "revoked"), or why it does not check out.
func stapledStatus(r *harness.Reactor, sni string, ca *ocsptest.CA, leafRaw []byte) (string, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.HTTPSPort))
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // the test checks the served certificate itself
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	st := conn.ConnectionState()
	if !bytes.Equal(st.PeerCertificates[0].Raw, leafRaw) {
		return "another certificate", nil
	}
	if st.OCSPResponse == nil {
		return "none", nil
	}
	resp, err := ocsp.ParseResponseForCert(st.OCSPResponse, st.PeerCertificates[0], ca.Cert)
	if err != nil {
		return "invalid: " + err.Error(), nil
	}
	switch resp.Status {
	case ocsp.Good:
		return "good", nil
	case ocsp.Revoked:
		return "revoked", nil
	}
	return fmt.Sprintf("status %d", resp.Status), nil
}

// TestOCSPStapling runs the binary with enable-ocsp through the real API server and an OCSP responder on
// loopback: the certificate's response is stapled; a renewed (and revoked) certificate gets its own
// without a reload; a certificate whose responder is down is served without one; switching enable-ocsp
// off stops stapling, again without a reload.
func TestOCSPStapling(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	ca := ocsptest.NewCA(t)
	down := ocsptest.NewCA(t)
	down.SetDown(true)

	chain, key, _ := ca.Issue(t, "ocsp.example", "")
	applyTLSSecret(f, "ocsp-tls", chain, key)
	downChain, downKey, _ := down.Issue(t, "down.example", "")
	applyTLSSecret(f, "down-tls", downChain, downKey)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx-controller", Namespace: f.Namespace},
		Data: map[string]string{"enable-ocsp": "true"}}
	cm, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Create(f.Ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := f.StartReactor("--configmap=" + f.Namespace + "/ingress-nginx-controller")
	r.WaitReady()
	f.CreateIngress(tlsIngress(f, "ocsp", "ocsp.example", "ocsp-tls", "web"))
	f.CreateIngress(tlsIngress(f, "down", "down.example", "down-tls", "web"))

	leaf := func(chainPEM []byte) []byte {
		b, _ := pem.Decode(chainPEM)
		if b == nil {
			t.Fatal("no certificate in the chain")
		}
		return b.Bytes
	}
	waitStapled := func(sni string, chainPEM []byte, issuer *ocsptest.CA, want string) {
		t.Helper()
		raw := leaf(chainPEM)
		r.Eventually(harness.DefaultTimeout, sni+" stapled "+want, func() (bool, string) {
			got, err := stapledStatus(r, sni, issuer, raw)
			if err != nil {
				return false, err.Error()
			}
			return got == want, got
		})
	}
	waitStapled("ocsp.example", chain, ca, "good")
	reloads := r.WaitConfigSettled()

	// The responder that is down: the handshake succeeds without a staple, and the failure is counted.
	r.WaitMetric("ingress_reactor_ocsp_fetches_total", map[string]string{"result": "unreachable"}, ">= 1", func(v float64) bool { return v >= 1 })
	if got, err := stapledStatus(r, "down.example", down, leaf(downChain)); err != nil || got != "none" {
		t.Errorf("down.example: %q, %v; want a handshake without a staple", got, err)
	}

	// A renewed certificate, already revoked: its own response is stapled as returned, without a reload.
	renewed, renewedKey, renewedSerial := ca.Issue(t, "ocsp.example", "")
	ca.SetStatus(renewedSerial, ocsp.Revoked)
	applyTLSSecret(f, "ocsp-tls", renewed, renewedKey)
	waitStapled("ocsp.example", renewed, ca, "revoked")
	r.WaitMetric("ingress_reactor_ocsp_stapled", nil, "== 1", func(v float64) bool { return v == 1 })

	// enable-ocsp off: no staple any more, and still no reload.
	cm.Data = map[string]string{"enable-ocsp": "false"}
	if _, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStapled("ocsp.example", renewed, ca, "none")
	r.WaitMetric("ingress_reactor_ocsp_stapled", nil, "== 0", func(v float64) bool { return v == 0 })
	if got := r.WaitConfigSettled(); got != reloads {
		t.Errorf("%s went from %g to %g while stapling changed, want no reload", harness.ReloadsMetric, reloads, got)
	}
}
