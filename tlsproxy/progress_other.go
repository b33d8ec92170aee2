//go:build !linux

package tlsproxy

import "net"

// tcpProgress is only implemented on Linux (TCP_INFO). Elsewhere it reports no information, and the idle
// timeout is not enforced.
func tcpProgress(*net.TCPConn) (uint64, bool) { return 0, false }
