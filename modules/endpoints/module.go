package endpoints

import (
	"cmp"
	"context"
	"fmt"
	"iter"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	listersnetv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/internal/sortedmap"
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
	services  modules.Services // the shared cache holds ServiceRecords: no generated lister
	slices    cache.Indexer
	out       *pipeline.Topic[modules.EndpointsChange]
	ctrl      *pipeline.Controller[types.NamespacedName]
	synced    []cache.InformerSynced
	log       *zap.Logger
	published *prometheus.CounterVec
	names     *nameCache

	mu sync.Mutex
	// byIngress holds, per accepted Ingress, the upstreams it uses, sorted by name. Their upstream names
	// are those of the watched entries they count in (the Service name is the Ingress's own string), so
	// an Ingress costs a few words per upstream beside its map entry.
	byIngress *sortedmap.Map[types.NamespacedName, []ingressUpstream]
	// lists holds the upstream lists of the rendered model (modelReferrer) and of the stream services
	// (streamsReferrer) as they were published, not a copy: a published list is never modified (nginx's
	// Merger hands out its own state and makes a new list for a change, whose Upstreams it shares with
	// the last one). A new list is diffed against the one held; the same list again costs nothing.
	lists map[types.NamespacedName][]*nginx.Upstream
	// watched holds, per Service that has EndpointSlices or that an upstream uses (and the default
	// backend), its slices' names, its upstreams with their reference counts and what was last published
	// for them. An entry whose Service is no longer used stays until its sync has published the removal
	// of what it had published. One map for all three: at 10,000 Services a map's entries and spare room
	// take about 100 bytes per Service.
	watched *sortedmap.Map[types.NamespacedName, *watchedService]
}

// watchedService is what the watcher keeps about one Service. A Service has few upstreams (one per
// port an Ingress names), so a short slice holds them: at 10,000 Services a map per Service would take
// several times the memory. Its fields are guarded by Watcher.mu; what was published is changed only by
// the Service's sync, which never runs twice at a time.
type watchedService struct {
	// refs are the upstreams in use (n > 0) and those whose removal is not published yet (n == 0).
	// One slice for both, rather than one of the upstreams in use and one of what was published for
	// them: 48 bytes less per Service.
	refs []ref
	// slices names the Service's EndpointSlices (in its namespace), kept by the slice handler before it
	// queues the Service. A client-go index would keep a set (a map) per Service: several times the
	// memory at 10,000 Services with a slice or two each.
	slices sliceNames
}

// sliceNames is a set of EndpointSlice names joined by '/', which no object name contains: the one
// slice of most Services costs a string header, sharing the slice's own name.
type sliceNames string

// all yields each name.
func (s sliceNames) all() iter.Seq[string] {
	return func(yield func(string) bool) {
		if s == "" {
			return
		}
		for n := range strings.SplitSeq(string(s), "/") {
			if !yield(n) {
				return
			}
		}
	}
}

func (s sliceNames) has(name string) bool {
	for n := range s.all() {
		if n == name {
			return true
		}
	}
	return false
}

// with returns the set with name added.
func (s sliceNames) with(name string) sliceNames {
	switch {
	case s.has(name):
		return s
	case s == "":
		return sliceNames(name)
	}
	return s + "/" + sliceNames(name)
}

// without returns the set with name removed.
func (s sliceNames) without(name string) sliceNames {
	if s == sliceNames(name) {
		return ""
	}
	var out sliceNames
	for n := range s.all() {
		if n != name {
			out = out.with(n)
		}
	}
	return out
}

// tidy drops the upstreams of Service key that are neither used nor published, and the entry once it
// holds nothing. The caller holds w.mu.
func (w *Watcher) tidy(key types.NamespacedName, s *watchedService) {
	s.refs = slices.DeleteFunc(s.refs, func(r ref) bool { return !r.inUse() && r.flags&listPublished == 0 })
	if len(s.refs) == 0 {
		s.refs = nil
	}
	if len(s.refs) == 0 && s.slices == "" && key != w.opts.DefaultBackend {
		w.watched.Delete(key)
	}
}

