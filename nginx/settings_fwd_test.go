package nginx

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFwdSettings(t *testing.T) {
	defaults := DefaultSettings()
	if defaults.UseForwardedHeaders || defaults.EnableRealIP || defaults.ComputeFullForwardedFor || !defaults.GenerateRequestID ||
		defaults.AddOriginalURIHeader || defaults.ForwardedForHeader != "X-Forwarded-For" ||
		!slices.Equal(defaults.ProxyRealIPCIDR, []string{"0.0.0.0/0"}) || defaults.BlockCIDRs != nil || defaults.BlockUserAgents != nil {
		t.Errorf("defaults: %+v", defaults.fwdSettings)
	}
	for name, tc := range map[string]struct {
		key, value string
		want       func(s Settings) bool
		bad        string // part of the problem's reason; "" when the value is good
	}{
		"forwarded-for-header":        {key: "forwarded-for-header", value: "X-Real-IP", want: func(s Settings) bool { return s.ForwardedForHeader == "X-Real-IP" }},
		"forwarded-for-header spaces": {key: "forwarded-for-header", value: "X Real", bad: "header name"},
		"forwarded-for-header pp":     {key: "forwarded-for-header", value: "proxy_protocol", bad: "header name"},
		"real-ip cidrs canonical": {key: "proxy-real-ip-cidr", value: " 10.0.0.1/8, 192.0.2.7 ,2001:db8::/32,::ffff:192.0.2.8, ::ffff:10.1.0.0/112", want: func(s Settings) bool {
			return slices.Equal(s.ProxyRealIPCIDR, []string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "192.0.2.8", "10.1.0.0/16"})
		}},
		"real-ip cidrs empty":      {key: "proxy-real-ip-cidr", value: " , ", bad: "at least one"},
		"real-ip cidr invalid":     {key: "proxy-real-ip-cidr", value: "10.0.0.0/33", bad: "not an IP address"},
		"real-ip cidr zone":        {key: "proxy-real-ip-cidr", value: "fe80::1%eth0", bad: "not an IP address"},
		"block-cidrs":              {key: "block-cidrs", value: "192.0.2.0/24,198.51.100.3", want: func(s Settings) bool { return slices.Equal(s.BlockCIDRs, []string{"192.0.2.0/24", "198.51.100.3"}) }},
		"block-cidrs hostname":     {key: "block-cidrs", value: "example.com", bad: "not an IP address"},
		"block-cidrs empty clears": {key: "block-cidrs", value: "", want: func(s Settings) bool { return s.BlockCIDRs == nil }},
		"user agents exact and regex": {key: "block-user-agents", value: "curl/7.1, ~*bad[a-z]+bot ,~^Go-http, default", want: func(s Settings) bool {
			return slices.Equal(s.BlockUserAgents, []string{`\curl/7.1`, `~*` + mustPCRE(t, "bad[a-z]+bot"), `~` + mustPCRE(t, "^Go-http"), `\default`})
		}},
		"user agents with semicolons": {key: "block-user-agents", value: "Mozilla/5.0 (compatible; Bot/1.0)", want: func(s Settings) bool {
			return slices.Equal(s.BlockUserAgents, []string{`\Mozilla/5.0 (compatible; Bot/1.0)`})
		}},
		"user agents bad regex":      {key: "block-user-agents", value: "~(unclosed", bad: "regular expression"},
		"user agents back-reference": {key: "block-user-agents", value: `~(a)\1`, bad: "back-reference"},
		"user agents empty regex":    {key: "block-user-agents", value: "~*", bad: "want a regular expression"},
		"user agents variable":       {key: "block-user-agents", value: "$http_cookie", bad: "may not contain"},
		"user agents too long":       {key: "block-user-agents", value: strings.Repeat("a", 513), bad: "limit"},
		"referers regex": {key: "block-referers", value: `~^https://spam\.`, want: func(s Settings) bool {
			return slices.Equal(s.BlockReferers, []string{`~` + mustPCRE(t, `^https://spam\.`)})
		}},
		"referers control character":    {key: "block-referers", value: "a\x01b", bad: "may not contain"},
		"compute-full-forwarded-for":    {key: "compute-full-forwarded-for", value: "true", want: func(s Settings) bool { return s.ComputeFullForwardedFor }},
		"generate-request-id bad":       {key: "generate-request-id", value: "sometimes", bad: "true or false"},
		"proxy-add-original-uri-header": {key: "proxy-add-original-uri-header", value: "true", want: func(s Settings) bool { return s.AddOriginalURIHeader }},
	} {
		t.Run(name, func(t *testing.T) {
			s, _, problems := ParseSettings(map[string]string{tc.key: tc.value}, nil)
			if tc.bad != "" {
				if len(problems) != 1 || !strings.Contains(problems[0].Reason, tc.bad) {
					t.Fatalf("problems %v, want one with %q", problems, tc.bad)
				}
				return
			}
			if len(problems) > 0 {
				t.Fatalf("problems %v", problems)
			}
			if !tc.want(s) {
				t.Errorf("settings %+v", s.fwdSettings)
			}
		})
	}
}

