// Package requestmetrics exports the request metrics NGINX aggregates (nginx/requestmetrics.go) under
// ingress-nginx's names (nginx_ingress_controller_requests, ..._request_duration_seconds, ...), so that
// dashboards, alerts, canary analysis and autoscalers built on them keep working. Each scrape reads the
// NGINX shared dict once through the status server; counters keep growing across NGINX restarts, which
// empty that dict.
package requestmetrics

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module registers the request metrics collector.
var Module = fx.Module("requestmetrics",
	fx.Provide(New),
	fx.Invoke(func(*Collector) {}),
)

// Source reads the aggregated request metrics and deletes those of Ingresses no longer served;
// *nginx.Client is one.
type Source interface {
	RequestMetrics(ctx context.Context) (nginx.RequestMetricsDump, error)
	ForgetRequestMetrics(ctx context.Context, ingresses []types.NamespacedName) error
}

// Options configure the collector.
type Options struct {
	Source Source
	Config nginx.RequestMetricsConfig
	// Exclude are the metric names (with or without the nginx_ingress_controller_ prefix) not exported
	// (--exclude-socket-metrics).
	Exclude []string
	// StatusClasses labels with the status class, "2xx", instead of the code (--report-status-classes).
	StatusClasses bool
	// ConstLabels are ingress-nginx's controller_namespace, controller_class and controller_pod.
	ConstLabels prometheus.Labels
	// Timeout bounds one read of NGINX's dict; default 5s.
	Timeout time.Duration
	// PIDFile, when set, adds ingress-nginx's nginx_process_* metrics of the NGINX whose master it names
	// (ProcessCollector), with StubStatus for the connection counters.
	PIDFile    string
	StubStatus func(ctx context.Context) ([]byte, error)
}

// Params are the fx inputs.
type Params struct {
	fx.In
	Options  Options
	Registry prometheus.Registerer
	Log      *zap.Logger
	// Changes tells which Ingresses are no longer served: their series are deleted.
	Changes   *pipeline.Topic[modules.IngressChange] `optional:"true"`
	Lifecycle fx.Lifecycle                           `optional:"true"`
}

// Prefix is ingress-nginx's metric namespace.
const Prefix = "nginx_ingress_controller_"

type seriesKey struct {
	slot   int
	labels nginx.RequestLabels
}

// Collector is a prometheus.Collector over NGINX's request metrics dict.
type Collector struct {
	opts     Options
	log      *zap.Logger
	requests *prometheus.Desc
	hists    [nginx.HistBytesSent + 1]*prometheus.Desc

	scrapeErrors prometheus.Counter
	series       prometheus.Gauge
	dropped      prometheus.Gauge

	mu      sync.Mutex
	gen     string
	lastErr string
	// last are the values of the current generation last read; base what earlier generations (NGINX
	// starts) and evicted keys had reached: a counter is base + last and never goes down.
	last, base map[seriesKey]float64
}

// histogram names and help texts, in nginx.RequestHistogram order (ingress-nginx's).
var histograms = [...]struct{ name, help string }{
	{"request_duration_seconds", "The request processing time in seconds (NGINX's $request_time)"},
	{"response_duration_seconds", "The time spent on receiving the response from the upstream server in seconds ($upstream_response_time)"},
	{"header_duration_seconds", "The time spent on receiving first header from the upstream server ($upstream_header_time)"},
	{"connect_duration_seconds", "The time spent on establishing a connection with the upstream server ($upstream_connect_time)"},
	{"request_size", "The request length (including request line, header, and request body)"},
	{"response_size", "The response length (including request line, header, and request body)"},
	{"bytes_sent", "DEPRECATED The number of bytes sent to a client"},
}

// New builds the collector and registers it on p.Registry.
func New(p Params) (*Collector, error) {
	c := NewCollector(p.Options, p.Log)
	if err := p.Registry.Register(c); err != nil {
		return nil, err
	}
	if p.Changes != nil {
		cancel := p.Changes.Subscribe(func(ch modules.IngressChange) {
			if !ch.Accepted {
				c.Forget(ch.Key)
			}
		})
		if p.Lifecycle != nil {
			p.Lifecycle.Append(fx.Hook{OnStop: func(context.Context) error { cancel(); return nil }})
		}
	}
	if p.Options.PIDFile != "" {
		pc := &ProcessCollector{PIDFile: p.Options.PIDFile, Status: p.Options.StubStatus, ConstLabels: p.Options.ConstLabels}
		if err := p.Registry.Register(pc); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// NewCollector builds the collector without registering it (tests).
func NewCollector(o Options, log *zap.Logger) *Collector {
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	labels := []string{"status", "method", "path", "namespace", "ingress", "service", "canary"}
	if o.Config.PerHost {
		labels = append(labels, "host")
	}
	excluded := func(name string) bool {
		return slices.ContainsFunc(o.Exclude, func(e string) bool { return strings.TrimPrefix(strings.TrimSpace(e), Prefix) == name })
	}
	c := &Collector{opts: o, log: log.Named("requestmetrics"), last: map[seriesKey]float64{}, base: map[seriesKey]float64{},
		scrapeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "ingress_reactor_request_metrics_read_errors_total",
			Help: "Reads of NGINX's request metrics dict that failed (the scrape shows the values of the last good read)"}),
		series: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ingress_reactor_request_metrics_series",
			Help: "Label combinations (series) of nginx_ingress_controller_requests"}),
		dropped: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ingress_reactor_request_metrics_dropped",
			Help: "Values that did not fit into NGINX's request metrics dict since NGINX started (raise --metrics-dict-size)"}),
	}
	if !excluded("requests") {
		c.requests = prometheus.NewDesc(Prefix+"requests", "The total number of client requests", labels, o.ConstLabels)
	}
	for i, h := range histograms {
		if !excluded(h.name) {
			c.hists[i] = prometheus.NewDesc(Prefix+h.name, h.help, labels, o.ConstLabels)
		}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.requests != nil {
		ch <- c.requests
	}
	for _, d := range c.hists {
		if d != nil {
			ch <- d
		}
	}
	c.scrapeErrors.Describe(ch)
	c.series.Describe(ch)
	c.dropped.Describe(ch)
}

