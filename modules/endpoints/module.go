package endpoints

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	listersnetv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires the endpoint watcher into the application.
var Module = fx.Module("endpoints",
	fx.Provide(New),
	fx.Invoke(func(*Watcher) {}),
)

// laneWorkers is how many Services the endpoint lane syncs at once.
const laneWorkers = 4

// Options configure the endpoint watcher.
type Options struct {
	// DefaultBackend is --default-backend-service; its ports are always watched.
	DefaultBackend types.NamespacedName
	// ExternalNameRefresh is how often ExternalName Services are resolved again; default 30s.
	ExternalNameRefresh time.Duration
	// ExternalNameTimeout bounds one DNS lookup of an ExternalName Service; default 5s.
	ExternalNameTimeout time.Duration
	// Resolver resolves ExternalName Services; nil means net.DefaultResolver.
	Resolver Resolver
	// AllowLoopback lets loopback addresses through (local mode, whose demo backends run on 127.0.0.1).
	// In a cluster they are always dropped, with link-local, unspecified and multicast addresses: an
	// ExternalName Service resolving to 127.0.0.1 would otherwise reach NGINX's internal server.
	AllowLoopback bool
}

// Params are the endpoint watcher's fx inputs.
type Params struct {
	fx.In
	Options        Options
	Factory        informers.SharedInformerFactory
	IngressChanges *pipeline.Topic[modules.IngressChange]
	Endpoints      *pipeline.Topic[modules.EndpointsChange]
	// Rendered, when given, keeps every upstream of the rendered model watched, also one that no current
	// Ingress version names: the renderer serves a rejected update's last good version, whose upstreams
	// must keep their endpoints.
	Rendered *pipeline.Topic[modules.Rendered] `optional:"true"`
	// Streams, when given, keeps the upstreams of the TCP and UDP services watched.
	Streams   *pipeline.Topic[modules.StreamUpstreams] `optional:"true"`
	Metrics   *pipeline.Metrics
	Registry  prometheus.Registerer
	Log       *zap.Logger
	Lifecycle fx.Lifecycle `optional:"true"`
}

// Watcher keeps the endpoint lists of every upstream an accepted Ingress uses, and publishes changes.
type Watcher struct {
	opts      Options
	ingresses listersnetv1.IngressLister
	services  listerscorev1.ServiceLister
	slices    cache.Indexer
	// sliceNames lists, per Service, the names of its EndpointSlices (in the Service's namespace), kept by
	// the slice handler before it queues the Service. A client-go index would keep a set (a map) per
	// Service: three times the memory at 10,000 Services with a slice or two each.
	sliceNamesMu sync.Mutex
	sliceNames   map[types.NamespacedName][]string
	out          *pipeline.Topic[modules.EndpointsChange]
	ctrl         *pipeline.Controller[types.NamespacedName]
	synced       []cache.InformerSynced
	log          *zap.Logger
	published    *prometheus.CounterVec
	names        *nameCache

	mu sync.Mutex
	// byIngress holds the upstreams each accepted Ingress uses, and those of the rendered model
	// (modelReferrer).
	byIngress map[types.NamespacedName][]nginx.Upstream
	// refs counts, per Service and upstream, how many Ingresses use it. A Service has few upstreams
	// (one per port an Ingress names), so a short slice per Service holds them: at 10,000 Services it
	// takes a third of the memory of a map per Service with a pointer per upstream.
	refs map[types.NamespacedName][]ref

	// last holds what was published per Service; sync, which never runs twice for one Service at a time,
	// takes a Service's entry and stores it back.
	lastMu sync.Mutex
	last   map[types.NamespacedName][]published
}

// published is the endpoint list last published for one upstream. A Service's few upstreams are kept in
// a short slice rather than a map of their own, which would take several times the memory.
type published struct {
	name      nginx.UpstreamName
	endpoints []nginx.Endpoint
}

type ref struct {
	up nginx.Upstream
	n  int
}

// refIndex returns the position of the upstream named name in refs, or -1.
func refIndex(refs []ref, name nginx.UpstreamName) int {
	return slices.IndexFunc(refs, func(r ref) bool { return r.up.Name == name })
}

