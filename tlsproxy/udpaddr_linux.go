package tlsproxy

import (
	"encoding/binary"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// pktinfo makes the replies of a UDP service leave from the address each client sent to. A socket bound to
// a wildcard address would otherwise send them from the address the kernel picks for the client's route: on
// a host with several addresses (hostNetwork, several IPv6 addresses), not always the one the client
// sent to, and the client drops such replies. NGINX does the same with IP_PKTINFO/IPV6_PKTINFO.
type pktinfo struct{ v6 bool }

// enablePktinfo asks the kernel to report the destination address of each datagram arriving on c; nil
// when it cannot.
func enablePktinfo(c *net.UDPConn) *pktinfo {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	var p *pktinfo
	_ = rc.Control(func(fd uintptr) {
		domain, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		if err != nil {
			return
		}
		switch domain {
		case unix.AF_INET6: // also IPv4 datagrams of a dual-stack socket, as IPv4-mapped addresses
			if unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1) == nil {
				p = &pktinfo{v6: true}
			}
		case unix.AF_INET:
			if unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1) == nil {
				p = &pktinfo{}
			}
		}
	})
	return p
}

// oobSize holds one IPV6_PKTINFO or IP_PKTINFO control message.
const oobSize = 64

// replyOOB returns the control message that makes a reply leave from the address the datagram whose control
// messages are oob was sent to; nil when that is unknown or not a unicast address (a reply cannot leave
// from a broadcast or multicast address: the kernel's choice is kept).
func (p *pktinfo) replyOOB(oob []byte) []byte {
	if p == nil || len(oob) == 0 {
		return nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	for _, m := range msgs {
		switch {
		case p.v6 && m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo:
			// struct in6_pktinfo { struct in6_addr ipi6_addr; int ipi6_ifindex; }
			a := netip.AddrFrom16([16]byte(m.Data[:16]))
			if !unicast(a.Unmap()) {
				return nil
			}
			info := unix.Inet6Pktinfo{Addr: a.As16()}
			if a.IsLinkLocalUnicast() {
				info.Ifindex = binary.NativeEndian.Uint32(m.Data[16:20]) // the scope of the address
			}
			return unix.PktInfo6(&info)
		case !p.v6 && m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo { int ipi_ifindex; struct in_addr ipi_spec_dst; struct in_addr ipi_addr; }:
			// ipi_addr is the header's destination.
			a := netip.AddrFrom4([4]byte(m.Data[8:12]))
			if !unicast(a) {
				return nil
			}
			return unix.PktInfo4(&unix.Inet4Pktinfo{Spec_dst: a.As4()})
		}
	}
	return nil
}

func unicast(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
