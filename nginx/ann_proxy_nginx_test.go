package nginx

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slowOrCount answers /slow after 3 s, or when NGINX gives up on it, whichever is first, and other
// paths with the number of body bytes it read.
func slowOrCount(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/slow" {
		select {
		case <-time.After(3 * time.Second):
			_, _ = io.WriteString(w, "slow answer")
		case <-r.Context().Done():
		}
		return
	}
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, _ = io.WriteString(w, r.Proto+" read "+strconv.FormatInt(n, 10))
}

// TestProxyBodySizeAndTimeoutsNginx runs the proxy group through real NGINX and the Lua router: 413
// above a route's body size, with and without Content-Length, on routes with a profile and on routes
// with the default limit; bodies the limit allows pass, above the default too; a read timeout gives
// 504, for an HTTP and a gRPC (h2c) backend.
func TestProxyBodySizeAndTimeoutsNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	app := httpServer(t, slowOrCount)
	h2c := httptest.NewUnstartedServer(http.HandlerFunc(slowOrCount))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c.Config.Protocols = &protocols
	h2c.Start()
	t.Cleanup(h2c.Close)

	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")), service("default", "grpc", port(50051, "grpc")),
		ingress("default", "small", annotate(AnnotationProxyBodySize, "2k", AnnotationProxyReadTimeout, "1"),
			rule("small.example.com", prefix("/", "app", 80))),
		ingress("default", "large", annotate(AnnotationProxyBodySize, "4m", AnnotationClientBodyBufferSize, "64k"),
			rule("large.example.com", prefix("/", "app", 80))),
		ingress("default", "unlimited", annotate(AnnotationProxyBodySize, "0"), rule("unlimited.example.com", prefix("/", "app", 80))),
		ingress("default", "plain", rule("plain.example.com", prefix("/", "app", 80))),
		ingress("default", "grpc", annotate(AnnotationBackendProtocol, "GRPC", AnnotationProxyReadTimeout, "1"),
			rule("grpc.example.com", prefix("/", "grpc", 50051))),
	}, nil)
	if len(m.Profiles) != 4 {
		t.Fatalf("profiles %+v, want four", m.Profiles)
	}
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{
		up("default", "app", 80).Name:     {app},
		up("default", "grpc", 50051).Name: {{Address: "127.0.0.1", Port: int32(h2c.Listener.Addr().(*net.TCPAddr).Port)}},
	}); err != nil {
		t.Fatal(err)
	}

	h2 := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	t.Cleanup(h2.CloseIdleConnections)
	sendWith := func(client *http.Client, base, host, path string, size int, chunked bool) (int, string) {
		t.Helper()
		var body io.Reader = bytes.NewReader(bytes.Repeat([]byte("x"), size))
		if chunked {
			body = io.MultiReader(body) // no length known: sent chunked (HTTP/1.1) or without Content-Length (HTTP/2)
		}
		req, err := http.NewRequest(http.MethodPost, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %d bytes (chunked %v): %v", host, size, chunked, err)
		}
		defer resp.Body.Close()
		if client == h2 && resp.ProtoMajor != 2 {
			t.Fatalf("%s: answered over %s, want HTTP/2", host, resp.Proto)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	httpBase := fmt.Sprintf("http://127.0.0.1:%d", cfg.HTTPPort)
	send := func(host, path string, size int, chunked bool) (int, string) {
		t.Helper()
		return sendWith(http.DefaultClient, httpBase, host, path, size, chunked)
	}
	const mib = 1 << 20
	tests := []struct {
		host    string
		size    int
		chunked bool
		want    int
	}{
		{"small.example.com", 2048, false, 200},
		{"small.example.com", 2049, false, 413},
		{"small.example.com", 2048, true, 200},
		{"small.example.com", 4096, true, 413},
		{"plain.example.com", mib, false, 200},
		{"plain.example.com", mib + 1, false, 413},
		{"plain.example.com", mib, true, 200},
		{"plain.example.com", 2 * mib, true, 413},
		{"large.example.com", 3 * mib, false, 200},
		{"large.example.com", 3 * mib, true, 200},
		{"large.example.com", 4*mib + 1, false, 413},
		{"large.example.com", 5 * mib, true, 413},
		{"unlimited.example.com", 6 * mib, false, 200},
		{"unlimited.example.com", 6 * mib, true, 200},
	}
	for _, tc := range tests {
		code, body := send(tc.host, "/upload", tc.size, tc.chunked)
		if code != tc.want {
			t.Errorf("%s: %d bytes (chunked %v): %d %.80q, want %d", tc.host, tc.size, tc.chunked, code, body, tc.want)
		}
		if want := "HTTP/1.1 read " + strconv.Itoa(tc.size); code == 200 && body != want {
			t.Errorf("%s: %d bytes (chunked %v): the backend answered %q, want %q", tc.host, tc.size, tc.chunked, body, want)
		}
	}

	// HTTP/2: a body without Content-Length is limited where NGINX reads it (the default location, or
	// the profile's), a Content-Length by the router.
	httpsBase := fmt.Sprintf("https://127.0.0.1:%d", cfg.HTTPSPort)
	for _, tc := range []struct {
		host    string
		size    int
		chunked bool
		want    int
	}{
		{"plain.example.com", mib, true, 200},
		{"plain.example.com", 2 * mib, true, 413},
		{"plain.example.com", mib + 1, false, 413},
		{"small.example.com", 2048, true, 200},
		{"small.example.com", 4096, true, 413},
		{"large.example.com", 3 * mib, true, 200},
		{"large.example.com", 3 * mib, false, 200},
	} {
		code, body := sendWith(h2, httpsBase, tc.host, "/upload", tc.size, tc.chunked)
		if code != tc.want {
			t.Errorf("HTTP/2 %s: %d bytes (length unknown %v): %d %.80q, want %d", tc.host, tc.size, tc.chunked, code, body, tc.want)
		}
		if want := "HTTP/1.1 read " + strconv.Itoa(tc.size); code == 200 && body != want {
			t.Errorf("HTTP/2 %s: %d bytes: the backend answered %q, want %q", tc.host, tc.size, body, want)
		}
	}

	// The read timeout: 1 s, for a backend that answers after 3 s.
	for _, host := range []string{"small.example.com", "grpc.example.com"} {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/slow", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout || strings.Contains(string(body), "slow answer") {
			t.Errorf("%s: a backend slower than the read timeout: %d %.80q, want 504", host, resp.StatusCode, body)
		}
	}
}