// service returns the entry of Service key, or nil. The caller holds w.mu.
func (w *Watcher) service(key types.NamespacedName) *watchedService {
	s, _ := w.watched.Get(key)
	return s
}

// serviceEntry returns the entry of Service key, made if there is none. The caller holds w.mu.
func (w *Watcher) serviceEntry(key types.NamespacedName) *watchedService {
	s, _ := w.watched.Get(key)
	if s == nil {
		s = &watchedService{}
		w.watched.Set(key, s)
	}
	return s
}

// compareKeys orders keys by namespace, then name.
func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// inUse reports whether the Service must be watched: an upstream uses it, or it is the default backend.
func (w *Watcher) inUse(key types.NamespacedName, s *watchedService) bool {
	if s == nil {
		return false
	}
	if key == w.opts.DefaultBackend {
		return true
	}
	for i := range s.refs {
		if s.refs[i].inUse() {
			return true
		}
	}
	return false
}

// published is the endpoint list last published for one upstream.
type published struct {
	name      nginx.UpstreamName
	endpoints []nginx.Endpoint
}

// ref is one upstream of a Service, with how many referrers (Ingresses, the rendered model, the stream
// services) use it, and the endpoint list last published for it. It holds the upstream without its
// Service, which is the key it is kept under.
type ref struct {
	name     nginx.UpstreamName
	portName string // the port, when it is named (portNamed)
	// eps is the list last published for the upstream, when one was (listPublished).
	eps     []nginx.Endpoint
	portNum int32 // the port, when it is a number
	// n counts the referrers; 0 for an upstream no longer used whose removal is not published yet.
	n     int32
	flags refFlags
}

type refFlags uint8

const (
	portNamed refFlags = 1 << iota
	serviceIP
	udp
	// listPublished says that an endpoint list (eps) was published for the upstream, and not removed.
	listPublished
)

func newRef(up nginx.Upstream) ref {
	r := ref{name: up.Name, n: 1}
	r.setUpstream(up)
	return r
}

// setUpstream makes r stand for up (of r's Service), keeping its count and what was published.
func (r *ref) setUpstream(up nginx.Upstream) {
	r.flags &= listPublished
	r.portName, r.portNum = "", 0
	if up.Port.Type == intstr.String {
		r.flags |= portNamed
		r.portName = up.Port.StrVal
	} else {
		r.portNum = up.Port.IntVal
	}
	if up.ServiceIP {
		r.flags |= serviceIP
	}
	if up.UDP {
		r.flags |= udp
	}
}

// inUse reports whether a referrer uses the upstream.
func (r *ref) inUse() bool { return r.n > 0 }

// upstream returns the upstream r stands for, of Service svc.
func (r *ref) upstream(svc types.NamespacedName) nginx.Upstream {
	up := nginx.Upstream{Name: r.name, Service: svc, ServiceIP: r.flags&serviceIP != 0, UDP: r.flags&udp != 0}
	if r.flags&portNamed != 0 {
		up.Port = intstr.FromString(r.portName)
	} else {
		up.Port = intstr.FromInt32(r.portNum)
	}
	return up
}

// ingressUpstream is one upstream an Ingress uses: the name of its Service, which is in the Ingress's
// namespace (nginx.UpstreamsOf names no other), and its name.
type ingressUpstream struct {
	service string
	name    nginx.UpstreamName
}

