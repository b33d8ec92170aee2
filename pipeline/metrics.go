package pipeline

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Metrics holds the framework's Prometheus collectors: client-go's workqueue
// metrics (workqueue_*, labelled by queue name, the names existing dashboards
// use) and the framework's own counters. A nil *Metrics is valid and records
// nothing.
type Metrics struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	queueDuration  *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinishedWork *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
	dropped        *prometheus.CounterVec
	panics         *prometheus.CounterVec
	topicPending   *topicPending
}

// nameLabel is the label that tells queues and topics apart in every metric.
const nameLabel = "name"

// durationBuckets spans 10ns to 1000s in powers of ten: queue waits and sync
// times range from a map lookup to a slow API call.
var durationBuckets = prometheus.ExponentialBuckets(10e-9, 10, 12)

// NewMetrics creates the framework's collectors and registers them on reg.
// A nil reg creates working but unregistered collectors (useful in tests).
// Calling it again with the same registry reuses the collectors registered
// the first time. It panics if reg already holds a different collector under
// one of these names, as prometheus.MustRegister does: that is a wiring bug.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of the workqueue.",
		}, []string{nameLabel}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "adds_total",
			Help: "Total number of adds handled by the workqueue.",
		}, []string{nameLabel}),
		queueDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help:    "How long in seconds an item stays in the workqueue before being requested.",
			Buckets: durationBuckets,
		}, []string{nameLabel}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "work_duration_seconds",
			Help:    "How long in seconds processing an item from the workqueue takes.",
			Buckets: durationBuckets,
		}, []string{nameLabel}),
		unfinishedWork: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress that has not been observed by work_duration yet. " +
				"Large values indicate stuck workers.",
		}, []string{nameLabel}),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "Seconds the longest running worker of the workqueue has been running.",
		}, []string{nameLabel}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "retries_total",
			Help: "Total number of delayed re-adds (retries) handled by the workqueue.",
		}, []string{nameLabel}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ingress_reactor", Subsystem: "pipeline", Name: "dropped_total",
			Help: "Items dropped after failing more often than the queue's retry limit.",
		}, []string{nameLabel}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ingress_reactor", Subsystem: "pipeline", Name: "panics_total",
			Help: "Panics recovered in sync functions, give-up callbacks and topic subscribers.",
		}, []string{nameLabel}),
		topicPending: newTopicPending(),
	}
	if reg == nil {
		return m
	}
	m.depth = register(reg, m.depth)
	m.adds = register(reg, m.adds)
	m.queueDuration = register(reg, m.queueDuration)
	m.workDuration = register(reg, m.workDuration)
	m.unfinishedWork = register(reg, m.unfinishedWork)
	m.longestRunning = register(reg, m.longestRunning)
	m.retries = register(reg, m.retries)
	m.dropped = register(reg, m.dropped)
	m.panics = register(reg, m.panics)
	m.topicPending = register(reg, m.topicPending)
	return m
}

// register registers c on reg, or returns the collector of the same type that
// reg already holds under the same descriptor.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("pipeline: register metrics: %v", err))
}

// initSeries creates the framework's counters for name at zero, so dashboards
// and alerts see the series before the first drop or panic.
func (m *Metrics) initSeries(name string) {
	if m == nil {
		return
	}
	m.dropped.WithLabelValues(name)
	m.panics.WithLabelValues(name)
}

func (m *Metrics) incDropped(name string) {
	if m == nil {
		return
	}
	m.dropped.WithLabelValues(name).Inc()
}

func (m *Metrics) incPanics(name string) {
	if m == nil {
		return
	}
	m.panics.WithLabelValues(name).Inc()
}

// workqueueProvider adapts Metrics to client-go's workqueue.MetricsProvider.
// It is handed to each queue through its config, never installed globally,
// so several registries (tests, embedded controllers) never mix.
type workqueueProvider struct{ m *Metrics }

var _ workqueue.MetricsProvider = workqueueProvider{}

func (p workqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.m.depth.WithLabelValues(name)
}

func (p workqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.m.adds.WithLabelValues(name)
}

func (p workqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.m.queueDuration.WithLabelValues(name)
}

func (p workqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.m.workDuration.WithLabelValues(name)
}

func (p workqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.unfinishedWork.WithLabelValues(name)
}

func (p workqueueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.longestRunning.WithLabelValues(name)
}

func (p workqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.m.retries.WithLabelValues(name)
}
