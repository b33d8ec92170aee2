package app

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// fakeHeap is a heap whose numbers the test sets; release drops held to live and counts.
type fakeHeap struct {
	s        heapStats
	released int
}

func (h *fakeHeap) read() heapStats { return h.s }

func (h *fakeHeap) release() {
	h.released++
	h.s.released += h.s.held - h.s.live
	h.s.held = h.s.live
}

func newFakeReleaser(t *testing.T, h *fakeHeap) *idleReleaser {
	t.Helper()
	r, err := newIdleReleaser(zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r.read, r.release = h.read, h.release
	r.prevAllocated = h.s.allocated
	return r
}

func TestIdleReleaserReleasesOnlyWhenIdleAndWorthIt(t *testing.T) {
	const mib = 1 << 20
	h := &fakeHeap{s: heapStats{allocated: 1000 * mib, live: 100 * mib, held: 200 * mib}}
	r := newFakeReleaser(t, h)
	now := time.Unix(1_000_000, 0)

	// Busy: 10 MiB allocated in the interval, more than a sixteenth of the live heap.
	h.s.allocated += 10 * mib
	if r.check(now) || h.released != 0 {
		t.Fatal("released while the controller was allocating")
	}
	// Idle (1 MiB) and 100 MiB held beyond the live heap: released, and the metrics say how much.
	now = now.Add(releaseCheckEvery)
	h.s.allocated += mib
	if !r.check(now) || h.released != 1 {
		t.Fatal("did not release an idle heap holding twice its live size")
	}
	if got := testutil.ToFloat64(r.releases); got != 1 {
		t.Errorf("releases metric = %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.bytes); got != 100*mib {
		t.Errorf("released bytes metric = %v, want %v", got, 100*mib)
	}

	// Garbage builds up again while idle, but within releaseMinGap of the last release nothing happens.
	h.s.held = 200 * mib
	now = now.Add(releaseCheckEvery)
	if r.check(now) {
		t.Fatal("released twice within releaseMinGap")
	}
	// releaseMinGap later it does.
	now = now.Add(releaseMinGap)
	if !r.check(now) || h.released != 2 {
		t.Fatal("did not release releaseMinGap after the previous release")
	}

	// Not worth it: 10 MiB beyond a live heap of 200 MiB is less than a sixteenth.
	h.s.live, h.s.held = 200*mib, 210*mib
	now = now.Add(2 * releaseMinGap)
	if r.check(now) {
		t.Fatal("released 10 MiB beyond a live heap of 200 MiB")
	}
	// Worth it: 10 MiB beyond a live heap of 100 MiB is more than a sixteenth (and 8 MiB).
	h.s.live, h.s.held = 100*mib, 110*mib
	now = now.Add(2 * releaseMinGap)
	if !r.check(now) {
		t.Fatal("did not release 10 MiB beyond a live heap of 100 MiB")
	}
	// Not worth it: a small heap's excess under 8 MiB, however large in proportion.
	h.s.live, h.s.held = 4*mib, 10*mib
	now = now.Add(2 * releaseMinGap)
	if r.check(now) {
		t.Fatal("released 6 MiB of excess")
	}
	// Unknown numbers (a runtime without these metrics reads zeros): never.
	h.s = heapStats{}
	now = now.Add(2 * releaseMinGap)
	if r.check(now) {
		t.Fatal("released on zero statistics")
	}
}

// garbage is a package variable so that the compiler keeps the allocations.
var garbage []byte

// The releaser on the real runtime: garbage that a collection would free is held until the release, and
// the release gives it back to the kernel.
func TestIdleReleaserOnTheRuntime(t *testing.T) {
	r, err := newIdleReleaser(zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	// No collection of its own while the test makes garbage (restored at the end).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// 64 MiB that stay live, then 256 MiB of garbage in 64 KiB pieces.
	keep := make([][]byte, 0, 1024)
	for range 1024 {
		keep = append(keep, make([]byte, 64<<10))
	}
	runtime.GC()
	for range 4096 {
		garbage = make([]byte, 64<<10)
	}
	garbage = nil
	before := readHeapStats()
	if before.held < before.live+128<<20 {
		t.Fatalf("with the collector off, held %d and live %d: want 256 MiB of garbage held", before.held, before.live)
	}
	r.prevAllocated = before.allocated // the interval since looks idle
	if !r.check(time.Now()) {
		t.Fatalf("no release: held %d, live %d", before.held, before.live)
	}
	after := readHeapStats()
	if after.held >= before.held-32<<20 {
		t.Errorf("held %d before the release and %d after: want at least 32 MiB less", before.held, after.held)
	}
	if got := testutil.ToFloat64(r.bytes); got < 32<<20 {
		t.Errorf("released bytes metric = %v, want at least 32 MiB", got)
	}
	runtime.KeepAlive(keep)
}

// fragments is a package variable so that the compiler keeps the allocations.
var fragments [][]byte

// A heap whose excess is free room inside spans that still hold live objects: a collection frees no page
// of it, so a release gives nothing back. The releaser must not take that excess for garbage and run a
// full collection every releaseMinGap for as long as the controller stays idle.
func TestIdleReleaserLeavesAFragmentedHeapAlone(t *testing.T) {
	r, err := newIdleReleaser(zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	// 1 Mi small objects, three in four dropped: every span keeps live objects, so none can be freed.
	all := make([][]byte, 1<<20)
	for i := range all {
		all[i] = make([]byte, 96)
	}
	for i := range all {
		if i%4 != 0 {
			all[i] = nil
		}
	}
	fragments = all
	defer func() { fragments = nil }()
	runtime.GC()
	runtime.GC()
	now := time.Now()
	releases := 0
	for range 4 {
		r.prevAllocated = readHeapStats().allocated // each interval looks idle
		if r.check(now) {
			releases++
		}
		now = now.Add(releaseMinGap)
	}
	if releases > 1 {
		s := readHeapStats()
		t.Errorf("%d releases of an idle heap (live %d, held %d) that no collection can shrink, want at most 1", releases, s.live, s.held)
	}
}