// New builds the watcher and registers its informer handlers and topic subscription.
func New(p Params) (*Watcher, error) {
	if p.Options.ExternalNameRefresh <= 0 {
		p.Options.ExternalNameRefresh = 30 * time.Second
	}
	if p.Options.ExternalNameTimeout <= 0 {
		p.Options.ExternalNameTimeout = 5 * time.Second
	}
	if p.Options.Resolver == nil {
		p.Options.Resolver = net.DefaultResolver
	}
	sliceInf := p.Factory.Discovery().V1().EndpointSlices().Informer()
	svcInf := p.Factory.Core().V1().Services().Informer()
	ingInf := p.Factory.Networking().V1().Ingresses().Informer()
	log := p.Log.Named("endpoints")
	w := &Watcher{
		opts:      p.Options,
		ingresses: p.Factory.Networking().V1().Ingresses().Lister(),
		services:  p.Factory.Core().V1().Services().Lister(),
		slices:    sliceInf.GetIndexer(),
		out:       p.Endpoints,
		synced:    []cache.InformerSynced{sliceInf.HasSynced, svcInf.HasSynced, ingInf.HasSynced},
		log:       log,
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_endpoints_changes_total",
			Help: "Endpoint lists published to the endpoint lane, by kind (update, remove).",
		}, []string{"kind"}),
		byIngress:  map[types.NamespacedName][]nginx.Upstream{},
		sliceNames: map[types.NamespacedName][]string{},
		refs:       map[types.NamespacedName][]ref{},
		last:       map[types.NamespacedName][]published{},
	}
	if err := p.Registry.Register(w.published); err != nil {
		return nil, fmt.Errorf("endpoints: register metrics: %w", err)
	}
	q := pipeline.NewQueue(pipeline.QueueOptions[types.NamespacedName]{
		Name: "endpoints", Metrics: p.Metrics, Logger: log,
		// QPS and Burst shape retries only (pipeline.QueueOptions); high, so that failing Services during
		// rolling updates of many at once do not hold each other's retries back.
		QPS: 500, Burst: 5000,
	})
	w.ctrl = pipeline.NewController(q, w.sync, pipeline.ControllerOptions{Workers: laneWorkers})
	w.names = newNameCache(p.Options.Resolver, p.Options.ExternalNameTimeout, p.Options.ExternalNameRefresh,
		func(k types.NamespacedName, after time.Duration) {
			if after <= 0 {
				q.Add(k)
			} else {
				q.AddAfter(k, after)
			}
		})
	if p.Options.DefaultBackend.Name != "" {
		w.refs[p.Options.DefaultBackend] = []ref{}
	}

	// One handler both indexes a slice and queues its Service, so a sync never runs on an index that
	// lacks the slice whose event queued it.
	sliceReg, err := sliceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.sliceChanged(nil, obj, q) },
		UpdateFunc: func(oldObj, newObj any) {
			if pipeline.ResourceVersionChanged(oldObj, newObj) {
				w.sliceChanged(oldObj, newObj, q)
			}
		},
		DeleteFunc: func(obj any) { w.sliceChanged(obj, nil, q) },
	})
	if err != nil {
		return nil, fmt.Errorf("endpoints: slice handler: %w", err)
	}
	// Synced once the handler has indexed every slice of the initial list, not only once the cache has.
	w.synced = append(w.synced, sliceReg.HasSynced)
	if _, err := svcInf.AddEventHandler(pipeline.Handler[types.NamespacedName]{
		Keys:         w.referencedService,
		UpdateFilter: pipeline.ResourceVersionChanged,
	}.For(q)); err != nil {
		return nil, fmt.Errorf("endpoints: service handler: %w", err)
	}
	p.IngressChanges.Subscribe(func(c modules.IngressChange) {
		for _, svc := range w.ingressChanged(c) {
			q.Add(svc)
		}
	})
	if p.Rendered != nil {
		p.Rendered.Subscribe(func(r modules.Rendered) {
			for _, svc := range w.referencesChanged(modelReferrer, r.Model.Upstreams) {
				q.Add(svc)
			}
		})
	}
	if p.Streams != nil {
		p.Streams.Subscribe(func(s modules.StreamUpstreams) {
			for _, svc := range w.referencesChanged(streamsReferrer, s.Upstreams) {
				q.Add(svc)
			}
		})
	}
	modules.Bind(p.Lifecycle, w)
	return w, nil
}

