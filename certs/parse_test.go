package certs

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestParseSecretAccepts(t *testing.T) {
	ca := sharedCA(t)
	ecKey := testKey(t, kindP256, 0)
	rsaKey := testKey(t, kindRSA2048, 0)
	edKey := testKey(t, kindEd25519, 0)
	p384Key := testKey(t, kindP384, 0)

	leafFor := func(spec certSpec) *x509.Certificate {
		if spec.parent == nil {
			spec.parent, spec.parentKey = ca.inter, ca.interKey
		}
		if spec.serial == 0 {
			spec.serial = 10
		}
		return makeCert(t, spec)
	}
	ecLeaf := leafFor(certSpec{cn: "shop.example.com", dns: []string{"shop.example.com"}, key: ecKey})
	// Many public roots are self-signed with SHA-1; bundles that include them are served (OpenSSL does not
	// check a self-signed certificate's own signature), and Go refuses to verify that signature.
	oldRootKey, oldInterKey := testKey(t, kindP384, 1), testKey(t, kindP256, 1)
	sha1Root := makeCert(t, certSpec{cn: "Old Root", key: oldRootKey, isCA: true, sigAlg: x509.ECDSAWithSHA1, serial: 20})
	oldInter := makeCert(t, certSpec{cn: "Old Intermediate", key: oldInterKey, isCA: true, parent: sha1Root, parentKey: oldRootKey, serial: 21})
	oldLeaf := leafFor(certSpec{dns: []string{"legacy.example.com"}, key: ecKey, parent: oldInter, parentKey: oldInterKey})

	tests := map[string]struct {
		secret      *corev1.Secret
		wantKeyType string
		wantNames   []string
		wantChain   int  // certificates in ChainPEM
		wantCA      bool // CAPEM set
		wantWarning string
		expired     bool
	}{
		"RSA PKCS#1": {
			secret:      tlsSecret("default", "rsa", pemCerts(leafFor(certSpec{dns: []string{"a.example.com"}, key: rsaKey}), ca.inter), pemKey(t, rsaKey, pkcs1)),
			wantKeyType: "RSA-2048", wantNames: []string{"a.example.com"}, wantChain: 2,
		},
		"RSA PKCS#8": {
			secret:      tlsSecret("default", "rsa8", pemCerts(leafFor(certSpec{dns: []string{"a.example.com"}, key: rsaKey}), ca.inter), pemKey(t, rsaKey, pkcs8)),
			wantKeyType: "RSA-2048", wantNames: []string{"a.example.com"}, wantChain: 2,
		},
		"ECDSA P-256 SEC 1": {
			secret:      tlsSecret("default", "ec", pemCerts(ecLeaf, ca.inter), pemKey(t, ecKey, sec1)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"shop.example.com"}, wantChain: 2,
		},
		"ECDSA P-384 PKCS#8": {
			secret:      tlsSecret("default", "ec384", pemCerts(leafFor(certSpec{dns: []string{"b.example.com"}, key: p384Key}), ca.inter), pemKey(t, p384Key, pkcs8)),
			wantKeyType: "ECDSA-P384", wantNames: []string{"b.example.com"}, wantChain: 2,
		},
		"Ed25519 PKCS#8": {
			secret:      tlsSecret("default", "ed", pemCerts(leafFor(certSpec{dns: []string{"c.example.com"}, key: edKey}), ca.inter), pemKey(t, edKey, pkcs8)),
			wantKeyType: "Ed25519", wantNames: []string{"c.example.com"}, wantChain: 2,
		},
		"EC PARAMETERS block before the key, as openssl ecparam -genkey writes": {
			secret: tlsSecret("default", "ecparam", pemCerts(ecLeaf),
				append(pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}}), pemKey(t, ecKey, sec1)...)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"shop.example.com"}, wantChain: 1,
			wantWarning: "",
		},
		"text around PEM blocks is ignored": {
			secret: tlsSecret("default", "text", []byte("subject=CN = shop\nissuer=CN = Test\n"+string(pemCerts(ecLeaf))+"\ntrailing\n"),
				[]byte("Private-Key: (256 bit)\n"+string(pemKey(t, ecKey, sec1)))),
			wantKeyType: "ECDSA-P256", wantNames: []string{"shop.example.com"}, wantChain: 1,
		},
		"Opaque secret with tls.crt and tls.key, as ingress-nginx accepted": {
			secret:      withType(tlsSecret("default", "opaque", pemCerts(ecLeaf), pemKey(t, ecKey, pkcs8)), corev1.SecretTypeOpaque),
			wantKeyType: "ECDSA-P256", wantNames: []string{"shop.example.com"}, wantChain: 1,
		},
		"secret without a type is Opaque": {
			secret:      withType(tlsSecret("default", "untyped", pemCerts(ecLeaf), pemKey(t, ecKey, pkcs8)), ""),
			wantKeyType: "ECDSA-P256", wantNames: []string{"shop.example.com"}, wantChain: 1,
		},
		"expired certificate is usable and reported expired": {
			secret: tlsSecret("default", "expired", pemCerts(leafFor(certSpec{dns: []string{"old.example.com"}, key: ecKey,
				notBefore: testNow.Add(-100 * 24 * time.Hour), notAfter: testNow.Add(-time.Hour)})), pemKey(t, ecKey, pkcs8)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"old.example.com"}, wantChain: 1, expired: true,
		},
		"intermediate chain with root included keeps all three in order": {
			secret:      tlsSecret("default", "chain3", pemCerts(ecLeaf, ca.inter, ca.root), pemKey(t, ecKey, pkcs8)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"shop.example.com"}, wantChain: 3,
		},
		"bundle ending in a root self-signed with SHA-1": {
			secret:      tlsSecret("default", "sha1root", pemCerts(oldLeaf, oldInter, sha1Root), pemKey(t, ecKey, pkcs8)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"legacy.example.com"}, wantChain: 3,
		},
		"chain with an unrelated certificate is served with a warning": {
			secret:      tlsSecret("default", "badchain", pemCerts(ecLeaf, ca.root), pemKey(t, ecKey, pkcs8)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"shop.example.com"}, wantChain: 2,
			wantWarning: "certificate 1 is not issued by certificate 2",
		},
		"common name is used when there are no SANs": {
			secret:      tlsSecret("default", "cn", pemCerts(leafFor(certSpec{cn: "Legacy.Example.com", key: ecKey})), pemKey(t, ecKey, pkcs8)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"legacy.example.com"}, wantChain: 1,
		},
		"common name is ignored when there are DNS SANs": {
			secret:      tlsSecret("default", "cnsan", pemCerts(leafFor(certSpec{cn: "cn.example.com", dns: []string{"san.example.com"}, key: ecKey})), pemKey(t, ecKey, pkcs8)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"san.example.com"}, wantChain: 1,
		},
		"common name is ignored when there are only IP SANs": {
			secret:      tlsSecret("default", "ip", pemCerts(leafFor(certSpec{cn: "cn.example.com", ips: []net.IP{net.ParseIP("192.0.2.1")}, key: ecKey})), pemKey(t, ecKey, pkcs8)),
			wantKeyType: "ECDSA-P256", wantNames: nil, wantChain: 1,
			wantWarning: "matches no host",
		},
		"common name that is not a host name gives no names": {
			secret:      tlsSecret("default", "cnword", pemCerts(leafFor(certSpec{cn: "My Company Certificate", key: ecKey})), pemKey(t, ecKey, pkcs8)),
			wantKeyType: "ECDSA-P256", wantNames: nil, wantChain: 1,
			wantWarning: "matches no host",
		},
		"SANs are lower-cased, lose the trailing dot and duplicates": {
			secret:      tlsSecret("default", "norm", pemCerts(leafFor(certSpec{dns: []string{"WWW.Example.COM.", "www.example.com", "*.Example.com"}, key: ecKey})), pemKey(t, ecKey, pkcs8)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"www.example.com", "*.example.com"}, wantChain: 1,
		},
		"ca.crt is kept": {
			secret:      withData(tlsSecret("default", "withca", pemCerts(ecLeaf, ca.inter), pemKey(t, ecKey, pkcs8)), CAKey, pemCerts(ca.root)),
			wantKeyType: "ECDSA-P256", wantNames: []string{"shop.example.com"}, wantChain: 2, wantCA: true,
		},
		"empty ca.crt is no CA": {
			secret:      withData(tlsSecret("default", "emptyca", pemCerts(ecLeaf), pemKey(t, ecKey, pkcs8)), CAKey, []byte("\n")),
			wantKeyType: "ECDSA-P256", wantNames: []string{"shop.example.com"}, wantChain: 1,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := ParseSecret(tt.secret)
			if err != nil {
				t.Fatalf("ParseSecret: %v", err)
			}
			wantKey := types.NamespacedName{Namespace: tt.secret.Namespace, Name: tt.secret.Name}
			if c.SecretKey != wantKey {
				t.Errorf("SecretKey = %v, want %v", c.SecretKey, wantKey)
			}
			if c.KeyType.String() != tt.wantKeyType {
				t.Errorf("KeyType = %q, want %q", c.KeyType, tt.wantKeyType)
			}
			if !slices.Equal(c.Names, tt.wantNames) {
				t.Errorf("Names = %q, want %q", c.Names, tt.wantNames)
			}
			chain, _, err := parseCertificates(c.ChainPEM)
			if err != nil || len(chain) != tt.wantChain {
				t.Fatalf("ChainPEM holds %d certificates (err %v), want %d", len(chain), err, tt.wantChain)
			}
			if got, want := c.Fingerprint().String(), fingerprintOf(chain[0]); got != want {
				t.Errorf("Fingerprint = %s, want SHA-256 of the leaf %s", got, want)
			}
			if !c.NotAfter().Equal(chain[0].NotAfter) || !c.NotBefore().Equal(chain[0].NotBefore) || !c.ExpireTime().Equal(chain[0].NotAfter) {
				t.Errorf("validity %s..%s (expire %s), leaf has %s..%s", c.NotBefore(), c.NotAfter(), c.ExpireTime(), chain[0].NotBefore, chain[0].NotAfter)
			}
			if c.Expired(testNow) != tt.expired {
				t.Errorf("Expired(now) = %v, want %v", c.Expired(testNow), tt.expired)
			}
			if (len(c.CAPEM) > 0) != tt.wantCA {
				t.Errorf("CAPEM set = %v, want %v", len(c.CAPEM) > 0, tt.wantCA)
			}
			warnings := strings.Join(c.Warnings, "\n")
			if tt.wantWarning == "" && warnings != "" {
				t.Errorf("unexpected warnings: %s", warnings)
			}
			if tt.wantWarning != "" && !strings.Contains(warnings, tt.wantWarning) {
				t.Errorf("warnings %q do not mention %q", warnings, tt.wantWarning)
			}
			block, rest := pem.Decode(c.KeyPEM())
			if block == nil || block.Type != "PRIVATE KEY" || len(strings.TrimSpace(string(rest))) != 0 {
				t.Fatalf("KeyPEM is not one PKCS#8 block: %q", blockTypes(c.KeyPEM()))
			}
			if _, err := tls.X509KeyPair(c.PEM(), c.PEM()); err != nil {
				t.Errorf("the combined file content is not a usable key pair: %v", err)
			}
			if strings.Contains(string(c.ChainPEM), "PRIVATE KEY") {
				t.Error("ChainPEM contains a private key")
			}
		})
	}
}

