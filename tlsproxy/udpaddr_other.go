//go:build !linux

package tlsproxy

import "net"

// pktinfo is Linux-only: elsewhere replies leave from the address the kernel picks.
type pktinfo struct{}

func enablePktinfo(*net.UDPConn) *pktinfo { return nil }

const oobSize = 0

func (*pktinfo) replyOOB([]byte) []byte { return nil }
