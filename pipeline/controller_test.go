package pipeline

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"
)

// calls counts syncs per key, safely across workers.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return c.n[key]
}

func (c *calls) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// startController starts a controller and stops it when the test ends.
func startController[K comparable](t *testing.T, q *Queue[K], sync SyncFunc[K], opts ControllerOptions) *Controller[K] {
	t.Helper()
	c := NewController(q, sync, opts)
	c.Start(context.Background())
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func TestControllerSyncsEveryKey(t *testing.T) {
	for _, workers := range []int{1, 4} {
		var got calls
		q := NewQueue(QueueOptions[string]{Name: "all"})
		c := startController(t, q, func(_ context.Context, k string) error {
			got.inc(k)
			return nil
		}, ControllerOptions{Workers: workers})
		keys := []string{"a", "b", "c", "d", "e", "f"}
		for _, k := range keys {
			c.Queue().Add(k)
		}
		for _, k := range keys {
			eventually(t, "key "+k+" to be synced", func() bool { return got.get(k) == 1 })
		}
		if err := c.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
	}
}

func TestControllerKeyAddedManyTimesWhileWaitingIsSyncedOnce(t *testing.T) {
	var got calls
	q := NewQueue(QueueOptions[string]{Name: "dedup"})
	for range 10 {
		q.Add("a")
	}
	q.Add("sentinel") // queued after a: once it is synced, every queued a was
	c := startController(t, q, func(_ context.Context, k string) error {
		got.inc(k)
		return nil
	}, ControllerOptions{Workers: 1})
	eventually(t, "the sentinel to be synced", func() bool { return got.get("sentinel") == 1 })
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := got.get("a"); n != 1 {
		t.Errorf("a added 10 times while waiting was synced %d times, want 1", n)
	}
}

func TestControllerKeyAddedWhileSyncingIsSyncedAgainAfter(t *testing.T) {
	var got calls
	inFirstSync := make(chan struct{})
	release := make(chan struct{})
	var running, overlapped atomic.Int32
	q := NewQueue(QueueOptions[string]{Name: "readd"})
	c := startController(t, q, func(_ context.Context, k string) error {
		if running.Add(1) > 1 {
			overlapped.Store(1)
		}
		defer running.Add(-1)
		if got.inc(k) == 1 && k == "a" {
			close(inFirstSync)
			<-release
		}
		return nil
	}, ControllerOptions{Workers: 2})

	q.Add("a")
	receive(t, inFirstSync, "the first sync of a")
	for range 3 {
		q.Add("a") // while a is being synced
	}
	close(release)
	eventually(t, "a to be synced a second time", func() bool { return got.get("a") == 2 })
	q.Add("sentinel")
	eventually(t, "the sentinel to be synced", func() bool { return got.get("sentinel") == 1 })
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := got.get("a"); n != 2 {
		t.Errorf("a synced %d times, want 2 (once, then once more for the adds during the sync)", n)
	}
	if overlapped.Load() != 0 {
		t.Error("a was synced by two workers at once")
	}
}

func TestControllerNeverSyncsOneKeyConcurrently(t *testing.T) {
	var perKey [4]atomic.Int32
	var violations, total atomic.Int32
	q := NewQueue(QueueOptions[int]{Name: "exclusive"})
	startController(t, q, func(_ context.Context, k int) error {
		if perKey[k].Add(1) > 1 {
			violations.Add(1)
		}
		runtime.Gosched() // give other workers a chance to overlap
		perKey[k].Add(-1)
		total.Add(1)
		return nil
	}, ControllerOptions{Workers: 4})
	for i := range 400 {
		q.Add(i % 4)
	}
	eventually(t, "the queue to empty", func() bool { return q.Len() == 0 && total.Load() >= 4 })
	if v := violations.Load(); v != 0 {
		t.Errorf("%d syncs overlapped another sync of the same key", v)
	}
}

func TestControllerRetriesUntilSuccess(t *testing.T) {
	clk := newFakeClock()
	var got calls
	errTransient := errors.New("transient")
	var gaveUp atomic.Bool
	q := NewQueue(QueueOptions[string]{Name: "retry", Clock: clk, MaxRetries: ptr.To(5),
		OnGiveUp: func(string, error) { gaveUp.Store(true) }})
	c := startController(t, q, func(_ context.Context, k string) error {
		if got.inc(k) < 3 {
			return errTransient
		}
		return nil
	}, ControllerOptions{})
	q.Add("a")
	eventuallyStepping(t, clk, time.Second, "the third, successful sync", func() bool { return got.get("a") == 3 })
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := got.get("a"); n != 3 {
		t.Errorf("a synced %d times, want 3", n)
	}
	if gaveUp.Load() {
		t.Error("gave up on a key that succeeded")
	}
	if n := q.NumRequeues("a"); n != 0 {
		t.Errorf("NumRequeues after success = %d, want 0", n)
	}
}

func TestControllerDropsKeyAfterRetryLimit(t *testing.T) {
	clk := newFakeClock()
	reg := prometheus.NewPedanticRegistry()
	log, logs := observedLogger()
	var got calls
	gaveUp := make(chan error, 10)
	q := NewQueue(QueueOptions[string]{Name: "limit", Clock: clk, MaxRetries: ptr.To(3), Metrics: NewMetrics(reg), Logger: log,
		OnGiveUp: func(_ string, err error) { gaveUp <- err }})
	c := startController(t, q, func(_ context.Context, k string) error {
		return errors.New("attempt " + string(rune('0'+got.inc(k))))
	}, ControllerOptions{Workers: 2})
	q.Add("a")
	eventuallyStepping(t, clk, time.Hour, "the key to be given up", func() bool { return len(gaveUp) > 0 })
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := got.get("a"); n != 4 {
		t.Errorf("a synced %d times, want 4 (1 + MaxRetries 3)", n)
	}
	if err := <-gaveUp; err == nil || err.Error() != "attempt 4" {
		t.Errorf("OnGiveUp got %v, want the last error (attempt 4)", err)
	}
	if len(gaveUp) != 0 {
		t.Error("OnGiveUp called more than once")
	}
	m := gatherByName(t, reg, "limit")
	if m["ingress_reactor_pipeline_dropped_total"] != 1 || m["workqueue_retries_total"] != 3 {
		t.Errorf("dropped_total = %v, retries_total = %v; want 1 and 3",
			m["ingress_reactor_pipeline_dropped_total"], m["workqueue_retries_total"])
	}
	if n := logs.FilterMessage("Sync failed too many times; giving up").Len(); n != 1 {
		t.Errorf("give-up logged %d times, want once", n)
	}
}

func TestControllerDoesNotRetryTerminalErrors(t *testing.T) {
	clk := newFakeClock()
	reg := prometheus.NewPedanticRegistry()
	var got calls
	var gaveUp atomic.Bool
	q := NewQueue(QueueOptions[string]{Name: "terminal", Clock: clk, Metrics: NewMetrics(reg),
		OnGiveUp: func(string, error) { gaveUp.Store(true) }})
	c := startController(t, q, func(_ context.Context, k string) error {
		got.inc(k)
		return Terminal(errors.New("invalid spec"))
	}, ControllerOptions{})
	q.Add("a")
	eventually(t, "the sync", func() bool { return got.get("a") == 1 })
	clk.Step(time.Hour)
	if err := c.Stop(context.Background()); err != nil { // waits for the outcome to be recorded
		t.Fatalf("Stop: %v", err)
	}
	if n := gatherByName(t, reg, "terminal")["workqueue_retries_total"]; n != 0 {
		t.Errorf("terminal error was scheduled for %v retries, want 0", n)
	}
	if n := got.get("a"); n != 1 {
		t.Errorf("a synced %d times, want 1", n)
	}
	if gaveUp.Load() {
		t.Error("OnGiveUp called for a terminal error; it is for exhausted retries")
	}
}

func TestControllerRecoversPanics(t *testing.T) {
	clk := newFakeClock()
	reg := prometheus.NewPedanticRegistry()
	log, logs := observedLogger()
	var got calls
	q := NewQueue(QueueOptions[string]{Name: "panicky", Clock: clk, Metrics: NewMetrics(reg), Logger: log})
	c := startController(t, q, func(_ context.Context, k string) error {
		if got.inc(k) == 1 {
			panic("nil map somewhere")
		}
		return nil
	}, ControllerOptions{})
	q.Add("a")
	eventuallyStepping(t, clk, time.Second, "the retry after the panic", func() bool { return got.get("a") == 2 })
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := gatherByName(t, reg, "panicky")["ingress_reactor_pipeline_panics_total"]; n != 1 {
		t.Errorf("panics_total = %v, want 1", n)
	}
	entries := logs.FilterMessage("Panic in sync; will retry").All()
	if len(entries) != 1 {
		t.Fatalf("panic logged %d times, want once", len(entries))
	}
	fields := entries[0].ContextMap()
	if stack, _ := fields["stack"].(string); !strings.Contains(stack, "TestControllerRecoversPanics") {
		t.Errorf("logged stack does not show where the panic happened:\n%s", stack)
	}
	if fields["panic"] != "nil map somewhere" || fields["key"] != "a" {
		t.Errorf("log fields = %v, want the panic value and key", fields)
	}
}

func TestControllerPanicsCountTowardsTheRetryLimit(t *testing.T) {
	clk := newFakeClock()
	var got calls
	gaveUp := make(chan error, 1)
	boom := errors.New("boom")
	q := NewQueue(QueueOptions[string]{Name: "always-panics", Clock: clk, MaxRetries: ptr.To(1),
		OnGiveUp: func(_ string, err error) { gaveUp <- err }})
	c := startController(t, q, func(_ context.Context, k string) error {
		got.inc(k)
		panic(boom)
	}, ControllerOptions{})
	q.Add("a")
	err := func() error {
		var err error
		eventuallyStepping(t, clk, time.Hour, "the key to be given up", func() bool {
			select {
			case err = <-gaveUp:
				return true
			default:
				return false
			}
		})
		return err
	}()
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !errors.Is(err, ErrPanic) || !errors.Is(err, boom) {
		t.Errorf("give-up error %v should wrap ErrPanic and the panic's error", err)
	}
	if n := got.get("a"); n != 2 {
		t.Errorf("a synced %d times, want 2", n)
	}
}

func TestControllerStopWaitsForSyncsInFlight(t *testing.T) {
	inSync := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	var sawCancel atomic.Bool
	q := NewQueue(QueueOptions[string]{Name: "stop"})
	c := NewController(q, func(ctx context.Context, _ string) error {
		close(inSync)
		<-release
		sawCancel.Store(ctx.Err() != nil)
		finished.Store(true)
		return nil
	}, ControllerOptions{})
	c.Start(context.Background())
	q.Add("a")
	receive(t, inSync, "the sync to start")

	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(context.Background()) }()
	eventually(t, "Stop to shut the queue", q.ShuttingDown)
	close(release)
	if err := receive(t, stopped, "Stop to return"); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !finished.Load() {
		t.Error("Stop returned before the sync in flight finished")
	}
	if sawCancel.Load() {
		t.Error("the sync's context was cancelled although it finished within the deadline")
	}
}