func TestParseSecretRejects(t *testing.T) {
	ca := sharedCA(t)
	ecKey := testKey(t, kindP256, 0)
	otherEC := testKey(t, kindP256, 1)
	rsaKey := testKey(t, kindRSA2048, 0)
	smallRSA := testKey(t, kindRSA1024, 0)
	leaf := makeCert(t, certSpec{dns: []string{"shop.example.com"}, key: ecKey, parent: ca.inter, parentKey: ca.interKey, serial: 10})
	smallLeaf := makeCert(t, certSpec{dns: []string{"small.example.com"}, key: smallRSA, parent: ca.inter, parentKey: ca.interKey, serial: 11})
	goodCrt := pemCerts(leaf, ca.inter)
	goodKey := pemKey(t, ecKey, pkcs8)
	sha1Leaf := makeCert(t, certSpec{dns: []string{"old.example.com"}, key: ecKey, parent: ca.inter, parentKey: ca.interKey, serial: 12, sigAlg: x509.ECDSAWithSHA1})

	// A chain over the limits: eleven certificates, or a few certificates with thousands of names each.
	var longChain []*x509.Certificate
	longChain = append(longChain, leaf)
	for range MaxChainCertificates {
		longChain = append(longChain, ca.inter)
	}
	manyNames := make([]string, 2500)
	for i := range manyNames {
		manyNames[i] = fmt.Sprintf("host-%04d.shop.example.com", i)
	}
	bigLeaf := makeCert(t, certSpec{dns: manyNames, key: ecKey, parent: ca.inter, parentKey: ca.interKey, serial: 13})
	bigInter := makeCert(t, certSpec{cn: "padded intermediate", dns: manyNames, key: ecKey, parent: ca.inter, parentKey: ca.interKey, serial: 14})

	encrypted := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00112233445566778899AABBCCDDEEFF"}, Bytes: pemBody(t, pemKey(t, ecKey, sec1))})
	garbageKeyDER := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: append([]byte("SECRETSECRETSECRET"), pemBody(t, goodKey)[:40]...)})

	tests := map[string]struct {
		secret *corev1.Secret
		want   string // the whole message after "secret ns/name: "
		prefix bool   // want is a prefix of the message (library text follows)
		suffix string // with prefix: the message also ends with this
	}{
		"SHA-1 signed certificate": {
			secret: tlsSecret("default", "s", pemCerts(sha1Leaf, ca.inter), goodKey),
			want:   "tls.crt: certificate 1 of the chain is signed with ECDSA-SHA1, which NGINX's TLS library refuses; re-issue it with SHA-256 or better",
		},
		"more certificates than the chain limit": {
			secret: tlsSecret("default", "s", pemCerts(longChain...), goodKey),
			want:   "tls.crt holds 11 certificates, more than the 10 accepted",
		},
		"chain larger than the size limit": {
			secret: tlsSecret("default", "s", pemCerts(bigLeaf, bigInter), goodKey),
			want:   "tls.crt holds 1", prefix: true, suffix: " KiB of certificates, more than the 100 KiB accepted",
		},
		"wrong secret type": {
			secret: withType(tlsSecret("default", "s", goodCrt, goodKey), corev1.SecretTypeDockerConfigJson),
			want:   `type "kubernetes.io/dockerconfigjson" is not "kubernetes.io/tls" or "Opaque"`,
		},
		"tls.crt missing": {
			secret: withoutData(tlsSecret("default", "s", goodCrt, goodKey), CertKey),
			want:   "tls.crt is missing",
		},
		"tls.key missing": {
			secret: withoutData(tlsSecret("default", "s", goodCrt, goodKey), PrivateKeyKey),
			want:   "tls.key is missing",
		},
		"tls.crt empty": {
			secret: tlsSecret("default", "s", []byte(" \n"), goodKey),
			want:   "tls.crt is empty",
		},
		"tls.key empty": {
			secret: tlsSecret("default", "s", goodCrt, nil),
			want:   "tls.key is empty",
		},
		"tls.crt is garbage": {
			secret: tlsSecret("default", "s", []byte("not a certificate at all"), goodKey),
			want:   "tls.crt: no PEM CERTIFICATE block found",
		},
		"tls.crt holds the key (fields swapped)": {
			secret: tlsSecret("default", "s", goodKey, goodCrt),
			want:   "tls.crt: no PEM CERTIFICATE block found",
		},
		"second certificate in the chain is corrupt": {
			secret: tlsSecret("default", "s", append(pemCerts(leaf), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("corrupt")})...), goodKey),
			want:   "tls.crt: certificate 2 does not parse: x509: ", prefix: true,
		},
		"tls.key is garbage text": {
			secret: tlsSecret("default", "s", goodCrt, []byte("SECRETSECRETSECRET this is not PEM")),
			want:   "tls.key has no PEM private key block",
		},
		"tls.key block holds garbage": {
			secret: tlsSecret("default", "s", goodCrt, garbageKeyDER),
			want:   "tls.key is not a valid RSA, ECDSA or Ed25519 private key in PKCS#1, PKCS#8 or SEC 1 form",
		},
		"tls.key holds a certificate": {
			secret: tlsSecret("default", "s", goodCrt, goodCrt),
			want:   "tls.key holds a certificate, not a private key",
		},
		"tls.key is encrypted (traditional)": {
			secret: tlsSecret("default", "s", goodCrt, encrypted),
			want:   "tls.key is encrypted (Proc-Type header); NGINX needs an unencrypted key",
		},
		"tls.key is encrypted PKCS#8": {
			secret: tlsSecret("default", "s", goodCrt, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: pemBody(t, goodKey)})),
			want:   "tls.key is an encrypted PKCS#8 key; NGINX needs an unencrypted key",
		},
		"key of the same type does not match": {
			secret: tlsSecret("default", "s", goodCrt, pemKey(t, otherEC, pkcs8)),
			want:   "tls.key does not match the certificate in tls.crt",
		},
		"key of another type does not match": {
			secret: tlsSecret("default", "s", goodCrt, pemKey(t, rsaKey, pkcs1)),
			want:   "tls.key does not match the certificate in tls.crt",
		},
		"key matches the intermediate: leaf is not first": {
			secret: tlsSecret("default", "s", pemCerts(ca.inter, leaf), goodKey),
			want:   "tls.key matches certificate 2 in tls.crt, not the first; the server certificate must come first",
		},
		"RSA key under 2048 bits": {
			secret: tlsSecret("default", "s", pemCerts(smallLeaf), pemKey(t, smallRSA, pkcs1)),
			want:   "tls.key is a 1024-bit RSA key; at least 2048 bits are required",
		},
		"ca.crt is garbage": {
			secret: withData(tlsSecret("default", "s", goodCrt, goodKey), CAKey, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")),
			want:   "ca.crt: certificate 1 does not parse: x509: ", prefix: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := ParseSecret(tt.secret)
			if err == nil {
				t.Fatalf("ParseSecret accepted it: %v", c)
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %v is %T, want *certs.Error", err, err)
			}
			if want := (types.NamespacedName{Namespace: "default", Name: "s"}); perr.Secret != want {
				t.Errorf("Error.Secret = %v, want %v", perr.Secret, want)
			}
			msg := err.Error()
			got, ok := strings.CutPrefix(msg, "secret default/s: ")
			if !ok {
				t.Fatalf("message %q does not start with the secret", msg)
			}
			if tt.prefix && (!strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, tt.suffix)) || !tt.prefix && got != tt.want {
				t.Errorf("message = %q, want %q", got, tt.want)
			}
			for _, k := range [][]byte{tt.secret.Data[PrivateKeyKey], goodKey, pemKey(t, rsaKey, pkcs1), pemKey(t, smallRSA, pkcs1)} {
				assertNoKeyMaterial(t, msg, k)
			}
			if strings.Contains(msg, "SECRETSECRET") {
				t.Errorf("message echoes the tls.key input: %q", msg)
			}
		})
	}
}

