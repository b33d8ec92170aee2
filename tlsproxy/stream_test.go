package tlsproxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// namedEcho is a TCP server that answers every line with its name and the line.
func namedEcho(t *testing.T, name string) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 256)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(name + ":" + string(buf[:n]))); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).AddrPort()
}

// streamProxy serves one stream on a loopback listener and returns its address.
func streamProxy(t *testing.T, opts Options, st *Stream) (*Proxy, string) {
	t.Helper()
	opts.Log = zaptest.NewLogger(t)
	opts.Name = "TCP services"
	p := New(opts)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.ServeStream(l, st) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrProxyClosed) {
			t.Errorf("ServeStream returned %v, want ErrProxyClosed", err)
		}
	})
	return p, l.Addr().String()
}

func dialAddr(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, bound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(bound))
	return c
}

// ask sends msg and returns the answer (one read).
func ask(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("read the answer to %q: %v", msg, err)
	}
	return string(buf[:n])
}

// TestStreamKeepsOpenConnectionsAcrossRouteChanges: a TCP service's connection keeps its endpoint when
// the endpoints change; the next connection goes to the new endpoint. Counters follow.
func TestStreamKeepsOpenConnectionsAcrossRouteChanges(t *testing.T) {
	a, b := namedEcho(t, "a"), namedEcho(t, "b")
	m := NewStreamMetrics()
	counters := m.For(ProtocolTCP, 9000, "ns/app:7000")
	st := NewStream(StreamRoute{Backend: "ns/app:7000", Endpoints: []netip.AddrPort{a}}, counters)
	p, addr := streamProxy(t, Options{}, st)

	first := dialAddr(t, addr)
	if got := ask(t, first, "one"); got != "a:one" {
		t.Fatalf("first connection got %q, want a:one", got)
	}
	st.SetRoute(StreamRoute{Backend: "ns/app:7000", Endpoints: []netip.AddrPort{b}}, counters)
	if got := ask(t, first, "two"); got != "a:two" {
		t.Fatalf("after the change the open connection got %q, want a:two (its endpoint kept)", got)
	}
	second := dialAddr(t, addr)
	if got := ask(t, second, "three"); got != "b:three" {
		t.Fatalf("a new connection got %q, want b:three (the new endpoint)", got)
	}
	if got := counter(t, counters.connections); got != 2 {
		t.Errorf("connections = %v, want 2", got)
	}
	if got := counter(t, counters.active); got != 2 {
		t.Errorf("active = %v, want 2", got)
	}
	_ = first.Close()
	_ = second.Close()
	waitFor(t, "both connections to end", func() bool { return p.Active() == 0 })
	if got := counter(t, counters.active); got != 0 {
		t.Errorf("active after close = %v, want 0", got)
	}
	if got := counter(t, counters.received); got != float64(len("onetwothree")) {
		t.Errorf("bytes received = %v, want %d", got, len("onetwothree"))
	}
	if got := counter(t, counters.sent); got != float64(len("a:onea:twob:three")) {
		t.Errorf("bytes sent = %v, want %d", got, len("a:onea:twob:three"))
	}
}

// TestStreamProxyProtocol: with the first PROXY field the client's PROXY header is read and its address
// passed on; with the second the endpoint gets a header; both together arbitrate between two proxies.
func TestStreamProxyProtocol(t *testing.T) {
	lbClient := netip.MustParseAddrPort("203.0.113.7:41000")
	lbFront := netip.MustParseAddrPort("198.51.100.1:9000")
	for _, tc := range []struct {
		name           string
		decode         bool
		encode         ProxyProtocol
		wantHeaderFrom string // "" no header; "lb" the load balancer's client; "conn" the TCP peer
	}{
		{name: "neither"},
		{name: "decode", decode: true},
		{name: "encode", encode: ProxyProtocolV1, wantHeaderFrom: "conn"},
		{name: "both", decode: true, encode: ProxyProtocolV2, wantHeaderFrom: "lb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backend := newRecorder(t, "backend")
			st := NewStream(StreamRoute{Backend: "ns/db:5432", Endpoints: []netip.AddrPort{backend.addr},
				AcceptProxyProtocol: tc.decode, ProxyProtocol: tc.encode}, nil)
			_, addr := streamProxy(t, Options{}, st)
			c := dialAddr(t, addr)
			var sent []byte
			if tc.decode {
				sent = AppendProxyHeaderV1(sent, lbClient, lbFront)
			}
			sent = append(sent, "payload"...)
			if _, err := c.Write(sent); err != nil {
				t.Fatal(err)
			}
			var want []byte
			switch tc.wantHeaderFrom {
			case "lb":
				want = tc.encode.AppendHeader(nil, lbClient, lbFront)
			case "conn":
				want = tc.encode.AppendHeader(nil, c.LocalAddr().(*net.TCPAddr).AddrPort(), netip.MustParseAddrPort(addr))
			}
			want = append(want, "payload"...)
			if got := readN(t, backend.accept(t), len(want)); !bytes.Equal(got, want) {
				t.Errorf("endpoint got %q, want %q", got, want)
			}
		})
	}
}

