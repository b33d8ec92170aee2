package nginx

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests in this file run the embedded Lua (nginx/lua) in a real NGINX: full shared dicts and
// retries after failed endpoints.

// statusAnswer is what a POST to the status server answered.
type statusAnswer struct {
	Status         int
	Error          string   `json:"error"`
	Changed        int      `json:"changed"`
	Removed        int      `json:"removed"`
	NotStored      []string `json:"not_stored"`
	HostsNotStored []string `json:"hosts_not_stored"`
}

// postStatus posts body to the status server as the controller does and returns the whole answer, which
// Client reduces to an error.
func postStatus(t *testing.T, cfg RenderConfig, path string, body any) statusAnswer {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.StatusPort, path), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(StatusTokenHeader, cfg.StatusToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := statusAnswer{Status: resp.StatusCode}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("POST %s: %d %q: %v", path, resp.StatusCode, raw, err)
	}
	return a
}

// bulkyCertificate returns a self-signed ECDSA certificate for host whose PEM is about padKB larger than
// usual (extra DNS names), so that a small shared dict fills with few certificates. dir takes its files.
func bulkyCertificate(t *testing.T, dir, host string, padKB int) *CertificatePEM {
	t.Helper()
	names := []string{host}
	for i := 0; len(names)*24 < padKB*1024*3/4; i++ {
		names = append(names, fmt.Sprintf("pad-%06d.%s", i, host))
	}
	cert, key, _, _ := selfSigned(t, dir, "bulky", names...)
	return &CertificatePEM{Cert: cert, Key: key}
}

// certificatesBody is the JSON of a certificates push; a nil certificate or an empty host id removes.
func certificatesBody(full bool, certs map[string]*CertificatePEM, hosts map[string]string) map[string]any {
	cs := map[string]any{}
	for id, c := range certs {
		if c == nil {
			cs[id] = nil
			continue
		}
		cs[id] = map[string]string{"cert": string(c.Cert), "key": string(c.Key)}
	}
	hs := map[string]any{}
	for h, id := range hosts {
		if id == "" {
			hs[h] = nil
			continue
		}
		hs[h] = id
	}
	return map[string]any{"full": full, "certificates": cs, "hosts": hs}
}

// servedCommonName returns the common name of the certificate NGINX presents for SNI name host.
func servedCommonName(t *testing.T, cfg RenderConfig, host string) string {
	t.Helper()
	return servedCertificate(t, cfg, host).Subject.CommonName
}

