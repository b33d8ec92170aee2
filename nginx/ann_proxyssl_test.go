package nginx

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// testCA is a certificate authority for backend TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate and its key, for a server (names are its DNS names) or a client.
func (ca *testCA) issue(t testing.TB, server bool, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	usage := x509.ExtKeyUsageClientAuth
	if server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// secretLookup is a fixed set of Secrets.
type secretLookup map[types.NamespacedName]*corev1.Secret

func (s secretLookup) Secret(key types.NamespacedName) (*corev1.Secret, bool) {
	sec, ok := s[key]
	return sec, ok
}

// tlsSecret builds a Secret with the given data keys (tls.crt, tls.key, ca.crt), leaving out nil ones.
func tlsSecret(ns, name, rv string, crt, key, ca []byte) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}, Data: map[string][]byte{}}
	for k, v := range map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca} {
		if v != nil {
			s.Data[k] = v
		}
	}
	return s
}

// TestAnnotationProxySSL: proxy-ssl-* and the Secret -> the profile's settings and directives, or -> the
// exact rejection; a Secret's content names its files.
func TestAnnotationProxySSL(t *testing.T) {
	ca := newTestCA(t, "backend CA")
	clientCrt, clientKey := ca.issue(t, false, "ingress")
	_, otherKey := ca.issue(t, false, "other")
	secrets := secretLookup{
		nn("default", "ca-only"):    tlsSecret("default", "ca-only", "1", nil, nil, ca.pem),
		nn("default", "full"):       tlsSecret("default", "full", "1", clientCrt, clientKey, ca.pem),
		nn("default", "client"):     tlsSecret("default", "client", "1", clientCrt, clientKey, nil),
		nn("default", "half"):       tlsSecret("default", "half", "1", clientCrt, nil, ca.pem),
		nn("default", "mismatch"):   tlsSecret("default", "mismatch", "1", clientCrt, otherKey, ca.pem),
		nn("default", "garbage-ca"): tlsSecret("default", "garbage-ca", "1", nil, nil, []byte("not a certificate")),
		nn("default", "empty-ca"):   tlsSecret("default", "empty-ca", "1", clientCrt, clientKey, []byte("")),
		nn("default", "empty"):      tlsSecret("default", "empty", "1", nil, nil, nil),
		nn("other", "full"):         tlsSecret("other", "full", "1", clientCrt, clientKey, ca.pem),
	}
	https := []string{AnnotationBackendProtocol, "HTTPS"}
	with := func(kv ...string) []string { return append(slices.Clone(https), kv...) }
	const ann = "metadata.annotations[nginx.ingress.kubernetes.io/"
	tests := map[string]struct {
		kv   []string
		want ProfileSettings // ProxySSLFiles is checked apart: "set" or ""
		// directives are the profile's proxy-ssl directives, with the stem written as STEM.
		directives []string
		warning    string
		wantErr    string
	}{
		"no annotation": {},
		"CA and verification, bare name, as ingress-nginx's defaults; a Warning without proxy-ssl-name": {
			kv:         with(AnnotationProxySSLSecret, "ca-only", AnnotationProxySSLVerify, "on"),
			want:       ProfileSettings{BackendProtocol: "HTTPS", ProxySSLCA: true, ProxySSLVerify: true, ProxySSLVerifyDepth: 1},
			directives: []string{"proxy_ssl_trusted_certificate backend-tls/STEM-ca.pem", "proxy_ssl_verify on", "proxy_ssl_verify_depth 1"},
			warning:    "verification without nginx.ingress.kubernetes.io/proxy-ssl-name checks the backends' certificates against the name of NGINX's internal upstream",
		},
		"client certificate, every setting": {
			kv: with(AnnotationProxySSLSecret, "default/full", AnnotationProxySSLVerify, " ON ", AnnotationProxySSLVerifyDepth, "3",
				AnnotationProxySSLName, "Backend.Example.com", AnnotationProxySSLServerName, "on",
				AnnotationProxySSLProtocols, "TLSv1.3  TLSv1.2 TLSv1.3", AnnotationProxySSLCiphers, "HIGH:!aNULL:!MD5"),
			want: ProfileSettings{BackendProtocol: "HTTPS", ProxySSLCA: true, ProxySSLClientCert: true, ProxySSLVerify: true, ProxySSLVerifyDepth: 3,
				ProxySSLName: "backend.example.com", ProxySSLServerName: true, ProxySSLProtocols: "TLSv1.2 TLSv1.3", ProxySSLCiphers: "HIGH:!aNULL:!MD5"},
			directives: []string{"proxy_ssl_trusted_certificate backend-tls/STEM-ca.pem", "proxy_ssl_certificate backend-tls/STEM.pem",
				"proxy_ssl_certificate_key backend-tls/STEM.pem", "proxy_ssl_verify on", "proxy_ssl_verify_depth 3",
				"proxy_ssl_name backend.example.com", "proxy_ssl_server_name on", "proxy_ssl_protocols TLSv1.2 TLSv1.3", "proxy_ssl_ciphers HIGH:!aNULL:!MD5"},
		},
		"GRPCS uses grpc_ssl_*": {
			kv:   []string{AnnotationBackendProtocol, "GRPCS", AnnotationProxySSLSecret, "default/client", AnnotationProxySSLServerName, "on"},
			want: ProfileSettings{BackendProtocol: "GRPCS", ProxySSLClientCert: true, ProxySSLServerName: true},
			directives: []string{"grpc_ssl_certificate backend-tls/STEM.pem", "grpc_ssl_certificate_key backend-tls/STEM.pem",
				"grpc_ssl_server_name on"},
		},
		"verification off: the depth is not written": {
			kv:         with(AnnotationProxySSLSecret, "ca-only", AnnotationProxySSLVerify, "off", AnnotationProxySSLVerifyDepth, "2"),
			want:       ProfileSettings{BackendProtocol: "HTTPS", ProxySSLCA: true},
			directives: []string{"proxy_ssl_trusted_certificate backend-tls/STEM-ca.pem"},
		},
		"plain HTTP: ignored with a Warning": {
			kv:      []string{AnnotationProxySSLSecret, "default/full", AnnotationProxySSLServerName, "on"},
			warning: "the proxy-ssl-* annotations apply only when nginx.ingress.kubernetes.io/backend-protocol is HTTPS or GRPCS; ignored",
		},
		"without the Secret: ignored with a Warning, as ingress-nginx": {
			kv:      with(AnnotationProxySSLName, "backend.example.com"),
			want:    ProfileSettings{BackendProtocol: "HTTPS"},
			warning: "the proxy-ssl-* annotations apply only with nginx.ingress.kubernetes.io/proxy-ssl-secret, as in ingress-nginx; ignored",
		},
		"verification over plain HTTP is refused": {
			kv:      []string{AnnotationProxySSLSecret, "ca-only", AnnotationProxySSLVerify, "on"},
			wantErr: ann + "proxy-ssl-verify]: verification asks for TLS to the backends, but nginx.ingress.kubernetes.io/backend-protocol is not HTTPS or GRPCS; the Ingress is not served rather than served over plain text",
		},
		"verification without a Secret is refused": {
			kv:      with(AnnotationProxySSLVerify, "on"),
			wantErr: ann + "proxy-ssl-verify]: verification needs the CA of nginx.ingress.kubernetes.io/proxy-ssl-secret (a Secret with ca.crt); the Ingress is not served rather than served without verification",
		},
		"verification without ca.crt is refused": {
			kv:      with(AnnotationProxySSLSecret, "client", AnnotationProxySSLVerify, "on"),
			wantErr: ann + "proxy-ssl-secret]: secret default/client has no ca.crt, which proxy-ssl-verify needs to verify the backends; the Ingress is not served until it is fixed",
		},
		"verification with an empty ca.crt is refused": {
			kv:      with(AnnotationProxySSLSecret, "empty-ca", AnnotationProxySSLVerify, "on"),
			wantErr: ann + "proxy-ssl-secret]: secret default/empty-ca has an empty ca.crt, which proxy-ssl-verify needs to verify the backends; the Ingress is not served until it is fixed",
		},
		"a missing Secret is refused": {
			kv:      with(AnnotationProxySSLSecret, "default/nope"),
			wantErr: ann + "proxy-ssl-secret]: secret default/nope does not exist; the Ingress is not served until it is fixed",
		},
		"another namespace's Secret is refused": {
			kv:      with(AnnotationProxySSLSecret, "other/full"),
			wantErr: ann + `proxy-ssl-secret]: "other/full" is in namespace other; only Secrets of the Ingress's own namespace (default) may be used`,
		},
		"only tls.crt is refused": {
			kv:      with(AnnotationProxySSLSecret, "half"),
			wantErr: ann + "proxy-ssl-secret]: secret default/half holds only one of tls.crt and tls.key (a client certificate needs both); the Ingress is not served until it is fixed",
		},
		"a key that does not match is refused": {
			kv:      with(AnnotationProxySSLSecret, "mismatch"),
			wantErr: ann + "proxy-ssl-secret]: secret default/mismatch is not valid: tls.key does not match the certificate in tls.crt; the Ingress is not served until it is fixed",
		},
		"an unparsable CA is refused": {
			kv:      with(AnnotationProxySSLSecret, "garbage-ca"),
			wantErr: ann + "proxy-ssl-secret]: secret default/garbage-ca is not valid: ca.crt: no PEM CERTIFICATE block found; the Ingress is not served until it is fixed",
		},
		"a Secret without any of the keys is refused": {
			kv:      with(AnnotationProxySSLSecret, "empty"),
			wantErr: ann + "proxy-ssl-secret]: secret default/empty holds neither ca.crt nor tls.crt and tls.key; the Ingress is not served until it is fixed",
		},
		"not a name": {
			kv:      with(AnnotationProxySSLSecret, "default/a;b"),
			wantErr: ann + `proxy-ssl-secret]: "default/a;b" is not a Secret's namespace/name (want lowercase RFC 1123 names such as "default/backend-tls")`,
		},
		"verify neither on nor off": {
			kv:      with(AnnotationProxySSLSecret, "ca-only", AnnotationProxySSLVerify, "true"),
			wantErr: ann + `proxy-ssl-verify]: "true" is not valid (want on or off)`,
		},
		"depth out of range": {
			kv:      with(AnnotationProxySSLSecret, "ca-only", AnnotationProxySSLVerifyDepth, "0"),
			wantErr: ann + `proxy-ssl-verify-depth]: "0" is not valid (want an integer from 1 to 100)`,
		},
		"a variable is no name": {
			kv:      with(AnnotationProxySSLSecret, "ca-only", AnnotationProxySSLName, "$host"),
			wantErr: ann + `proxy-ssl-name]: "$host" is not valid (want a DNS name such as backend.example.com)`,
		},
		"an unknown protocol": {
			kv:      with(AnnotationProxySSLSecret, "ca-only", AnnotationProxySSLProtocols, "TLSv1.2 TLSv1.4"),
			wantErr: ann + `proxy-ssl-protocols]: "TLSv1.2 TLSv1.4" is not valid (want protocols from SSLv2, SSLv3, TLSv1, TLSv1.1, TLSv1.2, TLSv1.3, separated by spaces)`,
		},
		"ciphers with NGINX syntax": {
			kv:      with(AnnotationProxySSLSecret, "ca-only", AnnotationProxySSLCiphers, "HIGH; return 200"),
			wantErr: ann + `proxy-ssl-ciphers]: "HIGH; return 200" is not valid (want an OpenSSL cipher list of letters, digits and + : _ - !)`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(tc.kv...))
			got, err := TranslateIngressWith(ing, Lookups{Services: servicesOf(service("default", "web", port(80, "http"))), Secrets: secrets}, DefaultTranslateOptions())
			if tc.wantErr != "" {
				if got != nil || err == nil || !slices.Contains(strings.Split(strings.TrimPrefix(err.Error(), "ingress default/a rejected: "), "\n"), tc.wantErr) {
					t.Fatalf("got %+v, error %v; want the rejection %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			stem := valueOf(got.Profile).ProxySSLFiles
			if (stem != "") != (tc.directives != nil) || (got.BackendTLS() != nil) != (stem != "") || got.BackendTLS() != nil && got.BackendTLS().Stem != stem {
				t.Fatalf("files %q, material %v", stem, got.BackendTLS())
			}
			p := valueOf(got.Profile)
			p.ProxySSLFiles = ""
			if p != tc.want {
				t.Errorf("profile %+v, want %+v", p, tc.want)
			}
			dirs := proxySSLDirectives(valueOf(got.Profile), nil)
			for i := range dirs {
				dirs[i] = strings.ReplaceAll(dirs[i], stem, "STEM")
			}
			if !slices.Equal(dirs, tc.directives) {
				t.Errorf("directives %q, want %q", dirs, tc.directives)
			}
			if tc.warning != "" && !slices.ContainsFunc(got.Warnings, func(w string) bool { return strings.Contains(w, tc.warning) }) {
				t.Errorf("warnings %q, want %q", got.Warnings, tc.warning)
			}
			if stem != "" && !strings.HasPrefix(stem, "default_") {
				t.Errorf("stem %q does not name the Secret", stem)
			}
		})
	}

	// The files are named by the Secret and its content: the same content the same name, new content
	// (or another Secret with the same content) another.
	translateWith := func(secrets secretLookup, name string) string {
		t.Helper()
		ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(with(AnnotationProxySSLSecret, name)...))
		got, err := TranslateIngressWith(ing, Lookups{Services: servicesOf(service("default", "web", port(80, "http"))), Secrets: secrets}, DefaultTranslateOptions())
		if err != nil {
			t.Fatal(err)
		}
		return valueOf(got.Profile).ProxySSLFiles
	}
	first := translateWith(secrets, "full")
	again := secretLookup{nn("default", "full"): tlsSecret("default", "full", "2", clientCrt, clientKey, ca.pem)}
	if translateWith(again, "full") != first {
		t.Error("the same content under a new resourceVersion got other files")
	}
	changed := secretLookup{nn("default", "full"): tlsSecret("default", "full", "3", clientCrt, clientKey, newTestCA(t, "new CA").pem)}
	if translateWith(changed, "full") == first {
		t.Error("new content kept the files' name")
	}
	renamed := secretLookup{nn("default", "copy"): tlsSecret("default", "copy", "1", clientCrt, clientKey, ca.pem)}
	if translateWith(renamed, "copy") == first {
		t.Error("another Secret with the same content got the same files")
	}
}

