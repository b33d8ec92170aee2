package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// SyncFunc brings the world in line with the current state of key. It must be
// idempotent: it may run again for the same key at any time. Return nil when
// done, Terminal(err) when retrying cannot help, any other error to retry.
type SyncFunc[K comparable] func(ctx context.Context, key K) error

// Defaults for ControllerOptions fields left at their zero value.
const (
	DefaultWorkers     = 1
	DefaultStopTimeout = 10 * time.Second
)

// ControllerOptions configures a Controller. Zero values mean the defaults.
type ControllerOptions struct {
	// Workers is how many keys are synced in parallel. A key is never synced
	// by two workers at once.
	Workers int
	// StopTimeout bounds how long Stop waits for in-flight syncs when its
	// context has no earlier deadline.
	StopTimeout time.Duration
}

// Controller runs a SyncFunc over the keys of a Queue on a fixed number of
// workers, recovering panics and applying the queue's retry policy.
type Controller[K comparable] struct {
	queue       *Queue[K]
	sync        SyncFunc[K]
	workers     int
	stopTimeout time.Duration

	mu      sync.Mutex
	started bool
	// cancel cancels the context of every Sync; Stop calls it when its
	// deadline passes.
	cancel context.CancelFunc

	stopping  atomic.Bool   // set before the queue shuts down; workers skip queued keys
	stopOnce  sync.Once     // guards closing stopCh
	stopCh    chan struct{} // closed when stopping starts
	workersWG sync.WaitGroup
	done      chan struct{} // closed when every worker has returned
}

// NewController creates a Controller that syncs the keys of q with sync.
// The Controller owns q's shutdown: Stop shuts q down.
func NewController[K comparable](q *Queue[K], sync SyncFunc[K], opts ControllerOptions) *Controller[K] {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	return &Controller[K]{
		queue:       q,
		sync:        sync,
		workers:     opts.Workers,
		stopTimeout: opts.StopTimeout,
		stopCh:      make(chan struct{}),
		done:        make(chan struct{}),
	}
}

// Queue returns the queue the controller works on, for event handlers and
// other producers to add keys to.
func (c *Controller[K]) Queue() *Queue[K] { return c.queue }

// Start starts the workers and returns at once. ctx is the parent of the
// context passed to every Sync: cancelling it cancels in-flight syncs and
// stops the controller as Stop does (without waiting). It must live as long
// as the controller, so do not pass fx's OnStart context; use
// context.Background() and Stop. Start does nothing if the controller was
// already started or stopped.
func (c *Controller[K]) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.stopping.Load() {
		return
	}
	c.started = true
	workCtx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	for range c.workers {
		c.workersWG.Go(func() { c.work(workCtx) })
	}
	go func() {
		c.workersWG.Wait()
		close(c.done)
	}()
	go func() {
		select {
		case <-workCtx.Done():
			c.beginStop()
		case <-c.stopCh:
		}
	}()
}

// Stop stops intake and waits for the syncs in flight to return. Keys still
// queued or waiting for a retry are not synced (a controller cannot be
// restarted; the next process lists every object again). Stop waits until ctx is done or StopTimeout has passed, whichever
// comes first; then it cancels the in-flight syncs' context and returns an
// error without waiting for them.
// Stop is safe to call more than once and before Start.
func (c *Controller[K]) Stop(ctx context.Context) error {
	c.beginStop()
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if !started {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.stopTimeout)
	defer cancel()
	select {
	case <-c.done:
		c.cancel() // releases the context's resources; no sync is left to see it
		return nil
	case <-ctx.Done():
		c.cancel()
		return fmt.Errorf("stop controller %q: syncs still running at the deadline: %w",
			c.queue.name, ctx.Err())
	}
}

// beginStop makes workers skip queued keys and shuts the queue down, so
// idle workers return and busy ones return after their current key.
func (c *Controller[K]) beginStop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.stopping.Store(true)
		c.mu.Unlock()
		close(c.stopCh)
		c.queue.ShutDown()
	})
}

// work is one worker's loop.
func (c *Controller[K]) work(ctx context.Context) {
	for {
		key, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		if c.stopping.Load() {
			c.queue.discard(key)
			continue
		}
		// Nothing else happens per key: this loop is the framework's whole
		// overhead over client-go, and BenchmarkController keeps it small.
		c.queue.Finish(key, c.syncOne(ctx, key))
	}
}

// ErrPanic is wrapped by the error that replaces a panic recovered in a Sync,
// so a give-up callback can tell panics from ordinary failures.
var ErrPanic = errors.New("panic in sync")

// syncOne runs sync for key, turning a panic into an error so the key is
// retried under the queue's limit like any other failure.
func (c *Controller[K]) syncOne(ctx context.Context, key K) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.queue.metrics.incPanics(c.queue.name)
			c.queue.log.Error("Panic in sync; will retry", keyField(key),
				zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			if perr, ok := r.(error); ok {
				err = fmt.Errorf("%w: %w", ErrPanic, perr)
			} else {
				err = fmt.Errorf("%w: %v", ErrPanic, r)
			}
		}
	}()
	return c.sync(ctx, key)
}
