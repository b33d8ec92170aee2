package nginx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ingress-reactor/ingress-reactor/internal/websocket"
)

// websocketEcho is a WebSocket backend that answers each text frame with "echo " and the text.
var websocketEcho = websocket.Echo("echo ")

// websocketClient is a client connection after the handshake.
type websocketClient struct{ *websocket.Client }

// dialWebsocket opens a WebSocket to host on NGINX's HTTP port.
func dialWebsocket(t *testing.T, httpPort int, host, path string) *websocketClient {
	t.Helper()
	c, err := websocket.Dial(fmt.Sprintf("127.0.0.1:%d", httpPort), host, path, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &websocketClient{c}
}

// exchange sends text and wants the echo back.
func (c *websocketClient) exchange(t *testing.T, text string) {
	t.Helper()
	if got, err := c.Exchange(text, 10*time.Second); err != nil || got != "echo "+text {
		t.Fatalf("sent %q, got %q, %v; want the echo", text, got, err)
	}
}

// TestWebSocketNginx runs WebSockets through real NGINX and the Lua router, with no annotation: one
// stays open through a reload and exchanges messages before and after it (the old worker keeps
// serving it), and one on a route with a 1 s proxy-read-timeout is closed by NGINX when idle.
func TestWebSocketNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	ws := httpServer(t, websocketEcho)

	objs := []any{
		service("default", "ws", port(80, "http")),
		ingress("default", "chat", rule("chat.example.com", prefix("/", "ws", 80))),
		ingress("default", "idle", annotate(AnnotationProxyReadTimeout, "1"), rule("idle.example.com", prefix("/", "ws", 80))),
	}
	m, _ := buildModel(t, objs, nil)
	first := applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "ws", 80).Name: {ws}}); err != nil {
		t.Fatal(err)
	}

	chat := dialWebsocket(t, cfg.HTTPPort, "chat.example.com", "/socket")
	chat.exchange(t, "before the reload")

	// A new profile changes nginx.conf: NGINX reloads, and the new configuration serves new requests.
	m, _ = buildModel(t, append(objs, ingress("default", "upload", annotate(AnnotationProxyBodySize, "10m"),
		rule("upload.example.com", prefix("/", "ws", 80)))), nil)
	if second := applyModel(t, rt, m, cfg); second == first {
		t.Fatal("the second configuration is the first: no reload")
	}
	fresh := dialWebsocket(t, cfg.HTTPPort, "upload.example.com", "/socket")
	fresh.exchange(t, "after the reload, new connection")
	chat.exchange(t, "after the reload")
	chat.exchange(t, "and again")

	// Idle for longer than the read timeout: NGINX closes the connection (the deadline only bounds the
	// wait; the default read timeout is 60 s).
	idle := dialWebsocket(t, cfg.HTTPPort, "idle.example.com", "/socket")
	idle.exchange(t, "hello")
	_ = idle.Conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, _, err := websocket.ReadFrame(idle.R); !errors.Is(err, io.EOF) {
		t.Fatalf("an idle WebSocket past its read timeout: %v, want NGINX to close it", err)
	}
}
