package requestmetrics

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// fakeSource answers the dumps of a test in turn.
type fakeSource struct {
	dumps     []nginx.RequestMetricsDump
	forgotten []types.NamespacedName
}

func (f *fakeSource) ForgetRequestMetrics(_ context.Context, ings []types.NamespacedName) error {
	f.forgotten = append(f.forgotten, ings...)
	return nil
}

func (f *fakeSource) RequestMetrics(context.Context) (nginx.RequestMetricsDump, error) {
	d := f.dumps[0]
	if len(f.dumps) > 1 {
		f.dumps = f.dumps[1:]
	}
	return d, nil
}

var web = nginx.RequestLabels{Namespace: "default", Ingress: "a", Service: "web", Path: "/app", Host: "a.example.com", Status: "200", Method: "GET"}

// dump builds a dump of one series: n requests, their request_time sum and one count per time bucket
// (TimeBuckets {0.1, 1}: slots 2, 3 and +Inf 4).
func dump(gen string, n, sum float64, buckets ...float64) nginx.RequestMetricsDump {
	d := nginx.RequestMetricsDump{Generation: gen, Values: []nginx.RequestMetricValue{{Slot: 0, Labels: web, Value: n}, {Slot: 1, Labels: web, Value: sum}}}
	for i, b := range buckets {
		d.Values = append(d.Values, nginx.RequestMetricValue{Slot: 2 + i, Labels: web, Value: b})
	}
	return d
}

