package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector records what one subscriber received.
type collector[T any] struct {
	mu  sync.Mutex
	got []T
}

func (c *collector[T]) add(v T) {
	c.mu.Lock()
	c.got = append(c.got, v)
	c.mu.Unlock()
}

func (c *collector[T]) values() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func (c *collector[T]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestTopicDeliversEveryValueInOrderToEverySubscriber(t *testing.T) {
	topic := NewTopic[int]("ordered")
	defer topic.Close()
	subs := make([]*collector[int], 3)
	for i := range subs {
		subs[i] = &collector[int]{}
		topic.Subscribe(subs[i].add)
	}
	const n = 1000
	for i := range n {
		topic.Publish(i)
	}
	for i, s := range subs {
		eventually(t, "every value to arrive", func() bool { return s.len() == n })
		if got := s.values(); !slices.Equal(got, seq(n)) {
			t.Errorf("subscriber %d got values out of order or changed", i)
		}
	}
}

func TestTopicSlowSubscriberBlocksNobodyAndLosesNothing(t *testing.T) {
	topic := NewTopic[int]("slow")
	defer topic.Close()
	release := make(chan struct{})
	slow := &collector[int]{}
	topic.Subscribe(func(v int) {
		<-release
		slow.add(v)
	})
	fast := &collector[int]{}
	topic.Subscribe(fast.add)

	const n = 500
	published := make(chan struct{})
	go func() {
		for i := range n {
			topic.Publish(i)
		}
		close(published)
	}()
	receive(t, published, "Publish to return while a subscriber is stuck")
	eventually(t, "the fast subscriber to get everything", func() bool { return fast.len() == n })
	if slow.len() != 0 {
		t.Fatal("the stuck subscriber received values")
	}
	close(release)
	eventually(t, "the slow subscriber to catch up", func() bool { return slow.len() == n })
	if !slices.Equal(slow.values(), seq(n)) {
		t.Error("the slow subscriber lost or reordered values")
	}
}

func TestTopicSubscriberSeesOnlyLaterValues(t *testing.T) {
	topic := NewTopic[string]("late")
	defer topic.Close()
	topic.Publish("before")
	c := &collector[string]{}
	topic.Subscribe(c.add)
	topic.Publish("after")
	eventually(t, "delivery", func() bool { return c.len() == 1 })
	topic.Close()
	if got := c.values(); !slices.Equal(got, []string{"after"}) {
		t.Errorf("got %v, want [after]", got)
	}
}

func TestTopicCancel(t *testing.T) {
	topic := NewTopic[int]("cancel")
	stay, gone := &collector[int]{}, &collector[int]{}
	topic.Subscribe(stay.add)
	cancel := topic.Subscribe(gone.add)
	topic.Publish(1)
	eventually(t, "delivery of 1", func() bool { return gone.len() == 1 })
	cancel()
	cancel() // idempotent
	topic.Publish(2)
	eventually(t, "delivery of 2 to the remaining subscriber", func() bool { return stay.len() == 2 })
	topic.Close() // waits for every subscriber goroutine
	if got := gone.values(); !slices.Equal(got, []int{1}) {
		t.Errorf("cancelled subscriber got %v, want only [1]", got)
	}
}

func TestTopicCancelFromInsideTheSubscriber(t *testing.T) {
	topic := NewTopic[int]("self-cancel")
	c := &collector[int]{}
	var cancel func()
	ready := make(chan struct{})
	cancelled := make(chan struct{})
	cancel = topic.Subscribe(func(v int) {
		<-ready
		c.add(v)
		if v == 3 {
			cancel() // must not deadlock
			close(cancelled)
		}
	})
	for i := range 10 {
		topic.Publish(i + 1) // 4..10 are buffered when 3 cancels
	}
	close(ready)
	receive(t, cancelled, "the subscriber to cancel itself")
	topic.Close()
	if got := c.values(); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("got %v, want delivery to stop right after the cancelling call", got)
	}
}