// TestStreamRefusesWhatItCannotServe: no endpoints, a missing PROXY header and unreachable endpoints close
// the connection and are counted by reason.
func TestStreamRefusesWhatItCannotServe(t *testing.T) {
	m := NewStreamMetrics()
	for _, tc := range []struct {
		reason string
		route  StreamRoute
		send   string
	}{
		{reason: ReasonNoEndpoints, route: StreamRoute{Backend: "ns/none:1"}},
		{reason: ReasonProxyProtocol, route: StreamRoute{Backend: "ns/pp:1", AcceptProxyProtocol: true, Endpoints: []netip.AddrPort{namedEcho(t, "x")}}, send: "GET / HTTP/1.1\r\n\r\n"},
		{reason: ReasonDialFailed, route: StreamRoute{Backend: "ns/down:1", Endpoints: []netip.AddrPort{closedPort(t)}}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			counters := m.For(ProtocolTCP, 1, tc.route.Backend)
			_, addr := streamProxy(t, Options{}, NewStream(tc.route, counters))
			c := dialAddr(t, addr)
			if tc.send != "" {
				_, _ = c.Write([]byte(tc.send))
			}
			expectClosed(t, c)
			waitFor(t, "the rejection to be counted", func() bool { return counter(t, counters.rejects.WithLabelValues(tc.reason)) == 1 })
		})
	}
}

// TestStreamIdleTimeout: a TCP service connection on which nothing moves is closed by the idle check and
// counted per Service.
func TestStreamIdleTimeout(t *testing.T) {
	counters := NewStreamMetrics().For(ProtocolTCP, 9001, "ns/idle:1")
	st := NewStream(StreamRoute{Backend: "ns/idle:1", Endpoints: []netip.AddrPort{namedEcho(t, "a")}}, counters)
	clk := &fakeClock{}
	opts := Options{IdleTimeout: time.Hour, Log: zaptest.NewLogger(t), Name: "TCP services"}
	p := New(opts)
	p.clock = clk
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.ServeStream(l, st) }()
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	c := dialAddr(t, l.Addr().String())
	if got := ask(t, c, "hi"); got != "a:hi" {
		t.Fatalf("got %q", got)
	}
	waitFor(t, "the idle check to be armed", func() bool { return clk.armed() == 1 })
	clk.fire() // the traffic since the connection began counts as activity
	clk.fire()
	expectClosed(t, c)
	if got := counter(t, counters.idle); got != 1 {
		t.Errorf("idle timeouts = %v, want 1", got)
	}
}

// udpEcho is a UDP server that answers every datagram with its name and the datagram.
func udpEcho(t *testing.T, name string) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteToUDPAddrPort([]byte(name+":"+string(buf[:n])), from)
		}
	}()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// udpProxy serves u on a loopback socket and returns its address.
func udpProxy(t *testing.T, u *UDPProxy) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- u.Serve(c) }()
	t.Cleanup(func() {
		if err := u.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrProxyClosed) {
			t.Errorf("Serve returned %v, want ErrProxyClosed", err)
		}
	})
	return c.LocalAddr().String()
}

