package reloader

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// reloaderMetrics are the reloader's own metrics; the lanes' queues export the workqueue_* ones.
type reloaderMetrics struct {
	reloads      *prometheus.CounterVec
	lastSuccess  prometheus.Gauge
	lastTime     prometheus.Gauge
	hash         prometheus.Gauge
	duration     prometheus.Histogram
	epUpdates    *prometheus.CounterVec
	certUpdates  *prometheus.CounterVec
	routeUpdates *prometheus.CounterVec
	notStored    *prometheus.GaugeVec
	hostsHeld    prometheus.Gauge
	reloadGap    prometheus.Gauge
}

// newMetrics creates the reloader's metrics and registers them with reg.
func newMetrics(reg prometheus.Registerer) (reloaderMetrics, error) {
	m := reloaderMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_reloads_total",
			Help: "Attempts to apply a new NGINX configuration (test, install, reload, confirm), by result.",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_last_reload_success",
			Help: "1 if the last attempt to apply a configuration succeeded, 0 if it failed.",
		}),
		lastTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last configuration that went live.",
		}),
		hash: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_config_hash",
			Help: "The live configuration's hash (its first 52 bits as a number), to spot replicas that differ.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ingress_reactor_reload_duration_seconds",
			Help:    "Time to apply a configuration: test, install, reload and confirm it is live.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		epUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_endpoint_updates_total",
			Help: "Endpoint pushes to the data plane (no reload), by result (dict_full: what fit is live).",
		}, []string{"result"}),
		certUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_certificate_updates_total",
			Help: "Certificate pushes to the data plane (no reload), by result (dict_full: what fit is live).",
		}, []string{"result"}),
		routeUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_route_updates_total",
			Help: "Pushes of host and path routes to the data plane (no reload), by result (dict_full: what fit is live).",
		}, []string{"result"}),
		hostsHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_route_hosts_held",
			Help: "Hosts whose changed routes wait for a configuration with a profile they name (a reload); NGINX keeps their previous routes meanwhile.",
		}),
		notStored: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ingress_reactor_shared_dict_not_stored",
			Help: "Entries (upstreams; certificates and SNI hosts; route hosts) that NGINX's shared dict had no room for; raise --endpoints-dict-size, --certificates-dict-size or --routes-dict-size.",
		}, []string{"dict"}),
		reloadGap: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_reload_gap_seconds",
			Help: "How long the next configuration waits after the last reload: 0 after a quiet period, doubling from 1 s up to 5 s while changes keep coming.",
		}),
	}
	for _, c := range []prometheus.Collector{m.reloads, m.lastSuccess, m.lastTime, m.hash, m.duration, m.epUpdates, m.certUpdates, m.routeUpdates, m.notStored, m.hostsHeld, m.reloadGap} {
		if err := reg.Register(c); err != nil {
			return reloaderMetrics{}, fmt.Errorf("reloader: register metrics: %w", err)
		}
	}
	for _, res := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(res)
	}
	return m, nil
}

// hashNumber maps a hex hash to a float64 that a gauge can carry exactly (52 bits).
func hashNumber(hash string) float64 {
	if len(hash) > 13 {
		hash = hash[:13]
	}
	n, err := strconv.ParseUint(hash, 16, 64)
	if err != nil {
		return 0
	}
	return float64(n)
}
