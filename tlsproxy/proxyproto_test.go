package tlsproxy

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const v2Sig = "0d0a0d0a000d0a515549540a"

func TestProxyHeaderWriters(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := map[string]struct {
		src, dst netip.AddrPort
		v1       string
		v2       string // hex
	}{
		"IPv4": {
			src: ap("192.0.2.1:56324"), dst: ap("198.51.100.7:443"),
			v1: "PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n",
			v2: v2Sig + "21 11 000c c0000201 c6336407 dc04 01bb",
		},
		"IPv6": {
			src: ap("[2001:db8::1]:1"), dst: ap("[2001:db8::2]:65535"),
			v1: "PROXY TCP6 2001:db8::1 2001:db8::2 1 65535\r\n",
			v2: v2Sig + "21 21 0024 20010db8000000000000000000000001 20010db8000000000000000000000002 0001 ffff",
		},
		"IPv4-mapped IPv6 (a dual-stack listener) is sent as IPv4": {
			src: ap("[::ffff:192.0.2.1]:1000"), dst: ap("[::ffff:192.0.2.2]:443"),
			v1: "PROXY TCP4 192.0.2.1 192.0.2.2 1000 443\r\n",
			v2: v2Sig + "21 11 000c c0000201 c0000202 03e8 01bb",
		},
		"mixed families become IPv6": {
			src: ap("192.0.2.1:1000"), dst: ap("[2001:db8::2]:443"),
			v1: "PROXY TCP6 ::ffff:192.0.2.1 2001:db8::2 1000 443\r\n",
			v2: v2Sig + "21 21 0024 00000000000000000000ffffc0000201 20010db8000000000000000000000002 03e8 01bb",
		},
		"zone is dropped": {
			src: ap("[fe80::1%eth0]:1000"), dst: ap("[fe80::2%eth0]:443"),
			v1: "PROXY TCP6 fe80::1 fe80::2 1000 443\r\n",
			v2: v2Sig + "21 21 0024 fe800000000000000000000000000001 fe800000000000000000000000000002 03e8 01bb",
		},
		"unknown addresses": {
			src: netip.AddrPort{}, dst: ap("192.0.2.2:443"),
			v1: "PROXY UNKNOWN\r\n",
			v2: v2Sig + "21 00 0000",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := string(ProxyProtocolV1.AppendHeader(nil, tc.src, tc.dst)); got != tc.v1 {
				t.Errorf("v1 = %q, want %q", got, tc.v1)
			}
			if got, want := ProxyProtocolV2.AppendHeader(nil, tc.src, tc.dst), mustHex(t, tc.v2); !bytes.Equal(got, want) {
				t.Errorf("v2 = % x\nwant % x", got, want)
			}
			if got := ProxyProtocolNone.AppendHeader([]byte("x"), tc.src, tc.dst); string(got) != "x" {
				t.Errorf("none appended %q", got[1:])
			}
		})
	}
}

// TestProxyHeaderRoundTrip: what the writers produce, the reader parses back, stopping exactly at the
// end of the header; every shorter prefix asks for more.
func TestProxyHeaderRoundTrip(t *testing.T) {
	pairs := [][2]netip.AddrPort{
		{netip.MustParseAddrPort("192.0.2.1:56324"), netip.MustParseAddrPort("198.51.100.7:443")},
		{netip.MustParseAddrPort("[2001:db8::1]:1"), netip.MustParseAddrPort("[2001:db8::2]:443")},
	}
	payload := []byte{22, 3, 1, 0, 1}
	for _, v := range []ProxyProtocol{ProxyProtocolV1, ProxyProtocolV2} {
		for _, p := range pairs {
			hdr := v.AppendHeader(nil, p[0], p[1])
			in := append(append([]byte(nil), hdr...), payload...)
			h, n, need, err := ParseProxyHeader(in)
			if err != nil || need != 0 {
				t.Fatalf("%s %v: need %d, err %v", v, p, need, err)
			}
			if n != len(hdr) || h.Source != p[0] || h.Destination != p[1] || h.Version != int(v) {
				t.Errorf("%s: parsed %+v (length %d), want %v -> %v (length %d)", v, h, n, p[0], p[1], len(hdr))
			}
			for i := range len(hdr) {
				_, _, need, err := ParseProxyHeader(hdr[:i])
				if err != nil || need <= i {
					t.Fatalf("%s prefix %d/%d: need %d, err %v", v, i, len(hdr), need, err)
				}
			}
		}
	}
}

