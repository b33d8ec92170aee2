package pipeline

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"unsafe"

	"go.uber.org/zap"
)

// TopicOption configures a Topic.
type TopicOption func(*topicConfig)

type topicConfig struct {
	log     *zap.Logger
	metrics *Metrics
}

// WithTopicLogger sets the logger that reports panics in subscribers.
func WithTopicLogger(l *zap.Logger) TopicOption {
	return func(c *topicConfig) {
		if l != nil {
			c.log = l
		}
	}
}

// WithTopicMetrics counts panics in subscribers in
// ingress_reactor_pipeline_panics_total under the topic's name.
func WithTopicMetrics(m *Metrics) TopicOption {
	return func(c *topicConfig) { c.metrics = m }
}

// maxRetainedBytes is the size above which a subscriber gives its drained
// buffer back to the garbage collector instead of reusing it, so one burst
// does not pin memory for the life of the process. A subscriber keeps two
// buffers (the one it drains and the one Publish fills); a bound of 4,096
// values kept up to a megabyte per subscriber of a topic of large values
// (an EndpointsChange is about 120 bytes), which a start's burst left behind.
const maxRetainedBytes = 16 << 10

// maxRetained returns how many values of T a subscriber keeps room for: those
// that fit in maxRetainedBytes, and at least 64.
func maxRetained[T any]() int {
	var v T
	return max(64, maxRetainedBytes/max(1, int(unsafe.Sizeof(v))))
}

// Topic is a typed fan-out: every value published reaches every subscriber,
// in publish order, on that subscriber's own goroutine. Each subscriber has
// its own unbounded buffer, so a slow subscriber never blocks the publisher
// or the other subscribers and never misses a value. Subscribers should be
// quick (typically: enqueue a key into their own Queue); a subscriber that is
// slower than the publish rate for good grows its buffer without bound.
type Topic[T any] struct {
	name    string
	log     *zap.Logger
	metrics *Metrics

	mu     sync.Mutex // serialises Publish, so all subscribers see one order
	subs   []*subscriber[T]
	closed bool
	wg     sync.WaitGroup // subscriber goroutines
}

// NewTopic creates a Topic; name labels its logs and panic metric.
func NewTopic[T any](name string, opts ...TopicOption) *Topic[T] {
	cfg := topicConfig{log: zap.NewNop()}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.metrics.initSeries(name)
	t := &Topic[T]{
		name:    name,
		log:     cfg.log.With(zap.String("topic", name)),
		metrics: cfg.metrics,
	}
	cfg.metrics.watchTopic(name, t.pending)
	return t
}

// pending counts the values published and not yet taken by the subscribers' goroutines.
func (t *Topic[T]) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.subs {
		s.mu.Lock()
		n += len(s.pending)
		s.mu.Unlock()
	}
	return n
}

// Name returns the topic's name.
func (t *Topic[T]) Name() string { return t.name }

// Publish hands v to every current subscriber and returns without waiting
// for any of them. After Close it does nothing.
func (t *Topic[T]) Publish(v T) {
	t.mu.Lock()
	for _, s := range t.subs {
		s.push(v)
	}
	t.mu.Unlock()
}

// Flush waits until every subscriber has returned from fn for every value published before the call, or
// until a subscriber is cancelled or ctx ends. A producer that announces "everything so far has been
// delivered" through another channel calls it first, so no consumer hears the announcement before the
// values it covers. Do not call it from a subscriber function of this topic: it would wait for itself.
func (t *Topic[T]) Flush(ctx context.Context) error {
	t.mu.Lock()
	subs := slices.Clone(t.subs)
	done := make([]<-chan struct{}, len(subs))
	for i, s := range subs {
		done[i] = s.deliveredAll()
	}
	t.mu.Unlock()
	for i, s := range subs {
		select {
		case <-done[i]:
		case <-s.quit:
		case <-ctx.Done():
			return fmt.Errorf("flush topic %s: %w", t.name, ctx.Err())
		}
	}
	return nil
}

