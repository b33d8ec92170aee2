package pipeline

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// keyQueue is the innermost layer of a Queue: the de-duplicating FIFO that
// client-go's delaying and rate-limiting layers wrap. It behaves as
// client-go's workqueue.Typed and emits the same workqueue_* metrics, but
// keeps all it knows about a key in one map entry instead of four maps (the
// dirty and processing sets and the metrics' add and start times), and it
// gives that memory back after a burst. Go maps never shrink: a Typed that
// once held every Ingress of a large cluster keeps that size for good.
type keyQueue[K comparable] struct {
	mu sync.Mutex
	// ready wakes Get: a key was queued, or the queue shuts down.
	ready *sync.Cond
	// idle wakes ShutDownWithDrain: no key is processing any more, or
	// ShutDown cancelled the drain.
	idle *sync.Cond

	// keys holds every key that is dirty or processing; a key in neither
	// state has no entry.
	keys map[K]keyState
	// peak is the most entries keys has held since it was last replaced.
	peak int
	// fifo[head:] are the queued keys in order: the dirty ones not
	// processing. Slots before head are zeroed.
	fifo []K
	head int
	// processing counts the keys handed out by Get and not yet Done.
	processing int

	shuttingDown bool
	drain        bool

	// metrics is nil when the queue reports none; then the clock is never
	// read for them.
	metrics *keyQueueMetrics
	clock   clock.WithTicker
	// epoch is the origin of keyState's times, kept as int64 nanoseconds
	// rather than 24-byte time.Time values.
	epoch time.Time

	stop     chan struct{}
	stopOnce sync.Once
	loop     sync.WaitGroup
}

// keyState is what keyQueue knows about one key.
type keyState struct {
	// dirty means the key must be processed (again). A dirty key that is
	// not processing is in the FIFO; one that is processing is queued when
	// it is Done.
	dirty bool
	// processing means Get handed the key out and Done was not called yet.
	processing bool
	// addedAt is when the key became dirty, startedAt when Get handed it
	// out, both in nanoseconds since epoch and only kept with metrics.
	addedAt   int64
	startedAt int64
}

// keyQueueMetrics are the workqueue metrics of client-go's Typed, from the
// same provider.
type keyQueueMetrics struct {
	depth          workqueue.GaugeMetric
	adds           workqueue.CounterMetric
	latency        workqueue.HistogramMetric
	workDuration   workqueue.HistogramMetric
	unfinishedWork workqueue.SettableGaugeMetric
	longestRunning workqueue.SettableGaugeMetric
}

const (
	// shrinkPeak is the map size above which a drained keyQueue replaces
	// its map and FIFO with small ones. Below it the memory is not worth
	// the reallocation.
	shrinkPeak = 1024
	// shrinkRatio: the map is replaced once it holds at most
	// peak/shrinkRatio entries, so a burst's memory is given back even if
	// a trickle of keys never lets the queue go fully idle.
	shrinkRatio = 16
	// idlePeak is the map size above which an idle keyQueue (no key queued
	// or processing) replaces its map with an empty one.
	idlePeak = 64
	// unfinishedWorkPeriod is how often the unfinished-work gauges are
	// refreshed, as client-go does.
	unfinishedWorkPeriod = 500 * time.Millisecond
)

var _ workqueue.TypedInterface[string] = &keyQueue[string]{}

// newKeyQueue creates a keyQueue. Like client-go, it reports metrics only
// when both name and provider are set, and only then starts the goroutine
// that refreshes the unfinished-work gauges until shutdown.
func newKeyQueue[K comparable](name string, provider workqueue.MetricsProvider, clk clock.WithTicker) *keyQueue[K] {
	if clk == nil {
		clk = clock.RealClock{}
	}
	q := &keyQueue[K]{
		keys:  map[K]keyState{},
		clock: clk,
		epoch: clk.Now(),
		stop:  make(chan struct{}),
	}
	q.ready = sync.NewCond(&q.mu)
	q.idle = sync.NewCond(&q.mu)
	if name != "" && provider != nil {
		q.metrics = &keyQueueMetrics{
			depth:          provider.NewDepthMetric(name),
			adds:           provider.NewAddsMetric(name),
			latency:        provider.NewLatencyMetric(name),
			workDuration:   provider.NewWorkDurationMetric(name),
			unfinishedWork: provider.NewUnfinishedWorkSecondsMetric(name),
			longestRunning: provider.NewLongestRunningProcessorSecondsMetric(name),
		}
		q.loop.Go(q.reportUnfinishedWork)
	}
	return q
}

// Add marks key as needing processing. A key already waiting is not queued
// twice; a key being processed is queued again when it is Done. After
// shutdown Add does nothing.
func (q *keyQueue[K]) Add(key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	st := q.keys[key]
	if st.dirty {
		return
	}
	st.dirty = true
	if q.metrics != nil {
		q.metrics.adds.Inc()
		q.metrics.depth.Inc()
		st.addedAt = q.now()
	}
	q.keys[key] = st
	q.peak = max(q.peak, len(q.keys))
	if st.processing {
		return
	}
	q.push(key)
	q.ready.Signal()
}

// Len reports how many keys are queued (not those being processed).
func (q *keyQueue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued()
}

