package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Identity and lifetime of the fake default certificate.
const (
	// FakeDefaultCommonName is the subject common name of the fake certificate.
	FakeDefaultCommonName = "Ingress Reactor Fake Certificate"
	// FakeDefaultOrganization is the subject organisation of the fake certificate.
	FakeDefaultOrganization = "ingress-reactor"
	// FakeDefaultHost is the only subjectAltName of the fake certificate.
	FakeDefaultHost = "ingress.local"
	// FakeDefaultValidity is how long a fake certificate is valid from the
	// time it is generated. It is short because the certificate is made
	// anew at every start and carries no trust.
	FakeDefaultValidity = 30 * 24 * time.Hour
	// FakeDefaultRenewBefore is how long before expiry a long-running
	// controller should generate a new fake certificate.
	FakeDefaultRenewBefore = 7 * 24 * time.Hour
	// fakeDefaultBackdate covers clients whose clocks are slightly behind.
	fakeDefaultBackdate = time.Hour
)

// FakeDefaultKey is the store key of the fake default certificate. Its empty
// namespace marks it as the controller's own: no Secret can have that key,
// and [Store] names its file "default-fake-certificate.pem", the name
// ingress-nginx used.
var FakeDefaultKey = types.NamespacedName{Name: "default-fake-certificate"}

// GenerateFakeDefault makes the self-signed certificate served when
// --default-ssl-certificate is not given and SNI matches no certificate:
// ECDSA P-256, subject CN FakeDefaultCommonName and O
// FakeDefaultOrganization, subjectAltName FakeDefaultHost, valid from an hour
// before now for FakeDefaultValidity. Its SecretKey is FakeDefaultKey.
func GenerateFakeDefault(now time.Time) (*Certificate, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("fake default certificate: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("fake default certificate: serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   FakeDefaultCommonName,
			Organization: []string{FakeDefaultOrganization},
		},
		DNSNames:              []string{FakeDefaultHost},
		NotBefore:             now.Add(-fakeDefaultBackdate),
		NotAfter:              now.Add(FakeDefaultValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return nil, fmt.Errorf("fake default certificate: sign: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("fake default certificate: encode key: %w", err)
	}
	// Going through ParsePEM gives the fake certificate exactly the checks
	// and the normal form of a Secret's certificate.
	c, err := ParsePEM(FakeDefaultKey,
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		nil)
	clear(keyDER)
	if err != nil {
		return nil, fmt.Errorf("fake default certificate: %w", err)
	}
	return c, nil
}
