package nginx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Request metrics (--enable-metrics): NGINX aggregates ingress-nginx's per-request histograms and
// counter in its log phase (lua/ingress_reactor/metrics.lua) into a shared dict; the controller reads the
// dict through the status server (Client.RequestMetrics) on each scrape. Nothing is sent per request.

// RequestMetricsConfig configures the request metrics NGINX collects. Nil RenderConfig.RequestMetrics
// turns them off: no dict, no log-phase work.
type RequestMetricsConfig struct {
	// TimeBuckets, LengthBuckets and SizeBuckets are the histograms' upper bounds (--time-buckets,
	// --length-buckets, --size-buckets), each strictly increasing and finite.
	TimeBuckets, LengthBuckets, SizeBuckets []float64
	// PerHost labels requests with the routes entry that served their host (--metrics-per-host);
	// PerUndefinedHost labels those of the catch-all with their Host header too
	// (--metrics-per-undefined-host).
	PerHost, PerUndefinedHost bool
	// DictMB sizes the shared dict (--metrics-dict-size); default 16.
	DictMB int
}

// Default histogram buckets, as ingress-nginx's flags.
var (
	DefaultTimeBuckets   = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	DefaultLengthBuckets = []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	DefaultSizeBuckets   = []float64{10, 100, 1000, 10000, 100000, 1e6, 1e7}
)

// RequestHistogram names one histogram of the request metrics, in metrics.lua's slot order.
type RequestHistogram int

// The histograms, in slot order (metrics.lua's HISTOGRAMS).
const (
	HistRequestTime RequestHistogram = iota
	HistResponseTime
	HistHeaderTime
	HistConnectTime
	HistRequestSize
	HistResponseSize
	HistBytesSent
	numRequestHistograms
)

// Buckets returns the upper bounds of histogram h.
func (c *RequestMetricsConfig) Buckets(h RequestHistogram) []float64 {
	switch h {
	case HistRequestSize, HistResponseSize:
		return c.LengthBuckets
	case HistBytesSent:
		return c.SizeBuckets
	default:
		return c.TimeBuckets
	}
}

func (c *RequestMetricsConfig) validate() error {
	if c.DictMB < 0 {
		return fmt.Errorf("metrics dict size must be positive, got %d", c.DictMB)
	}
	for name, b := range map[string][]float64{"time": c.TimeBuckets, "length": c.LengthBuckets, "size": c.SizeBuckets} {
		if err := ValidateBuckets(b); err != nil {
			return fmt.Errorf("%s buckets: %w", name, err)
		}
	}
	return nil
}

// ValidateBuckets reports whether b are usable histogram bounds: 1 to 64 finite numbers, strictly increasing.
func ValidateBuckets(b []float64) error {
	if len(b) == 0 || len(b) > 64 {
		return fmt.Errorf("want 1 to 64 bounds, got %d", len(b))
	}
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("bound %v is not a finite number", v)
		}
		if i > 0 && v <= b[i-1] {
			return fmt.Errorf("bounds must increase strictly: %v after %v", v, b[i-1])
		}
	}
	return nil
}

// luaTable is the argument of metrics.lua's configure: numbers and booleans only.
func (c *RequestMetricsConfig) luaTable() string {
	var sb strings.Builder
	list := func(name string, b []float64) {
		sb.WriteString(name)
		sb.WriteString(" = { ")
		for _, v := range b {
			sb.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			sb.WriteString(", ")
		}
		sb.WriteString("}, ")
	}
	sb.WriteString("{ ")
	list("time", c.TimeBuckets)
	list("length", c.LengthBuckets)
	list("size", c.SizeBuckets)
	fmt.Fprintf(&sb, "per_host = %t, per_undefined_host = %t }", c.PerHost, c.PerUndefinedHost)
	return sb.String()
}

// RequestSlot says what one value of the metrics dict is: the request count (Hist < 0), or the sum
// (Bucket < 0) or one bucket's count (Bucket = index; len(buckets) for +Inf) of a histogram.
type RequestSlot struct {
	Hist   RequestHistogram
	Bucket int
}