// refIndex returns the position of the upstream named name in refs, or -1.
func refIndex(refs []ref, name nginx.UpstreamName) int {
	for i := range refs {
		if refs[i].name == name {
			return i
		}
	}
	return -1
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
		services:  modules.NewServices(p.Factory),
		slices:    sliceInf.GetIndexer(),
		out:       p.Endpoints,
		synced:    []cache.InformerSynced{sliceInf.HasSynced, svcInf.HasSynced, ingInf.HasSynced},
		log:       log,
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_endpoints_changes_total",
			Help: "Endpoint lists published to the endpoint lane, by kind (update, remove).",
		}, []string{"kind"}),
		byIngress: sortedmap.New[types.NamespacedName, []ingressUpstream](compareKeys),
		lists:     map[types.NamespacedName][]*nginx.Upstream{},
		watched:   sortedmap.New[types.NamespacedName, *watchedService](compareKeys),
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
		w.watched.Set(p.Options.DefaultBackend, &watchedService{})
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
	w.mu.Lock()
	defer w.mu.Unlock()
	before, _ := w.byIngress.Get(c.Key)
	same := len(before) == len(now)
	for i := 0; same && i < len(now); i++ {
		same = before[i].name == now[i].Name && before[i].service == now[i].Service.Name
	}
	if same {
		return nil
	}
	// Both lists are sorted by name and unique (UpstreamsOf's), so one walk finds what came and went.
	var affected []types.NamespacedName
	next := make([]ingressUpstream, 0, len(now))
	release := func(u ingressUpstream) {
		svc := types.NamespacedName{Namespace: c.Key.Namespace, Name: u.service}
		w.release(svc, u.name)
		affected = appendKey(affected, svc)
	}
	hold := func(up nginx.Upstream) {
		next = append(next, ingressUpstream{service: up.Service.Name, name: w.hold(up)})
		affected = appendKey(affected, up.Service)
	}
	for len(before) > 0 || len(now) > 0 {
		switch {
		case len(now) == 0 || len(before) > 0 && before[0].name < now[0].Name:
			release(before[0])
			before = before[1:]
		case len(before) == 0 || now[0].Name < before[0].name:
			hold(now[0])
			now = now[1:]
		default:
			if before[0].service == now[0].Service.Name {
				next = append(next, before[0])
			} else { // the same name, another Service: cannot happen with derived names
				release(before[0])
				hold(now[0])
			}
			before, now = before[1:], now[1:]
		}
	}
	if len(next) == 0 {
		w.byIngress.Delete(c.Key)
	} else {
		w.byIngress.Set(c.Key, next)
	}
	return uniqueKeys(affected)
}

// referencesChanged sets the upstream list that referrer (modelReferrer or streamsReferrer) uses and
// returns the Services whose upstream set changed. The list is kept as it is, not copied.
func (w *Watcher) referencesChanged(referrer types.NamespacedName, now []*nginx.Upstream) []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := w.lists[referrer]
	if len(before) == len(now) && (len(now) == 0 || &before[0] == &now[0]) {
		return nil // the list held: a model whose upstreams did not change
	}
	// Only what differs changes a count: the rendered model lists every upstream, and one change must
	// not queue every Service. The list held is sorted; so is a published one, but a list that is not
	// is held as a sorted copy.
	now = sortedByName(now)
	var affected []types.NamespacedName
	diffUpstreams(before, now, func(up *nginx.Upstream) {
		w.release(up.Service, up.Name)
		affected = appendKey(affected, up.Service)
	}, func(up *nginx.Upstream) {
		w.hold(*up)
		affected = appendKey(affected, up.Service)
	})
	if len(now) == 0 {
		delete(w.lists, referrer)
	} else {
		w.lists[referrer] = now
	}
	return uniqueKeys(affected)
}

// hold counts one more use of up and returns its name as the Service's entry holds it, so that every
// referrer shares one string. The caller holds w.mu.
func (w *Watcher) hold(up nginx.Upstream) nginx.UpstreamName {
	s := w.serviceEntry(up.Service)
	if i := refIndex(s.refs, up.Name); i >= 0 {
		r := &s.refs[i]
		if !r.inUse() { // kept for its published list only: it stands for up again
			r.setUpstream(up)
		}
		r.n++
		return r.name
	}
	s.refs = append(s.refs, newRef(up))
	return up.Name
}

// release counts one use less of the upstream name of Service svc. The caller holds w.mu.
func (w *Watcher) release(svc types.NamespacedName, name nginx.UpstreamName) {
	s := w.service(svc)
	if s == nil {
		return
	}
	if i := refIndex(s.refs, name); i >= 0 && s.refs[i].inUse() {
		s.refs[i].n--
	}
	w.tidy(svc, s)
}

