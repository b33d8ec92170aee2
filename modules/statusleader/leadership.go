package statusleader

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/status"
)

// startedLeading runs on its own goroutine, which may get to run only after leadership has ended and
// stoppedLeading has run (status.Callbacks): ctx is cancelled then and must not be taken up. Checking it
// under l.mu orders this against stoppedLeading, which runs after the cancel; the gauge is set under the
// same lock so that it cannot end at 1 on a replica that does not lead.
func (l *Leader) startedLeading(ctx context.Context) {
	l.mu.Lock()
	if ctx.Err() != nil {
		l.mu.Unlock()
		return
	}
	l.leaderCtx = ctx
	l.m.leader.Set(1)
	l.mu.Unlock()
	l.enqueueAll()
}

func (l *Leader) stoppedLeading() {
	l.mu.Lock()
	l.leaderCtx = nil
	l.m.leader.Set(0)
	l.mu.Unlock()
}

// leadingLocked reports whether leadership has begun and not ended; l.mu must be held. The leader context
// is cancelled a moment before stoppedLeading clears it.
func (l *Leader) leadingLocked() bool {
	return l.leaderCtx != nil && l.leaderCtx.Err() == nil
}

// enqueueAll queues every Ingress that is ours or may still carry our addresses.
func (l *Leader) enqueueAll() {
	l.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(l.ours)+len(l.lost))
	for k := range l.ours {
		keys = append(keys, k)
	}
	for k := range l.lost {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	q := l.ctrl.Queue()
	for _, k := range keys {
		q.Add(k)
	}
}

// recheckEvery refreshes the addresses (a safety net for missed events) and, while leading, re-checks
// every Ingress once per UpdateInterval. A replica that does not lead forgets the lost Ingresses that no
// longer carry our addresses (the leader cleared them), so that set does not grow without bound.
func (l *Leader) recheckEvery(ctx context.Context) {
	t := l.opts.Clock.NewTicker(l.opts.UpdateInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		l.refreshAddresses()
		if l.elector.IsLeader() {
			l.enqueueAll()
		} else {
			l.pruneLost()
		}
	}
}

func (l *Leader) pruneLost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addrsErr != nil {
		return
	}
	for k := range l.lost {
		ing, err := l.ingresses.Ingresses(k.Namespace).Get(k.Name)
		if err != nil || !status.Overlaps(ing.Status.LoadBalancer.Ingress, l.addrs) {
			delete(l.lost, k)
		}
	}
}
