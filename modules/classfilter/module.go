package classfilter

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires the class filter into the application.
var Module = fx.Module("classfilter",
	fx.Provide(New),
	fx.Invoke(func(*ClassFilter) {}),
)

// byClass indexes Ingresses by the class name they refer to ("" for none).
const byClass = "class"

// Params are the class filter's fx inputs.
type Params struct {
	fx.In
	Options   Options
	Factory   informers.SharedInformerFactory
	Changes   *pipeline.Topic[modules.IngressChange]
	Announced *modules.IngressesAnnounced
	Metrics   *pipeline.Metrics
	Registry  prometheus.Registerer
	Log       *zap.Logger
	Lifecycle fx.Lifecycle `optional:"true"`
}

// ClassFilter watches Ingresses and IngressClasses and publishes IngressChange for the Ingresses that are
// or were ours.
type ClassFilter struct {
	filter    *Filter
	ingress   listersv1.IngressLister
	indexer   cache.Indexer
	changes   *pipeline.Topic[modules.IngressChange]
	announced *modules.IngressesAnnounced
	ctrl      *pipeline.Controller[types.NamespacedName]
	accepted  prometheus.Gauge
	synced    []cache.InformerSynced
	log       *zap.Logger

	mu   sync.Mutex
	ours map[types.NamespacedName]struct{}
}

// New builds the class filter and registers its informer handlers. Without fx, pass a nil Lifecycle and call
// Start and Stop yourself.
func New(p Params) (*ClassFilter, error) {
	ingInf := p.Factory.Networking().V1().Ingresses()
	classInf := p.Factory.Networking().V1().IngressClasses()
	if err := ingInf.Informer().AddIndexers(cache.Indexers{byClass: func(obj any) ([]string, error) {
		ing, ok := obj.(*networkingv1.Ingress)
		if !ok {
			return nil, nil
		}
		return []string{classOf(ing)}, nil
	}}); err != nil {
		return nil, fmt.Errorf("classfilter: add ingress index: %w", err)
	}
	log := p.Log.Named("classfilter")
	c := &ClassFilter{
		filter:    NewFilter(p.Options, classInf.Lister()),
		ingress:   ingInf.Lister(),
		indexer:   ingInf.Informer().GetIndexer(),
		changes:   p.Changes,
		announced: p.Announced,
		accepted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_ingresses_accepted",
			Help: "Ingresses this controller currently serves (after class filtering).",
		}),
		synced: []cache.InformerSynced{ingInf.Informer().HasSynced, classInf.Informer().HasSynced},
		log:    log,
		ours:   map[types.NamespacedName]struct{}{},
	}
	if err := p.Registry.Register(c.accepted); err != nil {
		return nil, fmt.Errorf("classfilter: register metrics: %w", err)
	}
	q := pipeline.NewQueue(pipeline.QueueOptions[types.NamespacedName]{
		Name: "classfilter", Metrics: p.Metrics, Logger: log,
		QPS: 100, Burst: 1000,
	})
	c.ctrl = pipeline.NewController(q, c.sync, pipeline.ControllerOptions{Workers: 2})

	_, err := ingInf.Informer().AddEventHandler(pipeline.Handler[types.NamespacedName]{
		Keys:         keyOf,
		UpdateFilter: specOrMetaChanged,
	}.For(q))
	if err != nil {
		return nil, fmt.Errorf("classfilter: ingress handler: %w", err)
	}
	_, err = classInf.Informer().AddEventHandler(pipeline.Handler[types.NamespacedName]{
		Keys: c.ingressesOfClass,
	}.For(q))
	if err != nil {
		return nil, fmt.Errorf("classfilter: ingressclass handler: %w", err)
	}
	modules.Bind(p.Lifecycle, c)
	return c, nil
}

// Start waits for the caches in the background, then starts processing.
func (c *ClassFilter) Start(ctx context.Context) {
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
			return
		}
		// Announce every existing Ingress before the signal; the queue holds them too, and processing
		// them again later only repeats the same announcement.
		all, err := c.ingress.List(labels.Everything())
		if err != nil {
			c.log.Error("list ingresses", zap.Error(err))
		}
		for _, ing := range all {
			key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
			if err := c.sync(ctx, key); err != nil {
				c.ctrl.Queue().AddRateLimited(key)
			}
		}
		c.ctrl.Start(ctx)
		// The signal travels apart from the topic: it may fire only once every subscriber has taken in
		// the announcements above.
		if err := c.changes.Flush(ctx); err != nil {
			return // stopping
		}
		c.announced.Announce()
	}()
}

// Stop stops processing, letting in-flight work finish within ctx.
func (c *ClassFilter) Stop(ctx context.Context) error { return c.ctrl.Stop(ctx) }

// Accepted returns the Ingresses currently served, for tests and diagnostics.
func (c *ClassFilter) Accepted() map[types.NamespacedName]struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.ours)
}

func (c *ClassFilter) sync(_ context.Context, key types.NamespacedName) error {
	ing, err := c.ingress.Ingresses(key.Namespace).Get(key.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get ingress %s: %w", key, err)
	}
	accepted := err == nil && c.filter.Accepts(ing)

	c.mu.Lock()
	_, was := c.ours[key]
	if accepted {
		c.ours[key] = struct{}{}
	} else {
		delete(c.ours, key)
	}
	c.accepted.Set(float64(len(c.ours)))
	c.mu.Unlock()

	switch {
	case accepted:
		if !was {
			c.log.Info("ingress accepted", zap.Stringer("ingress", key))
		}
		c.changes.Publish(modules.IngressChange{Key: key, Accepted: true})
	case was:
		c.log.Info("ingress no longer ours", zap.Stringer("ingress", key), zap.Bool("deleted", ing == nil))
		c.changes.Publish(modules.IngressChange{Key: key, Accepted: false})
	}
	return nil
}

// ingressesOfClass returns the Ingresses an IngressClass change can affect: those naming it, and those naming
// no class (the default-class annotation may have moved).
func (c *ClassFilter) ingressesOfClass(obj any) []types.NamespacedName {
	class, ok := obj.(*networkingv1.IngressClass)
	if !ok {
		return nil
	}
	var keys []types.NamespacedName
	for _, idx := range []string{class.Name, ""} {
		objs, err := c.indexer.ByIndex(byClass, idx)
		if err != nil {
			continue
		}
		for _, o := range objs {
			keys = append(keys, keyOf(o)...)
		}
	}
	return keys
}

func keyOf(obj any) []types.NamespacedName {
	k, ok := pipeline.KeyOf(obj)
	if !ok {
		return nil
	}
	return []types.NamespacedName{k}
}

// specOrMetaChanged skips status-only updates (for example our own status writes) and resyncs.
func specOrMetaChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*networkingv1.Ingress)
	n, ok2 := newObj.(*networkingv1.Ingress)
	if !ok1 || !ok2 {
		return true
	}
	if o.ResourceVersion == n.ResourceVersion {
		return false
	}
	return o.Generation != n.Generation || o.Generation == 0 ||
		!maps.Equal(o.Annotations, n.Annotations) || !maps.Equal(o.Labels, n.Labels)
}
