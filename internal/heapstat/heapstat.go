// Package heapstat measures the heap for benchmarks that report how many bytes a structure keeps.
package heapstat

import "runtime"

// Live returns the bytes of heap objects still reachable: it collects twice (objects freed by a
// finalizer or the first sweep go in the second) and reads the heap's allocated bytes.
func Live() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
