package nginx

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestExtAuthOriginalURLNamesTheRoutedHost: the auth service decides on X-Original-URL (Authelia's
// access rules are per domain). A request in absolute form ("GET http://private/ HTTP/1.1") is routed
// by the request line's host while its Host header names another: X-Original-URL must name the host
// the request is routed to, or a client gets the verdict of a public host for a private one.
func TestExtAuthOriginalURLNamesTheRoutedHost(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Per-domain policy: public.example.com is open, everything else needs a session.
		if strings.HasPrefix(r.Header.Get("X-Original-URL"), "http://public.example.com/") {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(auth.Close)
	var reached atomic.Int32
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, "private data")
	})
	m, _ := buildModel(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "private", annotate(AnnotationAuthURL, "http://"+auth.Listener.Addr().String()+"/auth"),
			rule("private.example.com", prefix("/", "app", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	raw := func(requestLine, host string) int {
		t.Helper()
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", cfg.HTTPPort), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "%s\r\nHost: %s\r\nConnection: close\r\n\r\n", requestLine, host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := raw("GET /secret HTTP/1.1", "private.example.com"); code != http.StatusUnauthorized {
		t.Fatalf("origin form: %d, want 401", code)
	}
	code := raw("GET http://private.example.com/secret HTTP/1.1", "public.example.com")
	if n := reached.Load(); n != 0 || code != http.StatusUnauthorized {
		t.Fatalf("absolute form for private.example.com with Host public.example.com: %d, backend reached %d times; want 401 and never reached", code, n)
	}
}