// servedCertificate returns the certificate NGINX presents for SNI name host.
func servedCertificate(t *testing.T, cfg RenderConfig, host string) *x509.Certificate {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.HTTPSPort)),
		&tls.Config{ServerName: host, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS handshake for %s: %v", host, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// TestCertificatesDictFull fills a 1 MB certificates dict: whatever fits must be live, what does not is
// reported with the flag to raise, removals make room first, and a rotation that does not fit keeps the
// previous certificate.
func TestCertificatesDictFull(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.CertificatesDictMB = 1
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	m, _ := buildModel(t, []any{service("default", "a", port(80, "")), ingress("default", "a", rule("a.example.com", prefix("/", "a", 80)))}, nil)
	applyModel(t, rt, m, cfg)

	// About 10 KB of DER per certificate, three pages of the dict: some 80 fit into 1 MB, not 100.
	const total = 100
	certs := map[string]*CertificatePEM{}
	hosts := map[string]string{}
	hostOf := func(i int) string { return fmt.Sprintf("h%03d.example.com", i) }
	idOf := func(i int) string { return fmt.Sprintf("default/c%03d", i) }
	for i := range total {
		certs[idOf(i)] = bulkyCertificate(t, paths.Prefix, hostOf(i), 10)
		hosts[hostOf(i)] = idOf(i)
	}

	// A full push after a (re)start: everything that fits is served, the rest is reported.
	full := postStatus(t, cfg, "/configuration/certificates", certificatesBody(true, certs, hosts))
	if full.Status != http.StatusInsufficientStorage || len(full.NotStored) == 0 || len(full.NotStored) == total ||
		!strings.Contains(full.Error, "certificates dict full") || !strings.Contains(full.Error, "raise --certificates-dict-size (now 1 MB)") {
		t.Fatalf("full push beyond the dict: %+v", full)
	}
	t.Logf("%d of %d certificates of %d bytes (PEM) fit into 1 MB: %s", total-len(full.NotStored), total,
		len(certs[idOf(0)].Cert)+len(certs[idOf(0)].Key), full.Error)
	live, err := rt.Client().CertificateHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stored []int
	for i := range total {
		switch {
		case slices.Contains(full.NotStored, idOf(i)):
			if _, ok := live[Hostname(hostOf(i))]; ok {
				t.Errorf("host %s names certificate %s, which did not fit", hostOf(i), idOf(i))
			}
		case live[Hostname(hostOf(i))] != idOf(i):
			t.Errorf("certificate %s was stored, but its host %s names %q", idOf(i), hostOf(i), live[Hostname(hostOf(i))])
		default:
			stored = append(stored, i)
		}
	}
	if len(stored)+len(full.NotStored) != total {
		t.Fatalf("%d stored and %d not stored of %d", len(stored), len(full.NotStored), total)
	}
	missing := -1
	for i := range total {
		if !slices.Contains(stored, i) {
			missing = i
			break
		}
	}
	for _, i := range []int{stored[0], stored[len(stored)-1]} {
		if cn := servedCommonName(t, cfg, hostOf(i)); cn != hostOf(i) {
			t.Errorf("SNI %s: certificate %q, want its own", hostOf(i), cn)
		}
	}
	if cn := servedCommonName(t, cfg, hostOf(missing)); cn != "ingress-reactor-default" {
		t.Errorf("SNI %s (certificate did not fit): %q, want the default", hostOf(missing), cn)
	}
	// Client callers see a partial success that lists what did not fit and names the cause.
	err = rt.Client().ReplaceCertificates(ctx, CertificateUpdate{Certificates: certs, Hosts: hostnames(hosts)})
	var dictFull *DictFullError
	if !errors.As(err, &dictFull) || !slices.Equal(dictFull.NotStored, full.NotStored) || !strings.Contains(err.Error(), "--certificates-dict-size") {
		t.Errorf("Client on a full dict: %v, want a *DictFullError listing %v", err, full.NotStored)
	}
	// The same push again stores the same certificates (the controller retries it).
	if again := postStatus(t, cfg, "/configuration/certificates", certificatesBody(true, certs, hosts)); !slices.Equal(again.NotStored, full.NotStored) {
		t.Errorf("a retried full push stored other certificates: %v, first %v", again.NotStored, full.NotStored)
	}
	if !strings.Contains(rt.Process().RecentOutput(), "certificates dict full") {
		t.Error("the error log does not say that the certificates dict is full")
	}

	// One batch removes five live certificates and adds five others: the removals make the room.
	swap := map[string]*CertificatePEM{}
	swapHosts := map[string]string{}
	for _, i := range stored[:5] {
		swap[idOf(i)] = nil
		swapHosts[hostOf(i)] = ""
	}
	newHost := func(i int) string { return fmt.Sprintf("n%03d.example.com", i) }
	for i := range 5 {
		swap[fmt.Sprintf("default/n%03d", i)] = bulkyCertificate(t, paths.Prefix, newHost(i), 10)
		swapHosts[newHost(i)] = fmt.Sprintf("default/n%03d", i)
	}
	if a := postStatus(t, cfg, "/configuration/certificates", certificatesBody(false, swap, swapHosts)); a.Status != http.StatusOK {
		t.Errorf("removing five certificates and adding five of the same size: %+v", a)
	}
	for i := range 5 {
		if cn := servedCommonName(t, cfg, newHost(i)); cn != newHost(i) {
			t.Errorf("SNI %s after the swap: %q", newHost(i), cn)
		}
	}

	// A rotation that does not fit keeps the previous certificate served; a rotation of the same
	// size in the same batch goes live.
	tooBig, fits := stored[5], stored[6]
	rotated := bulkyCertificate(t, paths.Prefix, hostOf(fits), 10)
	a := postStatus(t, cfg, "/configuration/certificates", certificatesBody(false, map[string]*CertificatePEM{
		idOf(tooBig): bulkyCertificate(t, paths.Prefix, "bigger-"+hostOf(tooBig), 200),
		idOf(fits):   rotated,
	}, nil))
	if a.Status != http.StatusInsufficientStorage || !slices.Equal(a.NotStored, []string{idOf(tooBig)}) || a.Changed != 1 {
		t.Errorf("rotations, one too big: %+v", a)
	}
	if cn := servedCommonName(t, cfg, hostOf(tooBig)); cn != hostOf(tooBig) {
		t.Errorf("SNI %s after a rotation that did not fit: %q, want the previous certificate", hostOf(tooBig), cn)
	}
	if !servedCertificate(t, cfg, hostOf(fits)).Equal(parseCert(t, rotated.Cert)) {
		t.Errorf("SNI %s: the rotation in a batch that did not fit as a whole is not served", hostOf(fits))
	}
}

// hostnames converts a host table of the tests to Client's types.
func hostnames(hosts map[string]string) map[Hostname]string {
	out := make(map[Hostname]string, len(hosts))
	for h, id := range hosts {
		out[Hostname(h)] = id
	}
	return out
}

// endpointList returns n endpoints 10.<seed>.x.y:8080.
func endpointList(seed, n int) []Endpoint {
	out := make([]Endpoint, n)
	for i := range out {
		out[i] = Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", seed%256, i/256, i%256), Port: 8080}
	}
	return out
}

// TestEndpointsDictFull fills a 1 MB endpoints dict: removals in a batch make room for its updates, and
// an update that does not fit keeps the previous endpoints.
func TestEndpointsDictFull(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	cfg.EndpointsDictMB = 1
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	applyModel(t, rt, Model{}, cfg)

	// Upstreams of 400 endpoints (about 16 KB each) until the dict is full.
	name := func(i int) UpstreamName { return UpstreamName(fmt.Sprintf("fill-%03d", i)) }
	filled := 0
	for ; ; filled++ {
		if filled == 200 {
			t.Fatal("1 MB holds 200 lists of 400 endpoints?")
		}
		err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{name(filled): endpointList(filled, 400)})
		if err != nil {
			var full *DictFullError
			if !errors.As(err, &full) || !slices.Equal(full.NotStored, []string{string(name(filled))}) {
				t.Fatalf("filling the dict: %v, want a *DictFullError naming %s", err, name(filled))
			}
			if !strings.Contains(err.Error(), "endpoints dict full: raise --endpoints-dict-size (now 1 MB)") {
				t.Errorf("the error does not name the cause: %v", err)
			}
			break
		}
	}
	t.Logf("%d upstreams of 400 endpoints fit into 1 MB", filled)

	// Removing one upstream and adding another of the same size in one batch fits.
	a := postStatus(t, cfg, "/configuration/endpoints", map[string]any{"upstreams": map[string]any{
		string(name(0)): []Endpoint{}, "added": endpointList(250, 400)}})
	if a.Status != http.StatusOK || a.Changed != 1 || a.Removed != 1 {
		t.Errorf("remove one, add one: %+v", a)
	}
	ups, err := rt.Client().Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ups[name(0)]; ok || len(ups["added"]) != 400 {
		t.Errorf("after remove one, add one: removed one present %v, added one has %d endpoints", ok, len(ups["added"]))
	}

	// A list that grows beyond the room keeps the previous list; the rest of the batch goes live.
	a = postStatus(t, cfg, "/configuration/endpoints", map[string]any{"upstreams": map[string]any{
		string(name(1)): endpointList(1, 2000), string(name(2)): endpointList(99, 400)}})
	if a.Status != http.StatusInsufficientStorage || !slices.Equal(a.NotStored, []string{string(name(1))}) || a.Changed != 1 {
		t.Errorf("one list too long: %+v", a)
	}
	ups, err = rt.Client().Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ups[name(1)], endpointList(1, 400)) {
		t.Errorf("the list that did not fit: %d endpoints live, want the previous 400", len(ups[name(1)]))
	}
	if !slices.Equal(ups[name(2)], endpointList(99, 400)) {
		t.Error("the update that fitted is not live")
	}
}

