package tlsproxy

import (
	"net"

	"golang.org/x/sys/unix"
)

// tcpProgress returns a number that grows whenever the connection moves data: the bytes the kernel has
// received on it plus the bytes the peer has acknowledged (TCP_INFO). It sees traffic that a splice in
// progress has not reported yet, and a peer that stopped reading (no acknowledgements). ok is false when
// the socket cannot be queried, for example because it is closed.
func tcpProgress(c *net.TCPConn) (progress uint64, ok bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	cerr := rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if cerr != nil || err != nil {
		return 0, false
	}
	return info.Bytes_received + info.Bytes_acked, true
}
