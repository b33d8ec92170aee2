package nginx

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// The tests in this file record what the installed NGINX and lua-nginx-module do with client
// certificates asked for per SNI name from ssl_certificate_by_lua (ngx.ssl.verify_client): the facts
// that the auth-tls-* annotations (refused for now, #16) would be built on. They run a minimal NGINX
// of their own, shaped as ours is (one catch-all TLS server, a shared session cache, no tickets), so
// that they say what the platform does, not what our configuration does.

// clientCertNginx runs NGINX with one TLS server that asks for a client certificate of ca only for the
// SNI name "a.test", and answers every request with what NGINX knows of the client certificate.
// sessionCache is the server's ssl_session_cache ("shared:SSL:1m" as ours, or "off").
func clientCertNginx(t *testing.T, ca *testCA, sessionCache string) int {
	t.Helper()
	bin := requireNginx(t)
	paths := nginxDir(t)
	dir := paths.Prefix
	mods, err := DetectModules(false)
	if err != nil {
		t.Fatal(err)
	}
	_, _, crt, key := selfSigned(t, dir, "server", "a.test", "b.test")
	caFile := filepath.Join(dir, "client-ca.crt")
	if err := os.WriteFile(caFile, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	var loads strings.Builder
	for _, m := range mods {
		fmt.Fprintf(&loads, "load_module %s;\n", m)
	}
	conf := fmt.Sprintf(`%s
daemon off;
master_process off;
error_log %[2]s/error.log info;
pid %[2]s/nginx.pid;
events {}
http {
	access_log off;
	client_body_temp_path %[2]s/body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	init_by_lua_block {
		local f = assert(io.open(%[3]q))
		CLIENT_CA = f:read("*a")
		f:close()
	}
	server {
		listen 127.0.0.1:%[4]d ssl;
		ssl_protocols TLSv1.2 TLSv1.3;
		ssl_session_cache %[7]s;
		ssl_session_tickets off;
		ssl_certificate %[5]s;
		ssl_certificate_key %[6]s;
		ssl_certificate_by_lua_block {
			local ssl = require("ngx.ssl")
			if ssl.server_name() == "a.test" then
				local ca = assert(ssl.parse_pem_cert(CLIENT_CA))
				local ok, err = ssl.verify_client(ca, 2)
				if not ok then
					ngx.log(ngx.ERR, "verify_client: ", err)
					return ngx.exit(ngx.ERROR)
				end
			end
		}
		location / {
			content_by_lua_block {
				ngx.say("sni=", ngx.var.ssl_server_name, " verify=", ngx.var.ssl_client_verify,
					" subject=", ngx.var.ssl_client_s_dn, " reused=", ngx.var.ssl_session_reused)
			}
		}
	}
}
`, loads.String(), dir, caFile, port, crt, key, sessionCache)
	confFile := filepath.Join(dir, "client-cert.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confFile)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", out, log)
		}
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
			return port
		}
		if i == 200 {
			t.Fatalf("nginx does not listen on %d: %v\n%s", port, err, out)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// clientCertAnswer is one request's outcome: what NGINX said of the client certificate, and the
// acceptable CA names of the server's certificate request (nil when it asked for none).
type clientCertAnswer struct {
	body      string
	requested bool
	caNames   int
	resumed   bool
}

// clientCertGet makes one request to sni over its own connection, offering cert when the server asks.
func clientCertGet(t *testing.T, port int, sni string, cert *tls.Certificate, cfg *tls.Config) clientCertAnswer {
	t.Helper()
	var ans clientCertAnswer
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg.ServerName = sni
	cfg.InsecureSkipVerify = true
	cfg.GetClientCertificate = func(info *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		ans.requested = true
		ans.caNames = len(info.AcceptableCAs)
		if cert == nil {
			return &tls.Certificate{}, nil
		}
		return cert, nil
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cfg)
	if err != nil {
		t.Fatalf("handshake for %s: %v", sni, err)
	}
	defer conn.Close()
	ans.resumed = conn.ConnectionState().DidResume
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", sni); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("response for %s: %v", sni, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d for %s: %s", resp.StatusCode, sni, body)
	}
	ans.body = strings.TrimSpace(string(body))
	return ans
}