// holdingBackend accepts connections and closes each without an answer; the first hold of them are
// kept open until all of them arrived, so that they fail together.
func holdingBackend(t *testing.T, hold int) Endpoint {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		var held []net.Conn
		// Liveness only: should fewer arrive, the held ones are closed a while after the first.
		var deadline <-chan time.Time
		accepted := make(chan net.Conn)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					close(accepted)
					return
				}
				accepted <- c
			}
		}()
		release := func() {
			for _, c := range held {
				_ = c.Close()
			}
			held, hold = nil, 0
		}
		for {
			select {
			case c, ok := <-accepted:
				if !ok {
					release()
					return
				}
				if hold == 0 {
					_ = c.Close()
					continue
				}
				held = append(held, c)
				if deadline == nil {
					deadline = time.After(10 * time.Second)
				}
				if len(held) == hold {
					release()
				}
			case <-deadline:
				release()
			}
		}
	}()
	return Endpoint{Address: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port)}
}

// TestBalancerRetriesAnotherEndpoint sends concurrent requests to an upstream of a failing and a
// working endpoint in one worker. While the failing endpoint holds its connections, the worker's
// round-robin position moves on; the retry must still go to the endpoint the request has not tried.
func TestBalancerRetriesAnotherEndpoint(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	cfg.WorkerProcesses = "1"
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	m, _ := buildModel(t, []any{service("default", "a", port(80, "")), ingress("default", "a", rule("a.example.com", prefix("/", "a", 80)))}, nil)
	applyModel(t, rt, m, cfg)

	const requests = 40 // round-robin sends half of them to the failing endpoint first
	bad, good := holdingBackend(t, requests/2), echoBackend(t, "good")
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "a", 80).Name: {bad, good}}); err != nil {
		t.Fatal(err)
	}
	c := proxyClient(cfg.HTTPPort, nil)
	c.Timeout = 30 * time.Second
	statuses := make([]int, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			resp, err := c.Get(fmt.Sprintf("http://a.example.com:%d/%d", cfg.HTTPPort, i))
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	failed := 0
	for _, s := range statuses {
		if s != http.StatusOK {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed although every retry had a working endpoint left: %v", failed, requests, statuses)
	}
}

// rsaChainCertificate returns a leaf certificate for host with an RSA-2048 key, signed by an RSA-2048
// intermediate, with the chain (leaf, intermediate) as PEM and the key as PKCS#1 ("RSA PRIVATE KEY"):
// the usual shape of a certificate from a public CA.
func rsaChainCertificate(t testing.TB, host string) *CertificatePEM {
	t.Helper()
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Example Intermediate CA R3", Organization: []string{"Example Trust Services"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host, "www." + host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return &CertificatePEM{
		Cert: append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(leafKey)}),
	}
}

