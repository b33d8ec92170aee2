//go:build integration

package harness

import (
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// APIProxy is a TCP relay in front of the shared API server that a test can take down and bring back,
// so that one controller sees an API-server outage (connections refused, open watches cut) while the
// API server itself, and every other test, carries on.
type APIProxy struct {
	// Kubeconfig is a kubeconfig file like the shared one whose server is the relay.
	Kubeconfig string

	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// StartAPIProxy starts a relay to the shared API server on a free loopback port. The API server's
// certificate is valid for 127.0.0.1 whatever the port, so the same credentials work through it.
func (f *Fixture) StartAPIProxy() *APIProxy {
	f.T.Helper()
	cfg, err := clientcmd.LoadFromFile(f.Env.KubeconfigPath)
	if err != nil {
		f.T.Fatalf("load kubeconfig: %v", err)
	}
	p := &APIProxy{t: f.T, conns: map[net.Conn]struct{}{}}
	for _, cluster := range cfg.Clusters {
		u, err := url.Parse(cluster.Server)
		if err != nil {
			f.T.Fatalf("kubeconfig server %q: %v", cluster.Server, err)
		}
		if p.target == "" {
			p.target = u.Host
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				f.T.Fatalf("API proxy: %v", err)
			}
			p.addr = ln.Addr().String()
			p.serve(ln)
		}
		u.Host = p.addr
		cluster.Server = u.String()
	}
	p.Kubeconfig = filepath.Join(f.T.TempDir(), "kubeconfig-via-proxy")
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		f.T.Fatalf("write kubeconfig: %v", err)
	}
	if err := os.Chmod(p.Kubeconfig, 0o600); err != nil {
		f.T.Fatalf("chmod kubeconfig: %v", err)
	}
	f.T.Cleanup(p.Down)
	return p
}

func (p *APIProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.relay(c)
		}
	}()
}

func (p *APIProxy) relay(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // taken down while dialling
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	_ = client.Close()
	_ = server.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// Down stops accepting (new connections are refused) and cuts every open connection, watches included.
func (p *APIProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

// Up accepts connections again on the same address.
func (p *APIProxy) Up() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("API proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}
