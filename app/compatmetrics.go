package app

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ingress-nginx's names for controller metrics that mean the same as ours: /metrics serves both, so that
// ingress-nginx's dashboards and alerts keep working (docs/metrics.md).

// metricAlias exports the samples of one of our metrics under ingress-nginx's name.
type metricAlias struct {
	from, to string
	// only keeps the samples with this label value (name, value), and drops that label.
	only [2]string
	// rename renames labels (ours to ingress-nginx's); to "" drops the label.
	rename map[string]string
}

var metricAliases = []metricAlias{
	{from: "ingress_reactor_last_reload_success", to: "nginx_ingress_controller_config_last_reload_successful"},
	{from: "ingress_reactor_last_reload_success_timestamp_seconds", to: "nginx_ingress_controller_config_last_reload_successful_timestamp_seconds"},
	{from: "ingress_reactor_config_hash", to: "nginx_ingress_controller_config_hash"},
	{from: "ingress_reactor_reloads_total", to: "nginx_ingress_controller_success", only: [2]string{"result", "success"}},
	{from: "ingress_reactor_reloads_total", to: "nginx_ingress_controller_errors", only: [2]string{"result", "failure"}},
	{from: "ingress_reactor_ssl_expire_time_seconds", to: "nginx_ingress_controller_ssl_expire_time_seconds", rename: map[string]string{"secret": "secret_name"}},
	{from: "ingress_reactor_leader", to: "nginx_ingress_controller_leader_election_status", rename: map[string]string{"identity": "", "lease": "name"}},
}

// compatGatherer gathers g once and adds the aliases of metricAliases, with ingress-nginx's constant
// labels (controller_namespace, controller_class, controller_pod).
type compatGatherer struct {
	g           prometheus.Gatherer
	constLabels map[string]string
}

func (c compatGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := c.g.Gather()
	byName := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	for _, a := range metricAliases {
		src := byName[a.from]
		if src == nil {
			continue
		}
		out := &dto.MetricFamily{Name: stringPtr(a.to), Help: stringPtr("Alias of " + a.from + " under ingress-nginx's name"), Type: src.Type}
		for _, m := range src.GetMetric() {
			if a.only[0] != "" && !hasLabel(m, a.only[0], a.only[1]) {
				continue
			}
			// The values are shared with the original, which nothing changes after Gather.
			cp := &dto.Metric{Gauge: m.Gauge, Counter: m.Counter, Untyped: m.Untyped, Histogram: m.Histogram, Summary: m.Summary, TimestampMs: m.TimestampMs}
			for _, l := range m.GetLabel() {
				name := l.GetName()
				if name == a.only[0] {
					continue
				}
				if to, ok := a.rename[name]; ok {
					if name = to; name == "" {
						continue
					}
				}
				cp.Label = append(cp.Label, &dto.LabelPair{Name: stringPtr(name), Value: stringPtr(l.GetValue())})
			}
			for k, v := range c.constLabels {
				cp.Label = append(cp.Label, &dto.LabelPair{Name: stringPtr(k), Value: stringPtr(v)})
			}
			sort.Slice(cp.Label, func(i, j int) bool { return cp.Label[i].GetName() < cp.Label[j].GetName() })
			out.Metric = append(out.Metric, cp)
		}
		if len(out.Metric) > 0 {
			mfs = append(mfs, out)
		}
	}
	sort.Slice(mfs, func(i, j int) bool { return mfs[i].GetName() < mfs[j].GetName() })
	return mfs, err
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

func stringPtr(s string) *string { return &s }
