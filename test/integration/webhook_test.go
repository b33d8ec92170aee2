//go:build integration

package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// admissionMetric counts the webhook's admission requests by result.
const admissionMetric = "ingress_reactor_admission_requests_total"

// webhookCerts writes a CA and a serving certificate for 127.0.0.1 signed by it; it returns the CA's
// PEM (the caBundle) and the serving certificate's files.
func webhookCerts(t *testing.T) (caPEM []byte, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "ingress-reactor webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert"), filepath.Join(dir, "key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), certFile, keyFile
}

// warnings collects the warnings the API server returns (admission warnings among them).
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	w.got = append(w.got, text)
	w.mu.Unlock()
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.got
	w.got = nil
	return out
}

// admissionTotal is the sum of the webhook's admission requests over every result.
func admissionTotal(t *testing.T, r *harness.Reactor) float64 {
	t.Helper()
	m, err := r.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, result := range []string{"allowed", "warned", "denied", "skipped", "invalid", "unavailable"} {
		v, _ := m.Value(admissionMetric, map[string]string{"result": result})
		total += v
	}
	return total
}

// shippedWebhookConfiguration reads the ValidatingWebhookConfiguration of deploy/admission-webhook.yaml.
func shippedWebhookConfiguration(t *testing.T, root string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy", "admission-webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if !strings.Contains(doc, "kind: ValidatingWebhookConfiguration") {
			continue
		}
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := yaml.UnmarshalStrict([]byte(doc), &vwc); err != nil {
			t.Fatalf("deploy/admission-webhook.yaml: %v", err)
		}
		if len(vwc.Webhooks) != 1 || vwc.Webhooks[0].ClientConfig.Service == nil || vwc.Webhooks[0].ClientConfig.Service.Path == nil {
			t.Fatalf("deploy/admission-webhook.yaml: want one webhook reached through a Service path: %+v", vwc.Webhooks)
		}
		return &vwc
	}
	t.Fatal("deploy/admission-webhook.yaml has no ValidatingWebhookConfiguration")
	return nil
}

