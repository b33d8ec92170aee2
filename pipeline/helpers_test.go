package pipeline

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"
)

// waitLimit bounds every wait in these tests. It is generous because -race
// on a loaded two-core machine is slow; passing tests never wait this long.
const waitLimit = 10 * time.Second

// eventually polls cond until it holds, failing the test after waitLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// eventuallyStepping is eventually for conditions that need a fake clock to
// advance (retries waiting for their backoff): it steps the clock by step
// before every check.
func eventuallyStepping(t *testing.T, clk *clocktesting.FakeClock, step time.Duration, what string, cond func() bool) {
	t.Helper()
	eventually(t, what, func() bool {
		clk.Step(step)
		return cond()
	})
}

// receive waits for a value from ch, failing the test after waitLimit.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// getWithin calls q.Get, failing the test if it blocks longer than waitLimit or reports shutdown.
func getWithin[K comparable](t *testing.T, q *Queue[K]) K {
	t.Helper()
	k, shutdown := getResult[K](t, q)
	if shutdown {
		t.Fatalf("queue.Get reported shutdown")
	}
	return k
}

func newFakeClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// observedLogger returns a logger that records entries at debug level and up.
func observedLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// metricValue reads the current value of a counter or gauge.
func metricValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	panic("metricValue: not a counter or gauge")
}
