package tlsproxy

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults for zero UDPOptions fields.
const (
	DefaultUDPIdleTimeout = time.Minute
	DefaultUDPMaxFlows    = 10000
)

// maxDatagram is the largest UDP payload over IPv4 or IPv6 without jumbograms.
const maxDatagram = 65535

var datagramPool = sync.Pool{New: func() any { b := make([]byte, maxDatagram); return &b }}

// UDPOptions configure a UDPProxy.
type UDPOptions struct {
	// IdleTimeout ends a flow in which no datagram moved in either direction for that long (it is noticed
	// between one and two IdleTimeouts after the last one); default DefaultUDPIdleTimeout.
	IdleTimeout time.Duration
	// MaxFlows bounds the flows open at once; datagrams from further clients are dropped and counted
	// until a flow ends. Default DefaultUDPMaxFlows.
	MaxFlows int
	// Log receives warnings and, at debug level, one line per flow. Nil means no logging.
	Log *zap.Logger
}

// UDPProxy relays the datagrams arriving on one UDP socket to the endpoints of a StreamRoute. Each client
// address and port is a flow with a socket of its own, connected to the endpoint picked (round-robin) when
// the flow began; that endpoint's replies go back to the client from the listening socket. A flow ends
// after IdleTimeout without traffic. SetRoute swaps the route: open flows keep their endpoint while it is
// still one of the route's, new flows use the new route.
type UDPProxy struct {
	opts  UDPOptions
	log   *zap.Logger
	clock clock
	route atomic.Pointer[streamRoute]

	mu     sync.Mutex
	conn   *net.UDPConn
	flows  map[netip.AddrPort]*udpFlow
	closed bool
	wg     sync.WaitGroup

	limitLog rateLog
}

// udpFlow is one client's flow: its address, the socket connected to its endpoint, and a count of the
// datagrams moved, which the idle check compares.
type udpFlow struct {
	client   netip.AddrPort
	endpoint netip.AddrPort
	// reply is the control message that makes replies leave from the address the client sent to; nil
	// leaves the choice to the kernel.
	reply    []byte
	backend  *net.UDPConn
	counters *StreamCounters
	moved    atomic.Uint64
	last     uint64 // guarded by UDPProxy.mu
	timer    stopper
}

// NewUDP returns a UDP proxy with route r, counted in c (nil counts nothing).
func NewUDP(opts UDPOptions, r StreamRoute, c *StreamCounters) *UDPProxy {
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultUDPIdleTimeout
	}
	if opts.MaxFlows <= 0 {
		opts.MaxFlows = DefaultUDPMaxFlows
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	u := &UDPProxy{opts: opts, log: log, clock: realClock{}, flows: map[netip.AddrPort]*udpFlow{}}
	u.SetRoute(r, c)
	return u
}

// SetRoute replaces the route and counters for new flows, and ends the open flows whose endpoint is not
// one of r's: UDP has no connection that would fail, so a client that keeps sending (syslog, metrics)
// would otherwise keep feeding a removed endpoint, or whatever Pod gets its address next, until it pauses
// for IdleTimeout. The client's next datagram starts a flow to a current endpoint (as kube-proxy clears
// the conntrack entries of removed UDP endpoints).
func (u *UDPProxy) SetRoute(r StreamRoute, c *StreamCounters) {
	rt := newStreamRoute(r, c)
	u.mu.Lock()
	u.route.Store(rt)
	var stale []*udpFlow
	for _, f := range u.flows {
		if !slices.Contains(rt.Endpoints, f.endpoint) {
			stale = append(stale, f)
		}
	}
	u.mu.Unlock()
	for _, f := range stale {
		if ce := u.log.Check(zapcore.DebugLevel, "ending a UDP flow whose endpoint left the Service"); ce != nil {
			ce.Write(zap.Stringer("client", f.client), zap.Stringer("endpoint", f.endpoint), zap.String("service", rt.Backend))
		}
		u.endFlow(f)
	}
}

// Flows returns the number of open flows.
func (u *UDPProxy) Flows() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.flows)
}

// Serve relays the datagrams arriving on conn until Close (then it returns ErrProxyClosed) or a
// permanent read error. The proxy takes conn over: Close closes it.
func (u *UDPProxy) Serve(conn *net.UDPConn) error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		_ = conn.Close()
		return ErrProxyClosed
	}
	u.conn = conn
	u.mu.Unlock()
	buf := make([]byte, maxDatagram)
	pk := enablePktinfo(conn)
	var oob [oobSize]byte
	for {
		n, oobn, _, src, err := conn.ReadMsgUDPAddrPort(buf, oob[:])
		if err != nil {
			u.mu.Lock()
			closed := u.closed
			u.mu.Unlock()
			if closed {
				return ErrProxyClosed
			}
			if errors.Is(err, net.ErrClosed) || !retryableAcceptError(err) {
				return err
			}
			continue
		}
		src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
		f := u.flowFor(src, pk, oob[:oobn])
		if f == nil {
			continue
		}
		f.moved.Add(1)
		if _, err := f.backend.Write(buf[:n]); err == nil {
			f.counters.copied(int64(n), 0)
		}
	}
}