// appendKey appends k to keys unless it is the last one already; uniqueKeys removes the other repeats.
func appendKey(keys []types.NamespacedName, k types.NamespacedName) []types.NamespacedName {
	if n := len(keys); n > 0 && keys[n-1] == k {
		return keys
	}
	return append(keys, k)
}

// uniqueKeys sorts keys and drops repeats.
func uniqueKeys(keys []types.NamespacedName) []types.NamespacedName {
	slices.SortFunc(keys, compareKeys)
	return slices.Compact(keys)
}

func byName(a, b *nginx.Upstream) int { return strings.Compare(string(a.Name), string(b.Name)) }

// sortedByName returns ups if it is sorted by name, else a sorted copy.
func sortedByName(ups []*nginx.Upstream) []*nginx.Upstream {
	if slices.IsSortedFunc(ups, byName) {
		return ups
	}
	return slices.SortedFunc(slices.Values(ups), byName)
}

// diffUpstreams calls removed with each upstream of before that now lacks, and added with each of now
// that before lacks. Both lists are sorted by name. One walk, nothing allocated: a new model's list
// differs from the last in a few upstreams, and shares the Upstreams of the others with it.
func diffUpstreams(before, now []*nginx.Upstream, removed, added func(*nginx.Upstream)) {
	for len(before) > 0 || len(now) > 0 {
		switch {
		case len(now) == 0 || len(before) > 0 && before[0].Name < now[0].Name:
			removed(before[0])
			before = before[1:]
		case len(before) == 0 || now[0].Name < before[0].Name:
			added(now[0])
			now = now[1:]
		default:
			if before[0] != now[0] && *before[0] != *now[0] { // the same name, another value: cannot happen with derived names
				removed(before[0])
				added(now[0])
			}
			before, now = before[1:], now[1:]
		}
	}
}

// upstreamsOfService returns the upstreams that currently use a Service. For the default backend
// Service every port is an upstream, numbered, as the renderer names them.
func (w *Watcher) upstreamsOfService(key types.NamespacedName, svc *corev1.Service) []nginx.Upstream {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.appendUpstreamsLocked(nil, key, svc)
}

// appendUpstreamsLocked appends upstreamsOfService to ups, for a caller that holds w.mu.
func (w *Watcher) appendUpstreamsLocked(ups []nginx.Upstream, key types.NamespacedName, svc *corev1.Service) []nginx.Upstream {
	s := w.service(key)
	if !w.inUse(key, s) {
		return ups
	}
	for i := range s.refs {
		if s.refs[i].inUse() {
			ups = append(ups, s.refs[i].upstream(key))
		}
	}
	if key == w.opts.DefaultBackend && svc != nil {
		if up, ok := nginx.DefaultBackendUpstream(key, svc); ok {
			if i := refIndex(s.refs, up.Name); i < 0 || !s.refs[i].inUse() {
				ups = append(ups, up)
			}
		}
	}
	return ups
}