// TestSourceRangeSettings: the ConfigMap's whitelist-source-range and denylist-source-range are the
// defaults of Ingresses without the annotation of their kind.
func TestSourceRangeSettings(t *testing.T) {
	s, _, problems := ParseSettings(map[string]string{"whitelist-source-range": "10.0.0.7/8, 192.0.2.7,10.0.0.0/8", "denylist-source-range": "10.1.0.0/16"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	opts := s.TranslateOptions(DefaultTranslateOptions())
	if opts.AllowSourceRange != "10.0.0.0/8,192.0.2.7/32" || opts.DenySourceRange != "10.1.0.0/16" {
		t.Fatalf("options %+v", opts)
	}
	for name, tc := range map[string]struct {
		kv          []string
		allow, deny string
	}{
		"no annotation: both defaults":   {allow: "[10.0.0.0/8 192.0.2.7/32]", deny: "[10.1.0.0/16]"},
		"own allowlist":                  {kv: []string{AnnotationAllowlistSourceRange, "198.51.100.0/24"}, allow: "[198.51.100.0/24]", deny: "[10.1.0.0/16]"},
		"own whitelist (the older name)": {kv: []string{AnnotationWhitelistSourceRange, "198.51.100.0/24"}, allow: "[198.51.100.0/24]", deny: "[10.1.0.0/16]"},
		"own denylist":                   {kv: []string{AnnotationDenylistSourceRange, "10.2.0.0/16"}, allow: "[10.0.0.0/8 192.0.2.7/32]", deny: "[10.2.0.0/16]"},
	} {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, opts, tc.kv...)
			if errs != nil {
				t.Fatal(errs)
			}
			if got.Access == nil || fmt.Sprint(got.Access.Allow) != tc.allow || fmt.Sprint(got.Access.Deny) != tc.deny {
				t.Errorf("access %+v, want allow %s deny %s", got.Access, tc.allow, tc.deny)
			}
		})
	}
	if got, _ := translateAnnotated(t, DefaultTranslateOptions()); got.Access != nil {
		t.Errorf("without the settings: access %+v", got.Access)
	}
	if _, _, problems := ParseSettings(map[string]string{"whitelist-source-range": "10.0.0.0/8, nope"}, nil); len(problems) != 1 {
		t.Error("an invalid entry was accepted")
	}
}