// Start waits for the caches in the background, then starts the workers. The default backend Service,
// if any, is resolved right away.
func (w *Watcher) Start(ctx context.Context) {
	w.names.start(ctx)
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
			return
		}
		w.ctrl.Start(ctx)
		if w.opts.DefaultBackend.Name != "" {
			w.ctrl.Queue().Add(w.opts.DefaultBackend)
		}
	}()
}

// Stop stops the workers, letting in-flight work finish within ctx.
func (w *Watcher) Stop(ctx context.Context) error { return w.ctrl.Stop(ctx) }

// modelReferrer holds, beside the Ingresses, the upstreams of the latest rendered model. No Ingress can
// have its name: a NUL byte is not valid in one.
var modelReferrer = types.NamespacedName{Name: "\x00rendered-model"}

// streamsReferrer holds the upstreams of the TCP and UDP services.
var streamsReferrer = types.NamespacedName{Name: "\x00stream-services"}

// ingressChanged updates the reference counts for one Ingress and returns the Services whose upstream set changed.
func (w *Watcher) ingressChanged(c modules.IngressChange) []types.NamespacedName {
	var now []nginx.Upstream
	if c.Accepted {
		if ing, err := w.ingresses.Ingresses(c.Key.Namespace).Get(c.Key.Name); err == nil {
			now = nginx.UpstreamsOf(ing)
		}
	}
	return w.referencesChanged(c.Key, now)
}

// referencesChanged sets the upstreams that referrer (an Ingress, or modelReferrer) uses and returns the
// Services whose upstream set changed.
func (w *Watcher) referencesChanged(referrer types.NamespacedName, now []nginx.Upstream) []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := w.byIngress[referrer]
	if slices.Equal(before, now) {
		return nil
	}
	// Only what differs changes a count: the rendered model lists every upstream, and one change must
	// not queue every Service.
	removed, added := upstreamsDiff(before, now)
	affected := map[types.NamespacedName]struct{}{}
	for _, up := range removed {
		refs, ok := w.refs[up.Service]
		if i := refIndex(refs, up.Name); i >= 0 {
			if refs[i].n--; refs[i].n == 0 {
				refs = slices.Delete(refs, i, i+1)
			}
		}
		if ok {
			if len(refs) == 0 && up.Service != w.opts.DefaultBackend {
				delete(w.refs, up.Service)
			} else {
				w.refs[up.Service] = refs
			}
		}
		affected[up.Service] = struct{}{}
	}
	for _, up := range added {
		refs := w.refs[up.Service]
		if i := refIndex(refs, up.Name); i >= 0 {
			refs[i].n++
		} else {
			refs = append(refs, ref{up: up, n: 1})
		}
		w.refs[up.Service] = refs
		affected[up.Service] = struct{}{}
	}
	if len(now) == 0 {
		delete(w.byIngress, referrer)
	} else {
		w.byIngress[referrer] = now
	}
	out := make([]types.NamespacedName, 0, len(affected))
	for k := range affected {
		out = append(out, k)
	}
	return out
}

// upstreamsDiff returns the upstreams of before that now lacks, and those of now that before lacks.
// Upstream lists are sorted by name (the model's, UpstreamsOf's); unsorted ones are sorted first.
func upstreamsDiff(before, now []nginx.Upstream) (removed, added []nginx.Upstream) {
	byName := func(a, b nginx.Upstream) int { return strings.Compare(string(a.Name), string(b.Name)) }
	if !slices.IsSortedFunc(before, byName) {
		before = slices.SortedFunc(slices.Values(before), byName)
	}
	if !slices.IsSortedFunc(now, byName) {
		now = slices.SortedFunc(slices.Values(now), byName)
	}
	for len(before) > 0 || len(now) > 0 {
		switch {
		case len(now) == 0 || len(before) > 0 && byName(before[0], now[0]) < 0:
			removed, before = append(removed, before[0]), before[1:]
		case len(before) == 0 || byName(now[0], before[0]) < 0:
			added, now = append(added, now[0]), now[1:]
		default:
			if before[0] != now[0] { // the same name, another value: cannot happen with derived names
				removed, added = append(removed, before[0]), append(added, now[0])
			}
			before, now = before[1:], now[1:]
		}
	}
	return removed, added
}