// clientPair is a client certificate of ca for the common name cn.
func clientPair(t *testing.T, ca *testCA, cn string) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, false, cn)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// TestVerifyClientPerSNIName: ngx.ssl.verify_client asks for a client certificate only on the
// handshakes of the names it is called for, with the CA's name in the request, and leaves the verdict
// to $ssl_client_verify (the handshake itself succeeds with no or a wrong certificate), which a
// router would check per request.
func TestVerifyClientPerSNIName(t *testing.T) {
	good := newTestCA(t, "good-ca")
	bad := newTestCA(t, "bad-ca")
	port := clientCertNginx(t, good, "shared:SSL:1m")
	alice := clientPair(t, good, "alice")
	mallory := clientPair(t, bad, "mallory")

	for name, tc := range map[string]struct {
		sni       string
		cert      *tls.Certificate
		requested bool
		prefix    string
	}{
		"no certificate":        {sni: "a.test", requested: true, prefix: "sni=a.test verify=NONE subject=nil "},
		"certificate of the CA": {sni: "a.test", cert: alice, requested: true, prefix: "sni=a.test verify=SUCCESS subject=CN=alice "},
		"certificate of another CA": {sni: "a.test", cert: mallory, requested: true,
			prefix: "sni=a.test verify=FAILED:unable to verify the first certificate subject=CN=mallory "},
		"other name is not asked": {sni: "b.test", cert: alice, prefix: "sni=b.test verify=NONE subject=nil "},
	} {
		t.Run(name, func(t *testing.T) {
			ans := clientCertGet(t, port, tc.sni, tc.cert, nil)
			if ans.requested != tc.requested {
				t.Errorf("certificate requested = %v, want %v", ans.requested, tc.requested)
			}
			if tc.requested && ans.caNames != 1 {
				t.Errorf("the request names %d CAs, want the one CA", ans.caNames)
			}
			if !strings.HasPrefix(ans.body, tc.prefix) {
				t.Errorf("NGINX says %q, want it to start with %q", ans.body, tc.prefix)
			}
		})
	}
}

// oneSessionCache hands the last session it was given to every server name: a client that offers the
// session of one name on the handshake of another.
type oneSessionCache struct {
	mu      sync.Mutex
	session *tls.ClientSessionState
}

func (c *oneSessionCache) Get(string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session, c.session != nil
}

func (c *oneSessionCache) Put(_ string, s *tls.ClientSessionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s != nil {
		c.session = s
	}
}

// TestVerifyClientSessionCrossesSNINames is why the auth-tls-* annotations stay refused: with one TLS
// server for every host, NGINX's session cache resumes a TLS 1.3 session that verified a client
// certificate for one name on the handshake of ANOTHER name, without ssl_certificate_by_lua (so
// without verify_client) and with $ssl_server_name already the new name, while $ssl_client_verify
// still says SUCCESS. A router that trusts $ssl_client_verify for the host of $ssl_server_name would
// admit a certificate of one host's CA on another host. (ingress-nginx has one server per host, each
// with its own session id context, so its sessions do not cross hosts.)
func TestVerifyClientSessionCrossesSNINames(t *testing.T) {
	good := newTestCA(t, "good-ca")
	port := clientCertNginx(t, good, "shared:SSL:1m")
	alice := clientPair(t, good, "alice")

	cache := &oneSessionCache{}
	cfg := func() *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS13, ClientSessionCache: cache}
	}
	first := clientCertGet(t, port, "a.test", alice, cfg())
	if first.resumed || !strings.HasPrefix(first.body, "sni=a.test verify=SUCCESS subject=CN=alice ") {
		t.Fatalf("first handshake: resumed %v, NGINX says %q", first.resumed, first.body)
	}
	if cache.session == nil {
		t.Fatal("NGINX gave no TLS 1.3 session to resume")
	}
	other := clientCertGet(t, port, "b.test", nil, cfg())
	if !other.resumed || other.requested {
		t.Fatalf("handshake for b.test: resumed %v, certificate requested %v; want a resumed session without a request", other.resumed, other.requested)
	}
	if want := "sni=b.test verify=SUCCESS subject=CN=alice reused=r"; other.body != want {
		t.Errorf("NGINX says %q, want %q", other.body, want)
	}
}

