//go:build integration

package harness

import (
	"strings"
	"testing"
)

func TestMetricsValue(t *testing.T) {
	const text = `# TYPE ingress_reactor_informer_events_total counter
ingress_reactor_informer_events_total{resource="ingresses",event="add"} 3
ingress_reactor_informer_events_total{resource="ingresses",event="update"} 5
ingress_reactor_informer_events_total{resource="services",event="add"} 7
# TYPE workqueue_depth gauge
workqueue_depth{name="reloader"} 2
# TYPE request_seconds histogram
request_seconds_bucket{le="1"} 4
request_seconds_bucket{le="+Inf"} 6
request_seconds_sum 9.5
request_seconds_count 6
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		name   string
		labels map[string]string
		want   float64
		found  bool
	}{
		"exact labels":           {"ingress_reactor_informer_events_total", map[string]string{"resource": "ingresses", "event": "add"}, 3, true},
		"subset sums":            {"ingress_reactor_informer_events_total", map[string]string{"resource": "ingresses"}, 8, true},
		"no labels sums all":     {"ingress_reactor_informer_events_total", nil, 15, true},
		"no matching sample":     {"ingress_reactor_informer_events_total", map[string]string{"event": "delete"}, 0, false},
		"empty means absent":     {"workqueue_depth", map[string]string{"name": "reloader", "other": ""}, 2, true},
		"gauge":                  {"workqueue_depth", map[string]string{"name": "reloader"}, 2, true},
		"histogram count":        {"request_seconds_count", nil, 6, true},
		"histogram sum":          {"request_seconds_sum", nil, 9.5, true},
		"histogram without part": {"request_seconds", nil, 0, false},
		"unknown metric":         {"nope_total", nil, 0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, found := m.Value(tc.name, tc.labels)
			if got != tc.want || found != tc.found {
				t.Errorf("Value(%s, %v) = %g, %v; want %g, %v", tc.name, tc.labels, got, found, tc.want, tc.found)
			}
		})
	}
}

func TestShortName(t *testing.T) {
	tests := map[string]string{
		"TestReactorSeesIngress/sub_case": "testreactorseesingress-sub-cas",
		"Test__A":                         "test-a",
		"--x--":                           "x",
	}
	for in, want := range tests {
		if got := shortName(in, 30); got != want {
			t.Errorf("shortName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHashNumber(t *testing.T) {
	tests := map[string]struct {
		hash   string
		want   float64
		wantOK bool
	}{
		"first 13 hex digits": {"4623951c347d2a1e9be560fe99b803a7", 0x4623951c347d2, true},
		"short hash":          {"ff", 255, true},
		"not hex":             {"not-a-hash", 0, false},
		"empty":               {"", 0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := hashNumber(tc.hash)
			if ok != tc.wantOK || (ok && got != tc.want) {
				t.Errorf("hashNumber(%q) = %g, %v; want %g, %v", tc.hash, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