// rewrap re-encodes every PEM block of data with lines of width characters ending in eol, and puts
// text before each block, as other tools write PEM.
func rewrap(data []byte, width int, eol, before string) []byte {
	var out bytes.Buffer
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out.Bytes()
		}
		enc := base64.StdEncoding.EncodeToString(b.Bytes)
		out.WriteString(before + "-----BEGIN " + b.Type + "-----" + eol)
		for len(enc) > width {
			out.WriteString(enc[:width] + eol)
			enc = enc[width:]
		}
		out.WriteString(enc + eol + "-----END " + b.Type + "-----" + eol)
	}
}

// TestCertificatePEMForms pushes certificates in the PEM forms Secrets hold (the dict stores them as
// DER) and checks that each host is served its own certificate with a matching key.
func TestCertificatePEMForms(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	applyModel(t, rt, Model{}, cfg)

	ecCert, ecKey, _, _ := selfSigned(t, paths.Prefix, "ec", "ec.example.com")
	sec1, sec1Key, _, _ := selfSigned(t, paths.Prefix, "sec1", "sec1.example.com")
	block, _ := pem.Decode(sec1Key)
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sec1DER, err := x509.MarshalECPrivateKey(parsed.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	// As `openssl ecparam -genkey` writes it: the curve's parameters, then the SEC1 key.
	sec1Key = append([]byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1DER})...)
	crlfCert, crlfKey, _, _ := selfSigned(t, paths.Prefix, "crlf", "crlf.example.com")
	textCert, textKey, _, _ := selfSigned(t, paths.Prefix, "text", "text.example.com")
	rsaChain := rsaChainCertificate(t, "rsa.example.com")

	forms := map[string]*CertificatePEM{
		"ec.example.com":   {Cert: ecCert, Key: ecKey},
		"sec1.example.com": {Cert: sec1, Key: sec1Key},
		"crlf.example.com": {Cert: rewrap(crlfCert, 76, "\r\n", ""), Key: rewrap(crlfKey, 76, "\r\n", "")},
		"text.example.com": {Cert: rewrap(textCert, 64, "\n", "subject=CN = text.example.com\n"), Key: rewrap(textKey, 64, "\n", "Bag Attributes\n    localKeyID: 01 00 00 00\n")},
		"rsa.example.com":  rsaChain,
	}
	u := CertificateUpdate{Certificates: map[string]*CertificatePEM{}, Hosts: map[Hostname]string{}}
	for host, c := range forms {
		id := "default/" + strings.TrimSuffix(host, ".example.com")
		u.Certificates[id] = c
		u.Hosts[Hostname(host)] = id
	}
	if err := rt.Client().ReplaceCertificates(ctx, u); err != nil {
		t.Fatal(err)
	}
	for host, c := range forms {
		leaf, _ := pem.Decode(bytes.ReplaceAll(c.Cert, []byte("\r"), nil))
		want, err := x509.ParseCertificate(leaf.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		// The handshake proves the key: NGINX signs with it and the client checks against the certificate.
		if got := servedCertificate(t, cfg, host); !got.Equal(want) {
			t.Errorf("SNI %s: served %q, want its own certificate", host, got.Subject.CommonName)
		}
	}
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.HTTPSPort)), &tls.Config{ServerName: "rsa.example.com", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if chain := conn.ConnectionState().PeerCertificates; len(chain) != 2 || chain[1].Subject.CommonName != "Example Intermediate CA R3" {
		t.Errorf("the RSA host's chain: %d certificates", len(chain))
	}
}

