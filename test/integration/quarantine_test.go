//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestQuarantineOfARefusedRoute: when NGINX refuses a route that validation let through (here a custom
// --template lowers the router's path length limit, standing in for a bug or an NGINX limit), the
// Ingress that wrote it is quarantined with a Warning Event and the metric, its host's other routes go
// live without it, every other Ingress keeps updating, and the Ingress returns once it changes.
func TestQuarantineOfARefusedRoute(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	api := f.StartBackend("api", false)
	f.CreateService("web", 80, web.Port)
	f.CreateService("api", 80, api.Port)
	f.ServeBackends("web", web)
	f.ServeBackends("api", api)

	const limit = `require("ingress_reactor.configuration").limits.path_length = 32`
	text := strings.Replace(nginx.DefaultTemplateText(), `require("ingress_reactor.configuration")`, limit, 1)
	if !strings.Contains(text, limit) {
		t.Fatal("the default template no longer loads configuration.lua in init_by_lua; adjust the test")
	}
	path := filepath.Join(t.TempDir(), "nginx.tmpl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	f.CreateIngress(f.Ingress("good", "q.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r := f.StartReactor("--template=" + path)
	r.WaitReady()
	r.WaitServedBy("q.example", "/", "web")

	// Another Ingress adds a path to the same host that NGINX will not take.
	long := "/" + strings.Repeat("a", 40)
	f.CreateIngress(f.Ingress("bad", "q.example", harness.IngressBackend{Path: long, Service: "api", Port: 80}))
	f.WaitEvent(r, "Ingress", "bad", corev1.EventTypeWarning, "Quarantined", "NGINX refused its route", "longer than 32 bytes")
	r.WaitMetric("ingress_reactor_ingresses_quarantined", nil, "1", func(v float64) bool { return v == 1 })
	// The host's entry goes live without the quarantined route: a change of the good Ingress is served.
	f.UpdateIngress("good", func(ing *networkingv1.Ingress) {
		ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, f.Ingress("x", "q.example",
			harness.IngressBackend{Path: "/v2", Service: "api", Port: 80}).Spec.Rules[0].HTTP.Paths...)
	})
	r.WaitServedBy("q.example", "/v2", "api")
	r.WaitServedBy("q.example", long, "web") // the good Ingress's "/" answers the quarantined path
	// Other Ingresses keep updating.
	f.CreateIngress(f.Ingress("later", "later.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r.WaitServedBy("later.example", "/", "web")

	// Fixed, the Ingress leaves the quarantine.
	f.UpdateIngress("bad", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Path = "/short" })
	r.WaitServedBy("q.example", "/short", "api")
	r.WaitMetric("ingress_reactor_ingresses_quarantined", nil, "0", func(v float64) bool { return v == 0 })
}

// TestQuarantineOfAProfileNginxRefuses: when "nginx -t" fails in the location of a profile (here a custom
// --template miswrites the error_page line of code 418, standing in for a bug), the Ingresses that use the
// profile are quarantined with a Warning Event, the configuration is rendered without it and goes live,
// and another Ingress's new profile is served meanwhile; once the Ingress changes, it returns.
func TestQuarantineOfAProfileNginxRefuses(t *testing.T) {
	f := harness.New(t)
	errorPageServices(f)

	// The profiles' directives (error_page lines among them) are written one per line by the template.
	const line = "{{- range .Directives}}\n\t\t\t{{.}};"
	text := strings.Replace(nginx.DefaultTemplateText(), line,
		"{{- range .Directives}}\n\t\t\t{{.}}{{if eq . \"error_page 418 = @ingress_reactor_error_418\"}} bogus{{end}};", 1)
	if text == nginx.DefaultTemplateText() {
		t.Fatal("the default template no longer writes the profiles' error_page lines this way; adjust the test")
	}
	path := filepath.Join(t.TempDir(), "nginx.tmpl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	f.CreateIngress(f.Ingress("plain", "plain.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r := f.StartReactor("--template=" + path)
	r.WaitReady()
	r.WaitServedBy("plain.example", "/", "web")

	errorsIngress := func(name, host, codes string) *networkingv1.Ingress {
		return annotate(f.Ingress(name, host, harness.IngressBackend{Path: "/", Service: "broken", Port: 80}),
			"custom-http-errors", codes, "default-backend", "fallback")
	}
	f.CreateIngress(errorsIngress("teapot", "teapot.example", "418,502"))
	f.WaitEvent(r, "Ingress", "teapot", corev1.EventTypeWarning, "Quarantined", "NGINX refused the configuration that its profile settings")
	r.WaitMetric("ingress_reactor_ingresses_quarantined", nil, "1", func(v float64) bool { return v == 1 })

	// The configuration without the refused profile goes live: another Ingress's profile is served.
	f.CreateIngress(errorsIngress("errors", "errors.example", "502"))
	resp := r.WaitServedBy("errors.example", "/", "fallback")
	if got := resp.Echo.Headers["X-Code"]; len(got) != 1 || got[0] != "502" {
		t.Errorf("the default backend got X-Code %q, want 502", got)
	}
	r.WaitServedBy("plain.example", "/", "web")

	// Changed to a list NGINX takes, the Ingress leaves the quarantine.
	f.UpdateIngress("teapot", func(ing *networkingv1.Ingress) {
		ing.Annotations["nginx.ingress.kubernetes.io/custom-http-errors"] = "502"
	})
	r.WaitServedBy("teapot.example", "/", "fallback")
	r.WaitMetric("ingress_reactor_ingresses_quarantined", nil, "0", func(v float64) bool { return v == 0 })
}
