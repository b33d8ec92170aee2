package certs

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Certificate is a validated server certificate with its private key, parsed
// from a Secret. It holds only PEM bytes and the few facts that modules read
// (names, validity, content hash, key type), not parsed x509 objects, so that
// caching thousands of them stays cheap: at 10,000 TLS Secrets every field
// and every separate allocation costs its size 10,000 times. What is only
// printed (the fingerprint) is computed when asked. The PEM is shared with
// the Secret it came from when the Secret holds it in canonical form.
//
// A Certificate is immutable after parsing: do not modify the slices it
// returns or exposes. It is safe for concurrent use.
type Certificate struct {
	// SecretKey is the namespace and name of the Secret the certificate came
	// from; for the controller's own certificates the namespace is empty.
	SecretKey types.NamespacedName
	// Names are the host names the certificate is valid for: DNS
	// subjectAltNames, or the common name when there are none. Lower-case,
	// without trailing dots, without duplicates, in certificate order.
	Names []string
	// notBefore and notAfter bound the validity of the leaf certificate, in Unix seconds: X.509 times
	// have whole seconds, and two int64 take a third of two time.Time.
	notBefore, notAfter int64
	// ChainPEM is the leaf followed by the rest of the chain, re-encoded as
	// CERTIFICATE blocks without headers or surrounding text.
	ChainPEM []byte
	// CAPEM is the re-encoded ca.crt, or nil when the Secret had none.
	CAPEM []byte
	// ContentHash is the SHA-256 of ChainPEM, the key and CAPEM, as a string
	// of its 32 bytes (not hex: it is compared, never shown; print it with
	// %x). It changes whenever anything that would be written or served
	// changes, which the fingerprint does not (a renewed key can keep its
	// certificate).
	ContentHash string
	// Warnings are problems that do not stop the certificate from being
	// served but that an operator should hear about (chain order, no names).
	Warnings []string

	// keyPEM is the private key as one PKCS#8 "PRIVATE KEY" block. It is
	// unexported so that reflection-based encoders (JSON, loggers) skip it.
	keyPEM []byte
	// KeyType describes the private key, for example "RSA-2048",
	// "ECDSA-P256" or "Ed25519" (its String).
	KeyType KeyType
}

// Fingerprint is the SHA-256 of a certificate (DER).
type Fingerprint [sha256.Size]byte

// String returns the fingerprint in lower-case hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// KeyType is the algorithm and size of a private key, in eight bytes rather
// than a string per certificate.
type KeyType struct {
	alg  keyAlgorithm
	bits uint32 // RSA modulus or ECDSA curve size
}

// keyAlgorithm is a KeyType's algorithm.
type keyAlgorithm uint8

const (
	keyUnknown keyAlgorithm = iota
	keyRSA
	keyECDSA
	keyEd25519
)

// String names the key type: "RSA-2048", "ECDSA-P256" (the NIST curve's
// name without its dash), "Ed25519", or "" for the zero KeyType.
func (k KeyType) String() string {
	switch k.alg {
	case keyRSA:
		return "RSA-" + strconv.Itoa(int(k.bits))
	case keyECDSA:
		return "ECDSA-P" + strconv.Itoa(int(k.bits))
	case keyEd25519:
		return "Ed25519"
	}
	return ""
}

// Fingerprint returns the SHA-256 of the leaf certificate (DER), the first
// block of ChainPEM. It is computed when asked, for a log line, rather than
// kept in every cached certificate.
func (c *Certificate) Fingerprint() Fingerprint {
	block, _ := pem.Decode(c.ChainPEM)
	if block == nil {
		return Fingerprint{}
	}
	return sha256.Sum256(block.Bytes)
}

// KeyPEM returns the private key as a single PKCS#8 "PRIVATE KEY" PEM block.
// Never log it.
func (c *Certificate) KeyPEM() []byte { return c.keyPEM }

// PEM returns the chain followed by the private key: the content of the file
// that [Store] writes and that NGINX reads for both ssl_certificate and
// ssl_certificate_key.
func (c *Certificate) PEM() []byte {
	out := make([]byte, 0, len(c.ChainPEM)+len(c.keyPEM))
	out = append(out, c.ChainPEM...)
	return append(out, c.keyPEM...)
}

// TLSCertificate returns the certificate as a crypto/tls value, for Go code
// that terminates TLS itself (tests, the passthrough listener's fallback).
func (c *Certificate) TLSCertificate() (tls.Certificate, error) {
	tc, err := tls.X509KeyPair(c.ChainPEM, c.keyPEM)
	if err != nil {
		// Both inputs were produced by this package from a validated pair,
		// so this cannot fail unless the Certificate was modified.
		return tls.Certificate{}, fmt.Errorf("certificate %s: rebuild key pair: %w", c.SecretKey, err)
	}
	return tc, nil
}

// NotBefore is the moment the leaf certificate becomes valid, in UTC.
func (c *Certificate) NotBefore() time.Time { return time.Unix(c.notBefore, 0).UTC() }

// NotAfter is the last moment the leaf certificate is valid, in UTC.
func (c *Certificate) NotAfter() time.Time { return time.Unix(c.notAfter, 0).UTC() }

// ExpireTime is the moment the leaf certificate stops being valid (NotAfter); it is the value of the
// ssl_expire_time_seconds metric.
func (c *Certificate) ExpireTime() time.Time { return c.NotAfter() }

// Expired reports whether the leaf certificate is no longer valid at now.
// Expired certificates are still served; see the package documentation.
func (c *Certificate) Expired(now time.Time) bool { return now.After(c.NotAfter()) }

// NotYetValid reports whether the leaf certificate is not valid yet at now.
func (c *Certificate) NotYetValid(now time.Time) bool { return now.Before(c.NotBefore()) }

// Matches reports whether the certificate is valid for host under the rules
// of RFC 6125, section 6.4: a name matches host exactly (ignoring case and a
// trailing dot), or a name "*.rest" matches host when host is exactly one
// label followed by ".rest". The wildcard must be the whole left-most label,
// matches one label only (never zero, never two), and is not honoured when
// "rest" is a single label ("*.com"). A host that is itself a wildcard, as an
// Ingress rule may be, matches only the identical wildcard name.
func (c *Certificate) Matches(host string) bool {
	host = normalizeName(host)
	if host == "" {
		return false
	}
	for _, name := range c.Names {
		if matchName(name, host) {
			return true
		}
	}
	return false
}

// matchName applies the RFC 6125 rules for one presented name; both
// arguments are already normalised.
func matchName(name, host string) bool {
	if name == host {
		return true
	}
	rest, ok := strings.CutPrefix(name, "*.")
	if !ok || !strings.Contains(rest, ".") {
		return false
	}
	label, hostRest, ok := strings.Cut(host, ".")
	if !ok || label == "" || label == "*" {
		return false
	}
	return hostRest == rest
}

// normalizeName lower-cases a host name and drops one trailing dot.
func normalizeName(s string) string {
	return strings.ToLower(strings.TrimSuffix(s, "."))
}

// String describes the certificate without key material.
func (c Certificate) String() string {
	return fmt.Sprintf("certificate %s names=%v notAfter=%s fingerprint=%s key=%s",
		c.SecretKey, c.Names, c.NotAfter().Format(time.RFC3339), c.Fingerprint(), c.KeyType)
}

// GoString is String, so that %#v does not print the private key either.
func (c Certificate) GoString() string { return c.String() }
