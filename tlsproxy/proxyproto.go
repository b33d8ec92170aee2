package tlsproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// ProxyProtocol selects the PROXY protocol header (HAProxy's proxy-protocol.txt) the proxy sends in front of
// a connection's bytes, so that the receiver learns the client's address.
type ProxyProtocol uint8

const (
	// ProxyProtocolNone sends no header.
	ProxyProtocolNone ProxyProtocol = iota
	// ProxyProtocolV1 sends the human-readable version 1 header ("PROXY TCP4 ...\r\n").
	ProxyProtocolV1
	// ProxyProtocolV2 sends the binary version 2 header.
	ProxyProtocolV2
)

// String returns "none", "v1" or "v2", the spelling of the annotation values.
func (p ProxyProtocol) String() string {
	switch p {
	case ProxyProtocolV1:
		return "v1"
	case ProxyProtocolV2:
		return "v2"
	default:
		return "none"
	}
}

// AppendHeader appends the header of version p for a connection from src to dst (the address the client
// connected to) and returns the extended slice. ProxyProtocolNone appends nothing.
func (p ProxyProtocol) AppendHeader(b []byte, src, dst netip.AddrPort) []byte {
	switch p {
	case ProxyProtocolV1:
		return AppendProxyHeaderV1(b, src, dst)
	case ProxyProtocolV2:
		return AppendProxyHeaderV2(b, src, dst)
	default:
		return b
	}
}

// proxyV2Signature starts every version 2 header.
var proxyV2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")

const (
	proxyV1Prefix  = "PROXY "
	proxyV1MaxLen  = 107 // the longest valid v1 line, CRLF included
	proxyV2HdrLen  = 16
	proxyV2MaxBody = 4096 // addresses plus TLVs; load balancers send a few hundred bytes at most

	proxyV2VersionCmdLocal = 0x20
	proxyV2VersionCmdProxy = 0x21
	proxyV2FamUnspec       = 0x00
	proxyV2FamTCP4         = 0x11
	proxyV2FamTCP6         = 0x21
)

// sameFamily returns src and dst as both IPv4 or both IPv6 (IPv4 mapped into IPv6 when they differ), and
// false when either address is not valid.
func sameFamily(src, dst netip.AddrPort) (netip.AddrPort, netip.AddrPort, bool) {
	if !src.IsValid() || !dst.IsValid() {
		return src, dst, false
	}
	s := netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	d := netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if s.Addr().Is4() != d.Addr().Is4() {
		s = netip.AddrPortFrom(netip.AddrFrom16(s.Addr().As16()), s.Port())
		d = netip.AddrPortFrom(netip.AddrFrom16(d.Addr().As16()), d.Port())
	}
	return s, d, true
}

// AppendProxyHeaderV1 appends a version 1 header ("PROXY TCP4 src dst sport dport\r\n"); "PROXY UNKNOWN\r\n"
// when an address is not valid.
func AppendProxyHeaderV1(b []byte, src, dst netip.AddrPort) []byte {
	s, d, ok := sameFamily(src, dst)
	if !ok {
		return append(b, "PROXY UNKNOWN\r\n"...)
	}
	b = append(b, proxyV1Prefix...)
	if s.Addr().Is4() {
		b = append(b, "TCP4 "...)
	} else {
		b = append(b, "TCP6 "...)
	}
	b = s.Addr().WithZone("").AppendTo(b)
	b = append(b, ' ')
	b = d.Addr().WithZone("").AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(s.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(d.Port()), 10)
	return append(b, '\r', '\n')
}

