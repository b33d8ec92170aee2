package reloader

import (
	"sync"
	"time"
)

// Reload pacing defaults: see pacer.
const (
	DefaultMinReloadGap = time.Second
	DefaultMaxReloadGap = 5 * time.Second
)

// pacer spaces reloads adaptively. A change after a quiet period is applied at once. Each reload that
// follows the previous one within its gap plus a quiet margin (churn) doubles the gap the next reload
// waits after this one, from min up to max; a reload after a quiet period resets the gap to zero. Under
// sustained churn NGINX reloads at most once per max (plus the time a reload takes), so the reload rate
// falls as churn rises and every change is live at most max after the reload before it. Endpoint and
// certificate changes never wait: they do not reload.
//
// Each reload makes NGINX's old workers close their idle keep-alive connections; a client that sends a
// request on one at that moment sees it fail. Fewer reloads under churn mean fewer such failures.
type pacer struct {
	min, max time.Duration
	now      func() time.Time

	mu   sync.Mutex
	last time.Time // when the last reload completed; zero before the first
	gap  time.Duration
}

func newPacer(min, max time.Duration, now func() time.Time) *pacer {
	if min <= 0 {
		min = DefaultMinReloadGap
	}
	if max < min {
		max = min
	}
	if now == nil {
		now = time.Now
	}
	return &pacer{min: min, max: max, now: now}
}

// wait returns how long a configuration offered now waits before the structure lane applies it.
func (p *pacer) wait() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last.IsZero() {
		return 0
	}
	return max(0, p.last.Add(p.gap).Sub(p.now()))
}

// reloaded records a reload that completed now and returns the gap the next one waits.
func (p *pacer) reloaded() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	churn := !p.last.IsZero() && now.Sub(p.last) < p.gap+2*p.min
	switch {
	case !churn:
		p.gap = 0
	case p.gap == 0:
		p.gap = p.min
	default:
		p.gap = min(2*p.gap, p.max)
	}
	p.last = now
	return p.gap
}
