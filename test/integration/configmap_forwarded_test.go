//go:build integration

package integration

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestConfigMapForwardedHeaders runs the binary with --configmap through the real API server: a client's
// X-Forwarded-For and X-Forwarded-Proto reach the backend only with use-forwarded-headers and only from
// proxy-real-ip-cidr; block-cidrs answers 403 for the address taken from a trusted proxy's header; the
// ConfigMap's whitelist-source-range restricts an Ingress without the annotation. Each step is a
// ConfigMap change applied without restarting the controller.
func TestConfigMapForwardedHeaders(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx-controller", Namespace: f.Namespace},
		// The client (127.0.0.1) is in proxy-real-ip-cidr, but use-forwarded-headers is off.
		Data: map[string]string{"proxy-real-ip-cidr": "127.0.0.1/32"},
	}
	cm, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Create(f.Ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := f.StartReactor("--configmap=" + f.Namespace + "/ingress-nginx-controller")
	r.WaitReady()
	f.CreateIngress(f.Ingress("fwd", "fwd.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r.WaitServedBy("fwd.example", "/", "web")

	get := func(forwardedFor string) (*harness.Response, error) {
		h := http.Header{"X-Forwarded-Proto": {"https"}}
		if forwardedFor != "" {
			h.Set("X-Forwarded-For", forwardedFor)
		}
		return r.Do(harness.Request{Host: "fwd.example", Path: "/x?y=1", Header: h})
	}
	header := func(resp *harness.Response, name string) string {
		if resp == nil || resp.Echo == nil || len(resp.Echo.Headers[name]) == 0 {
			return ""
		}
		return strings.Join(resp.Echo.Headers[name], ",")
	}
	// expect waits until a request with X-Forwarded-For: 203.0.113.7 reaches the backend with these headers.
	expect := func(what string, want map[string]string) {
		t.Helper()
		r.Eventually(harness.DefaultTimeout, what, func() (bool, string) {
			resp, err := get("203.0.113.7")
			if err != nil {
				return false, err.Error()
			}
			if resp.Echo == nil {
				return false, resp.String()
			}
			var seen []string
			ok := true
			for h, w := range want {
				got := header(resp, h)
				seen = append(seen, h+"="+got)
				ok = ok && got == w
			}
			return ok, strings.Join(seen, " ")
		})
	}
	update := func(data map[string]string) {
		t.Helper()
		cm.Data = data
		var err error
		if cm, err = f.Client.CoreV1().ConfigMaps(f.Namespace).Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	expect("without use-forwarded-headers: the client's forwarded headers replaced", map[string]string{
		"X-Forwarded-For": "127.0.0.1", "X-Real-Ip": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Original-Uri": ""})

	// use-forwarded-headers, but the client is not in proxy-real-ip-cidr (proxy-add-original-uri-header
	// shows that the change applied).
	update(map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "192.0.2.0/24", "proxy-add-original-uri-header": "true"})
	expect("use-forwarded-headers from outside proxy-real-ip-cidr: still replaced", map[string]string{
		"X-Forwarded-For": "127.0.0.1", "X-Real-Ip": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Original-Uri": "/x?y=1"})

	update(map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "192.0.2.0/24,127.0.0.1", "compute-full-forwarded-for": "true"})
	expect("use-forwarded-headers from a trusted proxy: passed on", map[string]string{
		"X-Forwarded-For": "203.0.113.7, 127.0.0.1", "X-Real-Ip": "203.0.113.7", "X-Forwarded-Proto": "https", "X-Original-Uri": ""})

	update(map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "127.0.0.1", "block-cidrs": "203.0.113.0/24"})
	r.Eventually(harness.DefaultTimeout, "block-cidrs to answer 403 for the forwarded address", func() (bool, string) {
		resp, err := get("203.0.113.7")
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == http.StatusForbidden, resp.String()
	})
	for _, ff := range []string{"", "198.51.100.7"} {
		if resp, err := get(ff); err != nil || resp.Echo == nil || resp.Echo.Name != "web" {
			t.Errorf("X-Forwarded-For %q, not blocked: %v, %v", ff, resp, err)
		}
	}

	// whitelist-source-range: the default allowlist of Ingresses without the annotation.
	update(map[string]string{"whitelist-source-range": "192.0.2.0/24"})
	r.Eventually(harness.DefaultTimeout, "the ConfigMap's whitelist-source-range to answer 403", func() (bool, string) {
		resp, err := get("")
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == http.StatusForbidden, resp.String()
	})
	update(map[string]string{"whitelist-source-range": "192.0.2.0/24, 127.0.0.1"})
	r.WaitServedBy("fwd.example", "/", "web")
}
