package tlsproxy

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"testing/iotest"
	"time"
)

// recordingConn is a net.Conn that keeps what is written to it and answers every read with EOF, so a
// crypto/tls client writes its ClientHello into it and then gives up.
type recordingConn struct {
	buf bytes.Buffer
}

func (c *recordingConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *recordingConn) Write(b []byte) (int, error)      { return c.buf.Write(b) }
func (c *recordingConn) Close() error                     { return nil }
func (c *recordingConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *recordingConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *recordingConn) SetDeadline(time.Time) error      { return nil }
func (c *recordingConn) SetReadDeadline(time.Time) error  { return nil }
func (c *recordingConn) SetWriteDeadline(time.Time) error { return nil }

// captureClientHello returns the first flight of a real crypto/tls client with cfg: its ClientHello,
// exactly as it would go on the wire (the failed handshake's alert, if any, is cut off).
func captureClientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	rec := &recordingConn{}
	_ = tls.Client(rec, cfg).Handshake() // fails at the first read, after sending the ClientHello
	b := rec.buf.Bytes()
	if len(b) < recordHeaderLen {
		t.Fatalf("crypto/tls wrote only %d bytes", len(b))
	}
	n := recordHeaderLen + int(binary.BigEndian.Uint16(b[3:5]))
	return append([]byte(nil), b[:n]...)
}

// clientConfigs are the real clients the parser must understand.
func clientConfigs() map[string]struct {
	cfg  *tls.Config
	want string
} {
	return map[string]struct {
		cfg  *tls.Config
		want string
	}{
		"TLS 1.3 with SNI":                     {&tls.Config{ServerName: "shop.example.com", MinVersion: tls.VersionTLS13}, "shop.example.com"},
		"TLS 1.2 only with SNI":                {&tls.Config{ServerName: "shop.example.com", MaxVersion: tls.VersionTLS12}, "shop.example.com"},
		"TLS 1.2 and 1.3 with ALPN and SNI":    {&tls.Config{ServerName: "api.example.com", NextProtos: []string{"h2", "http/1.1"}}, "api.example.com"},
		"SNI in upper case with trailing dot":  {&tls.Config{ServerName: "Shop.Example.COM.", MinVersion: tls.VersionTLS13}, "shop.example.com"},
		"no SNI, TLS 1.3":                      {&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, ""}, //nolint:gosec // never completes a handshake
		"no SNI, TLS 1.2":                      {&tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}, ""}, //nolint:gosec // never completes a handshake
		"IP address (crypto/tls sends no SNI)": {&tls.Config{ServerName: "192.0.2.1"}, ""},
	}
}

func TestParseClientHelloFromRealClients(t *testing.T) {
	for name, tc := range clientConfigs() {
		t.Run(name, func(t *testing.T) {
			hello := captureClientHello(t, tc.cfg)
			got, need, err := ParseClientHello(hello)
			if err != nil || need != 0 {
				t.Fatalf("ParseClientHello = need %d, err %v; want a complete ClientHello", need, err)
			}
			if got.ServerName != tc.want {
				t.Errorf("ServerName = %q, want %q", got.ServerName, tc.want)
			}
		})
	}
}

// TestParseClientHelloPrefixesAskForMore: every proper prefix of a valid ClientHello is "incomplete",
// never an error, and need always points past what is there.
func TestParseClientHelloPrefixesAskForMore(t *testing.T) {
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	for _, h := range [][]byte{hello, fragment(t, hello, 7)} {
		for i := 0; i < len(h); i++ {
			_, need, err := ParseClientHello(h[:i])
			if err != nil {
				t.Fatalf("prefix of %d/%d bytes: %v, want a request for more", i, len(h), err)
			}
			if need <= i || need > len(h) {
				t.Fatalf("prefix of %d/%d bytes: need %d, want more than %d and at most %d", i, len(h), need, i, len(h))
			}
		}
	}
}

