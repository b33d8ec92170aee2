package app

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.uber.org/fx"

	"github.com/ingress-reactor/ingress-reactor/modules/requestmetrics"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// floatList is a comma-separated list of numbers, as ingress-nginx's Float64Slice flags.
type floatList []float64

func (l *floatList) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (l *floatList) Set(s string) error {
	var out []float64
	for _, f := range strings.Split(strings.Trim(s, "[]"), ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return fmt.Errorf("invalid number %q", f)
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

// stringList is a comma-separated list of names, as ingress-nginx's StringSlice flags.
type stringList []string

func (l *stringList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *stringList) Set(s string) error {
	*l = nil
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l = append(*l, f)
		}
	}
	return nil
}

func bindMetricsFlags(fs *flag.FlagSet, c *Config) {
	fs.BoolVar(&c.EnableMetrics, "enable-metrics", c.EnableMetrics, "Collect per-request metrics in NGINX and serve them on /metrics of --healthz-port under ingress-nginx's names "+
		"(nginx_ingress_controller_requests, ..._request_duration_seconds, ...; docs/metrics.md). Controller metrics are served either way.")
	fs.BoolVar(&c.MetricsPerHost, "metrics-per-host", c.MetricsPerHost, "Label request metrics with the host: the Ingress host that served the request (a wildcard host as written, \"*.example.com\").")
	fs.BoolVar(&c.MetricsPerUndefinedHost, "metrics-per-undefined-host", c.MetricsPerUndefinedHost, "Label the requests of hosts no Ingress defines with their Host header too "+
		"(without it their host label is empty; beware: clients choose these values). Requires --metrics-per-host.")
	fs.Var(&c.TimeBuckets, "time-buckets", "Upper bounds of the duration histograms of request metrics, in seconds, comma-separated.")
	fs.Var(&c.LengthBuckets, "length-buckets", "Upper bounds of the request_size and response_size histograms, in bytes, comma-separated.")
	fs.Var(&c.SizeBuckets, "size-buckets", "Upper bounds of the bytes_sent histogram, in bytes, comma-separated.")
	fs.Var(&c.ExcludeSocketMetrics, "exclude-socket-metrics", "Request metrics not to export, comma-separated (for example nginx_ingress_controller_header_duration_seconds,"+
		"nginx_ingress_controller_bytes_sent; the prefix may be left out).")
	fs.BoolVar(&c.ReportStatusClasses, "report-status-classes", c.ReportStatusClasses, "Label request metrics with the status class (2xx, 3xx, 4xx, 5xx) instead of the status code.")
	fs.IntVar(&c.MetricsDictSize, "metrics-dict-size", c.MetricsDictSize, fmt.Sprintf("Size in MB of NGINX's shared memory for request metrics (no ingress-nginx equivalent: it sent every request to the controller). "+
		"1 MB holds about 250 label combinations (Ingress path, status, method, host). When it is full, the least recently updated values are dropped "+
		"(counted in ingress_reactor_request_metrics_dropped) and NGINX logs it. %d to %d.", 1, maxMetricsDictSizeMB))
}

// maxMetricsDictSizeMB bounds --metrics-dict-size: each scrape reads the whole dict in one answer of the
// status server, which the controller reads up to 64 MB (a dict's text is smaller than the dict).
const maxMetricsDictSizeMB = 64

func (c *Config) validateMetrics() []error {
	var errs []error
	if c.MetricsPerUndefinedHost && !c.MetricsPerHost {
		errs = append(errs, fmt.Errorf("--metrics-per-undefined-host needs --metrics-per-host"))
	}
	for name, b := range map[string][]float64{"--time-buckets": c.TimeBuckets, "--length-buckets": c.LengthBuckets, "--size-buckets": c.SizeBuckets} {
		if err := nginx.ValidateBuckets(b); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if c.MetricsDictSize < 1 || c.MetricsDictSize > maxMetricsDictSizeMB {
		errs = append(errs, fmt.Errorf("--metrics-dict-size must be between 1 and %d (MB), got %d", maxMetricsDictSizeMB, c.MetricsDictSize))
	}
	return errs
}

// requestMetricsRender is the RenderConfig's request metrics: nil with --enable-metrics=false.
func requestMetricsRender(cfg Config) *nginx.RequestMetricsConfig {
	if !cfg.EnableMetrics {
		return nil
	}
	return &nginx.RequestMetricsConfig{
		TimeBuckets:      cfg.TimeBuckets,
		LengthBuckets:    cfg.LengthBuckets,
		SizeBuckets:      cfg.SizeBuckets,
		PerHost:          cfg.MetricsPerHost,
		PerUndefinedHost: cfg.MetricsPerUndefinedHost,
		DictMB:           cfg.MetricsDictSize,
	}
}

// requestMetricsModules export the request metrics with --enable-metrics.
func requestMetricsModules(cfg Config) []fx.Option {
	if !cfg.EnableMetrics {
		return nil
	}
	return []fx.Option{
		fx.Provide(func(dp *DataPlane) requestmetrics.Options {
			client := nginx.NewClient(dp.Runtime.StatusPort, dp.Runtime.StatusToken)
			return requestmetrics.Options{
				Source:        client,
				PIDFile:       dp.Paths.PIDFile(),
				StubStatus:    client.StubStatus,
				Config:        *dp.Render.RequestMetrics,
				Exclude:       cfg.ExcludeSocketMetrics,
				StatusClasses: cfg.ReportStatusClasses,
				ConstLabels:   ingressNginxConstLabels(cfg),
			}
		}),
		requestmetrics.Module,
	}
}

// ingressNginxConstLabels are ingress-nginx's constant labels of its metrics, so that the selectors of its
// dashboards match: controller_namespace and controller_pod from POD_NAMESPACE and POD_NAME,
// controller_class from --controller-class.
func ingressNginxConstLabels(cfg Config) map[string]string {
	return map[string]string{
		"controller_namespace": os.Getenv("POD_NAMESPACE"),
		"controller_class":     cfg.ControllerClass,
		"controller_pod":       os.Getenv("POD_NAME"),
	}
}