// TestProxySSLInjection: hostile values of each proxy-ssl-* annotation, on an HTTPS Ingress with a
// valid Secret, are rejected naming the annotation, or reach the directives without NGINX syntax.
func TestProxySSLInjection(t *testing.T) {
	ca := newTestCA(t, "backend CA")
	secrets := secretLookup{nn("default", "ca"): tlsSecret("default", "ca", "1", nil, nil, ca.pem)}
	for _, name := range []string{AnnotationProxySSLSecret, AnnotationProxySSLVerify, AnnotationProxySSLVerifyDepth, AnnotationProxySSLName,
		AnnotationProxySSLServerName, AnnotationProxySSLProtocols, AnnotationProxySSLCiphers} {
		for _, v := range injectionValues() {
			kv := map[string]string{AnnotationBackendProtocol: "HTTPS", AnnotationProxySSLSecret: "ca", name: v}
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)))
			ing.Annotations = kv
			got, err := TranslateIngressWith(ing, Lookups{Services: servicesOf(service("default", "web", port(80, "http"))), Secrets: secrets}, DefaultTranslateOptions())
			if err != nil {
				if !strings.Contains(err.Error(), "metadata.annotations[") || len(err.Error()) > 600 {
					t.Errorf("%s=%.40q: rejection %.200q", name, v, err)
				}
				continue
			}
			for _, d := range valueOf(got.Profile).Directives() {
				if strings.ContainsAny(d, ";{}\"'$\\#\x00\r\n") {
					t.Errorf("%s=%.40q: directive %.100q", name, v, d)
				}
			}
		}
	}
}

