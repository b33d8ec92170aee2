//go:build integration

package harness

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a Prometheus text endpoint, by metric family name.
type Metrics map[string]*dto.MetricFamily

// ScrapeMetrics fetches and parses the Prometheus text exposition at url.
func ScrapeMetrics(url string) (Metrics, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("scrape %s: status %d: %s", url, resp.StatusCode, b)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics parses the Prometheus text exposition format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return Metrics(fams), nil
}

// Value returns the sum of the samples of metric name whose labels include every
// label in labels (other labels may differ), and whether any sample matched. Counters,
// gauges and untyped metrics give their value; for histograms and summaries, name may
// be given with a _count or _sum suffix.
func (m Metrics) Value(name string, labels map[string]string) (float64, bool) {
	family, field := name, ""
	if _, ok := m[name]; !ok {
		for _, suffix := range []string{"_count", "_sum"} {
			if base, cut := strings.CutSuffix(name, suffix); cut {
				family, field = base, suffix
			}
		}
	}
	fam, ok := m[family]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
	for _, s := range fam.GetMetric() {
		if !hasLabels(s, labels) {
			continue
		}
		v, ok := sampleValue(s, field)
		if !ok {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// Describe lists the samples of metric name with their labels, for failure messages.
func (m Metrics) Describe(name string) string {
	fam, ok := m[name]
	if !ok {
		return fmt.Sprintf("no metric %s", name)
	}
	var lines []string
	for _, s := range fam.GetMetric() {
		var ls []string
		for _, l := range s.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		v, _ := sampleValue(s, "")
		lines = append(lines, fmt.Sprintf("%s{%s} %g", name, strings.Join(ls, ","), v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "; ")
}

func hasLabels(s *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := v == "" // Prometheus treats an absent label as an empty one
		for _, l := range s.GetLabel() {
			if l.GetName() == k {
				found = l.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func sampleValue(s *dto.Metric, field string) (float64, bool) {
	switch {
	case s.Counter != nil && field == "":
		return s.Counter.GetValue(), true
	case s.Gauge != nil && field == "":
		return s.Gauge.GetValue(), true
	case s.Untyped != nil && field == "":
		return s.Untyped.GetValue(), true
	case s.Histogram != nil && field == "_count":
		return float64(s.Histogram.GetSampleCount()), true
	case s.Histogram != nil && field == "_sum":
		return s.Histogram.GetSampleSum(), true
	case s.Summary != nil && field == "_count":
		return float64(s.Summary.GetSampleCount()), true
	case s.Summary != nil && field == "_sum":
		return s.Summary.GetSampleSum(), true
	}
	return 0, false
}
