package pipeline

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

// getKey calls q.Get, failing the test if it blocks longer than waitLimit or
// reports shutdown.
func getKey[K comparable](t *testing.T, q workqueue.TypedInterface[K]) K {
	t.Helper()
	key, shutdown := getResult(t, q)
	if shutdown {
		t.Fatal("Get reported shutdown")
	}
	return key
}

// getResult calls q.Get, failing the test if it blocks longer than waitLimit.
func getResult[K comparable](t *testing.T, q interface{ Get() (K, bool) }) (K, bool) {
	t.Helper()
	type got struct {
		key      K
		shutdown bool
	}
	ch := make(chan got, 1)
	go func() {
		k, s := q.Get()
		ch <- got{k, s}
	}()
	g := receive(t, ch, "Get")
	return g.key, g.shutdown
}

func TestKeyQueueHandsOutKeysOnceInFIFOOrder(t *testing.T) {
	q := newKeyQueue[string]("", nil, nil)
	defer q.ShutDown()
	for _, k := range []string{"c", "a", "c", "b", "a", "c"} {
		q.Add(k)
	}
	if got := q.Len(); got != 3 {
		t.Fatalf("Len = %d after adding c, a, b (some several times), want 3", got)
	}
	var order []string
	for range 3 {
		k := getKey(t, q)
		order = append(order, k)
		q.Done(k)
	}
	if fmt.Sprint(order) != "[c a b]" {
		t.Errorf("keys handed out in order %v, want [c a b] (first add wins)", order)
	}
	if got := q.Len(); got != 0 {
		t.Errorf("Len = %d after handing out every key, want 0", got)
	}
}

func TestKeyQueueReAddWhileProcessingWaitsForDone(t *testing.T) {
	q := newKeyQueue[string]("", nil, nil)
	defer q.ShutDown()
	q.Add("a")
	getKey(t, q)
	q.Add("a")
	q.Add("a")
	if got := q.Len(); got != 0 {
		t.Fatalf("Len = %d with a re-added while processing, want 0: it must not be handed out yet", got)
	}
	q.Add("b")
	if got := getKey(t, q); got != "b" {
		t.Fatalf("Get = %q while a is processing, want b", got)
	}
	q.Done("a")
	if got := q.Len(); got != 1 {
		t.Fatalf("Len = %d after Done of a re-added key, want 1", got)
	}
	if got := getKey(t, q); got != "a" {
		t.Errorf("Get = %q, want a again after its Done", got)
	}
	q.Done("a")
	q.Done("b")
	if got := q.Len(); got != 0 {
		t.Errorf("Len = %d after everything is done, want 0", got)
	}
}

// Many workers hammer a few keys: no key may ever be processed by two
// workers at once, and every key added is processed after its last add.
func TestKeyQueueNeverHandsAKeyToTwoWorkers(t *testing.T) {
	q := newKeyQueue[int]("", nil, nil)
	const keys, adds, workers = 4, 2000, 4
	var (
		mu       sync.Mutex
		inFlight = map[int]bool{}
		overlap  []int
		done     = map[int]int{}
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if inFlight[k] {
					overlap = append(overlap, k)
				}
				inFlight[k] = true
				mu.Unlock()
				runtime.Gosched() // let another worker try to take k meanwhile
				mu.Lock()
				inFlight[k] = false
				done[k]++
				mu.Unlock()
				q.Done(k)
			}
		})
	}
	for i := range adds {
		q.Add(i % keys)
	}
	q.ShutDownWithDrain()
	wg.Wait()
	if len(overlap) > 0 {
		t.Errorf("keys handed to two workers at once: %v", overlap)
	}
	for k := range keys {
		if done[k] == 0 {
			t.Errorf("key %d was never processed", k)
		}
	}
}

