package tlsproxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// TestProxyRoutesByServerName: real TLS clients get the certificate of the server their name routes to:
// a passthrough backend (exact or wildcard name), or NGINX for unknown names and no name at all. NGINX
// gets a PROXY v2 header with the client's address in front.
func TestProxyRoutesByServerName(t *testing.T) {
	shop := newRecorder(t, "shop")
	wild := newRecorder(t, "wild")
	tp := startProxy(t, Options{NginxProxyProtocol: ProxyProtocolV2},
		Route{Host: "shop.example.com", Backend: "shop", Endpoints: []netip.AddrPort{shop.addr}},
		Route{Host: "*.apps.example.com", Backend: "wild", Endpoints: []netip.AddrPort{wild.addr}},
	)
	certs := map[string]tls.Certificate{"shop": selfSigned(t, "shop"), "wild": selfSigned(t, "wild"), "nginx": selfSigned(t, "nginx")}
	tests := []struct {
		sni        string
		wantServer *recorder
		wantReason string
	}{
		{"shop.example.com", shop, ReasonSNI},
		{"a.apps.example.com", wild, ReasonSNI},
		{"other.example.com", tp.nginx, ReasonUnknownSNI},
		{"apps.example.com", tp.nginx, ReasonUnknownSNI},
		{"", tp.nginx, ReasonNoSNI},
	}
	for _, tc := range tests {
		t.Run("sni="+tc.sni, func(t *testing.T) {
			route := RoutePassthrough
			if tc.wantServer == tp.nginx {
				route = RouteNginx
			}
			before := tp.connections(t, route, tc.wantReason)
			c := tp.dial(t)
			type served struct {
				h   ProxyHeader
				err error
			}
			done := make(chan served, 1)
			go func() {
				conn, err := tc.wantServer.next()
				if err != nil {
					done <- served{err: err}
					return
				}
				h, err := tlsServe(conn, certs[tc.wantServer.name], tc.wantServer == tp.nginx)
				done <- served{h, err}
			}()
			tc2, name := tlsDial(t, c, tc.sni)
			if name != tc.wantServer.name {
				t.Fatalf("server certificate %q, want %q's", name, tc.wantServer.name)
			}
			roundTrip(t, tc2, "through the proxy")
			s := <-done
			if s.err != nil {
				t.Fatal(s.err)
			}
			if tc.wantServer == tp.nginx {
				if s.h.Version != 2 || s.h.Source != c.LocalAddr().(*net.TCPAddr).AddrPort() || s.h.Destination.String() != tp.addr {
					t.Errorf("NGINX got PROXY header %+v, want v2 from %v to %v", s.h, c.LocalAddr(), tp.addr)
				}
			}
			if got := tp.connections(t, route, tc.wantReason); got != before+1 {
				t.Errorf("connections_total{route=%s,reason=%s} went from %g to %g, want +1", route, tc.wantReason, before, got)
			}
		})
	}
}

// TestProxyHandsNonTLSToNginxUnchanged: bytes that are not TLS reach NGINX exactly as sent, so NGINX can
// answer (with an error) instead of the client seeing a silent close.
func TestProxyHandsNonTLSToNginxUnchanged(t *testing.T) {
	tests := map[string]struct {
		send   string
		reason string
	}{
		"plain HTTP":    {"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n", ReasonNotTLS},
		"one odd byte":  {"\x00", ReasonNotTLS},
		"broken record": {"\x16\x03\x01\x00\x04\x02\x00\x00\x00", ReasonBadHello},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tp := startProxy(t, Options{})
			c := tp.dial(t)
			if _, err := c.Write([]byte(tc.send)); err != nil {
				t.Fatal(err)
			}
			n := tp.nginx.accept(t)
			if got := readN(t, n, len(tc.send)); string(got) != tc.send {
				t.Errorf("NGINX got %q, want %q", got, tc.send)
			}
			if _, err := n.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			if got := readN(t, c, 12); string(got) != "HTTP/1.1 400" {
				t.Errorf("client got %q back", got)
			}
			if got := tp.connections(t, RouteNginx, tc.reason); got != 1 {
				t.Errorf("connections_total{route=nginx,reason=%s} = %g, want 1", tc.reason, got)
			}
		})
	}
}

