//go:build integration

package integration

import (
	"net"
	"net/http"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestConfigMapGlobalAuth runs the ConfigMap's global-auth-* keys through the real API server, the binary
// and NGINX, with an auth service on a 192.0.2.x address run by the test. An invalid global-auth-url at
// start leaves the Ingresses that would use it unserved (Warning Event) while enable-global-auth "false"
// is served; once fixed, an Ingress without annotations goes through the auth service (its headers reach
// the backend, its 401 reaches the client), a path of no-auth-locations and enable-global-auth "false"
// do not; removing global-auth-url applies without a restart.
func TestConfigMapGlobalAuth(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	l, err := net.Listen("tcp", net.JoinHostPort(web.IP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("X-Original-Url"))
		mu.Unlock()
		if r.Header.Get("X-Verdict") != "allow" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Auth-Request-User", "alice")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	authURL := "http://" + l.Addr().String() + "/check"
	askedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(asked)
	}

	api := f.Client.CoreV1().ConfigMaps(f.Namespace)
	cm, err := api.Create(f.Ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-nginx-controller", Namespace: f.Namespace},
		Data: map[string]string{"global-auth-url": authURL + ";\nreturn 200", "global-auth-response-headers": "X-Auth-Request-User",
			"no-auth-locations": "/public"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.CreateIngress(f.Ingress("guarded", "guarded.example",
		harness.IngressBackend{Path: "/", Service: "web", Port: 80}, harness.IngressBackend{Path: "/public", Service: "web", Port: 80}))
	f.CreateIngress(annotate(f.Ingress("optout", "optout.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}),
		"enable-global-auth", "false"))
	r := f.StartReactor("--configmap=" + f.Namespace + "/" + cm.Name)
	r.WaitReady()

	// An invalid global-auth-url with no good value to keep: the Ingress that would use it is not served.
	r.WaitServedBy("optout.example", "/", "web")
	f.WaitEvent(r, "Ingress", "guarded", corev1.EventTypeWarning, reasonRejected, "global-auth-url (global external auth) has an invalid value")
	f.WaitEvent(r, "ConfigMap", cm.Name, corev1.EventTypeWarning, "InvalidSetting", "global-auth-url")
	if resp, err := r.Get("guarded.example", "/"); err != nil || resp.Status != http.StatusNotFound {
		t.Errorf("guarded.example with an invalid global-auth-url: %v %v, want 404 (not served)", resp, err)
	}

	// Fixed: the global auth decides for the Ingress without annotations.
	cm.Data["global-auth-url"] = authURL
	if cm, err = api.Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deny := http.Header{"X-Verdict": {"deny"}}
	waitFor(r, harness.Request{Host: "guarded.example", Path: "/page", Header: deny}, "401 from the global auth service", func(resp *harness.Response) bool {
		return resp.Status == http.StatusUnauthorized && resp.Echo == nil
	})
	resp, err := r.Do(harness.Request{Host: "guarded.example", Path: "/page", Header: http.Header{"X-Verdict": {"allow"}, "X-Auth-Request-User": {"mallory"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || resp.Echo == nil {
		t.Fatalf("guarded.example allowed: %s, want the backend", resp)
	}
	if got := resp.Echo.Headers["X-Auth-Request-User"]; len(got) != 1 || got[0] != "alice" {
		t.Errorf("the backend got X-Auth-Request-User %q, want the global auth service's", got)
	}
	before := askedCount()
	for _, req := range []harness.Request{
		{Host: "guarded.example", Path: "/public/doc", Header: deny},
		{Host: "optout.example", Path: "/", Header: deny},
	} {
		resp, err := r.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusOK || resp.Echo == nil {
			t.Errorf("%s%s: %s, want the backend without auth", req.Host, req.Path, resp)
		}
	}
	if n := askedCount() - before; n != 0 {
		t.Errorf("the auth service was asked %d times for no-auth-locations and enable-global-auth \"false\", want never", n)
	}

	// Without global-auth-url, without a restart: no auth.
	delete(cm.Data, "global-auth-url")
	if _, err := api.Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(r, harness.Request{Host: "guarded.example", Path: "/page", Header: deny}, "the backend without the global auth", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil
	})
}
