package nginx

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// ingressNginxSettingKeys are the 192 keys of ingress-nginx's ConfigMap reference (the table of
// docs/user-guide/nginx-configuration/configmap.md of its last release), plus upstream-hash-by and
// proxy-redirect-to, which its configuration reads though the table lacks them.
var ingressNginxSettingKeys = strings.Fields(`proxy-redirect-to add-headers allow-backend-server-header allow-cross-namespace-resources
allow-snippet-annotations annotations-risk-level annotation-value-word-blocklist hide-headers access-log-params access-log-path
http-access-log-path stream-access-log-path enable-access-log-for-default-backend error-log-path enable-modsecurity
modsecurity-snippet enable-owasp-modsecurity-crs client-header-buffer-size client-header-timeout client-body-buffer-size
client-body-timeout disable-access-log disable-ipv6 disable-ipv6-dns enable-underscores-in-headers enable-ocsp
ignore-invalid-headers retry-non-idempotent error-log-level http2-max-field-size http2-max-header-size http2-max-requests
http2-max-concurrent-streams hsts hsts-include-subdomains hsts-max-age hsts-preload keep-alive keep-alive-requests
large-client-header-buffers log-format-escape-none log-format-escape-json log-format-upstream log-format-stream
enable-multi-accept max-worker-connections max-worker-open-files map-hash-bucket-size nginx-status-ipv4-whitelist
nginx-status-ipv6-whitelist proxy-real-ip-cidr proxy-set-headers server-name-hash-max-size server-name-hash-bucket-size
proxy-headers-hash-max-size proxy-headers-hash-bucket-size reuse-port server-tokens ssl-ciphers ssl-ecdh-curve ssl-dh-param
ssl-protocols ssl-session-cache ssl-session-cache-size ssl-session-tickets ssl-session-ticket-key ssl-session-timeout
ssl-buffer-size use-proxy-protocol proxy-protocol-header-timeout enable-aio-write use-gzip use-geoip use-geoip2
geoip2-autoreload-in-minutes enable-brotli brotli-level brotli-min-length brotli-types use-http2 gzip-disable gzip-level
gzip-min-length gzip-types worker-processes worker-cpu-affinity worker-shutdown-timeout enable-serial-reloads load-balance
variables-hash-bucket-size variables-hash-max-size upstream-keepalive-connections upstream-keepalive-time
upstream-keepalive-timeout upstream-keepalive-requests limit-conn-zone-variable proxy-stream-timeout
proxy-stream-next-upstream proxy-stream-next-upstream-timeout proxy-stream-next-upstream-tries proxy-stream-responses
bind-address use-forwarded-headers enable-real-ip forwarded-for-header forwarded-for-proxy-protocol-header
compute-full-forwarded-for proxy-add-original-uri-header generate-request-id jaeger-collector-host jaeger-collector-port
jaeger-endpoint jaeger-service-name jaeger-propagation-format jaeger-sampler-type jaeger-sampler-param jaeger-sampler-host
jaeger-sampler-port jaeger-trace-context-header-name jaeger-debug-header jaeger-baggage-header
jaeger-trace-baggage-header-prefix enable-opentelemetry opentelemetry-trust-incoming-span opentelemetry-operation-name
opentelemetry-config otlp-collector-host otlp-collector-port otel-max-queuesize otel-schedule-delay-millis
otel-max-export-batch-size otel-service-name otel-sampler otel-sampler-parent-based otel-sampler-ratio main-snippet
http-snippet server-snippet stream-snippet location-snippet custom-http-errors proxy-body-size proxy-connect-timeout
proxy-read-timeout proxy-send-timeout proxy-buffers-number proxy-buffer-size proxy-busy-buffers-size proxy-cookie-path
proxy-cookie-domain proxy-next-upstream proxy-next-upstream-timeout proxy-next-upstream-tries proxy-redirect-from
proxy-request-buffering ssl-redirect force-ssl-redirect denylist-source-range whitelist-source-range skip-access-log-urls
limit-rate limit-rate-after lua-shared-dicts http-redirect-code proxy-buffering limit-req-status-code limit-conn-status-code
enable-syslog syslog-host syslog-port no-tls-redirect-locations global-allowed-response-headers global-auth-url
global-auth-method global-auth-signin global-auth-signin-redirect-param global-auth-response-headers
global-auth-request-redirect global-auth-snippet global-auth-cache-key global-auth-cache-duration no-auth-locations
block-cidrs block-user-agents block-referers proxy-ssl-location-only default-type service-upstream ssl-reject-handshake
debug-connections strict-validate-path-type grpc-buffer-size-kb relative-redirects upstream-hash-by`)