// TestProxyHalfClose: when the client shuts down its sending side, the backend sees EOF and can still
// answer; the backend's own shutdown then reaches the client. Protocols that end one direction first
// work through the proxy.
func TestProxyHalfClose(t *testing.T) {
	b := newRecorder(t, "backend")
	tp := startProxy(t, Options{}, Route{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{b.addr}})
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	c := tp.dial(t)
	if _, err := c.Write(append(append([]byte(nil), hello...), "request"...)); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	bc := b.accept(t)
	got, err := io.ReadAll(bc) // ends only when the client's FIN came through
	if err != nil {
		t.Fatalf("backend read: %v", err)
	}
	if want := append(append([]byte(nil), hello...), "request"...); !bytes.Equal(got, want) {
		t.Fatalf("backend got %d bytes, want the %d the client sent", len(got), len(want))
	}
	if _, err := bc.Write([]byte("response after the client's half-close")); err != nil {
		t.Fatalf("backend write after the client's half-close: %v", err)
	}
	if err := bc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("client read: %v", err)
	}
	if string(resp) != "response after the client's half-close" {
		t.Errorf("client got %q", resp)
	}
	waitFor(t, "the proxy to close the finished connection", func() bool { return tp.Active() == 0 })
	if got := counter(t, tp.metrics.bytes.WithLabelValues(RoutePassthrough, "received")); got != float64(len(hello)+len("request")) {
		t.Errorf("bytes received = %g, want %d", got, len(hello)+len("request"))
	}
}

// TestProxyIdleTimeout: a connection is closed once a check finds no byte moved since the previous one;
// traffic between checks keeps it open.
func TestProxyIdleTimeout(t *testing.T) {
	clk := &fakeClock{}
	b := newRecorder(t, "backend")
	tp := startProxyWithClock(t, clk, Options{IdleTimeout: time.Minute},
		Route{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{b.addr}})
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	c := tp.dial(t)
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	bc := b.accept(t)
	readN(t, bc, len(hello))
	go echo(bc)
	waitFor(t, "the idle check to be armed", func() bool { return clk.armed() == 1 })

	for i := range 5 {
		roundTrip(t, c, "still here")
		clk.fire()
		if clk.armed() != 1 {
			t.Fatalf("check %d after traffic did not re-arm: the connection was closed while in use", i)
		}
	}
	// Silence from now on: at most two checks (one may still see the last acknowledgements arrive).
	for i := 0; clk.armed() == 1; i++ {
		if i == 3 {
			t.Fatal("three checks without traffic and the connection is still open")
		}
		clk.fire()
	}
	expectClosed(t, c)
	if got := counter(t, tp.metrics.idleClosed); got != 1 {
		t.Errorf("idle_timeouts_total = %g, want 1", got)
	}
}

// TestProxyIdleTimeoutRealClock: with the real clock, a silent connection is closed (how soon is not
// asserted; the bound only limits how long a broken proxy hangs the test).
func TestProxyIdleTimeoutRealClock(t *testing.T) {
	b := newRecorder(t, "backend")
	tp := startProxy(t, Options{IdleTimeout: 50 * time.Millisecond},
		Route{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{b.addr}})
	c := tp.dial(t)
	if _, err := c.Write(captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})); err != nil {
		t.Fatal(err)
	}
	bc := b.accept(t)
	go func() { _, _ = io.Copy(io.Discard, bc) }()
	expectClosed(t, c)
}

// TestProxyMaxConnections: over the limit, new connections are closed at once and counted; once an open
// one ends, new connections are served again.
func TestProxyMaxConnections(t *testing.T) {
	b := newRecorder(t, "backend")
	tp := startProxy(t, Options{MaxConnections: 2}, Route{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{b.addr}})
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	open := func() *net.TCPConn {
		c := tp.dial(t)
		if _, err := c.Write(hello); err != nil {
			t.Fatal(err)
		}
		bc := b.accept(t)
		readN(t, bc, len(hello))
		go echo(bc)
		roundTrip(t, c, "ok")
		return c
	}
	first := open()
	open()

	// The proxy resets the connection right after accepting it; the reset may even beat the dialer.
	if over, err := net.DialTimeout("tcp", tp.addr, bound); err == nil {
		defer over.Close()
		_, _ = over.Write(hello) // may already fail
		expectClosed(t, over)
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("dial over the limit: %v, want success or a reset", err)
	}
	if got := tp.connections(t, RouteRejected, ReasonLimit); got != 1 {
		t.Errorf("connections_total{route=rejected,reason=limit} = %g, want 1", got)
	}
	if !b.idle() {
		t.Error("the refused connection reached the backend")
	}

	_ = first.Close()
	waitFor(t, "the closed connection to be released", func() bool { return tp.Active() == 1 })
	open()
}

// TestProxyFailover: a dial that fails moves on to the next endpoint; connections still round-robin.
func TestProxyFailover(t *testing.T) {
	dead := closedPort(t)
	good := newRecorder(t, "good")
	tp := startProxy(t, Options{}, Route{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{dead, good.addr}})
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	for range 4 {
		c := tp.dial(t)
		if _, err := c.Write(hello); err != nil {
			t.Fatal(err)
		}
		bc := good.accept(t)
		readN(t, bc, len(hello))
		go echo(bc)
		roundTrip(t, c, "served")
	}
	// Round-robin starts at the dead endpoint for every other connection.
	if got := counter(t, tp.metrics.dialFailures.WithLabelValues(RoutePassthrough)); got != 2 {
		t.Errorf("dial_failures_total{route=passthrough} = %g, want 2 (of 4 connections, half start at the dead endpoint)", got)
	}
}