// Get blocks until a key is queued and hands it out, oldest first; it
// reports shutdown once the queue is shut down and no key is queued. The
// caller must call Done with the key.
func (q *keyQueue[K]) Get() (key K, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.queued() == 0 && !q.shuttingDown {
		q.ready.Wait()
	}
	if q.queued() == 0 {
		return key, true
	}
	key = q.pop()
	st := q.keys[key]
	st.dirty = false
	st.processing = true
	q.processing++
	if q.metrics != nil {
		now := q.now()
		q.metrics.depth.Dec()
		q.metrics.latency.Observe(seconds(now - st.addedAt))
		st.addedAt = 0
		st.startedAt = now
	}
	q.keys[key] = st
	return key, false
}

// Done marks key, which Get handed out, as processed, and queues it again if
// it was added meanwhile. Done for a key that is not being processed does
// nothing (client-go's Typed would queue such a key a second time if it
// were waiting).
func (q *keyQueue[K]) Done(key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st, ok := q.keys[key]
	if !ok || !st.processing {
		return
	}
	st.processing = false
	q.processing--
	if q.metrics != nil {
		q.metrics.workDuration.Observe(seconds(q.now() - st.startedAt))
		st.startedAt = 0
	}
	if st.dirty {
		q.keys[key] = st
		q.push(key)
		q.ready.Signal()
	} else {
		delete(q.keys, key)
		q.maybeShrink()
	}
	if q.processing == 0 {
		q.idle.Broadcast()
	}
}

// ShutDown makes Add ignore new keys; Get still hands out the queued keys and
// then reports shutdown. It cancels a ShutDownWithDrain that is waiting.
func (q *keyQueue[K]) ShutDown() {
	q.stopLoop()
	q.mu.Lock()
	q.drain = false
	q.shuttingDown = true
	q.ready.Broadcast()
	q.idle.Broadcast()
	q.mu.Unlock()
	q.loop.Wait()
}

// ShutDownWithDrain is ShutDown that also waits until no key handed out by
// Get is still being processed, or until ShutDown is called.
func (q *keyQueue[K]) ShutDownWithDrain() {
	q.stopLoop()
	q.mu.Lock()
	q.drain = true
	q.shuttingDown = true
	q.ready.Broadcast()
	for q.processing > 0 && q.drain {
		q.idle.Wait()
	}
	q.mu.Unlock()
	q.loop.Wait()
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain was called.
func (q *keyQueue[K]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

func (q *keyQueue[K]) stopLoop() { q.stopOnce.Do(func() { close(q.stop) }) }

// queued is the FIFO's length. Callers hold mu.
func (q *keyQueue[K]) queued() int { return len(q.fifo) - q.head }

// push appends key to the FIFO. When the backing array is full and its
// first half is already consumed, the live keys move to the front instead
// of growing it. Callers hold mu.
func (q *keyQueue[K]) push(key K) {
	if len(q.fifo) == cap(q.fifo) && q.head > 0 && q.head >= len(q.fifo)/2 {
		n := copy(q.fifo, q.fifo[q.head:])
		clear(q.fifo[n:])
		q.fifo = q.fifo[:n]
		q.head = 0
	}
	q.fifo = append(q.fifo, key)
}

// pop removes and returns the oldest queued key. Callers hold mu and know
// the FIFO is not empty.
func (q *keyQueue[K]) pop() K {
	key := q.fifo[q.head]
	var zero K
	q.fifo[q.head] = zero
	q.head++
	if q.head == len(q.fifo) {
		q.fifo = q.fifo[:0]
		q.head = 0
	}
	return key
}

// maybeShrink replaces the map and the FIFO with right-sized copies once a
// burst that grew them past shrinkPeak has mostly drained, and once more when
// the queue is idle, so their memory goes back to the heap. Callers hold mu.
func (q *keyQueue[K]) maybeShrink() {
	switch {
	case q.peak > shrinkPeak && len(q.keys) <= q.peak/shrinkRatio:
	case q.peak > idlePeak && len(q.keys) == 0:
		// The first case left a map sized for peak/shrinkRatio keys.
	default:
		return
	}
	keys := make(map[K]keyState, len(q.keys))
	for k, st := range q.keys {
		keys[k] = st
	}
	q.keys = keys
	q.peak = len(keys)
	var fifo []K
	if n := q.queued(); n > 0 {
		fifo = make([]K, n)
		copy(fifo, q.fifo[q.head:])
	}
	q.fifo = fifo
	q.head = 0
}

// reportUnfinishedWork refreshes the unfinished-work gauges until shutdown.
func (q *keyQueue[K]) reportUnfinishedWork() {
	t := q.clock.NewTicker(unfinishedWorkPeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			q.updateUnfinishedWork()
		case <-q.stop:
			return
		}
	}
}

// updateUnfinishedWork sets the total and the longest time the keys being
// processed have been running. It stops scanning the map once it has seen
// every processing key; there are only as many as workers.
func (q *keyQueue[K]) updateUnfinishedWork() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	var total, longest float64
	if q.processing > 0 {
		now := q.now()
		seen := 0
		for _, st := range q.keys {
			if !st.processing {
				continue
			}
			age := seconds(now - st.startedAt)
			total += age
			longest = max(longest, age)
			if seen++; seen == q.processing {
				break
			}
		}
	}
	q.metrics.unfinishedWork.Set(total)
	q.metrics.longestRunning.Set(longest)
}

// now is the queue clock's time in nanoseconds since epoch.
func (q *keyQueue[K]) now() int64 { return int64(q.clock.Since(q.epoch)) }

func seconds(nanos int64) float64 { return time.Duration(nanos).Seconds() }
