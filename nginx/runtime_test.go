package nginx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// echo is what the test backends answer.
type echo struct {
	Backend string
	Host    string
	Path    string
	Header  http.Header
}

// echoBackend starts an HTTP server on 127.0.0.1 that reports its name and the request it got.
func echoBackend(t *testing.T, name string) Endpoint {
	t.Helper()
	return httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echo{Backend: name, Host: r.Host, Path: r.URL.Path, Header: r.Header})
	})
}

// proxyClient sends every request to NGINX's port, whatever the URL's host, and never follows redirects.
func proxyClient(port int, tlsConf *tls.Config) *http.Client {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			},
			TLSClientConfig:   tlsConf,
			ForceAttemptHTTP2: tlsConf != nil,
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type response struct {
	status int
	echo   echo
	header http.Header
	tls    *tls.ConnectionState
}

func fetch(t *testing.T, c *http.Client, url string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, tls: resp.TLS}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &r.echo); err != nil {
			t.Fatalf("GET %s: body %q: %v", url, body, err)
		}
	}
	return r
}

// eventually polls cond every few milliseconds until it holds or the bound passes.
func eventually(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testRuntime starts nothing yet: NGINX starts at the first Apply.
func testRuntime(t *testing.T, cfg RenderConfig, onReady func(uint64)) *Runtime {
	t.Helper()
	rt, err := NewRuntime(RuntimeConfig{
		Process:     ProcessConfig{Paths: cfg.Paths, Log: zaptest.NewLogger(t), MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
		StatusPort:  cfg.StatusPort,
		StatusToken: cfg.StatusToken,
		OnReady:     onReady,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return rt
}

func applyModel(t *testing.T, rt *Runtime, m Model, cfg RenderConfig) string {
	t.Helper()
	conf, hash, err := Render(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Apply(ctx, conf, hash); err != nil {
		t.Fatal(err)
	}
	if err := rt.Client().ReplaceRoutes(ctx, routeTable(&m)); err != nil {
		t.Fatal(err)
	}
	return hash
}

// TestRuntimeRoutesTraffic runs the data plane for real: NGINX on loopback ports, two backends,
// routes and endpoints pushed through the status server, a reload, a rejected configuration and a crash.
func TestRuntimeRoutesTraffic(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.HTTPSPort = 0
	var ready atomic.Uint64
	rt := testRuntime(t, cfg, func(starts uint64) { ready.Store(starts) })
	ctx := context.Background()

	one := echoBackend(t, "one")
	two := echoBackend(t, "two")
	svcs := []any{service("default", "a", port(80, "http")), service("default", "b", port(80, "http"))}
	upA, upB := up("default", "a", 80).Name, up("default", "b", "http").Name
	m, _ := buildModel(t, append(svcs,
		ingress("default", "a", rule("a.example.com", prefix("/", "a", 80), prefix("/api", "b", "http"), exact("/slash/", "b", "http"))),
		ingress("default", "b", rule("b.example.com", exact("/only", "b", "http"), exact("/dir/", "b", "http"))),
	), nil)
	firstHash := applyModel(t, rt, m, cfg)
	if got, err := rt.Client().ConfigHash(ctx); err != nil || got != firstHash || rt.LiveHash() != firstHash {
		t.Fatalf("live hash %q (%v), runtime says %q, want %q", got, err, rt.LiveHash(), firstHash)
	}
	if err := rt.Ready(); err != nil {
		t.Fatalf("not ready after Apply: %v", err)
	}
	eventually(t, "OnReady after the first start", 5*time.Second, func() bool { return ready.Load() == 1 })

	c := proxyClient(cfg.HTTPPort, nil)
	base := fmt.Sprintf("http://%s:%d", "%s", cfg.HTTPPort)
	url := func(host, path string) string { return fmt.Sprintf(base, host) + path }

	if r := fetch(t, c, url("a.example.com", "/")); r.status != http.StatusServiceUnavailable {
		t.Errorf("no endpoints yet: status %d, want 503", r.status)
	}
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{upA: {one}, upB: {two}}); err != nil {
		t.Fatal(err)
	}

	routes := map[string]struct {
		host, path  string
		wantStatus  int
		wantBackend string
	}{
		"prefix /":                            {"a.example.com", "/", 200, "one"},
		"prefix /api, exact":                  {"a.example.com", "/api", 200, "two"},
		"prefix /api, below":                  {"a.example.com", "/api/v1/x", 200, "two"},
		"prefix is element-wise":              {"a.example.com", "/apix", 200, "one"},
		"exact only matches exactly":          {"b.example.com", "/only", 200, "two"},
		"exact does not match below":          {"b.example.com", "/only/x", 404, ""},
		"host without location: built-in 404": {"b.example.com", "/", 404, ""},
		// NGINX would answer these with a 301 to the path with the slash.
		"exact with a slash; without it: the covering prefix": {"a.example.com", "/slash", 200, "one"},
		"exact with a slash":                           {"a.example.com", "/slash/", 200, "two"},
		"exact with a slash; without it: the fallback": {"b.example.com", "/dir", 404, ""},
		"unknown host: default server 404":             {"c.example.com", "/", 404, ""},
	}
	for name, rc := range routes {
		t.Run(name, func(t *testing.T) {
			r := fetch(t, c, url(rc.host, rc.path))
			if r.status != rc.wantStatus || r.echo.Backend != rc.wantBackend {
				t.Errorf("GET %s%s: %d from %q, want %d from %q", rc.host, rc.path, r.status, r.echo.Backend, rc.wantStatus, rc.wantBackend)
			}
		})
	}

	r := fetch(t, c, url("a.example.com", "/h"), "X-Request-ID", "req-1", "X-Forwarded-For", "6.6.6.6")
	for h, want := range map[string]string{
		"X-Forwarded-Host": fmt.Sprintf("a.example.com:%d", cfg.HTTPPort), "X-Forwarded-Proto": "http",
		"X-Forwarded-Port": strconv.Itoa(cfg.HTTPPort), "X-Real-Ip": "127.0.0.1", "X-Request-Id": "req-1",
		"X-Forwarded-For": "127.0.0.1", // a client cannot spoof it
	} {
		if got := r.echo.Header.Get(h); got != want {
			t.Errorf("backend got %s %q, want %q", h, got, want)
		}
	}
	if r.echo.Host != fmt.Sprintf("a.example.com:%d", cfg.HTTPPort) {
		t.Errorf("backend got Host %q", r.echo.Host)
	}
	if r := fetch(t, c, url("a.example.com", "/ws"), "Upgrade", "websocket", "Connection", "Upgrade"); r.echo.Header.Get("Upgrade") != "websocket" || r.echo.Header.Get("Connection") != "upgrade" {
		t.Errorf("WebSocket upgrade headers not passed: %v", r.echo.Header)
	}
	if r := fetch(t, c, url("a.example.com", "/generated-id")); len(r.echo.Header.Get("X-Request-Id")) != 32 {
		t.Errorf("no generated X-Request-ID: %q", r.echo.Header.Get("X-Request-Id"))
	}

	// Requests without the token (another process on the loopback port) are refused. Writes change
	// nothing (a full push of no upstreams would otherwise remove every endpoint); reads show nothing
	// (Secret names, upstreams, pod addresses).
	unauthorized := func(method, path, token, body string) {
		t.Helper()
		req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.StatusPort, path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set(StatusTokenHeader, token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || strings.Contains(string(got), "ns/") || strings.Contains(string(got), "10.") {
			t.Errorf("%s %s with token %q: status %d %q, want 403 and nothing of the configuration", method, path, token, resp.StatusCode, got)
		}
	}
	for _, token := range []string{"", strings.Repeat("f", 32)} {
		for _, path := range []string{"/healthz", "/configuration/hash", "/configuration/endpoints", "/configuration/certificates", "/nginx_status"} {
			unauthorized(http.MethodGet, path, token, "")
		}
		for _, path := range []string{"/configuration/endpoints", "/configuration/certificates"} {
			unauthorized(http.MethodPost, path, token, `{"full":true,"upstreams":{},"certificates":{},"hosts":{}}`)
		}
	}
	if r := fetch(t, c, url("a.example.com", "/")); r.echo.Backend != "one" {
		t.Errorf("after refused writes: %d from %q, want one", r.status, r.echo.Backend)
	}

	// Endpoint lane: a change routes to the new backend without a reload.
	startsBefore, pidBefore := rt.Process().Starts(), rt.Process().PID()
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{upA: {two}}); err != nil {
		t.Fatal(err)
	}
	if r := fetch(t, c, url("a.example.com", "/")); r.echo.Backend != "two" {
		t.Errorf("after the endpoint change: %q, want two", r.echo.Backend)
	}
	if strings.Contains(rt.Process().RecentOutput(), "reconfiguring") || rt.Process().Starts() != startsBefore || rt.Process().PID() != pidBefore {
		t.Errorf("the endpoint change reloaded or restarted nginx:\n%s", rt.Process().RecentOutput())
	}
	got, err := rt.Client().Endpoints(ctx)
	if err != nil || len(got[upA]) != 1 || got[upA][0] != two || got[upB][0] != two {
		t.Errorf("endpoints read back: %v, %v", got, err)
	}

	// Round robin over two endpoints, and a dead endpoint is skipped by retries.
	dead := Endpoint{Address: "127.0.0.1", Port: int32(freePort(t))}
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{upA: {one, two, dead}}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for range 12 {
		r := fetch(t, c, url("a.example.com", "/rr"))
		if r.status != http.StatusOK {
			t.Fatalf("round robin with a dead endpoint: status %d", r.status)
		}
		seen[r.echo.Backend]++
	}
	if seen["one"] == 0 || seen["two"] == 0 {
		t.Errorf("round robin: %v", seen)
	}

	// A change of routes: a push, live at once, without a reload.
	m2, _ := buildModel(t, append(svcs,
		ingress("default", "a", rule("a.example.com", prefix("/", "a", 80), prefix("/api", "b", "http"), exact("/new", "b", "http"))),
	), nil)
	if err := rt.Client().ReplaceRoutes(ctx, routeTable(&m2)); err != nil {
		t.Fatal(err)
	}
	if r := fetch(t, c, url("b.example.com", "/only")); r.status != http.StatusNotFound {
		t.Errorf("removed Ingress after the route push: %d from %q", r.status, r.echo.Backend)
	}
	if r := fetch(t, c, url("a.example.com", "/new")); r.echo.Backend != "two" {
		t.Errorf("new path after the route push: %d from %q", r.status, r.echo.Backend)
	}
	if strings.Contains(rt.Process().RecentOutput(), "reconfiguring") || rt.Process().Starts() != startsBefore || rt.Process().PID() != pidBefore {
		t.Errorf("the route change reloaded or restarted nginx:\n%s", rt.Process().RecentOutput())
	}

	// A change of nginx.conf: a reload; routes and endpoints survive it.
	cfg.ProxyReadTimeout = 30 * time.Second
	secondHash := applyModel(t, rt, m2, cfg)
	if secondHash == firstHash || rt.Process().Starts() != startsBefore {
		t.Fatalf("reload: hash %s (was %s), starts %d (was %d)", secondHash, firstHash, rt.Process().Starts(), startsBefore)
	}
	if r := fetch(t, c, url("a.example.com", "/new")); r.echo.Backend != "two" {
		t.Errorf("new path after reload: %d from %q", r.status, r.echo.Backend)
	}

	// A configuration that fails nginx -t is rejected with nginx's message; the running one stays.
	bad := []byte(strings.Replace(string(mustRender(t, m2, cfg)), "proxy_redirect off;", "proxy_redirect off; no_such_directive on;", 1))
	err = rt.Apply(ctx, bad, "bad-hash")
	var applyErr *ApplyError
	if !errors.As(err, &applyErr) || applyErr.Stage != "test" || !strings.Contains(err.Error(), `unknown directive "no_such_directive"`) {
		t.Fatalf("bad config: %v", err)
	}
	if rt.LiveHash() != secondHash {
		t.Errorf("after a rejected config the runtime says the live hash is %q, want %q", rt.LiveHash(), secondHash)
	}
	// A keep-alive connection to a worker of the configuration before the reload may still answer
	// once while that worker finishes; NGINX itself must come to the live hash.
	eventually(t, "NGINX to serve the live hash after a rejected config", 5*time.Second, func() bool {
		live, _ := rt.Client().ConfigHash(ctx)
		return live == secondHash
	})
	if r := fetch(t, c, url("a.example.com", "/new")); r.status != http.StatusOK {
		t.Errorf("traffic after a rejected config: %d", r.status)
	}

	// Crash: the Process starts NGINX again; OnReady tells the caller to push endpoints again.
	if err := syscall.Kill(rt.Process().PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "restart after SIGKILL", 10*time.Second, func() bool { return rt.Process().Restarts() == 1 && ready.Load() == 2 })
	if r := fetch(t, c, url("a.example.com", "/")); r.status != http.StatusServiceUnavailable {
		t.Errorf("a restarted nginx starts without endpoints: %d", r.status)
	}
	if err := rt.Client().ReplaceEndpoints(ctx, map[UpstreamName][]Endpoint{upA: {one}, upB: {two}}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Client().ReplaceRoutes(ctx, routeTable(&m2)); err != nil {
		t.Fatal(err)
	}
	if r := fetch(t, c, url("a.example.com", "/")); r.echo.Backend != "one" {
		t.Errorf("after restart and push: %d from %q", r.status, r.echo.Backend)
	}
	if live, _ := rt.Client().ConfigHash(ctx); live != secondHash {
		t.Errorf("restarted with config %q, want the last good %q", live, secondHash)
	}

	// Graceful stop: the ports are free afterwards.
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rt.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if rt.Process().Running() || rt.Ready() == nil {
		t.Error("still running after Stop")
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", cfg.HTTPPort))
	if err != nil {
		t.Fatalf("HTTP port still taken after Stop: %v", err)
	}
	l.Close()
	// A late Apply (shutdown racing the structure lane) must not start NGINX again.
	conf, hash := mustRenderHash(t, m, cfg)
	if err := rt.Apply(ctx, conf, hash); !errors.Is(err, ErrStopped) || rt.Process().Running() {
		t.Errorf("Apply after Stop: %v, running %v", err, rt.Process().Running())
	}
}

func mustRender(t *testing.T, m Model, cfg RenderConfig) []byte {
	t.Helper()
	conf, _, err := Render(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// TestRuntimeTLS checks certificates per SNI name from the shared dict, the default certificate,
// rotation without reload and the HTTP to HTTPS redirect.
func TestRuntimeTLS(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	one := echoBackend(t, "one")

	m, _ := buildModel(t, []any{
		service("default", "a", port(80, "")),
		ingress("default", "a",
			rule("a.example.com", prefix("/", "a", 80)),
			rule("w.example.net", prefix("/", "a", 80)),
			rule("plain.example.com", prefix("/", "a", 80)),
			withTLS("a-cert", "a.example.com"),
			withTLS("wild-cert", "*.example.net"),
		),
	}, nil)
	applyModel(t, rt, m, cfg)
	upA := up("default", "a", 80).Name
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{upA: {one}}); err != nil {
		t.Fatal(err)
	}
	certA, keyA, _, _ := selfSigned(t, paths.Prefix, "a1", "a.example.com")
	wildCert, wildKey, _, _ := selfSigned(t, paths.Prefix, "wild", "*.example.net")
	hosts := map[Hostname]string{}
	for h, secret := range m.TLSHosts() {
		hosts[h] = CertificateID(secret)
	}
	// The model only has the server w.example.net; the wildcard TLS entry covers it and the data
	// plane resolves SNI names with the same rule.
	if hosts["w.example.net"] != "default/wild-cert" || hosts["a.example.com"] != "default/a-cert" || len(hosts) != 2 {
		t.Fatalf("TLS hosts from the model: %v", hosts)
	}
	err := rt.Client().ReplaceCertificates(ctx, CertificateUpdate{
		Certificates: map[string]*CertificatePEM{"default/a-cert": {Cert: certA, Key: keyA}, "default/wild-cert": {Cert: wildCert, Key: wildKey}},
		Hosts:        map[Hostname]string{"a.example.com": "default/a-cert", "*.example.net": "default/wild-cert"},
	})
	if err != nil {
		t.Fatal(err)
	}

	c := proxyClient(cfg.HTTPSPort, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
	served := func(host string) (string, response) {
		r := fetch(t, c, fmt.Sprintf("https://%s:%d/", host, cfg.HTTPSPort))
		return r.tls.PeerCertificates[0].Subject.CommonName, r
	}
	for host, wantCN := range map[string]string{
		"a.example.com":     "a.example.com",
		"x.example.net":     "*.example.net",
		"plain.example.com": "ingress-reactor-default",
		"unknown.test":      "ingress-reactor-default",
	} {
		if cn, r := served(host); cn != wantCN {
			t.Errorf("SNI %s: certificate %q, want %q (status %d)", host, cn, wantCN, r.status)
		}
	}
	if _, r := served("a.example.com"); r.status != http.StatusOK || r.echo.Backend != "one" || r.tls.NegotiatedProtocol != "h2" ||
		r.echo.Header.Get("X-Forwarded-Proto") != "https" || r.tls.Version < tls.VersionTLS12 {
		t.Errorf("HTTPS request: status %d, backend %q, ALPN %q, proto header %q", r.status, r.echo.Backend, r.tls.NegotiatedProtocol, r.echo.Header.Get("X-Forwarded-Proto"))
	}
	tls11 := proxyClient(cfg.HTTPSPort, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11})
	if _, err := tls11.Get(fmt.Sprintf("https://a.example.com:%d/", cfg.HTTPSPort)); err == nil {
		t.Error("TLS 1.1 was accepted")
	}

	// Rotation: the new certificate is served without a reload.
	starts := rt.Process().Starts()
	certA2, keyA2, _, _ := selfSigned(t, paths.Prefix, "a2", "a.example.com", "rotated.example.com")
	if err := rt.Client().PushCertificates(ctx, CertificateUpdate{Certificates: map[string]*CertificatePEM{"default/a-cert": {Cert: certA2, Key: keyA2}}}); err != nil {
		t.Fatal(err)
	}
	_, r := served("a.example.com")
	if want := parseCert(t, certA2); !r.tls.PeerCertificates[0].Equal(want) {
		t.Error("rotated certificate not served")
	}
	if rt.Process().Starts() != starts || strings.Contains(rt.Process().RecentOutput(), "reconfiguring") {
		t.Error("rotation reloaded nginx")
	}

	// A broken push is refused as a whole, and the hosts keep their certificates.
	err = rt.Client().PushCertificates(ctx, CertificateUpdate{Certificates: map[string]*CertificatePEM{"default/a-cert": {Cert: []byte("junk"), Key: keyA2}}})
	if err == nil || !strings.Contains(err.Error(), "cannot parse the certificate chain") {
		t.Errorf("junk certificate: %v", err)
	}
	if err := rt.Client().PushCertificates(ctx, CertificateUpdate{Hosts: map[Hostname]string{"b.example.com": "default/none"}}); err == nil {
		t.Error("a host naming an unknown certificate was accepted")
	}
	if cn, _ := served("a.example.com"); cn != "a.example.com" {
		t.Errorf("after rejected pushes: %q", cn)
	}
	// Removing the host falls back to the default certificate.
	if err := rt.Client().PushCertificates(ctx, CertificateUpdate{Hosts: map[Hostname]string{"a.example.com": ""}}); err != nil {
		t.Fatal(err)
	}
	if cn, _ := served("a.example.com"); cn != "ingress-reactor-default" {
		t.Errorf("after removing the host: %q", cn)
	}
	if hosts, err := rt.Client().CertificateHosts(ctx); err != nil || len(hosts) != 1 || hosts["*.example.net"] != "default/wild-cert" {
		t.Errorf("hosts read back: %v %v", hosts, err)
	}

	// Plain HTTP: TLS hosts redirect with 308 (keeping path and query), others are served.
	h := proxyClient(cfg.HTTPPort, nil)
	r = fetch(t, h, fmt.Sprintf("http://a.example.com:%d/x?y=1", cfg.HTTPPort))
	if want := fmt.Sprintf("https://a.example.com:%d/x?y=1", cfg.HTTPSPort); r.status != http.StatusPermanentRedirect || r.header.Get("Location") != want {
		t.Errorf("redirect: %d to %q, want 308 to %q", r.status, r.header.Get("Location"), want)
	}
	if r := fetch(t, h, fmt.Sprintf("http://plain.example.com:%d/", cfg.HTTPPort)); r.status != http.StatusOK {
		t.Errorf("a host without TLS: %d, want 200", r.status)
	}
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRuntimeLoadFailures covers configurations that pass nginx -t but that NGINX cannot load.
func TestRuntimeLoadFailures(t *testing.T) {
	requireNginx(t)
	ctx := context.Background()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	newRuntime := func(t *testing.T, cfg RenderConfig) *Runtime {
		rt, err := NewRuntime(RuntimeConfig{
			Process:        ProcessConfig{Paths: cfg.Paths, Log: zaptest.NewLogger(t), MinBackoff: 10 * time.Millisecond, MaxFailures: 2},
			StatusPort:     cfg.StatusPort,
			StatusToken:    cfg.StatusToken,
			ConfirmTimeout: 2 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Stop(context.Background()) })
		return rt
	}

	t.Run("first start on a taken port", func(t *testing.T) {
		cfg := testRenderConfig(t, nginxDir(t))
		cfg.HTTPSPort = 0
		cfg.HTTPPort = takenPort
		rt := newRuntime(t, cfg)
		conf, hash := mustRenderHash(t, Model{}, cfg)
		err := rt.Apply(ctx, conf, hash)
		var applyErr *ApplyError
		if !errors.As(err, &applyErr) || applyErr.Stage != "confirm" || !strings.Contains(err.Error(), "Address already in use") {
			t.Fatalf("Apply: %v", err)
		}
		if strings.Contains(err.Error(), "not live after") {
			t.Errorf("Apply waited for ConfirmTimeout although NGINX had refused the configuration: %v", err)
		}
		t.Logf("Apply error: %v", err)
		if rt.Ready() == nil || rt.LiveHash() != "" {
			t.Error("ready without a live configuration")
		}
	})

	t.Run("reload onto a taken port keeps the old configuration", func(t *testing.T) {
		cfg := testRenderConfig(t, nginxDir(t))
		cfg.HTTPSPort = 0
		rt := newRuntime(t, cfg)
		good, goodHash := mustRenderHash(t, Model{}, cfg)
		if err := rt.Apply(ctx, good, goodHash); err != nil {
			t.Fatal(err)
		}
		bad := cfg
		bad.HTTPPort = takenPort
		conf, hash := mustRenderHash(t, Model{}, bad)
		err := rt.Apply(ctx, conf, hash)
		var applyErr *ApplyError
		if !errors.As(err, &applyErr) || applyErr.Stage != "confirm" || !strings.Contains(err.Error(), "Address already in use") {
			t.Fatalf("Apply: %v", err)
		}
		if strings.Contains(err.Error(), "not live after") {
			t.Errorf("Apply waited for ConfirmTimeout although NGINX had refused the configuration: %v", err)
		}
		t.Logf("Apply error: %v", err)
		if live, _ := rt.Client().ConfigHash(ctx); live != goodHash || rt.LiveHash() != goodHash {
			t.Errorf("live %q, runtime %q, want the old %q", live, rt.LiveHash(), goodHash)
		}
		onDisk, _ := os.ReadFile(cfg.Paths.ConfFile())
		if string(onDisk) != string(good) {
			t.Error("nginx.conf was not restored: a restart would load the broken configuration")
		}
		if err := rt.Ready(); err != nil {
			t.Errorf("not ready after a failed reload: %v", err)
		}
	})
}

func mustRenderHash(t *testing.T, m Model, cfg RenderConfig) ([]byte, string) {
	t.Helper()
	conf, hash, err := Render(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conf, hash
}

func TestPrepareRefusesUnreachablePrefix(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root's workers change user")
	}
	parent, err := os.MkdirTemp("", "ingress-reactor-prefix-test-") // 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	_, err = NewRuntime(RuntimeConfig{Process: ProcessConfig{Paths: Paths{Prefix: parent + "/nginx"}}, StatusPort: 1})
	if err == nil || !strings.Contains(err.Error(), "has mode 0700; make it traversable by others") {
		t.Fatalf("err = %v", err)
	}
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRuntime(RuntimeConfig{Process: ProcessConfig{Paths: Paths{Prefix: parent + "/nginx"}}, StatusPort: 1}); err != nil {
		t.Fatalf("traversable parent: %v", err)
	}
}