// TestProxyRouteDataRefused: the data plane refuses a route whose proxy options are not what the
// controller writes, alone, with the route's index.
func TestProxyRouteDataRefused(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	applyModel(t, rt, Model{}, cfg)
	web := string(up("default", "web", 80).Name)
	for field, want := range map[string]string{
		`"body_limit":-1`:                     `"body_limit" must be a whole number of bytes`,
		`"body_limit":1.5`:                    `"body_limit" must be a whole number of bytes`,
		`"body_limit":"1m"`:                   `"body_limit" must be a whole number of bytes`,
		`"upstream_options":[1,2,3]`:          `"upstream_options" must be three timeouts`,
		`"upstream_options":[1,2,3,101]`:      `"upstream_options" must be three timeouts`,
		`"upstream_options":[-1,0,0,-1]`:      `"upstream_options" must be three timeouts`,
		`"upstream_options":[0,0,"1 2",-1]`:   `"upstream_options" must be three timeouts`,
		`"upstream_options":[0,0,1e15,-1]`:    `"upstream_options" must be three timeouts`,
		`"upstream_options":{"connect":1000}`: `"upstream_options" must be three timeouts`,
		`"limit_rate":[0,0]`:                  `"limit_rate" must be a rate and a size in bytes`,
		`"limit_rate":[1024]`:                 `"limit_rate" must be a rate and a size in bytes`,
		`"connection_header":"close\r\nX: 1"`: `"connection_header" must be header tokens`,
		`"connection_header":"$http_x"`:       `"connection_header" must be header tokens`,
		`"connection_header":""`:              `"connection_header" must be header tokens`,
	} {
		entry := `{"routes":[{"path":"/ok","upstream":"` + web + `"},{"path":"/","upstream":"` + web + `",` + field + `}]}`
		err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{"a.example.com": []byte(entry)}})
		refused := RefusedRoutes(err)
		if r, ok := refused["a.example.com"]; !ok || r.Route != 2 || !strings.Contains(r.Error, want) {
			t.Errorf("%s: push answered %v (refused %+v); want route 2 refused: %s", field, err, refused, want)
		}
	}
}

