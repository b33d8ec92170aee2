package tlsproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults for zero Options fields.
const (
	DefaultHelloTimeout = 10 * time.Second
	DefaultDialTimeout  = 5 * time.Second
	DefaultDialAttempts = 3
	// DefaultHelloLimit bounds the bytes read before routing: a maximal ClientHello plus generous room for
	// record framing and a PROXY protocol header.
	DefaultHelloLimit = MaxClientHelloLen + 4096
)

// limitLogInterval spaces the "connection limit reached" warnings; each one says how many connections
// were refused since the previous one.
const limitLogInterval = 10 * time.Second

// initialBuffer is the buffer a connection reads its ClientHello into; it holds nearly every real one
// (about 2 KiB with post-quantum key shares), and grows up to DefaultHelloLimit for the rest.
const initialBuffer = 4096

var bufPool = sync.Pool{New: func() any { b := make([]byte, initialBuffer); return &b }}

// ErrProxyClosed is returned by Serve after Shutdown.
var ErrProxyClosed = errors.New("tlsproxy: proxy closed")

// Options configure a Proxy.
type Options struct {
	// NginxAddress receives every connection that is not passed through: NGINX's TLS listener, for
	// example "127.0.0.1:442".
	NginxAddress string
	// NginxProxyProtocol is the PROXY protocol header sent to NGINX, so that it logs and sees the real
	// client address; NGINX's listener must expect it ("listen ... proxy_protocol").
	NginxProxyProtocol ProxyProtocol
	// AcceptProxyProtocol expects every connection to start with a PROXY protocol header (v1 or v2) from
	// a load balancer in front; its client address is what NGINX and backends are told. Connections
	// without a valid header are closed.
	AcceptProxyProtocol bool
	// HelloTimeout bounds the time from accepting a connection to having its ClientHello (and PROXY
	// header); default DefaultHelloTimeout.
	HelloTimeout time.Duration
	// HelloLimit bounds the bytes read before routing; default DefaultHelloLimit.
	HelloLimit int
	// IdleTimeout closes a connection on which no byte has moved in either direction for that long (it is
	// noticed between one and two IdleTimeouts after the last byte). Zero or negative disables it. Only
	// enforced on Linux.
	IdleTimeout time.Duration
	// MaxConnections bounds the connections open at once; further ones are closed at once and counted.
	// Zero or negative means no limit.
	MaxConnections int
	// DialTimeout bounds each connection attempt to a backend or NGINX; default DefaultDialTimeout.
	DialTimeout time.Duration
	// DialAttempts is how many endpoints of a route are tried, in round-robin order, before a connection
	// is given up; default DefaultDialAttempts.
	DialAttempts int
	// Log receives warnings and, at debug level, one line per connection. Nil means no logging.
	Log *zap.Logger
	// Metrics records what the proxy does; nil records nothing.
	Metrics *Metrics
	// Name says in log lines which proxy speaks; default "SSL passthrough".
	Name string
}

// Proxy routes TLS connections by the server name of their ClientHello: to the endpoints of a
// passthrough route, undecrypted, or else to NGINX. It copies with io.Copy between *net.TCPConn values,
// which Linux turns into splice(2), propagates half-closes, and enforces a connection limit and an idle
// timeout. The routing table is replaced atomically with SetTable; open connections are not disturbed.
type Proxy struct {
	opts   Options
	log    *zap.Logger
	m      *Metrics
	clock  clock
	dialer net.Dialer
	table  atomic.Pointer[Table]

	active   atomic.Int64
	limitLog rateLog
	dialLog  rateLog

	mu        sync.Mutex
	conns     map[*proxyConn]struct{}
	listeners map[net.Listener]struct{}
	closing   bool
	idle      chan struct{} // closed when the last connection ends during Shutdown
}

