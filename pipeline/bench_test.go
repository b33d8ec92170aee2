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

// BenchmarkController measures items per second through a Controller: b.N
// distinct keys are added and synced by a trivial SyncFunc. Compare with
// BenchmarkRawWorkqueue, which does the same over client-go directly.
func BenchmarkController(b *testing.B) {
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var synced atomic.Int64
			finished := make(chan struct{})
			n := int64(b.N)
			q := NewQueue(QueueOptions[int]{Name: "bench"})
			c := NewController(q, func(_ context.Context, _ int) error {
				if synced.Add(1) == n {
					close(finished)
				}
				return nil
			}, ControllerOptions{Workers: workers})
			c.Start(context.Background())
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				q.Add(i)
			}
			<-finished
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
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
			var synced atomic.Int64
			finished := make(chan struct{})
			n := int64(b.N)
			work := func(_ context.Context, _ int) error {
				if synced.Add(1) == n {
					close(finished)
				}
				return nil
			}
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
							if err := work(ctx, key); err != nil {
								q.AddRateLimited(key)
								return
							}
							q.Forget(key)
						}()
					}
				})
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				q.Add(i)
			}
			<-finished
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
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
			for i := range b.N {
				topic.Publish(i)
			}
			delivered.Wait()
			b.StopTimer()
			topic.Close()
		})
	}
}
