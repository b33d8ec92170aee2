//go:build !linux

package tlsproxy

import (
	"io"
	"net"
	"syscall"
)

// copyStream copies src to dst until EOF.
func copyStream(dst, src *net.TCPConn) (int64, error) { return io.Copy(dst, src) }

// waitReadable returns at once: without Linux's SIOCINQ the caller's read does the waiting.
func waitReadable(syscall.RawConn) (int, error) { return 1, nil }