// fragment re-frames a single-record ClientHello into records carrying at most size handshake bytes each,
// as a client or middlebox may do.
func fragment(t testing.TB, hello []byte, size int) []byte {
	t.Helper()
	msg := hello[recordHeaderLen:]
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, recordTypeHandshake, hello[1], hello[2], byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// oneByteWriter writes b to w one byte per Write call, then closes w's write side if it can.
func oneByteWriter(w io.Writer, b []byte) {
	for i := range b {
		if _, err := w.Write(b[i : i+1]); err != nil {
			return
		}
	}
}

func TestReadClientHelloSplitDelivery(t *testing.T) {
	for name, tc := range clientConfigs() {
		hello := captureClientHello(t, tc.cfg)
		for _, split := range []struct {
			name  string
			bytes []byte
		}{
			{"one record", hello},
			{"records of 1 byte", fragment(t, hello, 1)},
			{"records of 3 bytes", fragment(t, hello, 3)},
			{"records of 100 bytes", fragment(t, hello, 100)},
		} {
			t.Run(name+"/"+split.name+"/one byte per read", func(t *testing.T) {
				got, data, err := ReadClientHello(iotest.OneByteReader(bytes.NewReader(split.bytes)), make([]byte, 0, 64), 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if got.ServerName != tc.want {
					t.Errorf("ServerName = %q, want %q", got.ServerName, tc.want)
				}
				if !bytes.Equal(data, split.bytes) {
					t.Errorf("returned %d bytes for replay, want exactly the %d sent", len(data), len(split.bytes))
				}
			})
			t.Run(name+"/"+split.name+"/one byte per write over a pipe", func(t *testing.T) {
				client, server := net.Pipe()
				defer client.Close()
				defer server.Close()
				go oneByteWriter(client, split.bytes)
				got, data, err := ReadClientHello(server, nil, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if got.ServerName != tc.want || !bytes.Equal(data, split.bytes) {
					t.Errorf("got %q and %d bytes, want %q and %d bytes", got.ServerName, len(data), tc.want, len(split.bytes))
				}
			})
		}
	}
}

// TestReadClientHelloKeepsBytesAfterTheHello: whatever arrived with the ClientHello (TLS 1.3 early data, a
// pipelined record) is returned for replay, never swallowed.
func TestReadClientHelloKeepsBytesAfterTheHello(t *testing.T) {
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	early := []byte{23, 3, 3, 0, 3, 'a', 'b', 'c'}
	in := append(append([]byte(nil), hello...), early...)
	got, data, err := ReadClientHello(bytes.NewReader(in), make([]byte, 0, 8192), 1<<20)
	if err != nil || got.ServerName != "shop.example.com" {
		t.Fatalf("got %q, %v", got.ServerName, err)
	}
	if !bytes.Equal(data, in) {
		t.Errorf("returned %d bytes, want the %d that were read (ClientHello and early data)", len(data), len(in))
	}
}

func TestReadClientHelloErrors(t *testing.T) {
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	tests := map[string]struct {
		in      []byte
		limit   int
		wantErr error
		// wantData is how many bytes must come back for replay (-1: all of in).
		wantData int
	}{
		"nothing at all":                 {in: nil, wantErr: io.EOF, wantData: 0},
		"cut short":                      {in: hello[:100], wantErr: io.ErrUnexpectedEOF, wantData: -1},
		"cut short in the record header": {in: hello[:3], wantErr: io.ErrUnexpectedEOF, wantData: -1},
		"plain HTTP":                     {in: []byte("GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n"), wantErr: ErrNotTLS, wantData: -1},
		"a single non-TLS byte":          {in: []byte("G"), wantErr: ErrNotTLS, wantData: -1},
		"SSLv2-style hello":              {in: []byte{0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15}, wantErr: ErrNotTLS, wantData: -1},
		"longer than the limit":          {in: hello, limit: 200, wantErr: ErrTooLarge, wantData: 200},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = 1 << 20
			}
			_, data, err := ReadClientHello(bytes.NewReader(tc.in), nil, limit)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			want := tc.wantData
			if want < 0 {
				want = len(tc.in)
			}
			if len(data) != want || !bytes.Equal(data, tc.in[:want]) {
				t.Errorf("returned %d bytes for replay, want the first %d read", len(data), want)
			}
		})
	}
}

