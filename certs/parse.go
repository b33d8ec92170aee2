package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/internal/strpack"
)

// Data keys of a TLS Secret.
const (
	// CertKey holds the PEM certificate chain, leaf first.
	CertKey = corev1.TLSCertKey
	// PrivateKeyKey holds the PEM private key of the leaf.
	PrivateKeyKey = corev1.TLSPrivateKeyKey
	// CAKey optionally holds PEM CA certificates for client authentication.
	CAKey = corev1.ServiceAccountRootCAKey
)

// Limits on the chain served for one host. A TLS handshake carries the whole chain in one Certificate
// message: a chain of hundreds of kilobytes slows every handshake of the host and breaks clients that cap
// that message (many cap it well below the protocol's 16 MB), so such a Secret is refused rather than
// served. Real chains are a leaf, one to three intermediates and at most a root: a few kilobytes.
const (
	// MaxChainCertificates is the largest number of certificates accepted in tls.crt.
	MaxChainCertificates = 10
	// MaxChainDERBytes is the largest total size, in DER bytes, of the certificates in tls.crt.
	MaxChainDERBytes = 100 << 10
)

// MinRSABits is the smallest RSA modulus accepted. OpenSSL's default
// security level (2) in current distributions refuses smaller keys.
const MinRSABits = 2048

// Error is a certificate that cannot be used. Its message names the Secret
// and the problem and never contains key material, so it can go into logs
// and Kubernetes Events as it is.
type Error struct {
	// Secret is the namespace and name of the offending Secret.
	Secret types.NamespacedName
	// Reason says what is wrong, for example "tls.key is missing".
	Reason string
	// err is an underlying error that is safe to show (never from a key
	// parser); it is reachable with errors.Is/As.
	err error
}

// Error implements error.
func (e *Error) Error() string {
	if e.err != nil {
		return fmt.Sprintf("secret %s: %s: %v", e.Secret, e.Reason, e.err)
	}
	return fmt.Sprintf("secret %s: %s", e.Secret, e.Reason)
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.err }

