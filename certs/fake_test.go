package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

func TestGenerateFakeDefault(t *testing.T) {
	now := testNow
	c, err := GenerateFakeDefault(now)
	if err != nil {
		t.Fatal(err)
	}
	if c.SecretKey != FakeDefaultKey {
		t.Errorf("SecretKey = %v, want %v", c.SecretKey, FakeDefaultKey)
	}
	if !slices.Equal(c.Names, []string{"ingress.local"}) || !c.Matches("ingress.local") {
		t.Errorf("Names = %q, want [ingress.local]", c.Names)
	}
	if c.KeyType.String() != "ECDSA-P256" {
		t.Errorf("KeyType = %q, want ECDSA-P256", c.KeyType)
	}
	if want := now.Add(30 * 24 * time.Hour); !c.NotAfter().Equal(want) {
		t.Errorf("NotAfter = %s, want %s (30 days)", c.NotAfter(), want)
	}
	if c.NotYetValid(now) || c.Expired(now) || c.Expired(now.Add(29*24*time.Hour)) || !c.Expired(now.Add(31*24*time.Hour)) {
		t.Errorf("validity %s..%s does not cover the next 30 days from %s only", c.NotBefore(), c.NotAfter(), now)
	}
	// The documented renewal rule: renew once the certificate would be
	// expired FakeDefaultRenewBefore (7 days) from now, that is after day 23.
	needsRenewal := func(at time.Time) bool { return c.Expired(at.Add(FakeDefaultRenewBefore)) }
	if needsRenewal(now.Add(22*24*time.Hour)) || !needsRenewal(now.Add(24*24*time.Hour)) {
		t.Error("renewal rule does not fire between day 23 and day 24")
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}

	leaf, err := x509.ParseCertificate(pemBody(t, c.ChainPEM))
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "Ingress Reactor Fake Certificate" || !slices.Equal(leaf.Subject.Organization, []string{"ingress-reactor"}) {
		t.Errorf("subject = %s", leaf.Subject)
	}
	if leaf.IsCA {
		t.Error("fake certificate is a CA")
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T is not ECDSA P-256", leaf.PublicKey)
	}
	if err := leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature); err != nil || string(leaf.RawIssuer) != string(leaf.RawSubject) {
		t.Errorf("not self-signed: %v", err)
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Error("no serverAuth extended key usage")
	}

	// Regenerated at every start: a second call is a different certificate.
	again, err := GenerateFakeDefault(now)
	if err != nil {
		t.Fatal(err)
	}
	if again.Fingerprint() == c.Fingerprint() || string(again.KeyPEM()) == string(c.KeyPEM()) {
		t.Error("two fake certificates share a certificate or key")
	}

	// It can be written by the Store like any other certificate, under the
	// name ingress-nginx used.
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Write(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := s.Dir() + "/default-fake-certificate.pem"; p.Cert != want {
		t.Errorf("fake certificate file = %s, want %s", p.Cert, want)
	}
}