// TestVerifyClientWithoutSessionCache: with ssl_session_cache off (and tickets off, as ours), NGINX
// resumes no session, so every handshake runs ssl_certificate_by_lua and verify_client again: the
// mitigation a client-certificate implementation on one TLS server needs (or a session cache in Lua
// that refuses to resume a session on another name or an older CA).
func TestVerifyClientWithoutSessionCache(t *testing.T) {
	good := newTestCA(t, "good-ca")
	port := clientCertNginx(t, good, "off")
	alice := clientPair(t, good, "alice")

	cache := &oneSessionCache{}
	cfg := func() *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS13, ClientSessionCache: cache}
	}
	first := clientCertGet(t, port, "a.test", alice, cfg())
	if !strings.HasPrefix(first.body, "sni=a.test verify=SUCCESS subject=CN=alice ") {
		t.Fatalf("first handshake: NGINX says %q", first.body)
	}
	for _, sni := range []string{"b.test", "a.test"} {
		again := clientCertGet(t, port, sni, nil, cfg())
		if again.resumed {
			t.Errorf("handshake for %s resumed a session", sni)
		}
		if want := "sni=" + sni + " verify=NONE subject=nil reused=."; again.body != want {
			t.Errorf("NGINX says %q, want %q", again.body, want)
		}
	}
}

// clientCertRequest is one HTTPS request of TestClientCertThroughNginx and what came of it.
type clientCertRequest struct {
	status    int
	location  string
	requested bool
	resumed   bool
	backend   http.Header // the headers the backend got; nil when it got nothing
}

