package statusleader

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/status"
)

// clearOnShutdown takes this replica's addresses back from every Ingress it serves, when it is the leader
// and no other replica will keep publishing them. A replica that does not lead never writes: the leader
// may still be running and would write the addresses back, or have published others meanwhile.
func (l *Leader) clearOnShutdown(ctx context.Context) {
	l.mu.Lock()
	published := l.published
	keys := make([]types.NamespacedName, 0, len(l.ours))
	for k := range l.ours {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	if len(published) == 0 || len(keys) == 0 {
		return
	}
	if !l.elector.IsLeader() {
		l.log.Info("not the leader: leaving Ingress status to the leader on shutdown")
		return
	}
	last, err := status.IsLastReplica(ctx, l.client, l.opts.Discovery.Pod)
	if err != nil {
		l.log.Warn("cannot tell whether other replicas keep running; leaving Ingress status as it is", zap.Error(err))
		return
	}
	if !last {
		l.log.Info("other replicas keep publishing; leaving Ingress status as it is")
		return
	}
	l.log.Info("last replica stopping: clearing published addresses", zap.Int("ingresses", len(keys)), zap.String("addresses", status.String(published)))
	work := make(chan types.NamespacedName)
	var mu sync.Mutex
	var cleared, failed int
	var wg sync.WaitGroup
	for range min(shutdownWorkers, len(keys)) {
		wg.Go(func() {
			for key := range work {
				wrote, err := l.clearOne(ctx, key, published)
				mu.Lock()
				switch {
				case err != nil:
					failed++
					l.log.Warn("cannot clear ingress status on shutdown", zap.Stringer("ingress", key), zap.Error(err))
				case wrote:
					cleared++
				}
				mu.Unlock()
			}
		})
	}
	for _, k := range keys {
		select {
		case work <- k:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	l.log.Info("cleared ingress status on shutdown", zap.Int("cleared", cleared), zap.Int("failed", failed),
		zap.Int("skipped", len(keys)-cleared-failed))
}

// clearOne removes published from one Ingress; no queue retries it, so writeStatus's conflict retries
// are all it gets.
func (l *Leader) clearOne(ctx context.Context, key types.NamespacedName, published []status.Address) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	ing, err := l.ingresses.Ingresses(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get ingress %s: %w", key, err)
	}
	wrote, err := l.writeStatus(ctx, ing, func(cur *networkingv1.Ingress) []status.Address {
		return status.Remove(cur.Status.LoadBalancer.Ingress, published)
	})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil // deleted meanwhile: nothing left to clear
	case err != nil:
		l.m.updates.WithLabelValues("error").Inc()
		return false, err
	}
	return wrote, nil
}