// ParseSecret validates a TLS Secret and returns its certificate. It accepts
// type kubernetes.io/tls, and Opaque (or no type) with the same data keys.
// Expired certificates are returned without error; see the package doc.
func ParseSecret(s *corev1.Secret) (*Certificate, error) {
	if s == nil {
		return nil, errors.New("parse certificate: nil secret")
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	switch s.Type {
	case corev1.SecretTypeTLS, corev1.SecretTypeOpaque, "":
	default:
		return nil, &Error{Secret: key, Reason: fmt.Sprintf("type %q is not %q or %q", s.Type, corev1.SecretTypeTLS, corev1.SecretTypeOpaque)}
	}
	certPEM, ok := s.Data[CertKey]
	if !ok {
		return nil, &Error{Secret: key, Reason: CertKey + " is missing"}
	}
	keyPEM, ok := s.Data[PrivateKeyKey]
	if !ok {
		return nil, &Error{Secret: key, Reason: PrivateKeyKey + " is missing"}
	}
	return ParsePEM(key, certPEM, keyPEM, s.Data[CAKey])
}

// ParsePEM validates a certificate chain, its private key and optional CA
// certificates, given as the PEM contents of tls.crt, tls.key and ca.crt.
// key names the source in errors and becomes the certificate's SecretKey.
// caPEM may be nil or empty. Where an input already is in the canonical form
// the certificate keeps (the usual case), the certificate shares it instead
// of holding a second copy beside the informer cache's Secret: the caller
// must not modify the inputs afterwards.
func ParsePEM(key types.NamespacedName, certPEM, keyPEM, caPEM []byte) (*Certificate, error) {
	fail := func(reason string, err error) error { return &Error{Secret: key, Reason: reason, err: err} }

	if len(bytes.TrimSpace(certPEM)) == 0 {
		return nil, fail(CertKey+" is empty", nil)
	}
	if len(bytes.TrimSpace(keyPEM)) == 0 {
		return nil, fail(PrivateKeyKey+" is empty", nil)
	}

	chain, chainDER, err := parseCertificates(certPEM)
	if err != nil {
		return nil, fail(CertKey, err)
	}
	if reason := chainTooLarge(chainDER); reason != "" {
		return nil, fail(reason, nil)
	}
	leaf := chain[0]
	if reason := weakSignature(chain); reason != "" {
		return nil, fail(reason, nil)
	}

	keyBlock, reason := findKeyBlock(keyPEM)
	if reason != "" {
		return nil, fail(reason, nil)
	}
	normKey := pem.EncodeToMemory(&pem.Block{Type: keyBlock.Type, Bytes: keyBlock.Bytes})
	normChain := encodeCertificates(chainDER)

	pair, err := tls.X509KeyPair(normChain, normKey)
	if err != nil {
		return nil, fail(keyPairReason(err, chain, keyBlock), nil)
	}
	// X509KeyPair checked that the key belongs to the leaf; check it again
	// ourselves so that the guarantee does not rest on one library's
	// behaviour, and to learn the key's type and size.
	keyType, reason := checkPrivateKey(pair.PrivateKey, leaf.PublicKey)
	if reason != "" {
		return nil, fail(reason, nil)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		return nil, fail(PrivateKeyKey+" cannot be re-encoded as PKCS#8", nil)
	}
	// The key is re-encoded so the file NGINX reads has one canonical form
	// whatever the Secret held (PKCS#1, SEC 1, extra blocks, headers).
	encoded := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	outKey := canonical(keyPEM, encoded)
	if !bytes.Equal(keyPEM, encoded) {
		outKey = bytes.Clone(encoded) // without spare capacity: it is cached
	}
	clear(encoded)
	// Best effort: do not leave extra copies of the key on the heap.
	clear(pkcs8)
	clear(normKey)
	clear(keyBlock.Bytes)

	var caOut []byte
	if len(bytes.TrimSpace(caPEM)) > 0 {
		_, caDER, err := parseCertificates(caPEM)
		if err != nil {
			return nil, fail(CAKey, err)
		}
		caOut = canonical(caPEM, encodeCertificates(caDER))
	}
	normChain = canonical(certPEM, normChain)

	var sum [sha256.Size]byte
	h := sha256.New()
	h.Write(normChain)
	h.Write(outKey)
	h.Write(caOut)

	c := &Certificate{
		SecretKey:   key,
		Names:       certificateNames(leaf),
		notBefore:   leaf.NotBefore.Unix(),
		notAfter:    leaf.NotAfter.Unix(),
		KeyType:     keyType,
		ChainPEM:    normChain,
		CAPEM:       caOut,
		ContentHash: string(h.Sum(sum[:0])),
		keyPEM:      outKey,
	}
	c.Warnings = chainWarnings(chain)
	if len(c.Names) == 0 {
		c.Warnings = append(c.Warnings, "the certificate has no DNS subjectAltName or host-name common name; it matches no host")
	}
	return c, nil
}

// canonical returns the input itself, without spare capacity, when it is equal to its re-encoded form
// encoded, and encoded otherwise: a Secret written in canonical form is then held once.
func canonical(input, encoded []byte) []byte {
	if bytes.Equal(input, encoded) {
		return input[:len(input):len(input)]
	}
	return encoded
}

// parseCertificates parses every CERTIFICATE block in data. Other blocks
// and text outside blocks are ignored, as OpenSSL ignores them.
func parseCertificates(data []byte) ([]*x509.Certificate, [][]byte, error) {
	var (
		certs []*x509.Certificate
		ders  [][]byte
		rest  = data
		index int
	)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		index++
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("certificate %d does not parse: %w", index, err)
		}
		certs = append(certs, cert)
		ders = append(ders, block.Bytes)
	}
	if len(certs) == 0 {
		return nil, nil, errors.New("no PEM CERTIFICATE block found")
	}
	return certs, ders, nil
}

// chainTooLarge returns why a chain exceeds MaxChainCertificates or MaxChainDERBytes, or "".
func chainTooLarge(ders [][]byte) string {
	if len(ders) > MaxChainCertificates {
		return fmt.Sprintf("%s holds %d certificates, more than the %d accepted", CertKey, len(ders), MaxChainCertificates)
	}
	total := 0
	for _, der := range ders {
		total += len(der)
	}
	if total > MaxChainDERBytes {
		return fmt.Sprintf("%s holds %d KiB of certificates, more than the %d KiB accepted", CertKey, (total+1023)>>10, MaxChainDERBytes>>10)
	}
	return ""
}

