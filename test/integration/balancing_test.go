//go:build integration

package integration

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestAnnotationsSessionAffinityAndHashing: affinity, upstream-hash-by and their changes through the API
// server, the binary and NGINX. A client keeps its endpoint over 20 requests with the cookie NGINX set
// (persistent mode), and keeps it after the Service gets a fourth endpoint, which new clients reach;
// upstream-hash-by $arg_user sends a user to one endpoint; switching the Ingress from affinity to
// hashing and renaming the cookie are route data and reload nothing.
func TestAnnotationsSessionAffinityAndHashing(t *testing.T) {
	f := harness.New(t)
	a, b, c := f.StartBackend("a", false), f.StartBackend("b", false), f.StartBackend("c", false)
	f.CreateService("web", 80, a.Port)
	f.ServeBackends("web", a, b, c)
	f.CreateIngress(annotate(f.Ingress("sticky", "sticky.example", prefixPath("/", "web")),
		"affinity", "cookie", "affinity-mode", "persistent", "session-cookie-name", "SERVERID"))
	f.CreateIngress(annotate(f.Ingress("hashed", "hashed.example", prefixPath("/", "web")), "upstream-hash-by", "$arg_user"))
	r := f.StartReactor()
	r.WaitReady()
	first := harness.Request{Host: "sticky.example", Path: "/cart"}
	var cookie string
	waitFor(r, first, "200 with an affinity cookie", func(resp *harness.Response) bool {
		set := resp.Header.Get("Set-Cookie")
		if resp.Status != http.StatusOK || !strings.HasPrefix(set, "SERVERID=") {
			return false
		}
		cookie = strings.SplitN(set, ";", 2)[0]
		return true
	})
	reloads := r.WaitConfigSettled()
	withCookie := harness.Request{Host: "sticky.example", Path: "/cart", Header: http.Header{"Cookie": {cookie}}}
	home := send(t, r, withCookie)
	if home.Echo == nil {
		t.Fatalf("with the cookie: %s", home)
	}
	sticks := func(when string) {
		t.Helper()
		for i := range 20 {
			if resp := send(t, r, withCookie); resp.Echo == nil || resp.Echo.Name != home.Echo.Name || resp.Header.Get("Set-Cookie") != "" {
				t.Fatalf("%s: request %d with %s answered %s (Set-Cookie %q), want %s", when, i, cookie, resp, resp.Header.Get("Set-Cookie"), home.Echo.Name)
			}
		}
	}
	sticks("three endpoints")

	d := f.StartBackend("d", false)
	f.ServeBackends("web", a, b, c, d)
	waitFor(r, first, "a new client on the new endpoint d", func(resp *harness.Response) bool {
		return resp.Echo != nil && resp.Echo.Name == "d"
	})
	sticks("after d was added")

	for user := range 10 {
		req := harness.Request{Host: "hashed.example", Path: "/?user=u" + strconv.Itoa(user)}
		want := send(t, r, req)
		for range 5 {
			if got := send(t, r, req); got.Echo == nil || want.Echo == nil || got.Echo.Name != want.Echo.Name {
				t.Fatalf("%s: %s, then %s", req.Path, want, got)
			}
		}
	}

	f.UpdateIngress("sticky", func(ing *networkingv1.Ingress) { annotate(ing, "session-cookie-name", "ROUTE") })
	waitFor(r, first, "the renamed cookie", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && strings.HasPrefix(resp.Header.Get("Set-Cookie"), "ROUTE=")
	})
	f.UpdateIngress("sticky", func(ing *networkingv1.Ingress) {
		delete(ing.Annotations, ingressNginx+"affinity")
		annotate(ing, "upstream-hash-by", "$uri")
	})
	waitFor(r, first, "no cookie once the Ingress hashes", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Header.Get("Set-Cookie") == ""
	})
	if after := r.WaitConfigSettled(); after != reloads {
		t.Errorf("%s went from %g to %g: endpoint and balancing changes must not reload NGINX", harness.ReloadsMetric, reloads, after)
	}
}
