package pipeline

import "sync"

// Latest is a single-slot, coalescing mailbox for snapshot values: a
// producer Sets whole values, a consumer waits on C and Gets the newest.
// Many Sets between two reads cause one wake-up, and the newest value wins;
// older ones are never seen. Use it where only the current state matters
// (a rendered configuration, an endpoint table), not every change.
//
// Create it with NewLatest; the zero value is not usable.
type Latest[T any] struct {
	mu   sync.Mutex
	v    T
	ok   bool
	wake chan struct{}
}

// NewLatest creates an empty Latest.
func NewLatest[T any]() *Latest[T] {
	return &Latest[T]{wake: make(chan struct{}, 1)}
}

// Set stores v, replacing any value not yet read, and wakes the consumer.
// It never blocks.
func (l *Latest[T]) Set(v T) {
	l.mu.Lock()
	l.v, l.ok = v, true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a wake-up is already pending; Get will return v
	}
}

// Get returns the newest value, and false if nothing was ever Set. The value
// stays in place: Get again returns it again until the next Set.
func (l *Latest[T]) Get() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v, l.ok
}

// C receives once after one or more Sets. A receive is followed by a Get of
// a value at least as new as the Set that caused it; a consumer that already
// read that value during an earlier wake-up may see it twice, so consumers
// should treat values as idempotent snapshots.
func (l *Latest[T]) C() <-chan struct{} { return l.wake }
