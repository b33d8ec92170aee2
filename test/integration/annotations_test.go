//go:build integration

package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/internal/websocket"
	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// reasonWarning is the reason of the Warning Events that say what of a served Ingress is ignored
// (modules/renderer's ReasonWarning).
const reasonWarning = "BackendWarning"

// ingressNginx is the prefix of ingress-nginx's annotations, spelled out as Ingress owners write it.
const ingressNginx = "nginx.ingress.kubernetes.io/"

// annotate sets ingress-nginx annotations on ing, given as name (without the prefix) and value pairs.
func annotate(ing *networkingv1.Ingress, kv ...string) *networkingv1.Ingress {
	if ing.Annotations == nil {
		ing.Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		ing.Annotations[ingressNginx+kv[i]] = kv[i+1]
	}
	return ing
}

// specificPath is an ImplementationSpecific path to service's port 80.
func specificPath(path, service string) harness.IngressBackend {
	return harness.IngressBackend{Path: path, PathType: networkingv1.PathTypeImplementationSpecific, Service: service, Port: 80}
}

// prefixPath is a Prefix path to service's port 80.
func prefixPath(path, service string) harness.IngressBackend {
	return harness.IngressBackend{Path: path, Service: service, Port: 80}
}

// send sends req and fails the test on a transport error.
func send(t *testing.T, r *harness.Reactor, req harness.Request) *harness.Response {
	t.Helper()
	resp, err := r.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// describeRequest names a request in failure messages.
func describeRequest(req harness.Request) string {
	scheme := "http"
	if req.HTTPS {
		scheme = "https"
	}
	return scheme + "://" + req.Host + req.Path
}

// checkRedirect reports an error unless req is answered by NGINX with code and exactly location.
func checkRedirect(t *testing.T, r *harness.Reactor, req harness.Request, code int, location string) {
	t.Helper()
	resp := send(t, r, req)
	if resp.Status != code || resp.Echo != nil || resp.Header.Get("Location") != location {
		t.Errorf("%s answered %s Location %q, want %d to %q", describeRequest(req), resp, resp.Header.Get("Location"), code, location)
	}
}

// checkServed reports an error unless req is answered 200 by backend, and returns what the backend saw
// (nil when it was not that backend).
func checkServed(t *testing.T, r *harness.Reactor, req harness.Request, backend string) *harness.EchoResponse {
	t.Helper()
	resp := send(t, r, req)
	if resp.Status != http.StatusOK || resp.Echo == nil || resp.Echo.Name != backend {
		t.Errorf("%s answered %s, want 200 from backend %q", describeRequest(req), resp, backend)
		return nil
	}
	return resp.Echo
}

// waitFor polls req until check accepts the response; what describes the expectation.
func waitFor(r *harness.Reactor, req harness.Request, what string, check func(*harness.Response) bool) {
	r.Eventually(harness.DefaultTimeout, describeRequest(req)+" to answer "+what, func() (bool, string) {
		resp, err := r.Do(req)
		if err != nil {
			return false, err.Error()
		}
		return check(resp), fmt.Sprintf("%s Location %q", resp, resp.Header.Get("Location"))
	})
}

// TestAnnotationsRoutingRewritesAndRedirects: ingress-nginx's routing annotations, through the API server,
// the binary and NGINX, as docs/annotations.md describes them: regex paths (case-insensitive, longest
// first), rewrite-target with captures (the query kept) and x-forwarded-prefix, upstream-vhost,
// permanent- and temporal-redirect with their codes, app-root, force-ssl-redirect without a tls section,
// ssl-redirect false, preserve-trailing-slash, use-port-in-redirects, from-to-www-redirect, server-alias
// (and an alias that yields to another Ingress's rule, with a Conflict Event), and default-backend. Then
// changes of these annotations on served Ingresses, and the default backend giving way once the
// Service gets endpoints, take effect without reloading NGINX.
//
// NGINX serves HTTPS on 443 here (the test runs in its own network namespace), because redirects to
// HTTPS write the port only when it is not 443 unless use-port-in-redirects says so.
func TestAnnotationsRoutingRewritesAndRedirects(t *testing.T) {
	f := harness.New(t)
	routingService(f, "web", f.StartBackend("web", false))
	routingService(f, "api", f.StartBackend("api", false))
	routingService(f, "sorry", f.StartBackend("sorry", false))
	revived := f.StartBackend("revived", false)
	f.CreateService("empty", 80, revived.Port) // no EndpointSlice yet: no endpoints
	cert := newTestCert(t, "tls.example", "ssl-on.example", "ssl-off.example")
	applyTLSSecret(f, "tls", cert.CertPEM, cert.KeyPEM)

	withTLS := func(ing *networkingv1.Ingress) *networkingv1.Ingress {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{ing.Spec.Rules[0].Host}, SecretName: "tls"}}
		return ing
	}
	// Created before the reactor starts: once it is ready, all of them are served.
	for _, ing := range []*networkingv1.Ingress{
		annotate(f.Ingress("regex", "regex.example", specificPath("/v[0-9]+/items", "api"), prefixPath("/", "web"),
			specificPath("/a.*", "web"), specificPath("/a/b/c.*", "api")),
			"use-regex", "true"),
		annotate(f.Ingress("rewrite", "rewrite.example", specificPath("/something(/|$)(.*)", "web")),
			"rewrite-target", "/$2", "x-forwarded-prefix", "/something"),
		annotate(f.Ingress("vhost", "vhost.example", prefixPath("/", "web")),
			"upstream-vhost", "internal.example"),
		annotate(f.Ingress("perm", "perm.example", prefixPath("/", "web")),
			"permanent-redirect", "https://new.example.org/landing?from=perm"),
		annotate(f.Ingress("perm308", "perm308.example", prefixPath("/old", "web")),
			"permanent-redirect", "http://new.example.org", "permanent-redirect-code", "308"),
		annotate(f.Ingress("literal", "literal.example", prefixPath("/", "web")),
			"permanent-redirect", "https://a.example.org$request_uri"),
		annotate(f.Ingress("temp", "temp.example", prefixPath("/", "web")),
			"temporal-redirect", "https://maint.example.org/"),
		annotate(f.Ingress("temp307", "temp307.example", prefixPath("/", "web")),
			"temporal-redirect", "https://maint.example.org/", "temporal-redirect-code", "307", "permanent-redirect", "https://ignored.example.org/"),
		annotate(f.Ingress("approot", "approot.example", prefixPath("/", "web")),
			"app-root", "/app1"),
		annotate(f.Ingress("force", "force.example", prefixPath("/f", "web")),
			"force-ssl-redirect", "true"),
		annotate(f.Ingress("keep", "keep.example", prefixPath("/", "web")),
			"force-ssl-redirect", "true", "preserve-trailing-slash", "true"),
		annotate(f.Ingress("port", "port.example", prefixPath("/", "web")),
			"force-ssl-redirect", "true", "use-port-in-redirects", "true"),
		withTLS(f.Ingress("ssl-on", "ssl-on.example", prefixPath("/", "web"))),
		annotate(withTLS(f.Ingress("ssl-off", "ssl-off.example", prefixPath("/", "web"))),
			"ssl-redirect", "false"),
		annotate(f.Ingress("apex", "site.example", prefixPath("/", "web")),
			"from-to-www-redirect", "true"),
		annotate(f.Ingress("www", "www.other.example", prefixPath("/", "web")),
			"from-to-www-redirect", "true"),
		annotate(f.Ingress("aliased", "main.example", prefixPath("/", "web"), prefixPath("/x", "api")),
			"server-alias", "alias.example, *.wild.example"),
		f.Ingress("taken", "taken.example", prefixPath("/t", "api")),
		annotate(f.Ingress("aliaser", "aliaser.example", prefixPath("/", "web")),
			"server-alias", "taken.example"),
		annotate(f.Ingress("fallback", "fallback.example", prefixPath("/down", "empty"), prefixPath("/up", "web")),
			"default-backend", "sorry"),
		f.Ingress("plain", "plain.example", prefixPath("/", "web")),
	} {
		f.CreateIngress(ing)
	}

	r := f.StartReactor("--https-port=443")
	r.HTTPSPort = 443
	r.WaitReady()
	r.WaitServedBy("plain.example", "/", "web")
	r.WaitConfigSettled()
	get := func(host, path string) harness.Request { return harness.Request{Host: host, Path: path} }
	getTLS := func(host, path string) harness.Request { return harness.Request{HTTPS: true, Host: host, Path: path} }

	// use-regex: every path of the host is a case-insensitive regex anchored at the start, the longest first.
	checkServed(t, r, get("regex.example", "/V12/items/x"), "api")
	checkServed(t, r, get("regex.example", "/v/items"), "web")
	checkServed(t, r, get("regex.example", "/anything"), "web")
	checkServed(t, r, get("regex.example", "/a/b/c/d"), "api") // the longer regex first, whatever the rule order
	checkServed(t, r, get("regex.example", "/a/b/x"), "web")

	// rewrite-target: the backend sees the captured rest, with the query; x-forwarded-prefix goes along.
	for path, want := range map[string]string{"/something/new?x=1&y": "/new?x=1&y", "/SOMETHING": "/", "/something/a/b": "/a/b"} {
		if echo := checkServed(t, r, get("rewrite.example", path), "web"); echo != nil {
			if echo.URI != want {
				t.Errorf("rewrite.example%s reached the backend as %q, want %q", path, echo.URI, want)
			}
			if got := echo.Headers["X-Forwarded-Prefix"]; len(got) != 1 || got[0] != "/something" {
				t.Errorf("rewrite.example%s reached the backend with X-Forwarded-Prefix %q, want [/something]", path, got)
			}
		}
	}
	// upstream-vhost: the backend sees that Host; X-Forwarded-Host keeps the request's.
	if echo := checkServed(t, r, get("vhost.example", "/p?q=1"), "web"); echo != nil {
		if echo.Host != "internal.example" || echo.URI != "/p?q=1" {
			t.Errorf("vhost.example/p?q=1 reached the backend with Host %q and URI %q, want internal.example and /p?q=1", echo.Host, echo.URI)
		}
		if got := echo.Headers["X-Forwarded-Host"]; len(got) != 1 || got[0] != "vhost.example" {
			t.Errorf("vhost.example reached the backend with X-Forwarded-Host %q, want [vhost.example]", got)
		}
	}

	// permanent-redirect and temporal-redirect: every path of the Ingress, the URL as written.
	checkRedirect(t, r, get("perm.example", "/"), http.StatusMovedPermanently, "https://new.example.org/landing?from=perm")
	checkRedirect(t, r, get("perm.example", "/a/b?c=d"), http.StatusMovedPermanently, "https://new.example.org/landing?from=perm")
	checkRedirect(t, r, get("perm308.example", "/old/x"), http.StatusPermanentRedirect, "http://new.example.org")
	requireNotRouted(t, r, "perm308.example", "/other")
	checkRedirect(t, r, get("literal.example", "/x"), http.StatusMovedPermanently, "https://a.example.org$request_uri")
	checkRedirect(t, r, get("temp.example", "/x?y=1"), http.StatusFound, "https://maint.example.org/")
	checkRedirect(t, r, get("temp307.example", "/"), http.StatusTemporaryRedirect, "https://maint.example.org/")
	f.WaitEvent(r, "Ingress", "literal", corev1.EventTypeWarning, reasonWarning, "NGINX variables are not expanded")
	f.WaitEvent(r, "Ingress", "temp307", corev1.EventTypeWarning, reasonWarning, ingressNginx+"permanent-redirect]: ignored")

	// app-root: "/" only, 302 on the requested host and scheme.
	checkRedirect(t, r, get("approot.example", "/"), http.StatusFound, "http://approot.example/app1")
	checkRedirect(t, r, get("approot.example", "/?q"), http.StatusFound, "http://approot.example/app1")
	checkServed(t, r, get("approot.example", "/app1"), "web")
	checkServed(t, r, get("approot.example", "/other"), "web")

	// force-ssl-redirect without a tls section: 308 to HTTPS (no port: it is 443), one trailing slash
	// dropped unless preserve-trailing-slash; use-port-in-redirects writes :443. HTTPS serves the paths.
	checkRedirect(t, r, get("force.example", "/f/?a=1"), http.StatusPermanentRedirect, "https://force.example/f/?a=1")
	checkRedirect(t, r, get("force.example", "/f/"), http.StatusPermanentRedirect, "https://force.example/f")
	requireNotRouted(t, r, "force.example", "/g")
	checkServed(t, r, getTLS("force.example", "/f"), "web")
	checkRedirect(t, r, get("keep.example", "/a/"), http.StatusPermanentRedirect, "https://keep.example/a/")
	checkRedirect(t, r, get("port.example", "/a"), http.StatusPermanentRedirect, "https://port.example:443/a")

	// ssl-redirect: on by default for a host with TLS, off with "false".
	checkRedirect(t, r, get("ssl-on.example", "/x?q=1"), http.StatusPermanentRedirect, "https://ssl-on.example/x?q=1")
	checkServed(t, r, get("ssl-off.example", "/x"), "web")
	checkServed(t, r, getTLS("ssl-off.example", "/x"), "web")

	// from-to-www-redirect: both ways, to the rule's host, same scheme, path and query.
	checkRedirect(t, r, get("www.site.example", "/a/b?c=d"), http.StatusPermanentRedirect, "http://site.example/a/b?c=d")
	checkRedirect(t, r, get("www.site.example:8080", "/a/"), http.StatusPermanentRedirect, "http://site.example:8080/a")
	checkServed(t, r, get("site.example", "/a"), "web")
	checkRedirect(t, r, get("other.example", "/x"), http.StatusPermanentRedirect, "http://www.other.example/x")
	checkServed(t, r, get("www.other.example", "/x"), "web")

	// server-alias: the aliases serve the Ingress's paths; an alias yields to another Ingress's rule.
	checkServed(t, r, get("alias.example", "/"), "web")
	checkServed(t, r, get("alias.example", "/x/1"), "api")
	checkServed(t, r, get("a.wild.example", "/x"), "api")
	requireNotRouted(t, r, "a.b.wild.example", "/")
	checkServed(t, r, get("taken.example", "/t"), "api")
	requireNotRouted(t, r, "taken.example", "/")
	f.WaitEvent(r, "Ingress", "aliaser", corev1.EventTypeWarning, reasonConflict, "alias host taken.example", f.Namespace+"/taken")

	// default-backend: serves the paths whose Service has no endpoints, and the host's unmatched paths.
	checkServed(t, r, get("fallback.example", "/down"), "sorry")
	checkServed(t, r, get("fallback.example", "/up"), "web")
	checkServed(t, r, get("fallback.example", "/nowhere"), "sorry")

	// Changes of these annotations on served Ingresses are route data: none reloads NGINX.
	reloads := r.WaitConfigSettled()
	f.UpdateIngress("perm", func(ing *networkingv1.Ingress) {
		annotate(ing, "permanent-redirect", "https://moved.example.org/", "permanent-redirect-code", "302")
	})
	waitFor(r, get("perm.example", "/"), "302 to https://moved.example.org/", func(resp *harness.Response) bool {
		return resp.Status == http.StatusFound && resp.Header.Get("Location") == "https://moved.example.org/"
	})
	f.UpdateIngress("rewrite", func(ing *networkingv1.Ingress) { annotate(ing, "rewrite-target", "/v2/$2") })
	waitFor(r, get("rewrite.example", "/something/new?x=1"), "200 from web for /v2/new?x=1", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.URI == "/v2/new?x=1"
	})
	f.UpdateIngress("vhost", func(ing *networkingv1.Ingress) { annotate(ing, "upstream-vhost", "other.internal.example") })
	waitFor(r, get("vhost.example", "/"), "200 with Host other.internal.example at the backend", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Host == "other.internal.example"
	})
	f.UpdateIngress("force", func(ing *networkingv1.Ingress) { delete(ing.Annotations, ingressNginx+"force-ssl-redirect") })
	waitFor(r, get("force.example", "/f"), "200 from web over plain HTTP", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Name == "web"
	})
	f.UpdateIngress("approot", func(ing *networkingv1.Ingress) { annotate(ing, "app-root", "/home") })
	waitFor(r, get("approot.example", "/"), "302 to http://approot.example/home", func(resp *harness.Response) bool {
		return resp.Status == http.StatusFound && resp.Header.Get("Location") == "http://approot.example/home"
	})
	// A new regex path, on a host that had none.
	f.UpdateIngress("plain", func(ing *networkingv1.Ingress) {
		annotate(ing, "use-regex", "true")
		ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths,
			f.Ingress("x", "plain.example", specificPath("/id/[0-9]+$", "api")).Spec.Rules[0].HTTP.Paths...)
	})
	waitFor(r, get("plain.example", "/ID/42"), "200 from api", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Name == "api"
	})
	checkServed(t, r, get("plain.example", "/id/42/more"), "web")
	f.UpdateIngress("aliased", func(ing *networkingv1.Ingress) { annotate(ing, "server-alias", "alias2.example") })
	waitFor(r, get("alias2.example", "/"), "200 from web", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Name == "web"
	})
	r.WaitNotRouted("alias.example", "/")
	// Once the Service has endpoints, its path goes to them instead of the default backend.
	f.ServeBackends("empty", revived)
	r.WaitServedBy("fallback.example", "/down", "revived")
	checkServed(t, r, get("fallback.example", "/nowhere"), "sorry")
	if after := r.WaitConfigSettled(); after != reloads {
		t.Errorf("%s went from %g to %g: changes of routing annotations must not reload NGINX", harness.ReloadsMetric, reloads, after)
	}
}