// Subscribe calls fn with every value published from now on, in order, on a
// goroutine of its own. A panic in fn is recovered, logged and counted, and
// delivery goes on with the next value. The returned cancel stops delivery:
// fn is not called again after the call in progress, if any; values not yet
// delivered are discarded. cancel does not wait (fn may call it) and is safe
// to call more than once. After Close, Subscribe returns a no-op cancel and fn
// is never called.
func (t *Topic[T]) Subscribe(fn func(T)) (cancel func()) {
	s := &subscriber[T]{
		topic: t,
		fn:    fn,
		wake:  make(chan struct{}, 1),
		quit:  make(chan struct{}),
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return func() {}
	}
	t.subs = append(t.subs, s)
	t.wg.Go(s.run)
	return func() {
		t.mu.Lock()
		t.subs = slices.DeleteFunc(t.subs, func(o *subscriber[T]) bool { return o == s })
		t.mu.Unlock()
		s.stop()
	}
}

// Close cancels every subscription and waits until no subscriber function is
// running. Do not call it from a subscriber function: it would wait for
// itself. Publish and Subscribe after Close do nothing.
func (t *Topic[T]) Close() {
	t.mu.Lock()
	subs := t.subs
	t.subs = nil
	t.closed = true
	t.mu.Unlock()
	t.metrics.forgetTopic(t.name)
	for _, s := range subs {
		s.stop()
	}
	t.wg.Wait()
}

// subscriber is one subscription: a buffer filled by Publish and drained by
// its own goroutine.
type subscriber[T any] struct {
	topic *Topic[T]
	fn    func(T)

	mu      sync.Mutex
	pending []T // published, not yet taken by run
	// pushed and delivered count values, for Flush; flushes wait for delivered to reach their mark.
	pushed, delivered uint64
	flushes           []flushWait

	wake     chan struct{} // capacity 1: "pending may be non-empty"
	quit     chan struct{}
	quitOnce sync.Once
}

// push appends v to the buffer and wakes the goroutine if it sleeps.
func (s *subscriber[T]) push(v T) {
	s.mu.Lock()
	s.pending = append(s.pending, v)
	s.pushed++
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is already pending; it will see v too
	}
}

// flushWait is one Flush waiting for a subscriber.
type flushWait struct {
	mark uint64
	done chan struct{}
}

// deliveredAll returns a channel closed once every value pushed so far has been delivered.
func (s *subscriber[T]) deliveredAll() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	done := make(chan struct{})
	if s.delivered >= s.pushed {
		close(done)
		return done
	}
	s.flushes = append(s.flushes, flushWait{mark: s.pushed, done: done})
	return done
}

// markDelivered counts n more values delivered and releases the flushes they complete.
func (s *subscriber[T]) markDelivered(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delivered += uint64(n)
	s.flushes = slices.DeleteFunc(s.flushes, func(w flushWait) bool {
		if w.mark <= s.delivered {
			close(w.done)
			return true
		}
		return false
	})
}

func (s *subscriber[T]) stop() {
	s.quitOnce.Do(func() { close(s.quit) })
}

// run drains the buffer in batches, swapping it with a spare one so steady
// publishing allocates nothing.
func (s *subscriber[T]) run() {
	var spare []T
	keep := maxRetained[T]()
	for {
		select {
		case <-s.quit:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		batch := s.pending
		s.pending = spare
		s.mu.Unlock()
		for _, v := range batch {
			select {
			case <-s.quit:
				return
			default:
			}
			s.deliver(v)
		}
		s.markDelivered(len(batch))
		clear(batch) // drop references so delivered values can be collected
		if cap(batch) > keep {
			batch = nil
		}
		spare = batch[:0]
	}
}

// deliver calls fn with v, containing a panic.
func (s *subscriber[T]) deliver(v T) {
	defer func() {
		if r := recover(); r != nil {
			s.topic.metrics.incPanics(s.topic.name)
			s.topic.log.Error("Panic in topic subscriber; continuing with the next value",
				zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
	}()
	s.fn(v)
}