// upstreamsOfService returns the upstreams that currently use a Service. For the default backend
// Service every port is an upstream, numbered, as the renderer names them.
func (w *Watcher) upstreamsOfService(key types.NamespacedName, svc *corev1.Service) ([]nginx.Upstream, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	refs, ok := w.refs[key]
	if !ok {
		return nil, false
	}
	ups := make([]nginx.Upstream, 0, len(refs)+1)
	for _, r := range refs {
		ups = append(ups, r.up)
	}
	if key == w.opts.DefaultBackend && svc != nil {
		if up, ok := nginx.DefaultBackendUpstream(key, svc); ok {
			if refIndex(refs, up.Name) < 0 {
				ups = append(ups, up)
			}
		}
	}
	return ups, true
}

func (w *Watcher) sync(ctx context.Context, key types.NamespacedName) error {
	svc, err := w.services.Services(key.Namespace).Get(key.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get service %s: %w", key, err)
	}
	if err != nil {
		svc = nil
	}
	ups, _ := w.upstreamsOfService(key, svc)
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeExternalName || len(ups) == 0 {
		w.names.forget(key)
	}

	// The queue never syncs one Service twice at a time, so this Service's entry is ours until we store
	// it back; the lock only guards the map.
	w.lastMu.Lock()
	last := w.last[key]
	w.lastMu.Unlock()
	lastOf := func(name nginx.UpstreamName) int {
		return slices.IndexFunc(last, func(p published) bool { return p.name == name })
	}
	var slicesOfSvc []*discoveryv1.EndpointSlice
	if svc != nil && svc.Spec.Type != corev1.ServiceTypeExternalName {
		w.sliceNamesMu.Lock()
		names := slices.Clone(w.sliceNames[key])
		w.sliceNamesMu.Unlock()
		for _, name := range names {
			o, exists, _ := w.slices.GetByKey(key.Namespace + "/" + name)
			if s, ok := o.(*discoveryv1.EndpointSlice); exists && ok {
				slicesOfSvc = append(slicesOfSvc, s)
			}
		}
	}
	keep := make(map[nginx.UpstreamName]bool, len(ups))
	var resolveErr error
	for _, up := range ups {
		keep[up.Name] = true
		var eps []nginx.Endpoint
		switch {
		case svc == nil:
		case svc.Spec.Type == corev1.ServiceTypeExternalName:
			var answered bool
			eps, answered, err = w.externalName(key, svc, up)
			if !answered {
				continue // its lookup is under way; the answer queues the Service again
			}
			if err != nil {
				resolveErr = err
				if i := lastOf(up.Name); i >= 0 {
					eps = last[i].endpoints // keep serving the last known addresses while DNS fails
				}
			}
		case up.ServiceIP && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
			eps = ServiceIPEndpoints(svc, up.Port)
		default:
			if up.ServiceIP {
				w.log.Warn("service-upstream: the Service has no cluster IP (headless); its Pods are used instead",
					zap.Stringer("service", key), zap.String("upstream", string(up.Name)))
			}
			proto := corev1.ProtocolTCP
			if up.UDP {
				proto = corev1.ProtocolUDP
			}
			eps = ResolveProtocol(svc, up.Port, proto, slicesOfSvc)
		}
		if kept, dropped := SafeEndpoints(eps, w.opts.AllowLoopback); dropped > 0 {
			w.log.Warn("endpoints with loopback, link-local, unspecified or multicast addresses dropped",
				zap.Stringer("service", key), zap.Int("dropped", dropped))
			eps = kept
		}
		if i := lastOf(up.Name); i < 0 {
			last = append(last, published{name: up.Name, endpoints: eps})
		} else if slices.Equal(last[i].endpoints, eps) {
			continue
		} else {
			last[i].endpoints = eps
		}
		w.published.WithLabelValues("update").Inc()
		w.log.Debug("endpoints changed", zap.String("upstream", string(up.Name)), zap.Strings("endpoints", endpointsString(eps)))
		w.out.Publish(modules.EndpointsChange{Upstream: up, Endpoints: eps})
	}
	kept := last[:0]
	for _, p := range last {
		if keep[p.name] {
			kept = append(kept, p)
			continue
		}
		w.published.WithLabelValues("remove").Inc()
		w.out.Publish(modules.EndpointsChange{Upstream: nginx.Upstream{Name: p.name, Service: key}, Removed: true})
	}
	clear(last[len(kept):])
	last = kept
	w.lastMu.Lock()
	if len(last) == 0 {
		delete(w.last, key)
	} else {
		w.last[key] = last
	}
	w.lastMu.Unlock()
	if resolveErr != nil {
		// Not retried through the error path: the name cache looks the name up again after the refresh
		// interval and queues the Service with the answer.
		w.log.Warn("cannot resolve ExternalName service", zap.Error(resolveErr))
	}
	return nil
}

