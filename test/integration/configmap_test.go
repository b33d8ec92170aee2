//go:build integration

package integration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestConfigMapSettings runs the binary with --configmap through the real API server: the ConfigMap's
// settings reach NGINX at start, an invalid value and an unknown key get a Warning Event on the ConfigMap
// while the rest applies, and a change applies without restarting the controller.
func TestConfigMapSettings(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx-controller", Namespace: f.Namespace},
		Data:       map[string]string{"hsts-max-age": "600", "server-tokens": "true", "keep-alive": "forever", "use-gzipp": "true"},
	}
	cm, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Create(f.Ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := f.StartReactor("--configmap=" + f.Namespace + "/ingress-nginx-controller")
	r.WaitReady()
	f.CreateIngress(f.Ingress("shop", "cm.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r.WaitServedBy("cm.example", "/", "web")

	resp, err := r.GetHTTPS("cm.example", "/")
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=600; includeSubDomains" {
		t.Errorf("Strict-Transport-Security %q, want the ConfigMap's max-age", got)
	}
	if got := resp.Header.Get("Server"); !strings.HasPrefix(got, "nginx/") {
		t.Errorf("server-tokens true: Server %q", got)
	}
	f.WaitEvent(r, "ConfigMap", cm.Name, corev1.EventTypeWarning, "InvalidSetting", "keep-alive", "use-gzipp: unknown key")
	r.WaitMetric("ingress_reactor_configmap_problems", nil, "== 2", func(v float64) bool { return v == 2 })

	// A change applies without a restart; the invalid value that was never good keeps its default.
	cm.Data = map[string]string{"hsts": "false", "keep-alive": "forever"}
	if _, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.Eventually(harness.DefaultTimeout, "the ConfigMap's change applied", func() (bool, string) {
		resp, err := r.GetHTTPS("cm.example", "/")
		if err != nil {
			return false, err.Error()
		}
		return resp.Header.Get("Strict-Transport-Security") == "" && resp.Header.Get("Server") == "nginx",
			"Strict-Transport-Security " + resp.Header.Get("Strict-Transport-Security") + ", Server " + resp.Header.Get("Server")
	})
	r.WaitMetric("ingress_reactor_configmap_problems", nil, "== 1", func(v float64) bool { return v == 1 })
	if resp, err := r.Get("cm.example", "/"); err != nil || resp.Echo == nil || resp.Echo.Name != "web" {
		t.Errorf("after the change: %v, %v", resp, err)
	}
}
