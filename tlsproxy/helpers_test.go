package tlsproxy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"
)

// bound is how long a test waits for something that should happen promptly; it only limits how long a
// broken test hangs.
const bound = 10 * time.Second

// testProxy is a Proxy serving on a loopback listener, with its metrics and a fake NGINX behind it.
type testProxy struct {
	*Proxy
	addr    string
	metrics *Metrics
	nginx   *recorder
}

// startProxy starts a proxy on 127.0.0.1 with the given routes; opts.NginxAddress defaults to a
// recorder that plays NGINX.
func startProxy(t *testing.T, opts Options, routes ...Route) *testProxy {
	t.Helper()
	return startProxyWithClock(t, nil, opts, routes...)
}

// startProxyWithClock is startProxy with the idle checks driven by clk.
func startProxyWithClock(t *testing.T, clk clock, opts Options, routes ...Route) *testProxy {
	t.Helper()
	tp := &testProxy{metrics: NewMetrics()}
	if opts.NginxAddress == "" {
		tp.nginx = newRecorder(t, "nginx")
		opts.NginxAddress = tp.nginx.addr.String()
	}
	opts.Metrics = tp.metrics
	opts.Log = zaptest.NewLogger(t)
	tp.Proxy = New(opts)
	if clk != nil {
		tp.clock = clk
	}
	tp.SetTable(NewTable(routes))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.addr = l.Addr().String()
	served := make(chan error, 1)
	go func() { served <- tp.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrProxyClosed) {
			t.Errorf("Serve returned %v, want ErrProxyClosed", err)
		}
	})
	return tp
}

func (tp *testProxy) dial(t *testing.T) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", tp.addr, bound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(bound))
	return c.(*net.TCPConn)
}

// counter returns the value of one counter (or gauge) child.
func counter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func (tp *testProxy) connections(t *testing.T, route, reason string) float64 {
	t.Helper()
	return counter(t, tp.metrics.connections.WithLabelValues(route, reason))
}

// waitFor polls cond until it holds, failing the test after bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recorder is a TCP server that hands each accepted connection to the test.
type recorder struct {
	name  string
	addr  netip.AddrPort
	conns chan *net.TCPConn
}

func newRecorder(t *testing.T, name string) *recorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{name: name, addr: l.Addr().(*net.TCPAddr).AddrPort(), conns: make(chan *net.TCPConn, 16)}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(bound))
			r.conns <- c.(*net.TCPConn)
		}
	}()
	return r
}

// accept returns the next connection the recorder got. Call it from the test's goroutine.
func (r *recorder) accept(t *testing.T) *net.TCPConn {
	t.Helper()
	c, err := r.next()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// next is accept for other goroutines: the caller closes the connection.
func (r *recorder) next() (*net.TCPConn, error) {
	select {
	case c := <-r.conns:
		return c, nil
	case <-time.After(bound):
		return nil, fmt.Errorf("%s got no connection", r.name)
	}
}

// idle reports whether the recorder has no connection waiting.
func (r *recorder) idle() bool { return len(r.conns) == 0 }

// readN reads exactly n bytes.
func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

// expectClosed fails unless c's peer closes (or resets) the connection without sending anything more.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(bound))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %s", bound)
	}
	if len(b) > 0 {
		t.Fatalf("got %q before the close, want nothing", b)
	}
}

// roundTrip writes msg and expects it echoed back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	if got := readN(t, c, len(msg)); string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

// echo copies everything c receives back to it.
func echo(c net.Conn) {
	_, _ = io.Copy(c, c)
	_ = c.Close()
}

// selfSigned returns a certificate for name, signed by itself.
func selfSigned(t testing.TB, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// prefixConn is a net.Conn whose first reads return prefix.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// tlsServe answers one TLS connection with cert and then echoes. With proxyHeader it first reads and
// returns a PROXY protocol header.
func tlsServe(c net.Conn, cert tls.Certificate, proxyHeader bool) (ProxyHeader, error) {
	var h ProxyHeader
	if proxyHeader {
		hdr, rest, err := readProxyHeader(c, nil, 4096)
		if err != nil {
			return h, err
		}
		h = hdr
		c = &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(rest), c)}
	}
	go func() {
		s := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		if s.Handshake() == nil {
			echo(s)
		}
		_ = c.Close()
	}()
	return h, nil
}

// tlsDial runs a TLS handshake with serverName over c and returns the server certificate's name.
func tlsDial(t *testing.T, c net.Conn, serverName string) (*tls.Conn, string) {
	t.Helper()
	tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}) //nolint:gosec // the test checks which certificate came back
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake with SNI %q: %v", serverName, err)
	}
	return tc, tc.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// fakeClock runs idle checks when the test says so.
type fakeClock struct {
	mu      sync.Mutex
	pending []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) AfterFunc(_ time.Duration, f func()) stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, f: f}
	c.pending = append(c.pending, t)
	return t
}

// armed returns the number of checks waiting to run.
func (c *fakeClock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.pending {
		if !t.stopped {
			n++
		}
	}
	return n
}

// fire runs every check armed so far (and not those they arm).
func (c *fakeClock) fire() {
	c.mu.Lock()
	ts := c.pending
	c.pending = nil
	var run []func()
	for _, t := range ts {
		if !t.stopped {
			t.stopped = true
			run = append(run, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range run {
		f()
	}
}