// TestAnnotationsInvalidValuesRejectTheIngressAlone: an invalid value of a routing annotation rejects its
// Ingress alone, with a Warning Event naming the annotation and the value (a regex path: the construct),
// while an Ingress next to it is served; an unknown nginx.ingress.kubernetes.io/ name gets a Warning
// (naming the annotation it looks like) and the Ingress is served.
func TestAnnotationsInvalidValuesRejectTheIngressAlone(t *testing.T) {
	f := harness.New(t)
	routingService(f, "web", f.StartBackend("web", false))

	rejected := []struct {
		name string
		ing  *networkingv1.Ingress
		want []string // in the Rejected Event's message
	}{
		{"bad-regex", annotate(f.Ingress("bad-regex", "bad-regex.example", specificPath("/(?m)a$", "web")), "use-regex", "true"),
			[]string{"(?m)"}},
		{"bad-use-regex", annotate(f.Ingress("bad-use-regex", "bad-use-regex.example", prefixPath("/", "web")), "use-regex", "yes"),
			[]string{ingressNginx + "use-regex", `"yes"`}},
		{"bad-rewrite", annotate(f.Ingress("bad-rewrite", "bad-rewrite.example", specificPath("/a(.*)", "web")), "rewrite-target", "/$host"),
			[]string{ingressNginx + "rewrite-target", `"/$host"`}},
		{"bad-prefix", annotate(f.Ingress("bad-prefix", "bad-prefix.example", prefixPath("/", "web")), "rewrite-target", "/", "x-forwarded-prefix", "/a b"),
			[]string{ingressNginx + "x-forwarded-prefix", `"/a b"`}},
		{"bad-vhost", annotate(f.Ingress("bad-vhost", "bad-vhost.example", prefixPath("/", "web")), "upstream-vhost", "$host"),
			[]string{ingressNginx + "upstream-vhost", `"$host"`}},
		{"bad-redirect", annotate(f.Ingress("bad-redirect", "bad-redirect.example", prefixPath("/", "web")), "temporal-redirect", "ftp://files.example.org/"),
			[]string{ingressNginx + "temporal-redirect", `"ftp://files.example.org/"`}},
		{"bad-code", annotate(f.Ingress("bad-code", "bad-code.example", prefixPath("/", "web")),
			"permanent-redirect", "https://new.example.org/", "permanent-redirect-code", "304"),
			[]string{ingressNginx + "permanent-redirect-code", `"304"`}},
		{"bad-approot", annotate(f.Ingress("bad-approot", "bad-approot.example", prefixPath("/", "web")), "app-root", "//evil.example/"),
			[]string{ingressNginx + "app-root", `"//evil.example/"`}},
		{"bad-force", annotate(f.Ingress("bad-force", "bad-force.example", prefixPath("/", "web")), "force-ssl-redirect", "yes"),
			[]string{ingressNginx + "force-ssl-redirect", `"yes"`}},
		{"bad-ssl", annotate(f.Ingress("bad-ssl", "bad-ssl.example", prefixPath("/", "web")), "ssl-redirect", "flase"),
			[]string{ingressNginx + "ssl-redirect", `"flase"`}},
		{"bad-alias", annotate(f.Ingress("bad-alias", "bad-alias.example", prefixPath("/", "web")), "server-alias", "ok.example, bad_host!"),
			[]string{ingressNginx + "server-alias", `"bad_host!"`}},
		{"bad-www", annotate(f.Ingress("bad-www", "bad-www.example", prefixPath("/", "web")), "from-to-www-redirect", "sometimes"),
			[]string{ingressNginx + "from-to-www-redirect", `"sometimes"`}},
		{"bad-default", annotate(f.Ingress("bad-default", "bad-default.example", prefixPath("/", "web")), "default-backend", "Not_A_Service"),
			[]string{ingressNginx + "default-backend", `"Not_A_Service"`}},
	}
	for _, tc := range rejected {
		f.CreateIngress(tc.ing)
	}
	f.CreateIngress(annotate(f.Ingress("typo", "typo.example", prefixPath("/", "web")), "rewrite-targt", "/"))
	f.CreateIngress(annotate(f.Ingress("unknown", "unknown.example", prefixPath("/", "web")), "frobnicate", "true"))
	f.CreateIngress(f.Ingress("good", "good.example", prefixPath("/", "web")))

	r := f.StartReactor()
	r.WaitReady()
	r.WaitServedBy("good.example", "/", "web")
	r.WaitServedBy("typo.example", "/", "web")
	r.WaitServedBy("unknown.example", "/", "web")
	for _, tc := range rejected {
		ev := f.WaitEvent(r, "Ingress", tc.name, corev1.EventTypeWarning, reasonRejected, tc.want...)
		t.Logf("%s: %s", tc.name, ev.Message)
	}
	f.WaitEvent(r, "Ingress", "typo", corev1.EventTypeWarning, reasonWarning,
		ingressNginx+"rewrite-targt", "not an ingress-nginx annotation", "did you mean "+ingressNginx+"rewrite-target")
	f.WaitEvent(r, "Ingress", "unknown", corev1.EventTypeWarning, reasonWarning, ingressNginx+"frobnicate", "not an ingress-nginx annotation")
	r.WaitMetric(ingressesRejected, nil, fmt.Sprintf("== %d", len(rejected)), func(v float64) bool { return v == float64(len(rejected)) })
	r.WaitConfigSettled()
	for _, tc := range rejected {
		requireNotRouted(t, r, tc.name+".example", "/")
	}
	if evs, err := f.Events("Ingress", "good", corev1.EventTypeWarning, ""); err != nil {
		t.Fatal(err)
	} else if len(evs) > 0 {
		t.Errorf("the good Ingress got Warning Events: %s: %s", evs[0].Reason, evs[0].Message)
	}
}