func TestParseSecretNil(t *testing.T) {
	if _, err := ParseSecret(nil); err == nil {
		t.Fatal("ParseSecret(nil) succeeded")
	}
}

// TestParsePEMNormalisesInput checks that two Secrets holding the same pair
// in different encodings produce the same files and content hash, so a
// re-encoding by a tool does not cause a rewrite or a push to NGINX.
func TestParsePEMNormalisesInput(t *testing.T) {
	rsaKey := testKey(t, kindRSA2048, 0)
	leaf := makeCert(t, certSpec{dns: []string{"n.example.com"}, key: rsaKey})
	key := types.NamespacedName{Namespace: "default", Name: "n"}
	a, err := ParsePEM(key, pemCerts(leaf), pemKey(t, rsaKey, pkcs1), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParsePEM(key, []byte("comment\n"+string(pemCerts(leaf))), pemKey(t, rsaKey, pkcs8), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.ContentHash != b.ContentHash || string(a.PEM()) != string(b.PEM()) {
		t.Error("same pair in PKCS#1 and PKCS#8 gives different content")
	}
	other := testKey(t, kindRSA2048, 1)
	c, err := ParsePEM(key, pemCerts(makeCert(t, certSpec{dns: []string{"n.example.com"}, key: other})), pemKey(t, other, pkcs1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.ContentHash == a.ContentHash || c.Fingerprint() == a.Fingerprint() {
		t.Error("a different pair has the same content hash or fingerprint")
	}
}

// TestCertificateDoesNotPrintKey checks the ways a certificate is likely to
// end up in a log line by mistake.
func TestCertificateDoesNotPrintKey(t *testing.T) {
	crt, key := leafPair(t, kindRSA2048, pkcs1, "log.example.com")
	c, err := ParseSecret(tlsSecret("default", "log", crt, key))
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	wrapped := struct{ Cert *Certificate }{c}
	for _, text := range []string{
		fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(*c), fmt.Sprintf("%+v", *c),
		fmt.Sprintf("%+v", wrapped), string(js),
	} {
		for _, k := range [][]byte{key, c.KeyPEM()} {
			assertNoKeyMaterial(t, text, k)
		}
		if strings.Contains(text, "PRIVATE KEY") {
			t.Errorf("printed certificate contains a key block: %s", text)
		}
	}
	if !strings.Contains(fmt.Sprint(c), "default/log") {
		t.Errorf("String() does not name the secret: %s", c)
	}
}

// TestCertificateServesTLS shows that the parsed pair terminates TLS for its
// host and that clients trusting the root accept it.
func TestCertificateServesTLS(t *testing.T) {
	ca := sharedCA(t)
	for _, kind := range []keyKind{kindRSA2048, kindP256, kindEd25519} {
		t.Run(string(kind), func(t *testing.T) {
			crt, key := leafPair(t, kind, pkcs8, "tls.example.com")
			c, err := ParseSecret(tlsSecret("default", "tls", crt, key))
			if err != nil {
				t.Fatal(err)
			}
			pair, err := c.TLSCertificate()
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca.root)
			serverConn, clientConn := net.Pipe()
			defer serverConn.Close()
			defer clientConn.Close()
			server := tls.Server(serverConn, &tls.Config{Certificates: []tls.Certificate{pair}})
			done := make(chan error, 1)
			go func() { done <- server.Handshake() }()
			client := tls.Client(clientConn, &tls.Config{ServerName: "tls.example.com", RootCAs: roots, Time: func() time.Time { return testNow }})
			if err := client.Handshake(); err != nil {
				t.Fatalf("client handshake: %v", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("server handshake: %v", err)
			}
			if got := client.ConnectionState().PeerCertificates; len(got) != 2 || fingerprintOf(got[0]) != c.Fingerprint().String() {
				t.Errorf("client saw %d certificates, leaf fingerprint mismatch", len(got))
			}
		})
	}
}

func TestMatches(t *testing.T) {
	c := &Certificate{Names: []string{"example.com", "www.example.com", "*.apps.example.com", "*.com", "*.wild.test"}}
	tests := map[string]bool{
		"example.com":             true,
		"EXAMPLE.com.":            true,
		"www.example.com":         true,
		"a.apps.example.com":      true,
		"A-1.Apps.Example.Com":    true,
		"apps.example.com":        false, // a wildcard never matches zero labels
		"a.b.apps.example.com":    false, // nor two
		"*.apps.example.com":      true,  // an Ingress wildcard host matches the same wildcard
		"*.example.com":           false, // but no other wildcard
		"foo.com":                 false, // "*.com" is not honoured
		"x.wild.test":             true,
		"mail.example.com":        false,
		"example.com.evil.test":   false,
		"":                        false,
		".":                       false,
		".apps.example.com":       false,
		"xexample.com":            false,
		"a.apps.example.com.evil": false,
	}
	for host, want := range tests {
		if got := c.Matches(host); got != want {
			t.Errorf("Matches(%q) = %v, want %v", host, got, want)
		}
	}
	if (&Certificate{}).Matches("example.com") {
		t.Error("a certificate without names matched")
	}
}

func fingerprintOf(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

func withType(s *corev1.Secret, typ corev1.SecretType) *corev1.Secret {
	s.Type = typ
	return s
}

func withData(s *corev1.Secret, key string, value []byte) *corev1.Secret {
	s.Data[key] = value
	return s
}

func withoutData(s *corev1.Secret, key string) *corev1.Secret {
	delete(s.Data, key)
	return s
}

// pemBody returns the DER of the first block of data.
func pemBody(t *testing.T, data []byte) []byte {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM block")
	}
	return b.Bytes
}

func blockTypes(data []byte) []string {
	var types []string
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return types
		}
		types = append(types, b.Type)
	}
}

// TestAssertNoKeyMaterialDetectsLeaks guards the guard: the key-leak check
// used above must notice a key echoed in any of the forms it looks for.
func TestAssertNoKeyMaterialDetectsLeaks(t *testing.T) {
	key := pemKey(t, testKey(t, kindP256, 0), sec1)
	der := pemBody(t, key)
	lines := strings.Split(string(key), "\n")
	for name, text := range map[string]string{
		"PEM body line": "bad key: " + lines[2],
		"hex DER":       fmt.Sprintf("asn1: trailing data %x", der[20:40]),
		"raw DER":       "bad key " + string(der[30:50]),
	} {
		found := false
		for _, f := range keyFragments(key) {
			if strings.Contains(text, f) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: leak not detected", name)
		}
	}
}

// TestParsePEMSharesCanonicalInput: a Secret already in canonical form is held once. The certificate
// keeps the Secret's own bytes (capped, so that nothing appends into them) rather than a copy, while
// other forms are still re-encoded.
func TestParsePEMSharesCanonicalInput(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "tls"}
	same := func(a, b []byte) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

	crt, pk := leafPair(t, kindP256, pkcs8, "a.example")
	c, err := ParsePEM(key, crt, pk, crt)
	if err != nil {
		t.Fatal(err)
	}
	if !same(c.ChainPEM, crt) || cap(c.ChainPEM) != len(crt) {
		t.Error("ChainPEM is a copy of a canonical tls.crt (or shares its spare capacity)")
	}
	if !same(c.KeyPEM(), pk) || cap(c.KeyPEM()) != len(pk) {
		t.Error("KeyPEM is a copy of a canonical PKCS#8 tls.key (or shares its spare capacity)")
	}
	if !same(c.CAPEM, crt) {
		t.Error("CAPEM is a copy of a canonical ca.crt")
	}

	crt, pk = leafPair(t, kindP256, sec1, "b.example")
	withText := append([]byte("leaf and intermediate\n"), crt...)
	c, err = ParsePEM(key, withText, pk, nil)
	if err != nil {
		t.Fatal(err)
	}
	if same(c.ChainPEM, withText) || !bytes.Equal(c.ChainPEM, crt) {
		t.Errorf("ChainPEM of a tls.crt with text around its blocks is not the re-encoded chain:\n%s", c.ChainPEM)
	}
	if same(c.KeyPEM(), pk) || !bytes.HasPrefix(c.KeyPEM(), []byte("-----BEGIN PRIVATE KEY-----")) {
		t.Errorf("a SEC 1 key was not re-encoded as PKCS#8")
	}
}

// TestCertificateString: the description names the fingerprint in hex and the key type as text, as
// logs and Events have always shown them.
func TestCertificateString(t *testing.T) {
	crt, key := leafPair(t, kindP256, pkcs8, "str.example.com")
	c, err := ParseSecret(tlsSecret("default", "str", crt, key))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(crt)
	sum := sha256.Sum256(block.Bytes)
	want := fmt.Sprintf("certificate default/str names=[str.example.com] notAfter=%s fingerprint=%s key=ECDSA-P256",
		c.NotAfter().UTC().Format(time.RFC3339), hex.EncodeToString(sum[:]))
	if got := c.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestKeyTypeString(t *testing.T) {
	for _, tt := range []struct {
		kt   KeyType
		want string
	}{
		{KeyType{}, ""},
		{KeyType{alg: keyRSA, bits: 2048}, "RSA-2048"},
		{KeyType{alg: keyRSA, bits: 3072}, "RSA-3072"},
		{KeyType{alg: keyRSA, bits: 4097}, "RSA-4097"},
		{KeyType{alg: keyECDSA, bits: 224}, "ECDSA-P224"},
		{KeyType{alg: keyECDSA, bits: 256}, "ECDSA-P256"},
		{KeyType{alg: keyECDSA, bits: 384}, "ECDSA-P384"},
		{KeyType{alg: keyECDSA, bits: 521}, "ECDSA-P521"},
		{KeyType{alg: keyEd25519}, "Ed25519"},
	} {
		if got := tt.kt.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.kt, got, tt.want)
		}
	}
}

// TestContentHashCoversWhatIsServed: the content hash is the SHA-256 of the chain, the key and the CA as
// served, and a certificate without a chain has no fingerprint.
func TestContentHashCoversWhatIsServed(t *testing.T) {
	crt, key := leafPair(t, kindP256, pkcs8, "hash.example.com")
	c, err := ParsePEM(types.NamespacedName{Namespace: "ns", Name: "hash"}, crt, key, crt)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(slices.Concat(c.ChainPEM, c.KeyPEM(), c.CAPEM))
	if c.ContentHash != string(want[:]) {
		t.Errorf("ContentHash = %x, want %x", c.ContentHash, want)
	}
	if fp := (&Certificate{}).Fingerprint(); fp != (Fingerprint{}) {
		t.Errorf("fingerprint of an empty certificate = %s, want zero", fp)
	}
}