// New returns a proxy with an empty routing table: until SetTable, every connection goes to NGINX.
func New(opts Options) *Proxy {
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = DefaultHelloTimeout
	}
	if opts.HelloLimit <= 0 {
		opts.HelloLimit = DefaultHelloLimit
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.DialAttempts <= 0 {
		opts.DialAttempts = DefaultDialAttempts
	}
	if opts.Name == "" {
		opts.Name = "SSL passthrough"
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	p := &Proxy{
		opts:      opts,
		log:       log,
		m:         opts.Metrics,
		clock:     realClock{},
		dialer:    net.Dialer{Timeout: opts.DialTimeout},
		conns:     map[*proxyConn]struct{}{},
		listeners: map[net.Listener]struct{}{},
	}
	p.table.Store(NewTable(nil))
	return p
}

// SetTable replaces the routing table. Connections already routed keep their backend; new connections
// use t.
func (p *Proxy) SetTable(t *Table) {
	if t == nil {
		t = NewTable(nil)
	}
	p.table.Store(t)
	p.m.setRoutes(t.Len())
}

// Table returns the routing table in use.
func (p *Proxy) Table() *Table { return p.table.Load() }

// Active returns the number of open connections.
func (p *Proxy) Active() int { return int(p.active.Load()) }

// Serve accepts connections on l until Shutdown (then it returns ErrProxyClosed) or a permanent accept
// error. Temporary errors, such as running out of file descriptors, are logged and retried with a
// growing pause.
func (p *Proxy) Serve(l net.Listener) error { return p.serve(l, nil) }

// serve is Serve for TLS routing (st nil) or for one L4 stream (ServeStream).
func (p *Proxy) serve(l net.Listener, st *Stream) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		_ = l.Close()
		return ErrProxyClosed
	}
	p.listeners[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
	}()

	var pause time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			p.mu.Lock()
			closing := p.closing
			p.mu.Unlock()
			if closing {
				return ErrProxyClosed
			}
			if errors.Is(err, net.ErrClosed) || !retryableAcceptError(err) {
				return fmt.Errorf("tlsproxy: accept: %w", err)
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			p.log.Warn("accepting a connection failed; retrying", zap.Error(err), zap.Duration("pause", pause))
			time.Sleep(pause)
			continue
		}
		pause = 0
		tc, ok := c.(*net.TCPConn)
		if !ok {
			_ = c.Close() // only TCP listeners are supported; nothing to route
			continue
		}
		if limit := p.opts.MaxConnections; limit > 0 && p.active.Load() >= int64(limit) {
			p.rejectOverLimit(tc, st)
			continue
		}
		pc := &proxyConn{client: tc}
		var rt *streamRoute
		if st != nil {
			// The connection keeps the route (and counters) in force when it arrived.
			rt = st.route.Load()
			pc.counters = rt.counters
			pc.counters.accepted()
		}
		if !p.register(pc) {
			pc.counters.closed()
			_ = tc.Close()
			continue
		}
		if rt != nil {
			go p.handleStream(pc, rt)
		} else {
			go p.handle(pc)
		}
	}
}

// retryableAcceptError reports errors after which accepting can go on: resource shortages and
// connections that died in the backlog.
func retryableAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO} {
		if errors.Is(err, e) {
			return true
		}
	}
	var se *os.SyscallError
	return errors.As(err, &se) && se.Timeout()
}

func (p *Proxy) rejectOverLimit(c *net.TCPConn, st *Stream) {
	if st != nil {
		st.route.Load().counters.rejected(ReasonLimit)
	} else {
		p.m.connection(RouteRejected, ReasonLimit)
	}
	_ = c.SetLinger(0) // reset: tell the client at once, and keep no TIME_WAIT state for it
	_ = c.Close()
	if n, ok := p.limitLog.allow(); ok {
		p.log.Warn(p.opts.Name+" connection limit reached; closing new connections until open ones end",
			zap.Int("maxConnections", p.opts.MaxConnections), zap.Int64("refused", n))
	}
}

// rateLog lets one warning through per limitLogInterval and counts the occurrences in between, so a flood
// of failures gives a steady trickle of log lines that still says how many there were.
type rateLog struct {
	last  atomic.Int64 // unix nanoseconds of the last warning
	count atomic.Int64 // occurrences since then
}

// allow records an occurrence and reports whether to log it, with the number of occurrences it stands for.
func (r *rateLog) allow() (int64, bool) {
	n := r.count.Add(1)
	now := time.Now().UnixNano()
	last := r.last.Load()
	if now-last < int64(limitLogInterval) || !r.last.CompareAndSwap(last, now) {
		return 0, false
	}
	r.count.Add(-n)
	return n, true
}

// register adds a connection to the open set; false after Shutdown started.
func (p *Proxy) register(pc *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return false
	}
	p.conns[pc] = struct{}{}
	p.active.Add(1)
	p.m.activeDelta(1)
	return true
}

func (p *Proxy) unregister(pc *proxyConn) {
	p.mu.Lock()
	delete(p.conns, pc)
	p.active.Add(-1)
	p.m.activeDelta(-1)
	pc.counters.closed()
	if p.closing && len(p.conns) == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
}

