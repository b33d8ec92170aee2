package nginx

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestRuntimeSourceRanges runs the source address annotations through a real NGINX. The test client
// connects from 127.0.0.1, which is what NGINX's access rules see ($remote_addr).
func TestRuntimeSourceRanges(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)

	// Every Ingress routes "/" and the Exact "/dir/", whose extra "location = /dir" takes the rules of
	// the covering Prefix "/" (of the same Ingress here).
	ing := func(name, host string, annotations ...string) *networkingv1.Ingress {
		return ingress("default", name, rule(host, prefix("/", "web", 80), exact("/dir/", "web", 80)), annotate(annotations...))
	}
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "http")),
		service("default", "idle", port(80, "http")),
		ing("open", "open.example"),
		ing("loopback", "loopback.example", AnnotationAllowlistSourceRange, "127.0.0.1/32"),
		ing("ten", "ten.example", AnnotationAllowlistSourceRange, "10.0.0.0/8"),
		ing("denied", "denied.example", AnnotationDenylistSourceRange, "127.0.0.1"),
		ing("deny-first", "deny-first.example", AnnotationAllowlistSourceRange, "127.0.0.1", AnnotationDenylistSourceRange, "127.0.0.0/8"),
		// cert-manager's HTTP-01 solver puts this on its challenge Ingress.
		ingress("default", "cm-acme-http-solver", annotate(AnnotationWhitelistSourceRange, "0.0.0.0/0,::/0"),
			rule("acme.example", path(networkingv1.PathTypeImplementationSpecific, "/.well-known/acme-challenge/token", "web", 80))),
		// Two Ingresses on one host: each location keeps its own Ingress's rules.
		ing("shared-open", "shared.example"),
		ingress("default", "shared-admin", annotate(AnnotationAllowlistSourceRange, "10.0.0.0/8"),
			rule("shared.example", prefix("/admin", "web", 80))),
		// A refused client learns nothing about the backends: 403, not the 503 of an upstream without endpoints.
		ingress("default", "idle", annotate(AnnotationAllowlistSourceRange, "10.0.0.0/8"), rule("idle.example", prefix("/", "idle", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{
		up("default", "web", 80).Name: {echoBackend(t, "web")},
	}); err != nil {
		t.Fatal(err)
	}

	c := proxyClient(cfg.HTTPPort, nil)
	tests := map[string]struct {
		host, path string
		want       int
	}{
		"no annotation":                                   {"open.example", "/", 200},
		"allowlist with the client's address":             {"loopback.example", "/", 200},
		"allowlist with the client's address, /dir":       {"loopback.example", "/dir", 200},
		"allowlist without the client's address":          {"ten.example", "/", 403},
		"allowlist without it: Exact /dir/":               {"ten.example", "/dir/", 403},
		"allowlist without it: /dir takes Prefix's rules": {"ten.example", "/dir", 403},
		"denylist with the client's address":              {"denied.example", "/x", 403},
		"deny is checked before allow":                    {"deny-first.example", "/", 403},
		"cert-manager's challenge Ingress":                {"acme.example", "/.well-known/acme-challenge/token", 200},
		"shared host: the open Ingress's path":            {"shared.example", "/", 200},
		"shared host: the restricted Ingress's path":      {"shared.example", "/admin/x", 403},
		"refused before the upstream is looked at":        {"idle.example", "/", 403},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := fetch(t, c, fmt.Sprintf("http://%s:%d%s", tc.host, cfg.HTTPPort, tc.path))
			if r.status != tc.want {
				t.Errorf("GET %s%s: %d, want %d", tc.host, tc.path, r.status, tc.want)
			}
			if tc.want == http.StatusOK && r.echo.Backend != "web" {
				t.Errorf("GET %s%s: answered by %q, want the backend", tc.host, tc.path, r.echo.Backend)
			}
		})
	}
}