// TestAnnotationsCustomHTTPErrorsProfile: custom-http-errors, a profile setting, through the real binary.
// The listed codes of the Ingress's route (here NGINX's 502 for a backend that refuses connections) are
// answered by its default-backend Service with ingress-nginx's headers; the first Ingress with a new list
// of codes reloads NGINX once and is served once that configuration is live; another Ingress with the
// same list does not reload; an Ingress without the annotation keeps NGINX's own answer.
func TestAnnotationsCustomHTTPErrorsProfile(t *testing.T) {
	f := harness.New(t)
	errorPageServices(f)
	f.CreateIngress(f.Ingress("plain", "plain.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r := f.StartReactor()
	r.WaitReady()
	r.WaitServedBy("plain.example", "/", "web")
	reloads := r.WaitConfigSettled()

	f.CreateIngress(annotate(f.Ingress("errors", "errors.example", harness.IngressBackend{Path: "/", Service: "broken", Port: 80}),
		"custom-http-errors", "502", "default-backend", "fallback"))
	resp := r.WaitServedBy("errors.example", "/page?x=1", "fallback")
	for h, want := range map[string]string{"X-Code": "502", "X-Namespace": f.Namespace, "X-Ingress-Name": "errors",
		"X-Service-Name": "broken", "X-Service-Port": "80", "X-Original-Uri": "/page?x=1"} {
		if got := resp.Echo.Headers[h]; len(got) != 1 || got[0] != want {
			t.Errorf("the default backend got %s %q, want %q", h, got, want)
		}
	}
	after := r.WaitConfigSettled()
	if after != reloads+1 {
		t.Errorf("%s went from %g to %g for a new list of codes; want one reload (the profile's named location)", harness.ReloadsMetric, reloads, after)
	}

	// The same list on another Ingress reloads nothing.
	f.CreateIngress(annotate(f.Ingress("errors-too", "errors-too.example", harness.IngressBackend{Path: "/", Service: "broken", Port: 80}),
		"custom-http-errors", "502", "default-backend", "fallback"))
	r.WaitServedBy("errors-too.example", "/", "fallback")
	if got := r.WaitConfigSettled(); got != after {
		t.Errorf("%s went from %g to %g for a list of codes that has its profile already; want no reload", harness.ReloadsMetric, after, got)
	}

	// Without the annotation NGINX answers the 502 itself.
	f.CreateIngress(f.Ingress("no-errors", "no-errors.example", harness.IngressBackend{Path: "/", Service: "broken", Port: 80}))
	r.Eventually(harness.DefaultTimeout, "no-errors.example to answer 502 from NGINX", func() (bool, string) {
		resp, err := r.Get("no-errors.example", "/")
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == 502 && resp.Echo == nil, resp.String()
	})
}

// TestAnnotationsBackendProtocolHTTPS: backend-protocol HTTPS sends the Ingress's requests to its TLS
// backend over TLS (a profile: one reload for the first such Ingress); without it the same backend
// is spoken to in plain HTTP and refuses (Go's TLS server answers 400).
func TestAnnotationsBackendProtocolHTTPS(t *testing.T) {
	f := harness.New(t)
	secure := f.StartBackend("secure", true)
	f.CreateService("secure", 443, secure.Port)
	f.ServeBackends("secure", secure)
	f.CreateIngress(f.Ingress("plain-to-tls", "plain-to-tls.example", harness.IngressBackend{Path: "/", Service: "secure", Port: 443}))
	r := f.StartReactor()
	r.WaitReady()
	r.Eventually(harness.DefaultTimeout, "plain HTTP to a TLS backend to be refused", func() (bool, string) {
		resp, err := r.Get("plain-to-tls.example", "/")
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == 400 && resp.Echo == nil, resp.String()
	})
	reloads := r.WaitConfigSettled()
	f.CreateIngress(annotate(f.Ingress("tls", "tls.example", harness.IngressBackend{Path: "/", Service: "secure", Port: 443}),
		"backend-protocol", "HTTPS"))
	r.WaitServedBy("tls.example", "/", "secure")
	if got := r.WaitConfigSettled(); got != reloads+1 {
		t.Errorf("%s went from %g to %g for the first HTTPS backend; want one reload (its profile)", harness.ReloadsMetric, reloads, got)
	}
}

// errorPageServices creates the Services of the custom error page tests: "fallback" and "web", each with
// its echo backend, and "broken", whose one ready endpoint is a port nothing listens on (NGINX answers
// 502).
func errorPageServices(f *harness.Fixture) {
	fallback := f.StartBackend("fallback", false)
	web := f.StartBackend("web", false)
	f.CreateService("fallback", 80, fallback.Port)
	f.ServeBackends("fallback", fallback)
	f.CreateService("web", 80, web.Port)
	f.ServeBackends("web", web)
	f.CreateService("broken", 80, 1)
	f.ApplyEndpointSlice(f.EndpointSlice("broken-1", "broken", "http", 1, harness.Endpoint{IP: web.IP, Port: 1, Ready: true, Serving: true}))
}

// TestAnnotationsServiceUpstream: with service-upstream an Ingress is served through its Service's
// cluster IP (here an address the test puts on the namespace's loopback, where a backend listens on the
// Service port, standing in for kube-proxy), while another Ingress to the same Service keeps the Pods;
// neither needs a reload.
func TestAnnotationsServiceUpstream(t *testing.T) {
	f := harness.New(t)
	pods := f.StartBackend("pods", false)
	svc := f.CreateService("web", 80, pods.Port)
	f.ServeBackends("web", pods)
	serveClusterIP(t, f, svc, "via-cluster-ip")

	f.CreateIngress(f.Ingress("to-pods", "pods.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r := f.StartReactor()
	r.WaitReady()
	r.WaitServedBy("pods.example", "/", "pods")
	reloads := r.WaitConfigSettled()
	f.CreateIngress(annotate(f.Ingress("to-vip", "vip.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}),
		"service-upstream", "true"))
	r.WaitServedBy("vip.example", "/", "via-cluster-ip")
	r.WaitServedBy("pods.example", "/", "pods")
	if got := r.WaitConfigSettled(); got != reloads {
		t.Errorf("%s went from %g to %g; service-upstream is route data and endpoints, never a reload", harness.ReloadsMetric, reloads, got)
	}
}

// TestAnnotationsCORSAndRateLimits: enable-cors and the rate limits through the API server, the binary
// and NGINX: an allowed origin's preflight is answered 204 by NGINX with the CORS headers, another
// origin's request reaches the backend without them; limit-rpm added to a served Ingress answers 503
// once its burst is spent; a new origin list and the new limit are route data and reload nothing.
func TestAnnotationsCORSAndRateLimits(t *testing.T) {
	f := harness.New(t)
	routingService(f, "web", f.StartBackend("web", false))
	f.CreateIngress(annotate(f.Ingress("cors", "cors.example", prefixPath("/", "web")),
		"enable-cors", "true", "cors-allow-origin", "https://app.example, https://*.apps.example", "cors-allow-credentials", "false"))
	f.CreateIngress(f.Ingress("limited", "limited.example", prefixPath("/", "web")))
	r := f.StartReactor()
	r.WaitReady()
	r.WaitServedBy("limited.example", "/", "web")
	preflight := func(origin string) harness.Request {
		return harness.Request{Method: http.MethodOptions, Host: "cors.example", Path: "/api",
			Header: http.Header{"Origin": {origin}, "Access-Control-Request-Method": {"PUT"}}}
	}
	waitFor(r, preflight("https://app.example"), "204 with the CORS headers", func(resp *harness.Response) bool {
		return resp.Status == http.StatusNoContent
	})
	resp := send(t, r, preflight("https://x.apps.example"))
	for h, want := range map[string]string{"Access-Control-Allow-Origin": "https://x.apps.example", "Access-Control-Allow-Credentials": "",
		"Access-Control-Allow-Methods": "GET, PUT, POST, DELETE, PATCH, OPTIONS", "Access-Control-Max-Age": "1728000"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("preflight of an allowed origin: %s %q, want %q", h, got, want)
		}
	}
	if resp.Status != http.StatusNoContent || resp.Echo != nil {
		t.Errorf("preflight of an allowed origin: %s, want 204 from NGINX", resp)
	}
	resp = send(t, r, preflight("https://evil.example"))
	if resp.Status != http.StatusOK || resp.Echo == nil || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("OPTIONS of another origin: %s with Access-Control-Allow-Origin %q, want the backend's 200 without it", resp, resp.Header.Get("Access-Control-Allow-Origin"))
	}

	reloads := r.WaitConfigSettled()
	f.UpdateIngress("cors", func(ing *networkingv1.Ingress) { annotate(ing, "cors-allow-origin", "https://other.example") })
	waitFor(r, preflight("https://other.example"), "204 for the new origin", func(resp *harness.Response) bool {
		return resp.Status == http.StatusNoContent && resp.Header.Get("Access-Control-Allow-Origin") == "https://other.example"
	})
	if resp := send(t, r, preflight("https://app.example")); resp.Status != http.StatusOK || resp.Echo == nil {
		t.Errorf("OPTIONS of the origin no longer listed: %s, want the backend's 200", resp)
	}
	// One request a minute and a burst of one: once the push is live, the third request within the
	// minute gets 503, and so does the next.
	f.UpdateIngress("limited", func(ing *networkingv1.Ingress) { annotate(ing, "limit-rpm", "1", "limit-burst-multiplier", "1") })
	waitFor(r, harness.Request{Host: "limited.example", Path: "/"}, "503 once the limit is spent", func(resp *harness.Response) bool {
		return resp.Status == http.StatusServiceUnavailable && resp.Echo == nil
	})
	if resp := send(t, r, harness.Request{Host: "limited.example", Path: "/"}); resp.Status != http.StatusServiceUnavailable {
		t.Errorf("a request right after the limit was spent: %s, want 503", resp)
	}
	if after := r.WaitConfigSettled(); after != reloads {
		t.Errorf("%s went from %g to %g: CORS and rate limit changes must not reload NGINX", harness.ReloadsMetric, reloads, after)
	}
}

// TestAnnotationsProxySSLSecret: backend TLS verified against the CA of a proxy-ssl-secret, through the
// API server, the binary and NGINX. The Ingress naming a Secret that does not exist is rejected with a
// Warning Event and not routed; once the Secret is created it is served by its verified HTTPS backend;
// when the Secret's CA changes to one that did not sign the backend's certificate, the Ingress gets
// 502 (verification is never dropped), and a Secret in another namespace is refused.
func TestAnnotationsProxySSLSecret(t *testing.T) {
	f := harness.New(t)
	backendCert := newTestCert(t, "backend.example", "backend.example")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "backend.crt"), filepath.Join(dir, "backend.key")
	if err := os.WriteFile(certFile, backendCert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, backendCert.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	secure := f.StartTLSBackend("secure", certFile, keyFile)
	f.CreateService("secure", 443, secure.Port)
	f.ServeBackends("secure", secure)
	verified := func(name, secret string) *networkingv1.Ingress {
		return annotate(f.Ingress(name, name+".example", harness.IngressBackend{Path: "/", Service: "secure", Port: 443}),
			"backend-protocol", "HTTPS", "proxy-ssl-secret", secret, "proxy-ssl-verify", "on",
			"proxy-ssl-name", "backend.example", "proxy-ssl-server-name", "on")
	}
	f.CreateIngress(verified("verified", f.Namespace+"/backend-ca"))
	f.CreateIngress(verified("elsewhere", "kube-system/backend-ca"))
	r := f.StartReactor()
	r.WaitReady()
	f.WaitEvent(r, "Ingress", "verified", corev1.EventTypeWarning, reasonRejected,
		ingressNginx+"proxy-ssl-secret", "secret "+f.Namespace+"/backend-ca does not exist")
	f.WaitEvent(r, "Ingress", "elsewhere", corev1.EventTypeWarning, reasonRejected,
		ingressNginx+"proxy-ssl-secret", "only Secrets of the Ingress's own namespace")
	r.WaitConfigSettled()
	requireNotRouted(t, r, "verified.example", "/")

	caSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "backend-ca", Namespace: f.Namespace},
		Data:       map[string][]byte{"ca.crt": backendCert.CertPEM},
	}
	f.CreateObjects(1, caSecret)
	r.WaitServedBy("verified.example", "/", "secure")

	// Another CA: the backend's certificate no longer verifies. The new content is a new profile: one
	// reload.
	reloads := r.WaitConfigSettled()
	api := f.Client.CoreV1().Secrets(f.Namespace)
	cur, err := api.Get(f.Ctx, "backend-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Data["ca.crt"] = newTestCert(t, "stranger", "backend.example").CertPEM
	if _, err := api.Update(f.Ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(r, harness.Request{Host: "verified.example", Path: "/"}, "502 (the backend's certificate is not signed by the new CA)",
		func(resp *harness.Response) bool { return resp.Status == http.StatusBadGateway && resp.Echo == nil })
	if got := r.WaitConfigSettled(); got != reloads+1 {
		t.Errorf("%s went from %g to %g for a new content of the Secret; want one reload (its profile)", harness.ReloadsMetric, reloads, got)
	}
}

// TestAnnotationsCustomHeaders: custom-headers through the real binary. An Ingress naming a ConfigMap
// that does not exist is rejected with a Warning Event; once the ConfigMap exists its entries are set on
// the Ingress's responses (the backend's header of the same name replaced); a change of the ConfigMap
// reaches the responses without reloading NGINX; an invalid entry rejects the Ingress, whose last good
// version keeps being served.
func TestAnnotationsCustomHeaders(t *testing.T) {
	f := harness.New(t)
	routingService(f, "web", f.StartBackend("web", false))
	f.CreateIngress(annotate(f.Ingress("headers", "headers.example", prefixPath("/", "web")), "custom-headers", "security-headers"))
	r := f.StartReactor()
	r.WaitReady()
	f.WaitEvent(r, "Ingress", "headers", corev1.EventTypeWarning, reasonRejected,
		ingressNginx+"custom-headers", "configmap "+f.Namespace+"/security-headers does not exist")

	api := f.Client.CoreV1().ConfigMaps(f.Namespace)
	cm, err := api.Create(f.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "security-headers", Namespace: f.Namespace},
		Data: map[string]string{"X-Frame-Options": "DENY", "Content-Security-Policy": "default-src 'self'"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := harness.Request{Host: "headers.example", Path: "/"}
	waitFor(r, req, "200 with the ConfigMap's headers", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Header.Get("X-Frame-Options") == "DENY" &&
			resp.Header.Get("Content-Security-Policy") == "default-src 'self'"
	})
	reloads := r.WaitConfigSettled()

	cm.Data = map[string]string{"X-Frame-Options": "SAMEORIGIN"}
	if cm, err = api.Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(r, req, "200 with the changed header", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Header.Get("X-Frame-Options") == "SAMEORIGIN" && resp.Header.Get("Content-Security-Policy") == ""
	})
	if got := r.WaitConfigSettled(); got != reloads {
		t.Errorf("%s went from %g to %g for a change of the ConfigMap; want no reload (route data)", harness.ReloadsMetric, reloads, got)
	}

	cm.Data = map[string]string{"X-Frame-Options": "DENY\r\nSet-Cookie: admin=1"}
	if _, err = api.Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitEvent(r, "Ingress", "headers", corev1.EventTypeWarning, reasonRejected, "the value of X-Frame-Options is not a header value", "last good version")
	if resp := send(t, r, req); resp.Status != http.StatusOK || resp.Header.Get("X-Frame-Options") != "SAMEORIGIN" || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("after an invalid ConfigMap: %s, X-Frame-Options %q, Set-Cookie %q; want the last good version's headers", resp, resp.Header.Get("X-Frame-Options"), resp.Header.Get("Set-Cookie"))
	}
}

// TestAnnotationsProxyBodySizeAndTimeouts: proxy-body-size through the API server, the binary and NGINX:
// 413 above the limit, served below it, one reload for the first Ingress with the size (its profile)
// and none for a second one; proxy-read-timeout as route data: a backend that never answers gets 504
// at the Ingress's 1 s timeout, and a change of the timeout reloads nothing.
func TestAnnotationsProxyBodySizeAndTimeouts(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	f.CreateService("web", 80, web.Port)
	f.ServeBackends("web", web)
	// A backend that accepts connections and never answers.
	silent, err := net.Listen("tcp", net.JoinHostPort(web.IP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	silentPort := silent.Addr().(*net.TCPAddr).Port
	f.CreateService("silent", 80, silentPort)
	f.ApplyEndpointSlice(f.EndpointSlice("silent-1", "silent", "http", silentPort,
		harness.Endpoint{IP: web.IP, Port: silentPort, Ready: true, Serving: true}))

	f.CreateIngress(f.Ingress("plain", "plain.example", prefixPath("/", "web")))
	r := f.StartReactor()
	r.WaitReady()
	r.WaitServedBy("plain.example", "/", "web")
	reloads := r.WaitConfigSettled()

	post := func(host string, size int) *harness.Response {
		return send(t, r, harness.Request{Method: http.MethodPost, Host: host, Path: "/upload", Body: make([]byte, size)})
	}
	f.CreateIngress(annotate(f.Ingress("upload", "upload.example", prefixPath("/", "web")), "proxy-body-size", "2k"))
	r.WaitServedBy("upload.example", "/", "web")
	r.Eventually(harness.DefaultTimeout, "upload.example to answer 413 above 2k", func() (bool, string) {
		resp := post("upload.example", 2049)
		return resp.Status == http.StatusRequestEntityTooLarge, resp.String()
	})
	if resp := post("upload.example", 2048); resp.Status != http.StatusOK || resp.Echo == nil {
		t.Errorf("2048 bytes to upload.example: %s, want 200 from web", resp)
	}
	if resp := post("plain.example", 4096); resp.Status != http.StatusOK || resp.Echo == nil {
		t.Errorf("4096 bytes to plain.example (the default 1m): %s, want 200 from web", resp)
	}
	after := r.WaitConfigSettled()
	if after != reloads+1 {
		t.Errorf("%s went from %g to %g for a new body size; want one reload (its profile)", harness.ReloadsMetric, reloads, after)
	}
	f.CreateIngress(annotate(f.Ingress("upload-too", "upload-too.example", prefixPath("/", "web")), "proxy-body-size", "2048"))
	r.WaitServedBy("upload-too.example", "/", "web")
	if resp := post("upload-too.example", 2049); resp.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("2049 bytes to upload-too.example: %s, want 413", resp)
	}

	f.CreateIngress(annotate(f.Ingress("slow", "slow.example", prefixPath("/", "silent")), "proxy-read-timeout", "1"))
	r.Eventually(harness.DefaultTimeout, "slow.example to answer 504 at its read timeout", func() (bool, string) {
		resp, err := r.Get("slow.example", "/")
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == http.StatusGatewayTimeout && resp.Echo == nil, resp.String()
	})
	f.UpdateIngress("upload", func(ing *networkingv1.Ingress) {
		annotate(ing, "proxy-read-timeout", "30", "proxy-connect-timeout", "2")
	})
	f.UpdateIngress("slow", func(ing *networkingv1.Ingress) { annotate(ing, "proxy-read-timeout", "2") })
	r.Eventually(harness.DefaultTimeout, "slow.example to answer 504 with its new timeout", func() (bool, string) {
		resp, err := r.Get("slow.example", "/")
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == http.StatusGatewayTimeout, resp.String()
	})
	if got := r.WaitConfigSettled(); got != after {
		t.Errorf("%s went from %g to %g for a known body size and timeouts (route data); want no reload", harness.ReloadsMetric, after, got)
	}
}

// TestAnnotationsWebSocketThroughReload: a WebSocket through the binary and NGINX, with no annotation,
// exchanges messages before and after a reload (a new Ingress with a new profile): the old worker keeps
// serving it, and new WebSockets go to the new configuration.
func TestAnnotationsWebSocketThroughReload(t *testing.T) {
	f := harness.New(t)
	chat := f.StartBackend("chat", false)
	f.CreateService("chat", 80, chat.Port)
	f.ServeBackends("chat", chat)
	f.CreateIngress(f.Ingress("chat", "chat.example", harness.IngressBackend{Path: "/", Service: "chat", Port: 80}))
	r := f.StartReactor()
	r.WaitReady()
	r.WaitServedBy("chat.example", "/", "chat")
	reloads := r.WaitConfigSettled()

	nginxHTTP := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.HTTPPort))
	open := func(host string) *websocket.Client {
		t.Helper()
		c, err := websocket.Dial(nginxHTTP, host, "/socket", harness.DefaultTimeout)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	exchange := func(c *websocket.Client, text string) {
		t.Helper()
		if got, err := c.Exchange(text, harness.DefaultTimeout); err != nil || got != "echo chat "+text {
			t.Fatalf("sent %q, got %q, %v; want the chat backend's echo", text, got, err)
		}
	}
	held := open("chat.example")
	exchange(held, "before the reload")

	f.CreateIngress(annotate(f.Ingress("upload", "upload.example", harness.IngressBackend{Path: "/", Service: "chat", Port: 80}),
		"proxy-body-size", "10m"))
	r.WaitServedBy("upload.example", "/", "chat")
	if got := r.WaitConfigSettled(); got != reloads+1 {
		t.Fatalf("%s went from %g to %g for a new profile; want one reload", harness.ReloadsMetric, reloads, got)
	}
	exchange(held, "after the reload")
	exchange(open("upload.example"), "on a new connection")
	exchange(held, "and again")
}

// TestAnnotationsExternalAuth: auth-url through the binary, with an auth service on a 192.0.2.x address
// run by the test: its 2xx lets the request through with auth-response-headers set, its 401 becomes the
// auth-signin redirect with rd, its 403 reaches the client, and an auth-url with NGINX syntax (an auth
// CVE payload) rejects the Ingress alone. satisfy any lets an allowlisted client in without asking the
// service; auth-proxy-set-headers follows its ConfigMap (missing: rejected; changed: applied).
func TestAnnotationsExternalAuth(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	f.CreateService("web", 80, web.Port)
	f.ServeBackends("web", web)
	l, err := net.Listen("tcp", net.JoinHostPort(web.IP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var authURIs []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		authURIs = append(authURIs, r.Header.Get("X-Original-Url"))
		mu.Unlock()
		switch r.Header.Get("X-Verdict") {
		case "deny":
			w.WriteHeader(http.StatusUnauthorized)
		case "forbid":
			w.WriteHeader(http.StatusForbidden)
		default:
			w.Header().Set("X-Auth-Request-User", "alice")
			w.WriteHeader(http.StatusOK)
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	authURL := "http://" + l.Addr().String() + "/oauth2/auth"

	f.CreateIngress(annotate(f.Ingress("authed", "authed.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}),
		"auth-url", authURL, "auth-signin", "https://login.example/start", "auth-response-headers", "X-Auth-Request-User"))
	f.CreateIngress(annotate(f.Ingress("hostile", "hostile.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}),
		"auth-url", "http://"+web.IP+"/#;\n}}\nserver { listen 80; location / { return 200 pwned; } }\n#"))
	r := f.StartReactor()
	r.WaitReady()

	resp := r.WaitServedBy("authed.example", "/page", "web")
	if got := resp.Echo.Headers["X-Auth-Request-User"]; len(got) != 1 || got[0] != "alice" {
		t.Errorf("the backend got X-Auth-Request-User %q, want the auth service's", got)
	}
	for verdict, want := range map[string]int{"deny": http.StatusFound, "forbid": http.StatusForbidden} {
		resp, err := r.Do(harness.Request{Host: "authed.example", Path: "/page?a=1", Header: http.Header{"X-Verdict": {verdict}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != want || resp.Echo != nil {
			t.Errorf("auth %s: %s, want %d and not the backend", verdict, resp, want)
		}
		if verdict == "deny" {
			if loc := resp.Header.Get("Location"); loc != "https://login.example/start?rd=http://authed.example%2Fpage%3Fa%3D1" {
				t.Errorf("signin redirect to %q", loc)
			}
		}
	}
	mu.Lock()
	seen := len(authURIs)
	mu.Unlock()
	if seen == 0 {
		t.Error("the auth service saw no request")
	}
	if resp, err := r.Get("hostile.example", "/"); err != nil || resp.Status != http.StatusNotFound {
		t.Errorf("an Ingress with an auth-url injection payload: %v %v, want 404 (not served)", resp, err)
	}

	// satisfy any: the client's address (127.0.0.1) is on the allowlist, so the auth service is not asked
	// and its "deny" does not apply.
	f.CreateIngress(annotate(f.Ingress("office", "office.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}),
		"auth-url", authURL, "allowlist-source-range", "127.0.0.1", "satisfy", "any"))
	deny := http.Header{"X-Verdict": {"deny"}}
	waitFor(r, harness.Request{Host: "office.example", Path: "/", Header: deny}, "200 without asking the auth service", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil
	})

	// auth-proxy-set-headers: a missing ConfigMap rejects the Ingress; once it exists, its X-Verdict
	// replaces the client's on the auth request, and a change of it is applied.
	f.CreateIngress(annotate(f.Ingress("tenant", "tenant.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}),
		"auth-url", authURL, "auth-proxy-set-headers", "auth-headers"))
	f.WaitEvent(r, "Ingress", "tenant", corev1.EventTypeWarning, reasonRejected,
		ingressNginx+"auth-proxy-set-headers", "configmap "+f.Namespace+"/auth-headers does not exist")
	api := f.Client.CoreV1().ConfigMaps(f.Namespace)
	cm, err := api.Create(f.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "auth-headers", Namespace: f.Namespace},
		Data: map[string]string{"X-Verdict": "forbid"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allow := harness.Request{Host: "tenant.example", Path: "/", Header: http.Header{"X-Verdict": {"allow"}}}
	waitFor(r, allow, "403: the ConfigMap's X-Verdict replaces the client's", func(resp *harness.Response) bool {
		return resp.Status == http.StatusForbidden && resp.Echo == nil
	})
	cm.Data = map[string]string{"X-Verdict": "allow"}
	if _, err := api.Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(r, harness.Request{Host: "tenant.example", Path: "/", Header: deny}, "200 after the ConfigMap's change", func(resp *harness.Response) bool {
		return resp.Status == http.StatusOK && resp.Echo != nil
	})
}

// TestAnnotationsBasicAuth: auth-type basic through the API server, the binary and NGINX. An Ingress
// whose Secret does not exist is rejected with a Warning Event and not served; once the Secret exists,
// a request without credentials gets 401 with the realm, a wrong password 401 and the right one reaches
// the backend; an update of the Secret that changes the password makes the old one stop working, without
// reloading NGINX; digest is refused; an auth-map Secret admits its users (bcrypt).
func TestAnnotationsBasicAuth(t *testing.T) {
	f := harness.New(t)
	routingService(f, "web", f.StartBackend("web", false))
	f.CreateIngress(annotate(f.Ingress("locked", "locked.example", prefixPath("/", "web")),
		"auth-type", "basic", "auth-secret", "users", "auth-realm", "Staff only"))
	f.CreateIngress(annotate(f.Ingress("digest", "digest.example", prefixPath("/", "web")),
		"auth-type", "digest", "auth-secret", "users"))
	r := f.StartReactor()
	r.WaitReady()
	f.WaitEvent(r, "Ingress", "locked", corev1.EventTypeWarning, reasonRejected,
		ingressNginx+"auth-secret", "secret "+f.Namespace+"/users does not exist")
	f.WaitEvent(r, "Ingress", "digest", corev1.EventTypeWarning, reasonRejected,
		ingressNginx+"auth-type", "no digest authentication module")
	r.WaitConfigSettled()
	requireNotRouted(t, r, "locked.example", "/")
	requireNotRouted(t, r, "digest.example", "/")

	// "alice:s3cret" ($apr1$, htpasswd's default; openssl passwd -apr1 -salt saltsalt s3cret) and
	// "bob:hunter2" ({SHA}).
	const aliceOld = "alice:$apr1$saltsalt$64vPg1.FPS6FtcYJ7Ti1V.\n"
	api := f.Client.CoreV1().Secrets(f.Namespace)
	sec, err := api.Create(f.Ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "users", Namespace: f.Namespace},
		Data: map[string][]byte{"auth": []byte(aliceOld + "bob:{SHA}87u9ZqY9S/F0eUBXjsPQEDUw4h0=\n")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	basic := func(user, password string) http.Header {
		h := http.Header{}
		if user != "" {
			req, _ := http.NewRequest("GET", "http://x/", nil)
			req.SetBasicAuth(user, password)
			h.Set("Authorization", req.Header.Get("Authorization"))
		}
		return h
	}
	req := func(user, password string) harness.Request {
		return harness.Request{Host: "locked.example", Path: "/", Header: basic(user, password)}
	}
	waitFor(r, req("", ""), "401 with the realm", func(resp *harness.Response) bool {
		return resp.Status == http.StatusUnauthorized && resp.Echo == nil && resp.Header.Get("WWW-Authenticate") == `Basic realm="Staff only"`
	})
	if resp := send(t, r, req("alice", "wrong")); resp.Status != http.StatusUnauthorized || resp.Echo != nil {
		t.Errorf("a wrong password: %s, want 401", resp)
	}
	checkServed(t, r, req("alice", "s3cret"), "web")
	checkServed(t, r, req("bob", "hunter2"), "web")
	reloads := r.WaitConfigSettled()

	// alice's password changes ("n3w-pass", {PLAIN}): the old one stops working, without a reload.
	sec.Data["auth"] = []byte("alice:{PLAIN}n3w-pass\nbob:{SHA}87u9ZqY9S/F0eUBXjsPQEDUw4h0=\n")
	if _, err := api.Update(f.Ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(r, req("alice", "s3cret"), "401 for the old password", func(resp *harness.Response) bool {
		return resp.Status == http.StatusUnauthorized && resp.Echo == nil
	})
	checkServed(t, r, req("alice", "n3w-pass"), "web")
	if got := r.WaitConfigSettled(); got != reloads {
		t.Errorf("%s went from %g to %g for a change of the Secret; want no reload (route data)", harness.ReloadsMetric, reloads, got)
	}

	// auth-map: each key a user, its value a hash (bcrypt, checked through libcrypt); the controller's
	// cache keeps those values, and a key that holds no hash is not a user.
	if _, err := api.Create(f.Ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "map", Namespace: f.Namespace},
		Data: map[string][]byte{"carol": []byte("$2y$05$abcdefghijklmnopqrstuuLK7U1u6pVRmL7L1BBM2aS35PSZnDXlK\n"), "token": []byte("s3cret")}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.CreateIngress(annotate(f.Ingress("mapped", "mapped.example", prefixPath("/", "web")),
		"auth-type", "basic", "auth-secret", "map", "auth-secret-type", "auth-map"))
	mapped := func(user, password string) harness.Request {
		return harness.Request{Host: "mapped.example", Path: "/", Header: basic(user, password)}
	}
	waitFor(r, mapped("carol", "s3cret"), "200 for carol", func(resp *harness.Response) bool { return resp.Status == http.StatusOK && resp.Echo != nil })
	for _, c := range [][2]string{{"carol", "wrong"}, {"token", "s3cret"}, {"", ""}} {
		if resp := send(t, r, mapped(c[0], c[1])); resp.Status != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm=""` {
			t.Errorf("auth-map, user %q: %s WWW-Authenticate %q, want 401 with the empty realm", c[0], resp, resp.Header.Get("WWW-Authenticate"))
		}
	}
}