// TestFwdSettingsRender: the view prints the realip module only with use-forwarded-headers or
// enable-real-ip, and trusts X-Forwarded-Proto only with use-forwarded-headers.
func TestFwdSettingsRender(t *testing.T) {
	render := func(data map[string]string) string {
		t.Helper()
		s, _, problems := ParseSettings(data, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg := baseRenderConfig()
		cfg.Settings = s
		conf, _, err := Render(Model{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return string(conf)
	}
	def := render(nil)
	for _, absent := range []string{"real_ip_header X-Forwarded-For", "set_real_ip_from 0.0.0.0/0", "deny ", "ingress_reactor_block_ua", "X-Original-URI $request_uri;\n\tproxy_set_header X-Forwarded-Prefix"} {
		if strings.Contains(def, absent) {
			t.Errorf("defaults: nginx.conf has %q", absent)
		}
	}
	if !strings.Contains(def, `"" $request_id;`) {
		t.Error("generate-request-id: the default generates no request ID")
	}
	real := render(map[string]string{"enable-real-ip": "true", "forwarded-for-header": "X-Client-IP", "proxy-real-ip-cidr": "10.0.0.0/8"})
	if !strings.Contains(real, "real_ip_header X-Client-IP;") || !strings.Contains(real, "set_real_ip_from 10.0.0.0/8;") {
		t.Error("enable-real-ip: no realip directives")
	}
	if strings.Contains(real, "10.0.0.0/8 1;") {
		t.Error("enable-real-ip alone trusts X-Forwarded-Proto")
	}
	fwd := render(map[string]string{"use-forwarded-headers": "true", "compute-full-forwarded-for": "true", "generate-request-id": "false",
		"block-user-agents": "default, ~x", "block-referers": `a"b`})
	for _, want := range []string{"real_ip_header X-Forwarded-For;", "set_real_ip_from 0.0.0.0/0;", "0.0.0.0/0 1;",
		"proxy_set_header X-Forwarded-For $ingress_reactor_full_forwarded_for;", `"\\default" 1;`, `"~x" 1;`, `"\\a\"b" 1;`,
		"if ($ingress_reactor_block_ua)", "if ($ingress_reactor_block_ref)"} {
		if !strings.Contains(fwd, want) {
			t.Errorf("use-forwarded-headers: nginx.conf lacks %q", want)
		}
	}
	if strings.Contains(fwd, `"" $request_id;`) {
		t.Error("generate-request-id: false still generates")
	}
}

// TestForwardedHeadersThroughNginx: X-Forwarded-* are the request's own by default, the client's only with
// use-forwarded-headers and only from proxy-real-ip-cidr; compute-full-forwarded-for, generate-request-id,
// proxy-add-original-uri-header; block-cidrs (also on the forwarded address), block-user-agents and
// block-referers answer 403; X-Forwarded-Proto of a trusted proxy stops the ssl-redirect.
func TestForwardedHeadersThroughNginx(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	rt := testRuntime(t, cfg, nil)
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "http")),
		ingress("default", "web", rule("web.example", prefix("/", "web", 80)), rule("tls.example", prefix("/", "web", 80)),
			withTLS("web-tls", "tls.example")),
	}, nil)
	apply := func(data map[string]string) {
		t.Helper()
		s, _, problems := ParseSettings(data, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg.Settings = s
		applyModel(t, rt, m, cfg)
	}
	apply(nil)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{
		up("default", "web", 80).Name: {echoBackend(t, "web")},
	}); err != nil {
		t.Fatal(err)
	}
	plain := proxyClient(cfg.HTTPPort, nil)
	host := "web.example"
	get := func(header ...string) (int, echo) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d/p?q=1", host, cfg.HTTPPort), nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e echo
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, e
	}
	forwarded := []string{"X-Forwarded-For", "203.0.113.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "app.example, other.example",
		"X-Forwarded-Port", "8443"}
	check := func(what string, e echo, want map[string]string) {
		t.Helper()
		for h, w := range want {
			if got := e.Header.Get(h); got != w {
				t.Errorf("%s: backend got %s %q, want %q", what, h, got, w)
			}
		}
	}
	port := fmt.Sprint(cfg.HTTPPort)

	// Defaults: the client's forwarded headers are replaced, and the TLS host redirects HTTP.
	host = "tls.example"
	if code, _ := get(forwarded...); code != http.StatusPermanentRedirect {
		t.Errorf("defaults, X-Forwarded-Proto https from the client: status %d, want the ssl-redirect's 308", code)
	}
	host = "web.example"
	code, e := get(forwarded...)
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	check("defaults", e, map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-Ip": "127.0.0.1", "X-Forwarded-Proto": "http",
		"X-Forwarded-Host": "web.example:" + port, "X-Forwarded-Port": port, "X-Scheme": "http", "X-Original-Uri": ""})
	if e.Host != "web.example:"+port || e.Header.Get("X-Request-Id") == "" {
		t.Errorf("defaults: Host %q, X-Request-ID %q (generate-request-id)", e.Host, e.Header.Get("X-Request-Id"))
	}

	// use-forwarded-headers from a proxy outside proxy-real-ip-cidr: nothing trusted.
	apply(map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "192.0.2.0/24"})
	_, e = get(forwarded...)
	check("untrusted proxy", e, map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-Ip": "127.0.0.1", "X-Forwarded-Proto": "http",
		"X-Forwarded-Host": "web.example:" + port, "X-Forwarded-Port": port})

	// From a trusted proxy: passed on; compute-full-forwarded-for appends the connection's address.
	apply(map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "192.0.2.0/24, 127.0.0.1", "compute-full-forwarded-for": "true",
		"generate-request-id": "false", "proxy-add-original-uri-header": "true"})
	code, e = get(forwarded...)
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	check("trusted proxy", e, map[string]string{"X-Forwarded-For": "203.0.113.7, 127.0.0.1", "X-Real-Ip": "203.0.113.7",
		"X-Forwarded-Proto": "https", "X-Forwarded-Host": "app.example", "X-Forwarded-Port": "8443", "X-Scheme": "https",
		"X-Request-Id": "", "X-Original-Uri": "/p?q=1"})
	if e.Host != "app.example" {
		t.Errorf("trusted proxy: Host %q, want the forwarded host", e.Host)
	}
	host = "tls.example"
	if code, _ := get("X-Forwarded-Proto", "https"); code != http.StatusOK {
		t.Errorf("TLS host, trusted X-Forwarded-Proto https: status %d, want no ssl-redirect", code)
	}
	if code, _ := get("X-Forwarded-Proto", "http"); code != http.StatusPermanentRedirect {
		t.Errorf("TLS host, trusted X-Forwarded-Proto http: status %d, want 308", code)
	}
	host = "web.example"
	_, e = get("X-Request-ID", "abc")
	check("request ID", e, map[string]string{"X-Request-Id": "abc", "X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http"})

	// Blocking, on the address the realip module took from the trusted proxy's header.
	apply(map[string]string{"enable-real-ip": "true", "proxy-real-ip-cidr": "127.0.0.1",
		"block-cidrs": "203.0.113.0/24", "block-user-agents": "~*bad[a-z]+bot, curl/7.1", "block-referers": `~^https://spam\.`})
	for _, tc := range []struct {
		header []string
		want   int
	}{
		{nil, http.StatusOK},
		{[]string{"X-Forwarded-For", "203.0.113.9"}, http.StatusForbidden},
		{[]string{"X-Forwarded-For", "198.51.100.9"}, http.StatusOK},
		{[]string{"User-Agent", "a BadXYZbot b"}, http.StatusForbidden},
		{[]string{"User-Agent", "CURL/7.1"}, http.StatusForbidden},
		{[]string{"User-Agent", "curl/7.10"}, http.StatusOK},
		{[]string{"Referer", "https://spam.example/"}, http.StatusForbidden},
		{[]string{"Referer", "https://example/spam."}, http.StatusOK},
	} {
		if code, e := get(tc.header...); code != tc.want {
			t.Errorf("%v: status %d, want %d", tc.header, code, tc.want)
		} else if code == http.StatusOK && e.Header.Get("X-Forwarded-Proto") != "http" {
			t.Errorf("enable-real-ip alone trusted X-Forwarded-Proto %q", e.Header.Get("X-Forwarded-Proto"))
		}
	}
	apply(map[string]string{"block-cidrs": "127.0.0.1"})
	if code, _ := get(); code != http.StatusForbidden {
		t.Errorf("block-cidrs 127.0.0.1: status %d, want 403", code)
	}
}

