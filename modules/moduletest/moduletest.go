// Package moduletest holds what the modules' unit tests share: the Harness around a module (fake
// clientset, informers, metrics, logs, topics), Eventually, a Collector of a topic's messages, an
// EventRecorder that keeps each Event's object, and a reader of one metric's value. The objects fed to a
// module are built with package internal/gen.
package moduletest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Event is one recorded Event. Object is "namespace/name", or "Kind namespace/name" for an
// ObjectReference.
type Event struct {
	Object, Kind, Reason, Message string
}

// Recorder is a record.EventRecorder that keeps every Event with its object (record.FakeRecorder drops it).
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Event records an Event.
func (r *Recorder) Event(obj runtime.Object, kind, reason, message string) {
	name := fmt.Sprintf("%T", obj)
	switch o := obj.(type) {
	case *corev1.ObjectReference:
		name = o.Kind + " " + o.Namespace + "/" + o.Name
	case metav1.Object:
		name = o.GetNamespace() + "/" + o.GetName()
	}
	r.mu.Lock()
	r.events = append(r.events, Event{Object: name, Kind: kind, Reason: reason, Message: message})
	r.mu.Unlock()
}

// Eventf records an Event with a formatted message.
func (r *Recorder) Eventf(obj runtime.Object, kind, reason, format string, args ...any) {
	r.Event(obj, kind, reason, fmt.Sprintf(format, args...))
}

// AnnotatedEventf records an Event; annotations are dropped.
func (r *Recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, kind, reason, format string, args ...any) {
	r.Eventf(obj, kind, reason, format, args...)
}

// All returns every Event recorded so far.
func (r *Recorder) All() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Take returns the Events recorded since the last Take and forgets them.
func (r *Recorder) Take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// WithReason returns the Events recorded so far with the given reason.
func (r *Recorder) WithReason(reason string) []Event {
	var out []Event
	for _, e := range r.All() {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// MetricValue returns the value of the first series of metric name that carries the given label pairs
// (name1, value1, name2, value2, ...): a counter's or gauge's value, a histogram's sample count; 0 when
// there is none.
func MetricValue(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	tb.Helper()
	v, _ := LookupMetric(tb, g, name, labels...)
	return v
}

// LookupMetric is MetricValue that also says whether such a series exists, for tests that a series
// was removed rather than set to 0.
func LookupMetric(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	tb.Helper()
	fams, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
					return l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}) {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}
