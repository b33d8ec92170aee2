package nginx

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingress-reactor/ingress-reactor/internal/freeport"
)

// requireNginx skips the test when no nginx binary is installed; everywhere CI runs, it is.
func requireNginx(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx binary not found in PATH; install it with hack/install-nginx.sh")
	}
	if _, err := DetectModules(false); err != nil {
		t.Skipf("nginx Lua module not installed: %v", err)
	}
	return bin
}

// nginxDir returns a fresh working directory that NGINX workers can traverse even when the test runs
// as root and workers run as nobody (t.TempDir's parents are 0700).
func nginxDir(t testing.TB) Paths {
	t.Helper()
	dir, err := os.MkdirTemp("", "ingress-reactor-nginx-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := NewPaths(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(); err != nil {
		t.Fatal(err)
	}
	return p
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int { t.Helper(); return freeport.Get(t) }

// selfSigned writes a self-signed ECDSA certificate for names into dir and returns the PEM bytes and paths.
func selfSigned(t testing.TB, dir, file string, names ...string) (certPEM, keyPEM []byte, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	certFile, keyFile = filepath.Join(dir, file+".crt"), filepath.Join(dir, file+".key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, certFile, keyFile
}

// testStatusToken is the status server's write token in tests.
const testStatusToken = "0123456789abcdef0123456789abcdef"

// testRenderConfig is a complete configuration on free loopback ports.
func testRenderConfig(t testing.TB, paths Paths) RenderConfig {
	t.Helper()
	mods, err := DetectModules(false)
	if err != nil {
		t.Fatal(err)
	}
	_, _, crt, key := selfSigned(t, paths.Prefix, "default", "ingress-reactor-default")
	return RenderConfig{
		HTTPPort:              freePort(t),
		HTTPSPort:             freePort(t),
		StatusPort:            freePort(t),
		StatusToken:           testStatusToken,
		ListenAddress:         "127.0.0.1",
		Paths:                 paths,
		Modules:               mods,
		WorkerProcesses:       "2",
		WorkerConnections:     1024,
		DefaultCertificate:    crt,
		DefaultCertificateKey: key,
	}
}

// nginxTest renders m and runs nginx -t on it.
func nginxTest(t testing.TB, m Model, cfg RenderConfig) []byte {
	t.Helper()
	conf, _, err := Render(m, cfg)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	file := filepath.Join(cfg.Paths.Prefix, "test.conf")
	if err := os.WriteFile(file, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Test(ctx, "nginx", cfg.Paths, file); err != nil {
		t.Fatalf("%v\n--- config ---\n%s", err, conf)
	}
	// Test reports errors only; a warning (say, an unsized hash) is a defect of the template too.
	out, _ := exec.CommandContext(ctx, "nginx", "-t", "-p", cfg.Paths.Prefix, "-c", file, "-e", "stderr").CombinedOutput()
	if strings.Contains(string(out), "[warn]") {
		t.Errorf("nginx -t warns:\n%s", out)
	}
	return conf
}

// httpServer starts an HTTP server on 127.0.0.1 and returns it as an endpoint.
func httpServer(t testing.TB, h http.HandlerFunc) Endpoint {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return Endpoint{Address: "127.0.0.1", Port: int32(srv.Listener.Addr().(*net.TCPAddr).Port)}
}

// routeTable is the full route push of m, as the reloader's route lane builds it.
func routeTable(m *Model) RouteUpdate {
	u := RouteUpdate{Hosts: map[Hostname][]byte{"": []byte(`{"routes":[]}`)}, DefaultUpstream: &m.DefaultBackend}
	for i := range m.Servers {
		u.Hosts[m.Servers[i].Host] = AppendRouteHostJSON(nil, &m.Servers[i])
	}
	return u
}

// garbageLeavesNoUninitializedWarning sends NGINX a request it answers 400 before any phase runs, and
// fails when its error log warns of an uninitialized variable within 2 s (a variable the log phase
// reads must be declared for such requests too).
func garbageLeavesNoUninitializedWarning(t *testing.T, cfg RenderConfig) {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", cfg.HTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "GARBAGE\r\n\r\n")
	_, _ = io.Copy(io.Discard, c) // NGINX answers 400 and closes
	c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		b, _ := os.ReadFile(cfg.ErrorLog)
		if strings.Contains(string(b), "uninitialized") {
			t.Fatalf("the error log warns of an uninitialized variable:\n%s", b)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testRequestMetrics is request metrics with the default buckets, labelled per host.
func testRequestMetrics() *RequestMetricsConfig {
	return &RequestMetricsConfig{TimeBuckets: DefaultTimeBuckets, LengthBuckets: DefaultLengthBuckets, SizeBuckets: DefaultSizeBuckets, PerHost: true}
}