func TestKeyQueueGetBlocksUntilAddOrShutDown(t *testing.T) {
	q := newKeyQueue[string]("", nil, nil)
	type got struct {
		key      string
		shutdown bool
	}
	first, second := make(chan got, 1), make(chan got, 1)
	go func() { k, s := q.Get(); first <- got{k, s} }()
	go func() { k, s := q.Get(); second <- got{k, s} }()
	q.Add("a")
	var g got
	other := second // the Get that is still blocked
	select {
	case g = <-first:
	case g = <-second:
		other = first
	case <-time.After(waitLimit):
		t.Fatal("timed out waiting for a blocked Get to take the added key")
	}
	if g.key != "a" || g.shutdown {
		t.Fatalf("woken Get = %+v, want a", g)
	}
	q.ShutDown()
	if g := receive(t, other, "the other Get to return on ShutDown"); !g.shutdown {
		t.Errorf("Get blocked on an empty queue returned %+v on ShutDown, want shutdown", g)
	}
	q.Done("a")
}

func TestKeyQueueShutDown(t *testing.T) {
	q := newKeyQueue[string]("", nil, nil)
	q.Add("queued")
	q.Add("processing")
	q.Add("other")
	if got := getKey(t, q); got != "queued" {
		t.Fatalf("Get = %q, want queued", got)
	}
	if got := getKey(t, q); got != "processing" {
		t.Fatalf("Get = %q, want processing", got)
	}
	q.Add("processing") // re-added before shutdown: handed out again after Done
	q.ShutDown()
	if !q.ShuttingDown() {
		t.Fatal("ShuttingDown = false after ShutDown")
	}
	q.Add("late")
	q.Add("queued") // being processed, but added after shutdown: ignored
	q.Done("queued")
	q.Done("processing")
	var rest []string
	for {
		k, shutdown := getResult(t, q)
		if shutdown {
			break
		}
		rest = append(rest, k)
		q.Done(k)
	}
	if fmt.Sprint(rest) != "[other processing]" {
		t.Errorf("keys handed out after ShutDown: %v, want [other processing]", rest)
	}
	q.ShutDown() // a second call is harmless
}

func TestKeyQueueShutDownWithDrain(t *testing.T) {
	q := newKeyQueue[string]("", nil, nil)
	q.Add("a")
	q.Add("b")
	getKey(t, q)
	drained := startDrain(t, q)
	// b is queued, not processing: ShutDownWithDrain waits for a only, and
	// Get still hands out b.
	if got := getKey(t, q); got != "b" {
		t.Fatalf("Get while draining = %q, want b", got)
	}
	q.Done("a")
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while b was still processing")
	default:
	}
	q.Done("b")
	receive(t, drained, "ShutDownWithDrain to return")
	if _, shutdown := getResult(t, q); !shutdown {
		t.Error("Get after the drain did not report shutdown")
	}
}

// startDrain calls q.ShutDownWithDrain on a goroutine of its own, waits until the shutdown has begun, and
// returns a channel closed when ShutDownWithDrain returns.
func startDrain(t *testing.T, q *keyQueue[string]) <-chan struct{} {
	t.Helper()
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	eventually(t, "shutdown to start", q.ShuttingDown)
	return drained
}

func TestKeyQueueShutDownCancelsDrain(t *testing.T) {
	q := newKeyQueue[string]("", nil, nil)
	q.Add("stuck")
	getKey(t, q)
	drained := startDrain(t, q)
	q.ShutDown()
	receive(t, drained, "ShutDownWithDrain to give up when ShutDown is called")
}

// recordingProvider is a workqueue.MetricsProvider that keeps every metric
// of one queue as plain numbers.
type recordingProvider struct {
	mu     sync.Mutex
	values map[string]float64
}

type recordedMetric struct {
	p    *recordingProvider
	name string
}

func (m recordedMetric) add(name string, v float64) {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.p.values[name] += v
}

func (m recordedMetric) Inc()              { m.add(m.name, 1) }
func (m recordedMetric) Dec()              { m.add(m.name, -1) }
func (m recordedMetric) Observe(v float64) { m.add(m.name+"_count", 1); m.add(m.name+"_sum", v) }
func (m recordedMetric) Set(v float64) {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.p.values[m.name] = v
}

func newRecordingProvider() *recordingProvider {
	return &recordingProvider{values: map[string]float64{}}
}

func (p *recordingProvider) metric(n string) recordedMetric { return recordedMetric{p, n} }
func (p *recordingProvider) snapshot() map[string]float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]float64{}
	for k, v := range p.values {
		out[k] = v
	}
	return out
}

