package statusleader

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/status"
)

// refreshAddresses asks discovery for the addresses and, when they changed, re-checks every Ingress.
func (l *Leader) refreshAddresses() {
	if !l.discovery.HasSynced() {
		return // events of the initial list; Start refreshes once the caches are complete
	}
	addrs, err := l.discovery.Addresses()
	l.mu.Lock()
	prevErr, prevKnown := l.addrsErr, l.known
	changed := !prevKnown || (err == nil) != (prevErr == nil) || !status.Equal(addrs, l.addrs)
	l.addrs, l.addrsErr, l.known = addrs, err, true
	if err == nil {
		l.published = addrs
	}
	leading := l.leadingLocked()
	l.mu.Unlock()

	switch {
	case err != nil:
		l.m.addresses.Set(-1)
		if prevErr == nil || prevErr.Error() != err.Error() {
			l.log.Warn("cannot determine the addresses to publish; Ingress status is left as it is", zap.Error(err))
		}
	case changed:
		l.m.addresses.Set(float64(len(addrs)))
		l.log.Info("addresses to publish", zap.String("source", string(l.discovery.Source())), zap.String("addresses", status.String(addrs)))
		if leading {
			l.enqueueAll()
		}
	}
}

// sync brings one Ingress's status in line: our addresses while it is ours, without them once it is not.
func (l *Leader) sync(ctx context.Context, key types.NamespacedName) error {
	l.mu.Lock()
	_, ours := l.ours[key]
	_, lost := l.lost[key]
	addrs, known := l.addrs, l.known && l.addrsErr == nil
	leading, leaderCtx := l.leadingLocked(), l.leaderCtx
	l.mu.Unlock()
	if !leading || !known || (!ours && !lost) {
		return nil // a replica that does not lead re-checks everything when it starts leading
	}
	if !l.elector.IsLeader() {
		// Still leading but overdue with renewing the Lease: hold off; if leadership ends, the next
		// leader re-checks everything, and if it is renewed, this key is synced then.
		l.ctrl.Queue().AddAfter(key, l.opts.Election.RetryPeriod)
		return nil
	}
	ing, err := l.ingresses.Ingresses(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		l.forgetLost(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ingress %s: %w", key, err)
	}
	wantOf := func(cur *networkingv1.Ingress) []status.Address {
		if ours {
			return addrs
		}
		return status.Remove(cur.Status.LoadBalancer.Ingress, addrs)
	}
	if status.Equal(status.Current(ing), wantOf(ing)) {
		if !ours {
			l.forgetLost(key)
		}
		return nil
	}
	if err := l.limiter.Wait(ctx); err != nil {
		return fmt.Errorf("wait to write status of %s: %w", key, err)
	}
	// Waiting may have taken a while: leadership must still hold, and a write in flight is abandoned the
	// moment it ends.
	if leaderCtx.Err() != nil {
		return nil
	}
	if !l.elector.IsLeader() {
		l.ctrl.Queue().AddAfter(key, l.opts.Election.RetryPeriod)
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(leaderCtx, cancel)()
	wrote, err := l.writeStatus(wctx, ing, wantOf)
	switch {
	case err == nil:
		if wrote {
			l.log.Debug("ingress status written", zap.Stringer("ingress", key), zap.Bool("ours", ours), zap.String("addresses", status.String(addrs)))
		}
		if !ours {
			if wrote {
				l.log.Info("addresses removed from an ingress that is no longer ours", zap.Stringer("ingress", key))
			}
			l.forgetLost(key)
		}
		return nil
	case apierrors.IsNotFound(err):
		l.forgetLost(key)
		return nil
	case apierrors.IsConflict(err):
		// Someone keeps changing the Ingress. A conflict says nothing is wrong with the write, so it is
		// retried later outside the queue's retry limit (cert-manager's rule) rather than ending in a
		// false UpdateStatusFailed Event.
		l.log.Debug("ingress status write conflicts; retrying later", zap.Stringer("ingress", key), zap.Error(err))
		l.ctrl.Queue().AddAfter(key, conflictRetryDelay)
		return nil
	case leaderCtx.Err() != nil:
		return nil // leadership ended during the write; the next leader re-checks everything
	default:
		l.m.updates.WithLabelValues("error").Inc()
		return err
	}
}

// writeStatus writes the status wantOf computes from the Ingress. After a conflict it re-reads the
// Ingress from the API server (the cache may lag behind) and tries again, up to writeAttempts writes in
// all; the error it returns is a conflict only when every attempt met one. Conflicts and successful
// writes are counted here; other errors are left to the caller, which knows whether they matter.
func (l *Leader) writeStatus(ctx context.Context, ing *networkingv1.Ingress, wantOf func(*networkingv1.Ingress) []status.Address) (bool, error) {
	for attempt := 1; ; attempt++ {
		wrote, err := status.Write(ctx, l.client.NetworkingV1(), ing, wantOf(ing))
		if err == nil {
			if wrote {
				l.m.updates.WithLabelValues("success").Inc()
			}
			return wrote, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		l.m.updates.WithLabelValues("conflict").Inc()
		if attempt >= writeAttempts {
			return false, err
		}
		// A failed Get returns no usable Ingress (client-go's is empty, another client's may be nil): ing
		// keeps the copy that names it until the read succeeds.
		fresh, err := l.client.NetworkingV1().Ingresses(ing.Namespace).Get(ctx, ing.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get ingress %s/%s: %w", ing.Namespace, ing.Name, err)
		}
		ing = fresh
	}
}

func (l *Leader) forgetLost(key types.NamespacedName) {
	l.mu.Lock()
	delete(l.lost, key)
	l.mu.Unlock()
}

// gaveUp puts a Warning Event on an Ingress whose status could not be written.
func (l *Leader) gaveUp(key types.NamespacedName, err error) {
	if l.recorder == nil {
		return
	}
	ing, gerr := l.ingresses.Ingresses(key.Namespace).Get(key.Name)
	if gerr != nil {
		return
	}
	l.recorder.Eventf(ing, corev1.EventTypeWarning, ReasonUpdateStatusFailed, "Cannot update the load-balancer status: %v", err)
}
