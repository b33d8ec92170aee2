//go:build !linux

package tlsproxy

import (
	"io"
	"net"
)

// copyStream copies src to dst until EOF.
func copyStream(dst, src *net.TCPConn) (int64, error) { return io.Copy(dst, src) }
