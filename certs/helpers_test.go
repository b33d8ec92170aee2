package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// keyKind selects the algorithm of a test key.
type keyKind string

const (
	kindRSA2048 keyKind = "rsa2048"
	kindRSA1024 keyKind = "rsa1024"
	kindP256    keyKind = "ecdsa-p256"
	kindP384    keyKind = "ecdsa-p384"
	kindEd25519 keyKind = "ed25519"
)

// keyFormat selects the PEM encoding of a test key.
type keyFormat string

const (
	pkcs1 keyFormat = "pkcs1" // RSA PRIVATE KEY
	pkcs8 keyFormat = "pkcs8" // PRIVATE KEY
	sec1  keyFormat = "sec1"  // EC PRIVATE KEY
)

var (
	keyCacheMu sync.Mutex
	keyCache   = map[string]crypto.Signer{}
)

// testKey returns the n-th key of kind, generating it once per test binary:
// RSA key generation is slow enough to dominate the tests otherwise.
func testKey(tb testing.TB, kind keyKind, n int) crypto.Signer {
	tb.Helper()
	id := fmt.Sprintf("%s/%d", kind, n)
	keyCacheMu.Lock()
	defer keyCacheMu.Unlock()
	if k, ok := keyCache[id]; ok {
		return k
	}
	var (
		k   crypto.Signer
		err error
	)
	switch kind {
	case kindRSA2048:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	case kindRSA1024:
		// crypto/rsa refuses keys under 1024 bits, and 1024 itself only
		// because it is the documented minimum; it is what we reject.
		k, err = rsa.GenerateKey(rand.Reader, 1024)
	case kindP256:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case kindP384:
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case kindEd25519:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	default:
		tb.Fatalf("unknown key kind %q", kind)
	}
	if err != nil {
		tb.Fatalf("generate %s key: %v", kind, err)
	}
	keyCache[id] = k
	return k
}

// certSpec describes a certificate to make; zero fields get defaults.
type certSpec struct {
	cn        string
	dns       []string
	ips       []net.IP
	notBefore time.Time
	notAfter  time.Time
	key       crypto.Signer
	parent    *x509.Certificate // nil: self-signed
	parentKey crypto.Signer
	isCA      bool
	serial    int64
	sigAlg    x509.SignatureAlgorithm // zero: the library's default
}

var testNow = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// makeCert signs a certificate from spec.
func makeCert(tb testing.TB, spec certSpec) *x509.Certificate {
	tb.Helper()
	if spec.notBefore.IsZero() {
		spec.notBefore = testNow.Add(-24 * time.Hour)
	}
	if spec.notAfter.IsZero() {
		spec.notAfter = testNow.Add(90 * 24 * time.Hour)
	}
	if spec.serial == 0 {
		spec.serial = 1
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(spec.serial),
		Subject:               pkix.Name{CommonName: spec.cn, Organization: []string{"test"}},
		DNSNames:              spec.dns,
		IPAddresses:           spec.ips,
		NotBefore:             spec.notBefore,
		NotAfter:              spec.notAfter,
		BasicConstraintsValid: true,
		IsCA:                  spec.isCA,
		SignatureAlgorithm:    spec.sigAlg,
	}
	if spec.isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	parent, parentKey := tmpl, spec.key
	if spec.parent != nil {
		parent, parentKey = spec.parent, spec.parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, spec.key.Public(), parentKey)
	if err != nil {
		tb.Fatalf("create certificate: %v", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("parse created certificate: %v", err)
	}
	return c
}

// pemCerts encodes certificates as consecutive CERTIFICATE blocks.
func pemCerts(certs ...*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// pemKey encodes key in format.
func pemKey(tb testing.TB, key crypto.Signer, format keyFormat) []byte {
	tb.Helper()
	var (
		typ string
		der []byte
		err error
	)
	switch format {
	case pkcs1:
		typ, der = "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey))
	case pkcs8:
		typ = "PRIVATE KEY"
		der, err = x509.MarshalPKCS8PrivateKey(key)
	case sec1:
		typ = "EC PRIVATE KEY"
		der, err = x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	default:
		tb.Fatalf("unknown key format %q", format)
	}
	if err != nil {
		tb.Fatalf("marshal key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// testCA is a root and an intermediate, like a public CA's chain.
type testCA struct {
	root, inter       *x509.Certificate
	rootKey, interKey crypto.Signer
}

var (
	caOnce sync.Once
	theCA  testCA
)

func sharedCA(tb testing.TB) testCA {
	tb.Helper()
	caOnce.Do(func() {
		rk := testKey(tb, kindP384, 100)
		ik := testKey(tb, kindP256, 100)
		root := makeCert(tb, certSpec{cn: "Test Root", key: rk, isCA: true, notAfter: testNow.Add(10 * 365 * 24 * time.Hour)})
		inter := makeCert(tb, certSpec{cn: "Test Intermediate", key: ik, isCA: true, parent: root, parentKey: rk, serial: 2, notAfter: testNow.Add(5 * 365 * 24 * time.Hour)})
		theCA = testCA{root: root, inter: inter, rootKey: rk, interKey: ik}
	})
	return theCA
}

// leafPair makes a leaf for dns issued by the shared intermediate, with key
// kind, and returns tls.crt (leaf + intermediate) and tls.key in format.
func leafPair(tb testing.TB, kind keyKind, format keyFormat, dns ...string) (crt, key []byte) {
	tb.Helper()
	ca := sharedCA(tb)
	k := testKey(tb, kind, 0)
	leaf := makeCert(tb, certSpec{cn: firstOr(dns, "leaf"), dns: dns, key: k, parent: ca.inter, parentKey: ca.interKey, serial: 10})
	return pemCerts(leaf, ca.inter), pemKey(tb, k, format)
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// tlsSecret builds a Secret of type kubernetes.io/tls.
func tlsSecret(ns, name string, crt, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
}

// mustCertificate parses a fresh ECDSA certificate for key and dns.
func mustCertificate(tb testing.TB, key types.NamespacedName, dns ...string) *Certificate {
	tb.Helper()
	crt, k := leafPair(tb, kindP256, pkcs8, dns...)
	c, err := ParsePEM(key, crt, k, nil)
	if err != nil {
		tb.Fatalf("ParsePEM: %v", err)
	}
	return c
}

// keyFragments returns pieces of the private key material in keyPEM as they
// could appear in a message: lines of its base64 body, and windows of its
// DER bytes raw and in hex.
func keyFragments(keyPEM []byte) []string {
	var out []string
	rest := keyPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if !strings.Contains(block.Type, "PRIVATE KEY") {
			continue
		}
		body := strings.ReplaceAll(string(pem.EncodeToMemory(&pem.Block{Type: "X", Bytes: block.Bytes})), "\n", "")
		body = strings.TrimSuffix(strings.TrimPrefix(body, "-----BEGIN X-----"), "-----END X-----")
		for i := 0; i+16 <= len(body); i += 8 {
			out = append(out, body[i:i+16])
		}
		for i := 0; i+12 <= len(block.Bytes); i += 6 {
			out = append(out, string(block.Bytes[i:i+12]), hex.EncodeToString(block.Bytes[i:i+12]))
		}
	}
	return out
}

// assertNoKeyMaterial fails when text contains any fragment of keyPEM.
func assertNoKeyMaterial(tb testing.TB, text string, keyPEM []byte) {
	tb.Helper()
	for _, f := range keyFragments(keyPEM) {
		if strings.Contains(text, f) {
			tb.Fatalf("text contains key material %q:\n%s", f, text)
		}
	}
}
