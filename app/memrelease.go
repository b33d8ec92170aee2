package app

import (
	"context"
	"flag"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
)

// Giving memory back once the controller is idle (--release-idle-memory).
//
// The controller's heap is mostly long-lived state (informer caches, translations, the model), and it
// allocates in bursts: the start's full listing, many changes at once. At Go's default pace the heap grows
// to about twice the live heap before a collection, and the runtime's background scavenger only returns
// pages above that goal, slowly. So after each burst the process keeps holding about twice what it
// uses, for as long as it stays idle, which is most of its life. The releaser watches the runtime's own
// numbers; once an interval passes with little allocation and the heap holds much more than the live
// heap, it collects and returns the free pages to the kernel (debug.FreeOSMemory). It does not lower the
// peak a burst reaches: a container limit must still be sized for the peak (docs/benchmarks.md).

const (
	// releaseCheckEvery is how often the releaser reads the runtime's numbers.
	releaseCheckEvery = 5 * time.Second
	// releaseMinGap is the least time between two releases: each one is a full collection.
	releaseMinGap = 10 * time.Second
	// releaseMinExcess is the least memory held beyond the live heap that is worth a release. With it and
	// a sixteenth of the live heap (whichever is more), a release costs at most one collection per so much
	// allocated while idle (metrics scrapes, status updates), a small cost for holding about the live
	// heap. A quarter of the live heap missed the free pages left
	// after a burst when they came to a little less (10,000 TLS Ingresses: about 25 MiB kept), and an
	// eighth with 16 MiB the 9 MiB left at 11,000 once the live heap was down to 75 MB.
	releaseMinExcess = 8 << 20
)

func bindIdleMemoryFlags(fs *flag.FlagSet, c *Config) {
	fs.BoolVar(&c.ReleaseIdleMemory, "release-idle-memory", c.ReleaseIdleMemory, "Once the controller is idle after a burst of work (its start, many "+
		"changes at once), run a garbage collection and give the heap's free memory back to the kernel, so that an idle controller holds about its live "+
		"heap instead of up to twice it. At most once every 10 s, and only when 5 s passed allocating less than a sixteenth of the live heap and "+
		"garbage and free memory add up to a sixteenth of the live heap (and 8 MiB). The peak during a burst is unchanged (docs/benchmarks.md#controller-memory).")
}

// heapStats are the runtime numbers the releaser decides on, all in bytes.
type heapStats struct {
	// allocated is the total ever allocated on the heap (/gc/heap/allocs:bytes).
	allocated uint64
	// live is the heap the last collection found reachable (/gc/heap/live:bytes).
	live uint64
	// held is the heap memory a collection and a release can give back, beside the live heap: objects,
	// live or dead, and free spans not returned yet (/memory/classes/heap/{objects,free}:bytes). Unused
	// space inside spans that hold live objects stays, so it is not counted: a heap fragmented by churn
	// would otherwise look worth a release after every release.
	held uint64
	// released is the heap memory returned to the kernel (/memory/classes/heap/released:bytes).
	released uint64
}

var heapStatNames = []string{
	"/gc/heap/allocs:bytes",
	"/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

// readHeapStats reads the running process's heapStats.
func readHeapStats() heapStats {
	samples := make([]metrics.Sample, len(heapStatNames))
	for i, n := range heapStatNames {
		samples[i].Name = n
	}
	metrics.Read(samples)
	v := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0 // a name this runtime does not know; the checks below then never release
		}
		return samples[i].Value.Uint64()
	}
	return heapStats{allocated: v(0), live: v(1), held: v(2) + v(3), released: v(4)}
}

// idleReleaser decides when to release; read and release are the runtime's (tests replace them).
type idleReleaser struct {
	read    func() heapStats
	release func()
	log     *zap.Logger

	releases prometheus.Counter
	bytes    prometheus.Counter

	prevAllocated uint64
	lastRelease   time.Time
}

func newIdleReleaser(log *zap.Logger, reg prometheus.Registerer) (*idleReleaser, error) {
	r := &idleReleaser{
		read:    readHeapStats,
		release: debug.FreeOSMemory,
		log:     log,
		releases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ingress_reactor_idle_memory_releases_total",
			Help: "Times the idle controller collected its heap and gave the free memory back to the kernel (--release-idle-memory).",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ingress_reactor_idle_memory_released_bytes_total",
			Help: "Heap memory given back to the kernel by those releases.",
		}),
	}
	for _, c := range []prometheus.Collector{r.releases, r.bytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	r.prevAllocated = r.read().allocated
	return r, nil
}

// check runs once per releaseCheckEvery and releases when the interval since the previous check was idle
// and the heap holds enough beyond its live part. It reports whether it released.
func (r *idleReleaser) check(now time.Time) bool {
	s := r.read()
	allocated := s.allocated - r.prevAllocated
	r.prevAllocated = s.allocated
	if s.live == 0 || s.held <= s.live {
		return false
	}
	excess := s.held - s.live
	idle := allocated < s.live/16
	worth := excess >= releaseMinExcess && excess >= s.live/16
	if !idle || !worth || (!r.lastRelease.IsZero() && now.Sub(r.lastRelease) < releaseMinGap) {
		return false
	}
	began := time.Now()
	r.release()
	after := r.read()
	r.prevAllocated = after.allocated
	r.lastRelease = now
	var given uint64
	if after.released > s.released {
		given = after.released - s.released
	}
	r.releases.Inc()
	r.bytes.Add(float64(given))
	r.log.Debug("idle: heap collected and free memory given back", zap.Uint64("live-bytes", after.live),
		zap.Uint64("held-before-bytes", s.held), zap.Uint64("held-after-bytes", after.held),
		zap.Uint64("released-bytes", given), zap.Duration("took", time.Since(began)))
	return true
}

// IdleMemoryParams are runIdleMemoryRelease's fx inputs.
type IdleMemoryParams struct {
	fx.In
	Config    Config
	Log       *zap.Logger
	Registry  prometheus.Registerer
	Lifecycle fx.Lifecycle
}

// runIdleMemoryRelease checks every releaseCheckEvery, from start to stop, whether to release idle memory.
func runIdleMemoryRelease(p IdleMemoryParams) error {
	if !p.Config.ReleaseIdleMemory {
		return nil
	}
	r, err := newIdleReleaser(p.Log.Named("memory"), p.Registry)
	if err != nil {
		return err
	}
	stop, done := make(chan struct{}), make(chan struct{})
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			go func() {
				defer close(done)
				every(releaseCheckEvery, stop, func(now time.Time) { r.check(now) })
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			close(stop)
			select {
			case <-done:
			case <-ctx.Done():
			}
			return nil
		},
	})
	return nil
}