// TestModelBuilderSecretUsers: a Secret's change translates again exactly the Ingresses that name it
// (UpdateInput.Objects); a missing Secret rejects the Ingress until it appears; the build lists the
// files of the model's profiles.
func TestModelBuilderSecretUsers(t *testing.T) {
	ca := newTestCA(t, "backend CA")
	secrets := secretLookup{}
	svcs := servicesOf(service("default", "web", port(80, "http")))
	ingresses := map[types.NamespacedName]*networkingv1.Ingress{}
	put := func(name, secret string) {
		ing := ingress("default", name, rule(name+".example.com", prefix("/", "web", 80)),
			annotate(AnnotationBackendProtocol, "HTTPS", AnnotationProxySSLSecret, secret, AnnotationProxySSLVerify, "on"))
		ing.ResourceVersion = "1"
		ingresses[nn("default", name)] = ing
	}
	put("a", "backend")
	put("b", "other")
	b := NewModelBuilder()
	get := func(k types.NamespacedName) (*networkingv1.Ingress, bool) {
		ing, ok := ingresses[k]
		return ing, ok
	}
	build := b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ingresses[nn("default", "a")], ingresses[nn("default", "b")]}, Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 2 || !strings.Contains(build.Rejected[0].Err.Error(), "secret default/backend does not exist") {
		t.Fatalf("rejected %+v, want both (their Secrets are missing)", build.Rejected)
	}
	backendRef := ObjectRef{Kind: KindSecret, Key: nn("default", "backend")}
	if !b.DependsOnObject(backendRef) || !b.DependsOnObject(ObjectRef{Kind: KindSecret, Key: nn("default", "other")}) ||
		b.DependsOnObject(ObjectRef{Kind: KindSecret, Key: nn("default", "unused")}) {
		t.Fatal("the builder does not depend on exactly the named Secrets")
	}

	secrets[nn("default", "backend")] = tlsSecret("default", "backend", "1", nil, nil, ca.pem)
	update := func(objects ...ObjectRef) Build {
		t.Helper()
		return b.Update(UpdateInput{Objects: objects, Get: get, Lookup: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	}
	build = update(backendRef)
	if len(build.Rejected) != 1 || build.Rejected[0].Ingress.Name != "b" || build.Translated != 1 {
		t.Fatalf("after the Secret appeared: rejected %+v, translated %d; want a served, b still rejected", build.Rejected, build.Translated)
	}
	if len(build.BackendTLS) != 1 || len(build.Model.Profiles) != 1 || build.BackendTLS[0].Stem != build.Model.Profiles[0].ProxySSLFiles {
		t.Fatalf("files %v for profiles %+v", build.BackendTLS, build.Model.Profiles)
	}
	stem := build.BackendTLS[0].Stem

	// A change of the Secret's content: a new profile and new files.
	secrets[nn("default", "backend")] = tlsSecret("default", "backend", "2", nil, nil, newTestCA(t, "rotated").pem)
	build = update(backendRef)
	if len(build.BackendTLS) != 1 || build.BackendTLS[0].Stem == stem || build.Model.Profiles[0].ProxySSLFiles != build.BackendTLS[0].Stem {
		t.Fatalf("after the rotation: files %v, profiles %+v", build.BackendTLS, build.Model.Profiles)
	}
	// An unrelated object's change translates nothing again.
	hits, misses := b.cacheStats()
	build = update(ObjectRef{Kind: KindSecret, Key: nn("default", "unused")})
	if h, m := b.cacheStats(); h != hits || m != misses {
		t.Errorf("an unrelated Secret's change looked at Ingresses (cache hits %d->%d, misses %d->%d)", hits, h, misses, m)
	}
	// The Secret is deleted: a is rejected, and its last good version is not served either (it would go
	// on using the deleted Secret's key and CA).
	delete(secrets, nn("default", "backend"))
	build = update(backendRef)
	if len(build.Rejected) != 2 || build.Rejected[0].Stale || !errors.Is(build.Rejected[0].Err, ErrWithdrawn) || len(build.BackendTLS) != 0 ||
		len(build.Model.Profiles) != 0 {
		t.Fatalf("after the deletion: rejected %+v, files %v, profiles %+v; want a withdrawn (not served) and b", build.Rejected,
			build.BackendTLS, build.Model.Profiles)
	}
	// a stops naming the Secret: the builder no longer depends on it.
	plain := ingresses[nn("default", "a")].DeepCopy()
	plain.Annotations, plain.ResourceVersion = nil, "2"
	ingresses[nn("default", "a")] = plain
	build = b.Update(UpdateInput{Ingresses: []types.NamespacedName{nn("default", "a")}, Get: get, Lookup: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if b.DependsOnObject(backendRef) || len(build.BackendTLS) != 0 || len(build.Model.Profiles) != 0 {
		t.Fatalf("after a dropped the annotation: depends %v, files %v, profiles %+v", b.DependsOnObject(backendRef), build.BackendTLS, build.Model.Profiles)
	}
}

// TestWriteBackendTLSFiles: the files are written 0600 in a 0700 directory, with the material; files of
// stems neither current nor kept are removed.
func TestWriteBackendTLSFiles(t *testing.T) {
	paths := Paths{Prefix: t.TempDir()}
	one := newBackendTLSFiles(nn("default", "one"), []byte("chain and key"), []byte("ca"))
	two := newBackendTLSFiles(nn("default", "two"), nil, []byte("ca two"))
	kept, err := WriteBackendTLSFiles(paths, []*BackendTLSFiles{one, two}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(rel, want string) {
		t.Helper()
		file := filepath.Join(paths.Prefix, rel)
		got, err := os.ReadFile(file)
		if err != nil || string(got) != want {
			t.Fatalf("%s: %q, %v; want %q", rel, got, err, want)
		}
		if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", rel, fi.Mode().Perm())
		}
	}
	check(one.CertFile(), "chain and key")
	check(one.CAFile(), "ca")
	check(two.CAFile(), "ca two")
	if _, err := os.Stat(filepath.Join(paths.Prefix, two.CertFile())); !os.IsNotExist(err) {
		t.Errorf("a Secret without a client certificate got a certificate file: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(paths.Prefix, BackendTLSDir)); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	// two leaves but is kept (the previous configuration's), then goes.
	kept, err = WriteBackendTLSFiles(paths, []*BackendTLSFiles{one}, kept)
	if err != nil {
		t.Fatal(err)
	}
	check(two.CAFile(), "ca two")
	if _, err := WriteBackendTLSFiles(paths, []*BackendTLSFiles{one}, kept); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(paths.Prefix, two.CAFile())); !os.IsNotExist(err) {
		t.Errorf("the files of a stem no configuration names are still there: %v", err)
	}
	check(one.CertFile(), "chain and key")

	// The installed nginx.conf names three (the last good configuration, which NGINX starts on after a
	// crash, put back after failed reloads): its files stay however many configurations were published
	// since, until nginx.conf no longer names them.
	three := newBackendTLSFiles(nn("default", "three"), []byte("three chain and key"), []byte("three ca"))
	kept, err = WriteBackendTLSFiles(paths, []*BackendTLSFiles{one, three}, nil)
	if err != nil {
		t.Fatal(err)
	}
	conf := "proxy_ssl_trusted_certificate " + three.CAFile() + ";\nproxy_ssl_certificate " + three.CertFile() + ";\n"
	if err := os.WriteFile(paths.ConfFile(), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if kept, err = WriteBackendTLSFiles(paths, []*BackendTLSFiles{one}, kept); err != nil {
			t.Fatal(err)
		}
	}
	check(three.CertFile(), "three chain and key")
	check(three.CAFile(), "three ca")
	if err := os.WriteFile(paths.ConfFile(), []byte("# none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteBackendTLSFiles(paths, []*BackendTLSFiles{one}, kept); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(paths.Prefix, three.CAFile())); !os.IsNotExist(err) {
		t.Errorf("the files of a stem nginx.conf no longer names are still there: %v", err)
	}
}

// TestProxySSLProfiles runs backend TLS through real NGINX: HTTPS backends with certificates of their
// own CA, verified or not, one of them requiring a client certificate.
func TestProxySSLProfiles(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	backendCA, otherCA := newTestCA(t, "backend CA"), newTestCA(t, "other CA")
	serverCrt, serverKey := backendCA.issue(t, true, "backend.example.com")
	clientCrt, clientKey := backendCA.issue(t, false, "ingress-reactor")
	pair, err := tls.X509KeyPair(serverCrt, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(backendCA.cert)
	answer := func(w http.ResponseWriter, r *http.Request) {
		who := "anonymous"
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			who = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		_, _ = io.WriteString(w, "tls to "+r.TLS.ServerName+" from "+who)
	}
	start := func(clientAuth tls.ClientAuthType) Endpoint {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(answer))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: clientAuth, ClientCAs: clientCAs}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return Endpoint{Address: "127.0.0.1", Port: int32(srv.Listener.Addr().(*net.TCPAddr).Port)}
	}
	backend, mtls := start(tls.NoClientCert), start(tls.RequireAndVerifyClientCert)

	secrets := secretLookup{
		nn("default", "backend-ca"): tlsSecret("default", "backend-ca", "1", nil, nil, backendCA.pem),
		nn("default", "other-ca"):   tlsSecret("default", "other-ca", "1", nil, nil, otherCA.pem),
		nn("default", "client"):     tlsSecret("default", "client", "1", clientCrt, clientKey, backendCA.pem),
	}
	svcs := servicesOf(service("default", "tls", port(443, "https")), service("default", "mtls", port(443, "https")))
	site := func(name, svc string, kv ...string) *networkingv1.Ingress {
		return ingress("default", name, rule(name+".example.com", prefix("/", svc, 443)), annotate(append([]string{AnnotationBackendProtocol, "HTTPS"}, kv...)...))
	}
	verified := []string{AnnotationProxySSLVerify, "on", AnnotationProxySSLName, "backend.example.com", AnnotationProxySSLServerName, "on"}
	ings := []*networkingv1.Ingress{
		site("verified", "tls", append([]string{AnnotationProxySSLSecret, "backend-ca"}, verified...)...),
		site("wrong-ca", "tls", append([]string{AnnotationProxySSLSecret, "other-ca"}, verified...)...),
		site("wrong-name", "tls", AnnotationProxySSLSecret, "backend-ca", AnnotationProxySSLVerify, "on", AnnotationProxySSLName, "other.example.com"),
		site("unverified", "tls", AnnotationProxySSLSecret, "other-ca", AnnotationProxySSLVerify, "off"),
		site("client-cert", "mtls", append([]string{AnnotationProxySSLSecret, "default/client"}, verified...)...),
		site("no-client-cert", "mtls", append([]string{AnnotationProxySSLSecret, "backend-ca"}, verified...)...),
		// grpc_ssl_* pass NGINX's configuration test too.
		ingress("default", "grpcs", rule("grpcs.example.com", prefix("/", "mtls", 443)), annotate(append([]string{AnnotationBackendProtocol, "GRPCS",
			AnnotationProxySSLSecret, "client", AnnotationProxySSLProtocols, "TLSv1.2 TLSv1.3", AnnotationProxySSLCiphers, "HIGH:!aNULL"}, verified...)...)),
	}
	build := NewModelBuilder().Build(BuildInput{Ingresses: ings, Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 || len(build.Model.Profiles) != 6 || len(build.BackendTLS) != 3 {
		t.Fatalf("rejected %+v, %d profiles, files %v; want none rejected, 6 profiles, 3 sets of files", build.Rejected, len(build.Model.Profiles), build.BackendTLS)
	}
	if _, err := WriteBackendTLSFiles(cfg.Paths, build.BackendTLS, nil); err != nil {
		t.Fatal(err)
	}
	conf, _, err := Render(build.Model, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(conf), "PRIVATE KEY") || strings.Contains(string(conf), "BEGIN CERTIFICATE") {
		t.Fatal("nginx.conf holds PEM material")
	}
	applyModel(t, rt, build.Model, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{
		up("default", "tls", 443).Name:  {backend},
		up("default", "mtls", 443).Name: {mtls},
	}); err != nil {
		t.Fatal(err)
	}
	// In this order, twice: the connections that the unverified and the client certificate's profiles
	// leave idle must not carry the requests of the others (each such profile has its upstream block).
	checks := []struct{ host, want string }{
		{"unverified", "200 tls to  from anonymous"}, // no SNI without proxy-ssl-server-name
		{"client-cert", "200 tls to backend.example.com from ingress-reactor"},
		{"verified", "200 tls to backend.example.com from anonymous"},
		{"wrong-ca", "502"},
		{"wrong-name", "502"},
		{"no-client-cert", "502"},
	}
	for _, c := range append(checks, checks...) {
		host, want := c.host, c.want
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host + ".example.com"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := strconv.Itoa(resp.StatusCode)
		if resp.StatusCode == http.StatusOK {
			got += " " + string(body)
		}
		if got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}

// TestProxySSLFailingProfiles: NGINX refuses a cipher list OpenSSL does not know, or a file it cannot
// load, without naming a line of nginx.conf; FailingProfiles still finds the profile that wrote it, so
// that its Ingresses are quarantined and nobody else's changes wait.
func TestProxySSLFailingProfiles(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	ca := newTestCA(t, "backend CA")
	secrets := secretLookup{nn("default", "ca"): tlsSecret("default", "ca", "1", nil, nil, ca.pem)}
	svcs := servicesOf(service("default", "web", port(443, "https")))
	site := func(name string, kv ...string) *networkingv1.Ingress {
		return ingress("default", name, rule(name+".example.com", prefix("/", "web", 443)),
			annotate(append([]string{AnnotationBackendProtocol, "HTTPS", AnnotationProxySSLSecret, "ca"}, kv...)...))
	}
	build := NewModelBuilder().Build(BuildInput{Ingresses: []*networkingv1.Ingress{
		site("good"), site("bad-ciphers", AnnotationProxySSLCiphers, "NOSUCHCIPHER"),
	}, Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Model.Profiles) != 2 {
		t.Fatalf("profiles %+v", build.Model.Profiles)
	}
	bad := build.Model.Profiles[slices.IndexFunc(build.Model.Profiles, func(p ProfileSettings) bool { return p.ProxySSLCiphers != "" })]
	check := func(what string, want ProfileSettings) {
		t.Helper()
		if _, err := WriteBackendTLSFiles(cfg.Paths, build.BackendTLS, nil); err != nil {
			t.Fatal(err)
		}
		conf, _, err := Render(build.Model, cfg)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(cfg.Paths.Prefix, "test.conf")
		if err := os.WriteFile(file, conf, 0o600); err != nil {
			t.Fatal(err)
		}
		err = Test(context.Background(), "nginx", cfg.Paths, file)
		if err == nil {
			t.Fatalf("%s: nginx -t passed", what)
		}
		if got := FailingProfiles(conf, err.Error(), build.Model.Profiles); !slices.Equal(got, []ProfileSettings{want}) {
			t.Errorf("%s: nginx -t said %q; failing profiles %+v, want only %+v", what, err, got, want)
		}
	}
	check("an unknown cipher list", bad)

	// A CA file NGINX cannot load (written over, standing in for a certificate Go takes and OpenSSL does not).
	build = NewModelBuilder().Build(BuildInput{Ingresses: []*networkingv1.Ingress{site("verified", AnnotationProxySSLVerify, "on")}, Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	good := build.Model.Profiles[0]
	build.BackendTLS[0] = &BackendTLSFiles{Stem: good.ProxySSLFiles, ca: []byte("not a certificate")}
	check("a CA file OpenSSL refuses", good)
}
