// Package ocsptest is a test certificate authority with an OCSP responder on loopback, for the tests of
// OCSP stapling (enable-ocsp) in this repository. Only tests import it.
package ocsptest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"
)

// CA issues certificates that name its responder, and answers OCSP requests for them.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// URL is the responder's address (http://127.0.0.1:port/), or the one given to NewCAAt.
	URL string
	// Requests counts the OCSP requests the responder answered.
	Requests atomic.Int64

	mu        sync.Mutex
	serial    int64
	status    map[string]int // serial -> ocsp.Good / Revoked / Unknown
	validity  time.Duration
	down      bool
	responder *x509.Certificate // delegated responder; nil: the CA signs
	respKey   crypto.Signer
	server    *httptest.Server
	now       func() time.Time
}

// NewCA starts a CA whose responder listens on 127.0.0.1; it stops with the test.
func NewCA(t testing.TB) *CA {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return NewCAOn(t, ln)
}

// NewCAOn starts a CA whose responder serves on ln; it stops with the test.
func NewCAOn(t testing.TB, ln net.Listener) *CA {
	t.Helper()
	cert, key := newCert(t, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ocsptest CA"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	ca := &CA{Cert: cert, key: key, serial: 100, status: map[string]int{}, validity: time.Hour, now: time.Now}
	ca.server = httptest.NewUnstartedServer(http.HandlerFunc(ca.serve))
	_ = ca.server.Listener.Close()
	ca.server.Listener = ln
	ca.server.Start()
	ca.URL = ca.server.URL + "/"
	t.Cleanup(ca.server.Close)
	return ca
}

// Issue returns a leaf for host (naming the responder at ocspURL, the CA's own when empty) followed by
// the CA, and the leaf's key, as PEM; and the leaf's serial.
func (ca *CA) Issue(t testing.TB, host, ocspURL string) (chainPEM, keyPEM []byte, serial *big.Int) {
	t.Helper()
	if ocspURL == "" {
		ocspURL = ca.URL
	}
	ca.mu.Lock()
	ca.serial++
	serial = big.NewInt(ca.serial)
	ca.status[serial.String()] = ocsp.Good
	ca.mu.Unlock()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ocspURL != "-" {
		tmpl.OCSPServer = []string{ocspURL}
	}
	leaf, key := newCert(t, tmpl, ca.Cert, ca.key)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	chainPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}), ca.PEM()...)
	return chainPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), serial
}

// newCert signs tmpl, valid from an hour ago for a day, for a new P-256 key, with parent's key (nil:
// self-signed).
func newCert(t testing.TB, tmpl, parent *x509.Certificate, parentKey crypto.Signer) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// PEM returns the CA certificate as PEM.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// SetStatus sets the status (ocsp.Good, ocsp.Revoked, ocsp.Unknown) the responder gives serial.
func (ca *CA) SetStatus(serial *big.Int, status int) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.status[serial.String()] = status
}

// SetValidity sets nextUpdate - thisUpdate of new responses; 0 leaves nextUpdate out.
func (ca *CA) SetValidity(d time.Duration) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.validity = d
}

// SetClock sets the clock of the responder's thisUpdate.
func (ca *CA) SetClock(now func() time.Time) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.now = now
}

// SetDown makes the responder answer 503 (true) or respond again (false).
func (ca *CA) SetDown(down bool) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.down = down
}

// DelegateResponder makes a responder certificate signed by the CA sign the responses; with
// ocspSigning false it lacks the OCSP-signing extended key usage.
func (ca *CA) DelegateResponder(t testing.TB, ocspSigning bool) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "ocsptest responder"}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if ocspSigning {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageOCSPSigning}
	}
	cert, key := newCert(t, tmpl, ca.Cert, ca.key)
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.responder, ca.respKey = cert, key
}

// Response returns a response for serial with status, signed by the CA (or its delegated responder),
// valid from thisUpdate for validity (no nextUpdate when 0).
func (ca *CA) Response(t testing.TB, serial *big.Int, status int, thisUpdate time.Time, validity time.Duration) []byte {
	t.Helper()
	der, err := ca.response(serial, status, thisUpdate, validity)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func (ca *CA) response(serial *big.Int, status int, thisUpdate time.Time, validity time.Duration) ([]byte, error) {
	ca.mu.Lock()
	signer, key := ca.Cert, ca.key
	if ca.responder != nil {
		signer, key = ca.responder, ca.respKey
	}
	ca.mu.Unlock()
	tmpl := ocsp.Response{Status: status, SerialNumber: serial, ThisUpdate: thisUpdate}
	if validity > 0 {
		tmpl.NextUpdate = thisUpdate.Add(validity)
	}
	if status == ocsp.Revoked {
		tmpl.RevokedAt, tmpl.RevocationReason = thisUpdate.Add(-time.Minute), ocsp.KeyCompromise
	}
	if signer != ca.Cert {
		tmpl.Certificate = signer
	}
	return ocsp.CreateResponse(ca.Cert, signer, tmpl, key)
}

func (ca *CA) serve(w http.ResponseWriter, r *http.Request) {
	ca.mu.Lock()
	down, validity, now := ca.down, ca.validity, ca.now
	ca.mu.Unlock()
	if down || r.Method != http.MethodPost {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		return
	}
	req, err := ocsp.ParseRequest(body)
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	ca.mu.Lock()
	status, ok := ca.status[req.SerialNumber.String()]
	ca.mu.Unlock()
	if !ok {
		status = ocsp.Unknown
	}
	der, err := ca.response(req.SerialNumber, status, now().Add(-time.Second).Truncate(time.Second), validity)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ca.Requests.Add(1)
	w.Header().Set("Content-Type", "application/ocsp-response")
	_, _ = w.Write(der)
}
