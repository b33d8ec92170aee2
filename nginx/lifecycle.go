package nginx

import (
	"fmt"
	"time"
)

// phase is where the running NGINX master is in its life, as the Runtime sees it.
type phase int

const (
	// phaseGone: no master runs (none started yet, it exited, the Process gave up, or it was stopped).
	phaseGone phase = iota
	// phaseStarting: a master was started and has not answered yet. It may still be loading its
	// configuration, before NGINX installs its signal handlers: a SIGHUP would kill it.
	phaseStarting
	// phaseServing: the master answered and OnReady returned; it can be reloaded.
	phaseServing
	// phaseReloading: the master was sent SIGHUP and the new configuration is being confirmed.
	phaseReloading
	// phaseStuck: the start did not answer in time, or its workers are lost: only a new start helps.
	phaseStuck
)

func (p phase) String() string {
	switch p {
	case phaseGone:
		return "gone"
	case phaseStarting:
		return "starting"
	case phaseServing:
		return "serving"
	case phaseReloading:
		return "reloading"
	case phaseStuck:
		return "stuck"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// eventKind is what happened to a master.
type eventKind int

const (
	// evStarted: the Process started master number starts, at.
	evStarted eventKind = iota
	// evAnswered: start number starts answered its health check and OnReady returned.
	evAnswered
	// evWorkersLost: the master of start number starts runs on without workers (its log or its
	// process tree says so).
	evWorkersLost
	// evTick: time is at; a start that has not answered may count as stuck now.
	evTick
	// evReloadSent: the master of start number starts was sent SIGHUP.
	evReloadSent
	// evReloadDone: the reload of start number starts was confirmed or failed; the master serves on.
	evReloadDone
	// evReplaced: the stuck master of start number starts was killed so that a new start replaces it.
	evReplaced
	// evExited: the master of start number starts exited.
	evExited
	// evGaveUp: the Process gave up restarting a master that kept dying.
	evGaveUp
	// evStopped: the Runtime stops; nothing starts again.
	evStopped
)

// event is one input of the lifecycle.
type event struct {
	kind   eventKind
	starts uint64
	at     time.Time
}

// lifecycleTimeouts are RuntimeConfig's bounds of a start.
type lifecycleTimeouts struct {
	// confirm bounds a start whose workers are lost; start bounds one that is silent.
	confirm, start time.Duration
}

// maxSlowBackoff caps the doubling of the start timeout: 2^4 = 16 times.
const maxSlowBackoff = 4

// lifecycle is the state of the Runtime's NGINX master. It changes only through next, in one place.
type lifecycle struct {
	phase phase
	// starts is the number of the current (or last) start; began is when it began.
	starts uint64
	began  time.Time
	// workersLost says the current start's master runs on without workers.
	workersLost bool
	// stuckAt is when the current start counts as stuck, and reason why; set while starting or stuck.
	stuckAt time.Time
	reason  string
	// slowRestarts counts the starts replaced in a row for being silent: each doubles the next start's
	// timeout, so that a configuration that loads slower than the timeout gets the time it needs. An
	// answer resets it.
	slowRestarts int
	// gaveUp says the Process no longer restarts NGINX (until a new start).
	gaveUp bool
	// stopped is final: after evStopped nothing changes.
	stopped bool
}

// startTimeout is how long the next silent start may take before it counts as stuck.
func (l lifecycle) startTimeout(to lifecycleTimeouts) time.Duration {
	return to.start << min(l.slowRestarts, maxSlowBackoff)
}

// next returns the lifecycle after e. Events about a start other than the current one are stale (a
// health check or a tree look that finished after its master was replaced) and change nothing.
func (l lifecycle) next(e event, to lifecycleTimeouts) lifecycle {
	if l.stopped {
		return l
	}
	switch e.kind {
	case evStopped:
		l.phase, l.stopped = phaseGone, true
		return l
	case evGaveUp:
		l.phase, l.gaveUp = phaseGone, true
		return l
	case evStarted:
		if e.starts <= l.starts {
			return l
		}
		timeout := l.startTimeout(to)
		l.phase, l.starts, l.began, l.workersLost, l.gaveUp = phaseStarting, e.starts, e.at, false, false
		l.stuckAt, l.reason = e.at.Add(timeout), fmt.Sprintf("it has not answered on its status server for %s", timeout)
		return l
	case evTick:
		if l.phase == phaseStarting && !e.at.Before(l.stuckAt) {
			l.phase = phaseStuck
		}
		return l
	}
	if e.starts != l.starts {
		return l
	}
	switch e.kind {
	case evAnswered:
		// A start found stuck that answers before it is replaced serves after all.
		if l.phase == phaseStarting || l.phase == phaseStuck {
			l.phase, l.slowRestarts, l.stuckAt, l.reason = phaseServing, 0, time.Time{}, ""
		}
	case evWorkersLost:
		// A master that loaded its configuration and lost its workers never answers: it is stuck after
		// ConfirmTimeout, not the long StartTimeout of a slow load.
		if (l.phase == phaseStarting || l.phase == phaseStuck) && !l.workersLost {
			l.workersLost = true
			l.stuckAt = l.began.Add(to.confirm)
			l.reason = fmt.Sprintf("its worker processes exited fatally and it has not answered for %s", to.confirm)
			if l.phase == phaseStarting && !e.at.Before(l.stuckAt) {
				l.phase = phaseStuck
			}
		}
	case evReloadSent:
		if l.phase == phaseServing {
			l.phase = phaseReloading
		}
	case evReloadDone:
		if l.phase == phaseReloading {
			l.phase = phaseServing
		}
	case evReplaced:
		if l.phase == phaseStuck {
			if !l.workersLost {
				l.slowRestarts++
			}
			l.phase = phaseGone
		}
	case evExited:
		l.phase = phaseGone
	}
	return l
}

// ready says the current start answered: it can be reloaded, and its shared dicts are being filled.
func (l lifecycle) ready() bool { return l.phase == phaseServing || l.phase == phaseReloading }