// encodeCertificates writes DER certificates as consecutive PEM blocks.
func encodeCertificates(ders [][]byte) []byte {
	var buf bytes.Buffer
	for _, der := range ders {
		// pem.Encode into a bytes.Buffer cannot fail.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	// Clone to drop the buffer's spare capacity: the result is cached.
	return bytes.Clone(buf.Bytes())
}

// findKeyBlock returns the first private-key block of data, or a reason it
// cannot be used. Reasons are fixed strings: nothing from data is echoed.
func findKeyBlock(data []byte) (*pem.Block, string) {
	rest := data
	sawCert := false
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch {
		case block.Type == "ENCRYPTED PRIVATE KEY":
			return nil, PrivateKeyKey + " is an encrypted PKCS#8 key; NGINX needs an unencrypted key"
		case block.Type == "PRIVATE KEY" || strings.HasSuffix(block.Type, " PRIVATE KEY"):
			if _, ok := block.Headers["Proc-Type"]; ok {
				return nil, PrivateKeyKey + " is encrypted (Proc-Type header); NGINX needs an unencrypted key"
			}
			return block, ""
		case block.Type == "CERTIFICATE":
			sawCert = true
		}
	}
	if sawCert {
		return nil, PrivateKeyKey + " holds a certificate, not a private key"
	}
	return nil, PrivateKeyKey + " has no PEM private key block"
}

// keyPairReason turns a tls.X509KeyPair failure into a fixed message. The
// library's own text is not used: it is not ours to keep free of key bytes.
func keyPairReason(err error, chain []*x509.Certificate, keyBlock *pem.Block) string {
	priv, parseErr := parsePrivateKey(keyBlock.Bytes)
	if parseErr != nil {
		return PrivateKeyKey + " is not a valid RSA, ECDSA or Ed25519 private key in PKCS#1, PKCS#8 or SEC 1 form"
	}
	signer, ok := priv.(crypto.Signer)
	if !ok {
		return PrivateKeyKey + " holds an unsupported key type"
	}
	if !publicKeyEqual(chain[0].PublicKey, signer.Public()) {
		for i, c := range chain[1:] {
			if publicKeyEqual(c.PublicKey, signer.Public()) {
				return fmt.Sprintf("%s matches certificate %d in %s, not the first; the server certificate must come first", PrivateKeyKey, i+2, CertKey)
			}
		}
		return PrivateKeyKey + " does not match the certificate in " + CertKey
	}
	if strings.Contains(err.Error(), "unknown public key algorithm") {
		return CertKey + " uses an unsupported public key algorithm"
	}
	return PrivateKeyKey + " cannot be used with " + CertKey
}

// parsePrivateKey tries the three encodings NGINX accepts. Its error is
// never shown to users.
func parsePrivateKey(der []byte) (any, error) {
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("unrecognised private key")
}

// publicKeyEqual compares public keys of the types crypto/x509 returns.
func publicKeyEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

// checkPrivateKey checks the key type and size and that it belongs to pub.
// It returns the key's type, or a fixed reason for rejecting it.
func checkPrivateKey(priv crypto.PrivateKey, pub crypto.PublicKey) (KeyType, string) {
	var (
		kt     KeyType
		public crypto.PublicKey
	)
	switch k := priv.(type) {
	case *rsa.PrivateKey:
		bits := k.N.BitLen()
		if bits < MinRSABits {
			return KeyType{}, fmt.Sprintf("%s is a %d-bit RSA key; at least %d bits are required", PrivateKeyKey, bits, MinRSABits)
		}
		kt, public = KeyType{alg: keyRSA, bits: uint32(bits)}, k.Public()
	case *ecdsa.PrivateKey:
		// crypto/x509 parses the NIST curves P-224, P-256, P-384 and P-521 only, named by their size.
		kt, public = KeyType{alg: keyECDSA, bits: uint32(k.Curve.Params().BitSize)}, k.Public()
	case ed25519.PrivateKey:
		kt, public = KeyType{alg: keyEd25519}, k.Public()
	default:
		return KeyType{}, fmt.Sprintf("%s holds an unsupported key type %T; use RSA, ECDSA or Ed25519", PrivateKeyKey, priv)
	}
	if !publicKeyEqual(pub, public) {
		return KeyType{}, PrivateKeyKey + " does not match the certificate in " + CertKey
	}
	return kt, ""
}

