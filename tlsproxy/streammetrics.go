package tlsproxy

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Stream protocols, the protocol label of the stream metrics.
const (
	ProtocolTCP = "tcp"
	ProtocolUDP = "udp"
)

// ReasonFlowLimit: a UDP datagram from a new client was dropped because the listener's flow limit was
// reached. The stream metrics' other rejection reasons are ReasonLimit, ReasonProxyProtocol,
// ReasonNoEndpoints and ReasonDialFailed.
const ReasonFlowLimit = "flow_limit"

// StreamMetrics are the Prometheus collectors of the L4 (TCP and UDP services) proxies, labelled by
// protocol, listening port and Service ("namespace/name:port"). Register them with Collectors.
type StreamMetrics struct {
	connections *prometheus.CounterVec
	active      *prometheus.GaugeVec
	bytes       *prometheus.CounterVec
	rejected    *prometheus.CounterVec
	idle        *prometheus.CounterVec
}

// NewStreamMetrics creates the collectors.
func NewStreamMetrics() *StreamMetrics {
	labels := []string{"protocol", "port", "service"}
	return &StreamMetrics{
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_stream_connections_total",
			Help: "TCP connections accepted and UDP flows (one per client address and port) started by the TCP/UDP services proxies, by protocol, port and Service.",
		}, labels),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ingress_reactor_stream_active_connections",
			Help: "TCP connections and UDP flows open now through the TCP/UDP services proxies, by protocol, port and Service.",
		}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_stream_bytes_total",
			Help: "Bytes relayed by the TCP/UDP services proxies, by protocol, port, Service and direction (received from clients, sent to clients); TCP bytes are counted when a connection closes, UDP bytes per datagram.",
		}, append(labels, "direction")),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_stream_rejected_total",
			Help: "TCP connections closed and UDP datagrams of new flows dropped by the TCP/UDP services proxies without reaching an endpoint, by protocol, port, Service and reason (no_endpoints, dial_failed, proxy_protocol, limit, flow_limit).",
		}, append(labels, "reason")),
		idle: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_stream_idle_timeouts_total",
			Help: "TCP connections and UDP flows of the TCP/UDP services proxies closed because nothing moved for their idle timeout, by protocol, port and Service.",
		}, labels),
	}
}

// Collectors returns every collector, for registration.
func (m *StreamMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.connections, m.active, m.bytes, m.rejected, m.idle}
}

// For returns the counters of one listener and Service; a nil *StreamMetrics returns nil, which counts
// nothing.
func (m *StreamMetrics) For(protocol string, port int, service string) *StreamCounters {
	if m == nil {
		return nil
	}
	p := strconv.Itoa(port)
	c := &StreamCounters{
		connections: m.connections.WithLabelValues(protocol, p, service),
		active:      m.active.WithLabelValues(protocol, p, service),
		received:    m.bytes.WithLabelValues(protocol, p, service, "received"),
		sent:        m.bytes.WithLabelValues(protocol, p, service, "sent"),
		idle:        m.idle.WithLabelValues(protocol, p, service),
		rejects:     m.rejected.MustCurryWith(prometheus.Labels{"protocol": protocol, "port": p, "service": service}),
	}
	for _, r := range []string{ReasonNoEndpoints, ReasonDialFailed} {
		c.rejects.WithLabelValues(r)
	}
	return c
}

// Forget drops the series of a listener and Service that is no longer configured.
func (m *StreamMetrics) Forget(protocol string, port int, service string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"protocol": protocol, "port": strconv.Itoa(port), "service": service}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.connections, m.active, m.bytes, m.rejected, m.idle} {
		v.DeletePartialMatch(l)
	}
}

// StreamCounters count what one L4 listener does for one Service. A nil *StreamCounters counts nothing.
type StreamCounters struct {
	connections prometheus.Counter
	active      prometheus.Gauge
	received    prometheus.Counter
	sent        prometheus.Counter
	idle        prometheus.Counter
	rejects     *prometheus.CounterVec
}

func (c *StreamCounters) accepted() {
	if c != nil {
		c.connections.Inc()
		c.active.Inc()
	}
}

func (c *StreamCounters) closed() {
	if c != nil {
		c.active.Dec()
	}
}

func (c *StreamCounters) copied(received, sent int64) {
	if c != nil {
		c.received.Add(float64(received))
		c.sent.Add(float64(sent))
	}
}

func (c *StreamCounters) rejected(reason string) {
	if c != nil {
		c.rejects.WithLabelValues(reason).Inc()
	}
}

func (c *StreamCounters) idleTimeout() {
	if c != nil {
		c.idle.Inc()
	}
}