func (p *recordingProvider) NewDepthMetric(string) workqueue.GaugeMetric  { return p.metric("depth") }
func (p *recordingProvider) NewAddsMetric(string) workqueue.CounterMetric { return p.metric("adds") }
func (p *recordingProvider) NewRetriesMetric(string) workqueue.CounterMetric {
	return p.metric("retries")
}
func (p *recordingProvider) NewLatencyMetric(string) workqueue.HistogramMetric {
	return p.metric("latency")
}
func (p *recordingProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return p.metric("work")
}
func (p *recordingProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return p.metric("unfinished")
}
func (p *recordingProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return p.metric("longest")
}

func TestKeyQueueMetrics(t *testing.T) {
	clk := newFakeClock()
	p := newRecordingProvider()
	q := newKeyQueue[string]("q", p, clk)
	defer q.ShutDown()

	q.Add("a")
	q.Add("b")
	q.Add("a")
	clk.Step(3 * time.Second)
	getKey(t, q) // a waited 3s
	q.Add("a")   // dirty again while processing: counted as an add and in depth
	clk.Step(2 * time.Second)
	q.Done("a") // a worked 2s and is queued again
	getKey(t, q)
	getKey(t, q) // b waited 5s, a (re-added) 2s
	clk.Step(time.Second)
	q.updateUnfinishedWork() // b and a both running for 1s
	want := map[string]float64{
		"adds": 3, "depth": 0,
		"latency_count": 3, "latency_sum": 10,
		"work_count": 1, "work_sum": 2,
		"unfinished": 2, "longest": 1,
	}
	if got := p.snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("metrics\n got %v\nwant %v", got, want)
	}
	q.Done("a")
	q.Done("b")
	q.updateUnfinishedWork()
	if got := p.snapshot(); got["unfinished"] != 0 || got["longest"] != 0 || got["work_sum"] != 4 {
		t.Errorf("after both are done: unfinished %v, longest %v, work_sum %v; want 0, 0, 4",
			got["unfinished"], got["longest"], got["work_sum"])
	}
}

// The unfinished-work gauges are refreshed by the queue itself, on its clock.
func TestKeyQueueRefreshesUnfinishedWork(t *testing.T) {
	clk := newFakeClock()
	p := newRecordingProvider()
	q := newKeyQueue[string]("q", p, clk)
	defer q.ShutDown()
	q.Add("a")
	getKey(t, q)
	eventuallyStepping(t, clk, unfinishedWorkPeriod, "longest running processor to be reported", func() bool {
		return p.snapshot()["longest"] >= 1
	})
	q.Done("a")
}

// The same random sequence of calls on client-go's Typed and on keyQueue
// must hand out the same keys in the same order and record the same metrics.
func TestKeyQueueMatchesClientGoTyped(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			clkRef, clkOurs := newFakeClock(), newFakeClock()
			pRef, pOurs := newRecordingProvider(), newRecordingProvider()
			ref := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[int]{Name: "q", MetricsProvider: pRef, Clock: clkRef})
			ours := newKeyQueue[int]("q", pOurs, clkOurs)
			defer ref.ShutDown()
			defer ours.ShutDown()
			rng := rand.New(rand.NewPCG(seed, 0))
			var processing []int
			for step := range 500 {
				switch op := rng.IntN(10); {
				case op < 5:
					k := rng.IntN(8)
					ref.Add(k)
					ours.Add(k)
				case op < 7 && ref.Len() > 0:
					kr, _ := ref.Get()
					ko, _ := ours.Get()
					if kr != ko {
						t.Fatalf("step %d: Get = %d, client-go's Typed gives %d", step, ko, kr)
					}
					processing = append(processing, kr)
				case op < 9 && len(processing) > 0:
					i := rng.IntN(len(processing))
					k := processing[i]
					processing = append(processing[:i], processing[i+1:]...)
					ref.Done(k)
					ours.Done(k)
				default:
					d := time.Duration(rng.IntN(1000)) * time.Millisecond
					clkRef.Step(d)
					clkOurs.Step(d)
				}
				if lr, lo := ref.Len(), ours.Len(); lr != lo {
					t.Fatalf("step %d: Len = %d, client-go's Typed has %d", step, lo, lr)
				}
			}
			ref.ShutDown()
			ours.ShutDown()
			// The unfinished-work gauges are timing-driven in client-go; they
			// are checked against fixed values in TestKeyQueueMetrics.
			got, want := pOurs.snapshot(), pRef.snapshot()
			for _, m := range []string{"unfinished", "longest"} {
				delete(got, m)
				delete(want, m)
			}
			if len(got) != len(want) {
				t.Fatalf("metrics %v, client-go's Typed records %v", got, want)
			}
			for k, w := range want {
				if g := got[k]; g < w-1e-9 || g > w+1e-9 {
					t.Errorf("metric %s = %v, client-go's Typed records %v", k, g, w)
				}
			}
		})
	}
}

