package pipeline

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// benchWorkers are the worker counts both queue benchmarks run with.
var benchWorkers = []int{1, 2, 4}

// benchWindow bounds how many keys the queue benchmarks' producer may be
// ahead of the workers. Without it the producer outruns them, the queue's
// internal maps grow to millions of entries and the benchmark measures map
// growth instead of the per-item path. Keys are all distinct, so none is
// de-duplicated and every add is one sync.
const benchWindow = 1024

// queueBench is the producer and the trivial work shared by
// BenchmarkController and BenchmarkRawWorkqueue.
type queueBench struct {
	n        int64
	synced   atomic.Int64
	window   chan struct{}
	finished chan struct{}
}

func newQueueBench(n int) *queueBench {
	return &queueBench{n: int64(n), window: make(chan struct{}, benchWindow), finished: make(chan struct{})}
}

// work is the sync function: it frees a window slot and counts.
func (qb *queueBench) work(_ context.Context, _ int) error {
	<-qb.window
	if qb.synced.Add(1) == qb.n {
		close(qb.finished)
	}
	return nil
}

// run adds n keys through add, waits until all are synced and reports.
func (qb *queueBench) run(b *testing.B, add func(int)) {
	b.ReportAllocs()
	b.ResetTimer()
	start, startCPU := time.Now(), processCPUTime()
	for i := range b.N {
		qb.window <- struct{}{}
		add(i)
	}
	<-qb.finished
	elapsed, cpu := time.Since(start), processCPUTime()-startCPU
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkController measures items per second through a Controller with a
// trivial SyncFunc. Compare with BenchmarkRawWorkqueue, which does the same
// over client-go directly.
func BenchmarkController(b *testing.B) {
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			qb := newQueueBench(b.N)
			q := NewQueue(QueueOptions[int]{Name: "bench"})
			c := NewController(q, qb.work, ControllerOptions{Workers: workers})
			c.Start(context.Background())
			qb.run(b, q.Add)
			if err := c.Stop(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRawWorkqueue is the baseline for BenchmarkController: the usual
// hand-written worker loop over client-go's typed rate-limiting queue, with
// the same rate limiters and the same trivial work.
func BenchmarkRawWorkqueue(b *testing.B) {
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			qb := newQueueBench(b.N)
			q := workqueue.NewTypedRateLimitingQueueWithConfig(
				workqueue.NewTypedMaxOfRateLimiter(
					workqueue.NewTypedItemExponentialFailureRateLimiter[int](DefaultBaseDelay, DefaultMaxDelay),
					&workqueue.TypedBucketRateLimiter[int]{Limiter: rate.NewLimiter(DefaultQPS, DefaultBurst)},
				),
				workqueue.TypedRateLimitingQueueConfig[int]{},
			)
			ctx := context.Background()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for {
						key, shutdown := q.Get()
						if shutdown {
							return
						}
						func() {
							defer q.Done(key)
							if err := qb.work(ctx, key); err != nil {
								q.AddRateLimited(key)
								return
							}
							q.Forget(key)
						}()
					}
				})
			}
			qb.run(b, q.Add)
			q.ShutDown()
			wg.Wait()
		})
	}
}

// BenchmarkTopic measures the cost of one Publish fanned out to 1, 8 and 64
// subscribers, up to delivery: the clock stops when every subscriber has
// received every value.
func BenchmarkTopic(b *testing.B) {
	for _, subs := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			topic := NewTopic[int]("bench")
			n := int64(b.N)
			var delivered sync.WaitGroup
			delivered.Add(subs)
			for range subs {
				var got atomic.Int64
				topic.Subscribe(func(int) {
					if got.Add(1) == n {
						delivered.Done()
					}
				})
			}
			b.ReportAllocs()
			b.ResetTimer()
			startCPU := processCPUTime()
			for i := range b.N {
				topic.Publish(i)
			}
			delivered.Wait()
			b.StopTimer()
			b.ReportMetric(float64((processCPUTime()-startCPU).Nanoseconds())/float64(b.N), "cpu-ns/op")
			topic.Close()
		})
	}
}
