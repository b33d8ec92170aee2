package nginx

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestRoutingSettings: service-upstream, proxy-redirect-from/-to and no-tls-redirect-locations -> their
// typed values, an invalid value keeping the default (no last good value) with a problem.
func TestRoutingSettings(t *testing.T) {
	def := RoutingSettings{NoTLSRedirectLocations: "/.well-known/acme-challenge"}
	tests := map[string]struct {
		data        map[string]string
		want        RoutingSettings
		wantProblem string
	}{
		"defaults":         {want: def},
		"service-upstream": {data: map[string]string{"service-upstream": "true"}, want: RoutingSettings{ServiceUpstream: true, NoTLSRedirectLocations: def.NoTLSRedirectLocations}},
		"service-upstream invalid": {data: map[string]string{"service-upstream": "yes"}, want: def,
			wantProblem: `service-upstream: invalid value "yes": want true or false`},
		"redirect pair": {data: map[string]string{"proxy-redirect-from": " http://backend.local/app/ ", "proxy-redirect-to": "/"},
			want: RoutingSettings{ProxyRedirectFrom: "http://backend.local/app/", ProxyRedirectTo: "/", NoTLSRedirectLocations: def.NoTLSRedirectLocations}},
		"redirect from default is off": {data: map[string]string{"proxy-redirect-from": "default", "proxy-redirect-to": "/"},
			want: RoutingSettings{ProxyRedirectTo: "/", NoTLSRedirectLocations: def.NoTLSRedirectLocations}},
		"redirect regex": {data: map[string]string{"proxy-redirect-from": "~^http://(.*)$"}, want: def,
			wantProblem: `proxy-redirect-from: invalid value "~^http://(.*)$": want off, or a URL or path without regular expressions and variables`},
		"redirect variable": {data: map[string]string{"proxy-redirect-to": "$scheme://$host/"}, want: def,
			wantProblem: `proxy-redirect-to: invalid value "$scheme://$host/"`},
		"no-tls-redirect-locations list": {data: map[string]string{"no-tls-redirect-locations": " /.well-known/acme-challenge, /healthz,,/healthz "},
			want: RoutingSettings{NoTLSRedirectLocations: "/.well-known/acme-challenge,/healthz"}},
		"no-tls-redirect-locations empty": {data: map[string]string{"no-tls-redirect-locations": ""}, want: RoutingSettings{}},
		"no-tls-redirect-locations not a path": {data: map[string]string{"no-tls-redirect-locations": "/a, healthz"}, want: def,
			wantProblem: `no-tls-redirect-locations: invalid value "/a, healthz": "healthz" is not a path prefix`},
		"relative-redirects": {data: map[string]string{"relative-redirects": "true"},
			want: RoutingSettings{RelativeRedirects: true, NoTLSRedirectLocations: def.NoTLSRedirectLocations}},
		"grpc-buffer-size-kb": {data: map[string]string{"grpc-buffer-size-kb": "16"},
			want: RoutingSettings{GRPCBufferSizeKB: 16, NoTLSRedirectLocations: def.NoTLSRedirectLocations}},
		"grpc-buffer-size-kb with a unit": {data: map[string]string{"grpc-buffer-size-kb": "16k"}, want: def,
			wantProblem: `grpc-buffer-size-kb: invalid value "16k": want a whole number from 0 to 1024`},
		"no-tls-redirect-locations quote": {data: map[string]string{"no-tls-redirect-locations": `/a"b`}, want: def,
			wantProblem: `no-tls-redirect-locations: invalid value "/a\"b"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, _, problems := ParseSettings(tc.data, nil)
			if s.Routing != tc.want {
				t.Errorf("routing %+v, want %+v", s.Routing, tc.want)
			}
			checkProblem(t, problems, tc.wantProblem)
		})
	}
}

// checkProblem fails t unless problems is the one problem starting with want, or none when want is "".
func checkProblem(t *testing.T, problems []SettingProblem, want string) {
	t.Helper()
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	if want == "" && len(got) > 0 || want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], want)) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

// TestServiceUpstreamSetting: the ConfigMap's service-upstream names the Service-IP upstream for an
// Ingress without the annotation; the annotation wins either way.
func TestServiceUpstreamSetting(t *testing.T) {
	pods, clusterIP := up("default", "web", 80), NewServiceIPUpstream(nn("default", "web"), up("default", "web", 80).Port)
	tests := map[string]struct {
		setting bool
		kv      []string
		want    Upstream
	}{
		"off, no annotation":        {want: pods},
		"on, no annotation":         {setting: true, want: clusterIP},
		"on, annotation false":      {setting: true, kv: []string{AnnotationServiceUpstream, "false"}, want: pods},
		"off, annotation true":      {kv: []string{AnnotationServiceUpstream, "true"}, want: clusterIP},
		"on, annotation \" TRUE \"": {setting: true, kv: []string{AnnotationServiceUpstream, " TRUE "}, want: clusterIP},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, _, problems := ParseSettings(map[string]string{"service-upstream": fmt.Sprint(tc.setting)}, nil)
			if len(problems) > 0 {
				t.Fatal(problems)
			}
			ing := ingress("default", "web", annotate(tc.kv...), rule("web.example", prefix("/", "web", 80)))
			tr, err := TranslateIngress(ing, servicesOf(service("default", "web", port(80, "http"))), s.TranslateOptions(DefaultTranslateOptions()))
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Upstreams) != 1 || tr.Upstreams[0] != tc.want {
				t.Errorf("upstreams %v, want %v", tr.Upstreams, tc.want)
			}
		})
	}
}

// TestProxyRedirectDefaults: an Ingress without the annotations leaves the ConfigMap's pair to the http
// block; one with either annotation gets the pair with the ConfigMap's value for the other, or off.
func TestProxyRedirectDefaults(t *testing.T) {
	p := IngressNginxPrefix
	pair := TranslateOptions{ProxyRedirectFrom: "http://backend.local/", ProxyRedirectTo: "https://www.example/"}
	tests := map[string]struct {
		opts        TranslateOptions
		kv          []string
		want        string
		wantWarning string
	}{
		"no annotation: the http block's pair":  {opts: pair},
		"from only: the ConfigMap's to":         {opts: pair, kv: []string{AnnotationProxyRedirectFrom, "/app/"}, want: `"/app/" "https://www.example/"`},
		"to only: the ConfigMap's from":         {opts: pair, kv: []string{AnnotationProxyRedirectTo, "/"}, want: `"http://backend.local/" "/"`},
		"from off turns the http block's off":   {opts: pair, kv: []string{AnnotationProxyRedirectFrom, "off"}, want: "off"},
		"both annotations":                      {opts: pair, kv: []string{AnnotationProxyRedirectFrom, "/a/", AnnotationProxyRedirectTo, "/b/"}, want: `"/a/" "/b/"`},
		"ConfigMap from only, annotation to":    {opts: TranslateOptions{ProxyRedirectFrom: "/old/"}, kv: []string{AnnotationProxyRedirectTo, "/new/"}, want: `"/old/" "/new/"`},
		"ConfigMap to only, annotation from":    {opts: TranslateOptions{ProxyRedirectTo: "/new/"}, kv: []string{AnnotationProxyRedirectFrom, "/old/"}, want: `"/old/" "/new/"`},
		"ConfigMap off, annotation from only":   {kv: []string{AnnotationProxyRedirectFrom, "/old/"}, wantWarning: "metadata.annotations[" + p + "proxy-redirect-from]: has an effect only with " + p + "proxy-redirect-to; ignored"},
		"invalid annotation with the ConfigMap": {opts: pair, kv: []string{AnnotationProxyRedirectTo, "$host"}, want: "off", wantWarning: "metadata.annotations[" + p + `proxy-redirect-to]: "$host" is not off, default, or a URL or path without regexes and variables; ignored`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := DefaultTranslateOptions()
			opts.ProxyRedirectFrom, opts.ProxyRedirectTo = tc.opts.ProxyRedirectFrom, tc.opts.ProxyRedirectTo
			got, errs := translateAnnotated(t, opts, tc.kv...)
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			if valueOf(got.Profile).ProxyRedirect != tc.want {
				t.Errorf("proxy_redirect %q, want %q", valueOf(got.Profile).ProxyRedirect, tc.want)
			}
			if tc.wantWarning == "" && len(got.Warnings) > 0 || tc.wantWarning != "" && !slices.Contains(got.Warnings, tc.wantWarning) {
				t.Errorf("warnings %q, want %q", got.Warnings, tc.wantWarning)
			}
		})
	}
}

// TestProxyRedirectSettingsNginx: through real NGINX, the ConfigMap's pair rewrites the Location of an
// Ingress without the annotations; an Ingress with proxy-redirect-from "off" gets it as the backend sent
// it, and one with proxy-redirect-to only gets the ConfigMap's from with its own to, which NGINX makes
// absolute unless relative-redirects is true.
func TestProxyRedirectSettingsNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://backend.local/app/next")
		w.WriteHeader(http.StatusFound)
	})
	client := proxyClient(cfg.HTTPPort, nil)
	for _, relative := range []bool{false, true} {
		s, _, problems := ParseSettings(map[string]string{"proxy-redirect-from": "http://backend.local/app/", "proxy-redirect-to": "https://www.example/",
			"relative-redirects": fmt.Sprint(relative)}, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg.Settings = s
		m := buildModelWith(t, s.TranslateOptions(DefaultTranslateOptions()), servicesOf(service("default", "app", port(80, "http"))),
			ingress("default", "plain", rule("plain.example", prefix("/", "app", 80))),
			ingress("default", "off", annotate(AnnotationProxyRedirectFrom, "off"), rule("off.example", prefix("/", "app", 80))),
			ingress("default", "to", annotate(AnnotationProxyRedirectTo, "/v2/"), rule("to.example", prefix("/", "app", 80))),
		)
		applyModel(t, rt, m, cfg)
		if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
			t.Fatal(err)
		}
		// NGINX writes a replacement without host as an absolute URL (absolute_redirect, its default).
		toWant := fmt.Sprintf("http://to.example:%d/v2/next", cfg.HTTPPort)
		if relative {
			toWant = "/v2/next"
		}
		for host, want := range map[string]string{
			"plain.example": "https://www.example/next",
			"off.example":   "http://backend.local/app/next",
			"to.example":    toWant,
		} {
			resp, err := client.Get("http://" + host + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || got != want {
				t.Errorf("relative-redirects %v: %s: %d to %q, want 302 to %q", relative, host, resp.StatusCode, got, want)
			}
		}
	}
}

// TestNoTLSRedirectLocationsNginx: through real NGINX, plain HTTP to an ACME challenge path of a host
// with TLS (ssl-redirect) and of an Ingress with force-ssl-redirect is served, while the hosts' other
// paths are redirected; with the key emptied, the challenge path is redirected too; with a path of its
// own listed, that Ingress's path is served.
func TestNoTLSRedirectLocationsNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	backend := echoBackend(t, "web")
	const challenge = "/.well-known/acme-challenge/token-1"
	client := proxyClient(cfg.HTTPPort, nil)
	for _, tc := range []struct {
		value string // "-": the key is not set
		// served are the paths answered over plain HTTP; every other path is redirected to HTTPS.
		served []string
	}{
		{value: "-", served: []string{challenge}},
		{value: "", served: nil},
		{value: "/healthz, /.well-known/acme-challenge", served: []string{challenge, "/healthz"}},
	} {
		data := map[string]string{}
		if tc.value != "-" {
			data["no-tls-redirect-locations"] = tc.value
		}
		s, _, problems := ParseSettings(data, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg.Settings = s
		m := buildModelWith(t, s.TranslateOptions(DefaultTranslateOptions()), servicesOf(service("default", "web", port(80, "http")), service("default", "solver", port(80, "http"))),
			ingress("default", "site", withTLS("site-tls", "tls.example"), rule("tls.example", prefix("/", "web", 80), exact("/healthz", "web", 80))),
			ingress("default", "solver", rule("tls.example", exact(challenge, "solver", 80))),
			ingress("default", "forced", annotate(AnnotationForceSSLRedirect, "true"), rule("forced.example", prefix("/", "web", 80), exact(challenge, "web", 80))),
		)
		applyModel(t, rt, m, cfg)
		if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{
			up("default", "web", 80).Name: {backend}, up("default", "solver", 80).Name: {backend}}); err != nil {
			t.Fatal(err)
		}
		for _, host := range []string{"tls.example", "forced.example"} {
			for _, p := range []string{challenge, "/healthz", "/other"} {
				if host == "forced.example" && p == "/healthz" {
					continue // a Prefix "/" path: not listed
				}
				resp, err := client.Get("http://" + host + p)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				wantServed := slices.Contains(tc.served, p)
				if served := resp.StatusCode == http.StatusOK; served != wantServed || !served && resp.StatusCode != http.StatusPermanentRedirect {
					t.Errorf("no-tls-redirect-locations %q: %s%s: %d to %q, want served %v (else 308)", tc.value, host, p, resp.StatusCode,
						resp.Header.Get("Location"), wantServed)
				}
			}
		}
	}
}