func TestControllerStopSkipsQueuedKeysAndRefusesNewOnes(t *testing.T) {
	var got calls
	inSync := make(chan struct{})
	release := make(chan struct{})
	q := NewQueue(QueueOptions[string]{Name: "intake"})
	c := NewController(q, func(_ context.Context, k string) error {
		if got.inc(k) == 1 && k == "a" {
			close(inSync)
			<-release
		}
		return nil
	}, ControllerOptions{Workers: 1})
	c.Start(context.Background())
	q.Add("a")
	receive(t, inSync, "the sync of a")
	q.Add("queued")

	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(context.Background()) }()
	eventually(t, "Stop to shut the queue", q.ShuttingDown)
	q.Add("late")
	close(release)
	if err := receive(t, stopped, "Stop to return"); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got.get("queued") != 0 || got.get("late") != 0 {
		t.Errorf("after Stop: queued synced %d times, late %d times; want 0 and 0", got.get("queued"), got.get("late"))
	}
}

func TestControllerStopDeadline(t *testing.T) {
	tests := map[string]struct {
		stopTimeout time.Duration
		stopCtx     func() context.Context
		wantErr     error
	}{
		"caller's context ends first": {
			stopTimeout: time.Hour,
			stopCtx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			wantErr: context.Canceled,
		},
		"StopTimeout ends first": {
			stopTimeout: time.Millisecond,
			stopCtx:     context.Background,
			wantErr:     context.DeadlineExceeded,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inSync := make(chan struct{})
			syncReturned := make(chan error, 1)
			q := NewQueue(QueueOptions[string]{Name: "stuck"})
			c := NewController(q, func(ctx context.Context, _ string) error {
				close(inSync)
				<-ctx.Done() // a sync that only gives up when cancelled
				syncReturned <- ctx.Err()
				return ctx.Err()
			}, ControllerOptions{StopTimeout: tc.stopTimeout})
			c.Start(context.Background())
			q.Add("a")
			receive(t, inSync, "the sync to start")

			err := c.Stop(tc.stopCtx())
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), "syncs still running") {
				t.Fatalf("Stop = %v, want %v saying syncs are still running", err, tc.wantErr)
			}
			if got := receive(t, syncReturned, "the stuck sync to be cancelled"); !errors.Is(got, context.Canceled) {
				t.Errorf("sync's context ended with %v, want context.Canceled", got)
			}
		})
	}
}