// TestEveryIngressNginxSettingKeyIsKnown: each key is supported or listed with its reason, never an
// "unknown key", and nothing is listed that ingress-nginx does not have.
func TestEveryIngressNginxSettingKeyIsKnown(t *testing.T) {
	if len(ingressNginxSettingKeys) != 194 {
		t.Fatalf("the list has %d keys, want 194", len(ingressNginxSettingKeys))
	}
	theirs := map[string]bool{}
	for _, k := range ingressNginxSettingKeys {
		theirs[k] = true
		_, supported := settingKeys[k]
		_, listed := unsupportedSettings[k]
		if supported == listed {
			t.Errorf("%s: supported %v, listed as unsupported %v; want exactly one", k, supported, listed)
		}
	}
	for k := range settingKeys {
		if !theirs[k] {
			t.Errorf("supported key %s is not an ingress-nginx key", k)
		}
	}
	for k := range unsupportedSettings {
		if !theirs[k] {
			t.Errorf("unsupported key %s is not an ingress-nginx key", k)
		}
	}
}

// nonDefaultSettings sets every supported key to a valid value other than its default.
var nonDefaultSettings = map[string]string{
	"worker-processes": "2", "max-worker-connections": "2048", "worker-shutdown-timeout": "30s", "error-log-level": "warn",
	"lua-shared-dicts": "configuration_data: 20, certificate_data: 30M, balancer_ewma: 10",
	"server-tokens":    "true", "keep-alive": "30", "keep-alive-requests": "50", "client-header-buffer-size": "2k",
	"client-header-timeout": "30s", "client-body-buffer-size": "16k", "client-body-timeout": "2m", "large-client-header-buffers": "8 16k",
	"enable-underscores-in-headers": "true", "ignore-invalid-headers": "false", "default-type": "application/octet-stream",
	"variables-hash-bucket-size": "128", "variables-hash-max-size": "4096", "map-hash-bucket-size": "128",
	"use-gzip": "true", "gzip-level": "5", "gzip-min-length": "10", "gzip-types": "application/json text/plain", "gzip-disable": "msie6",
	"hsts": "false", "hsts-max-age": "600", "hsts-include-subdomains": "false", "hsts-preload": "true",
	"ssl-protocols": "TLSv1.3", "ssl-ciphers": "ECDHE-RSA-AES128-GCM-SHA256:!aNULL", "ssl-ecdh-curve": "X25519:prime256v1",
	"ssl-session-cache": "false", "ssl-session-cache-size": "20m", "ssl-session-timeout": "1h", "ssl-session-tickets": "true",
	"ssl-buffer-size": "16k", "use-http2": "false", "http2-max-concurrent-streams": "64", "ssl-redirect": "false", "force-ssl-redirect": "true",
	"upstream-keepalive-connections": "64", "upstream-keepalive-time": "30m", "upstream-keepalive-timeout": "30", "upstream-keepalive-requests": "100",
	"proxy-connect-timeout": "3", "proxy-read-timeout": "120", "proxy-send-timeout": "90s", "proxy-body-size": "0",
	"proxy-buffering": "on", "proxy-request-buffering": "off", "proxy-buffer-size": "8k", "proxy-buffers-number": "8",
	"proxy-busy-buffers-size": "16k", "retry-non-idempotent": "true", "allow-snippet-annotations": "true", "annotations-risk-level": "Critical",
	"load-balance": "ewma", "upstream-hash-by": "$remote_addr",
	"proxy-cookie-domain": "backend.internal example.com", "proxy-cookie-path": "/app/ /",
	"global-auth-url": "http://auth.example:8080/check", "global-auth-method": "GET", "global-auth-signin": "https://$host/oauth2/start",
	"global-auth-signin-redirect-param": "next", "global-auth-response-headers": "X-User, X-Email", "global-auth-request-redirect": "/signed-in",
	"global-auth-cache-key": "$http_authorization", "global-auth-cache-duration": "200 1m", "no-auth-locations": "/healthz, /.well-known",
	// The access log keys: TestLogSettingsPassNginx renders them with the access log on.
	"log-format-upstream": `{"addr": "$remote_addr"}`, "log-format-escape-json": "true", "log-format-escape-none": "true",
	"access-log-path": "/dev/stderr", "http-access-log-path": "/dev/stderr", "error-log-path": "/dev/stderr", "disable-access-log": "true",
	"skip-access-log-urls": "/healthz", "enable-access-log-for-default-backend": "true", "access-log-params": "buffer=16k flush=5s",
	"hide-headers": "X-Powered-By, X-AspNet-Version", "allow-backend-server-header": "true",
	"global-allowed-response-headers": "X-Frame-Options, Content-Security-Policy",
	"limit-req-status-code":           "429", "limit-conn-status-code": "508", "http-redirect-code": "301",
	"proxy-next-upstream": "error http_502 http_503", "proxy-next-upstream-timeout": "30", "proxy-next-upstream-tries": "5",
	"custom-http-errors": "404, 503", "limit-rate": "100", "limit-rate-after": "1m",
	"use-forwarded-headers": "true", "use-proxy-protocol": "true", "enable-real-ip": "true", "forwarded-for-header": "X-Client-IP", "compute-full-forwarded-for": "true",
	"proxy-real-ip-cidr": "10.0.0.0/8, 2001:db8::/32", "generate-request-id": "false", "proxy-add-original-uri-header": "true",
	"block-cidrs": "192.0.2.0/24, 2001:db8:1::1", "block-user-agents": "Mozilla/5.0 (compatible; Bot), ~*bad[a-z]+bot, default",
	"block-referers": `~^https?://spam\., hostnames`, "whitelist-source-range": "10.0.0.0/8", "denylist-source-range": "10.1.0.0/16",
	// ConfigMaps of headers: testHeaderRefs.
	"add-headers": "ingress/add", "proxy-set-headers": "ingress/proxy",
	// Listeners and routing defaults (settings_listen.go, settings_routing.go).
	"reuse-port": "false", "disable-ipv6": "true", "bind-address": "127.0.0.1, ::1", "service-upstream": "true",
	"proxy-redirect-from": "http://backend.internal/", "proxy-redirect-to": "https://example.com/", "no-tls-redirect-locations": "/acme/, /healthz",
	// The Secret of DH parameters: TestSettingsNonDefaultsPassNginx serves it.
	"ssl-dh-param": "ingress/dh", "relative-redirects": "true", "grpc-buffer-size-kb": "16",
	"ssl-reject-handshake": "true",
	"enable-ocsp":          "true",
}

