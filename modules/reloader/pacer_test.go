package reloader

import (
	"testing"
	"time"
)

// TestPacer walks the pacer through churn and quiet: the gap doubles from min to max while reloads
// follow each other, a change after a quiet period is applied at once, and the next quiet reload resets.
func TestPacer(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPacer(time.Second, 5*time.Second, func() time.Time { return clock })
	step := func(after time.Duration, wantWait, wantGap time.Duration) {
		t.Helper()
		clock = clock.Add(after)
		if got := p.wait(); got != wantWait {
			t.Fatalf("at %s: wait %s, want %s", clock.Format("15:04:05.000"), got, wantWait)
		}
		clock = clock.Add(p.wait() + 100*time.Millisecond) // the reload itself takes 100 ms
		if got := p.reloaded(); got != wantGap {
			t.Fatalf("at %s: gap after the reload %s, want %s", clock.Format("15:04:05.000"), got, wantGap)
		}
	}
	step(0, 0, 0)                              // the first configuration: at once
	step(200*time.Millisecond, 0, time.Second) // churn begins: applied at once, the next waits 1 s
	step(100*time.Millisecond, 900*time.Millisecond, 2*time.Second)
	step(0, 2*time.Second, 4*time.Second)
	step(0, 4*time.Second, 5*time.Second) // capped at max
	step(0, 5*time.Second, 5*time.Second)
	step(6*time.Second, 0, 5*time.Second)      // 6 s later: no wait, but within gap + 2 min of the last reload: still churn
	step(30*time.Second, 0, 0)                 // quiet: at once, and the gap resets
	step(3*time.Second, 0, 0)                  // 3 s after a quiet reload (> 2 min): no churn
	step(500*time.Millisecond, 0, time.Second) // churn again starts at min
}

// TestPacerSustainedChurn: with a change every 50 ms for two minutes, the lane reloads fewer than 0.5
// times a second.
func TestPacerSustainedChurn(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPacer(DefaultMinReloadGap, DefaultMaxReloadGap, func() time.Time { return clock })
	end := clock.Add(2 * time.Minute)
	reloads, due := 0, clock
	for ; clock.Before(end); clock = clock.Add(50 * time.Millisecond) {
		if clock.Before(due) {
			continue // the change waits in the queue for the pending reload
		}
		if w := p.wait(); w > 0 {
			due = clock.Add(w)
			continue
		}
		clock = clock.Add(300 * time.Millisecond) // nginx -t, reload and confirmation
		p.reloaded()
		reloads++
	}
	if rate := float64(reloads) / 120; rate >= 0.5 {
		t.Errorf("%d reloads in 2 minutes of churn (%.2f/s), want under 0.5/s", reloads, rate)
	}
	t.Logf("%d reloads in 2 minutes of a change every 50 ms", reloads)
}

// TestChurnCoalescesIntoFewReloads: configurations that arrive while the lane waits out the gap after a
// reload are applied as one reload of the newest, never one by one.
func TestChurnCoalescesIntoFewReloads(t *testing.T) {
	e := newEnv(t, Options{MinReloadGap: 300 * time.Millisecond, MaxReloadGap: 300 * time.Millisecond})
	e.render("h1")
	e.waitLive("h1")
	e.render("h2") // churn: applied at once, and the gap begins
	e.waitLive("h2")
	for _, h := range []string{"h3", "h4", "h5", "h6"} {
		e.render(h)
	}
	e.waitLive("h6")
	applied := e.a.appliesOf()
	for _, h := range []string{"h3", "h4", "h5"} {
		for _, a := range applied {
			if a == h {
				t.Errorf("configuration %s was applied although a newer one arrived within the gap: applies %v", h, applied)
			}
		}
	}
	if got := e.metric("ingress_reactor_reload_gap_seconds"); got != 0.3 {
		t.Errorf("reload_gap_seconds = %v, want 0.3 under churn", got)
	}
}
