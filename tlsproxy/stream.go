package tlsproxy

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// StreamRoute is where an L4 (TCP or UDP) listener sends what it receives: the endpoints of one Service
// port, picked round-robin per new connection or UDP flow.
type StreamRoute struct {
	// Backend names the Service port in logs ("namespace/name:port").
	Backend string
	// Endpoints are the addresses to spread new connections over. Without endpoints, new TCP connections
	// are closed at once and UDP datagrams of new flows are dropped.
	Endpoints []netip.AddrPort
	// AcceptProxyProtocol expects a PROXY protocol header (v1 or v2) at the start of every TCP connection,
	// from a load balancer in front; its client address is the one passed on. Connections without a valid
	// header are closed. TCP only.
	AcceptProxyProtocol bool
	// ProxyProtocol is the header sent to the endpoint before the client's bytes. TCP only.
	ProxyProtocol ProxyProtocol
}

// streamRoute is a StreamRoute in use, with its round-robin position and the counters of the Service it
// belongs to. Connections keep the streamRoute they were accepted with.
type streamRoute struct {
	route
	accept   bool
	counters *StreamCounters
}

func newStreamRoute(r StreamRoute, c *StreamCounters) *streamRoute {
	sr := &streamRoute{accept: r.AcceptProxyProtocol, counters: c}
	sr.Backend = r.Backend
	sr.Endpoints = append([]netip.AddrPort(nil), r.Endpoints...)
	sr.ProxyProtocol = r.ProxyProtocol
	sr.next.Store(rand.Uint32())
	return sr
}

// Stream is one TCP listener's route, served by Proxy.ServeStream. SetRoute swaps it atomically: open
// connections keep their endpoint, new ones use the new route.
type Stream struct {
	route atomic.Pointer[streamRoute]
}

// NewStream returns a stream with route r, counted in c (nil counts nothing).
func NewStream(r StreamRoute, c *StreamCounters) *Stream {
	s := &Stream{}
	s.SetRoute(r, c)
	return s
}

// SetRoute replaces the stream's route and counters.
func (s *Stream) SetRoute(r StreamRoute, c *StreamCounters) { s.route.Store(newStreamRoute(r, c)) }

// Route returns the stream's current route.
func (s *Stream) Route() StreamRoute {
	sr := s.route.Load()
	return StreamRoute{Backend: sr.Backend, Endpoints: sr.Endpoints, AcceptProxyProtocol: sr.accept, ProxyProtocol: sr.ProxyProtocol}
}

// ServeStream accepts TCP connections on l for st until Shutdown (then it returns ErrProxyClosed), the
// listener is closed, or a permanent accept error. Each connection goes, without any reading for routing, to
// an endpoint of st's route, tried round-robin (Options.DialAttempts of them); the bytes are copied as for
// passed-through TLS (splice, half-closes, Options.IdleTimeout, Options.MaxConnections across every
// listener of the proxy). Options.HelloTimeout bounds the wait for a PROXY protocol header when the route
// expects one.
func (p *Proxy) ServeStream(l net.Listener, st *Stream) error { return p.serve(l, st) }

// handleStream connects one accepted connection to an endpoint of rt and starts copying.
func (p *Proxy) handleStream(pc *proxyConn, rt *streamRoute) {
	piped := false
	defer func() {
		if !piped {
			p.unregister(pc)
		}
	}()
	start := time.Now()
	client := pc.client
	src, dst := addrs(client)

	var data []byte
	if rt.accept {
		bufp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bufp)
		_ = client.SetReadDeadline(start.Add(p.opts.HelloTimeout))
		hdr, rest, err := readProxyHeader(client, (*bufp)[:0], p.opts.HelloLimit)
		_ = client.SetReadDeadline(time.Time{})
		if err != nil {
			p.rejectStream(pc, ReasonProxyProtocol, rt.Backend, zap.Error(err))
			return
		}
		if hdr.Source.IsValid() && hdr.Destination.IsValid() {
			src, dst = hdr.Source, hdr.Destination
		}
		data = rest
	}
	if len(rt.Endpoints) == 0 {
		p.rejectStream(pc, ReasonNoEndpoints, rt.Backend)
		return
	}
	var targets [8]netip.AddrPort
	backend := p.dialFirst("", rt.pick(targets[:0], p.opts.DialAttempts), rt.Backend)
	if backend == nil {
		p.rejectStream(pc, ReasonDialFailed, rt.Backend)
		return
	}
	if !pc.setBackend(backend) {
		return // shut down meanwhile
	}
	if ce := p.log.Check(zapcore.DebugLevel, "connection routed"); ce != nil {
		ce.Write(zap.Stringer("client", src), zap.String("service", rt.Backend), zap.Stringer("backend", backend.RemoteAddr()))
	}
	var hdrBuf [proxyV1MaxLen]byte
	piped = p.pipeTo(pc, backend, rt.ProxyProtocol.AppendHeader(hdrBuf[:0], src, dst), data, rt.Backend, start, src)
}

// rejectStream closes a stream connection that cannot be served and counts it.
func (p *Proxy) rejectStream(pc *proxyConn, reason, backend string, fields ...zap.Field) {
	pc.counters.rejected(reason)
	pc.close()
	if ce := p.log.Check(zapcore.DebugLevel, "connection closed without an endpoint"); ce != nil {
		ce.Write(append(fields, zap.Stringer("client", pc.client.RemoteAddr()), zap.String("service", backend), zap.String("reason", reason))...)
	}
}