func TestParseProxyHeader(t *testing.T) {
	tests := map[string]struct {
		in        []byte
		wantErr   bool
		wantLen   int
		wantNoSrc bool
	}{
		"v1 UNKNOWN":                  {in: []byte("PROXY UNKNOWN\r\nrest"), wantLen: 15, wantNoSrc: true},
		"v1 UNKNOWN with addresses":   {in: []byte("PROXY UNKNOWN ::1 ::2 1 2\r\n"), wantLen: 27, wantNoSrc: true},
		"v1 port with leading zero":   {in: []byte("PROXY TCP4 192.0.2.1 192.0.2.2 01 443\r\n"), wantErr: true},
		"v1 port out of range":        {in: []byte("PROXY TCP4 192.0.2.1 192.0.2.2 65536 443\r\n"), wantErr: true},
		"v1 IPv6 address in TCP4":     {in: []byte("PROXY TCP4 ::1 192.0.2.2 1 443\r\n"), wantErr: true},
		"v1 missing field":            {in: []byte("PROXY TCP4 192.0.2.1 192.0.2.2 1\r\n"), wantErr: true},
		"v1 unknown protocol":         {in: []byte("PROXY UDP4 192.0.2.1 192.0.2.2 1 2\r\n"), wantErr: true},
		"v1 line too long":            {in: []byte("PROXY UNKNOWN " + strings.Repeat("x", 100)), wantErr: true},
		"TLS instead of a header":     {in: []byte{22, 3, 1, 0, 200}, wantErr: true},
		"HTTP instead of a header":    {in: []byte("GET / HTTP/1.1\r\n"), wantErr: true},
		"v2 LOCAL (health check)":     {in: mustHex(t, v2Sig+"20 00 0000"), wantLen: 16, wantNoSrc: true},
		"v2 with TLVs after":          {in: mustHex(t, v2Sig+"21 11 0012 c0000201 c0000202 0001 0002 04 0003 616263"), wantLen: 34},
		"v2 UNIX addresses":           {in: append(mustHex(t, v2Sig+"21 31 00d8"), make([]byte, 216)...), wantLen: 232, wantNoSrc: true},
		"v2 version 3":                {in: mustHex(t, v2Sig+"31 11 000c c0000201 c0000202 0001 0002"), wantErr: true},
		"v2 unknown command":          {in: mustHex(t, v2Sig+"22 11 000c c0000201 c0000202 0001 0002"), wantErr: true},
		"v2 IPv4 addresses too short": {in: mustHex(t, v2Sig+"21 11 0004 c0000201"), wantErr: true},
		"v2 longer than the limit":    {in: mustHex(t, v2Sig+"21 11 ffff"), wantErr: true},
		"v2 bad signature":            {in: mustHex(t, "0d0a0d0a000d0a515549540b 21 11 000c"), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, n, need, err := ParseProxyHeader(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrBadProxyHeader) {
					t.Fatalf("got %+v, need %d, err %v; want ErrBadProxyHeader", h, need, err)
				}
				return
			}
			if err != nil || need != 0 {
				t.Fatalf("need %d, err %v", need, err)
			}
			if n != tc.wantLen {
				t.Errorf("header length %d, want %d", n, tc.wantLen)
			}
			if tc.wantNoSrc == h.Source.IsValid() {
				t.Errorf("source %v valid = %v, want %v", h.Source, h.Source.IsValid(), !tc.wantNoSrc)
			}
		})
	}
}

// FuzzParseProxyHeader: the reader never panics, never claims more bytes than it has, never asks for
// fewer than it has, and what the writers produce for the addresses it returns parses back the same.
func FuzzParseProxyHeader(f *testing.F) {
	src, dst := netip.MustParseAddrPort("192.0.2.1:1"), netip.MustParseAddrPort("[2001:db8::2]:443")
	f.Add(ProxyProtocolV1.AppendHeader(nil, src, dst))
	f.Add(ProxyProtocolV2.AppendHeader(nil, src, dst))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add(mustHex(f, v2Sig+"21 11 0012 c0000201 c0000202 0001 0002 04 0003 616263"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, n, need, err := ParseProxyHeader(data)
		switch {
		case err != nil:
			if need != 0 || n != 0 {
				t.Fatalf("error %v with n %d, need %d", err, n, need)
			}
		case need != 0:
			if need <= len(data) {
				t.Fatalf("asks for %d bytes, has %d", need, len(data))
			}
		default:
			if n < 1 || n > len(data) {
				t.Fatalf("header length %d of %d bytes", n, len(data))
			}
			if h.Source.IsValid() != h.Destination.IsValid() {
				t.Fatalf("only one address valid: %+v", h)
			}
			if h.Source.IsValid() {
				for _, v := range []ProxyProtocol{ProxyProtocolV1, ProxyProtocolV2} {
					again, _, _, err := ParseProxyHeader(v.AppendHeader(nil, h.Source, h.Destination))
					if err != nil || again.Source != unmapIfMixed(h.Source, h.Destination) && again.Source != h.Source {
						t.Fatalf("%s round trip of %+v: %+v, %v", v, h, again, err)
					}
				}
			}
		}
	})
}

// unmapIfMixed mirrors the writers: IPv4-mapped addresses are written as IPv4 when both sides are IPv4.
func unmapIfMixed(a, b netip.AddrPort) netip.AddrPort {
	s, _, _ := sameFamily(a, b)
	return s
}