// AppendProxyHeaderV2 appends a version 2 header with the PROXY command over TCP; the address family is
// AF_UNSPEC (no addresses) when an address is not valid.
func AppendProxyHeaderV2(b []byte, src, dst netip.AddrPort) []byte {
	b = append(b, proxyV2Signature...)
	s, d, ok := sameFamily(src, dst)
	switch {
	case !ok:
		return append(b, proxyV2VersionCmdProxy, proxyV2FamUnspec, 0, 0)
	case s.Addr().Is4():
		b = append(b, proxyV2VersionCmdProxy, proxyV2FamTCP4, 0, 12)
		sa, da := s.Addr().As4(), d.Addr().As4()
		b = append(b, sa[:]...)
		b = append(b, da[:]...)
	default:
		b = append(b, proxyV2VersionCmdProxy, proxyV2FamTCP6, 0, 36)
		sa, da := s.Addr().As16(), d.Addr().As16()
		b = append(b, sa[:]...)
		b = append(b, da[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, s.Port())
	return binary.BigEndian.AppendUint16(b, d.Port())
}

// ProxyHeader is a parsed PROXY protocol header.
type ProxyHeader struct {
	// Version is 1 or 2.
	Version int
	// Source and Destination are the client's address and the address it connected to, as the sender saw
	// them. Both are invalid for a v1 UNKNOWN header, a v2 LOCAL command or a v2 address family other than
	// TCP over IPv4 or IPv6: the receiver then uses the connection's own addresses.
	Source, Destination netip.AddrPort
}

// ErrBadProxyHeader is returned by ParseProxyHeader when data does not start with a valid PROXY protocol
// header.
var ErrBadProxyHeader = errors.New("bad PROXY protocol header")

// ParseProxyHeader parses a PROXY protocol header (version 1 or 2) at the start of data. Like
// ParseClientHello it works on prefixes: need > 0 means data must reach that length first. On success it
// returns the header and its length n; the connection's own bytes start at data[n:].
func ParseProxyHeader(data []byte) (h ProxyHeader, n, need int, err error) {
	if len(data) == 0 {
		return ProxyHeader{}, 0, 1, nil
	}
	if data[0] == proxyV2Signature[0] {
		return parseProxyV2(data)
	}
	return parseProxyV1(data)
}

func parseProxyV1(data []byte) (ProxyHeader, int, int, error) {
	k := min(len(data), len(proxyV1Prefix))
	if !bytes.Equal(data[:k], []byte(proxyV1Prefix[:k])) {
		return ProxyHeader{}, 0, 0, fmt.Errorf("%w: neither version 1 nor 2", ErrBadProxyHeader)
	}
	end := bytes.Index(data[:min(len(data), proxyV1MaxLen)], []byte("\r\n"))
	if end < 0 {
		if len(data) >= proxyV1MaxLen {
			return ProxyHeader{}, 0, 0, fmt.Errorf("%w: version 1 line longer than %d bytes", ErrBadProxyHeader, proxyV1MaxLen)
		}
		return ProxyHeader{}, 0, len(data) + 1, nil
	}
	fields := bytes.Split(data[len(proxyV1Prefix):end], []byte{' '})
	h := ProxyHeader{Version: 1}
	switch string(fields[0]) {
	case "UNKNOWN":
		return h, end + 2, 0, nil
	case "TCP4", "TCP6":
	default:
		return ProxyHeader{}, 0, 0, fmt.Errorf("%w: version 1 protocol %q", ErrBadProxyHeader, fields[0])
	}
	if len(fields) != 5 {
		return ProxyHeader{}, 0, 0, fmt.Errorf("%w: version 1 line needs 5 fields after PROXY, has %d", ErrBadProxyHeader, len(fields))
	}
	v4 := string(fields[0]) == "TCP4"
	src, err1 := parseV1Addr(fields[1], fields[3], v4)
	dst, err2 := parseV1Addr(fields[2], fields[4], v4)
	if err := errors.Join(err1, err2); err != nil {
		return ProxyHeader{}, 0, 0, fmt.Errorf("%w: %w", ErrBadProxyHeader, err)
	}
	h.Source, h.Destination = src, dst
	return h, end + 2, 0, nil
}

func parseV1Addr(addr, port []byte, v4 bool) (netip.AddrPort, error) {
	a, err := netip.ParseAddr(string(addr))
	if err != nil || a.Is4() != v4 || a.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("address %q does not match its protocol", addr)
	}
	if len(port) == 0 || len(port) > 1 && port[0] == '0' {
		return netip.AddrPort{}, fmt.Errorf("port %q is not canonical", port)
	}
	p, err := strconv.ParseUint(string(port), 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", port, err)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

func parseProxyV2(data []byte) (ProxyHeader, int, int, error) {
	k := min(len(data), len(proxyV2Signature))
	if !bytes.Equal(data[:k], proxyV2Signature[:k]) {
		return ProxyHeader{}, 0, 0, fmt.Errorf("%w: bad version 2 signature", ErrBadProxyHeader)
	}
	if len(data) < proxyV2HdrLen {
		return ProxyHeader{}, 0, proxyV2HdrLen, nil
	}
	verCmd, fam := data[12], data[13]
	bodyLen := int(binary.BigEndian.Uint16(data[14:16]))
	if verCmd>>4 != 2 || verCmd&0x0f > 1 {
		return ProxyHeader{}, 0, 0, fmt.Errorf("%w: version/command byte 0x%02x", ErrBadProxyHeader, verCmd)
	}
	if bodyLen > proxyV2MaxBody {
		return ProxyHeader{}, 0, 0, fmt.Errorf("%w: %d bytes of addresses and TLVs, limit %d", ErrBadProxyHeader, bodyLen, proxyV2MaxBody)
	}
	total := proxyV2HdrLen + bodyLen
	if len(data) < total {
		return ProxyHeader{}, 0, total, nil
	}
	h := ProxyHeader{Version: 2}
	if verCmd == proxyV2VersionCmdLocal {
		return h, total, 0, nil
	}
	body := data[proxyV2HdrLen:total]
	switch fam {
	case proxyV2FamTCP4:
		if len(body) < 12 {
			return ProxyHeader{}, 0, 0, fmt.Errorf("%w: IPv4 addresses need 12 bytes, have %d", ErrBadProxyHeader, len(body))
		}
		h.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(body[0:4])), binary.BigEndian.Uint16(body[8:10]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom4([4]byte(body[4:8])), binary.BigEndian.Uint16(body[10:12]))
	case proxyV2FamTCP6:
		if len(body) < 36 {
			return ProxyHeader{}, 0, 0, fmt.Errorf("%w: IPv6 addresses need 36 bytes, have %d", ErrBadProxyHeader, len(body))
		}
		h.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(body[0:16])), binary.BigEndian.Uint16(body[32:34]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom16([16]byte(body[16:32])), binary.BigEndian.Uint16(body[34:36]))
	default:
		// UDP, UNIX sockets or AF_UNSPEC: no TCP addresses to use.
	}
	return h, total, 0, nil
}