// TestCertificatesDictCapacity measures how many RSA-2048 certificates with a two-certificate chain fit
// into one MB of the certificates dict; the --certificates-dict-size help promises about 230.
func TestCertificatesDictCapacity(t *testing.T) {
	requireNginx(t)
	const mb = 4
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.CertificatesDictMB = mb
	rt := testRuntime(t, cfg, nil)
	applyModel(t, rt, Model{}, cfg)

	c := rsaChainCertificate(t, "shop.example.com")
	certs := map[string]*CertificatePEM{}
	hosts := map[string]string{}
	const pushed = mb * 300
	for i := range pushed {
		id := fmt.Sprintf("team-%02d/shop-example-com-tls-%05d", i%40, i)
		certs[id] = c // the dict does not share equal values: each id takes its own room
		hosts[fmt.Sprintf("shop-%05d.apps.example.com", i)] = id
	}
	a := postStatus(t, cfg, "/configuration/certificates", certificatesBody(true, certs, hosts))
	if a.Status != http.StatusInsufficientStorage || len(a.HostsNotStored) != 0 {
		t.Fatalf("pushing %d certificates into %d MB: %+v", pushed, mb, a.Status)
	}
	perMB := (pushed - len(a.NotStored)) / mb
	t.Logf("%d certificates (%d bytes of PEM each) per MB", perMB, len(c.Cert)+len(c.Key))
	if perMB < 225 {
		t.Errorf("%d certificates per MB, want about 230", perMB)
	}
}

