package endpoints

import (
	"context"
	"net"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// nameCache resolves the DNS names of ExternalName Services off the endpoint lane. A lane worker only
// reads the newest answer; the lookup itself runs on a goroutine of its own, one per Service at a time,
// and its answer queues the Service again (at once, and for a refresh after maxAge). A name whose DNS
// server hangs thus costs one goroutine until its timeout, never a lane worker.
type nameCache struct {
	resolver Resolver
	timeout  time.Duration
	maxAge   time.Duration
	// requeue queues a Service's sync after a delay (0: now).
	requeue func(key types.NamespacedName, after time.Duration)

	mu      sync.Mutex
	ctx     context.Context // ends lookups when the watcher stops; set by start
	entries map[types.NamespacedName]*nameEntry
}

// nameEntry is the newest answer for one Service's name.
type nameEntry struct {
	host     string
	addrs    []net.IPAddr
	err      error
	at       time.Time
	answered bool
	inFlight bool
}

func newNameCache(r Resolver, timeout, maxAge time.Duration, requeue func(types.NamespacedName, time.Duration)) *nameCache {
	return &nameCache{
		resolver: r, timeout: timeout, maxAge: maxAge, requeue: requeue,
		ctx:     context.Background(),
		entries: map[types.NamespacedName]*nameEntry{},
	}
}

// start sets the context that ends lookups in flight.
func (c *nameCache) start(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
}

// answer returns the newest answer for key's host, and false when there is none yet. A lookup starts
// when there is no answer for host or the answer is older than maxAge; until it ends, the previous
// answer for the same host is returned.
func (c *nameCache) answer(key types.NamespacedName, host string) ([]net.IPAddr, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil || e.host != host {
		e = &nameEntry{host: host}
		c.entries[key] = e
	}
	if !e.inFlight && (!e.answered || time.Since(e.at) >= c.maxAge) {
		e.inFlight = true
		go c.lookup(c.ctx, key, e)
	}
	return e.addrs, e.answered, e.err
}

// forget drops key's answer: the Service is gone, no longer ExternalName, or no longer used. A lookup in
// flight finishes unnoticed.
func (c *nameCache) forget(key types.NamespacedName) {
	c.mu.Lock()
	delete(c.entries, key)
	c.mu.Unlock()
}

func (c *nameCache) lookup(ctx context.Context, key types.NamespacedName, e *nameEntry) {
	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	addrs, err := c.resolver.LookupIPAddr(lctx, e.host)
	cancel()
	c.mu.Lock()
	e.addrs, e.err, e.at, e.answered, e.inFlight = addrs, err, time.Now(), true, false
	current := c.entries[key] == e
	c.mu.Unlock()
	if current && ctx.Err() == nil {
		c.requeue(key, 0)
		c.requeue(key, c.maxAge)
	}
}