func udpClient(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// udpAsk sends msg and returns the first answer, or "" when none comes within wait.
func udpAsk(t *testing.T, c *net.UDPConn, msg string, wait time.Duration) string {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("send %q: %v", msg, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ""
	}
	if err != nil {
		t.Fatalf("read the answer to %q: %v", msg, err)
	}
	return string(buf[:n])
}

// TestUDPFlowsKeepTheirEndpoint: each client is a flow; a flow keeps its endpoint when the endpoints
// change but still include it, and replies come back to the client's address.
func TestUDPFlowsKeepTheirEndpoint(t *testing.T) {
	a, b := udpEcho(t, "a"), udpEcho(t, "b")
	counters := NewStreamMetrics().For(ProtocolUDP, 5353, "ns/dns:53")
	u := NewUDP(UDPOptions{Log: zaptest.NewLogger(t)}, StreamRoute{Backend: "ns/dns:53", Endpoints: []netip.AddrPort{a}}, counters)
	addr := udpProxy(t, u)

	first := udpClient(t, addr)
	if got := udpAsk(t, first, "one", bound); got != "a:one" {
		t.Fatalf("first client got %q, want a:one", got)
	}
	u.SetRoute(StreamRoute{Backend: "ns/dns:53", Endpoints: []netip.AddrPort{b, a}}, counters)
	for _, msg := range []string{"two", "three", "four"} {
		if got := udpAsk(t, first, msg, bound); got != "a:"+msg {
			t.Fatalf("after b was added the first client's flow got %q, want a:%s (its endpoint kept)", got, msg)
		}
	}
	if u.Flows() != 1 {
		t.Errorf("flows = %d, want 1", u.Flows())
	}
	if got := counter(t, counters.connections); got != 1 {
		t.Errorf("flows started = %v, want 1", got)
	}
	// A reply can reach the client before the proxy has counted the datagram that asked for it.
	waitFor(t, "the bytes to be counted", func() bool {
		return counter(t, counters.received) == float64(len("onetwothreefour")) && counter(t, counters.sent) == float64(len("a:onea:twoa:threea:four"))
	})
}

// TestUDPFlowsLeaveARemovedEndpoint: when its endpoint leaves the route, a flow ends, so a client that
// keeps sending does not keep feeding an address that is no longer the Service's; its next datagram and
// new clients go to the current endpoints.
func TestUDPFlowsLeaveARemovedEndpoint(t *testing.T) {
	a, b := udpEcho(t, "a"), udpEcho(t, "b")
	counters := NewStreamMetrics().For(ProtocolUDP, 5353, "ns/dns:53")
	u := NewUDP(UDPOptions{Log: zaptest.NewLogger(t)}, StreamRoute{Backend: "ns/dns:53", Endpoints: []netip.AddrPort{a}}, counters)
	addr := udpProxy(t, u)

	first := udpClient(t, addr)
	if got := udpAsk(t, first, "one", bound); got != "a:one" {
		t.Fatalf("first client got %q, want a:one", got)
	}
	u.SetRoute(StreamRoute{Backend: "ns/dns:53", Endpoints: []netip.AddrPort{b}}, counters)
	if u.Flows() != 0 {
		t.Errorf("flows = %d once their endpoint was removed, want 0", u.Flows())
	}
	if got := udpAsk(t, first, "two", bound); got != "b:two" {
		t.Fatalf("after a was removed the first client got %q, want b:two", got)
	}
	second := udpClient(t, addr)
	if got := udpAsk(t, second, "three", bound); got != "b:three" {
		t.Fatalf("a new client got %q, want b:three (the new endpoint)", got)
	}
	if got := counter(t, counters.connections); got != 3 {
		t.Errorf("flows started = %v, want 3", got)
	}
	if got := counter(t, counters.active); got != 2 {
		t.Errorf("active flows = %v, want 2", got)
	}
}

// TestUDPFlowIdleTimeoutAndLimit: a flow without traffic for the idle timeout ends (the client's next
// datagram starts a new flow); beyond the flow limit datagrams from new clients are dropped and counted.
func TestUDPFlowIdleTimeoutAndLimit(t *testing.T) {
	a := udpEcho(t, "a")
	counters := NewStreamMetrics().For(ProtocolUDP, 5353, "ns/dns:53")
	u := NewUDP(UDPOptions{MaxFlows: 1, IdleTimeout: time.Hour, Log: zaptest.NewLogger(t)}, StreamRoute{Backend: "ns/dns:53", Endpoints: []netip.AddrPort{a}}, counters)
	clk := &fakeClock{}
	u.clock = clk
	addr := udpProxy(t, u)

	first := udpClient(t, addr)
	if got := udpAsk(t, first, "one", bound); got != "a:one" {
		t.Fatalf("first client got %q", got)
	}
	second := udpClient(t, addr)
	// Dropped: no answer will come, so a short wait is enough; the counter below is the real check.
	if got := udpAsk(t, second, "two", 200*time.Millisecond); got != "" {
		t.Fatalf("a client beyond the flow limit got %q, want no answer", got)
	}
	waitFor(t, "the dropped datagram to be counted", func() bool { return counter(t, counters.rejects.WithLabelValues(ReasonFlowLimit)) == 1 })

	clk.fire() // traffic since the flow began
	if u.Flows() != 1 {
		t.Fatalf("flows = %d after one check with traffic, want 1", u.Flows())
	}
	clk.fire() // nothing since
	if u.Flows() != 0 {
		t.Fatalf("flows = %d after an idle period, want 0", u.Flows())
	}
	if got := counter(t, counters.idle); got != 1 {
		t.Errorf("idle timeouts = %v, want 1", got)
	}
	if got := counter(t, counters.active); got != 0 {
		t.Errorf("active flows = %v, want 0", got)
	}
	if got := udpAsk(t, second, "three", bound); got != "a:three" {
		t.Fatalf("once the flow ended, the second client got %q, want a:three", got)
	}
}

// TestUDPNoEndpoints: datagrams of new clients are dropped while the Service has no endpoints.
func TestUDPNoEndpoints(t *testing.T) {
	counters := NewStreamMetrics().For(ProtocolUDP, 5353, "ns/none:53")
	u := NewUDP(UDPOptions{}, StreamRoute{Backend: "ns/none:53"}, counters)
	addr := udpProxy(t, u)
	c := udpClient(t, addr)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the drop to be counted", func() bool { return counter(t, counters.rejects.WithLabelValues(ReasonNoEndpoints)) == 1 })
	if u.Flows() != 0 {
		t.Errorf("flows = %d, want 0", u.Flows())
	}
}
