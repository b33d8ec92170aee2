package certs

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
)

// FuzzParsePEM feeds arbitrary tls.crt, tls.key and ca.crt to the parser.
// It must never panic; a failure must name the secret and carry no key
// material; a success must be a usable pair whose normal form parses to
// the same certificate again.
//
//	go test -run '^$' -fuzz FuzzParsePEM -fuzztime 20s ./certs/
func FuzzParsePEM(f *testing.F) {
	ca := sharedCA(f)
	caPEM := pemCerts(ca.root)
	for _, seed := range []struct {
		kind   keyKind
		format keyFormat
	}{
		{kindRSA2048, pkcs1},
		{kindRSA2048, pkcs8},
		{kindP256, sec1},
		{kindP384, pkcs8},
		{kindEd25519, pkcs8},
	} {
		crt, key := leafPair(f, seed.kind, seed.format, "fuzz.example.com", "*.fuzz.example.com")
		f.Add(crt, key, caPEM)
		f.Add(crt, key, []byte(nil))
		f.Add(key, crt, []byte(nil)) // swapped fields
	}
	crt, key := leafPair(f, kindP256, sec1, "fuzz.example.com")
	f.Add(crt[:len(crt)/2], key, []byte(nil))
	f.Add(crt, key[:len(key)/2], []byte(nil))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), []byte("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n"), []byte("garbage"))

	secret := nn("fuzz", "secret")
	f.Fuzz(func(t *testing.T, crt, key, ca []byte) {
		c, err := ParsePEM(secret, crt, key, ca)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "secret fuzz/secret: ") {
				t.Fatalf("error does not name the secret: %q", msg)
			}
			assertNoKeyMaterial(t, msg, key)
			return
		}
		if _, err := tls.X509KeyPair(c.ChainPEM, c.KeyPEM()); err != nil {
			t.Fatalf("accepted pair is not usable: %v", err)
		}
		again, err := ParsePEM(secret, c.ChainPEM, c.KeyPEM(), c.CAPEM)
		if err != nil {
			t.Fatalf("normal form does not parse: %v", err)
		}
		if again.ContentHash != c.ContentHash || again.Fingerprint() != c.Fingerprint() {
			t.Fatal("normal form is not stable")
		}
		for _, name := range c.Names {
			if !c.Matches(name) {
				t.Fatalf("certificate does not match its own name %q", name)
			}
		}
		assertNoKeyMaterial(t, fmt.Sprintf("%v %+v %#v", c, c, c), c.KeyPEM())
	})
}