// Shutdown stops accepting, waits for open connections to end until ctx is done, then closes the rest.
// It returns ctx's error when connections had to be closed.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	for l := range p.listeners {
		_ = l.Close()
	}
	var idle chan struct{}
	if len(p.conns) > 0 {
		idle = make(chan struct{})
		p.idle = idle
	}
	p.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	open := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		open = append(open, pc)
	}
	p.mu.Unlock()
	for _, pc := range open {
		pc.close()
	}
	p.log.Info("closed "+p.opts.Name+" connections still open at shutdown", zap.Int("connections", len(open)))
	return ctx.Err()
}

// proxyConn is one client connection and, once routed, its backend connection.
type proxyConn struct {
	client *net.TCPConn
	// counters are the L4 stream's, nil for TLS routing; set before the connection is registered.
	counters *StreamCounters

	mu      sync.Mutex
	backend *net.TCPConn
	closed  bool
	idle    stopper
}

// setBackend attaches the backend; false (and the backend closed) when the connection was closed meanwhile.
func (pc *proxyConn) setBackend(b *net.TCPConn) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		_ = b.Close()
		return false
	}
	pc.backend = b
	return true
}

// close closes both sides; later calls do nothing.
func (pc *proxyConn) close() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return
	}
	pc.closed = true
	_ = pc.client.Close()
	if pc.backend != nil {
		_ = pc.backend.Close()
	}
	if pc.idle != nil {
		pc.idle.Stop()
	}
}

// addrs returns the client's address and the address it connected to.
func addrs(c *net.TCPConn) (src, dst netip.AddrPort) {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		src = a.AddrPort()
	}
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		dst = a.AddrPort()
	}
	return src, dst
}

// isParseError reports errors that say the bytes are not a usable ClientHello (rather than that reading
// failed).
func isParseError(err error) bool {
	return errors.Is(err, ErrNotTLS) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrTooLarge)
}

// helloErrorReason maps a ReadClientHello error to the clienthello_errors_total reason.
func helloErrorReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, ErrNotTLS):
		return "not_tls"
	case errors.Is(err, ErrTooLarge):
		return "too_large"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "eof"
	}
}

// handle reads the ClientHello, routes the connection, connects and replays what was read, then hands the
// copying to two fresh goroutines and returns: its stack, grown by parsing and dialling, is released
// rather than kept for the life of the connection.
func (p *Proxy) handle(pc *proxyConn) {
	piped := false
	defer func() {
		if !piped {
			p.unregister(pc)
		}
	}()
	start := time.Now()
	client := pc.client
	src, dst := addrs(client)

	// The pooled buffer goes back as soon as its bytes are replayed; a ClientHello too large for it was
	// read into a buffer of its own, which is left to the garbage collector.
	bufp := bufPool.Get().(*[]byte)
	release := func() {
		if bufp != nil {
			bufPool.Put(bufp)
			bufp = nil
		}
	}
	defer release()
	buf := (*bufp)[:0]

	_ = client.SetReadDeadline(start.Add(p.opts.HelloTimeout))
	data := buf[:0]
	if p.opts.AcceptProxyProtocol {
		hdr, rest, err := readProxyHeader(client, buf, p.opts.HelloLimit)
		if err != nil {
			p.reject(pc, ReasonProxyProtocol, zap.Error(err))
			return
		}
		if hdr.Source.IsValid() && hdr.Destination.IsValid() {
			src, dst = hdr.Source, hdr.Destination
		}
		data = rest
	}
	hello, data, herr := ReadClientHello(client, data, p.opts.HelloLimit)
	_ = client.SetReadDeadline(time.Time{})

	var (
		rt     *route
		reason string
	)
	var ne net.Error
	timedOut := errors.As(herr, &ne) && ne.Timeout()
	switch {
	case herr != nil && len(data) == 0 && timedOut:
		p.m.helloError("timeout")
		p.reject(pc, ReasonHelloTimeout)
		return
	case herr != nil && (len(data) == 0 || !timedOut && !errors.Is(herr, io.ErrUnexpectedEOF) && !isParseError(herr)):
		// Nothing arrived, or the connection failed (reset): there is nobody left to answer.
		p.reject(pc, ReasonClosed, zap.Error(herr))
		return
	case herr != nil:
		why := helloErrorReason(herr)
		p.m.helloError(why)
		reason = ReasonBadHello
		if why == "not_tls" {
			reason = ReasonNotTLS
		}
		if ce := p.log.Check(zapcore.DebugLevel, "ClientHello not readable; handing the connection to NGINX"); ce != nil {
			ce.Write(zap.Stringer("client", src), zap.Error(herr))
		}
	case hello.ServerName == "":
		reason = ReasonNoSNI
	default:
		rt = p.table.Load().lookup(hello.ServerName)
		reason = ReasonUnknownSNI
		if rt != nil {
			reason = ReasonSNI
		}
	}

	routeKind := RouteNginx
	var backend *net.TCPConn
	var proto ProxyProtocol
	if rt != nil {
		routeKind = RoutePassthrough
		proto = rt.ProxyProtocol
		if len(rt.Endpoints) == 0 {
			p.reject(pc, ReasonNoEndpoints, zap.String("sni", hello.ServerName), zap.String("backend", rt.Backend))
			return
		}
		var targets [8]netip.AddrPort
		backend = p.dialFirst(RoutePassthrough, rt.pick(targets[:0], p.opts.DialAttempts), rt.Backend)
	} else {
		proto = p.opts.NginxProxyProtocol
		backend = p.dialNginx()
	}
	if backend == nil {
		p.reject(pc, ReasonDialFailed, zap.String("sni", hello.ServerName), zap.String("route", routeKind))
		return
	}
	if !pc.setBackend(backend) {
		return // shut down meanwhile
	}
	p.m.connection(routeKind, reason)
	if ce := p.log.Check(zapcore.DebugLevel, "connection routed"); ce != nil {
		ce.Write(zap.Stringer("client", src), zap.String("sni", hello.ServerName), zap.String("route", routeKind),
			zap.String("reason", reason), zap.Stringer("backend", backend.RemoteAddr()))
	}

	var hdrBuf [proxyV1MaxLen]byte
	piped = p.pipeTo(pc, backend, proto.AppendHeader(hdrBuf[:0], src, dst), data, routeKind, start, src)
}