// getFilled reads the "filled" field of GET path, and checks that ?only=filled answers the same alone.
func getFilled(t *testing.T, cfg RenderConfig, path string) bool {
	t.Helper()
	var full, only map[string]any
	for uri, out := range map[string]*map[string]any{path: &full, path + "?only=filled": &only} {
		resp := statusGet(t, cfg, uri)
		err := json.NewDecoder(resp.Body).Decode(out)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d, %v", uri, resp.StatusCode, err)
		}
	}
	if len(only) != 1 || only["filled"] != full["filled"] {
		t.Errorf("GET %s?only=filled answered %v; GET %s says filled=%v", path, only, path, full["filled"])
	}
	filled, ok := full["filled"].(bool)
	if !ok {
		t.Errorf("GET %s answered no \"filled\": %v", path, full)
	}
	return filled
}

// TestSharedDictsReportAFullPush: each dict says whether a full push filled it; a reload keeps that,
// except for a dict whose size changed, which NGINX replaces with an empty one.
func TestSharedDictsReportAFullPush(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	applyModel(t, rt, Model{}, cfg)
	filled := func() Filled {
		t.Helper()
		f, err := rt.Client().Filled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f.Endpoints != getFilled(t, cfg, "/configuration/endpoints") || f.Certificates != getFilled(t, cfg, "/configuration/certificates") {
			t.Errorf("Client.Filled %+v disagrees with the GET answers", f)
		}
		return f
	}
	if f := filled(); f.Endpoints || f.Certificates {
		t.Fatalf("a fresh NGINX reports %+v, want nothing filled", f)
	}

	// An incremental push does not make a dict complete.
	ups := map[UpstreamName][]Endpoint{"a": endpointList(1, 2)}
	if err := rt.Client().PushEndpoints(ctx, ups); err != nil {
		t.Fatal(err)
	}
	cert, key, _, _ := selfSigned(t, paths.Prefix, "a", "a.example.com")
	certs := CertificateUpdate{Certificates: map[string]*CertificatePEM{"default/a": {Cert: cert, Key: key}}, Hosts: map[Hostname]string{"a.example.com": "default/a"}}
	if err := rt.Client().PushCertificates(ctx, certs); err != nil {
		t.Fatal(err)
	}
	if f := filled(); f.Endpoints || f.Certificates {
		t.Fatalf("after incremental pushes: %+v, want nothing filled", f)
	}
	if err := rt.Client().ReplaceEndpoints(ctx, ups); err != nil {
		t.Fatal(err)
	}
	if err := rt.Client().ReplaceCertificates(ctx, certs); err != nil {
		t.Fatal(err)
	}
	if f := filled(); !f.Endpoints || !f.Certificates {
		t.Fatalf("after full pushes: %+v, want both filled", f)
	}

	// A reload that changes neither dict keeps both.
	cfg.WorkerConnections = 512
	applyModel(t, rt, Model{}, cfg)
	if f := filled(); !f.Endpoints || !f.Certificates {
		t.Errorf("after a reload: %+v, want both still filled", f)
	}
	// A reload that resizes the endpoints dict empties it, and only it. Workers of the previous
	// configuration may still answer a status request for a moment (their dict is the old one), so the
	// check waits, within a bound, for the new ones.
	cfg.EndpointsDictMB++
	applyModel(t, rt, Model{}, cfg)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if f, err := rt.Client().Filled(ctx); err == nil && !f.Endpoints {
			break
		}
	}
	if f := filled(); f.Endpoints || !f.Certificates {
		t.Errorf("after resizing the endpoints dict: %+v, want only the certificates filled", f)
	}
	if got, err := rt.Client().Endpoints(ctx); err != nil || len(got) != 0 {
		t.Errorf("endpoints after resizing their dict: %v %v, want none", got, err)
	}
	if hosts, err := rt.Client().CertificateHosts(ctx); err != nil || hosts["a.example.com"] != "default/a" {
		t.Errorf("certificate hosts after resizing the endpoints dict: %v %v", hosts, err)
	}
}