func mustPCRE(t *testing.T, p string) string {
	t.Helper()
	re, err := compileUserPCRE(p, maxBlockEntryLen)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// TestFwdSettingsWithPassthroughPassNginx: with the passthrough proxy's PROXY protocol on the HTTPS
// listener, use-forwarded-headers replaces the public server's realip settings and NGINX accepts both.
func TestFwdSettingsWithPassthroughPassNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSListenAddress = "127.0.0.1"
	cfg.HTTPSProxyProtocol = true
	s, _, problems := ParseSettings(map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "10.0.0.0/8"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	cfg.Settings = s
	conf := string(nginxTest(t, Model{}, cfg))
	for _, want := range []string{"real_ip_header proxy_protocol;", "real_ip_header X-Forwarded-For;", "set_real_ip_from 10.0.0.0/8;",
		"default $ingress_reactor_server_port;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
}

// TestUseProxyProtocolThroughNginx: with use-proxy-protocol, the HTTP and HTTPS listeners take the client's
// address and port from a PROXY protocol v1 header of a load balancer in proxy-real-ip-cidr; from other
// senders the connection's address stays; a connection without the header gets no answer.
func TestUseProxyProtocolThroughNginx(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	rt := testRuntime(t, cfg, nil)
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "http")),
		ingress("default", "web", rule("web.example", prefix("/", "web", 80))),
	}, nil)
	apply := func(data map[string]string) {
		t.Helper()
		s, _, problems := ParseSettings(data, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg.Settings = s
		applyModel(t, rt, m, cfg)
	}
	apply(map[string]string{"use-proxy-protocol": "true", "proxy-real-ip-cidr": "127.0.0.1", "compute-full-forwarded-for": "true",
		"use-forwarded-headers": "true"})
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{
		up("default", "web", 80).Name: {echoBackend(t, "web")},
	}); err != nil {
		t.Fatal(err)
	}
	// send writes header (a PROXY line, or nothing) and a GET on a new connection to port.
	send := func(port int, useTLS bool, header string) (echo, error) {
		t.Helper()
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(conn, header); err != nil {
			return echo{}, err
		}
		var c net.Conn = conn
		if useTLS {
			c = tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: "web.example"})
		}
		if _, err := io.WriteString(c, "GET /p HTTP/1.1\r\nHost: web.example\r\nX-Forwarded-For: 198.51.100.1\r\nConnection: close\r\n\r\n"); err != nil {
			return echo{}, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return echo{}, err
		}
		defer resp.Body.Close()
		var e echo
		if resp.StatusCode != http.StatusOK {
			return e, fmt.Errorf("status %d", resp.StatusCode)
		}
		return e, json.NewDecoder(resp.Body).Decode(&e)
	}
	const pp = "PROXY TCP4 203.0.113.7 192.0.2.1 40000 8080\r\n"
	for _, tc := range []struct {
		port  int
		tls   bool
		proto string
	}{{cfg.HTTPPort, false, "http"}, {cfg.HTTPSPort, true, "https"}} {
		e, err := send(tc.port, tc.tls, pp)
		if err != nil {
			t.Fatalf("%s with a PROXY header: %v", tc.proto, err)
		}
		for h, want := range map[string]string{"X-Real-Ip": "203.0.113.7", "X-Forwarded-Port": "8080", "X-Forwarded-Proto": tc.proto,
			"X-Forwarded-For": "198.51.100.1, 203.0.113.7"} {
			if got := e.Header.Get(h); got != want {
				t.Errorf("%s: backend got %s %q, want %q", tc.proto, h, got, want)
			}
		}
		if _, err := send(tc.port, tc.tls, ""); err == nil {
			t.Errorf("%s without a PROXY header: answered", tc.proto)
		}
	}

	// A sender outside proxy-real-ip-cidr: the connection's address stays.
	apply(map[string]string{"use-proxy-protocol": "true", "proxy-real-ip-cidr": "192.0.2.0/24"})
	e, err := send(cfg.HTTPPort, false, pp)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Header.Get("X-Real-Ip"); got != "127.0.0.1" {
		t.Errorf("untrusted sender: X-Real-Ip %q, want the connection's 127.0.0.1", got)
	}
}
