package pipeline

import (
	"context"
	"fmt"
	"github.com/ingress-reactor/ingress-reactor/internal/heapstat"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
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

// burstKeys are the keys of one start-up burst: an Ingress each.
func burstKeys(n int) []types.NamespacedName {
	keys := make([]types.NamespacedName, n)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: fmt.Sprint("ns-", i%100), Name: fmt.Sprint("ingress-", i)}
	}
	return keys
}

// burstQueue is the part of a work queue the burst benchmarks drive.
type burstQueue interface {
	Add(types.NamespacedName)
	Get() (types.NamespacedName, bool)
	finish(types.NamespacedName)
	ShutDown()
}

// clientGoQueue is the stack Queue had before keyQueue: client-go's Typed
// under its delaying and rate-limiting layers, with the same limiter and
// metrics.
type clientGoQueue struct {
	workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

func newClientGoQueue() burstQueue {
	opts := QueueOptions[types.NamespacedName]{Name: "bench"}.withDefaults()
	return clientGoQueue{workqueue.NewTypedRateLimitingQueueWithConfig(newRateLimiter(opts),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{
			Name: opts.Name, MetricsProvider: workqueueProvider{m: NewMetrics(nil)}, Clock: opts.Clock,
		})}
}

func (q clientGoQueue) finish(key types.NamespacedName) {
	q.Forget(key)
	q.Done(key)
}

type pipelineQueue struct{ *Queue[types.NamespacedName] }

func newPipelineQueue() burstQueue {
	return pipelineQueue{NewQueue(QueueOptions[types.NamespacedName]{Name: "bench", Metrics: NewMetrics(nil)})}
}

func (q pipelineQueue) finish(key types.NamespacedName) { q.Finish(key, nil) }

var burstImpls = []struct {
	name string
	new  func() burstQueue
}{
	{"client-go", newClientGoQueue},
	{"pipeline", newPipelineQueue},
}

// BenchmarkQueueBurstRetained pushes a 10,000-key burst (a controller
// starting on 10,000 Ingresses) through a queue with metrics, processes it
// and reports the heap the idle queue still holds (retained-B/op) and the
// cost per key of Add+Get+Finish during the burst (ns/key), for client-go's
// Typed and for keyQueue under the same delaying and rate-limiting layers.
func BenchmarkQueueBurstRetained(b *testing.B) {
	const burst = 10_000
	keys := burstKeys(burst)
	for _, impl := range burstImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			var retained int64
			var busy time.Duration
			for b.Loop() {
				b.StopTimer()
				q := impl.new()
				before := heapstat.Live()
				b.StartTimer()
				start := time.Now()
				for _, k := range keys {
					q.Add(k)
				}
				for range burst {
					k, _ := q.Get()
					q.finish(k)
				}
				busy += time.Since(start)
				b.StopTimer()
				retained += heapstat.Live() - before
				runtime.KeepAlive(q)
				q.ShutDown()
				b.StartTimer()
			}
			b.ReportMetric(float64(retained)/float64(b.N), "retained-B/op")
			b.ReportMetric(float64(busy.Nanoseconds())/float64(b.N*burst), "ns/key")
		})
	}
}

// BenchmarkQueueAddGetDone is the steady-state cost of one Add, Get and
// Finish on one goroutine, keys cycling through 1,024 names, for client-go's
// Typed and for keyQueue under the same layers.
func BenchmarkQueueAddGetDone(b *testing.B) {
	keys := burstKeys(1024)
	for _, impl := range burstImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			q := impl.new()
			defer q.ShutDown()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q.Add(keys[i%len(keys)])
				k, _ := q.Get()
				q.finish(k)
				i++
			}
		})
	}
}

// BenchmarkTopicBurstRetained publishes a burst of 10,000 values of 120 bytes (the size of an
// EndpointsChange) in rounds of 2,500 to one subscriber that is busy with the first value of each round
// until the round is in, and reports the heap the idle subscription still holds once everything is
// delivered (retained-B/op): the buffers it keeps for reuse.
//
//	go test -run '^$' -bench TopicBurstRetained -benchtime 3x ./pipeline/
func BenchmarkTopicBurstRetained(b *testing.B) {
	type value [120]byte
	var retained int64
	for range b.N {
		topic := NewTopic[value]("bench")
		gate := make(chan struct{})
		before := heapstat.Live()
		topic.Subscribe(func(v value) {
			if v[0] == 1 { // the first of a round
				<-gate
			}
		})
		for range 4 {
			for i := range 2_500 {
				topic.Publish(value{0: byte(min(i, 1) ^ 1)})
			}
			gate <- struct{}{}
			if err := topic.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		retained += heapstat.Live() - before
		topic.Close()
	}
	b.ReportMetric(float64(retained)/float64(b.N), "retained-B/op")
}
