//go:build integration

package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// testDHParamFile holds RFC 3526's 2048-bit MODP prime with the generator 2, as openssl dhparam writes it.
const testDHParamFile = "../../nginx/testdata/dhparam-2048-g2.pem"

// TestConfigMapTLSRedirectAndDHParam runs the binary with --configmap through the real API server:
// plain HTTP to cert-manager's challenge path on a host with TLS is served (no-tls-redirect-locations'
// default) while the host's other paths get 308; ssl-dh-param's Secret (in another namespace) gives
// NGINX a 0600 parameter file and a TLS 1.2 client offering only DHE a 2048-bit key exchange; NGINX
// answers on IPv6 where the test's network namespace has it; emptying no-tls-redirect-locations
// redirects the challenge path too, and disable-ipv6 closes the IPv6 listener.
func TestConfigMapTLSRedirectAndDHParam(t *testing.T) {
	f := harness.New(t)
	routingService(f, "web", f.StartBackend("web", false))
	key, err := rsa.GenerateKey(rand.Reader, 2048) // DHE-RSA ciphers need an RSA certificate
	if err != nil {
		t.Fatal(err)
	}
	cert := newTestCertWithKey(t, key, "tls.example", "tls.example")
	applyTLSSecret(f, "site-tls", cert.CertPEM, cert.KeyPEM)
	dhNamespace := f.Namespace + "-dh"
	if _, err := f.Client.CoreV1().Namespaces().Create(f.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dhNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dhParam, err := os.ReadFile(testDHParamFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.CoreV1().Secrets(dhNamespace).Create(f.Ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dh", Namespace: dhNamespace},
		Data: map[string][]byte{"dhparam.pem": dhParam}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Create(f.Ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx-controller", Namespace: f.Namespace},
		Data:       map[string]string{"ssl-dh-param": dhNamespace + "/dh"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.CreateIngress(tlsIngress(f, "site", "tls.example", "site-tls", "web"))
	const challenge = "/.well-known/acme-challenge/token-1"
	f.CreateIngress(f.Ingress("solver", "tls.example", harness.IngressBackend{Path: challenge, Service: "web", Port: 80}))
	r := f.StartReactor("--configmap=" + f.Namespace + "/ingress-nginx-controller")
	r.WaitReady()
	r.WaitServedBy("tls.example", challenge, "web")
	if resp := send(t, r, harness.Request{Host: "tls.example", Path: "/other"}); resp.Status != http.StatusPermanentRedirect {
		t.Errorf("plain HTTP to another path of the TLS host: %d, want 308", resp.Status)
	}

	files, _ := filepath.Glob(filepath.Join(r.NginxDir, "dhparam", "*.pem"))
	if len(files) != 1 {
		t.Fatalf("DH parameter files %v, want one", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, %v; want 0600", files[0], fi, err)
	}
	if out := dheHandshake(t, r.HTTPSPort, "tls.example"); !strings.Contains(out, "Server Temp Key: DH, 2048 bits") {
		t.Errorf("no 2048-bit DHE key exchange with ssl-dh-param:\n%s", out)
	}

	// NGINX listens on IPv6 too where the namespace has it (disable-ipv6 false, the default).
	ipv6 := nginx.HostHasIPv6()
	ipv6Addr := net.JoinHostPort("::1", fmt.Sprint(r.HTTPPort))
	if ipv6 {
		if resp, err := harness.DoRequestTo(ipv6Addr, harness.Request{Host: "tls.example", Path: challenge}); err != nil || resp.Status != http.StatusOK {
			t.Errorf("plain HTTP over IPv6 (%s): %v, %v; want 200", ipv6Addr, resp, err)
		}
	}

	cm.Data["no-tls-redirect-locations"] = ""
	cm.Data["disable-ipv6"] = "true"
	if _, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(r, harness.Request{Host: "tls.example", Path: challenge}, "308 once no path is exempt", func(resp *harness.Response) bool {
		return resp.Status == http.StatusPermanentRedirect
	})
	if ipv6 {
		r.Eventually(harness.DefaultTimeout, "no IPv6 listener with disable-ipv6", func() (bool, string) {
			_, err := harness.DoRequestTo(ipv6Addr, harness.Request{Host: "tls.example", Path: challenge})
			return err != nil, fmt.Sprintf("error %v", err)
		})
	}
}

// dheHandshake has openssl (Go's crypto/tls has no DHE) connect over TLS 1.2 offering only a DHE cipher,
// and returns its report.
func dheHandshake(t *testing.T, port int, sni string) string {
	t.Helper()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl is needed: it is the client that offers DHE ciphers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, openssl, "s_client", "-connect", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), "-tls1_2",
		"-cipher", "DHE-RSA-AES128-GCM-SHA256", "-servername", sni)
	cmd.Stdin = strings.NewReader("")
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// TestConfigMapServiceUpstream: with the ConfigMap's service-upstream, an Ingress without the annotation
// is served through its Service's cluster IP (an address on the test namespace's loopback where a
// backend stands in for kube-proxy), while an Ingress with service-upstream "false" keeps the Pods.
func TestConfigMapServiceUpstream(t *testing.T) {
	f := harness.New(t)
	pods := f.StartBackend("pods", false)
	svc := f.CreateService("web", 80, pods.Port)
	f.ServeBackends("web", pods)
	serveClusterIP(t, f, svc, "via-cluster-ip")
	if _, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Create(f.Ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx-controller", Namespace: f.Namespace},
		Data:       map[string]string{"service-upstream": "true"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.CreateIngress(f.Ingress("to-vip", "vip.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	f.CreateIngress(annotate(f.Ingress("to-pods", "pods.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}),
		"service-upstream", "false"))
	r := f.StartReactor("--configmap=" + f.Namespace + "/ingress-nginx-controller")
	r.WaitReady()
	r.WaitServedBy("vip.example", "/", "via-cluster-ip")
	r.WaitServedBy("pods.example", "/", "pods")
}

// serveClusterIP puts svc's cluster IP on the test namespace's loopback with an echoserver named name on
// port 80 there, standing in for kube-proxy.
func serveClusterIP(t *testing.T, f *harness.Fixture, svc *corev1.Service, name string) {
	t.Helper()
	vip := svc.Spec.ClusterIP
	if out, err := exec.Command("ip", "addr", "add", vip+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("put the cluster IP %s on the test namespace's loopback: %v: %s", vip, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", vip+"/32", "dev", "lo").Run() })
	harness.StartProcess(t, "echoserver "+name, f.Env.EchoserverBinary,
		[]string{"--name=" + name, "--listen=" + net.JoinHostPort(vip, "80"), "--shutdown-timeout=5s"}, nil)
}
