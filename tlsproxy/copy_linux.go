package tlsproxy

import (
	"errors"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// copyStream copies src to dst until EOF. It waits for src to be readable without holding anything, then
// splices exactly the bytes queued (io.Copy of an io.LimitedReader over a *net.TCPConn is splice(2)), so
// an idle connection holds no splice pipe: plain io.Copy keeps one pipe (two descriptors and the kernel's
// 1 MiB pipe ring) per direction for as long as the connection is open.
func copyStream(dst, src *net.TCPConn) (int64, error) {
	rc, err := src.SyscallConn()
	if err != nil {
		return io.Copy(dst, src)
	}
	var total int64
	for {
		queued, err := waitReadable(rc)
		if err != nil || queued == 0 {
			return total, err
		}
		n, err := io.Copy(dst, &io.LimitedReader{R: src, N: int64(queued)})
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(queued) {
			return total, nil // cannot happen while the bytes were queued; treat as the end
		}
	}
}

// waitReadable blocks until the socket has bytes queued, its peer finished sending, or it failed. It
// returns the number of bytes queued, 0 at EOF.
func waitReadable(rc syscall.RawConn) (int, error) {
	var (
		queued int
		serr   error
	)
	err := rc.Read(func(fd uintptr) bool {
		n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		if err != nil {
			serr = err
			return true
		}
		if n > 0 {
			queued = n
			return true
		}
		// Nothing queued: the end of the stream, an error, or simply nothing yet. Peeking tells them apart.
		var b [1]byte
		k, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return false // park until the poller says readable
		case err != nil:
			serr = err
		case k > 0:
			queued = 1 // arrived between the two calls
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	return queued, serr
}
