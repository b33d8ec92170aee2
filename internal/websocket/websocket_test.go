package websocket

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAccept checks the accept key against the example of RFC 6455 section 1.3.
func TestAccept(t *testing.T) {
	if got := Accept("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Errorf("Accept = %q, want RFC 6455's s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", got)
	}
}

// TestEchoRoundTrip opens a WebSocket to Echo and exchanges messages; a plain request gets 400, and a
// payload over MaxPayload is refused before anything is sent.
func TestEchoRoundTrip(t *testing.T) {
	srv := httptest.NewServer(Echo("echo "))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c, err := Dial(addr, "ws.example", "/", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, text := range []string{"one", "", strings.Repeat("x", MaxPayload-len("echo "))} {
		if got, err := c.Exchange(text, 5*time.Second); err != nil || got != "echo "+text {
			t.Errorf("exchange %q: %q, %v", text, got, err)
		}
	}
	if _, err := c.Exchange(strings.Repeat("x", MaxPayload+1), time.Second); err == nil {
		t.Error("a payload over MaxPayload was sent")
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a plain request: %d, want 400", resp.StatusCode)
	}
}
