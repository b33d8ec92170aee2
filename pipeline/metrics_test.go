package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"
)

// gatherByName returns the series of reg as family name -> value of the
// series labelled name=queue (counters and gauges; histograms give their
// sample count).
func gatherByName(t *testing.T, reg prometheus.Gatherer, queue string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "name" || l.GetValue() != queue {
					continue
				}
				switch {
				case m.Counter != nil:
					out[f.GetName()] = m.GetCounter().GetValue()
				case m.Gauge != nil:
					out[f.GetName()] = m.GetGauge().GetValue()
				case m.Histogram != nil:
					out[f.GetName()] = float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return out
}

func TestMetricsFamiliesAndValues(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	clk := newFakeClock()
	q := NewQueue(QueueOptions[string]{Name: "ingress", Metrics: NewMetrics(reg), Clock: clk, MaxRetries: ptr.To(0)})
	defer q.ShutDown()

	q.Add("a")
	q.Add("b")
	got := gatherByName(t, reg, "ingress")
	want := map[string]float64{
		"workqueue_depth":                             2,
		"workqueue_adds_total":                        2,
		"workqueue_queue_duration_seconds":            0,
		"workqueue_work_duration_seconds":             0,
		"workqueue_unfinished_work_seconds":           0,
		"workqueue_longest_running_processor_seconds": 0,
		"workqueue_retries_total":                     0,
		"ingress_reactor_pipeline_dropped_total":      0,
		"ingress_reactor_pipeline_panics_total":       0,
	}
	for name, w := range want {
		if v, ok := got[name]; !ok || v != w {
			t.Errorf("%s{name=ingress} = %v (present %v), want %v", name, v, ok, w)
		}
	}

	getWithin(t, q)
	q.Finish("a", errors.New("fails once, no retries allowed"))
	q.AddRateLimited("b") // counts as a retry
	got = gatherByName(t, reg, "ingress")
	for name, w := range map[string]float64{
		"workqueue_depth":                        1,
		"workqueue_queue_duration_seconds":       1,
		"workqueue_work_duration_seconds":        1,
		"workqueue_retries_total":                1,
		"ingress_reactor_pipeline_dropped_total": 1,
	} {
		if got[name] != w {
			t.Errorf("after one processed and dropped key: %s = %v, want %v", name, got[name], w)
		}
	}
}

func TestMetricsUnfinishedWorkFollowsTheClock(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	clk := newFakeClock()
	q := NewQueue(QueueOptions[string]{Name: "slow", Metrics: NewMetrics(reg), Clock: clk})
	defer q.ShutDown()
	q.Add("a")
	getWithin(t, q)
	eventuallyStepping(t, clk, time.Second, "unfinished work to be reported", func() bool {
		return gatherByName(t, reg, "slow")["workqueue_longest_running_processor_seconds"] >= 1
	})
	q.Finish("a", nil)
}

func TestNewMetricsTwiceOnOneRegistryShares(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	first := NewMetrics(reg)
	second := NewMetrics(reg)
	q := NewQueue(QueueOptions[string]{Name: "shared", Metrics: second})
	defer q.ShutDown()
	q.Add("a")
	if got := metricValue(first.adds.WithLabelValues("shared")); got != 1 {
		t.Errorf("adds seen through the first Metrics = %v, want 1", got)
	}
	if got := gatherByName(t, reg, "shared")["workqueue_adds_total"]; got != 1 {
		t.Errorf("registry workqueue_adds_total = %v, want 1", got)
	}
}

func TestNewMetricsPanicsOnConflictingCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "other"}, []string{"queue"}))
	defer func() {
		if recover() == nil {
			t.Error("NewMetrics did not panic on a conflicting workqueue_depth")
		}
	}()
	NewMetrics(reg)
}

func TestMetricsRegistriesAreIndependent(t *testing.T) {
	regA, regB := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
	NewMetrics(regB)
	q := NewQueue(QueueOptions[string]{Name: "a-only", Metrics: NewMetrics(regA)})
	defer q.ShutDown()
	q.Add("x")
	if _, ok := gatherByName(t, regB, "a-only")["workqueue_adds_total"]; ok {
		t.Error("a queue on registry A reported into registry B")
	}
	if gatherByName(t, regA, "a-only")["workqueue_adds_total"] != 1 {
		t.Error("registry A did not see the add")
	}
}

// A nil *Metrics must be usable everywhere: this fails by panicking.
func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	m.initSeries("x")
	m.incDropped("x")
	m.incPanics("x")
	q := NewQueue(QueueOptions[int]{MaxRetries: ptr.To(0)})
	defer q.ShutDown()
	q.Add(1)
	getWithin(t, q)
	q.Finish(1, errors.New("dropped without metrics"))
	if q.Len() != 0 {
		t.Errorf("Len = %d after dropping the only key, want 0", q.Len())
	}
}
