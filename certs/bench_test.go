package certs

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ingress-reactor/ingress-reactor/internal/heapstat"
)

const benchSecrets = 1000

// benchKinds are the key types measured: RSA-2048 is what most issuers hand
// out, ECDSA P-256 is the cheaper modern choice.
var benchKinds = []keyKind{kindRSA2048, kindP256}

// makeBenchSecrets returns n distinct TLS Secrets, each a leaf plus the
// intermediate, as a public CA would issue them. Leaves differ in serial
// and names; keys come from a small pool, which changes nothing for parsing
// but keeps RSA key generation out of the setup time.
func makeBenchSecrets(b *testing.B, kind keyKind, n int) []*corev1.Secret {
	b.Helper()
	ca := sharedCA(b)
	const keyPool = 4
	keys := make([][]byte, keyPool)
	for i := range keys {
		keys[i] = pemKey(b, testKey(b, kind, i), pkcs8)
	}
	out := make([]*corev1.Secret, n)
	for i := range out {
		host := fmt.Sprintf("app-%d.example.com", i)
		leaf := makeCert(b, certSpec{cn: host, dns: []string{host, "www." + host}, key: testKey(b, kind, i%keyPool),
			parent: ca.inter, parentKey: ca.interKey, serial: int64(1000 + i)})
		out[i] = tlsSecret(fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("tls-%d", i), pemCerts(leaf, ca.inter), keys[i%keyPool])
	}
	return out
}

// BenchmarkParseValidateWrite1000 measures the work secretsync does for
// 1,000 referenced Secrets: parse and validate each, then write it to the
// ssl directory. One op is all 1,000 Secrets; ns/secret is op / 1000.
// Sub-benchmarks: "parse" is ParseSecret only; "write" is ParseSecret and
// Store.Write into an empty directory, so every file is written (temp file,
// fsync, rename, directory fsync); "unchanged" is ParseSecret and
// Store.Write of content already on disk, the steady state of a resync.
//
//	go test -run '^$' -bench BenchmarkParseValidateWrite1000 -benchtime 5x -benchmem ./certs/
func BenchmarkParseValidateWrite1000(b *testing.B) {
	for _, kind := range benchKinds {
		secrets := makeBenchSecrets(b, kind, benchSecrets)
		parseAll := func(b *testing.B, write func(*Certificate)) {
			for _, s := range secrets {
				c, err := ParseSecret(s)
				if err != nil {
					b.Fatal(err)
				}
				if write != nil {
					write(c)
				}
			}
		}
		report := func(b *testing.B) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchSecrets, "ns/secret")
		}
		b.Run(string(kind)+"/parse", func(b *testing.B) {
			for b.Loop() {
				parseAll(b, nil)
			}
			report(b)
		})
		b.Run(string(kind)+"/write", func(b *testing.B) {
			root := b.TempDir()
			i := 0
			for b.Loop() {
				b.StopTimer()
				s, err := NewStore(filepath.Join(root, fmt.Sprint(i)))
				if err != nil {
					b.Fatal(err)
				}
				i++
				b.StartTimer()
				parseAll(b, func(c *Certificate) {
					if _, err := s.Write(c); err != nil {
						b.Fatal(err)
					}
				})
			}
			report(b)
		})
		b.Run(string(kind)+"/unchanged", func(b *testing.B) {
			s, err := NewStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			write := func(c *Certificate) {
				if _, err := s.Write(c); err != nil {
					b.Fatal(err)
				}
			}
			parseAll(b, write)
			for b.Loop() {
				parseAll(b, write)
			}
			report(b)
		})
	}
}

// BenchmarkCertificateMemory measures the heap held by parsed certificates
// that a module keeps in its cache: the live heap after parsing 1,000
// Secrets and keeping the results, divided by 1,000 (bytes/cert), and the heap
// spans they occupy (span-bytes/cert: the live bytes plus the free slots the
// garbage of parsing left between them). The Secrets themselves
// are allocated before the first measurement and are not counted; their
// canonical PEM (as here) is shared, not copied, so pem-bytes/cert is held
// once, by the Secrets.
//
//	go test -run '^$' -bench BenchmarkCertificateMemory -benchtime 3x ./certs/
func BenchmarkCertificateMemory(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(string(kind), func(b *testing.B) {
			secrets := makeBenchSecrets(b, kind, benchSecrets)
			held := make([]*Certificate, len(secrets))
			var perCert, spansPerCert, pemPerCert float64
			for b.Loop() {
				clear(held)
				before, beforeSpans := heapstat.Live(), heapstat.InUse()
				for i, s := range secrets {
					c, err := ParseSecret(s)
					if err != nil {
						b.Fatal(err)
					}
					held[i] = c
				}
				perCert = float64(heapstat.Live()-before) / float64(len(held))
				spansPerCert = float64(heapstat.InUse()-beforeSpans) / float64(len(held))
				var pemBytes int
				for _, c := range held {
					pemBytes += len(c.ChainPEM) + len(c.KeyPEM()) + len(c.CAPEM)
				}
				pemPerCert = float64(pemBytes) / float64(len(held))
			}
			runtime.KeepAlive(held)
			b.ReportMetric(perCert, "bytes/cert")
			b.ReportMetric(spansPerCert, "span-bytes/cert")
			b.ReportMetric(pemPerCert, "pem-bytes/cert")
		})
	}
}

// BenchmarkParseSecret is the cost of one ParseSecret per key type.
//
//	go test -run '^$' -bench BenchmarkParseSecret -benchmem ./certs/
func BenchmarkParseSecret(b *testing.B) {
	for _, kind := range []keyKind{kindRSA2048, kindP256, kindP384, kindEd25519} {
		b.Run(string(kind), func(b *testing.B) {
			s := makeBenchSecrets(b, kind, 1)[0]
			for b.Loop() {
				if _, err := ParseSecret(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
