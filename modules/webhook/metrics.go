package webhook

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	requests    *prometheus.CounterVec
	duration    prometheus.Histogram
	certReloads *prometheus.CounterVec
}

func newMetrics() metrics {
	return metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_admission_requests_total",
			Help: "Admission requests, by result: allowed, warned (allowed with warnings), denied, skipped (not an Ingress of ours), invalid (not an AdmissionReview we accept), unavailable (caches not synced, or gave up waiting for its turn).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ingress_reactor_admission_duration_seconds",
			Help:    "Time to read, judge and answer an admission request.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 15),
		}),
		certReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_admission_certificate_reloads_total",
			Help: "Changes of the webhook's certificate files, by result: success (a new certificate is served), failure (the previous one stays).",
		}, []string{"result"}),
	}
}

func (m metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.duration, m.certReloads}
}
