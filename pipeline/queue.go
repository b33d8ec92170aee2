package pipeline

import (
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Defaults for QueueOptions fields left at their zero value.
const (
	DefaultBaseDelay  = 5 * time.Millisecond
	DefaultMaxDelay   = 5 * time.Minute
	DefaultQPS        = 10.0
	DefaultBurst      = 100
	DefaultMaxRetries = 10
)

// QueueOptions configures a Queue. Zero values (nil for MaxRetries) mean the defaults above.
type QueueOptions[K comparable] struct {
	// Name labels the queue's metrics and log lines. Keep it unique per
	// Metrics: two queues with one name share their metric series.
	// Empty means "unnamed".
	Name string
	// BaseDelay is the first retry delay of a failing item; each further
	// failure doubles it, up to MaxDelay.
	BaseDelay time.Duration
	// MaxDelay caps the per-item backoff.
	MaxDelay time.Duration
	// QPS and Burst shape a token bucket shared by all retries of the queue,
	// so many failing items cannot flood their target. math.Inf(1) disables it.
	QPS   float64
	Burst int
	// MaxRetries is how many times a failing item is retried before it is
	// dropped: an item is attempted at most MaxRetries+1 times in a row, so 0
	// (or less) means a single attempt, as --reload-retries=0 does. Nil means
	// DefaultMaxRetries.
	MaxRetries *int
	// OnGiveUp, if set, is called (on the worker goroutine) with an item that
	// is dropped after exhausting its retries, and its last error. Modules
	// use it to emit a Kubernetes Event. It must not block for long.
	OnGiveUp func(key K, lastErr error)
	// Metrics receives the workqueue_* metrics and the dropped and panic
	// counters. Nil records nothing.
	Metrics *Metrics
	// Logger receives the queue's logs. Nil discards them.
	Logger *zap.Logger
	// Clock drives delays and backoff; tests pass a fake clock. Nil is the
	// real clock.
	Clock clock.WithTicker
}

func (o QueueOptions[K]) withDefaults() QueueOptions[K] {
	if o.Name == "" {
		o.Name = "unnamed"
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = DefaultBaseDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.MaxDelay < o.BaseDelay {
		o.MaxDelay = o.BaseDelay
	}
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	retries := DefaultMaxRetries
	if o.MaxRetries != nil {
		retries = max(*o.MaxRetries, 0)
	}
	o.MaxRetries = &retries
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Queue is a typed, de-duplicating, rate-limited work queue built on
// client-go's TypedRateLimitingInterface, with a retry limit. Its innermost
// FIFO is our own keyQueue, which gives its memory back after a burst.
//
// A key added several times before a worker takes it is processed once. A key
// added while a worker processes it is processed again after that worker
// finishes, never by two workers at once. Failed keys are retried after
// max(per-key exponential backoff, shared token bucket delay); a key that
// fails more than MaxRetries times in a row is dropped.
type Queue[K comparable] struct {
	name       string
	wq         workqueue.TypedRateLimitingInterface[K]
	keys       *keyQueue[K] // wq's innermost layer
	maxRetries int
	onGiveUp   func(K, error)
	metrics    *Metrics
	log        *zap.Logger
}

// NewQueue creates a Queue. Call ShutDown (or stop its Controller) to release
// its goroutines.
func NewQueue[K comparable](opts QueueOptions[K]) *Queue[K] {
	opts = opts.withDefaults()
	// client-go only emits metrics for named queues; leaving the name empty
	// without Metrics also keeps a globally set provider away.
	var (
		metricsName string
		provider    workqueue.MetricsProvider
	)
	if opts.Metrics != nil {
		metricsName = opts.Name
		provider = workqueueProvider{m: opts.Metrics}
	}
	opts.Metrics.initSeries(opts.Name)
	// keys replaces client-go's Typed under its delaying layer. Given a
	// queue, that layer creates only its retries metric from the provider,
	// so no workqueue metric is counted twice.
	keys := newKeyQueue[K](metricsName, provider, opts.Clock)
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[K]{
		Name:            metricsName,
		MetricsProvider: provider,
		Clock:           opts.Clock,
		Queue:           keys,
	})
	wq := workqueue.NewTypedRateLimitingQueueWithConfig(newRateLimiter(opts),
		workqueue.TypedRateLimitingQueueConfig[K]{Clock: opts.Clock, DelayingQueue: delaying})
	return &Queue[K]{
		name:       opts.Name,
		wq:         wq,
		keys:       keys,
		maxRetries: *opts.MaxRetries,
		onGiveUp:   opts.OnGiveUp,
		metrics:    opts.Metrics,
		log:        opts.Logger.With(zap.String("queue", opts.Name)),
	}
}

// Name returns the queue's name as used in metrics and logs.
func (q *Queue[K]) Name() string { return q.name }

// Add enqueues key now, unless it is already waiting.
func (q *Queue[K]) Add(key K) { q.wq.Add(key) }

// AddAfter enqueues key once d has passed (now if d <= 0).
func (q *Queue[K]) AddAfter(key K, d time.Duration) { q.wq.AddAfter(key, d) }

// AddRateLimited enqueues key after its backoff and the queue's token bucket
// allow, and counts it as a retry of key.
func (q *Queue[K]) AddRateLimited(key K) { q.wq.AddRateLimited(key) }

// Forget clears key's failure history, so its next failure starts the
// backoff and retry count from scratch. It does not remove a waiting key.
func (q *Queue[K]) Forget(key K) { q.wq.Forget(key) }

// NumRequeues reports how many times key has been retried since it last
// succeeded or was forgotten.
func (q *Queue[K]) NumRequeues(key K) int { return q.wq.NumRequeues(key) }

// Len reports how many keys are ready to be processed (not those waiting for
// a delay). For information only.
func (q *Queue[K]) Len() int { return q.wq.Len() }

// ShutDown makes the queue ignore new keys; Get hands out the keys already
// queued and then reports shutdown.
func (q *Queue[K]) ShutDown() { q.wq.ShutDown() }

// ShutDownWithDrain is ShutDown that also waits until every key handed out
// by Get has been finished.
func (q *Queue[K]) ShutDownWithDrain() { q.wq.ShutDownWithDrain() }

// ShuttingDown reports whether ShutDown has been called.
func (q *Queue[K]) ShuttingDown() bool { return q.wq.ShuttingDown() }

// Get blocks until a key is ready and returns it; shutdown is true when the
// queue is shut down and empty. Every key returned must be passed to Finish
// exactly once. Controller does this; use Get only for a custom worker loop.
func (q *Queue[K]) Get() (key K, shutdown bool) { return q.wq.Get() }

// Finish records the outcome of processing key, which Get returned, and
// marks it done (re-queueing it if it was added meanwhile):
//   - nil: key's failure history is cleared;
//   - a Terminal error: logged, history cleared, never retried;
//   - any other error: key is retried with backoff, or, once it has been
//     retried MaxRetries times, dropped: logged once with err, counted in
//     ingress_reactor_pipeline_dropped_total, and passed to OnGiveUp.
//
// Errors that arrive while the queue shuts down are logged and not retried.
func (q *Queue[K]) Finish(key K, err error) {
	defer q.wq.Done(key)
	if err == nil {
		q.wq.Forget(key)
		return
	}
	if IsTerminal(err) {
		q.wq.Forget(key)
		q.log.Warn("Sync failed with a terminal error; not retrying", keyField(key), zap.Error(err))
		return
	}
	if q.wq.ShuttingDown() {
		q.wq.Forget(key)
		q.log.Info("Sync failed while shutting down; not retrying", keyField(key), zap.Error(err))
		return
	}
	retries := q.wq.NumRequeues(key)
	if retries < q.maxRetries {
		q.log.Debug("Sync failed; retrying with backoff", keyField(key),
			zap.Int("attempt", retries+1), zap.Error(err))
		q.wq.AddRateLimited(key)
		return
	}
	q.wq.Forget(key)
	q.metrics.incDropped(q.name)
	q.log.Error("Sync failed too many times; giving up", keyField(key),
		zap.Int("attempts", retries+1), zap.Error(err))
	q.giveUp(key, err)
}

// discard marks key done without recording an outcome: a stopping
// Controller uses it for keys it will not process.
func (q *Queue[K]) discard(key K) { q.wq.Done(key) }

// giveUp runs the OnGiveUp callback, containing a panic in it.
func (q *Queue[K]) giveUp(key K, err error) {
	if q.onGiveUp == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			q.metrics.incPanics(q.name)
			q.log.Error("Panic in give-up callback", keyField(key),
				zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
	}()
	q.onGiveUp(key, err)
}

// keyField logs a key as a string when it has a String method (for example
// types.NamespacedName), otherwise as a structured value.
func keyField[K comparable](key K) zap.Field {
	if s, ok := any(key).(fmt.Stringer); ok {
		return zap.Stringer("key", s)
	}
	return zap.Any("key", key)
}

// newRateLimiter combines the per-item exponential backoff with the shared
// token bucket: a retry waits for whichever is longer.
func newRateLimiter[K comparable](opts QueueOptions[K]) workqueue.TypedRateLimiter[K] {
	return workqueue.NewTypedMaxOfRateLimiter[K](
		workqueue.NewTypedItemExponentialFailureRateLimiter[K](opts.BaseDelay, opts.MaxDelay),
		&bucketLimiter[K]{limiter: rate.NewLimiter(rate.Limit(opts.QPS), opts.Burst), clock: opts.Clock},
	)
}

// bucketLimiter is the queue-wide token bucket. It does what client-go's
// TypedBucketRateLimiter does, but reads time from the queue's clock instead
// of the wall clock, so a fake clock controls it in tests like every other
// delay of the queue.
type bucketLimiter[K comparable] struct {
	limiter *rate.Limiter
	clock   clock.PassiveClock
}

var _ workqueue.TypedRateLimiter[string] = &bucketLimiter[string]{}

// When takes one token and returns how long to wait for it.
func (b *bucketLimiter[K]) When(K) time.Duration {
	now := b.clock.Now()
	return b.limiter.ReserveN(now, 1).DelayFrom(now)
}

// NumRequeues is always 0: the bucket counts no item's failures.
func (b *bucketLimiter[K]) NumRequeues(K) int { return 0 }

// Forget does nothing: the bucket keeps no per-item state.
func (b *bucketLimiter[K]) Forget(K) {}
