package nginx

import (
	"bytes"
	"context"
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
	cfg.HTTPSPort = 0
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

	send := func(host, path string, size int, chunked bool) (int, string) {
		t.Helper()
		var body io.Reader = bytes.NewReader(bytes.Repeat([]byte("x"), size))
		if chunked {
			body = io.MultiReader(body) // no length known: sent chunked
		}
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %d bytes (chunked %v): %v", host, size, chunked, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
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
	} {
		entry := `{"routes":[{"path":"/ok","upstream":"` + web + `"},{"path":"/","upstream":"` + web + `",` + field + `}]}`
		err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{"a.example.com": []byte(entry)}})
		refused := RefusedRoutes(err)
		if r, ok := refused["a.example.com"]; !ok || r.Route != 2 || !strings.Contains(r.Error, want) {
			t.Errorf("%s: push answered %v (refused %+v); want route 2 refused: %s", field, err, refused, want)
		}
	}
}
