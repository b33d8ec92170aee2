//go:build integration

package integration

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestBalancingConfigMapAndCanaryAffinity runs the balancing ConfigMap keys and affinity-canary-behavior
// through the API server, the binary and NGINX: the ConfigMap's upstream-hash-by keeps a user on one
// endpoint of an Ingress without balancing annotations; a client that the canary of an Ingress with
// affinity served once keeps going to the canary by its cookie (sticky, the default); switching the
// ConfigMap to round robin spreads the user again. None of it reloads NGINX.
func TestBalancingConfigMapAndCanaryAffinity(t *testing.T) {
	f := harness.New(t)
	a, b, c := f.StartBackend("a", false), f.StartBackend("b", false), f.StartBackend("c", false)
	f.CreateService("web", 80, a.Port)
	f.ServeBackends("web", a, b, c)
	routingService(f, "web-v2", f.StartBackend("v2", false))
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx-controller", Namespace: f.Namespace},
		Data:       map[string]string{"upstream-hash-by": "$arg_user"},
	}
	cm, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Create(f.Ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.CreateIngress(f.Ingress("hashed", "hashed.example", prefixPath("/", "web")))
	f.CreateIngress(annotate(f.Ingress("shop", "shop.example", prefixPath("/", "web")), "affinity", "cookie"))
	f.CreateIngress(annotate(f.Ingress("shop-canary", "shop.example", prefixPath("/", "web-v2")), "canary", "true", "canary-by-header", "X-Canary"))
	r := f.StartReactor("--configmap=" + f.Namespace + "/ingress-nginx-controller")
	r.WaitReady()
	toCanary := harness.Request{Host: "shop.example", Path: "/", Header: http.Header{"X-Canary": {"always"}}}
	var cookie string
	waitFor(r, toCanary, "the canary with an affinity cookie", func(resp *harness.Response) bool {
		set := resp.Header.Get("Set-Cookie")
		if resp.Status != http.StatusOK || resp.Echo == nil || resp.Echo.Name != "v2" || !strings.HasPrefix(set, "INGRESSCOOKIE=") {
			return false
		}
		cookie = strings.SplitN(set, ";", 2)[0]
		return true
	})
	reloads := r.WaitConfigSettled()
	withCookie := harness.Request{Host: "shop.example", Path: "/", Header: http.Header{"Cookie": {cookie}}}
	for i := range 10 {
		if resp := send(t, r, withCookie); resp.Echo == nil || resp.Echo.Name != "v2" {
			t.Fatalf("request %d with the canary's cookie %s, without the header: %s, want the canary", i, cookie, resp)
		}
	}
	if resp := send(t, r, harness.Request{Host: "shop.example", Path: "/"}); resp.Echo == nil || resp.Echo.Name == "v2" {
		t.Errorf("without a cookie or the header: %s, want the main backend", resp)
	}

	user := harness.Request{Host: "hashed.example", Path: "/?user=u7"}
	want := send(t, r, user)
	for range 10 {
		if got := send(t, r, user); got.Echo == nil || want.Echo == nil || got.Echo.Name != want.Echo.Name {
			t.Fatalf("ConfigMap upstream-hash-by $arg_user: %s, then %s", want, got)
		}
	}

	cm.Data = map[string]string{"load-balance": "round_robin"}
	if _, err := f.Client.CoreV1().ConfigMaps(f.Namespace).Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.Eventually(harness.DefaultTimeout, "one user spread over the endpoints once the ConfigMap has no upstream-hash-by", func() (bool, string) {
		seen := map[string]bool{}
		for range 6 {
			resp, err := r.Do(user)
			if err != nil {
				return false, err.Error()
			}
			if resp.Echo != nil {
				seen[resp.Echo.Name] = true
			}
		}
		return len(seen) == 3, strconv.Itoa(len(seen)) + " endpoints"
	})
	if after := r.WaitConfigSettled(); after != reloads {
		t.Errorf("%s went from %g to %g: balancing settings are route data and must not reload NGINX", harness.ReloadsMetric, reloads, after)
	}
}
