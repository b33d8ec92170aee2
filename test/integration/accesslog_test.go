//go:build integration

package integration

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestAccessLogConfigMap runs the binary through the real API server: access log lines reach the pod's
// output in ingress-nginx's default format without any setting, never with the request's Authorization
// or Cookie header, and a ConfigMap change of log-format-upstream to JSON applies without a restart.
func TestAccessLogConfigMap(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx-controller", Namespace: f.Namespace},
		Data:       map[string]string{},
	}
	cm, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Create(f.Ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := f.StartReactor("--configmap=" + f.Namespace + "/ingress-nginx-controller")
	r.WaitReady()
	f.CreateIngress(f.Ingress("shop", "log.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r.WaitServedBy("log.example", "/", "web")
	pid := r.Pid()

	get := func(path string) {
		t.Helper()
		h := http.Header{}
		h.Set("Authorization", "Bearer secret-token-1")
		h.Set("Cookie", "session=secret-cookie-2")
		h.Set("User-Agent", "e2e-agent")
		h.Set("X-Request-ID", "e2e-req-1")
		resp, err := r.Do(harness.Request{Host: "log.example", Path: path, Header: h})
		if err != nil || resp.Status != http.StatusOK {
			t.Fatalf("GET %s: %v, %v", path, resp, err)
		}
	}
	get("/default-format?x=1")
	line := r.WaitLog("GET /default-format?x=1 HTTP/1.1")
	defaultFormat := regexp.MustCompile(`^127\.0\.0\.1 - - \[[^]]+\] "GET /default-format\?x=1 HTTP/1\.1" 200 \d+ "-" "e2e-agent" \d+ [\d.]+ ` +
		`\[[^] ]+\] \[\] [\d.]+:\d+ \d+ [\d.]+ 200 e2e-req-1$`)
	if !defaultFormat.MatchString(line) {
		t.Errorf("access log line %q is not in ingress-nginx's default format", line)
	}

	cm.Data = map[string]string{"log-format-escape-json": "true",
		"log-format-upstream": `{"uri": "$request_uri", "status": $status, "agent": "$http_user_agent"}`}
	if _, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Requests until one is logged in JSON: the change is then live.
	r.Eventually(harness.DefaultTimeout, "an access log line in JSON", func() (bool, string) {
		get("/json-format")
		return strings.Contains(r.Output(), `{"uri": "/json-format", `), "no JSON line yet"
	})
	line = r.WaitLog(`{"uri": "/json-format", `)
	var entry map[string]any
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		t.Fatalf("line %q is not JSON: %v", line, err)
	}
	if entry["status"] != float64(200) || entry["agent"] != "e2e-agent" {
		t.Errorf("JSON entry %v", entry)
	}
	if r.Pid() != pid {
		t.Errorf("the controller restarted: pid %d, then %d", pid, r.Pid())
	}
	for _, secret := range []string{"secret-token-1", "secret-cookie-2"} {
		if strings.Contains(r.Output(), secret) {
			t.Errorf("the controller's output carries %q", secret)
		}
	}
}
