package nginx

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A minimal WebSocket (RFC 6455) for tests: the handshake and unfragmented frames of up to 125 bytes,
// which is all that the tests exchange.

const websocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func websocketAccept(key string) string {
	sum := sha1.Sum([]byte(key + websocketGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// writeWebsocketFrame writes one text frame; clients mask theirs.
func writeWebsocketFrame(w io.Writer, payload string, mask bool) error {
	if len(payload) > 125 {
		return errors.New("payload too long for this test helper")
	}
	b := []byte{0x81, byte(len(payload))}
	p := []byte(payload)
	if mask {
		var key [4]byte
		_, _ = rand.Read(key[:])
		b[1] |= 0x80
		b = append(b, key[:]...)
		for i := range p {
			p[i] ^= key[i%4]
		}
	}
	_, err := w.Write(append(b, p...))
	return err
}

// readWebsocketFrame reads one frame and returns its opcode and payload.
func readWebsocketFrame(r io.Reader) (byte, string, error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, "", err
	}
	n := int(head[1] & 0x7f)
	if n > 125 {
		return 0, "", errors.New("frame too long for this test helper")
	}
	var key [4]byte
	masked := head[1]&0x80 != 0
	if masked {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return 0, "", err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, "", err
	}
	if masked {
		for i := range p {
			p[i] ^= key[i%4]
		}
	}
	return head[0] & 0x0f, string(p), nil
}

// websocketEcho is a WebSocket backend that answers each text frame with "echo " and the text.
func websocketEcho(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || !strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
		http.Error(w, "not a WebSocket handshake: Upgrade "+r.Header.Get("Upgrade")+", Connection "+r.Header.Get("Connection"), http.StatusBadRequest)
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		websocketAccept(r.Header.Get("Sec-WebSocket-Key")))
	if rw.Flush() != nil {
		return
	}
	for {
		op, text, err := readWebsocketFrame(rw)
		if err != nil || op != 1 {
			return
		}
		if writeWebsocketFrame(conn, "echo "+text, false) != nil {
			return
		}
	}
}

// websocketClient is a client connection after the handshake.
type websocketClient struct {
	conn net.Conn
	r    *bufio.Reader
}

// dialWebsocket opens a WebSocket to host on NGINX's HTTP port.
func dialWebsocket(t *testing.T, httpPort int, host, path string) *websocketClient {
	t.Helper()
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", httpPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	key := base64.StdEncoding.EncodeToString(raw[:])
	_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		path, host, key)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("WebSocket handshake with %s: %v", host, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != websocketAccept(key) {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		t.Fatalf("WebSocket handshake with %s: %d %q, accept %q", host, resp.StatusCode, body, resp.Header.Get("Sec-WebSocket-Accept"))
	}
	return &websocketClient{conn: conn, r: r}
}

// exchange sends text and wants the echo back.
func (c *websocketClient) exchange(t *testing.T, text string) {
	t.Helper()
	_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := writeWebsocketFrame(c.conn, text, true); err != nil {
		t.Fatalf("sending %q: %v", text, err)
	}
	op, got, err := readWebsocketFrame(c.r)
	if err != nil || op != 1 || got != "echo "+text {
		t.Fatalf("sent %q, got opcode %d %q, %v; want the echo", text, op, got, err)
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
	_ = idle.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, _, err := readWebsocketFrame(idle.r); !errors.Is(err, io.EOF) {
		t.Fatalf("an idle WebSocket past its read timeout: %v, want NGINX to close it", err)
	}
}
