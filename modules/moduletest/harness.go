package moduletest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// WaitLimit bounds every wait of Eventually; a passing test never gets near it, it only ends a broken one.
const WaitLimit = 10 * time.Second

// Eventually polls cond until it holds and fails the test, naming what it waited for, after WaitLimit.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(WaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", WaitLimit, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Harness is what a module needs around it in a unit test: a fake clientset with its informer factory,
// metrics, an Event recorder, a logger whose entries the test can read, and the IngressChange topic.
// Build the module from its fields, then Start the harness (and the module with Run).
type Harness struct {
	Client         *fake.Clientset
	Factory        informers.SharedInformerFactory
	Registry       *prometheus.Registry
	Metrics        *pipeline.Metrics
	Recorder       *Recorder
	Log            *zap.Logger
	Logs           *observer.ObservedLogs
	IngressChanges *pipeline.Topic[modules.IngressChange]
	// Announced is the class filter's one-shot "existing Ingresses announced" signal.
	Announced *modules.IngressesAnnounced
	// Ctx ends when the test does.
	Ctx context.Context

	tb testing.TB
}

// New returns a Harness over a fake API holding objs. Install reactors on Client before Start: the fake's
// reactor chain is not safe to change while informers use it.
func New(tb testing.TB, objs ...runtime.Object) *Harness {
	tb.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	client := fake.NewClientset(objs...)
	ctx, cancel := context.WithCancel(context.Background())
	h := &Harness{
		Client:         client,
		Factory:        informers.NewSharedInformerFactory(client, 0),
		Registry:       reg,
		Metrics:        pipeline.NewMetrics(reg),
		Recorder:       &Recorder{},
		Log:            zap.New(core),
		Logs:           logs,
		IngressChanges: pipeline.NewTopic[modules.IngressChange]("ingress-changes"),
		Announced:      modules.NewIngressesAnnounced(),
		Ctx:            ctx,
		tb:             tb,
	}
	tb.Cleanup(func() {
		cancel()
		h.Factory.Shutdown()
		h.IngressChanges.Close()
	})
	return h
}

// Start starts the informers the module registered and waits until their caches are synced.
func (h *Harness) Start() {
	h.tb.Helper()
	h.Factory.Start(h.Ctx.Done())
	for typ, ok := range h.Factory.WaitForCacheSync(h.Ctx.Done()) {
		if !ok {
			h.tb.Fatalf("cache of %v did not sync", typ)
		}
	}
}

// Run starts r and stops it, within WaitLimit, when the test ends (before the informers stop).
func (h *Harness) Run(r modules.Runnable) {
	h.tb.Helper()
	r.Start(h.Ctx)
	h.tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			h.tb.Errorf("Stop: %v", err)
		}
	})
}

// Collector keeps every message published on a topic, in order.
type Collector[T any] struct {
	mu  sync.Mutex
	got []T
}

// Collect subscribes to topic; subscribe before the module publishes.
func Collect[T any](topic *pipeline.Topic[T]) *Collector[T] {
	c := &Collector[T]{}
	topic.Subscribe(func(v T) {
		c.mu.Lock()
		c.got = append(c.got, v)
		c.mu.Unlock()
	})
	return c
}

// All returns the messages received so far.
func (c *Collector[T]) All() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]T(nil), c.got...)
}

// Take returns the messages received since the last Take and forgets them.
func (c *Collector[T]) Take() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.got
	c.got = nil
	return out
}

// WaitFor waits until a message received since the last Take satisfies match and returns the messages
// received until then, forgetting them.
func (c *Collector[T]) WaitFor(tb testing.TB, what string, match func(T) bool) []T {
	tb.Helper()
	var out []T
	Eventually(tb, what, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, v := range c.got {
			if match(v) {
				out = c.got[:i+1]
				c.got = append([]T(nil), c.got[i+1:]...)
				return true
			}
		}
		return false
	})
	return out
}
