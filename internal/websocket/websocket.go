// Package websocket is the part of WebSocket (RFC 6455) that the project's tests and its echo server
// need: the opening handshake and unfragmented text frames of up to 125 bytes. It is no general
// implementation: no fragmentation, no control frames but close, no extensions.
package websocket

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// guid is the constant of RFC 6455 section 1.3 that the accept key hashes with the client's key.
const guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// MaxPayload is the largest payload this package writes or reads.
const MaxPayload = 125

// OpText is the opcode of a text frame.
const OpText = 1

// Accept returns the Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key.
func Accept(key string) string {
	sum := sha1.Sum([]byte(key + guid))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// WriteFrame writes one text frame; clients mask theirs (mask), servers do not.
func WriteFrame(w io.Writer, payload string, mask bool) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("payload of %d bytes: this package writes at most %d", len(payload), MaxPayload)
	}
	b := []byte{0x80 | OpText, byte(len(payload))}
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

// ReadFrame reads one frame and returns its opcode and payload.
func ReadFrame(r io.Reader) (byte, string, error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, "", err
	}
	n := int(head[1] & 0x7f)
	if n > MaxPayload {
		return 0, "", errors.New("frame longer than this package reads")
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

// IsUpgrade reports whether r asks to open a WebSocket.
func IsUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") && strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// Echo returns a handler that opens a WebSocket and answers each text frame with prefix and the text,
// until the client closes or sends anything else. A request that is not a WebSocket handshake gets 400.
func Echo(prefix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !IsUpgrade(r) {
			http.Error(w, "not a WebSocket handshake: Upgrade "+r.Header.Get("Upgrade")+", Connection "+r.Header.Get("Connection"), http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			Accept(r.Header.Get("Sec-WebSocket-Key")))
		if rw.Flush() != nil {
			return
		}
		for {
			op, text, err := ReadFrame(rw)
			if err != nil || op != OpText {
				return
			}
			if WriteFrame(conn, prefix+text, false) != nil {
				return
			}
		}
	}
}

// Client is a client's WebSocket after the handshake.
type Client struct {
	Conn net.Conn
	R    *bufio.Reader
}

// Dial connects to addr and opens a WebSocket to path on host, waiting at most timeout for the
// handshake.
func Dial(addr, host, path string, timeout time.Duration) (*Client, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	key := base64.StdEncoding.EncodeToString(raw[:])
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		path, host, key); err != nil {
		conn.Close()
		return nil, err
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("WebSocket handshake with %s: %w", host, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != Accept(key) {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		conn.Close()
		return nil, fmt.Errorf("WebSocket handshake with %s: %d %q, accept %q", host, resp.StatusCode, body, resp.Header.Get("Sec-WebSocket-Accept"))
	}
	_ = conn.SetDeadline(time.Time{})
	return &Client{Conn: conn, R: r}, nil
}

// Exchange sends text and returns the frame that answers it, waiting at most timeout.
func (c *Client) Exchange(text string, timeout time.Duration) (string, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(timeout))
	if err := WriteFrame(c.Conn, text, true); err != nil {
		return "", fmt.Errorf("sending %q: %w", text, err)
	}
	op, got, err := ReadFrame(c.R)
	if err != nil {
		return "", fmt.Errorf("reading the answer to %q: %w", text, err)
	}
	if op != OpText {
		return "", fmt.Errorf("the answer to %q has opcode %d, not text", text, op)
	}
	return got, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.Conn.Close() }
