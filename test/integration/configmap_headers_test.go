//go:build integration

package integration

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestConfigMapHeaders runs the binary with --configmap whose add-headers and proxy-set-headers name
// ConfigMaps of its namespace: clients get the response header, the backend the request header, and a
// change of a referenced ConfigMap applies without restarting the controller.
func TestConfigMapHeaders(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	create := func(name string, data map[string]string) *corev1.ConfigMap {
		t.Helper()
		cm, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Create(f.Ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace}, Data: data}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	added := create("added", map[string]string{"X-Frame-Options": "DENY"})
	create("proxied", map[string]string{"X-Tenant": "blue"})
	create("ingress-nginx-controller", map[string]string{"add-headers": f.Namespace + "/added", "proxy-set-headers": f.Namespace + "/proxied"})
	r := f.StartReactor("--configmap=" + f.Namespace + "/ingress-nginx-controller")
	r.WaitReady()
	f.CreateIngress(f.Ingress("shop", "hdrs.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r.WaitServedBy("hdrs.example", "/", "web")

	resp, err := r.Get("hdrs.example", "/")
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("add-headers: X-Frame-Options %q, want DENY", got)
	}
	if resp.Echo == nil || http.Header(resp.Echo.Headers).Get("X-Tenant") != "blue" {
		t.Errorf("proxy-set-headers: the backend saw %v, want X-Tenant: blue", resp)
	}

	added.Data = map[string]string{"X-Frame-Options": "SAMEORIGIN"}
	if _, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Update(f.Ctx, added, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.Eventually(harness.DefaultTimeout, "the referenced ConfigMap's change applied", func() (bool, string) {
		resp, err := r.Get("hdrs.example", "/")
		if err != nil {
			return false, err.Error()
		}
		return resp.Header.Get("X-Frame-Options") == "SAMEORIGIN", "X-Frame-Options " + resp.Header.Get("X-Frame-Options")
	})
}
