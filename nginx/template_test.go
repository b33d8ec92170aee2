package nginx

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// baseRenderConfig is a valid configuration that needs no files (Render does not read them).
func baseRenderConfig() RenderConfig {
	return RenderConfig{HTTPPort: 80, HTTPSPort: 443, StatusPort: 10246, StatusToken: testStatusToken, Paths: Paths{Prefix: "/var/lib/ingress-reactor"},
		DefaultCertificate: "/ssl/default.crt", DefaultCertificateKey: "/ssl/default.key"}
}

// serverBlock returns the server block whose server_name is name, from "server {" to its closing brace.
func serverBlock(t *testing.T, conf []byte, name string) string {
	t.Helper()
	s := string(conf)
	i := strings.Index(s, "\t\tserver_name "+name+";")
	if i < 0 {
		t.Fatalf("no server %s in\n%s", name, conf)
	}
	start := strings.LastIndex(s[:i], "\tserver {")
	end := strings.Index(s[i:], "\n\t}\n")
	return s[start : i+end+4]
}

// TestRenderPublicServer: one catch-all server whose location hands every request to the Lua router; no
// host or path of the model reaches nginx.conf (the corpus in routes_test.go covers routing).
func TestRenderPublicServer(t *testing.T) {
	m, _ := buildModel(t, []any{service("default", "web", port(80, "")),
		ingress("default", "a", rule("a.example.com", prefix("/secret-path", "web", 80)), withTLS("cert", "a.example.com"))}, nil)
	tests := map[string]struct {
		cfg  func(*RenderConfig)
		want string
	}{
		"HTTPS on the default port": {want: `	server {
		listen "80" default_server reuseport;
		listen "443" ssl http2 default_server reuseport;
		server_name _;
		# Requests NGINX answers before any location (400, 408, 414, 494) run the http block's
		# log_by_lua_block without the location's "set $ingress_reactor_limit_conn": no warning each.
		uninitialized_variable_warn off;
		# limit-rate-after of the route (the Lua router sets it with $limit_rate).
		limit_rate_after $ingress_reactor_limit_rate_after;
		location / {
			# The Lua router checks a Content-Length against the route's limit (proxy-body-size), and
			# bodies without one are limited where they are read: the default location below, or the
			# route's profile.
			client_max_body_size 0;
			set $proxy_upstream_name "";
			set $ingress_reactor_upstream_options "";
			set $ingress_reactor_balance "";
			set $ingress_reactor_connection_header "";
			set $ingress_reactor_limit_rate_after 0;
			set $ingress_reactor_upstream_vhost "";
			set $ingress_reactor_forwarded_prefix "";
			set $ingress_reactor_no_access_log "";
			set $ingress_reactor_https 1;
			set $ingress_reactor_https_port_suffix "";
			set $ingress_reactor_error_upstream "";
			set $ingress_reactor_error_namespace "";
			set $ingress_reactor_error_ingress "";
			set $ingress_reactor_error_service "";
			set $ingress_reactor_error_port "";
			set $ingress_reactor_cors "";
			set $ingress_reactor_limit_conn "";
			set $ingress_reactor_response_headers "";
			set $ingress_reactor_satisfied "";
			set $ingress_reactor_auth_route "";
			set $ingress_reactor_metrics "";
			rewrite_by_lua_block {
				require("ingress_reactor.router").route()
			}
			header_filter_by_lua_block {
				require("ingress_reactor.router").header_filter()
			}
			proxy_pass http://upstream_balancer;
		}
		# Routes without a profile, for request bodies without Content-Length (HTTP/2 requests among
		# them): the default body limit.
		location @ingress_reactor_default {
			header_filter_by_lua_block {
				require("ingress_reactor.router").header_filter()
			}
			proxy_pass http://upstream_balancer;
		}
	}
`},
		"redirects name another port": {cfg: func(c *RenderConfig) { c.RedirectHTTPSPort = 8443 }, want: `	server {
		listen "80" default_server reuseport;
		listen "443" ssl http2 default_server reuseport;
		server_name _;
		# Requests NGINX answers before any location (400, 408, 414, 494) run the http block's
		# log_by_lua_block without the location's "set $ingress_reactor_limit_conn": no warning each.
		uninitialized_variable_warn off;
		# limit-rate-after of the route (the Lua router sets it with $limit_rate).
		limit_rate_after $ingress_reactor_limit_rate_after;
		location / {
			# The Lua router checks a Content-Length against the route's limit (proxy-body-size), and
			# bodies without one are limited where they are read: the default location below, or the
			# route's profile.
			client_max_body_size 0;
			set $proxy_upstream_name "";
			set $ingress_reactor_upstream_options "";
			set $ingress_reactor_balance "";
			set $ingress_reactor_connection_header "";
			set $ingress_reactor_limit_rate_after 0;
			set $ingress_reactor_upstream_vhost "";
			set $ingress_reactor_forwarded_prefix "";
			set $ingress_reactor_no_access_log "";
			set $ingress_reactor_https 1;
			set $ingress_reactor_https_port_suffix ":8443";
			set $ingress_reactor_error_upstream "";
			set $ingress_reactor_error_namespace "";
			set $ingress_reactor_error_ingress "";
			set $ingress_reactor_error_service "";
			set $ingress_reactor_error_port "";
			set $ingress_reactor_cors "";
			set $ingress_reactor_limit_conn "";
			set $ingress_reactor_response_headers "";
			set $ingress_reactor_satisfied "";
			set $ingress_reactor_auth_route "";
			set $ingress_reactor_metrics "";
			rewrite_by_lua_block {
				require("ingress_reactor.router").route()
			}
			header_filter_by_lua_block {
				require("ingress_reactor.router").header_filter()
			}
			proxy_pass http://upstream_balancer;
		}
		# Routes without a profile, for request bodies without Content-Length (HTTP/2 requests among
		# them): the default body limit.
		location @ingress_reactor_default {
			header_filter_by_lua_block {
				require("ingress_reactor.router").header_filter()
			}
			proxy_pass http://upstream_balancer;
		}
	}
`},
		"HTTPS off: no TLS listener, no redirects; IPv6 listeners": {cfg: func(c *RenderConfig) { c.HTTPSPort = 0; c.IPv6 = true }, want: `	server {
		listen "80" default_server reuseport;
		listen "[::]:80" default_server reuseport;
		server_name _;
		# Requests NGINX answers before any location (400, 408, 414, 494) run the http block's
		# log_by_lua_block without the location's "set $ingress_reactor_limit_conn": no warning each.
		uninitialized_variable_warn off;
		# limit-rate-after of the route (the Lua router sets it with $limit_rate).
		limit_rate_after $ingress_reactor_limit_rate_after;
		location / {
			# The Lua router checks a Content-Length against the route's limit (proxy-body-size), and
			# bodies without one are limited where they are read: the default location below, or the
			# route's profile.
			client_max_body_size 0;
			set $proxy_upstream_name "";
			set $ingress_reactor_upstream_options "";
			set $ingress_reactor_balance "";
			set $ingress_reactor_connection_header "";
			set $ingress_reactor_limit_rate_after 0;
			set $ingress_reactor_upstream_vhost "";
			set $ingress_reactor_forwarded_prefix "";
			set $ingress_reactor_no_access_log "";
			set $ingress_reactor_error_upstream "";
			set $ingress_reactor_error_namespace "";
			set $ingress_reactor_error_ingress "";
			set $ingress_reactor_error_service "";
			set $ingress_reactor_error_port "";
			set $ingress_reactor_cors "";
			set $ingress_reactor_limit_conn "";
			set $ingress_reactor_response_headers "";
			set $ingress_reactor_satisfied "";
			set $ingress_reactor_auth_route "";
			set $ingress_reactor_metrics "";
			rewrite_by_lua_block {
				require("ingress_reactor.router").route()
			}
			header_filter_by_lua_block {
				require("ingress_reactor.router").header_filter()
			}
			proxy_pass http://upstream_balancer;
		}
		# Routes without a profile, for request bodies without Content-Length (HTTP/2 requests among
		# them): the default body limit.
		location @ingress_reactor_default {
			header_filter_by_lua_block {
				require("ingress_reactor.router").header_filter()
			}
			proxy_pass http://upstream_balancer;
		}
	}
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := baseRenderConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			conf, _, err := Render(m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := serverBlock(t, conf, "_"); got != tc.want {
				t.Errorf("server block:\n%s\nwant:\n%s", got, tc.want)
			}
			if bytes.Contains(conf, []byte("a.example.com")) || bytes.Contains(conf, []byte("secret-path")) {
				t.Error("a host or path of the model is in nginx.conf")
			}
		})
	}
}

func TestRenderHash(t *testing.T) {
	m, _ := buildModel(t, []any{service("default", "web", port(80, "")),
		ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)))}, nil)
	conf, hash, err := Render(m, baseRenderConfig())
	if err != nil {
		t.Fatal(err)
	}
	again, hashAgain, _ := Render(m, baseRenderConfig())
	if !bytes.Equal(conf, again) || hash != hashAgain {
		t.Error("rendering the same model twice gave different output")
	}
	if len(hash) != 64 || !bytes.Contains(conf, []byte(`set $ingress_reactor_config_hash "`+hash+`";`)) {
		t.Errorf("the status server does not report hash %q", hash)
	}
	if bytes.Contains(conf, []byte(hashPlaceholder)) {
		t.Error("placeholder left in the output")
	}
	// Routes are not in nginx.conf: a change of them renders the same configuration, which is not reloaded.
	m.Servers[1].Locations[0].Path = "/other"
	_, changed, _ := Render(m, baseRenderConfig())
	if changed != hash {
		t.Error("a change of routes changed nginx.conf")
	}
	cfg := baseRenderConfig()
	cfg.HTTPPort = 8080
	if _, h, _ := Render(m, cfg); h == changed {
		t.Error("a different configuration has the same hash")
	}
	// Each replica has its own status token; the hash (a metric to compare replicas by) leaves it out.
	other := baseRenderConfig()
	other.StatusToken = strings.Repeat("f", 32)
	confOther, h, err := Render(m, other)
	if err != nil || h != changed {
		t.Errorf("another status token changed the hash: %s vs %s (%v)", h, changed, err)
	}
	if !bytes.Contains(confOther, []byte(`set $ingress_reactor_token "`+other.StatusToken+`";`)) || bytes.Contains(confOther, []byte(tokenPlaceholder)) {
		t.Error("the status token is not in the configuration")
	}
}

func TestRenderRejects(t *testing.T) {
	tests := map[string]struct {
		cfg     func(*RenderConfig)
		model   Model
		wantErr string
	}{
		"port out of range":         {cfg: func(c *RenderConfig) { c.HTTPPort = 70000 }, wantErr: "HTTP port 70000 out of range"},
		"same port twice":           {cfg: func(c *RenderConfig) { c.StatusPort = 80 }, wantErr: "are both 80"},
		"relative prefix":           {cfg: func(c *RenderConfig) { c.Paths.Prefix = "nginx" }, wantErr: `prefix "nginx" must be an absolute path`},
		"HTTPS without cert":        {cfg: func(c *RenderConfig) { c.DefaultCertificate = "" }, wantErr: "HTTPS needs the default certificate"},
		"bad worker processes":      {cfg: func(c *RenderConfig) { c.WorkerProcesses = "4; user root" }, wantErr: `worker processes "4; user root"`},
		"user with syntax":          {cfg: func(c *RenderConfig) { c.User = "www-data; load_module x" }, wantErr: `user "www-data; load_module x"`},
		"bad log level":             {cfg: func(c *RenderConfig) { c.ErrorLogLevel = "loud" }, wantErr: `error log level "loud"`},
		"listen address not an IP":  {cfg: func(c *RenderConfig) { c.ListenAddress = "localhost" }, wantErr: `listen address "localhost"`},
		"cert path with a variable": {cfg: func(c *RenderConfig) { c.DefaultCertificate = "/ssl/$host.crt" }, wantErr: "'$' would be read as a variable"},
		"prefix with a newline":     {cfg: func(c *RenderConfig) { c.Paths.Prefix = "/tmp/a\nb" }, wantErr: "control character 0x0a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := baseRenderConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			conf, _, err := Render(tc.model, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q; config:\n%s", err, tc.wantErr, conf)
			}
		})
	}
}

// statusAuthorize is the status server's token check that every template must keep.
const statusAuthorize = `access_by_lua_block { require("ingress_reactor.configuration").authorize() }`

// routerCall is the public server's call of the router that every template must keep.
const routerCall = ` rewrite_by_lua_block { require("ingress_reactor.router").route() } location = /configuration/routes
	lua_shared_dict ingress_reactor_routes {{.RoutesDictMB}}m; {{if .HTTPS}}set $ingress_reactor_https 1;{{end}}
	{{range .Profiles}}location @{{.Name}} { }{{end}} {{range .ErrorCodes}}location @ingress_reactor_error_{{.}} { }{{end}}
	set_profiles({ {{- range .Profiles}}"{{.Name}}", {{end -}} }) set $ingress_reactor_error_upstream "";
	log_by_lua_block { require("ingress_reactor.router").log() } set $ingress_reactor_limit_conn ""; {{if .AuthCache}}keys_zone=ingress_reactor_auth_cache:1m{{end}}
	require("ingress_reactor.router").set_body_limit({{.ClientMaxBodySize}})
	{{range .ProtocolUpstreams}}upstream {{.}} { }{{end}} map $scheme $ingress_reactor_auto_upstream { }
	{{range .Profiles}}{{if .Upstream}}upstream {{.Upstream}} { }{{end}}{{end}} set $ingress_reactor_response_headers ""; set $ingress_reactor_satisfied ""; set $ingress_reactor_auth_route "";
	set $ingress_reactor_balance ""; require("ingress_reactor.balancer").log()
	header_filter_by_lua_block { require("ingress_reactor.router").header_filter() } require("ingress_reactor.router").header_filter() {{range .Profiles}}require("ingress_reactor.router").header_filter(){{end}}
	{{range .Profiles}}{{if .ProxyHeaders}}{{template "ingress_reactor_proxy_headers" $}}{{end}}{{range .Auxiliary}}location {{.Name}} { }{{end}}{{end}}
	{{define "ingress_reactor_proxy_headers"}}proxy_set_header Host $ingress_reactor_proxy_host;{{end}} {{template "ingress_reactor_proxy_headers" .}}
	{{range .ErrorCodes}}{{template "ingress_reactor_proxy_headers" $}}{{end}}`

func TestParseTemplate(t *testing.T) {
	tests := map[string]struct {
		text    string
		wantErr string
	}{
		"the default template":    {text: DefaultTemplateText()},
		"syntax error":            {text: "{{range .Servers}", wantErr: "parse nginx template"},
		"unknown field":           {text: "{{.Nope}} /configuration/hash", wantErr: "can't evaluate field Nope"},
		"no config hash location": {text: "events {}", wantErr: "must serve /configuration/hash"},
		"no status token":         {text: "/configuration/hash {{.ConfigHash}}", wantErr: "must keep \"set $ingress_reactor_token {{.StatusToken}};\""},
		"no router":               {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize, wantErr: "must keep the public server's rewrite_by_lua_block"},
		"no routes location":      {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize + strings.Replace(routerCall, "location = /configuration/routes", "", 1), wantErr: "location = /configuration/routes"},
		"no profile locations": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, "{{range .Profiles}}location @{{.Name}} { }{{end}}", "", 1), wantErr: "a named location per profile"},
		"no HTTPS flag":              {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize + strings.Replace(routerCall, "set $ingress_reactor_https 1;", "", 1), wantErr: "set $ingress_reactor_https 1;"},
		"no token check on reads":    {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + routerCall, wantErr: "must keep the status server's access_by_lua_block"},
		"routes are not in the view": {text: "{{range .Servers}}{{end}} /configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize + routerCall, wantErr: "can't evaluate field Servers"},
		"no log phase hook": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `log_by_lua_block { require("ingress_reactor.router").log() }`, "", 1), wantErr: "limit-connections gives connections back"},
		"no header filter": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `header_filter_by_lua_block { require("ingress_reactor.router").header_filter() }`, "", 1), wantErr: "header_filter_by_lua_block"},
		"no body limit": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `require("ingress_reactor.router").set_body_limit({{.ClientMaxBodySize}})`, "", 1), wantErr: "proxy-body-size"},
		"no upstream per protocol": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, "{{range .ProtocolUpstreams}}upstream {{.}} { }{{end}}", "", 1), wantErr: "an upstream block per backend protocol"},
		"no upstream of a TLS profile": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, "upstream {{.Upstream}} { }", "", 1), wantErr: "an upstream block per profile"},
		"no response headers variable": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `set $ingress_reactor_response_headers "";`, "", 1), wantErr: "$ingress_reactor_response_headers"},
		"no satisfied variable": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `set $ingress_reactor_satisfied "";`, "", 1), wantErr: "$ingress_reactor_satisfied"},
		"no auth route variable": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `set $ingress_reactor_auth_route "";`, "", 1), wantErr: "$ingress_reactor_auth_route"},
		"no auth cache zone": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, "{{if .AuthCache}}keys_zone=ingress_reactor_auth_cache:1m{{end}}", "", 1), wantErr: "auth-cache-key caches"},
		"no balancing variable": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `set $ingress_reactor_balance "";`, "", 1), wantErr: "$ingress_reactor_balance"},
		"no balancer log hook": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `require("ingress_reactor.balancer").log()`, "", 1), wantErr: "load-balance ewma measures endpoints"},
		"no auth locations": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, "{{range .Auxiliary}}location {{.Name}} { }{{end}}", "", 1), wantErr: "external auth (auth-url) calls its service"},
		"no proxy headers in an auth profile": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `{{if .ProxyHeaders}}{{template "ingress_reactor_proxy_headers" $}}{{end}}`, "", 1), wantErr: "auth-response-headers sets some"},
		"no header filter in the profiles": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize +
			strings.Replace(routerCall, `{{range .Profiles}}require("ingress_reactor.router").header_filter(){{end}}`, "", 1), wantErr: "header_filter_by_lua_block"},
		"a minimal template": {text: "/configuration/hash {{.ConfigHash}} set $ingress_reactor_token {{.StatusToken}}; " + statusAuthorize + routerCall},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tc.text)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || tmpl == nil {
				t.Fatalf("unexpected error %v", err)
			}
		})
	}
}

// TestRenderNginxAccepts runs the real "nginx -t" on rendered configurations.
func TestRenderNginxAccepts(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	base := testRenderConfig(t, paths)
	web := service("default", "web", port(80, "http"))
	manyHosts := []any{web}
	// Each location costs NGINX's Lua module an SSL context at load time (about 0.1 ms), so this
	// stays at a size that exercises the server_names_hash sizing without slowing the suite down.
	for i := range 1500 {
		manyHosts = append(manyHosts, ingress("default", fmt.Sprintf("i%d", i),
			rule(fmt.Sprintf("host-%d.%s.example.com", i, strings.Repeat("long-label", 5)), exact("/b", "web", "http"))))
	}
	manyHosts = append(manyHosts, ingress("default", "longest",
		rule(strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+"."+strings.Repeat("c", 63)+"."+strings.Repeat("d", 61), exact("/b", "web", 80))))
	tests := map[string]struct {
		objs           []any
		defaultBackend *Upstream
		cfg            func(*RenderConfig)
	}{
		"no Ingress at all": {},
		"hosts, wildcards, TLS, default backend, all path kinds": {
			objs: []any{web,
				ingress("default", "a",
					rule("a.example.com", prefix("/", "web", 80), prefix("/api", "web", 80), exact("/api", "web", "http"), exact("/api/", "web", 80)),
					rule("*.example.com", prefix("/w", "web", 80)),
					rule("", prefix("/anyhost", "web", 80)),
					withTLS("cert", "a.example.com"),
				),
				ingress("default", "b", withDefaultBackend("web", 80)),
			},
			defaultBackend: ptr(up("default", "web", 80)),
		},
		"odd but valid paths": {
			objs: []any{web, ingress("default", "a", rule("a.example.com",
				prefix("/a-b_c.d~e!f*g(h)i,j+k=l:m@n&o", "web", 80), exact("/=", "web", 80), exact("/~", "web", 80), prefix("/^", "web", 80)))},
		},
		"1,500 hosts with long names and a 253-byte one (server_names_hash sizing)": {objs: manyHosts},
		"source ranges, IPv4 and IPv6, on every kind of location": {
			objs: []any{web,
				ingress("default", "a", annotate(AnnotationAllowlistSourceRange, "10.0.0.0/8,2001:db8::/32,192.0.2.7", AnnotationDenylistSourceRange, "10.9.0.0/16,::1"),
					rule("a.example.com", prefix("/", "web", 80), prefix("/api", "web", 80), exact("/x/", "web", 80))),
				ingress("default", "b", annotate(AnnotationWhitelistSourceRange, "0.0.0.0/0,::/0"), rule("b.example.com", exact("/b", "web", 80))),
			},
		},
		"HTTP only, IPv6, access log, user, single worker": {
			objs: []any{web, ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)))},
			cfg: func(c *RenderConfig) {
				c.HTTPSPort = 0
				c.ListenAddress = ""
				c.IPv6 = true
				c.AccessLog = "stdout"
				if os.Geteuid() == 0 { // NGINX warns about "user" when it is not root
					c.User = "nobody nogroup"
				}
				c.WorkerProcesses = "1"
				c.ErrorLog = paths.Prefix + "/logs/error.log"
				c.WorkerShutdownTimeout = 5 * time.Second
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, _ := buildModel(t, tc.objs, tc.defaultBackend)
			cfg := base
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			nginxTest(t, m, cfg)
		})
	}
}

// TestLeanConfig reports the configuration size per Ingress path (ingress-nginx: about 3.6 KB per
// location) and keeps it from creeping up unnoticed.
func TestLeanConfig(t *testing.T) {
	const n = 1000
	m, _ := Merge(benchTranslations(n), nil)
	conf, _, err := Render(m, baseRenderConfig())
	if err != nil {
		t.Fatal(err)
	}
	perPath := float64(len(conf)) / (2 * n)
	t.Logf("%d Ingresses, %d paths: %d bytes, %.0f bytes per path", n, 2*n, len(conf), perPath)
	if perPath > 600 {
		t.Errorf("%.0f bytes of nginx.conf per Ingress path; the template grew (budget 600)", perPath)
	}
}