func newTestCollector(t *testing.T, perHost bool, exclude []string, dumps ...nginx.RequestMetricsDump) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	_, err := New(Params{Options: Options{
		Source:      &fakeSource{dumps: dumps},
		Config:      nginx.RequestMetricsConfig{TimeBuckets: []float64{0.1, 1}, LengthBuckets: []float64{100}, SizeBuckets: []float64{1000}, PerHost: perHost},
		Exclude:     exclude,
		ConstLabels: prometheus.Labels{"controller_class": "k8s.io/ingress-reactor"},
	}, Registry: reg, Log: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

const hostLabels = `canary="",controller_class="k8s.io/ingress-reactor",host="a.example.com",ingress="a",method="GET",namespace="default",path="/app",service="web",status="200"`

func TestCollectorExportsIngressNginxNames(t *testing.T) {
	reg := newTestCollector(t, true, nil, dump("g1", 3, 1.5, 1, 1, 1))
	want := `# HELP nginx_ingress_controller_requests The total number of client requests
# TYPE nginx_ingress_controller_requests counter
nginx_ingress_controller_requests{` + hostLabels + `} 3
# HELP nginx_ingress_controller_request_duration_seconds The request processing time in seconds (NGINX's $request_time)
# TYPE nginx_ingress_controller_request_duration_seconds histogram
nginx_ingress_controller_request_duration_seconds_bucket{` + hostLabels + `,le="0.1"} 1
nginx_ingress_controller_request_duration_seconds_bucket{` + hostLabels + `,le="1"} 2
nginx_ingress_controller_request_duration_seconds_bucket{` + hostLabels + `,le="+Inf"} 3
nginx_ingress_controller_request_duration_seconds_sum{` + hostLabels + `} 1.5
nginx_ingress_controller_request_duration_seconds_count{` + hostLabels + `} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), Prefix+"requests", Prefix+"request_duration_seconds"); err != nil {
		t.Error(err)
	}
}

func TestCollectorCountersSurviveRestartsAndEvictions(t *testing.T) {
	reg := newTestCollector(t, true, nil,
		dump("g1", 3, 1.5, 3),
		dump("g1", 5, 2.5, 5),                      // 2 more
		dump("g2", 1, 0.5, 1),                      // NGINX restarted: its dict started again from 0
		dump("g2", 1, 0.5, 1),                      // nothing new: nothing doubles
		nginx.RequestMetricsDump{Generation: "g2"}, // the keys were evicted
		nginx.RequestMetricsDump{Generation: "g2", Values: []nginx.RequestMetricValue{{Labels: web, Value: 2}}}, // and created again
	)
	for i, want := range []float64{3, 5, 6, 6, 6, 8} {
		if got := testutil.ToFloat64(onlyRequests{reg}); got != want {
			t.Errorf("scrape %d: %v requests, want %v", i+1, got, want)
		}
	}
}

// onlyRequests collects nginx_ingress_controller_requests from a registry (one series).
type onlyRequests struct{ reg *prometheus.Registry }

func (o onlyRequests) Describe(chan<- *prometheus.Desc) {}

func (o onlyRequests) Collect(ch chan<- prometheus.Metric) {
	mfs, err := o.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == Prefix+"requests" {
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("r", "r", nil, nil), prometheus.CounterValue, mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
}

func TestCollectorExcludeAndPerHost(t *testing.T) {
	reg := newTestCollector(t, false, []string{"nginx_ingress_controller_request_duration_seconds", "bytes_sent"}, dump("g1", 1, 0.05, 1))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case Prefix + "request_duration_seconds", Prefix + "bytes_sent":
			t.Errorf("%s exported though excluded", mf.GetName())
		case Prefix + "requests":
			for _, l := range mf.GetMetric()[0].GetLabel() {
				if l.GetName() == "host" {
					t.Error("host label without --metrics-per-host")
				}
			}
		}
	}
}

// TestCollectorForgetsRemovedIngresses: an Ingress no longer served loses its series, here and in NGINX.
func TestCollectorForgetsRemovedIngresses(t *testing.T) {
	other := web
	other.Ingress = "b"
	src := &fakeSource{dumps: []nginx.RequestMetricsDump{
		{Generation: "g1", Values: []nginx.RequestMetricValue{{Labels: web, Value: 2}, {Labels: other, Value: 5}}},
		{Generation: "g1", Values: []nginx.RequestMetricValue{{Labels: other, Value: 5}}}, // NGINX forgot it too
	}}
	c := NewCollector(Options{Source: src, Config: nginx.RequestMetricsConfig{TimeBuckets: []float64{1}, LengthBuckets: []float64{1}, SizeBuckets: []float64{1}}}, zap.NewNop())
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if n, _ := testutil.GatherAndCount(reg, Prefix+"requests"); n != 2 {
		t.Fatalf("%d series, want 2", n)
	}
	c.Forget(types.NamespacedName{Namespace: "default", Name: "a"})
	if len(src.forgotten) != 1 || src.forgotten[0].Name != "a" {
		t.Errorf("NGINX was asked to forget %v", src.forgotten)
	}
	if n, _ := testutil.GatherAndCount(reg, Prefix+"requests"); n != 1 {
		t.Errorf("%d series after the Ingress went, want 1", n)
	}
}

// TestCollectorInvalidUTF8Host: with --metrics-per-undefined-host the host label is the client's Host
// header, which NGINX passes through with any byte above 0x7f. A label value that is not UTF-8 must not
// panic the scrape (client_golang's MustNewConstMetric panics on it, and the registry collects in a
// goroutine: the whole controller would crash); two such hosts that sanitize alike stay one series whose
// counter never goes down.
func TestCollectorInvalidUTF8Host(t *testing.T) {
	bad1, bad2 := nginx.RequestLabels{Host: "\xff.example", Status: "404", Method: "GET"}, nginx.RequestLabels{Host: "\xfe.example", Status: "404", Method: "GET"}
	reg := newTestCollector(t, true, nil,
		nginx.RequestMetricsDump{Generation: "g1", Values: []nginx.RequestMetricValue{{Labels: bad1, Value: 5}, {Labels: bad2, Value: 3}}},
		nginx.RequestMetricsDump{Generation: "g1", Values: []nginx.RequestMetricValue{{Labels: bad1, Value: 5}, {Labels: bad2, Value: 4}}},
	)
	for i, want := range []float64{8, 9} {
		if got := testutil.ToFloat64(onlyRequests{reg}); got != want {
			t.Errorf("scrape %d: %v requests, want %v", i+1, got, want)
		}
	}
}

// TestCollectorStatusClasses: --report-status-classes labels with 2xx, 4xx, ... as ingress-nginx; the
// codes of one class add up into one series.
func TestCollectorStatusClasses(t *testing.T) {
	ok, created, missing := web, web, web
	created.Status, missing.Status = "201", "404"
	src := &fakeSource{dumps: []nginx.RequestMetricsDump{{Generation: "g1", Values: []nginx.RequestMetricValue{{Labels: ok, Value: 2}, {Labels: created, Value: 3}, {Labels: missing, Value: 1}}}}}
	c := NewCollector(Options{Source: src, StatusClasses: true, Config: nginx.RequestMetricsConfig{TimeBuckets: []float64{1}, LengthBuckets: []float64{1}, SizeBuckets: []float64{1}}}, zap.NewNop())
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	const want = `# HELP nginx_ingress_controller_requests The total number of client requests
# TYPE nginx_ingress_controller_requests counter
nginx_ingress_controller_requests{canary="",ingress="a",method="GET",namespace="default",path="/app",service="web",status="2xx"} 5
nginx_ingress_controller_requests{canary="",ingress="a",method="GET",namespace="default",path="/app",service="web",status="4xx"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), Prefix+"requests"); err != nil {
		t.Error(err)
	}
}