// mapIdentity tells whether keyQueue replaced its map.
func mapIdentity[K comparable](q *keyQueue[K]) uintptr {
	q.mu.Lock()
	defer q.mu.Unlock()
	return reflect.ValueOf(q.keys).Pointer()
}

func TestKeyQueueGivesBackMemoryAfterABurst(t *testing.T) {
	q := newKeyQueue[types.NamespacedName]("", nil, nil)
	defer q.ShutDown()
	key := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: "default", Name: fmt.Sprint("ing-", i)}
	}
	before := mapIdentity(q)
	const burst = 10_000
	for i := range burst {
		q.Add(key(i))
	}
	// A key stays in process while the rest drains: the memory must come
	// back even though the queue never goes idle.
	held := getKey(t, q)
	// Every key is queued, so Get returns at once.
	for range burst / 2 {
		k, _ := q.Get()
		q.Done(k)
	}
	if mapIdentity(q) != before {
		t.Fatal("map replaced while half the burst was still queued")
	}
	for range burst/2 - 1 {
		k, _ := q.Get()
		q.Done(k)
	}
	q.mu.Lock()
	after, entries, fifoCap, peak := reflect.ValueOf(q.keys).Pointer(), len(q.keys), cap(q.fifo), q.peak
	q.mu.Unlock()
	if after == before {
		t.Fatalf("map not replaced after a %d-key burst drained", burst)
	}
	if entries != 1 || peak > shrinkPeak || fifoCap > shrinkPeak {
		t.Errorf("after the burst: %d entries, peak %d, FIFO capacity %d; want 1 entry and both small",
			entries, peak, fifoCap)
	}
	// Idle again: the map sized for the burst's tail goes too.
	partial := after
	q.Add(held)
	q.Done(held)
	if got := getKey(t, q); got != held {
		t.Errorf("Get = %v, want the held key re-added while it was processing", got)
	}
	q.Done(held)
	q.mu.Lock()
	idle, entries, fifoCap := reflect.ValueOf(q.keys).Pointer(), len(q.keys), cap(q.fifo)
	q.mu.Unlock()
	if idle == partial || entries != 0 || fifoCap != 0 {
		t.Errorf("idle after the burst: map replaced %v, %d entries, FIFO capacity %d; want replaced, 0, 0",
			idle != partial, entries, fifoCap)
	}
	// The queue still works.
	q.Add(held)
	if got := getKey(t, q); got != held {
		t.Errorf("Get = %v, want %v", got, held)
	}
	q.Done(held)
}

// Through the whole Queue: the burst's map is replaced once it is processed.
func TestQueueGivesBackMemoryAfterABurst(t *testing.T) {
	q := NewQueue(QueueOptions[types.NamespacedName]{Name: "burst", Metrics: NewMetrics(nil)})
	defer q.ShutDown()
	before := mapIdentity(q.keys)
	const burst = 10_000
	for i := range burst {
		q.Add(types.NamespacedName{Namespace: "default", Name: fmt.Sprint("ing-", i)})
	}
	for range burst {
		k, _ := q.Get() // every key is queued: Get returns at once
		q.Finish(k, nil)
	}
	if mapIdentity(q.keys) == before {
		t.Fatalf("map not replaced after a %d-key burst was processed", burst)
	}
	if got := metricValue(q.metrics.depth.WithLabelValues("burst")); got != 0 {
		t.Errorf("workqueue_depth = %v after the burst, want 0", got)
	}
	if got := metricValue(q.metrics.adds.WithLabelValues("burst")); got != burst {
		t.Errorf("workqueue_adds_total = %v, want %d", got, burst)
	}
}