// pipeTo replays hdr (a PROXY protocol header) and data (bytes read before routing) to backend in one
// write, then hands the copying of both directions to two fresh goroutines. It returns false when the
// replay failed; the connection is then closed and counted, and the caller unregisters it.
func (p *Proxy) pipeTo(pc *proxyConn, backend *net.TCPConn, hdr, data []byte, route string, start time.Time, client netip.AddrPort) bool {
	if len(hdr) > 0 || len(data) > 0 {
		out := net.Buffers{hdr, data}
		if _, err := out.WriteTo(backend); err != nil {
			pc.close()
			p.copied(pc, route, int64(len(data)), 0)
			return false
		}
	}
	if p.opts.IdleTimeout > 0 {
		p.watchIdle(pc, backend)
	}
	s := &pipe{p: p, pc: pc, backend: backend, route: route, replayed: int64(len(data)), start: start, client: client}
	go s.copy(backend, pc.client, &s.received)
	go s.copy(pc.client, backend, &s.sent)
	return true
}

// copied counts a closed connection's bytes: in its stream's counters, or by route.
func (p *Proxy) copied(pc *proxyConn, route string, received, sent int64) {
	if pc.counters != nil {
		pc.counters.copied(received, sent)
	} else {
		p.m.copied(route, received, sent)
	}
}

// reject closes a connection the proxy will not serve and counts it.
func (p *Proxy) reject(pc *proxyConn, reason string, fields ...zap.Field) {
	p.m.connection(RouteRejected, reason) // first: whoever sees the close also sees the count
	pc.close()
	if ce := p.log.Check(zapcore.DebugLevel, "connection closed without routing"); ce != nil {
		ce.Write(append(fields, zap.Stringer("client", pc.client.RemoteAddr()), zap.String("reason", reason))...)
	}
}

// dialFirst connects to the first target that accepts, trying them in order.
func (p *Proxy) dialFirst(routeKind string, targets []netip.AddrPort, backend string) *net.TCPConn {
	for _, t := range targets {
		c, err := p.dialer.Dial("tcp", t.String())
		if err == nil {
			return c.(*net.TCPConn)
		}
		p.m.dialFailure(routeKind)
		if n, ok := p.dialLog.allow(); ok {
			p.log.Warn("cannot connect to an "+p.opts.Name+" endpoint; trying the next one",
				zap.String("backend", backend), zap.Stringer("endpoint", t), zap.Error(err), zap.Int64("failures", n))
		}
	}
	return nil
}