// TestClientCertThroughNginx: auth-tls-* through the Lua router and ngx.ssl.verify_client in a real
// NGINX, with the status codes of ingress-nginx (400 without or with an unverified certificate, or a
// 302 to the error page; 403 when the CN does not match), the ssl-client-* headers the backend gets, a
// path of an Ingress without auth-tls on the same host, a host without auth-tls (never asked), a
// connection negotiated for another name (421), and no session resumption across names.
func TestClientCertThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	good := newTestCA(t, "good-ca")
	bad := newTestCA(t, "bad-ca")
	alice, carol := clientPair(t, good, "alice"), clientPair(t, good, "carol")
	mallory := clientPair(t, bad, "mallory")
	app := echoBackend(t, "app")
	secrets := secretLookup{nn("default", "client-ca"): clientCASecret("client-ca", map[string][]byte{"ca.crt": good.pem})}
	svcs := servicesOf(service("default", "app", port(80, "http")))
	tlsAnn := func(kv ...string) ingressOption {
		return annotate(append([]string{AnnotationAuthTLSSecret, "client-ca"}, kv...)...)
	}
	ings := []*networkingv1.Ingress{
		ingress("default", "mtls", tlsAnn(AnnotationAuthTLSPassCert, "true"), rule("mtls.example.com", prefix("/", "app", 80))),
		ingress("default", "mtls-cn", tlsAnn(AnnotationAuthTLSMatchCN, "CN=(alice|bob)$"), rule("mtls.example.com", prefix("/cn", "app", 80))),
		ingress("default", "mtls-open", rule("mtls.example.com", prefix("/open", "app", 80))),
		ingress("default", "errpage", tlsAnn(AnnotationAuthTLSErrorPage, "https://errors.example.com/cert"), rule("err.example.com", prefix("/", "app", 80))),
		ingress("default", "opt", tlsAnn(AnnotationAuthTLSVerifyClient, "optional"), rule("opt.example.com", prefix("/", "app", 80))),
		ingress("default", "noca", tlsAnn(AnnotationAuthTLSVerifyClient, "optional_no_ca"), rule("noca.example.com", prefix("/", "app", 80))),
		ingress("default", "plain", rule("plain.example.com", prefix("/", "app", 80))),
		ingress("default", "fallback", tlsAnn(AnnotationDefaultBackend, "app"), rule("fb.example.com", prefix("/x", "app", 80))),
	}
	build := NewModelBuilder().Build(BuildInput{Ingresses: ings, Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 || len(build.Conflicts) != 0 {
		t.Fatalf("rejected %+v, conflicts %+v", build.Rejected, build.Conflicts)
	}
	applyModel(t, rt, build.Model, cfg)
	if err := rt.Client().ReplaceCertificates(ctx, CertificateUpdate{}); err != nil { // the default certificate, filled
		t.Fatal(err)
	}
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}

	cache := &oneSessionCache{}
	do := func(sni, host, path string, cert *tls.Certificate, header map[string]string) clientCertRequest {
		t.Helper()
		var out clientCertRequest
		conf := &tls.Config{ServerName: sni, InsecureSkipVerify: true, ClientSessionCache: cache,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				out.requested = true
				if cert == nil {
					return &tls.Certificate{}, nil
				}
				return cert, nil
			}}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.HTTPSPort)), conf)
		if err != nil {
			t.Fatalf("handshake for %s: %v", sni, err)
		}
		defer conn.Close()
		out.resumed = conn.ConnectionState().DidResume
		req, _ := http.NewRequest("GET", "https://"+host+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			t.Fatalf("%s%s: %v", host, path, err)
		}
		defer resp.Body.Close()
		out.status, out.location = resp.StatusCode, resp.Header.Get("Location")
		var e echo
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("%s%s: the answer is not the backend's: %v", host, path, err)
			}
			out.backend = e.Header
		}
		return out
	}
	want := func(got clientCertRequest, status int, what string) {
		t.Helper()
		if got.status != status {
			t.Fatalf("%s: %d, want %d", what, got.status, status)
		}
	}

	// auth-tls-verify-client on: no certificate, or one of another CA, gets 400.
	r := do("mtls.example.com", "mtls.example.com", "/", nil, nil)
	want(r, http.StatusBadRequest, "no certificate")
	if !r.requested {
		t.Fatal("the handshake of a host with auth-tls-secret asked for no certificate")
	}
	want(do("mtls.example.com", "mtls.example.com", "/", mallory, nil), http.StatusBadRequest, "a certificate of another CA")
	// The CA's certificate passes, and the backend gets the connection's verdict, not the client's
	// headers.
	r = do("mtls.example.com", "mtls.example.com", "/", alice, map[string]string{"ssl-client-verify": "FORGED", "ssl-client-subject-dn": "CN=admin"})
	want(r, http.StatusOK, "the CA's certificate")
	if v, s, i := r.backend.Get("ssl-client-verify"), r.backend.Get("ssl-client-subject-dn"), r.backend.Get("ssl-client-issuer-dn"); v != "SUCCESS" || s != "CN=alice" || i != "CN=good-ca" {
		t.Fatalf("the backend got verify %q subject %q issuer %q", v, s, i)
	}
	pemText, err := url.QueryUnescape(r.backend.Get("ssl-client-cert"))
	if err != nil || !strings.Contains(r.backend.Get("ssl-client-cert"), "-----BEGIN%20CERTIFICATE-----%0A") {
		t.Fatalf("ssl-client-cert %.80q is not the URL-escaped PEM (%v)", r.backend.Get("ssl-client-cert"), err)
	}
	if block, _ := pem.Decode([]byte(pemText)); block == nil || !bytes.Equal(block.Bytes, alice.Certificate[0]) {
		t.Fatal("ssl-client-cert is not the client's certificate")
	}
	// auth-tls-match-cn: alice matches, carol (same CA) gets 403; without pass-certificate the client's
	// own ssl-client-cert is removed.
	r = do("mtls.example.com", "mtls.example.com", "/cn", alice, map[string]string{"ssl-client-cert": "forged"})
	want(r, http.StatusOK, "a matching CN")
	if _, ok := r.backend["Ssl-Client-Cert"]; ok {
		t.Fatalf("the backend got ssl-client-cert %q without auth-tls-pass-certificate-to-upstream", r.backend.Get("ssl-client-cert"))
	}
	want(do("mtls.example.com", "mtls.example.com", "/cn", carol, nil), http.StatusForbidden, "a CN that does not match")
	want(do("mtls.example.com", "mtls.example.com", "/cn", nil, nil), http.StatusBadRequest, "no certificate on a match-cn path")
	// A path of an Ingress without auth-tls on the same host is neither opened nor closed by it.
	// A client's own ssl-client-* headers never reach its backend as a verdict.
	r = do("mtls.example.com", "mtls.example.com", "/open", nil, map[string]string{"ssl-client-verify": "SUCCESS", "ssl-client-subject-dn": "CN=admin"})
	want(r, http.StatusOK, "an Ingress without auth-tls on the host")
	if v, dn := r.backend.Get("ssl-client-verify"), r.backend.Get("ssl-client-subject-dn"); v != "" || dn != "" {
		t.Fatalf("the open path's backend got the client's ssl-client-verify %q, ssl-client-subject-dn %q", v, dn)
	}
	// Plain HTTP carries no certificate.
	resp, err := proxyClient(cfg.HTTPPort, nil).Get("http://mtls.example.com/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP: %d, want 400", resp.StatusCode)
	}

	// auth-tls-error-page: a 302 to it instead of the 400.
	r = do("err.example.com", "err.example.com", "/", nil, nil)
	if r.status != http.StatusFound || r.location != "https://errors.example.com/cert" {
		t.Fatalf("error page: %d %q, want 302 to it", r.status, r.location)
	}
	want(do("err.example.com", "err.example.com", "/", alice, nil), http.StatusOK, "the CA's certificate with an error page")
	// optional: no certificate passes (verify NONE), another CA's does not; optional_no_ca passes it.
	r = do("opt.example.com", "opt.example.com", "/", nil, nil)
	want(r, http.StatusOK, "optional without a certificate")
	if v := r.backend.Get("ssl-client-verify"); v != "NONE" {
		t.Fatalf("optional without a certificate: ssl-client-verify %q", v)
	}
	want(do("opt.example.com", "opt.example.com", "/", mallory, nil), http.StatusBadRequest, "optional with another CA's certificate")
	r = do("noca.example.com", "noca.example.com", "/", mallory, nil)
	want(r, http.StatusOK, "optional_no_ca with another CA's certificate")
	if v := r.backend.Get("ssl-client-verify"); !strings.HasPrefix(v, "FAILED:") || r.backend.Get("ssl-client-subject-dn") != "CN=mallory" {
		t.Fatalf("optional_no_ca: ssl-client-verify %q", v)
	}

	// The fallback of an Ingress's default-backend (a path it does not list) is checked as its paths are.
	want(do("fb.example.com", "fb.example.com", "/elsewhere", nil, nil), http.StatusBadRequest, "the default-backend fallback without a certificate")
	want(do("fb.example.com", "fb.example.com", "/elsewhere", alice, nil), http.StatusOK, "the default-backend fallback with the CA's certificate")

	// A host without auth-tls never asks.
	r = do("plain.example.com", "plain.example.com", "/", alice, nil)
	want(r, http.StatusOK, "a host without auth-tls")
	if r.requested {
		t.Fatal("a host without auth-tls asked for a client certificate")
	}
	// A connection negotiated for that host does not reach the mTLS host (421), even with a certificate
	// of the CA: nothing verified it.
	want(do("plain.example.com", "mtls.example.com", "/", alice, nil), http.StatusMisdirectedRequest, "another name's connection")

	// No session resumption: a session of the mTLS host is not resumed under the plain host's name nor
	// its own, so every handshake verifies again.
	_ = do("mtls.example.com", "mtls.example.com", "/", alice, nil)
	for _, sni := range []string{"plain.example.com", "mtls.example.com"} {
		if r := do(sni, sni, "/", nil, nil); r.resumed {
			t.Fatalf("a TLS session was resumed for %s", sni)
		}
	}

	// The router checks what it is pushed: a route naming a CA the host lacks, a CA that is no PEM, a
	// mode it does not know, a match-cn that does not compile.
	ca := `"client_ca":{"id":"ab","pem":` + strconv.Quote(string(good.pem)) + `,"depth":1},`
	for _, bad := range []string{
		ca + `"routes":[{"path":"/","upstream":"","client_cert":{"mode":"on","ca":"cd"}}]`,
		`"routes":[{"path":"/","upstream":"","client_cert":{"mode":"on","ca":"ab"}}]`,
		`"client_ca":{"id":"ab","pem":"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n","depth":1},"routes":[]`,
		`"client_ca":{"id":"ab","pem":` + strconv.Quote(string(good.pem)) + `,"depth":0},"routes":[]`,
		ca + `"routes":[{"path":"/","upstream":"","client_cert":{"mode":"sometimes","ca":"ab"}}]`,
		ca + `"routes":[{"path":"/","upstream":"","client_cert":{"mode":"on","ca":"ab","match_cn":"CN=(a"}}]`,
		ca + `"routes":[{"path":"/","upstream":"","client_cert":{"mode":"on","ca":"ab","error_page":"https://e/\r\nX: 1"}}]`,
	} {
		err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{"evil.example.com": []byte("{" + bad + "}")}})
		if refused, ok := errors.AsType[*RoutesRefusedError](err); !ok || len(refused.Refused) != 1 {
			t.Errorf("%.120s: push answered %v, want the host refused", bad, err)
		}
	}
}