func TestTopicSubscriberPanicIsContained(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	log, logs := observedLogger()
	topic := NewTopic[int]("panics", WithTopicLogger(log), WithTopicMetrics(NewMetrics(reg)))
	c := &collector[int]{}
	topic.Subscribe(func(v int) {
		if v == 2 {
			panic("subscriber bug")
		}
		c.add(v)
	})
	for i := 1; i <= 3; i++ {
		topic.Publish(i)
	}
	eventually(t, "delivery after the panic", func() bool { return c.len() == 2 })
	topic.Close()
	if got := c.values(); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("got %v, want [1 3]", got)
	}
	if n := gatherByName(t, reg, "panics")["ingress_reactor_pipeline_panics_total"]; n != 1 {
		t.Errorf("panics_total{name=panics} = %v, want 1", n)
	}
	if n := logs.FilterMessage("Panic in topic subscriber; continuing with the next value").Len(); n != 1 {
		t.Errorf("panic logged %d times, want once", n)
	}
}

func TestTopicClose(t *testing.T) {
	topic := NewTopic[int]("closed")
	c := &collector[int]{}
	topic.Subscribe(c.add)
	topic.Close()
	topic.Close() // idempotent
	topic.Publish(1)
	late := &collector[int]{}
	cancel := topic.Subscribe(late.add)
	cancel()
	topic.Publish(2)
	topic.Close()
	if c.len() != 0 || late.len() != 0 {
		t.Errorf("values delivered after Close: %v %v", c.values(), late.values())
	}
}

func TestTopicConcurrentPublishersGiveOneOrder(t *testing.T) {
	topic := NewTopic[int]("concurrent")
	defer topic.Close()
	a, b := &collector[int]{}, &collector[int]{}
	topic.Subscribe(a.add)
	topic.Subscribe(b.add)
	const perPublisher = 300
	var wg sync.WaitGroup
	for p := range 3 {
		wg.Go(func() {
			for i := range perPublisher {
				topic.Publish(p*perPublisher + i)
			}
		})
	}
	wg.Wait()
	eventually(t, "all values", func() bool { return a.len() == 3*perPublisher && b.len() == 3*perPublisher })
	if !slices.Equal(a.values(), b.values()) {
		t.Error("two subscribers saw concurrent publishes in different orders")
	}
	got := a.values()
	slices.Sort(got)
	if !slices.Equal(got, seq(3*perPublisher)) {
		t.Error("values lost or duplicated")
	}
}

func TestTopicPendingMetricShowsASlowSubscriber(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	topic := NewTopic[int]("slow", WithTopicMetrics(m))
	defer topic.Close()
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	topic.Subscribe(func(int) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-block
	})
	topic.Publish(0)
	<-started // the subscriber holds value 0; the next ones wait in its buffer
	for i := 1; i <= 5; i++ {
		topic.Publish(i)
	}
	if got := topicPendingValue(t, reg, "slow"); got != 5 {
		t.Fatalf("pending = %v, want 5 values waiting behind the blocked subscriber", got)
	}
	close(block)
	deadline := time.Now().Add(10 * time.Second)
	for topicPendingValue(t, reg, "slow") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("pending did not drop to 0 after the subscriber caught up")
		}
		time.Sleep(time.Millisecond)
	}
}

func topicPendingValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ingress_reactor_pipeline_topic_pending" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no ingress_reactor_pipeline_topic_pending{name=%q}", name)
	return 0
}

// TestTopicFlushWaitsForEveryDelivery: Flush returns only once every subscriber has handled every value
// published before it, however slow; a Flush whose context ends returns its error.
func TestTopicFlushWaitsForEveryDelivery(t *testing.T) {
	topic := NewTopic[int]("t")
	defer topic.Close()
	var fast, slow collector[int]
	gate := make(chan struct{})
	topic.Subscribe(fast.add)
	topic.Subscribe(func(v int) { <-gate; slow.add(v) })
	for i := range 3 {
		topic.Publish(i)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := topic.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush with a cancelled context while a subscriber is blocked = %v, want context.Canceled", err)
	}

	flushed := make(chan error, 1)
	go func() { flushed <- topic.Flush(context.Background()) }()
	close(gate)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if got := slow.values(); !slices.Equal(got, seq(3)) {
		t.Errorf("slow subscriber had %v when Flush returned, want %v", got, seq(3))
	}
	if got := fast.values(); !slices.Equal(got, seq(3)) {
		t.Errorf("fast subscriber had %v when Flush returned, want %v", got, seq(3))
	}
	if err := topic.Flush(context.Background()); err != nil {
		t.Errorf("Flush with nothing pending = %v", err)
	}
}