// TestAdmissionWebhook runs the webhook in the binary behind the real API server, which calls it over
// TLS on loopback through deploy/admission-webhook.yaml's ValidatingWebhookConfiguration (its failure
// policy and class conditions; reached by URL, for the fixture's class and namespace only): a bad Ingress is refused by Create with the reason, a good
// one is created, one that loses a conflict is created with the conflict as a warning, an Ingress of
// another class is never sent, the injection corpus is refused exactly where translation refuses it
// and what is admitted leaves nginx.conf clean, and with the webhook down a failure policy of Ignore
// does not block.
func TestAdmissionWebhook(t *testing.T) {
	f := harness.New(t)
	svc := f.CreateService("web", 80, 8080)
	caPEM, certFile, keyFile := webhookCerts(t)
	port := harness.FreePort(t)
	r := f.StartReactor("--validating-webhook=127.0.0.1:"+strconv.Itoa(port),
		"--validating-webhook-certificate="+certFile, "--validating-webhook-key="+keyFile)
	r.WaitReady()

	vwc := shippedWebhookConfiguration(t, f.Env.RepoRoot)
	vwc.Name = "ingress-reactor-" + f.ID
	vwc.Annotations = nil
	hook := &vwc.Webhooks[0]
	hook.ClientConfig = admissionregistrationv1.WebhookClientConfig{
		URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, *hook.ClientConfig.Service.Path)), CABundle: caPEM,
	}
	// The shared API server serves every test: only this test's namespace is sent, and the class is the
	// fixture's.
	hook.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": f.Namespace}}
	for i := range hook.MatchConditions {
		hook.MatchConditions[i].Expression = strings.ReplaceAll(hook.MatchConditions[i].Expression, "'ingress-reactor'", "'"+f.IngressClass+"'")
	}
	vwcs := f.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := vwcs.Create(f.Ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vwcs.Delete(t.Context(), vwc.Name, metav1.DeleteOptions{}) })

	seen := &warnings{}
	cfg := rest.CopyConfig(f.Env.RESTConfig)
	cfg.WarningHandler = seen
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ingresses := client.NetworkingV1().Ingresses(f.Namespace)
	create := func(ing *networkingv1.Ingress, dryRun bool) error {
		opts := metav1.CreateOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := ingresses.Create(f.Ctx, ing, opts)
		return err
	}
	bad := func(name string) *networkingv1.Ingress {
		return annotate(f.Ingress(name, name+".example.com", prefixPath("/", "web")), "ssl-redirect", "maybe")
	}
	// The API server takes the configuration up within a moment; until then a bad Ingress gets in.
	harness.Eventually(t, harness.DefaultTimeout, "the API server to call the webhook", func() (bool, string) {
		err := create(bad("probe"), true)
		return err != nil && strings.Contains(err.Error(), "denied the request"), fmt.Sprint(err)
	})

	t.Run("a bad Ingress is refused with the reason", func(t *testing.T) {
		err := create(bad("bad"), false)
		want := "ingress " + f.Namespace + "/bad rejected: metadata.annotations[nginx.ingress.kubernetes.io/ssl-redirect]"
		if err == nil || !strings.Contains(err.Error(), `admission webhook "validate.ingress-reactor.io" denied the request`) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Create: %v, want a denial containing %q", err, want)
		}
		if _, err := ingresses.Get(f.Ctx, "bad", metav1.GetOptions{}); err == nil {
			t.Fatal("the refused Ingress exists")
		}
	})
	t.Run("the legacy class annotation is ours too", func(t *testing.T) {
		legacy := bad("legacy")
		legacy.Spec.IngressClassName = nil
		legacy.Annotations["kubernetes.io/ingress.class"] = f.IngressClass
		if err := create(legacy, true); err == nil || !strings.Contains(err.Error(), "denied the request") {
			t.Fatalf("Create: %v, want a denial", err)
		}
	})
	t.Run("an empty class annotation leaves the class to spec.ingressClassName", func(t *testing.T) {
		// The controller reads an empty kubernetes.io/ingress.class as none (the API server refuses it
		// next to spec.ingressClassName on CREATE only): an UPDATE that adds it is still ours.
		ing, err := ingresses.Create(f.Ctx, f.Ingress("empty-class", "empty-class.example.com", prefixPath("/", "web")), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ing.Annotations = map[string]string{"kubernetes.io/ingress.class": "", "nginx.ingress.kubernetes.io/ssl-redirect": "maybe"}
		_, err = ingresses.Update(f.Ctx, ing, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "denied the request") {
			t.Fatalf("Update: %v, want a denial", err)
		}
	})
	t.Run("a good Ingress is created without warnings", func(t *testing.T) {
		seen.take()
		if err := create(f.Ingress("shop", "shop.example.com", prefixPath("/", "web")), false); err != nil {
			t.Fatal(err)
		}
		if w := seen.take(); len(w) != 0 {
			t.Fatalf("warnings %q", w)
		}
	})
	t.Run("a conflicting host is created with a warning", func(t *testing.T) {
		// The webhook judges against its cache, which gets the older Ingress a moment after it was created.
		copyOf := f.Ingress("shop-copy", "shop.example.com", prefixPath("/", "web"))
		harness.Eventually(t, harness.DefaultTimeout, "the webhook to know the older Ingress", func() (bool, string) {
			seen.take()
			err := create(copyOf, true)
			w := seen.take()
			return err == nil && len(w) > 0, fmt.Sprint(err, w)
		})
		if err := create(f.Ingress("shop-copy", "shop.example.com", prefixPath("/", "web")), false); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`path "/" (Prefix) on host shop.example.com is already served by Ingress %s/shop, which is older`, f.Namespace)
		if w := seen.take(); len(w) != 1 || !strings.Contains(w[0], want) {
			t.Fatalf("warnings %q, want one containing %q", w, want)
		}
	})
	t.Run("an Ingress of another class is never sent", func(t *testing.T) {
		before := admissionTotal(t, r)
		other := bad("other-class")
		other.Spec.IngressClassName = ptr.To("other-" + f.ID)
		if err := create(other, false); err != nil {
			t.Fatal(err)
		}
		noClass := bad("no-class")
		noClass.Spec.IngressClassName = nil
		if err := create(noClass, false); err != nil {
			t.Fatal(err)
		}
		if after := admissionTotal(t, r); after != before {
			t.Fatalf("the webhook was asked %v times", after-before)
		}
	})
	t.Run("the injection corpus is refused where translation refuses it", func(t *testing.T) {
		lookups := nginx.Lookups{Services: nginx.ServiceLookupFunc(func(k types.NamespacedName) (*corev1.Service, bool) {
			return svc, k == types.NamespacedName{Namespace: f.Namespace, Name: "web"}
		})}
		var specs []nginx.AnnotationSpec
		for _, s := range nginx.AnnotationRegistry() {
			if s.Status == nginx.AnnotationSupported {
				specs = append(specs, s)
			}
		}
		denied, admitted := 0, 0
		for i, v := range e2eHostileValues {
			// Every value in every annotation (dry runs), then each in one annotation for real.
			for j, s := range specs {
				name := fmt.Sprintf("hostile-%d-%d", i, j)
				ing := f.Ingress(name, name+".example.com", prefixPath("/", "web"))
				ing.Annotations = map[string]string{s.Key(): v}
				real := j == i*7%len(specs)
				err := create(ing, !real)
				ing.Namespace = f.Namespace
				_, terr := nginx.TranslateIngressWith(ing, lookups, nginx.DefaultTranslateOptions())
				switch {
				case terr != nil && (err == nil || !strings.Contains(err.Error(), "denied the request")):
					t.Errorf("%s=%.60q: translation refuses it (%v), the webhook admitted it (%v)", s.Name, v, terr, err)
				case terr == nil && err != nil:
					t.Errorf("%s=%.60q: translation accepts it, Create failed: %v", s.Name, v, err)
				case err != nil:
					denied++
				case real:
					admitted++
				}
			}
		}
		if denied == 0 {
			t.Fatal("nothing was refused")
		}
		t.Logf("%d Ingresses refused, %d hostile ones admitted and created", denied, admitted)
		// What got in is served from nginx.conf built of validated values: the configuration NGINX runs
		// carries none of the corpus's payloads, and no reload failed.
		r.WaitMetric("ingress_reactor_ingresses_accepted", nil, fmt.Sprintf("at least %d", admitted+2), func(v float64) bool { return v >= float64(admitted+2) })
		r.WaitMetric("ingress_reactor_last_reload_success", nil, "1", func(v float64) bool { return v == 1 })
		conf, err := os.ReadFile(filepath.Join(r.NginxDir, "nginx.conf"))
		if err != nil {
			t.Fatal(err)
		}
		for _, marker := range []string{"listen 81", "pwned", "evil", "load_module /tmp", "Set-Cookie: x=1"} {
			if strings.Contains(string(conf), marker) {
				t.Errorf("nginx.conf contains %q", marker)
			}
		}
		if m, err := r.Metrics(); err == nil {
			if v, _ := m.Value("ingress_reactor_reloads_total", map[string]string{"result": "failure"}); v != 0 {
				t.Errorf("%v reloads failed", v)
			}
		}
	})
	t.Run("with the webhook down, failurePolicy Ignore does not block", func(t *testing.T) {
		if code := r.Stop(t); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		if err := create(f.Ingress("blocked", "blocked.example.com", prefixPath("/", "web")), true); err == nil {
			t.Fatal("with failurePolicy Fail and the webhook down, Create succeeded")
		}
		cur, err := vwcs.Get(f.Ctx, vwc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		if _, err := vwcs.Update(f.Ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, harness.DefaultTimeout, "Create to pass the webhook that is down", func() (bool, string) {
			err := create(f.Ingress("ignored", "ignored.example.com", prefixPath("/", "web")), true)
			return err == nil, fmt.Sprint(err)
		})
		if err := create(bad("unchecked"), false); err != nil {
			t.Fatalf("Create with the webhook down and failurePolicy Ignore: %v", err)
		}
	})
}

// e2eHostileValues are values of nginx/ann_injection_test.go's corpus that try to leave their place in
// nginx.conf or the route push.
var e2eHostileValues = []string{
	`true; } server { listen 81; return 200; } #`, "false\n}\nhttp {", "10.0.0.0/8 } location / { return 200; }",
	"https://a.example/\r\nSet-Cookie: x=1", "http://auth.example.com/#;\n}}\nserver { listen 80; location / { return 200 pwned; } }\n#",
	"http://auth.example.com/auth;\nload_module /tmp/evil.so;#", "CN=abc$\" ) { return 200; } } load_module /tmp/evil.so; server { #",
	"8m; }", "$ingress_reactor_token", "X-Canary\r\nX-Evil: 1",
}
