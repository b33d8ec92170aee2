package tlsproxy

import "github.com/prometheus/client_golang/prometheus"

// Route kinds: where a connection went. They label ingress_reactor_passthrough_connections_total.
const (
	RoutePassthrough = "passthrough"
	RouteNginx       = "nginx"
	RouteRejected    = "rejected"
)

// Reasons, the second label of ingress_reactor_passthrough_connections_total: why a connection took its
// route.
const (
	// ReasonSNI: passed through, the server name matched a route.
	ReasonSNI = "sni"
	// ReasonUnknownSNI, ReasonNoSNI, ReasonNotTLS, ReasonBadHello: handed to NGINX, because the server
	// name matched no route, the ClientHello had none, the first bytes were not TLS, or the ClientHello
	// was malformed, too large, cut short or too slow to arrive.
	ReasonUnknownSNI = "unknown_sni"
	ReasonNoSNI      = "no_sni"
	ReasonNotTLS     = "not_tls"
	ReasonBadHello   = "bad_hello"
	// ReasonLimit, ReasonHelloTimeout, ReasonClosed, ReasonProxyProtocol, ReasonNoEndpoints,
	// ReasonDialFailed: closed by the proxy, because the connection limit was reached, the client sent
	// nothing before the ClientHello timeout, the client closed without sending anything or reset the
	// connection before its ClientHello was complete, the PROXY protocol header from the load balancer was
	// missing or bad, the route had no endpoints, or no backend (or NGINX) accepted the connection.
	ReasonLimit         = "limit"
	ReasonHelloTimeout  = "hello_timeout"
	ReasonClosed        = "closed"
	ReasonProxyProtocol = "proxy_protocol"
	ReasonNoEndpoints   = "no_endpoints"
	ReasonDialFailed    = "dial_failed"
)

// Metrics are the proxy's Prometheus collectors. Register them with Collectors; a nil *Metrics records
// nothing.
type Metrics struct {
	connections  *prometheus.CounterVec
	active       prometheus.Gauge
	bytes        *prometheus.CounterVec
	helloErrors  *prometheus.CounterVec
	dialFailures *prometheus.CounterVec
	idleClosed   prometheus.Counter
	routes       prometheus.Gauge

	// Children resolved once: the per-connection path does no label hashing. Read-only after NewMetrics.
	connChildren  map[[2]string]prometheus.Counter
	bytesChildren map[string][2]prometheus.Counter // route -> received, sent
}

// NewMetrics creates the collectors, with every label combination present from the start so that
// dashboards and alerts see zeros rather than missing series.
func NewMetrics() *Metrics {
	m := &Metrics{
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_passthrough_connections_total",
			Help: "Connections accepted on the HTTPS port, by route (passthrough, nginx, rejected) and the reason for it.",
		}, []string{"route", "reason"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_passthrough_active_connections",
			Help: "Connections open through the SSL passthrough proxy, including those still sending their ClientHello.",
		}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_passthrough_bytes_total",
			Help: "Bytes copied by the SSL passthrough proxy, by route and direction (received from clients, sent to clients); counted when a connection closes.",
		}, []string{"route", "direction"}),
		helloErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_passthrough_clienthello_errors_total",
			Help: "Connections whose TLS ClientHello could not be read, by reason (not_tls, malformed, too_large, timeout, eof).",
		}, []string{"reason"}),
		dialFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_passthrough_dial_failures_total",
			Help: "Failed connection attempts to passthrough endpoints or to NGINX, by route.",
		}, []string{"route"}),
		idleClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ingress_reactor_passthrough_idle_timeouts_total",
			Help: "Connections closed because no byte moved in either direction for the idle timeout.",
		}),
		routes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_passthrough_routes",
			Help: "Host names in the SSL passthrough routing table.",
		}),
	}
	m.connChildren = map[[2]string]prometheus.Counter{}
	m.bytesChildren = map[string][2]prometheus.Counter{}
	for route, reasons := range map[string][]string{
		RoutePassthrough: {ReasonSNI},
		RouteNginx:       {ReasonUnknownSNI, ReasonNoSNI, ReasonNotTLS, ReasonBadHello},
		RouteRejected:    {ReasonLimit, ReasonHelloTimeout, ReasonClosed, ReasonProxyProtocol, ReasonNoEndpoints, ReasonDialFailed},
	} {
		for _, r := range reasons {
			m.connChildren[[2]string{route, r}] = m.connections.WithLabelValues(route, r)
		}
	}
	for _, r := range []string{RoutePassthrough, RouteNginx} {
		m.bytesChildren[r] = [2]prometheus.Counter{m.bytes.WithLabelValues(r, "received"), m.bytes.WithLabelValues(r, "sent")}
		m.dialFailures.WithLabelValues(r)
	}
	for _, r := range []string{"not_tls", "malformed", "too_large", "timeout", "eof"} {
		m.helloErrors.WithLabelValues(r)
	}
	return m
}

// Collectors returns every collector, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.connections, m.active, m.bytes, m.helloErrors, m.dialFailures, m.idleClosed, m.routes}
}

func (m *Metrics) connection(route, reason string) {
	if m == nil {
		return
	}
	if c, ok := m.connChildren[[2]string{route, reason}]; ok {
		c.Inc()
	} else {
		m.connections.WithLabelValues(route, reason).Inc()
	}
}

func (m *Metrics) activeDelta(d float64) {
	if m != nil {
		m.active.Add(d)
	}
}

func (m *Metrics) copied(route string, received, sent int64) {
	if m == nil {
		return
	}
	c, ok := m.bytesChildren[route]
	if !ok {
		c = [2]prometheus.Counter{m.bytes.WithLabelValues(route, "received"), m.bytes.WithLabelValues(route, "sent")}
	}
	c[0].Add(float64(received))
	c[1].Add(float64(sent))
}

func (m *Metrics) helloError(reason string) {
	if m != nil {
		m.helloErrors.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) dialFailure(route string) {
	if m != nil {
		m.dialFailures.WithLabelValues(route).Inc()
	}
}

func (m *Metrics) idleTimeout() {
	if m != nil {
		m.idleClosed.Inc()
	}
}

func (m *Metrics) setRoutes(n int) {
	if m != nil {
		m.routes.Set(float64(n))
	}
}