// TestProxyClosesWhatItCannotPass: a passthrough host whose endpoints all fail, or that has none, is closed,
// not handed to NGINX (whose certificate the client does not expect).
func TestProxyClosesWhatItCannotPass(t *testing.T) {
	tests := map[string]struct {
		endpoints []netip.AddrPort
		reason    string
	}{
		"every endpoint refuses": {[]netip.AddrPort{closedPort(t), closedPort(t)}, ReasonDialFailed},
		"no endpoints":           {nil, ReasonNoEndpoints},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tp := startProxy(t, Options{}, Route{Host: "shop.example.com", Backend: "b", Endpoints: tc.endpoints})
			c := tp.dial(t)
			if _, err := c.Write(captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
			if got := tp.connections(t, RouteRejected, tc.reason); got != 1 {
				t.Errorf("connections_total{route=rejected,reason=%s} = %g, want 1", tc.reason, got)
			}
			if !tp.nginx.idle() {
				t.Error("the connection was handed to NGINX")
			}
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().(*net.TCPAddr).AddrPort()
	_ = l.Close()
	return a
}

// TestProxyProtocolToBackends: a route with PROXY protocol sends the backend a v1 or v2 header naming the
// client and the address it connected to, then the client's bytes.
func TestProxyProtocolToBackends(t *testing.T) {
	for _, v := range []ProxyProtocol{ProxyProtocolV1, ProxyProtocolV2} {
		t.Run(v.String(), func(t *testing.T) {
			b := newRecorder(t, "backend")
			tp := startProxy(t, Options{}, Route{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{b.addr}, ProxyProtocol: v})
			hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
			c := tp.dial(t)
			if _, err := c.Write(hello); err != nil {
				t.Fatal(err)
			}
			client := c.LocalAddr().(*net.TCPAddr).AddrPort()
			proxy := netip.MustParseAddrPort(tp.addr)
			want := v.AppendHeader(nil, client, proxy)
			want = append(want, hello...)
			if got := readN(t, b.accept(t), len(want)); !bytes.Equal(got, want) {
				t.Errorf("backend got\n%q\nwant\n%q", got[:min(len(got), 60)], want[:min(len(want), 60)])
			}
		})
	}
}

// TestProxyAcceptsProxyProtocol: behind a load balancer that sends PROXY headers, the client address it
// reports is what backends and NGINX are told; a connection without a header is refused.
func TestProxyAcceptsProxyProtocol(t *testing.T) {
	b := newRecorder(t, "backend")
	tp := startProxy(t, Options{AcceptProxyProtocol: true, NginxProxyProtocol: ProxyProtocolV1},
		Route{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{b.addr}, ProxyProtocol: ProxyProtocolV2})
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	other := captureClientHello(t, &tls.Config{ServerName: "other.example.com"})
	lb := []byte("PROXY TCP4 203.0.113.7 198.51.100.1 5555 443\r\n")
	src, dst := netip.MustParseAddrPort("203.0.113.7:5555"), netip.MustParseAddrPort("198.51.100.1:443")

	c := tp.dial(t)
	// Header and ClientHello in one write: the bytes after the header must not be lost.
	if _, err := c.Write(append(append([]byte(nil), lb...), hello...)); err != nil {
		t.Fatal(err)
	}
	want := append(ProxyProtocolV2.AppendHeader(nil, src, dst), hello...)
	if got := readN(t, b.accept(t), len(want)); !bytes.Equal(got, want) {
		t.Errorf("backend got % x...\nwant % x...", got[:28], want[:28])
	}

	c = tp.dial(t)
	oneByteWriter(c, append(append([]byte(nil), lb...), other...))
	want = append(ProxyProtocolV1.AppendHeader(nil, src, dst), other...)
	if got := readN(t, tp.nginx.accept(t), len(want)); !bytes.Equal(got, want) {
		t.Errorf("NGINX got %q..., want %q...", got[:50], want[:50])
	}

	c = tp.dial(t)
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	if got := tp.connections(t, RouteRejected, ReasonProxyProtocol); got != 1 {
		t.Errorf("connections_total{route=rejected,reason=proxy_protocol} = %g, want 1", got)
	}
}

// TestProxyHelloTimeout: a client that sends nothing is closed; one that sends part of a ClientHello and
// stalls is handed to NGINX with what it sent.
func TestProxyHelloTimeout(t *testing.T) {
	tp := startProxy(t, Options{HelloTimeout: 50 * time.Millisecond})
	silent := tp.dial(t)
	expectClosed(t, silent)
	if got := tp.connections(t, RouteRejected, ReasonHelloTimeout); got != 1 {
		t.Errorf("connections_total{route=rejected,reason=hello_timeout} = %g, want 1", got)
	}

	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	slow := tp.dial(t)
	if _, err := slow.Write(hello[:10]); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, tp.nginx.accept(t), 10); !bytes.Equal(got, hello[:10]) {
		t.Errorf("NGINX got %q, want the 10 bytes sent", got)
	}
	if got := tp.connections(t, RouteNginx, ReasonBadHello); got != 1 {
		t.Errorf("connections_total{route=nginx,reason=bad_hello} = %g, want 1", got)
	}
	if got := counter(t, tp.metrics.helloErrors.WithLabelValues("timeout")); got != 2 {
		t.Errorf("clienthello_errors_total{reason=timeout} = %g, want 2", got)
	}
}

// TestProxyTableSwapKeepsOpenConnections: replacing the table moves new connections and leaves open ones
// on their backend.
func TestProxyTableSwapKeepsOpenConnections(t *testing.T) {
	a, b := newRecorder(t, "a"), newRecorder(t, "b")
	tp := startProxy(t, Options{}, Route{Host: "shop.example.com", Backend: "a", Endpoints: []netip.AddrPort{a.addr}})
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	connect := func(r *recorder) *net.TCPConn {
		c := tp.dial(t)
		if _, err := c.Write(hello); err != nil {
			t.Fatal(err)
		}
		bc := r.accept(t)
		readN(t, bc, len(hello))
		go echo(bc)
		return c
	}
	old := connect(a)
	roundTrip(t, old, "before")
	tp.SetTable(NewTable([]Route{{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{b.addr}}}))
	roundTrip(t, old, "after the swap, same backend")
	roundTrip(t, connect(b), "new connection, new backend")
	if got := counter(t, tp.metrics.routes); got != 1 {
		t.Errorf("routes gauge = %g, want 1", got)
	}
}

// TestProxyShutdown: Shutdown stops accepting and, when its context ends first, closes open connections.
func TestProxyShutdown(t *testing.T) {
	b := newRecorder(t, "backend")
	p := New(Options{NginxAddress: closedPort(t).String()})
	p.SetTable(NewTable([]Route{{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{b.addr}}}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	bc := b.accept(t)
	readN(t, bc, len(hello))
	go echo(bc)
	roundTrip(t, c, "open")

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: close at once
	if err := p.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v, want context.Canceled (a connection had to be closed)", err)
	}
	expectClosed(t, c)
	if err := <-served; !errors.Is(err, ErrProxyClosed) {
		t.Errorf("Serve = %v, want ErrProxyClosed", err)
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Error("the listener still accepts after Shutdown")
	}
	if err := p.Serve(l); !errors.Is(err, ErrProxyClosed) {
		t.Errorf("Serve after Shutdown = %v, want ErrProxyClosed", err)
	}
	waitFor(t, "no open connection", func() bool { return p.Active() == 0 })
	if err := p.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown with nothing open = %v", err)
	}
}

// TestProxyResetClosesBothSides: when the backend aborts (RST), the client's side is closed too, rather
// than left open with nobody behind it.
func TestProxyResetClosesBothSides(t *testing.T) {
	b := newRecorder(t, "backend")
	tp := startProxy(t, Options{}, Route{Host: "shop.example.com", Backend: "b", Endpoints: []netip.AddrPort{b.addr}})
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})
	c := tp.dial(t)
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	bc := b.accept(t)
	readN(t, bc, len(hello))
	_ = bc.SetLinger(0)
	_ = bc.Close()
	expectClosed(t, c)
	waitFor(t, "the connection to be released", func() bool { return tp.Active() == 0 })
}

// TestProxyClientGoneBeforeHello: a client that closes without sending anything, or resets in the middle
// of its ClientHello, is counted and not handed to NGINX (nobody is left to answer).
func TestProxyClientGoneBeforeHello(t *testing.T) {
	tp := startProxy(t, Options{})
	hello := captureClientHello(t, &tls.Config{ServerName: "shop.example.com"})

	c := tp.dial(t)
	_ = c.Close()
	r := tp.dial(t)
	if _, err := r.Write(hello[:20]); err != nil {
		t.Fatal(err)
	}
	_ = r.SetLinger(0)
	_ = r.Close()
	waitFor(t, "both connections to be counted", func() bool { return tp.connections(t, RouteRejected, ReasonClosed) == 2 })
	waitFor(t, "both connections to be released", func() bool { return tp.Active() == 0 })
	if !tp.nginx.idle() {
		t.Error("a connection whose client was gone was handed to NGINX")
	}
}