// Collect implements prometheus.Collector: it reads NGINX's dict and exports the totals.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	// One read at a time: two scrapes' dumps applied out of order would look like evicted keys.
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	dump, err := c.opts.Source.RequestMetrics(ctx)
	if err != nil {
		c.scrapeErrors.Inc()
		// Logged when the reason changes, not at every scrape (NGINX may be starting, or down for long).
		if err.Error() != c.lastErr {
			c.log.Warn("cannot read request metrics from NGINX; exporting the last values read", zap.Error(err))
		}
		c.lastErr = err.Error()
	} else {
		c.lastErr = ""
	}
	if dump.Generation != "" {
		c.update(dump)
		c.dropped.Set(dump.Dropped)
	}
	c.emit(ch)
	// Updated by this read: collected here rather than registered on their own, which the registry
	// could collect before it.
	c.scrapeErrors.Collect(ch)
	c.series.Collect(ch)
	c.dropped.Collect(ch)
}

// Forget deletes the series of an Ingress this controller no longer serves, here and in NGINX's dict (as
// ingress-nginx deleted them). Requests of its last second that a worker adds later come back as a small
// series.
func (c *Collector) Forget(ing types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	if err := c.opts.Source.ForgetRequestMetrics(ctx, []types.NamespacedName{ing}); err != nil {
		c.log.Debug("cannot delete request metrics in NGINX", zap.Stringer("ingress", ing), zap.Error(err))
	}
	for _, m := range []map[seriesKey]float64{c.base, c.last} {
		for k := range m {
			if k.labels.Namespace == ing.Namespace && k.labels.Ingress == ing.Name {
				delete(m, k)
			}
		}
	}
}

// update folds a dump into the totals: a new generation (NGINX restarted, its dict is empty) or a value
// lower than last time (its key was evicted and created again) adds what was reached to base.
func (c *Collector) update(d nginx.RequestMetricsDump) {
	if d.Generation != c.gen {
		for k, v := range c.last {
			c.base[k] += v
		}
		c.last = map[seriesKey]float64{}
		c.gen = d.Generation
	}
	next := make(map[seriesKey]float64, len(d.Values))
	for _, v := range d.Values {
		l := validLabels(v.Labels)
		if c.opts.StatusClasses && l.Status != "" {
			l.Status = l.Status[:1] + "xx"
		}
		next[seriesKey{slot: v.Slot, labels: l}] += v.Value
	}
	// Compared once summed: two keys of the dict can make one series (validLabels, status classes).
	for k, prev := range c.last {
		if v, ok := next[k]; !ok || v < prev {
			c.base[k] += prev
		}
	}
	c.last = next
}

// validLabels makes label values UTF-8, as Prometheus requires (client_golang refuses the whole scrape
// otherwise): the host label of --metrics-per-undefined-host is the client's Host header, which NGINX
// passes with any byte above 0x7f.
func validLabels(l nginx.RequestLabels) nginx.RequestLabels {
	for _, v := range []*string{&l.Namespace, &l.Ingress, &l.Service, &l.Path, &l.Host, &l.Canary, &l.Status, &l.Method} {
		if !utf8.ValidString(*v) {
			*v = strings.ToValidUTF8(*v, "\ufffd")
		}
	}
	return l
}

type histogramTotals struct {
	sum     float64
	buckets []float64 // per bucket, +Inf last; not cumulative
}

type seriesTotals struct {
	requests float64
	hists    [nginx.HistBytesSent + 1]*histogramTotals
}

func (c *Collector) emit(ch chan<- prometheus.Metric) {
	cfg := &c.opts.Config
	all := map[nginx.RequestLabels]*seriesTotals{}
	add := func(k seriesKey, v float64) {
		slot, ok := cfg.Slot(k.slot)
		if !ok {
			return
		}
		s := all[k.labels]
		if s == nil {
			s = &seriesTotals{}
			all[k.labels] = s
		}
		if slot.Hist < 0 {
			s.requests += v
			return
		}
		h := s.hists[slot.Hist]
		if h == nil {
			h = &histogramTotals{buckets: make([]float64, len(cfg.Buckets(slot.Hist))+1)}
			s.hists[slot.Hist] = h
		}
		if slot.Bucket < 0 {
			h.sum += v
		} else {
			h.buckets[slot.Bucket] += v
		}
	}
	for k, v := range c.base {
		add(k, v)
	}
	for k, v := range c.last {
		add(k, v)
	}
	series := 0
	for l, s := range all {
		values := []string{l.Status, l.Method, l.Path, l.Namespace, l.Ingress, l.Service, l.Canary}
		if cfg.PerHost {
			values = append(values, l.Host)
		}
		if s.requests > 0 {
			series++
			if c.requests != nil {
				ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, s.requests, values...)
			}
		}
		for i, h := range s.hists {
			if h == nil || c.hists[i] == nil {
				continue
			}
			bounds := cfg.Buckets(nginx.RequestHistogram(i))
			cumulative := make(map[float64]uint64, len(bounds))
			var n float64
			for j, b := range bounds {
				n += h.buckets[j]
				cumulative[b] = uint64(n)
			}
			n += h.buckets[len(bounds)]
			ch <- prometheus.MustNewConstHistogram(c.hists[i], uint64(n), h.sum, cumulative, values...)
		}
	}
	c.series.Set(float64(series))
}