// TestUnchangedCertificatesAreNotParsedAgain: a full push of certificates the dict already holds, byte
// for byte, parses none of them again, and a push is still validated as a whole before anything is
// written.
func TestUnchangedCertificatesAreNotParsedAgain(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	rt := testRuntime(t, cfg, nil)
	applyModel(t, rt, Model{}, cfg)

	const n = 20
	certs := map[string]*CertificatePEM{}
	hosts := map[string]string{}
	for i := range n {
		host := fmt.Sprintf("h%02d.example.com", i)
		c, k, _, _ := selfSigned(t, paths.Prefix, host, host)
		certs["default/"+host] = &CertificatePEM{Cert: c, Key: k}
		hosts[host] = "default/" + host
	}
	type counts struct{ status, changed, unchanged int }
	push := func(certs map[string]*CertificatePEM) counts {
		t.Helper()
		data, err := json.Marshal(certificatesBody(true, certs, hosts))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/configuration/certificates", cfg.StatusPort), bytes.NewReader(data))
		req.Header.Set(StatusTokenHeader, cfg.StatusToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a struct{ Changed, Unchanged int }
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			t.Fatal(err)
		}
		return counts{resp.StatusCode, a.Changed, a.Unchanged}
	}
	if got := push(certs); got != (counts{200, n, 0}) {
		t.Fatalf("first full push: %+v, want all %d changed", got, n)
	}
	if got := push(certs); got != (counts{200, 0, n}) {
		t.Errorf("the same full push again: %+v, want all %d unchanged (not parsed again)", got, n)
	}

	// A rotation among unchanged certificates is parsed and goes live.
	rotated := maps.Clone(certs)
	c, k, _, _ := selfSigned(t, paths.Prefix, "rotated", "h00.example.com", "rotated.example.com")
	rotated["default/h00.example.com"] = &CertificatePEM{Cert: c, Key: k}
	if got := push(rotated); got != (counts{200, 1, n - 1}) {
		t.Errorf("full push with one rotation: %+v, want 1 changed and %d unchanged", got, n-1)
	}
	if !servedCertificate(t, cfg, "h00.example.com").Equal(parseCert(t, c)) {
		t.Error("the rotated certificate is not served")
	}

	// A changed entry that does not parse fails the push before anything is written.
	broken := maps.Clone(rotated)
	c2, k2, _, _ := selfSigned(t, paths.Prefix, "again", "h01.example.com")
	broken["default/h01.example.com"] = &CertificatePEM{Cert: c2, Key: k2}
	broken["default/h03.example.com"] = &CertificatePEM{Cert: []byte("junk"), Key: k2}
	if got := push(broken); got.status != http.StatusBadRequest {
		t.Fatalf("full push with a broken certificate: %+v, want 400", got)
	}
	if !servedCertificate(t, cfg, "h01.example.com").Equal(parseCert(t, certs["default/h01.example.com"].Cert)) {
		t.Error("a push refused as a whole changed a certificate")
	}
}

