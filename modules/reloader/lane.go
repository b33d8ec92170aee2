package reloader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// laneKey is the single key of a push lane's queue: it stands for "bring the store up to date", so any
// number of changes coalesce into one push.
type laneKey struct{}

// store is the desired content of one data-plane store (a shared dict) as a push lane carries it: the
// endpoint lists or the certificates. Every method but send is called with the lane's lock held.
type store[B any] interface {
	// take returns what brings the data plane up to date (full: everything), and false when nothing
	// needs sending.
	take(full bool) (batch B, send bool)
	// send pushes batch to the data plane; the lock is not held.
	send(ctx context.Context, a Applier, batch B, full bool) error
	// names lists the entries batch carries, to follow what the store had no room for.
	names(batch B) []string
	// failed takes back a batch that did not reach the data plane, so the next push carries it again.
	failed(batch B)
	// stored records a batch that the data plane took; partial, when set, names what did not fit.
	stored(batch B, partial *nginx.DictFullError)
	// complete reports whether a full push makes the data plane's store complete; false while it lacks
	// something that only a later push brings.
	complete() bool
}

// refusalTaker is a store whose pushes the data plane can refuse in part (routes): it hears which
// entries were refused, before stored. Called with the lane's lock held.
type refusalTaker interface {
	refused(map[nginx.Hostname]nginx.RouteRefusal)
}

// laneOptions configure a push lane.
type laneOptions struct {
	// name is the lane's queue name; what names its content in logs ("endpoint", "certificate").
	name, what string
	// qps and burst bound the lane's retries.
	qps   float64
	burst int
	// room follows what the store had no room for.
	room *dictRoom
	// updates counts pushes by result; notStored exports what room follows, by dict.
	updates   *prometheus.CounterVec
	notStored *prometheus.GaugeVec
}

// pushLane pushes one store's changes to the data plane without a reload, on a queue and worker of its
// own. After each start of the data plane it pushes everything (a fresh instance holds nothing), then
// what changed, batched; a failed push is retried with what changed meanwhile.
type pushLane[B any] struct {
	opts      laneOptions
	applier   Applier
	log       *zap.Logger
	ctrl      *pipeline.Controller[laneKey]
	updates   *prometheus.CounterVec
	notStored prometheus.Gauge

	// mu guards what follows and the store's state.
	mu    sync.Mutex
	store store[B]
	// fresh is true once the data plane has reported a start: pushes before that would only fail.
	fresh bool
	// full asks the next push to send everything.
	full bool
	// fullFor is the start count that the pending full push serves; filledFor the one the last successful
	// full push served; pushedFor the one for which the store is complete (see store.complete). Ready
	// requires pushedFor to match the data plane's current start.
	fullFor, filledFor, pushedFor uint64
	room                          *dictRoom
}

// Pauses before a push lane tries again after exhausting its retries.
const lanePause = 30 * time.Second

func newPushLane[B any](opts laneOptions, s store[B], a Applier, metrics *pipeline.Metrics, log *zap.Logger) *pushLane[B] {
	l := &pushLane[B]{
		opts: opts, applier: a, log: log, store: s, room: opts.room,
		updates: opts.updates, notStored: opts.notStored.WithLabelValues(opts.room.dict),
	}
	for _, res := range []string{"success", "failure", "dict_full", "refused"} {
		opts.updates.WithLabelValues(res)
	}
	q := pipeline.NewQueue(pipeline.QueueOptions[laneKey]{
		Name: opts.name, Metrics: metrics, Logger: log,
		BaseDelay: 50 * time.Millisecond, MaxDelay: 10 * time.Second, QPS: opts.qps, Burst: opts.burst,
		MaxRetries: ptr.To(20),
		// The lane's one key carries every pending change: after the retries it keeps trying, slowly, so
		// NGINX never stays on stale content because a push failed for a while.
		OnGiveUp: func(k laneKey, err error) {
			log.Error(opts.what+" push keeps failing; retrying", zap.Duration("after", lanePause), zap.Error(err))
			l.ctrl.Queue().AddAfter(k, lanePause)
		},
	})
	l.ctrl = pipeline.NewController(q, l.push, pipeline.ControllerOptions{Workers: 1})
	return l
}

// change runs fn (which changes the store; nil for none) under the lane's lock and schedules a push;
// with full, one of everything.
func (l *pushLane[B]) change(fn func(), full bool) {
	l.mu.Lock()
	if fn != nil {
		fn()
	}
	l.full = l.full || full
	l.mu.Unlock()
	l.ctrl.Queue().Add(laneKey{})
}

// started records a fresh start of the data plane (its start count): it holds nothing, so everything is
// pushed.
func (l *pushLane[B]) started(starts uint64) {
	l.change(func() { l.fresh, l.fullFor = true, starts }, true)
}

// completeFor returns the data-plane start for which the store is complete.
func (l *pushLane[B]) completeFor() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pushedFor
}

// push is the lane's sync: one batched push of what changed, or of everything.
func (l *pushLane[B]) push(ctx context.Context, _ laneKey) error {
	l.mu.Lock()
	if !l.fresh {
		l.mu.Unlock()
		return nil // the first start pushes everything
	}
	full, fullFor := l.full, l.fullFor
	if full && !l.store.complete() {
		// A full push now would replace the data plane's store with an incomplete one (the first start
		// reports before the first model arrived): requests would find nothing instead of waiting for
		// it. The change that completes the store pushes everything.
		l.mu.Unlock()
		return nil
	}
	l.full = false
	batch, send := l.store.take(full)
	if !send {
		l.markComplete()
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	err := l.store.send(ctx, l.applier, batch, full)
	partial := dictFull(err)
	refused := nginx.RefusedRoutes(err)
	if err != nil && partial == nil && refused == nil {
		l.updates.WithLabelValues("failure").Inc()
		l.mu.Lock()
		l.full = l.full || full
		l.store.failed(batch)
		l.mu.Unlock()
		return fmt.Errorf("push %ss: %w", l.opts.what, err)
	}
	// A full dict is a partial success: what fit is live, and the same push would store the same
	// content. It is not retried; what did not fit goes out again when it changes (a removal may have
	// made room meanwhile), and with the next full push.
	sent := l.store.names(batch)
	l.mu.Lock()
	if r, ok := l.store.(refusalTaker); ok && refused != nil {
		// Also a partial success: the refused hosts keep what they had, and the same entries would be
		// refused again. The store reports them, so that what wrote them changes.
		r.refused(refused)
	}
	l.store.stored(batch, partial)
	if full {
		l.filledFor = max(l.filledFor, fullFor)
	}
	l.markComplete()
	changed := l.room.pushed(full, sent, partial)
	if changed {
		l.notStored.Set(float64(len(l.room.notStored)))
		l.room.log(l.log, partial)
	}
	l.mu.Unlock()
	if partial != nil {
		l.updates.WithLabelValues("dict_full").Inc()
	}
	if refused != nil {
		l.updates.WithLabelValues("refused").Inc()
	}
	if partial == nil && refused == nil {
		l.updates.WithLabelValues("success").Inc()
	}
	l.log.Debug(l.opts.what+"s pushed", zap.Int("entries", len(sent)), zap.Bool("full", full))
	return nil
}

// markComplete records, after a push (or none needed), that the data plane holds the whole store since
// the last full push, unless the store says something is still missing. l.mu is held.
func (l *pushLane[B]) markComplete() {
	if l.store.complete() {
		l.pushedFor = max(l.pushedFor, l.filledFor)
	}
}
