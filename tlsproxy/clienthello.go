package tlsproxy

import (
	"errors"
	"fmt"
	"io"
)

// TLS framing constants (RFC 8446 section 5.1 and 4; RFC 6066 section 3).
const (
	recordHeaderLen      = 5
	recordTypeHandshake  = 22
	handshakeHeaderLen   = 4
	handshakeClientHello = 1
	extensionServerName  = 0
	serverNameTypeHost   = 0

	// MaxRecordLen is the largest TLSPlaintext fragment a peer may send (2^14 bytes). A ClientHello is
	// always sent in plaintext records, so a longer record is a protocol error.
	MaxRecordLen = 1 << 14
	// MaxClientHelloLen bounds the ClientHello handshake message the parser reassembles. Real ClientHellos,
	// post-quantum key shares included, stay far below it; a longer one is not routed by name.
	MaxClientHelloLen = 1 << 14
	// maxHostnameLen is the longest DNS name (RFC 1035).
	maxHostnameLen = 253
)

// Errors returned by ParseClientHello and ReadClientHello. A connection that fails with one of them cannot be
// routed by name; the proxy hands it to NGINX unchanged.
var (
	// ErrNotTLS means the first bytes are not a TLS handshake record (plain HTTP, SSLv2, anything else).
	ErrNotTLS = errors.New("not a TLS handshake")
	// ErrMalformed means the bytes start like TLS but do not form a valid ClientHello.
	ErrMalformed = errors.New("malformed TLS ClientHello")
	// ErrTooLarge means a record or the ClientHello exceeds MaxRecordLen or MaxClientHelloLen.
	ErrTooLarge = errors.New("TLS ClientHello too large")
)

// ClientHello is what the proxy needs from a TLS ClientHello.
type ClientHello struct {
	// ServerName is the host_name of the server_name extension (SNI), lowercased and without a trailing dot.
	// It is empty when the client sent none, or one that is not a plausible DNS name.
	ServerName string
}

// ParseClientHello parses the TLS records at the start of data, which may hold only part of the ClientHello.
//
// It returns need > 0 (and no error) when data is a valid but incomplete prefix: need is the total length
// data must reach before calling again can make progress, so a reader calls it once per record rather than
// once per read. It returns need == 0 and an error wrapping ErrNotTLS, ErrMalformed or ErrTooLarge when data
// cannot be a ClientHello, and need == 0 with a nil error when the ClientHello is complete. Bytes after the
// ClientHello are ignored. ParseClientHello never retains data and allocates only when the ClientHello
// spans several records.
func ParseClientHello(data []byte) (hello ClientHello, need int, err error) {
	var (
		pos int
		// msg is the reassembled handshake message when it spans records; while it fits in the first
		// record, first is used in place without copying.
		msg   []byte
		first []byte
		n     int // handshake bytes seen so far
	)
	for {
		if len(data)-pos < recordHeaderLen {
			if pos == 0 && len(data) > 0 && data[0] != recordTypeHandshake {
				return ClientHello{}, 0, ErrNotTLS // decide on the first byte: plain HTTP must not wait
			}
			return ClientHello{}, pos + recordHeaderLen, nil
		}
		hdr := data[pos : pos+recordHeaderLen]
		if hdr[0] != recordTypeHandshake || hdr[1] != 3 {
			if pos == 0 {
				return ClientHello{}, 0, ErrNotTLS
			}
			return ClientHello{}, 0, fmt.Errorf("%w: record of type %d version %d.%d inside the ClientHello", ErrMalformed, hdr[0], hdr[1], hdr[2])
		}
		rlen := int(hdr[3])<<8 | int(hdr[4])
		if rlen == 0 {
			return ClientHello{}, 0, fmt.Errorf("%w: empty handshake record", ErrMalformed)
		}
		if rlen > MaxRecordLen {
			return ClientHello{}, 0, fmt.Errorf("%w: record of %d bytes, limit %d", ErrTooLarge, rlen, MaxRecordLen)
		}
		end := pos + recordHeaderLen + rlen
		if len(data) < end {
			return ClientHello{}, end, nil
		}
		frag := data[pos+recordHeaderLen : end]
		pos = end
		switch {
		case n == 0:
			first = frag
		case msg == nil:
			msg = make([]byte, 0, len(first)+len(frag))
			msg = append(append(msg, first...), frag...)
		default:
			msg = append(msg, frag...)
		}
		n += len(frag)
		cur := first
		if msg != nil {
			cur = msg
		}
		if n < handshakeHeaderLen {
			continue
		}
		if cur[0] != handshakeClientHello {
			return ClientHello{}, 0, fmt.Errorf("%w: first handshake message has type %d, not ClientHello", ErrMalformed, cur[0])
		}
		mlen := int(cur[1])<<16 | int(cur[2])<<8 | int(cur[3])
		if mlen > MaxClientHelloLen {
			return ClientHello{}, 0, fmt.Errorf("%w: ClientHello of %d bytes, limit %d", ErrTooLarge, mlen, MaxClientHelloLen)
		}
		if n < handshakeHeaderLen+mlen {
			continue
		}
		hello, err := parseClientHelloBody(cur[handshakeHeaderLen : handshakeHeaderLen+mlen])
		if err != nil {
			return ClientHello{}, 0, err
		}
		return hello, 0, nil
	}
}