// externalName returns the endpoints of an ExternalName Service's port from the newest DNS answer, and
// false while the first lookup of its name is under way.
func (w *Watcher) externalName(key types.NamespacedName, svc *corev1.Service, up nginx.Upstream) ([]nginx.Endpoint, bool, error) {
	host := svc.Spec.ExternalName
	if host == "" {
		return nil, true, fmt.Errorf("ExternalName service %s has no spec.externalName", key)
	}
	addrs, answered, err := w.names.answer(key, host)
	if !answered {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("ExternalName service %s: resolve %s: %w", key, host, err)
	}
	proto := corev1.ProtocolTCP
	if up.UDP {
		proto = corev1.ProtocolUDP
	}
	eps, err := ExternalNameEndpointsProtocol(svc, up.Port, proto, addrs)
	return eps, true, err
}

// referencedService returns the Service's key when an accepted Ingress (or the default backend) uses it.
func (w *Watcher) referencedService(obj any) []types.NamespacedName {
	k, ok := pipeline.KeyOf(obj)
	if !ok {
		return nil
	}
	return w.usedService(k)
}

func (w *Watcher) usedService(k types.NamespacedName) []types.NamespacedName {
	w.mu.Lock()
	_, used := w.refs[k]
	w.mu.Unlock()
	if !used {
		return nil
	}
	return []types.NamespacedName{k}
}

// sliceChanged indexes a slice that was added (oldObj nil), updated, or deleted (newObj nil, possibly
// a tombstone), and queues the Services it belonged to and belongs to, if they are used.
func (w *Watcher) sliceChanged(oldObj, newObj any, q *pipeline.Queue[types.NamespacedName]) {
	oldSvc, oldName, hadSvc := serviceOfSlice(oldObj)
	newSvc, newName, hasSvc := serviceOfSlice(newObj)
	w.sliceNamesMu.Lock()
	if hadSvc && (!hasSvc || oldSvc != newSvc) {
		names := slices.DeleteFunc(w.sliceNames[oldSvc], func(n string) bool { return n == oldName })
		if len(names) == 0 {
			delete(w.sliceNames, oldSvc)
		} else {
			w.sliceNames[oldSvc] = names
		}
	}
	if hasSvc && !slices.Contains(w.sliceNames[newSvc], newName) {
		w.sliceNames[newSvc] = append(w.sliceNames[newSvc], newName)
	}
	w.sliceNamesMu.Unlock()
	if hadSvc {
		for _, k := range w.usedService(oldSvc) {
			q.Add(k)
		}
	}
	if hasSvc && (!hadSvc || newSvc != oldSvc) {
		for _, k := range w.usedService(newSvc) {
			q.Add(k)
		}
	}
}

// serviceOfSlice returns the Service an EndpointSlice (or its tombstone) belongs to, by its
// kubernetes.io/service-name label, and the slice's name.
func serviceOfSlice(obj any) (svc types.NamespacedName, name string, ok bool) {
	if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = d.Obj
	}
	s, isSlice := obj.(*discoveryv1.EndpointSlice)
	if !isSlice {
		return types.NamespacedName{}, "", false
	}
	svcName := s.Labels[discoveryv1.LabelServiceName]
	if svcName == "" {
		return types.NamespacedName{}, "", false
	}
	return types.NamespacedName{Namespace: s.Namespace, Name: svcName}, s.Name, true
}