// TestProxyBufferProfilesNginx: every value the proxy groups accept, alone and at the edges of what
// NGINX takes together, gives a configuration that "nginx -t" accepts without warnings, for HTTP and
// gRPC backends. Values that NGINX would refuse are left out by the translation (TestAnnotationProxyBuffers).
func TestProxyBufferProfilesNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	objs := []any{service("default", "app", port(80, "http"))}
	sets := [][]string{
		{AnnotationProxyBuffering, "on", AnnotationProxyRequestBuffering, "off", AnnotationProxyHTTPVersion, "1.0"},
		{AnnotationProxyBufferSize, "16m", AnnotationProxyBuffersNumber, "256"},
		{AnnotationProxyBufferSize, "1", AnnotationProxyBuffersNumber, "3"},
		{AnnotationProxyBuffersNumber, "2", AnnotationProxyBusyBuffersSize, "4k"},
		{AnnotationProxyBufferSize, "8k", AnnotationProxyBusyBuffersSize, "24k", AnnotationProxyMaxTempFileSize, "8k"},
		{AnnotationProxyMaxTempFileSize, "0", AnnotationProxyNextUpstream, "error timeout invalid_header http_500 http_502 http_503 http_504 http_403 http_404 http_429 non_idempotent"},
		{AnnotationProxyNextUpstream, "off", AnnotationProxyNextUpstreamTimeout, "1y"},
		{AnnotationProxyBodySize, "0", AnnotationClientBodyBufferSize, "64m"},
		{AnnotationProxyBodySize, "1", AnnotationClientBodyBufferSize, "1"},
		{AnnotationProxyBodySize, "99999g"},
		{AnnotationProxyCookieDomain, ".a-b.example x.example", AnnotationProxyCookiePath, "/~a_b.c/ /",
			AnnotationProxyRedirectFrom, "http://a.example:8080/x?y=(1)&z=[2]*!,@+%20", AnnotationProxyRedirectTo, "https://b.example/"},
	}
	for i, kv := range sets {
		for _, grpc := range []bool{false, true} {
			name := fmt.Sprintf("i%d-%v", i, grpc)
			if grpc {
				kv = append(kv[:len(kv):len(kv)], AnnotationBackendProtocol, "GRPC")
			}
			objs = append(objs, ingress("default", name, annotate(kv...), rule(name+".example.com", prefix("/", "app", 80))))
		}
	}
	m, _ := buildModel(t, objs, nil)
	if len(m.Profiles) != 2*len(sets) {
		t.Fatalf("%d profiles, want %d (an Ingress was rejected or a value ignored)", len(m.Profiles), 2*len(sets))
	}
	nginxTest(t, m, cfg)
}

