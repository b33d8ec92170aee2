package pipeline

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/ptr"
)

func TestQueueOptionsDefaults(t *testing.T) {
	clk := newFakeClock()
	tests := map[string]struct {
		in   QueueOptions[string]
		want QueueOptions[string]
	}{
		"zero values get the defaults": {
			in: QueueOptions[string]{},
			want: QueueOptions[string]{Name: "unnamed", BaseDelay: 5 * time.Millisecond, MaxDelay: 5 * time.Minute,
				QPS: 10, Burst: 100, MaxRetries: ptr.To(10)},
		},
		"set values are kept": {
			in: QueueOptions[string]{Name: "q", BaseDelay: time.Second, MaxDelay: time.Hour, QPS: 3, Burst: 4,
				MaxRetries: ptr.To(5), Clock: clk},
			want: QueueOptions[string]{Name: "q", BaseDelay: time.Second, MaxDelay: time.Hour, QPS: 3, Burst: 4,
				MaxRetries: ptr.To(5), Clock: clk},
		},
		// Zero retries is one attempt here as in --reload-retries; only nil gets the default.
		"zero retries mean none": {
			in: QueueOptions[string]{MaxRetries: ptr.To(0)},
			want: QueueOptions[string]{Name: "unnamed", BaseDelay: 5 * time.Millisecond, MaxDelay: 5 * time.Minute,
				QPS: 10, Burst: 100, MaxRetries: ptr.To(0)},
		},
		"negative retries mean none": {
			in: QueueOptions[string]{MaxRetries: ptr.To(-1)},
			want: QueueOptions[string]{Name: "unnamed", BaseDelay: 5 * time.Millisecond, MaxDelay: 5 * time.Minute,
				QPS: 10, Burst: 100, MaxRetries: ptr.To(0)},
		},
		"max delay below base delay is raised": {
			in: QueueOptions[string]{BaseDelay: time.Minute, MaxDelay: time.Second},
			want: QueueOptions[string]{Name: "unnamed", BaseDelay: time.Minute, MaxDelay: time.Minute,
				QPS: 10, Burst: 100, MaxRetries: ptr.To(10)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.in.withDefaults()
			if got.Logger == nil || got.Clock == nil {
				t.Fatalf("logger and clock must be defaulted, got %v %v", got.Logger, got.Clock)
			}
			if tc.want.Clock == nil {
				got.Clock = nil
			}
			got.Logger = nil
			if got.MaxRetries == nil || *got.MaxRetries != *tc.want.MaxRetries {
				t.Errorf("withDefaults() MaxRetries = %v, want %d", got.MaxRetries, *tc.want.MaxRetries)
			}
			got.MaxRetries, tc.want.MaxRetries = nil, nil
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("withDefaults()\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestRateLimiterBackoffDoublesUpToMax(t *testing.T) {
	rl := newRateLimiter(QueueOptions[string]{
		BaseDelay: 5 * time.Millisecond, MaxDelay: 40 * time.Millisecond, QPS: math.Inf(1), Burst: 1,
		Clock: newFakeClock(),
	}.withDefaults())
	want := []time.Duration{5, 10, 20, 40, 40, 40}
	for i, w := range want {
		if got := rl.When("a"); got != w*time.Millisecond {
			t.Fatalf("failure %d of a: delay %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := rl.When("b"); got != 5*time.Millisecond {
		t.Errorf("first failure of another key: delay %v, want 5ms (backoff is per key)", got)
	}
	if got := rl.NumRequeues("a"); got != len(want) {
		t.Errorf("NumRequeues(a) = %d, want %d", got, len(want))
	}
	rl.Forget("a")
	if got := rl.When("a"); got != 5*time.Millisecond {
		t.Errorf("after Forget: delay %v, want the base delay again", got)
	}
}

func TestRateLimiterTokenBucketIsSharedAndFollowsTheClock(t *testing.T) {
	clk := newFakeClock()
	rl := newRateLimiter(QueueOptions[string]{
		BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, QPS: 1, Burst: 2, Clock: clk,
	}.withDefaults())
	// Each key's own backoff is 1ms, so a delay above 1ms is the bucket's.
	steps := []struct {
		advance time.Duration
		key     string
		want    time.Duration
	}{
		{0, "a", time.Millisecond},               // first burst token
		{0, "b", time.Millisecond},               // second burst token
		{0, "c", time.Second},                    // bucket empty: waits for the next token
		{0, "d", 2 * time.Second},                // and the one after
		{3 * time.Second, "e", time.Millisecond}, // 3s refill 3 tokens, 2 were owed
		{0, "f", time.Second},                    // empty again
		{0, "a", 2 * time.Second},                // a retried key waits for the shared bucket too
		{time.Hour, "g", time.Millisecond},       // a long idle refills only up to the burst
		{0, "h", time.Millisecond},
		{0, "i", time.Second},
	}
	for i, s := range steps {
		clk.Step(s.advance)
		if got := rl.When(s.key); got != s.want {
			t.Fatalf("step %d (%s after +%v): delay %v, want %v", i, s.key, s.advance, got, s.want)
		}
	}
}

func TestQueueRetryWaitsForTheClock(t *testing.T) {
	clk := newFakeClock()
	q := NewQueue(QueueOptions[string]{Name: "t", BaseDelay: time.Second, Clock: clk})
	defer q.ShutDown()

	q.AddRateLimited("a")
	if n := q.Len(); n != 0 {
		t.Fatalf("Len right after AddRateLimited = %d, want 0 (the retry waits its backoff)", n)
	}
	clk.Step(time.Second)
	eventually(t, "the retry to become ready after its backoff", func() bool { return q.Len() == 1 })
	if got := getWithin(t, q); got != "a" {
		t.Fatalf("Get = %q, want a", got)
	}
	q.Finish("a", nil)
}

func TestQueueAddAfter(t *testing.T) {
	clk := newFakeClock()
	q := NewQueue(QueueOptions[string]{Name: "t", Clock: clk})
	defer q.ShutDown()

	q.AddAfter("later", time.Minute)
	q.AddAfter("now", 0)
	if got := getWithin(t, q); got != "now" {
		t.Fatalf("Get = %q, want the undelayed key first", got)
	}
	q.Finish("now", nil)
	clk.Step(time.Minute)
	if got := getWithin(t, q); got != "later" {
		t.Fatalf("Get = %q, want later", got)
	}
	q.Finish("later", nil)
}

// giveUpCall records one call of OnGiveUp.
type giveUpCall struct {
	key string
	err error
}

func TestQueueFinish(t *testing.T) {
	errA := errors.New("boom")
	tests := map[string]struct {
		maxRetries   *int
		errs         []error // outcome of each attempt; the last one repeats
		wantAttempts int
		wantGiveUp   bool
		wantRetries  float64 // workqueue_retries_total
		wantLog      string  // a message that must be logged exactly once
	}{
		"success forgets": {
			maxRetries: ptr.To(3), errs: []error{nil}, wantAttempts: 1, wantRetries: 0,
		},
		"transient failure then success": {
			maxRetries: ptr.To(3), errs: []error{errA, errA, nil}, wantAttempts: 3, wantRetries: 2,
		},
		"failing past the limit gives up once": {
			maxRetries: ptr.To(3), errs: []error{errA}, wantAttempts: 4, wantGiveUp: true, wantRetries: 3,
			wantLog: "Sync failed too many times; giving up",
		},
		"zero limit never retries": {
			maxRetries: ptr.To(0), errs: []error{errA}, wantAttempts: 1, wantGiveUp: true, wantRetries: 0,
			wantLog: "Sync failed too many times; giving up",
		},
		"no limit set retries DefaultMaxRetries times": {
			errs: []error{errA}, wantAttempts: DefaultMaxRetries + 1, wantGiveUp: true, wantRetries: DefaultMaxRetries,
			wantLog: "Sync failed too many times; giving up",
		},
		"negative limit never retries": {
			maxRetries: ptr.To(-1), errs: []error{errA}, wantAttempts: 1, wantGiveUp: true, wantRetries: 0,
			wantLog: "Sync failed too many times; giving up",
		},
		"terminal error is not retried and not given up": {
			maxRetries: ptr.To(3), errs: []error{fmt.Errorf("wrapped: %w", Terminal(errA))}, wantAttempts: 1, wantRetries: 0,
			wantLog: "Sync failed with a terminal error; not retrying",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			reg := prometheus.NewPedanticRegistry()
			metrics := NewMetrics(reg)
			log, logs := observedLogger()
			var calls []giveUpCall
			q := NewQueue(QueueOptions[string]{
				Name: "finish", MaxRetries: tc.maxRetries, Clock: clk, Metrics: metrics, Logger: log,
				OnGiveUp: func(k string, err error) { calls = append(calls, giveUpCall{k, err}) },
			})
			defer q.ShutDown()

			q.Add("a")
			attempts := 0
			for {
				if attempts > 20 {
					t.Fatal("still retrying after 20 attempts")
				}
				getWithin(t, q)
				err := tc.errs[min(attempts, len(tc.errs)-1)]
				attempts++
				q.Finish("a", err)
				if err == nil || IsTerminal(err) || len(calls) > 0 {
					break
				}
				clk.Step(time.Hour) // past any backoff
			}

			if attempts != tc.wantAttempts {
				t.Errorf("attempts = %d, want %d", attempts, tc.wantAttempts)
			}
			if tc.wantGiveUp {
				if len(calls) != 1 || calls[0].key != "a" || !errors.Is(calls[0].err, errA) {
					t.Errorf("OnGiveUp calls = %v, want one for a with the last error", calls)
				}
			} else if len(calls) != 0 {
				t.Errorf("OnGiveUp calls = %v, want none", calls)
			}
			wantDropped := 0.0
			if tc.wantGiveUp {
				wantDropped = 1
			}
			if got := metricValue(metrics.dropped.WithLabelValues("finish")); got != wantDropped {
				t.Errorf("dropped_total = %v, want %v", got, wantDropped)
			}
			if got := metricValue(metrics.retries.WithLabelValues("finish")); got != tc.wantRetries {
				t.Errorf("workqueue_retries_total = %v, want %v", got, tc.wantRetries)
			}
			if got := q.NumRequeues("a"); got != 0 {
				t.Errorf("NumRequeues after the outcome = %d, want 0 (history cleared)", got)
			}
			if q.Len() != 0 {
				t.Errorf("queue still holds %d keys", q.Len())
			}
			if tc.wantLog != "" {
				entries := logs.FilterMessage(tc.wantLog).All()
				if len(entries) != 1 {
					t.Fatalf("%q logged %d times, want once; all logs: %v", tc.wantLog, len(entries), logs.All())
				}
				fields := entries[0].ContextMap()
				if fields["key"] != "a" || fields["queue"] != "finish" || fields["error"] == nil {
					t.Errorf("log fields = %v, want key, queue and error", fields)
				}
			}
		})
	}
}

func TestQueueFinishWhileShuttingDownDoesNotGiveUp(t *testing.T) {
	var gaveUp bool
	q := NewQueue(QueueOptions[string]{MaxRetries: ptr.To(0), OnGiveUp: func(string, error) { gaveUp = true }})
	q.Add("a")
	getWithin(t, q)
	go q.ShutDown()
	eventually(t, "shutdown to start", q.ShuttingDown)
	q.Finish("a", errors.New("context canceled"))
	if gaveUp {
		t.Error("OnGiveUp called for a failure caused by shutting down")
	}
}

func TestQueueGiveUpCallbackPanicIsContained(t *testing.T) {
	metrics := NewMetrics(nil)
	log, logs := observedLogger()
	q := NewQueue(QueueOptions[string]{
		Name: "p", MaxRetries: ptr.To(0), Metrics: metrics, Logger: log,
		OnGiveUp: func(string, error) { panic("callback bug") },
	})
	defer q.ShutDown()
	q.Add("a")
	getWithin(t, q)
	q.Finish("a", errors.New("x"))
	if got := metricValue(metrics.panics.WithLabelValues("p")); got != 1 {
		t.Errorf("panics_total = %v, want 1", got)
	}
	if n := logs.FilterMessage("Panic in give-up callback").Len(); n != 1 {
		t.Errorf("panic logged %d times, want 1", n)
	}
	// The key was marked done despite the panic: adding it again works.
	q.Add("a")
	if got := getWithin(t, q); got != "a" {
		t.Errorf("Get = %q, want a", got)
	}
	q.Finish("a", nil)
}

func TestQueueDeduplicatesWaitingKeys(t *testing.T) {
	q := NewQueue(QueueOptions[string]{})
	defer q.ShutDown()
	for range 5 {
		q.Add("a")
	}
	q.Add("b")
	if got := q.Len(); got != 2 {
		t.Fatalf("Len = %d after adding a five times and b once, want 2", got)
	}
}

func TestQueueShutDownIgnoresNewKeys(t *testing.T) {
	q := NewQueue(QueueOptions[string]{Logger: zap.NewNop()})
	q.Add("queued")
	q.ShutDown()
	q.Add("late")
	if got := getWithin(t, q); got != "queued" {
		t.Fatalf("Get after ShutDown = %q, want the key queued before", got)
	}
	q.Finish("queued", nil)
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("Get on a shut down, empty queue did not report shutdown")
	}
}

func TestQueueShutDownWithDrainWaitsForKeysInProcess(t *testing.T) {
	q := NewQueue(QueueOptions[string]{})
	q.Add("a")
	getWithin(t, q)
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	eventually(t, "shutdown to start", q.ShuttingDown)
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while a key was still in process")
	default:
	}
	q.Finish("a", nil)
	receive(t, drained, "ShutDownWithDrain to return")
}
