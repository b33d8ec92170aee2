package sortedmap

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ingress-reactor/ingress-reactor/internal/heapstat"
)

// TestMatchesAMap applies random sets and deletes to a Map and to a Go map, and checks after each that
// both hold the same: Len, Get of present and absent keys, All, and that the slice stays sorted through
// the rebuilds.
func TestMatchesAMap(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 1))
		m := New[string, int](strings.Compare)
		want := map[string]int{}
		keys := 50 + r.IntN(4000) // few enough that keys come back after a delete
		for step := range 20_000 {
			k := fmt.Sprintf("k%05d", r.IntN(keys))
			switch op := r.IntN(100); {
			case op < 55:
				m.Set(k, step)
				want[k] = step
			case op < 95:
				m.Delete(k)
				delete(want, k)
			case op < 97:
				m.Compact()
			default:
				if m.Len() != len(want) {
					t.Fatalf("seed %d step %d: Len %d, want %d", seed, step, m.Len(), len(want))
				}
				got := maps.Collect(m.All())
				if !maps.Equal(got, want) {
					t.Fatalf("seed %d step %d: All yields %d keys, want %d", seed, step, len(got), len(want))
				}
			}
			v, ok := m.Get(k)
			if w, wok := want[k]; v != w || ok != wok {
				t.Fatalf("seed %d step %d: Get(%s) = %d, %v; want %d, %v", seed, step, k, v, ok, w, wok)
			}
		}
		if !slices.IsSortedFunc(m.sorted, func(a, b entry[string, int]) int { return strings.Compare(a.key, b.key) }) {
			t.Fatalf("seed %d: slice not sorted", seed)
		}
		for _, e := range m.sorted {
			if _, gone := m.removed[e.key]; gone && e.val != 0 {
				t.Fatalf("seed %d: removed key %s keeps its value", seed, e.key)
			}
		}
	}
}

// TestRemovedValueNotKept checks that a deleted key's value is dropped at once, not at the next
// rebuild: a removed endpoint list must not stay reachable.
func TestRemovedValueNotKept(t *testing.T) {
	m := New[int, *[]byte](cmp.Compare[int])
	for i := range 10 {
		m.Set(i, new([]byte))
	}
	m.Compact()
	m.Delete(3)
	if v, ok := m.Get(3); ok || v != nil {
		t.Fatalf("Get(3) = %v, %v after Delete", v, ok)
	}
	i, _ := m.find(3)
	if m.sorted[i].val != nil {
		t.Fatal("the deleted key's value is still referenced")
	}
	if m.Len() != 9 {
		t.Fatalf("Len = %d, want 9", m.Len())
	}
}

// BenchmarkMemory reports the bytes per entry of a Map and of a Go map with 10,000 string keys and
// 24-byte values, each built by inserting one key at a time.
//
//	go test -run '^$' -bench Memory -benchtime 1x ./internal/sortedmap/
func BenchmarkMemory(b *testing.B) {
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns-svc-%05d-80", i)
	}
	b.Run("sortedmap", func(b *testing.B) {
		for range b.N {
			before := heapstat.Live()
			m := New[string, []byte](strings.Compare)
			for _, k := range keys {
				m.Set(k, nil)
			}
			after := heapstat.Live()
			runtime.KeepAlive(m)
			b.ReportMetric(float64(after-before)/n, "retained-B/entry")
		}
	})
	b.Run("map", func(b *testing.B) {
		for range b.N {
			before := heapstat.Live()
			m := map[string][]byte{}
			for _, k := range keys {
				m[k] = nil
			}
			after := heapstat.Live()
			runtime.KeepAlive(m)
			b.ReportMetric(float64(after-before)/n, "retained-B/entry")
		}
	})
}