// helloSpec builds synthetic ClientHellos, for shapes crypto/tls never sends.
type helloSpec struct {
	sessionID    []byte
	cipherSuites []byte
	compression  []byte
	noExtensions bool
	extensions   []byte // raw extension block contents
}

func (s helloSpec) body() []byte {
	b := []byte{3, 3}
	b = append(b, make([]byte, 32)...)
	b = append(b, byte(len(s.sessionID)))
	b = append(b, s.sessionID...)
	cs := s.cipherSuites
	if cs == nil {
		cs = []byte{0x13, 0x01}
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(cs)))
	b = append(b, cs...)
	cm := s.compression
	if cm == nil {
		cm = []byte{0}
	}
	b = append(b, byte(len(cm)))
	b = append(b, cm...)
	if !s.noExtensions {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s.extensions)))
		b = append(b, s.extensions...)
	}
	return b
}

// record wraps a handshake body as one ClientHello record.
func record(body []byte) []byte {
	msg := append([]byte{handshakeClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	out := []byte{recordTypeHandshake, 3, 1, byte(len(msg) >> 8), byte(len(msg))}
	return append(out, msg...)
}

// sniExtension returns a server_name extension with one entry of the given type and name.
func sniExtension(nameType byte, name []byte) []byte {
	entry := append([]byte{nameType, byte(len(name) >> 8), byte(len(name))}, name...)
	list := append([]byte{byte(len(entry) >> 8), byte(len(entry))}, entry...)
	return append([]byte{0, 0, byte(len(list) >> 8), byte(len(list))}, list...)
}

func TestParseClientHelloShapes(t *testing.T) {
	otherExt := []byte{0x00, 0x17, 0x00, 0x00} // extended_master_secret, empty
	tests := map[string]struct {
		in       []byte
		wantName string
		wantErr  error
	}{
		"no extensions at all":           {in: record(helloSpec{noExtensions: true}.body())},
		"extensions without SNI":         {in: record(helloSpec{extensions: otherExt}.body())},
		"SNI after another extension":    {in: record(helloSpec{extensions: append(append([]byte{}, otherExt...), sniExtension(0, []byte("a.example"))...)}.body()), wantName: "a.example"},
		"SNI entry of unknown type only": {in: record(helloSpec{extensions: sniExtension(7, []byte("a.example"))}.body())},
		"SNI with a space":               {in: record(helloSpec{extensions: sniExtension(0, []byte("a example"))}.body())},
		"SNI with a NUL byte":            {in: record(helloSpec{extensions: sniExtension(0, []byte("a.example\x00.evil"))}.body())},
		"SNI of 254 bytes":               {in: record(helloSpec{extensions: sniExtension(0, bytes.Repeat([]byte("a"), 254))}.body())},
		"two SNI extensions":             {in: record(helloSpec{extensions: append(sniExtension(0, []byte("a.example")), sniExtension(0, []byte("b.example"))...)}.body()), wantErr: ErrMalformed},
		"empty SNI list":                 {in: record(helloSpec{extensions: []byte{0, 0, 0, 2, 0, 0}}.body()), wantErr: ErrMalformed},
		"extension longer than block":    {in: record(helloSpec{extensions: []byte{0, 0x17, 0, 9}}.body()), wantErr: ErrMalformed},
		"odd cipher suites length":       {in: record(helloSpec{cipherSuites: []byte{0x13, 0x01, 0x13}, noExtensions: true}.body()), wantErr: ErrMalformed},
		"no compression methods":         {in: record(helloSpec{compression: []byte{}, noExtensions: true}.body()), wantErr: ErrMalformed},
		"session id of 33 bytes":         {in: record(helloSpec{sessionID: make([]byte, 33), noExtensions: true}.body()), wantErr: ErrMalformed},
		"truncated body":                 {in: record(helloSpec{noExtensions: true}.body()[:30]), wantErr: ErrMalformed},
		"trailing bytes after extensions": {
			in: record(append(helloSpec{extensions: otherExt}.body(), 0xff)), wantErr: ErrMalformed,
		},
		"ServerHello instead of ClientHello": {in: []byte{22, 3, 3, 0, 4, 2, 0, 0, 0}, wantErr: ErrMalformed},
		"empty handshake record":             {in: []byte{22, 3, 1, 0, 0}, wantErr: ErrMalformed},
		"record over 16 KiB":                 {in: []byte{22, 3, 1, 0x40, 0x01}, wantErr: ErrTooLarge},
		"ClientHello over the limit":         {in: []byte{22, 3, 1, 0, 4, 1, 0x01, 0x00, 0x00}, wantErr: ErrTooLarge},
		"alert record":                       {in: []byte{21, 3, 1, 0, 2, 2, 40}, wantErr: ErrNotTLS},
		"record version 2.0":                 {in: []byte{22, 2, 0, 0, 4}, wantErr: ErrNotTLS},
		"application data inside the hello": {
			in: append(fragment(t, record(helloSpec{noExtensions: true}.body()), 10)[:15], 23, 3, 3, 0, 1, 0), wantErr: ErrMalformed,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, need, err := ParseClientHello(tc.in)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || need != 0 {
					t.Fatalf("got need %d, err %v; want %v", need, err, tc.wantErr)
				}
				return
			}
			if err != nil || need != 0 {
				t.Fatalf("got need %d, err %v; want a complete ClientHello", need, err)
			}
			if got.ServerName != tc.wantName {
				t.Errorf("ServerName = %q, want %q", got.ServerName, tc.wantName)
			}
		})
	}
}

