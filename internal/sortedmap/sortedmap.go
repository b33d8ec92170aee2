// Package sortedmap is a map for large, long-lived tables that change a little at a time: it keeps its
// entries in a slice sorted by key, with no room to spare, beside two small maps for the keys added and
// removed since the slice was last rebuilt.
//
// A Go map of many entries takes about twice the room of its keys and values: its slots are between
// 7/16 and 7/8 full, and each has a control byte. At 10,000 entries of 40 to 56 bytes, that is 35 to 45
// bytes per entry more than a sorted slice. A lookup here is a binary search (after a look into the two
// small maps), so use it where lookups are not the hot path.
package sortedmap

import (
	"iter"
	"maps"
	"slices"
)

// minRebuild is how many keys at least the small maps gather before the slice is rebuilt: a small
// table is rebuilt seldom too.
const minRebuild = 256

// Map maps keys to values. The zero Map is not usable: make one with New. It is not safe for concurrent
// use.
type Map[K comparable, V any] struct {
	cmp func(a, b K) int
	// sorted holds entries by key, unique; a key of removed stays in it until the next rebuild, with the
	// zero value.
	sorted []entry[K, V]
	// added holds the keys that sorted lacks; removed the keys of sorted that are gone.
	added   map[K]V
	removed map[K]struct{}
}

type entry[K, V any] struct {
	key K
	val V
}

// New returns an empty map whose keys are ordered by cmp.
func New[K comparable, V any](cmp func(a, b K) int) *Map[K, V] {
	return &Map[K, V]{cmp: cmp}
}

func (m *Map[K, V]) find(k K) (int, bool) {
	return slices.BinarySearchFunc(m.sorted, k, func(e entry[K, V], k K) int { return m.cmp(e.key, k) })
}

// Len returns the number of keys.
func (m *Map[K, V]) Len() int { return len(m.sorted) - len(m.removed) + len(m.added) }

// Get returns the value of k, and false when m has none.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if v, ok := m.added[k]; ok {
		return v, true
	}
	if i, ok := m.find(k); ok {
		if _, gone := m.removed[k]; !gone {
			return m.sorted[i].val, true
		}
	}
	var zero V
	return zero, false
}

// Set makes v the value of k.
func (m *Map[K, V]) Set(k K, v V) {
	if i, ok := m.find(k); ok {
		m.sorted[i].val = v
		delete(m.removed, k)
		return
	}
	if m.added == nil {
		m.added = map[K]V{}
	}
	m.added[k] = v
	m.maybeRebuild()
}

// Delete removes k.
func (m *Map[K, V]) Delete(k K) {
	if _, ok := m.added[k]; ok {
		delete(m.added, k)
		return
	}
	i, ok := m.find(k)
	if !ok {
		return
	}
	if _, gone := m.removed[k]; gone {
		return
	}
	var zero V
	m.sorted[i].val = zero // not kept alive until the rebuild
	if m.removed == nil {
		m.removed = map[K]struct{}{}
	}
	m.removed[k] = struct{}{}
	m.maybeRebuild()
}

// maybeRebuild rebuilds the slice once the small maps hold an eighth of its length (and minRebuild
// keys): the copy then costs a few entries per change.
func (m *Map[K, V]) maybeRebuild() {
	if n := len(m.added) + len(m.removed); n > minRebuild && n > len(m.sorted)/8 {
		m.Compact()
	}
}

// Compact merges the added keys into the slice and drops the removed ones. The slice is made anew at
// its length, and the small maps are dropped (a map keeps the room it once grew to).
func (m *Map[K, V]) Compact() {
	if len(m.added) == 0 && len(m.removed) == 0 {
		return
	}
	added := slices.SortedFunc(maps.Keys(m.added), m.cmp)
	next := make([]entry[K, V], 0, m.Len())
	old := m.sorted
	for len(old) > 0 || len(added) > 0 {
		if len(added) == 0 || len(old) > 0 && m.cmp(old[0].key, added[0]) < 0 {
			if _, gone := m.removed[old[0].key]; !gone {
				next = append(next, old[0])
			}
			old = old[1:]
			continue
		}
		next = append(next, entry[K, V]{key: added[0], val: m.added[added[0]]})
		added = added[1:]
	}
	m.sorted, m.added, m.removed = next, nil, nil
}

// All yields every key with its value: those of the slice in order, then the added ones in no order.
// m must not change meanwhile.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, e := range m.sorted {
			if _, gone := m.removed[e.key]; gone {
				continue
			}
			if !yield(e.key, e.val) {
				return
			}
		}
		for k, v := range m.added {
			if !yield(k, v) {
				return
			}
		}
	}
}