// TestProxyBufferBehaviourNginx: proxy-http-version, proxy-request-buffering and proxy-next-upstream
// through real NGINX, each against a route without them.
func TestProxyBufferBehaviourNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	seen := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/early" { // answers before it reads the body
			rc := http.NewResponseController(w)
			_ = rc.EnableFullDuplex() // else the server reads the body before it answers
			_, _ = fmt.Fprintf(w, "%s length %d", r.Proto, r.ContentLength)
			_ = rc.Flush()
			_, _ = io.Copy(io.Discard, r.Body)
			return
		}
		w.Header().Set("Seen-Connection", r.Header.Get("Connection"))
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = fmt.Fprintf(w, "%s length %d", r.Proto, r.ContentLength)
	}
	app := httpServer(t, seen)
	failing := httpServer(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "failing", http.StatusServiceUnavailable) })
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")), service("default", "pair", port(80, "http")),
		ingress("default", "plain", rule("plain.example.com", prefix("/", "app", 80))),
		ingress("default", "old", annotate(AnnotationProxyHTTPVersion, "1.0"), rule("old.example.com", prefix("/", "app", 80))),
		ingress("default", "stream", annotate(AnnotationProxyRequestBuffering, "off"), rule("stream.example.com", prefix("/", "app", 80))),
		ingress("default", "retry", annotate(AnnotationProxyNextUpstream, "error timeout http_503"), rule("retry.example.com", prefix("/", "pair", 80))),
		ingress("default", "once", rule("once.example.com", prefix("/", "pair", 80))),
		ingress("default", "one-try", annotate(AnnotationProxyNextUpstream, "error timeout http_503", AnnotationProxyNextUpstreamTries, "1"),
			rule("one-try.example.com", prefix("/", "pair", 80))),
		ingress("default", "conn", annotate(AnnotationConnectionProxyHeader, "keep-alive"), rule("conn.example.com", prefix("/", "app", 80))),
		ingress("default", "rate", annotate(AnnotationLimitRate, "1", AnnotationLimitRateAfter, "1024"), rule("rate.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{
		up("default", "app", 80).Name:  {app},
		up("default", "pair", 80).Name: {app, failing},
	}); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}} // one connection: one worker's round robin
	t.Cleanup(client.CloseIdleConnections)
	do := func(host string, body io.Reader) (int, string) {
		t.Helper()
		method := http.MethodPost
		if body == nil {
			method = http.MethodGet // NGINX passes only idempotent requests on (proxy_next_upstream)
		}
		req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d/", cfg.HTTPPort), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	chunked := func() io.Reader { return io.MultiReader(strings.NewReader("abc")) }
	for host, want := range map[string]string{
		"plain.example.com": "HTTP/1.1 length 3", // request buffering on: NGINX sends the length it read
		"old.example.com":   "HTTP/1.0 length 3",
	} {
		if code, got := do(host, chunked()); code != 200 || got != want {
			t.Errorf("%s: %d %q, want 200 %q", host, code, got, want)
		}
	}
	// Request buffering off: the backend gets the request, chunked, before the client has sent its body
	// (with buffering on, NGINX would wait for the body, and the deadline would end the wait).
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", cfg.HTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// The first chunk of the body, and not its end.
	if _, err := io.WriteString(conn, "POST /early HTTP/1.1\r\nHost: stream.example.com\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("request buffering off: %v, want the backend's answer before the body ends", err)
	}
	defer resp.Body.Close()
	// The backend's answer is streamed (chunked, proxy_buffering off): read its first chunk only.
	got := make([]byte, len("HTTP/1.1 length -1"))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != "HTTP/1.1 length -1" {
		t.Errorf("request buffering off: %q, %v; want the backend to see a chunked body", got, err)
	}
	if _, err := io.WriteString(conn, "0\r\n\r\n"); err != nil { // the end of the body: the exchange ends
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Errorf("the rest of the answer: %v", err)
	}
	// Route data set as NGINX variables: the Connection header the backend gets, and a rate limit (1k/s
	// after 1m: the short answer is not slowed, and the request is served, not failed by the router).
	for host, want := range map[string]string{"conn.example.com": "keep-alive", "rate.example.com": "", "plain.example.com": ""} {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "HTTP/1.1 length 0" || resp.Header.Get("Seen-Connection") != want {
			t.Errorf("%s: %d %q, the backend saw Connection %q; want 200 and %q", host, resp.StatusCode, body, resp.Header.Get("Seen-Connection"), want)
		}
	}
	// Two endpoints, one failing with 503: the worker alternates, so two requests reach both.
	codes := map[int]int{}
	for range 2 {
		code, _ := do("once.example.com", nil)
		codes[code]++
	}
	if codes[503] == 0 {
		t.Errorf("without proxy-next-upstream http_503: answers %v, want a 503 among them", codes)
	}
	// proxy-next-upstream-tries 1 (route data for the balancer): no second try.
	codes = map[int]int{}
	for range 2 {
		code, _ := do("one-try.example.com", nil)
		codes[code]++
	}
	if codes[503] == 0 {
		t.Errorf("with proxy-next-upstream http_503 and one try: answers %v, want a 503 among them", codes)
	}
	for range 4 {
		if code, got := do("retry.example.com", nil); code != 200 {
			t.Errorf("with proxy-next-upstream http_503: %d %q, want 200 from the other endpoint", code, got)
		}
	}
}

// TestLimitRateNginx: limit-rate slows a buffered response (proxy-buffering: "on") to its rate; NGINX
// does not limit an unbuffered one (the default), which is why the translation warns about it.
func TestLimitRateNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	const size = 2100 // 1k/s: NGINX sends 1024 bytes in the first second, the rest after it
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, strings.Repeat("y", size)) })
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "buffered", annotate(AnnotationLimitRate, "1", AnnotationProxyBuffering, "on"),
			rule("buffered.example.com", prefix("/", "app", 80))),
		ingress("default", "unbuffered", annotate(AnnotationLimitRate, "1"), rule("unbuffered.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	get := func(host string) time.Duration {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || len(b) != size {
			t.Fatalf("%s: %d, %d bytes; want 200 and %d bytes", host, resp.StatusCode, len(b), size)
		}
		return time.Since(start)
	}
	if d := get("buffered.example.com"); d < 900*time.Millisecond {
		t.Errorf("limit-rate 1 with proxy buffering: %d bytes in %v, want at least a second", size, d)
	}
	if d := get("unbuffered.example.com"); d > 500*time.Millisecond {
		t.Errorf("limit-rate 1 without proxy buffering: %d bytes in %v; NGINX limits it now: drop the Warning", size, d)
	}
}
