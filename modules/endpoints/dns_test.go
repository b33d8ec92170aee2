package endpoints

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// countingResolver answers every name with 192.0.2.<n>, n counting lookups.
type countingResolver struct {
	mu sync.Mutex
	n  byte
}

func (r *countingResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	return []net.IPAddr{{IP: net.IPv4(192, 0, 2, r.n)}}, nil
}

// TestNameCacheAnswersQueueTheServiceAndRefresh: the first ask starts a lookup and has no answer; the
// answer queues the Service now and again after maxAge; an answer older than maxAge is served while the
// next lookup runs; another host for the Service is a new name.
func TestNameCacheAnswersQueueTheServiceAndRefresh(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "ext"}
	type requeue struct {
		key   types.NamespacedName
		after time.Duration
	}
	queued := make(chan requeue, 10)
	c := newNameCache(&countingResolver{}, time.Hour, time.Hour, func(k types.NamespacedName, after time.Duration) { queued <- requeue{k, after} })
	next := func() requeue {
		t.Helper()
		select {
		case r := <-queued:
			return r
		case <-time.After(time.Minute):
			t.Fatal("the answer did not queue the Service")
		}
		return requeue{}
	}

	if _, answered, _ := c.answer(key, "db.example.com"); answered {
		t.Fatal("answered before any lookup")
	}
	if r1, r2 := next(), next(); r1 != (requeue{key, 0}) || r2 != (requeue{key, time.Hour}) {
		t.Fatalf("queued %v, %v; want now and after the refresh interval", r1, r2)
	}
	addrs, answered, err := c.answer(key, "db.example.com")
	if !answered || err != nil || !addrs[0].IP.Equal(net.IPv4(192, 0, 2, 1)) {
		t.Fatalf("answer = %v, %v, %v; want 192.0.2.1", addrs, answered, err)
	}

	c.mu.Lock()
	c.entries[key].at = time.Now().Add(-2 * time.Hour) // the refresh is due
	c.mu.Unlock()
	if addrs, answered, _ := c.answer(key, "db.example.com"); !answered || !addrs[0].IP.Equal(net.IPv4(192, 0, 2, 1)) {
		t.Fatalf("while refreshing: %v, %v; want the previous answer", addrs, answered)
	}
	next()
	next()
	if addrs, _, _ := c.answer(key, "db.example.com"); !addrs[0].IP.Equal(net.IPv4(192, 0, 2, 2)) {
		t.Fatalf("after the refresh: %v, want 192.0.2.2", addrs)
	}

	if _, answered, _ := c.answer(key, "other.example.com"); answered {
		t.Fatal("a new host was answered with the old host's addresses")
	}
	next()
	next()
	c.forget(key)
	if _, answered, _ := c.answer(key, "other.example.com"); answered {
		t.Fatal("a forgotten Service still has an answer")
	}
}
