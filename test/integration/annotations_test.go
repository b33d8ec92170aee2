//go:build integration

package integration

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

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