// flowFor returns src's flow, starting one when there is none; nil when the datagram must be dropped. oob
// holds the control messages of the datagram (its destination address, with pk).
func (u *UDPProxy) flowFor(src netip.AddrPort, pk *pktinfo, oob []byte) *udpFlow {
	u.mu.Lock()
	defer u.mu.Unlock()
	if f, ok := u.flows[src]; ok {
		return f
	}
	if u.closed {
		return nil
	}
	rt := u.route.Load()
	if len(u.flows) >= u.opts.MaxFlows {
		rt.counters.rejected(ReasonFlowLimit)
		if n, ok := u.limitLog.allow(); ok {
			u.log.Warn("UDP flow limit reached; dropping datagrams from new clients until flows end",
				zap.String("service", rt.Backend), zap.Int("maxFlows", u.opts.MaxFlows), zap.Int64("dropped", n))
		}
		return nil
	}
	if len(rt.Endpoints) == 0 {
		rt.counters.rejected(ReasonNoEndpoints)
		return nil
	}
	var targets [8]netip.AddrPort
	var (
		backend  *net.UDPConn
		endpoint netip.AddrPort
	)
	for _, t := range rt.pick(targets[:0], DefaultDialAttempts) {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(t))
		if err == nil {
			backend, endpoint = c, t
			break
		}
		u.log.Debug("cannot open a UDP socket to an endpoint", zap.String("service", rt.Backend), zap.Stringer("endpoint", t), zap.Error(err))
	}
	if backend == nil {
		rt.counters.rejected(ReasonDialFailed)
		return nil
	}
	f := &udpFlow{client: src, endpoint: endpoint, reply: pk.replyOOB(oob), backend: backend, counters: rt.counters}
	u.flows[src] = f
	f.counters.accepted()
	f.timer = u.clock.AfterFunc(u.opts.IdleTimeout, func() { u.checkIdle(f) })
	u.wg.Add(1)
	go u.replies(f, u.conn)
	if ce := u.log.Check(zapcore.DebugLevel, "UDP flow started"); ce != nil {
		ce.Write(zap.Stringer("client", src), zap.String("service", rt.Backend), zap.Stringer("backend", backend.RemoteAddr()))
	}
	return f
}

// replies sends the endpoint's datagrams back to the flow's client until the flow ends. It waits for a
// datagram without a buffer and reads it into a pooled one, so that idle flows hold no 64 KiB buffer.
func (u *UDPProxy) replies(f *udpFlow, conn *net.UDPConn) {
	defer u.wg.Done()
	rc, err := f.backend.SyscallConn()
	if err != nil {
		u.endFlow(f)
		return
	}
	for {
		if _, err := waitReadable(rc); err != nil {
			if isRefused(err) {
				continue // see below
			}
			u.endFlow(f)
			return
		}
		bufp := datagramPool.Get().(*[]byte)
		n, err := f.backend.Read(*bufp)
		if err == nil {
			f.moved.Add(1)
			_, _, werr := conn.WriteMsgUDPAddrPort((*bufp)[:n], f.reply, f.client)
			if werr != nil && f.reply != nil {
				// The address the client sent to is gone (or the kernel refuses it): the kernel's choice.
				_, werr = conn.WriteToUDPAddrPort((*bufp)[:n], f.client)
			}
			if werr == nil {
				f.counters.copied(0, int64(n))
			}
		}
		datagramPool.Put(bufp)
		// An ICMP "port unreachable" for an earlier datagram surfaces as ECONNREFUSED on the next read:
		// the endpoint may come back, so the flow lives on until it is idle.
		if err != nil && !isRefused(err) {
			u.endFlow(f)
			return
		}
	}
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// checkIdle ends the flow when no datagram moved since the previous check, and checks again later
// otherwise.
func (u *UDPProxy) checkIdle(f *udpFlow) {
	u.mu.Lock()
	if u.flows[f.client] != f {
		u.mu.Unlock()
		return
	}
	if cur := f.moved.Load(); cur != f.last {
		f.last = cur
		f.timer = u.clock.AfterFunc(u.opts.IdleTimeout, func() { u.checkIdle(f) })
		u.mu.Unlock()
		return
	}
	u.mu.Unlock()
	f.counters.idleTimeout()
	if ce := u.log.Check(zapcore.DebugLevel, "closing idle UDP flow"); ce != nil {
		ce.Write(zap.Stringer("client", f.client), zap.Duration("idleTimeout", u.opts.IdleTimeout))
	}
	u.endFlow(f)
}

// endFlow forgets a flow and closes its socket; later calls do nothing.
func (u *UDPProxy) endFlow(f *udpFlow) {
	u.mu.Lock()
	if u.flows[f.client] != f {
		u.mu.Unlock()
		return
	}
	delete(u.flows, f.client)
	timer := f.timer
	u.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	_ = f.backend.Close()
	f.counters.closed()
}

// Close stops serving: it closes the listening socket and every flow, and waits for their goroutines.
func (u *UDPProxy) Close() error {
	u.mu.Lock()
	u.closed = true
	conn := u.conn
	flows := make([]*udpFlow, 0, len(u.flows))
	for _, f := range u.flows {
		flows = append(flows, f)
	}
	u.mu.Unlock()
	var err error
	if conn != nil {
		err = conn.Close()
	}
	for _, f := range flows {
		u.endFlow(f)
	}
	u.wg.Wait()
	return err
}
