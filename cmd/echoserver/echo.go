package main

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/ingress-reactor/ingress-reactor/internal/websocket"
)

// Response is the JSON document the echo handler answers with. The handler encodes it
// by hand (see appendResponse); this type documents the wire format and lets tests and
// clients decode it with encoding/json.
type Response struct {
	// Name is the server's --name.
	Name string `json:"name"`
	// Listen is the local address the request arrived on (one of --listen).
	Listen string `json:"listen"`
	// Method is the request method.
	Method string `json:"method"`
	// Proto is the request protocol, for example "HTTP/1.1" or "HTTP/2.0".
	Proto string `json:"proto"`
	// Host is the Host header (or :authority).
	Host string `json:"host"`
	// URI is the request target exactly as received.
	URI string `json:"uri"`
	// Path is the decoded URL path.
	Path string `json:"path"`
	// RawQuery is the query string without the leading '?'.
	RawQuery string `json:"rawQuery"`
	// Headers are the request headers in canonical form, sorted by name when encoded.
	Headers map[string][]string `json:"headers"`
	// RemoteAddr is the peer address of the connection.
	RemoteAddr string `json:"remoteAddr"`
	// TLS reports whether the connection used TLS.
	TLS bool `json:"tls"`
	// SNI is the server name the client sent in the TLS handshake, if any.
	SNI string `json:"sni"`
}

// echoHandler answers every request with a Response describing it, and a WebSocket handshake with a
// WebSocket that answers each text message with "echo <name> <message>".
type echoHandler struct {
	name string
	log  *zap.Logger // nil unless --log-requests
	ws   http.HandlerFunc
}

// bufPool recycles response buffers; most responses fit in the initial capacity.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// ServeHTTP implements http.Handler.
func (h *echoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if websocket.IsUpgrade(r) {
		h.ws(w, r)
		return
	}
	bp := bufPool.Get().(*[]byte)
	buf := appendResponse((*bp)[:0], h.name, r)
	buf = append(buf, '\n')

	hdr := w.Header()
	hdr["Content-Type"] = []string{"application/json"}
	hdr["Content-Length"] = []string{strconv.Itoa(len(buf))}
	hdr["X-Echo-Name"] = []string{h.name}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf)
	}
	if h.log != nil {
		h.log.Info("request",
			zap.String("method", r.Method),
			zap.String("host", r.Host),
			zap.String("path", r.URL.Path),
			zap.String("remote", r.RemoteAddr),
			zap.String("listen", localAddr(r)))
	}
	if cap(buf) <= 64<<10 { // do not keep buffers grown by huge requests
		*bp = buf[:0]
		bufPool.Put(bp)
	}
}

// localAddr returns the local address of the connection that carried r.
func localAddr(r *http.Request) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return a.String()
	}
	return ""
}

// appendResponse appends the JSON form of Response for r to dst. Header names are
// sorted so that the output is deterministic.
func appendResponse(dst []byte, name string, r *http.Request) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendJSONString(dst, name)
	dst = append(dst, `,"listen":`...)
	dst = appendJSONString(dst, localAddr(r))
	dst = append(dst, `,"method":`...)
	dst = appendJSONString(dst, r.Method)
	dst = append(dst, `,"proto":`...)
	dst = appendJSONString(dst, r.Proto)
	dst = append(dst, `,"host":`...)
	dst = appendJSONString(dst, r.Host)
	dst = append(dst, `,"uri":`...)
	dst = appendJSONString(dst, r.RequestURI)
	dst = append(dst, `,"path":`...)
	dst = appendJSONString(dst, r.URL.Path)
	dst = append(dst, `,"rawQuery":`...)
	dst = appendJSONString(dst, r.URL.RawQuery)

	dst = append(dst, `,"headers":{`...)
	var keysArr [32]string
	keys := keysArr[:0]
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ":["...)
		for j, v := range r.Header[k] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, '}')

	dst = append(dst, `,"remoteAddr":`...)
	dst = appendJSONString(dst, r.RemoteAddr)
	dst = append(dst, `,"tls":`...)
	dst = strconv.AppendBool(dst, r.TLS != nil)
	dst = append(dst, `,"sni":`...)
	sni := ""
	if r.TLS != nil {
		sni = r.TLS.ServerName
	}
	dst = appendJSONString(dst, sni)
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Control characters and the
// characters JSON requires are escaped; invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but break JavaScript; escape them like encoding/json.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