// statusGet sends GET uri to the status server with the token, as the controller does; the caller closes
// the body.
func statusGet(t *testing.T, cfg RenderConfig, uri string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.StatusPort, uri), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(StatusTokenHeader, cfg.StatusToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// activeConnections reads "Active connections" from the status server's stub_status.
func activeConnections(t *testing.T, cfg RenderConfig) int {
	t.Helper()
	resp := statusGet(t, cfg, "/nginx_status")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var n int
	if _, err := fmt.Sscanf(string(body), "Active connections: %d", &n); err != nil {
		t.Fatalf("stub_status %q: %v", body, err)
	}
	return n
}

// TestFreshNginxWaitsForTheFirstPush: a request and a TLS handshake that reach a freshly started NGINX
// before the controller's first full pushes wait for them, and are then answered by the pushed endpoint
// and certificate (before, the request got 503 and the handshake the default certificate, which a
// keep-alive connection kept for all its requests).
func TestFreshNginxWaitsForTheFirstPush(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.WorkerProcesses = "1"
	rt := testRuntime(t, cfg, nil)
	m, _ := buildModel(t, []any{service("default", "a", port(80, "")),
		ingress("default", "a", annotate(AnnotationSSLRedirect, "false"), rule("a.example.com", prefix("/", "a", 80)), withTLS("a-tls", "a.example.com"))}, nil)
	applyModel(t, rt, m, cfg)

	type answer struct {
		status int
		cn     string
		err    error
	}
	httpDone, tlsDone := make(chan answer, 1), make(chan answer, 1)
	go func() {
		resp, err := proxyClient(cfg.HTTPPort, nil).Get(fmt.Sprintf("http://a.example.com:%d/", cfg.HTTPPort))
		if err != nil {
			httpDone <- answer{err: err}
			return
		}
		_ = resp.Body.Close()
		httpDone <- answer{status: resp.StatusCode}
	}()
	go func() {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.HTTPSPort)),
			&tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true})
		if err != nil {
			tlsDone <- answer{err: err}
			return
		}
		defer conn.Close()
		tlsDone <- answer{cn: conn.ConnectionState().PeerCertificates[0].Subject.CommonName}
	}()
	// Both are inside NGINX (plus this status request) before anything is pushed.
	deadline := time.Now().Add(5 * time.Second)
	for activeConnections(t, cfg) < 3 {
		select {
		case a := <-httpDone:
			t.Fatalf("the request was answered before any endpoint was pushed: %+v", a)
		case a := <-tlsDone:
			t.Fatalf("the handshake finished before any certificate was pushed: %+v", a)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the request and the handshake never reached NGINX")
		}
		time.Sleep(5 * time.Millisecond)
	}

	cert, key, _, _ := selfSigned(t, paths.Prefix, "a", "a.example.com")
	if a := postStatus(t, cfg, "/configuration/certificates", certificatesBody(true,
		map[string]*CertificatePEM{"default/a-tls": {Cert: cert, Key: key}}, map[string]string{"a.example.com": "default/a-tls"})); a.Status != http.StatusOK {
		t.Fatalf("certificate push: %+v", a)
	}
	if a := postStatus(t, cfg, "/configuration/endpoints", map[string]any{"full": true, "upstreams": map[string]any{
		string(up("default", "a", 80).Name): []Endpoint{echoBackend(t, "one")}}}); a.Status != http.StatusOK {
		t.Fatalf("endpoints push: %+v", a)
	}
	if a := <-httpDone; a.err != nil || a.status != http.StatusOK {
		t.Errorf("request sent before the first push: %+v, want 200 from the pushed endpoint", a)
	}
	if a := <-tlsDone; a.err != nil || a.cn != "a.example.com" {
		t.Errorf("handshake started before the first push: %+v, want the pushed certificate (CN a.example.com)", a)
	}
}
