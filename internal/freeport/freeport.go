// Package freeport hands tests TCP ports to bind later. A port the kernel hands out for a listener that
// is closed at once can come back for the next one, so two ports taken one after the other may be the
// same; this package remembers what it returned and never returns a port twice in one process.
package freeport

import (
	"net"
	"sync"
	"testing"
)

var ports struct {
	mu   sync.Mutex
	used map[int]bool
}

// Get returns a TCP port that is free on all interfaces and was not returned before in this process.
func Get(t testing.TB) int {
	t.Helper()
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	for range 100 {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !ports.used[port] {
			ports.used[port] = true
			return port
		}
	}
	t.Fatal("find a free port: the kernel keeps returning ports handed out before")
	return 0
}
