// Package heapstat measures the heap for benchmarks that report how many bytes a structure keeps.
package heapstat

import "runtime"

// Live returns the bytes of heap objects still reachable: it collects twice (objects freed by a
// finalizer or the first sweep go in the second) and reads the heap's allocated bytes.
func Live() int64 {
	return collect().HeapAlloc
}

// InUse returns the bytes of the heap's spans that hold at least one reachable object, after collecting
// as Live does: the live bytes plus the free slots beside them. It tells how much garbage a structure's
// construction leaves interleaved with what it keeps (fragmentation), which Live does not show.
func InUse() int64 {
	return collect().HeapInuse
}

// stats are the heap's figures after two collections.
type stats struct{ HeapAlloc, HeapInuse int64 }

func collect() stats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return stats{HeapAlloc: int64(m.HeapAlloc), HeapInuse: int64(m.HeapInuse)}
}