// FuzzParseClientHello: the parser never panics, never asks for fewer bytes than it has, decides the same
// way whatever the record framing of a valid hello, and ReadClientHello agrees with it on the same bytes.
func FuzzParseClientHello(f *testing.F) {
	for _, tc := range clientConfigs() {
		h := captureClientHello(f, tc.cfg)
		f.Add(h)
		f.Add(fragment(f, h, 5))
	}
	f.Add(record(helloSpec{extensions: sniExtension(0, []byte("A.Example."))}.body()))
	f.Add(record(helloSpec{noExtensions: true}.body()))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{22, 3, 1, 0x40, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		hello, need, err := ParseClientHello(data)
		switch {
		case err != nil && need != 0:
			t.Fatalf("error %v together with need %d", err, need)
		case err == nil && need != 0 && need <= len(data):
			t.Fatalf("asks for %d bytes but already has %d", need, len(data))
		case err == nil && need == 0 && hello.ServerName != "":
			for _, c := range []byte(hello.ServerName) {
				if c >= 'A' && c <= 'Z' || c <= ' ' || c >= 0x7f {
					t.Fatalf("server name %q is not normalised", hello.ServerName)
				}
			}
		}
		rh, rdata, rerr := ReadClientHello(bytes.NewReader(data), nil, 1<<20)
		if !bytes.Equal(rdata, data[:len(rdata)]) {
			t.Fatal("ReadClientHello returned bytes that were not read")
		}
		if err == nil && need == 0 && (rerr != nil || rh != hello) {
			t.Fatalf("ReadClientHello = %+v, %v; ParseClientHello = %+v", rh, rerr, hello)
		}
		for _, kind := range []error{ErrNotTLS, ErrMalformed, ErrTooLarge} {
			if errors.Is(err, kind) && !errors.Is(rerr, kind) {
				t.Fatalf("ParseClientHello: %v; ReadClientHello on the same bytes: %v", err, rerr)
			}
		}
		if err == nil && need != 0 && !errors.Is(rerr, io.ErrUnexpectedEOF) && !errors.Is(rerr, io.EOF) {
			t.Fatalf("incomplete input: ReadClientHello returned %v, want an unexpected EOF", rerr)
		}
		// A complete, valid single-record hello parses the same when split into records of 1 byte.
		if err == nil && need == 0 && len(data) >= recordHeaderLen && int(binary.BigEndian.Uint16(data[3:5]))+recordHeaderLen == len(data) {
			split := fragment(t, data, 1)
			if len(split) <= DefaultHelloLimit*8 {
				h2, need2, err2 := ParseClientHello(split)
				if err2 != nil || need2 != 0 || h2 != hello {
					t.Fatalf("re-framed into 1-byte records: %+v, need %d, %v; want %+v", h2, need2, err2, hello)
				}
			}
		}
	})
}