// TestSettingsNonDefaultsPassNginx renders every supported key at a value other than its default and has
// a real NGINX accept the configuration without a warning.
func TestSettingsNonDefaultsPassNginx(t *testing.T) {
	requireNginx(t)
	for k := range settingKeys {
		if _, ok := nonDefaultSettings[k]; !ok {
			t.Errorf("nonDefaultSettings lacks %s", k)
		}
	}
	refs := maps.Clone(testHeaderRefs)
	refs[SecretRefPrefix+"ingress/dh"] = map[string]string{DHParamKey: testDHParam}
	s, _, problems := ParseSettingsRefs(nonDefaultSettings, nil, refLookup(refs))
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.Settings = s
	if err := WriteDHParamFile(cfg.Paths, s); err != nil {
		t.Fatal(err)
	}
	conf := nginxTest(t, Model{}, cfg)
	for _, want := range []string{
		"worker_processes 2;", "worker_connections 2048;", "worker_shutdown_timeout 30s;", "error_log \"stderr\" warn;",
		"lua_shared_dict ingress_reactor_endpoints 20m;", "lua_shared_dict ingress_reactor_certificates 30m;",
		"server_tokens on;", "keepalive_timeout 30000ms;", "keepalive_requests 50;", "large_client_header_buffers 8 16384;",
		"default_type \"application/octet-stream\";", "gzip on;", "gzip_comp_level 5;", "gzip_types \"application/json\" \"text/plain\";",
		"gzip_disable \"msie6\";", "set_hsts(nil)", "ssl_protocols TLSv1.3;", "ssl_ecdh_curve \"X25519:prime256v1\";", "ssl_session_cache off;",
		"ssl_session_timeout 3600s;", "ssl_session_tickets on;", "http2_max_concurrent_streams 64;", "keepalive 64;", "keepalive_time 1800000ms;",
		"proxy_connect_timeout 3000ms;", "proxy_read_timeout 120000ms;", "proxy_send_timeout 90000ms;", "client_max_body_size 0;",
		"set_body_limit(0)", `proxy_cookie_domain "backend.internal" "example.com";`, `proxy_cookie_path "/app/" "/";`, "proxy_buffering on;", "proxy_request_buffering off;", "proxy_buffers 8 8192;", "proxy_busy_buffers_size 16384;",
		"proxy_next_upstream error http_502 http_503 non_idempotent;", "proxy_next_upstream_timeout 30000ms;", "set_default_tries(5)", "access_log off;", "set_log_default_backend(true)",
		"proxy_pass_header Server;", "set_status(429, 508)", "set_redirect_code(301)", "proxy_hide_header \"X-Powered-By\";", "proxy_hide_header \"X-AspNet-Version\";",
		"real_ip_header proxy_protocol;", " proxy_protocol default_server;", "set_real_ip_from 2001:db8::/32;", "10.0.0.0/8 1;", "$ingress_reactor_full_forwarded_for;",
		"proxy_set_header X-Original-URI $request_uri;", "deny 192.0.2.0/24;", "deny 2001:db8:1::1;",
		`proxy_set_header "X-Tenant" "blue";`, `set_add_headers({{ "X-Added", "a \"quoted\" \\ value; { }" }, { "X-Frame-Options", "DENY" }, })`,
		`"\\Mozilla/5.0 (compatible; Bot)" 1;`, `"\\default" 1;`, `"\\hostnames" 1;`,
		`proxy_redirect "http://backend.internal/" "https://example.com/";`, `set_no_tls_redirect_locations({"/acme/", "/healthz", })`,
		fmt.Sprintf(`listen "127.0.0.1:%d" proxy_protocol default_server;`, cfg.HTTPPort),
		fmt.Sprintf("ssl_dhparam %q;", s.DHParamFile(cfg.Paths)), "grpc_buffer_size 16k;", "absolute_redirect off;", "set_reject_handshake(true)",
	} {
		if !bytes.Contains(conf, []byte(want)) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	if bytes.Contains(conf, []byte("reuseport")) || bytes.Contains(conf, []byte("[::")) {
		t.Error("reuse-port false and disable-ipv6 true, but a listener has reuseport or an IPv6 address")
	}
	if bytes.Contains(conf, []byte(" http2")) {
		t.Error("use-http2: false, but a listener offers http2")
	}
	o := s.TranslateOptions(DefaultTranslateOptions())
	if !o.ServiceUpstream || o.ProxyRedirectFrom != "http://backend.internal/" || o.ProxyRedirectTo != "https://example.com/" {
		t.Errorf("translate options %+v, want service-upstream and the proxy-redirect pair", o)
	}
	if o.SSLRedirect || !o.ForceSSLRedirect {
		t.Errorf("translate options %+v, want ssl-redirect off and force-ssl-redirect on", o)
	}
	if want := (GlobalAuth{URL: "http://auth.example:8080/check", Method: "GET", Signin: "https://$host/oauth2/start", SigninRedirectParam: "next",
		ResponseHeaders: "X-User,X-Email", RequestRedirect: "/signed-in", CacheKey: "${http_authorization}", CacheDuration: "200 1m",
		NoAuthLocations: "/healthz,/.well-known"}); o.GlobalAuth != want {
		t.Errorf("global auth %+v, want %+v", o.GlobalAuth, want)
	}
}

func TestParseSettings(t *testing.T) {
	t.Run("defaults are ingress-nginx's", func(t *testing.T) {
		s, good, problems := ParseSettings(nil, nil)
		if len(problems) > 0 || len(good) > 0 {
			t.Fatalf("problems %v, good %v", problems, good)
		}
		if !s.HSTS || s.HSTSMaxAge != 31536000 || !s.HSTSIncludeSubdomains || s.HSTSPreload || s.UseGzip || s.ServerTokens ||
			s.KeepAlive != 75*time.Second || s.SSLCiphers == "" || !slices.Equal(s.SSLProtocols, []string{"TLSv1.2", "TLSv1.3"}) ||
			s.ProxyBodySize != -1 || s.WorkerProcesses != "" || !s.SSLRedirect || s.ForceSSLRedirect {
			t.Errorf("defaults: %+v", s)
		}
	})
	t.Run("an invalid value keeps the last good one, the rest applies", func(t *testing.T) {
		_, good, problems := ParseSettings(map[string]string{"keep-alive": "30", "gzip-level": "3"}, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		s, good2, problems := ParseSettings(map[string]string{"keep-alive": "forever", "gzip-level": "4", "use-gzip": "true"}, good)
		if len(problems) != 1 || problems[0].Key != "keep-alive" || !problems[0].KeptLastGood || !strings.Contains(problems[0].String(), "last good value") {
			t.Fatalf("problems %v", problems)
		}
		if s.KeepAlive != 30*time.Second || s.GzipLevel != 4 || !s.UseGzip {
			t.Errorf("keep-alive %s (want the last good 30s), gzip-level %d, use-gzip %v", s.KeepAlive, s.GzipLevel, s.UseGzip)
		}
		if good2["keep-alive"] != "30" || good2["gzip-level"] != "4" {
			t.Errorf("good values %v", good2)
		}
	})
	t.Run("an invalid value without a last good one takes the default", func(t *testing.T) {
		s, good, problems := ParseSettings(map[string]string{"hsts-max-age": "-1", "proxy-read-timeout": "soon"}, nil)
		if len(problems) != 2 || problems[0].KeptLastGood {
			t.Fatalf("problems %v", problems)
		}
		if s.HSTSMaxAge != 31536000 || s.ProxyReadTimeout != 0 || len(good) != 0 {
			t.Errorf("hsts-max-age %d, proxy-read-timeout %s (0: the flag's), good %v", s.HSTSMaxAge, s.ProxyReadTimeout, good)
		}
	})
	t.Run("unsupported and unknown keys are problems", func(t *testing.T) {
		_, _, problems := ParseSettings(map[string]string{"http-snippet": "x", "enable-brotli": "true", "use-gzipp": "true", "hsts": "true"}, nil)
		got := map[string]string{}
		for _, p := range problems {
			got[p.Key] = p.Reason
		}
		if len(got) != 3 || !strings.HasPrefix(got["http-snippet"], "refused:") || !strings.HasPrefix(got["enable-brotli"], "without effect:") ||
			!strings.HasPrefix(got["use-gzipp"], "unknown key") {
			t.Errorf("problems %v", got)
		}
	})
}

// TestSettingsInjection: values that would end a directive, open a block or read a variable are refused
// for every supported key, and nothing of them reaches nginx.conf.
func TestSettingsInjection(t *testing.T) {
	payloads := []string{
		"1; include /etc/passwd", "on;\nlocation / {", "$http_evil_payload", "4 8k;}", "text/html\"; server_tokens on; #",
		"msie6 } http {", "TLSv1.2;ssl_ciphers ALL", "auto;error_log /tmp/x", "x`y", "a'b", "on\r\nx",
		// ingress-nginx's auth-url injection CVEs (CVE-2025-24514 and kin), against global-auth-* above all.
		"http://auth.example.com/#;\n}}\nserver { listen 80; location / { return 200 pwned; } }\n#",
		"http://auth.example.com/auth;\nload_module /tmp/evil.so;#", "https://auth.example.com/\"; } ssl_engine /tmp/x.so; #",
		"http://auth.example.com/auth?a=$http_authorization", "https://$host/start?rd=$request_body",
	}
	cfg := RenderConfig{HTTPPort: 80, HTTPSPort: 443, StatusPort: 10246, StatusToken: testStatusToken, Paths: Paths{Prefix: "/nginx"},
		DefaultCertificate: "/ssl/default.crt", DefaultCertificateKey: "/ssl/default.key"}
	for _, key := range slices.Sorted(maps.Keys(settingKeys)) {
		if key == "log-format-upstream" {
			continue // free text, always quoted: TestLogFormatInjection has NGINX read it back
		}
		for _, p := range payloads {
			s, good, problems := ParseSettings(map[string]string{key: p}, nil)
			if key == "global-auth-cache-key" && p == "$http_evil_payload" {
				// A request header is what auth-cache-key is for: accepted, written anew from its parsed parts.
				if s.GlobalAuth.CacheKey != "${http_evil_payload}" || len(problems) > 0 {
					t.Errorf("%s = %q: cache key %q, problems %v", key, p, s.GlobalAuth.CacheKey, problems)
				}
				continue
			}
			if _, applied := good[key]; applied {
				// Only keys without effect on nginx.conf may accept free text: upstream-hash-by, route data,
				// accepts an expression of allowed variables ($http_*), which the Lua balancer checks again;
				// the block-* keys' entries are map keys: quoted, and read literally (the backslash).
				switch key {
				case "upstream-hash-by":
					if hashExpressionProblem(p) != "" {
						t.Errorf("%s accepted %q", key, p)
					} else if conf, _, err := Render(Model{}, RenderConfig{HTTPPort: 80, HTTPSPort: 443, StatusPort: 10246, StatusToken: testStatusToken,
						Paths: Paths{Prefix: "/nginx"}, DefaultCertificate: "/ssl/default.crt", DefaultCertificateKey: "/ssl/default.key", Settings: s}); err != nil || bytes.Contains(conf, []byte(p)) {
						t.Errorf("%s = %q: render error %v, or the value reached nginx.conf", key, p, err)
					}
				case "block-user-agents", "block-referers":
					cfg.Settings = s
					conf, _, err := Render(Model{}, cfg)
					if err != nil {
						t.Fatalf("%s: render: %v", key, err)
					}
					quoted, _ := Quote(`\` + strings.TrimSpace(p))
					if strings.Contains(p, ",") || !bytes.Contains(conf, []byte(quoted+" 1;")) ||
						bytes.Contains(bytes.ReplaceAll(conf, []byte(quoted), nil), []byte(strings.TrimSpace(p))) {
						t.Errorf("%s = %q: not exactly one quoted map key", key, p)
					}
				default:
					t.Errorf("%s accepted %q", key, p)
				}
				continue
			}
			if len(problems) != 1 {
				t.Errorf("%s = %q: problems %v", key, p, problems)
			}
			cfg.Settings = s
			conf, _, err := Render(Model{}, cfg)
			if err != nil {
				t.Fatalf("%s: render: %v", key, err)
			}
			if bytes.Contains(conf, []byte(p)) {
				t.Errorf("%s: %q reached nginx.conf", key, p)
			}
		}
	}
}

// TestSettingsThroughNginx: HSTS on HTTPS responses only, with the ConfigMap's value; server-tokens;
// gzip; a ConfigMap that turns HSTS off.
func TestSettingsThroughNginx(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	rt := testRuntime(t, cfg, nil)
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "http")),
		ingress("default", "web", rule("web.example", prefix("/", "web", 80))),
	}, nil)
	s, _, problems := ParseSettings(map[string]string{"hsts-max-age": "600", "hsts-preload": "true", "server-tokens": "true",
		"use-gzip": "true", "gzip-min-length": "1", "gzip-types": "application/json"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	cfg.Settings = s
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{
		up("default", "web", 80).Name: {echoBackend(t, "web")},
	}); err != nil {
		t.Fatal(err)
	}
	plain := proxyClient(cfg.HTTPPort, nil)
	secure := proxyClient(cfg.HTTPSPort, &tls.Config{InsecureSkipVerify: true, ServerName: "web.example"})
	get := func(c *http.Client, url string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		return resp
	}
	httpsURL := fmt.Sprintf("https://web.example:%d/", cfg.HTTPSPort)
	resp := get(secure, httpsURL)
	resp.Body.Close()
	if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=600; includeSubDomains; preload" {
		t.Errorf("HTTPS Strict-Transport-Security %q", got)
	}
	if got := resp.Header.Get("Server"); !strings.HasPrefix(got, "nginx/") {
		t.Errorf("server-tokens: Server %q, want the version", got)
	}
	resp = get(plain, fmt.Sprintf("http://web.example:%d/", cfg.HTTPPort))
	resp.Body.Close()
	if got := resp.Header.Get("Strict-Transport-Security"); got != "" {
		t.Errorf("plain HTTP got Strict-Transport-Security %q", got)
	}
	// Go's transport asks for gzip and decompresses on its own unless the request names the encoding.
	resp = get(plain, fmt.Sprintf("http://web.example:%d/", cfg.HTTPPort), "Accept-Encoding", "gzip")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("use-gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if plainBody, err := io.ReadAll(zr); err != nil || !bytes.Contains(plainBody, []byte(`"Backend":"web"`)) {
		t.Errorf("gunzipped body %q, %v", plainBody, err)
	}

	off, _, _ := ParseSettings(map[string]string{"hsts": "false"}, nil)
	cfg.Settings = off
	applyModel(t, rt, m, cfg)
	resp = get(secure, httpsURL)
	resp.Body.Close()
	if got := resp.Header.Get("Strict-Transport-Security"); got != "" {
		t.Errorf("hsts: false, yet Strict-Transport-Security %q", got)
	}
	if got := resp.Header.Get("Server"); got != "nginx" {
		t.Errorf("default server-tokens: Server %q, want nginx", got)
	}
}

// TestProxyCookieSettingsThroughNginx: the ConfigMap's proxy-cookie-path and proxy-cookie-domain rewrite
// the backends' Set-Cookie headers; an Ingress with its own proxy-cookie-path annotation keeps its own path
// and still gets the ConfigMap's domain; an Ingress whose annotations say off gets neither.
func TestProxyCookieSettingsThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	backend := httpServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Add("Set-Cookie", "s=1; Path=/app/; Domain=backend.internal")
		w.WriteHeader(http.StatusNoContent)
	})
	s, _, problems := ParseSettings(map[string]string{"proxy-cookie-path": "/app/ /", "proxy-cookie-domain": "backend.internal example.com"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	m, rejected := buildModelFrom(t, []any{
		service("default", "web", port(80, "http")),
		ingress("default", "plain", rule("plain.example", prefix("/", "web", 80))),
		ingress("default", "own", rule("own.example", prefix("/", "web", 80)), annotate(AnnotationProxyCookiePath, "/app/ /own/")),
		ingress("default", "off", rule("off.example", prefix("/", "web", 80)),
			annotate(AnnotationProxyCookiePath, "off", AnnotationProxyCookieDomain, " off ")),
	}, s.TranslateOptions(DefaultTranslateOptions()))
	if len(rejected) > 0 {
		t.Fatal(rejected)
	}
	cfg.Settings = s
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "web", 80).Name: {backend}}); err != nil {
		t.Fatal(err)
	}
	c := proxyClient(cfg.HTTPPort, nil)
	for host, want := range map[string]string{
		"plain.example": "s=1; Path=/; Domain=example.com",
		"own.example":   "s=1; Path=/own/; Domain=example.com",
		"off.example":   "s=1; Path=/app/; Domain=backend.internal",
	} {
		r := fetch(t, c, fmt.Sprintf("http://%s:%d/", host, cfg.HTTPPort))
		if got := r.header.Get("Set-Cookie"); r.status != http.StatusNoContent || got != want {
			t.Errorf("%s: %d, Set-Cookie %q, want 204 and %q", host, r.status, got, want)
		}
	}
}