// reader walks a byte slice; every read checks bounds and turns a short input into ErrMalformed.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() int {
	b := r.bytes(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (r *reader) u16() int {
	b := r.bytes(2)
	if b == nil {
		return 0
	}
	return int(b[0])<<8 | int(b[1])
}

// vec reads a vector with a 1- or 2-byte length prefix.
func (r *reader) vec(lenBytes int) []byte {
	var n int
	if lenBytes == 1 {
		n = r.u8()
	} else {
		n = r.u16()
	}
	return r.bytes(n)
}

// parseClientHelloBody parses the ClientHello message body (RFC 8446 section 4.1.2, which also covers the
// TLS 1.0-1.2 layout) and extracts the server name.
func parseClientHelloBody(body []byte) (ClientHello, error) {
	r := reader{b: body}
	r.bytes(2)  // legacy_version
	r.bytes(32) // random
	if sid := r.vec(1); len(sid) > 32 {
		return ClientHello{}, fmt.Errorf("%w: session id of %d bytes", ErrMalformed, len(sid))
	}
	if cs := r.vec(2); !r.bad && (len(cs) < 2 || len(cs)%2 != 0) {
		return ClientHello{}, fmt.Errorf("%w: cipher suites list of %d bytes", ErrMalformed, len(cs))
	}
	if cm := r.vec(1); !r.bad && len(cm) < 1 {
		return ClientHello{}, fmt.Errorf("%w: no compression methods", ErrMalformed)
	}
	if r.bad {
		return ClientHello{}, fmt.Errorf("%w: truncated ClientHello", ErrMalformed)
	}
	if len(r.b) == 0 {
		return ClientHello{}, nil // TLS 1.0-era hello without extensions
	}
	exts := reader{b: r.vec(2)}
	if r.bad || len(r.b) != 0 {
		return ClientHello{}, fmt.Errorf("%w: extensions block does not fill the ClientHello", ErrMalformed)
	}
	var hello ClientHello
	seenSNI := false
	for len(exts.b) > 0 {
		typ := exts.u16()
		data := exts.vec(2)
		if exts.bad {
			return ClientHello{}, fmt.Errorf("%w: truncated extension", ErrMalformed)
		}
		if typ != extensionServerName {
			continue
		}
		if seenSNI {
			return ClientHello{}, fmt.Errorf("%w: two server_name extensions", ErrMalformed)
		}
		seenSNI = true
		name, err := parseServerName(data)
		if err != nil {
			return ClientHello{}, err
		}
		hello.ServerName = name
	}
	return hello, nil
}

// parseServerName returns the normalised host_name of a server_name extension, or "" when it holds none
// that could name a host.
func parseServerName(ext []byte) (string, error) {
	r := reader{b: ext}
	list := reader{b: r.vec(2)}
	if r.bad || len(r.b) != 0 || len(list.b) == 0 {
		return "", fmt.Errorf("%w: bad server_name list", ErrMalformed)
	}
	for len(list.b) > 0 {
		typ := list.u8()
		name := list.vec(2)
		if list.bad {
			return "", fmt.Errorf("%w: truncated server_name entry", ErrMalformed)
		}
		if typ == serverNameTypeHost {
			return normalizeHostname(name), nil
		}
	}
	return "", nil
}

// normalizeHostname lowercases an SNI name and drops one trailing dot. Names with bytes no DNS name has
// (or too long) give "": they cannot match a route, and must not reach logs or metrics unchecked.
func normalizeHostname(b []byte) string {
	if len(b) > 0 && b[len(b)-1] == '.' {
		b = b[:len(b)-1]
	}
	if len(b) == 0 || len(b) > maxHostnameLen {
		return ""
	}
	lower := true
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		case c >= 'A' && c <= 'Z':
			lower = false
		default:
			return ""
		}
	}
	if lower {
		return string(b)
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// ReadClientHello reads from r until ParseClientHello can decide, and returns the ClientHello and every
// byte read, which the caller must replay to whichever server it picks. The bytes already in buf (its
// length) count as read; its capacity is used before anything is allocated. It reads no further than the
// record that completes the ClientHello asks for (plus whatever that read returned), and never more than
// limit bytes in total: a longer prefix fails with ErrTooLarge.
//
// On error the bytes read so far are returned too: a connection that is not TLS, or not a valid
// ClientHello, is still forwarded rather than dropped. io.ErrUnexpectedEOF reports a peer that closed
// before the ClientHello was complete, io.EOF one that sent nothing; other read errors (timeouts
// included) are returned as they are.
func ReadClientHello(r io.Reader, buf []byte, limit int) (ClientHello, []byte, error) {
	var hello ClientHello
	data, err := readUntil(r, buf, limit, func(b []byte) (int, error) {
		h, need, err := ParseClientHello(b)
		hello = h
		return need, err
	})
	if errors.Is(err, errLimit) {
		err = fmt.Errorf("%w: more than %d bytes before the ClientHello is complete", ErrTooLarge, limit)
	}
	return hello, data, err
}

// minReadBuffer is the smallest buffer readUntil allocates, so that a nil buffer does not mean tiny reads.
const minReadBuffer = 1024

// errLimit is readUntil's error for input that would exceed its limit.
var errLimit = errors.New("read limit reached")

// readUntil appends reads from r to buf until parse returns need == 0 (done, or an error). parse gets
// everything read so far, non-empty, and returns the length the input must reach before it can say more;
// it is called once per such length, not once per read. Reading stops with errLimit when that length
// exceeds limit; the buffer grows (by doubling, up to limit) only when buf's capacity is too small. A read
// error ends reading when the input is still too short; io.EOF after some bytes becomes
// io.ErrUnexpectedEOF.
func readUntil(r io.Reader, buf []byte, limit int, parse func([]byte) (need int, err error)) ([]byte, error) {
	data := buf
	need := 1
	for {
		if len(data) >= need {
			var err error
			need, err = parse(data)
			if err != nil || need == 0 {
				return data, err
			}
		}
		for len(data) < need {
			if need > limit {
				return data, errLimit
			}
			if cap(data) < need {
				grown := make([]byte, len(data), min(limit, max(need, 2*cap(data), minReadBuffer)))
				copy(grown, data)
				data = grown
			}
			n, err := r.Read(data[len(data):min(cap(data), limit)])
			data = data[:len(data)+n]
			if err != nil && len(data) < need {
				if err == io.EOF && len(data) > 0 {
					err = io.ErrUnexpectedEOF
				}
				return data, err
			}
		}
	}
}