// Slot decodes a slot number of metrics.lua's layout; false when out of range.
func (c *RequestMetricsConfig) Slot(n int) (RequestSlot, bool) {
	if n == 0 {
		return RequestSlot{Hist: -1}, true
	}
	base := 1
	for h := range numRequestHistograms {
		size := 1 + len(c.Buckets(h)) + 1
		if n < base+size {
			return RequestSlot{Hist: h, Bucket: n - base - 1}, true
		}
		base += size
	}
	return RequestSlot{}, false
}

// RequestLabels are the labels of one series of request metrics.
type RequestLabels struct {
	Namespace, Ingress, Service, Path, Host, Canary, Status, Method string
}

// RequestMetricValue is one value of the metrics dict.
type RequestMetricValue struct {
	Slot   int
	Labels RequestLabels
	Value  float64
}

// RequestMetricsDump is what GET /metrics/requests answers: the dict's generation (new on each NGINX
// start), its values, and how many values did not fit into the dict since that start.
type RequestMetricsDump struct {
	Generation string
	Values     []RequestMetricValue
	Dropped    float64
}

// ParseRequestMetricsDump parses the body of GET /metrics/requests. Malformed lines are skipped and
// counted in the error (the rest is still returned).
func ParseRequestMetricsDump(body []byte) (RequestMetricsDump, error) {
	var d RequestMetricsDump
	bad := 0
	for len(body) > 0 {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte{'\n'})
		if len(line) == 0 {
			continue
		}
		f := strings.Split(string(line), "\t")
		switch {
		case f[0] == "generation" && len(f) == 2:
			d.Generation = f[1]
			continue
		case f[0] == "dropped" && len(f) == 2:
			d.Dropped, _ = strconv.ParseFloat(f[1], 64)
			continue
		}
		if len(f) != 10 {
			bad++
			continue
		}
		slot, err1 := strconv.Atoi(f[0])
		v, err2 := strconv.ParseFloat(f[9], 64)
		if err1 != nil || err2 != nil {
			bad++
			continue
		}
		d.Values = append(d.Values, RequestMetricValue{Slot: slot, Value: v, Labels: RequestLabels{
			Namespace: f[1], Ingress: f[2], Service: f[3], Path: f[4], Host: f[5], Canary: f[6], Status: f[7], Method: f[8]}})
	}
	if d.Generation == "" {
		return d, errors.New("request metrics: no generation in the answer (request metrics are off in this configuration)")
	}
	if bad > 0 {
		return d, fmt.Errorf("request metrics: %d malformed lines", bad)
	}
	return d, nil
}

// RequestMetrics reads the request metrics NGINX has aggregated (RequestMetricsConfig).
func (c *Client) RequestMetrics(ctx context.Context) (RequestMetricsDump, error) {
	body, err := c.get(ctx, "/metrics/requests")
	if err != nil {
		return RequestMetricsDump{}, fmt.Errorf("read request metrics: %w", err)
	}
	return ParseRequestMetricsDump(body)
}

// StubStatus returns NGINX's stub_status page (connections and requests since NGINX started).
func (c *Client) StubStatus(ctx context.Context) ([]byte, error) {
	return c.get(ctx, "/nginx_status")
}

// ForgetRequestMetrics deletes the request metrics of Ingresses this controller no longer serves from
// NGINX's dict.
func (c *Client) ForgetRequestMetrics(ctx context.Context, ingresses []types.NamespacedName) error {
	var b strings.Builder
	for _, k := range ingresses {
		b.WriteString(k.Namespace)
		b.WriteByte('\t')
		b.WriteString(k.Name)
		b.WriteByte('\n')
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/metrics/requests/forget", strings.NewReader(b.String()))
	if err != nil {
		return err
	}
	req.Header.Set(StatusTokenHeader, c.token)
	if _, err := c.do(req); err != nil {
		return fmt.Errorf("forget request metrics: %w", err)
	}
	return nil
}