// certificateNames returns the names a certificate is valid for: DNS
// subjectAltNames, or the common name if it has no DNS or IP SANs and the
// common name looks like a host name.
func certificateNames(leaf *x509.Certificate) []string {
	raw := leaf.DNSNames
	if len(raw) == 0 && len(leaf.IPAddresses) == 0 && leaf.Subject.CommonName != "" {
		raw = []string{leaf.Subject.CommonName}
	}
	names := make([]string, 0, len(raw))
	seen := make(map[string]struct{}, len(raw))
	for _, n := range raw {
		n = normalizeName(n)
		if !isHostName(n) {
			continue
		}
		if _, dup := seen[n]; dup {
			continue
		}
		seen[n] = struct{}{}
		names = append(names, n)
	}
	// A copy of exactly their number, with their text in one allocation: the parser allocated each name
	// on its own, amid the parse's garbage, and a certificate keeps its names for as long as it is served.
	return strpack.Copy(names)
}

// isHostName accepts lower-case names made of labels of letters, digits,
// '-' and '_', with an optional "*" as the whole left-most label.
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i, label := range strings.Split(s, ".") {
		if label == "*" && i == 0 {
			continue
		}
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return s != "*"
}

// chainWarnings reports certificates that are not signed by the next one in
// tls.crt. Clients that cannot build a path from a misordered or unrelated
// chain fail, but NGINX serves it, so this is a warning rather than an error.
func chainWarnings(chain []*x509.Certificate) []string {
	var warnings []string
	for i := 0; i+1 < len(chain); i++ {
		child, parent := chain[i], chain[i+1]
		if !bytes.Equal(child.RawIssuer, parent.RawSubject) {
			warnings = append(warnings, fmt.Sprintf("%s: certificate %d is not issued by certificate %d (issuer %q, next subject %q)",
				CertKey, i+1, i+2, child.Issuer.String(), parent.Subject.String()))
			continue
		}
		if err := child.CheckSignatureFrom(parent); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: certificate %d is not signed by certificate %d: %v", CertKey, i+1, i+2, err))
		}
	}
	return warnings
}

// weakSignature rejects chains that OpenSSL at its default security level (Debian's NGINX) refuses to
// serve: certificates signed with MD5 or SHA-1 by another certificate. Accepting them would make every
// handshake for the host fail instead of falling back to the default certificate. Self-issued
// certificates (issuer = subject, such as the many public roots self-signed with SHA-1 that bundles
// include) are exempt: OpenSSL does not check their own signature (verified with openssl s_server, which
// serves such a bundle and refuses a SHA-1 leaf). Their signature is not checked here either, since Go
// refuses to verify SHA-1 at all.
func weakSignature(chain []*x509.Certificate) string {
	for i, c := range chain {
		if bytes.Equal(c.RawIssuer, c.RawSubject) {
			continue
		}
		switch c.SignatureAlgorithm {
		case x509.MD2WithRSA, x509.MD5WithRSA, x509.SHA1WithRSA, x509.DSAWithSHA1, x509.ECDSAWithSHA1:
			return fmt.Sprintf("%s: certificate %d of the chain is signed with %s, which NGINX's TLS library refuses; re-issue it with SHA-256 or better", CertKey, i+1, c.SignatureAlgorithm)
		}
	}
	return ""
}

// ParseCA validates CA certificates given as the PEM content of ca.crt (at least one CERTIFICATE block,
// each one parsing) and returns them re-encoded without headers or surrounding text. key names the
// source in errors.
func ParseCA(key types.NamespacedName, caPEM []byte) ([]byte, error) {
	if len(bytes.TrimSpace(caPEM)) == 0 {
		return nil, &Error{Secret: key, Reason: CAKey + " is empty"}
	}
	_, ders, err := parseCertificates(caPEM)
	if err != nil {
		return nil, &Error{Secret: key, Reason: CAKey, err: err}
	}
	return canonical(caPEM, encodeCertificates(ders)), nil
}