func TestControllerStartContextCancellationStopsIt(t *testing.T) {
	inSync := make(chan struct{})
	syncReturned := make(chan error, 1)
	q := NewQueue(QueueOptions[string]{Name: "ctx"})
	c := NewController(q, func(ctx context.Context, _ string) error {
		close(inSync)
		<-ctx.Done()
		syncReturned <- ctx.Err()
		return ctx.Err()
	}, ControllerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	q.Add("a")
	receive(t, inSync, "the sync to start")
	cancel()
	receive(t, syncReturned, "the sync to see the cancellation")
	eventually(t, "the queue to shut down", q.ShuttingDown)
	if err := c.Stop(context.Background()); err != nil {
		t.Errorf("Stop after the start context ended: %v", err)
	}
}

func TestControllerLifecycleEdges(t *testing.T) {
	t.Run("stop before start", func(t *testing.T) {
		var synced atomic.Bool
		q := NewQueue(QueueOptions[string]{})
		c := NewController(q, func(context.Context, string) error { synced.Store(true); return nil }, ControllerOptions{})
		if err := c.Stop(context.Background()); err != nil {
			t.Fatalf("Stop before Start: %v", err)
		}
		c.Start(context.Background()) // no-op after Stop
		q.Add("a")
		if q.Len() != 0 || !q.ShuttingDown() {
			t.Error("queue accepts keys after Stop")
		}
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		if synced.Load() {
			t.Error("a stopped controller synced a key")
		}
	})
	t.Run("start twice, stop twice", func(t *testing.T) {
		var got calls
		q := NewQueue(QueueOptions[string]{})
		c := NewController(q, func(_ context.Context, k string) error { got.inc(k); return nil }, ControllerOptions{})
		c.Start(context.Background())
		c.Start(context.Background())
		q.Add("a")
		eventually(t, "the sync", func() bool { return got.get("a") == 1 })
		for range 2 {
			if err := c.Stop(context.Background()); err != nil {
				t.Fatalf("Stop: %v", err)
			}
		}
	})
}

func TestNewControllerDefaults(t *testing.T) {
	c := NewController(NewQueue(QueueOptions[string]{}), nil, ControllerOptions{Workers: -3})
	defer func() { _ = c.Stop(context.Background()) }()
	if c.workers != DefaultWorkers || c.stopTimeout != DefaultStopTimeout {
		t.Errorf("workers %d, stop timeout %v; want %d and %v", c.workers, c.stopTimeout, DefaultWorkers, DefaultStopTimeout)
	}
}

func TestTerminal(t *testing.T) {
	base := errors.New("bad annotation")
	tests := map[string]struct {
		err          error
		wantTerminal bool
	}{
		"nil":                  {nil, false},
		"plain":                {base, false},
		"terminal":             {Terminal(base), true},
		"wrapped terminal":     {errors.Join(errors.New("ctx"), Terminal(base)), true},
		"terminal of wrapped":  {Terminal(errors.Join(base)), true},
		"context cancellation": {context.Canceled, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := IsTerminal(tc.err); got != tc.wantTerminal {
				t.Errorf("IsTerminal = %v, want %v", got, tc.wantTerminal)
			}
		})
	}
	if Terminal(nil) != nil {
		t.Error("Terminal(nil) != nil")
	}
	if err := Terminal(base); err.Error() != base.Error() || !errors.Is(err, base) {
		t.Errorf("Terminal changed the message or hid the cause: %v", err)
	}
}