func (p *Proxy) dialNginx() *net.TCPConn {
	c, err := p.dialer.Dial("tcp", p.opts.NginxAddress)
	if err != nil {
		p.m.dialFailure(RouteNginx)
		if n, ok := p.dialLog.allow(); ok {
			p.log.Warn("cannot connect to NGINX's TLS listener", zap.String("address", p.opts.NginxAddress),
				zap.Error(err), zap.Int64("failures", n))
		}
		return nil
	}
	return c.(*net.TCPConn)
}

// pipe is a routed connection whose two directions are being copied, each on its own goroutine. A clean
// end of one direction (EOF) is passed on as a half-close, so protocols that shut down one direction first
// keep working; an error in either direction closes both. The direction that ends last closes the
// connection, counts its bytes and releases its slot.
type pipe struct {
	p        *Proxy
	pc       *proxyConn
	backend  *net.TCPConn
	route    string
	replayed int64
	start    time.Time
	client   netip.AddrPort

	received, sent int64 // each written by its own direction before done is incremented
	done           atomic.Int32
}

func (s *pipe) copy(dst, src *net.TCPConn, count *int64) {
	*count = copyHalf(s.pc, dst, src)
	if s.done.Add(1) < 2 {
		return
	}
	s.pc.close()
	received := s.received + s.replayed
	s.p.copied(s.pc, s.route, received, s.sent)
	if ce := s.p.log.Check(zapcore.DebugLevel, "connection closed"); ce != nil {
		ce.Write(zap.Stringer("client", s.client), zap.String("route", s.route), zap.Int64("received", received),
			zap.Int64("sent", s.sent), zap.Duration("duration", time.Since(s.start)))
	}
	s.p.unregister(s.pc)
}

// copyHalf copies src to dst until EOF, then half-closes dst. On Linux the bytes never enter user space
// (see copyStream).
func copyHalf(pc *proxyConn, dst, src *net.TCPConn) int64 {
	n, err := copyStream(dst, src)
	if err == nil {
		err = dst.CloseWrite()
	}
	if err != nil {
		pc.close()
	}
	return n
}

// watchIdle closes the connection once a check finds that neither socket moved a byte since the previous
// check. The kernel's counters see bytes that a splice in progress has not reported, and also a peer that
// stopped reading.
func (p *Proxy) watchIdle(pc *proxyConn, backend *net.TCPConn) {
	w := &idleWatch{p: p, pc: pc, backend: backend}
	if cur, ok := w.sample(); ok {
		pc.mu.Lock()
		w.last = cur
		if !pc.closed {
			pc.idle = p.clock.AfterFunc(p.opts.IdleTimeout, w.check)
		}
		pc.mu.Unlock()
	}
}

// idleWatch is one connection's idle check.
type idleWatch struct {
	p       *Proxy
	pc      *proxyConn
	backend *net.TCPConn
	last    [2]uint64 // guarded by pc.mu
}

func (w *idleWatch) sample() ([2]uint64, bool) {
	a, ok1 := tcpProgress(w.pc.client)
	b, ok2 := tcpProgress(w.backend)
	return [2]uint64{a, b}, ok1 && ok2
}

func (w *idleWatch) check() {
	cur, ok := w.sample()
	if !ok {
		return // closed, or counters unavailable: nothing to enforce
	}
	pc := w.pc
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return
	}
	if cur != w.last {
		w.last = cur
		pc.idle = w.p.clock.AfterFunc(w.p.opts.IdleTimeout, w.check)
		pc.mu.Unlock()
		return
	}
	pc.mu.Unlock()
	if pc.counters != nil {
		pc.counters.idleTimeout()
	} else {
		w.p.m.idleTimeout()
	}
	if ce := w.p.log.Check(zapcore.DebugLevel, "closing idle connection"); ce != nil {
		ce.Write(zap.Stringer("client", pc.client.RemoteAddr()), zap.Duration("idleTimeout", w.p.opts.IdleTimeout))
	}
	pc.close()
}

// readProxyHeader reads a PROXY protocol header into buf and returns it with the bytes read after it.
func readProxyHeader(r io.Reader, buf []byte, limit int) (ProxyHeader, []byte, error) {
	var (
		hdr ProxyHeader
		n   int
	)
	data, err := readUntil(r, buf, limit, func(b []byte) (int, error) {
		h, hn, need, err := ParseProxyHeader(b)
		hdr, n = h, hn
		return need, err
	})
	if err != nil {
		return ProxyHeader{}, nil, fmt.Errorf("read PROXY protocol header: %w", err)
	}
	return hdr, data[n:], nil
}
