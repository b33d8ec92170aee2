package nginx

import (
	"strings"
	"testing"
)

// behindPassthrough moves the HTTPS listener where the SSL passthrough proxy expects it: a loopback port
// with the PROXY protocol, while redirects keep naming the public port.
func behindPassthrough(c *RenderConfig, port int) {
	c.RedirectHTTPSPort = c.HTTPSPort
	c.HTTPSPort = port
	c.HTTPSListenAddress = "127.0.0.1"
	c.HTTPSProxyProtocol = true
}

// TestRenderHTTPSBehindPassthroughProxy: the TLS listener of the public server moves to the loopback address
// with proxy_protocol; the client address and port come from the PROXY header; plain HTTP is unchanged.
func TestRenderHTTPSBehindPassthroughProxy(t *testing.T) {
	web := service("default", "web", port(80, ""))
	m, _ := buildModel(t, []any{web, ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), withTLS("", "a.example.com"))}, nil)
	cfg := baseRenderConfig()
	behindPassthrough(&cfg, 442)
	conf, _, err := Render(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	block := serverBlock(t, conf, "_")
	for _, w := range []string{`listen "80" default_server reuseport;`, `listen "127.0.0.1:442" ssl http2 proxy_protocol default_server reuseport;`,
		`set $ingress_reactor_https_port_suffix "";`} {
		if !strings.Contains(block, w) {
			t.Errorf("the public server lacks %q:\n%s", w, block)
		}
	}
	if strings.Contains(block, `"443"`) || strings.Contains(block, `":442"`) {
		t.Errorf("the public server still names the public port as a listener, or redirects to the internal one:\n%s", block)
	}
	for _, w := range []string{
		`set_real_ip_from "127.0.0.1";`,
		"real_ip_header proxy_protocol;",
		"proxy_set_header X-Forwarded-Port $ingress_reactor_pass_port;",
		"default $ingress_reactor_server_port;",
	} {
		if !strings.Contains(string(conf), w) {
			t.Errorf("configuration lacks %q", w)
		}
	}

	plain, _, err := Render(m, baseRenderConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"proxy_protocol", "real_ip", "$ingress_reactor_server_port"} {
		if strings.Contains(string(plain), w) {
			t.Errorf("without passthrough the configuration mentions %q", w)
		}
	}
}

func TestRenderRejectsUntrustedProxyProtocol(t *testing.T) {
	tests := map[string]struct {
		cfg     func(*RenderConfig)
		wantErr string
	}{
		"PROXY protocol without an address": {func(c *RenderConfig) { c.HTTPSProxyProtocol = true }, "needs a loopback HTTPS listen address"},
		"PROXY protocol on a public address": {func(c *RenderConfig) {
			c.HTTPSListenAddress = "192.0.2.1"
			c.HTTPSProxyProtocol = true
		}, "only trusted on a loopback address"},
		"HTTPS listen address not an IP": {func(c *RenderConfig) { c.HTTPSListenAddress = "localhost" }, `HTTPS listen address "localhost"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := baseRenderConfig()
			tc.cfg(&cfg)
			if _, _, err := Render(Model{}, cfg); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestRenderBehindPassthroughNginxAccepts runs the real "nginx -t" on the passthrough layout, IPv6
// listeners included.
func TestRenderBehindPassthroughNginxAccepts(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.ListenAddress = ""
	cfg.IPv6 = true
	behindPassthrough(&cfg, freePort(t))
	web := service("default", "web", port(80, "http"))
	m, _ := buildModel(t, []any{web,
		ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), withTLS("cert", "a.example.com")),
		ingress("default", "b", rule("*.example.com", prefix("/", "web", 80))),
	}, nil)
	nginxTest(t, m, cfg)
}
