package nginx

import (
	"testing"
	"time"
)

// TestLifecycleTransitions: every transition of the master's lifecycle, one event at a time.
func TestLifecycleTransitions(t *testing.T) {
	to := lifecycleTimeouts{confirm: 10 * time.Second, start: 5 * time.Minute}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	starting := lifecycle{phase: phaseStarting, starts: 1, began: t0, stuckAt: t0.Add(5 * time.Minute),
		reason: "it has not answered on its status server for 5m0s"}
	serving := lifecycle{phase: phaseServing, starts: 1, began: t0}
	stuck := starting
	stuck.phase = phaseStuck
	lost := starting
	lost.workersLost, lost.stuckAt = true, t0.Add(10*time.Second)
	lost.reason = "its worker processes exited fatally and it has not answered for 10s"
	lostStuck := lost
	lostStuck.phase = phaseStuck

	with := func(l lifecycle, change func(*lifecycle)) lifecycle { change(&l); return l }
	tests := map[string]struct {
		from lifecycle
		ev   event
		want lifecycle
	}{
		"gone -> starting on a start": {from: lifecycle{}, ev: event{kind: evStarted, starts: 1, at: t0}, want: starting},
		"a start's timeout doubles per silent start replaced in a row": {
			from: lifecycle{slowRestarts: 2, starts: 3}, ev: event{kind: evStarted, starts: 4, at: t0},
			want: lifecycle{phase: phaseStarting, starts: 4, began: t0, stuckAt: t0.Add(20 * time.Minute), slowRestarts: 2,
				reason: "it has not answered on its status server for 20m0s"}},
		"the doubling stops at 16 times": {
			from: lifecycle{slowRestarts: 9}, ev: event{kind: evStarted, starts: 1, at: t0},
			want: lifecycle{phase: phaseStarting, starts: 1, began: t0, stuckAt: t0.Add(80 * time.Minute), slowRestarts: 9,
				reason: "it has not answered on its status server for 1h20m0s"}},
		"an older start reported late changes nothing": {from: serving, ev: event{kind: evStarted, starts: 1, at: t0}, want: serving},
		"starting -> serving on its answer": {from: with(starting, func(l *lifecycle) { l.slowRestarts = 3 }), ev: event{kind: evAnswered, starts: 1},
			want: lifecycle{phase: phaseServing, starts: 1, began: t0}},
		"stuck -> serving: it answered before it was replaced": {from: stuck, ev: event{kind: evAnswered, starts: 1},
			want: lifecycle{phase: phaseServing, starts: 1, began: t0}},
		"an answer of a replaced start changes nothing": {from: with(starting, func(l *lifecycle) { l.starts = 2 }), ev: event{kind: evAnswered, starts: 1},
			want: with(starting, func(l *lifecycle) { l.starts = 2 })},
		"starting stays while within its timeout": {from: starting, ev: event{kind: evTick, at: t0.Add(5*time.Minute - time.Nanosecond)}, want: starting},
		"starting -> stuck at its timeout":        {from: starting, ev: event{kind: evTick, at: t0.Add(5 * time.Minute)}, want: stuck},
		"serving is never stuck":                  {from: serving, ev: event{kind: evTick, at: t0.Add(time.Hour)}, want: serving},
		"workers lost: stuck after ConfirmTimeout instead": {from: starting, ev: event{kind: evWorkersLost, starts: 1, at: t0.Add(time.Second)},
			want: lost},
		"workers lost after ConfirmTimeout: stuck at once": {from: starting, ev: event{kind: evWorkersLost, starts: 1, at: t0.Add(time.Minute)},
			want: lostStuck},
		"lost workers, then ConfirmTimeout: stuck":   {from: lost, ev: event{kind: evTick, at: t0.Add(10 * time.Second)}, want: lostStuck},
		"workers lost of a serving master: no state": {from: serving, ev: event{kind: evWorkersLost, starts: 1, at: t0}, want: serving},
		"serving -> reloading on SIGHUP":             {from: serving, ev: event{kind: evReloadSent, starts: 1}, want: with(serving, func(l *lifecycle) { l.phase = phaseReloading })},
		"a starting master is not reloaded":          {from: starting, ev: event{kind: evReloadSent, starts: 1}, want: starting},
		"reloading -> serving once confirmed or failed": {from: with(serving, func(l *lifecycle) { l.phase = phaseReloading }), ev: event{kind: evReloadDone, starts: 1},
			want: serving},
		"stuck silent -> gone when replaced, the next start gets twice the time": {from: stuck, ev: event{kind: evReplaced, starts: 1},
			want: with(stuck, func(l *lifecycle) { l.phase, l.slowRestarts = phaseGone, 1 })},
		"stuck without workers -> gone when replaced, no backoff": {from: lostStuck, ev: event{kind: evReplaced, starts: 1},
			want: with(lostStuck, func(l *lifecycle) { l.phase = phaseGone })},
		"only a stuck start is replaced":     {from: starting, ev: event{kind: evReplaced, starts: 1}, want: starting},
		"starting -> gone when it exits":     {from: starting, ev: event{kind: evExited, starts: 1}, want: with(starting, func(l *lifecycle) { l.phase = phaseGone })},
		"serving -> gone when it exits":      {from: serving, ev: event{kind: evExited, starts: 1}, want: with(serving, func(l *lifecycle) { l.phase = phaseGone })},
		"an exit of a replaced start: stale": {from: with(serving, func(l *lifecycle) { l.starts = 2 }), ev: event{kind: evExited, starts: 1}, want: with(serving, func(l *lifecycle) { l.starts = 2 })},
		"gave up: gone, until a new start":   {from: starting, ev: event{kind: evGaveUp}, want: with(starting, func(l *lifecycle) { l.phase, l.gaveUp = phaseGone, true })},
		"a new start after giving up":        {from: lifecycle{gaveUp: true, starts: 4}, ev: event{kind: evStarted, starts: 5, at: t0}, want: with(starting, func(l *lifecycle) { l.starts = 5 })},
		"any -> gone and stopped on Stop":    {from: serving, ev: event{kind: evStopped}, want: with(serving, func(l *lifecycle) { l.phase, l.stopped = phaseGone, true })},
		"stopped is final: no start":         {from: lifecycle{stopped: true}, ev: event{kind: evStarted, starts: 1, at: t0}, want: lifecycle{stopped: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.from.next(tc.ev, to); got != tc.want {
				t.Errorf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestLifecycleReady: only an answered master is ready (and may be reloaded).
func TestLifecycleReady(t *testing.T) {
	for p, want := range map[phase]bool{phaseGone: false, phaseStarting: false, phaseServing: true, phaseReloading: true, phaseStuck: false} {
		if got := (lifecycle{phase: p}).ready(); got != want {
			t.Errorf("%s: ready %v, want %v", p, got, want)
		}
	}
}