func (w *Watcher) sync(ctx context.Context, key types.NamespacedName) error {
	svc, _ := w.services.Get(key) // nil when the Service does not exist
	w.mu.Lock()
	var buf [4]nginx.Upstream // most Services have one or two upstreams
	ups := w.appendUpstreamsLocked(buf[:0], key, svc)
	// What was published, as the sync changes it; stored back at its end. The queue never syncs one
	// Service twice at a time, so only this sync changes it meanwhile.
	var lastBuf [4]published
	last := lastBuf[:0]
	var names sliceNames
	if s := w.service(key); s != nil {
		for i := range s.refs {
			if r := &s.refs[i]; r.flags&listPublished != 0 {
				last = append(last, published{name: r.name, endpoints: r.eps})
			}
		}
		names = s.slices
	}
	w.mu.Unlock()
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeExternalName || len(ups) == 0 {
		w.names.forget(key)
	}

	lastOf := func(name nginx.UpstreamName) int {
		return slices.IndexFunc(last, func(p published) bool { return p.name == name })
	}
	var slicesOfSvc []*SliceRecord
	if svc != nil && svc.Spec.Type != corev1.ServiceTypeExternalName {
		for name := range names.all() {
			o, exists, _ := w.slices.GetByKey(key.Namespace + "/" + name)
			if r := sliceRecordOf(o); exists && r != nil {
				slicesOfSvc = append(slicesOfSvc, r)
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
			var err error
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
		// The upstreams of a Service (its port by number and by name, say) often have the same endpoints:
		// they share one list, which no one modifies once published.
		for i := range last {
			if len(eps) > 0 && slices.Equal(last[i].endpoints, eps) {
				eps = last[i].endpoints
				break
			}
		}
		if i := lastOf(up.Name); i < 0 {
			last = append(last, published{name: up.Name, endpoints: eps})
		} else if slices.Equal(last[i].endpoints, eps) {
			continue
		} else {
			last[i].endpoints = eps
		}
		w.published.WithLabelValues("update").Inc()
		if ce := w.log.Check(zap.DebugLevel, "endpoints changed"); ce != nil { // the list's strings only when logged
			ce.Write(zap.String("upstream", string(up.Name)), zap.Strings("endpoints", endpointsString(eps)))
		}
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
	last = kept
	w.mu.Lock()
	// The entry may have gone (its last upstream released) or come anew while the Service synced, and
	// an upstream released meanwhile may have gone from it.
	s := w.service(key)
	if s == nil && len(last) > 0 {
		s = w.serviceEntry(key)
	}
	if s != nil {
		w.storePublished(s, last)
		w.tidy(key, s)
	}
	w.mu.Unlock()
	if resolveErr != nil {
		// Not retried through the error path: the name cache looks the name up again after the refresh
		// interval and queues the Service with the answer.
		w.log.Warn("cannot resolve ExternalName service", zap.Error(resolveErr))
	}
	return nil
}

// storePublished records in s what a sync published: last lists the upstreams with a list published
// and not removed. The caller holds w.mu.
func (w *Watcher) storePublished(s *watchedService, last []published) {
	for i := range s.refs {
		r := &s.refs[i]
		r.flags &^= listPublished
		r.eps = nil
	}
	for _, p := range last {
		i := refIndex(s.refs, p.name)
		if i < 0 { // released and dropped while the sync published it: kept until its removal is
			s.refs = append(s.refs, ref{name: p.name})
			i = len(s.refs) - 1
		}
		s.refs[i].eps = p.endpoints
		s.refs[i].flags |= listPublished
	}
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
	used := w.inUse(k, w.service(k))
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
	w.mu.Lock()
	if hadSvc && (!hasSvc || oldSvc != newSvc) {
		if s := w.service(oldSvc); s != nil {
			s.slices = s.slices.without(oldName)
			w.tidy(oldSvc, s)
		}
	}
	if hasSvc {
		s := w.serviceEntry(newSvc)
		s.slices = s.slices.with(newName)
	}
	queueOld := hadSvc && w.inUse(oldSvc, w.service(oldSvc))
	queueNew := hasSvc && (!hadSvc || newSvc != oldSvc) && w.inUse(newSvc, w.service(newSvc))
	w.mu.Unlock()
	if queueOld {
		q.Add(oldSvc)
	}
	if queueNew {
		q.Add(newSvc)
	}
}

// serviceOfSlice returns the Service an EndpointSlice (or its tombstone) belongs to, by its
// kubernetes.io/service-name label, and the slice's name.
func serviceOfSlice(obj any) (svc types.NamespacedName, name string, ok bool) {
	if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = d.Obj
	}
	r := sliceRecordOf(obj)
	if r == nil || r.service == "" {
		return types.NamespacedName{}, "", false
	}
	return types.NamespacedName{Namespace: r.namespace, Name: r.service}, r.name, true
}

// sliceRecordOf returns the record of an object of the EndpointSlice cache, or nil for anything else.
// The app's cache transform stores records; a slice stored as it was decoded (an informer factory without
// that transform, as in this package's tests) is converted on each read.
func sliceRecordOf(obj any) *SliceRecord {
	switch o := obj.(type) {
	case *SliceRecord:
		return o
	case *discoveryv1.EndpointSlice:
		return NewSliceRecord(o)
	}
	return nil
}
