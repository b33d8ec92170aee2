// Package reloader owns the data plane: it applies each Rendered configuration (the structure lane: test,
// install, reload, confirm) and pushes endpoint lists (the endpoint lane: no reload). The two lanes have
// their own queues and workers, so endpoint updates never wait behind a reload.
package reloader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires the reloader and its default NGINX Applier into the application.
var Module = fx.Module("reloader",
	fx.Provide(NewRestarts, NewNginxApplier, New),
	fx.Invoke(func(*Reloader) {}),
)

// ReasonReloadFailed is the Event reason for a configuration NGINX refused.
const ReasonReloadFailed = "ReloadFailed"

// Options configure the reloader.
type Options struct {
	// MaxRetries is --reload-retries: retries of one failing configuration (after its first attempt) before
	// giving up on it until the next one; 0 means a single attempt.
	MaxRetries int
	// Pod is the controller's own Pod (from POD_NAMESPACE and POD_NAME), which receives reload-failure
	// Events; empty means failures are only logged and counted.
	Pod types.NamespacedName
}

// Params are the reloader's fx inputs.
type Params struct {
	fx.In
	Options   Options
	Applier   Applier
	Restarts  *Restarts
	Rendered  *pipeline.Topic[modules.Rendered]
	Endpoints *pipeline.Topic[modules.EndpointsChange]
	Certs     *pipeline.Topic[modules.CertChange]
	Recorder  record.EventRecorder
	Metrics   *pipeline.Metrics
	Registry  prometheus.Registerer
	Log       *zap.Logger
	Lifecycle fx.Lifecycle `optional:"true"`
}

// ReadyResult contributes the reloader's readiness ("first configuration live") to /readyz.
type ReadyResult struct {
	fx.Out
	Reloader *Reloader
	Ready    modules.ReadyCheck `group:"readyz"`
	// Live fails /healthz when the data plane is beyond repair in this process (an Applier with Alive).
	Live modules.ReadyCheck `group:"healthz"`
}

// Pauses before a lane tries again after exhausting its retries.
const (
	retryAfterGiveUp = 10 * time.Minute
	lanePause        = 30 * time.Second
)

type applyKey struct{}
type pushKey struct{}

// Reloader drives an Applier from the Rendered and EndpointsChange topics.
type Reloader struct {
	opts      Options
	applier   Applier
	restarts  *Restarts
	recorder  record.EventRecorder
	log       *zap.Logger
	latest    *pipeline.Latest[modules.Rendered]
	structure *pipeline.Controller[applyKey]
	endpoints *pipeline.Controller[pushKey]
	certLane  *pipeline.Controller[certKey]
	// applied is the hash of the last configuration applied successfully; only the structure lane's
	// single worker touches it.
	applied string
	// attempted is the hash of the configuration the structure lane last tried; a different one starts
	// with a fresh retry budget. Only the structure lane's worker touches it.
	attempted string
	m         reloaderMetrics
	done      chan struct{}
	wg        sync.WaitGroup

	mu      sync.Mutex
	desired map[nginx.UpstreamName][]nginx.Endpoint
	dirty   map[nginx.UpstreamName]struct{}
	full    bool
	// fresh is true once the data plane has reported a start: pushes before that would only fail.
	fresh bool
	// fullFor is the start count that the pending full push serves; pushedFor the one the last successful
	// full push served. Ready requires pushedFor to match the data plane's current start.
	fullFor, pushedFor uint64
	// The certificate lane's state, under mu too; certsFullFor and certsPushedFor as above.
	certs                        *certState
	certsFresh                   bool
	certsFull                    bool
	certsFullFor, certsPushedFor uint64
	// hostsFromModel is set once the SNI host table comes from an applied model: a full push of a table
	// that did not (the first start reports before its configuration is applied) makes the certificates
	// complete only once a push with the model's table followed. certsFilledFor is the start that the
	// last full certificate push served, with or without the table.
	hostsFromModel bool
	certsFilledFor uint64
	// What the shared dicts had no room for (see dictRoom).
	endpointsRoom, certsRoom *dictRoom
}

type reloaderMetrics struct {
	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lastTime    prometheus.Gauge
	hash        prometheus.Gauge
	duration    prometheus.Histogram
	epUpdates   *prometheus.CounterVec
	certUpdates *prometheus.CounterVec
	notStored   *prometheus.GaugeVec
}

// New builds the reloader.
func New(p Params) (ReadyResult, error) {
	log := p.Log.Named("reloader")
	r := &Reloader{
		opts:     p.Options,
		applier:  p.Applier,
		restarts: p.Restarts,
		recorder: p.Recorder,
		log:      log,
		latest:   pipeline.NewLatest[modules.Rendered](),
		done:     make(chan struct{}),
		desired:  map[nginx.UpstreamName][]nginx.Endpoint{},
		dirty:    map[nginx.UpstreamName]struct{}{},
		certs:    newCertState(),
		// The flags of app's Config that size the dicts.
		endpointsRoom: newDictRoom("endpoints", "--endpoints-dict-size"),
		certsRoom:     newDictRoom("certificates", "--certificates-dict-size"),
		m: reloaderMetrics{
			reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "ingress_reactor_reloads_total",
				Help: "Attempts to apply a new NGINX configuration (test, install, reload, confirm), by result.",
			}, []string{"result"}),
			lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "ingress_reactor_last_reload_success",
				Help: "1 if the last attempt to apply a configuration succeeded, 0 if it failed.",
			}),
			lastTime: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "ingress_reactor_last_reload_success_timestamp_seconds",
				Help: "Unix time of the last configuration that went live.",
			}),
			hash: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "ingress_reactor_config_hash",
				Help: "The live configuration's hash (its first 52 bits as a number), to spot replicas that differ.",
			}),
			duration: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "ingress_reactor_reload_duration_seconds",
				Help:    "Time to apply a configuration: test, install, reload and confirm it is live.",
				Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
			}),
			epUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "ingress_reactor_endpoint_updates_total",
				Help: "Endpoint pushes to the data plane (no reload), by result (dict_full: what fit is live).",
			}, []string{"result"}),
			certUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "ingress_reactor_certificate_updates_total",
				Help: "Certificate pushes to the data plane (no reload), by result (dict_full: what fit is live).",
			}, []string{"result"}),
			notStored: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: "ingress_reactor_shared_dict_not_stored",
				Help: "Entries (upstreams; certificates and SNI hosts) that NGINX's shared dict had no room for; raise --endpoints-dict-size or --certificates-dict-size.",
			}, []string{"dict"}),
		},
	}
	for _, c := range []prometheus.Collector{r.m.reloads, r.m.lastSuccess, r.m.lastTime, r.m.hash, r.m.duration, r.m.epUpdates, r.m.certUpdates, r.m.notStored} {
		if err := p.Registry.Register(c); err != nil {
			return ReadyResult{}, fmt.Errorf("reloader: register metrics: %w", err)
		}
	}
	for _, res := range []string{"success", "failure"} {
		r.m.reloads.WithLabelValues(res)
	}
	for _, res := range []string{"success", "failure", "dict_full"} {
		r.m.epUpdates.WithLabelValues(res)
		r.m.certUpdates.WithLabelValues(res)
	}
	for _, d := range []*dictRoom{r.endpointsRoom, r.certsRoom} {
		r.m.notStored.WithLabelValues(d.dict)
	}
	retries := p.Options.MaxRetries
	if retries == 0 {
		retries = -1 // pipeline: negative means "do not retry"
	}
	sq := pipeline.NewQueue(pipeline.QueueOptions[applyKey]{
		Name: "reloader-structure", Metrics: p.Metrics, Logger: log,
		BaseDelay: 500 * time.Millisecond, MaxDelay: time.Minute, QPS: 2, Burst: 4,
		MaxRetries: retries,
		OnGiveUp: func(_ applyKey, err error) {
			v, _ := r.latest.Get()
			log.Error("configuration not applied after its retries; trying again at the next change or in a while",
				zap.String("hash", v.Hash), zap.Duration("after", retryAfterGiveUp), zap.Error(err))
			// A cause that passes (a full disk, NGINX restarting) must not leave old routes forever.
			r.structure.Queue().AddAfter(applyKey{}, retryAfterGiveUp)
		},
	})
	r.structure = pipeline.NewController(sq, r.apply, pipeline.ControllerOptions{Workers: 1})
	eq := pipeline.NewQueue(pipeline.QueueOptions[pushKey]{
		Name: "reloader-endpoints", Metrics: p.Metrics, Logger: log,
		BaseDelay: 50 * time.Millisecond, MaxDelay: 10 * time.Second, QPS: 1000, Burst: 1000,
		MaxRetries: 20,
		// The lane's one key carries every pending change: after the retries it keeps trying, slowly, so
		// NGINX never stays on stale endpoints because a push failed for a while.
		OnGiveUp: func(k pushKey, err error) {
			log.Error("endpoint push keeps failing; retrying", zap.Duration("after", lanePause), zap.Error(err))
			r.endpoints.Queue().AddAfter(k, lanePause)
		},
	})
	r.endpoints = pipeline.NewController(eq, r.push, pipeline.ControllerOptions{Workers: 1})
	cq := pipeline.NewQueue(pipeline.QueueOptions[certKey]{
		Name: "reloader-certificates", Metrics: p.Metrics, Logger: log,
		BaseDelay: 50 * time.Millisecond, MaxDelay: 10 * time.Second, QPS: 100, Burst: 100,
		MaxRetries: 20,
		OnGiveUp: func(k certKey, err error) {
			log.Error("certificate push keeps failing; retrying", zap.Duration("after", lanePause), zap.Error(err))
			r.certLane.Queue().AddAfter(k, lanePause)
		},
	})
	r.certLane = pipeline.NewController(cq, r.pushCertificates, pipeline.ControllerOptions{Workers: 1})

	// The SNI host table follows the configuration that NGINX runs: apply takes it from each Rendered
	// once that is live.
	p.Rendered.Subscribe(func(v modules.Rendered) {
		r.latest.Set(v)
		sq.Add(applyKey{})
	})
	p.Certs.Subscribe(func(c modules.CertChange) {
		r.mu.Lock()
		r.certs.apply(c)
		r.mu.Unlock()
		cq.Add(certKey{})
	})
	p.Endpoints.Subscribe(func(c modules.EndpointsChange) {
		r.mu.Lock()
		if c.Removed {
			delete(r.desired, c.Upstream.Name)
		} else {
			r.desired[c.Upstream.Name] = c.Endpoints
		}
		r.dirty[c.Upstream.Name] = struct{}{}
		r.mu.Unlock()
		eq.Add(pushKey{})
	})
	modules.Bind(p.Lifecycle, r)
	live := func() error {
		if a, ok := r.applier.(interface{ Alive() error }); ok {
			return a.Alive()
		}
		return nil
	}
	return ReadyResult{Reloader: r, Ready: modules.ReadyCheck{Name: "nginx", Check: r.Ready}, Live: modules.ReadyCheck{Name: "nginx", Check: live}}, nil
}

// Ready returns nil once a configuration is live and the data plane's current instance has received
// every endpoint and every certificate: a Pod marked ready then routes, with the right certificates, at
// once. The data plane's Ready covers a fresh instance that has not reported its start yet.
func (r *Reloader) Ready() error {
	if err := r.applier.Ready(); err != nil {
		return err
	}
	starts, ok := r.restarts.Get()
	r.mu.Lock()
	endpoints, certificates := r.pushedFor, r.certsPushedFor
	r.mu.Unlock()
	if !ok || endpoints != starts {
		return errors.New("endpoints not pushed to nginx yet")
	}
	if certificates != starts {
		return errors.New("certificates not pushed to nginx yet")
	}
	return nil
}

// Start starts both lanes and the watch for data-plane restarts.
func (r *Reloader) Start(ctx context.Context) {
	r.structure.Start(ctx)
	r.endpoints.Start(ctx)
	r.certLane.Start(ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-r.done:
				return
			case <-r.restarts.C():
				starts, _ := r.restarts.Get()
				r.log.Info("nginx ready; pushing all endpoints and certificates", zap.Uint64("starts", starts))
				r.mu.Lock()
				r.fresh, r.full, r.fullFor = true, true, starts
				r.certsFresh, r.certsFull, r.certsFullFor = true, true, starts
				r.mu.Unlock()
				r.endpoints.Queue().Add(pushKey{})
				r.certLane.Queue().Add(certKey{})
				// A configuration that was given up on gets another chance with the fresh NGINX (a no-op when
				// the newest one is live).
				r.structure.Queue().Add(applyKey{})
			}
		}
	}()
}

// Stop stops both lanes, letting in-flight work finish within ctx.
func (r *Reloader) Stop(ctx context.Context) error {
	close(r.done)
	r.wg.Wait()
	return errors.Join(r.structure.Stop(ctx), r.endpoints.Stop(ctx), r.certLane.Stop(ctx))
}

func (r *Reloader) apply(ctx context.Context, _ applyKey) error {
	v, ok := r.latest.Get()
	if !ok {
		return nil
	}
	if v.Hash == r.applied {
		// The same configuration again: the renderer published a change to the SNI table only (an
		// Ingress switched TLS Secret), which the certificate lane applies. Nothing to reload or count.
		r.useHosts(v.Model, false, false)
		return nil
	}
	if v.Hash != r.attempted {
		// The retry limit is per configuration: a newer one must not inherit the failures of the one
		// it replaces (the queue counts them per key, and the lane has a single key).
		r.structure.Queue().Forget(applyKey{})
		r.attempted = v.Hash
	}
	began := time.Now()
	err := r.applier.Apply(ctx, v.Config, v.Hash)
	r.m.duration.Observe(time.Since(began).Seconds())
	if err != nil && ctx.Err() != nil {
		r.log.Info("configuration not applied: shutting down", zap.String("hash", v.Hash))
		return nil
	}
	if err != nil {
		r.m.reloads.WithLabelValues("failure").Inc()
		r.m.lastSuccess.Set(0)
		r.log.Error("nginx configuration not applied; the running one stays", zap.String("hash", v.Hash), zap.Error(err))
		if r.opts.Pod.Name != "" {
			r.recorder.Event(&corev1.ObjectReference{Kind: "Pod", Namespace: r.opts.Pod.Namespace, Name: r.opts.Pod.Name, APIVersion: "v1"},
				corev1.EventTypeWarning, ReasonReloadFailed, fmt.Sprintf("configuration %.12s not applied: %v", v.Hash, err))
		}
		return err
	}
	r.applied = v.Hash
	// Counted as soon as NGINX serves it: what follows asks NGINX about its stores, and the metrics must
	// not lag behind the traffic meanwhile.
	r.m.reloads.WithLabelValues("success").Inc()
	r.m.lastSuccess.Set(1)
	r.m.lastTime.Set(float64(time.Now().Unix()))
	r.m.hash.Set(hashNumber(v.Hash))
	// A reload keeps the shared dicts, except one whose size or definition changed: NGINX gives that one
	// a new, empty zone, which needs a full push.
	endpointsLost, certsLost := r.lostStores(ctx)
	r.useHosts(v.Model, endpointsLost, certsLost)
	return nil
}

// lostStores says which of the data plane's stores need a full push after a configuration went live:
// those that the reload emptied. An Applier that cannot tell (no FillReporter, or an error) gets both.
func (r *Reloader) lostStores(ctx context.Context) (endpoints, certificates bool) {
	fr, ok := r.applier.(FillReporter)
	if !ok {
		return true, true
	}
	f, err := fr.Filled(ctx)
	if err != nil {
		r.log.Warn("cannot tell whether the reload emptied the shared dicts; pushing everything", zap.Error(err))
		return true, true
	}
	if !f.Endpoints || !f.Certificates {
		r.log.Info("pushing what the data plane lost in the reload", zap.Bool("endpoints", !f.Endpoints), zap.Bool("certificates", !f.Certificates))
	}
	return !f.Endpoints, !f.Certificates
}

// useHosts makes the SNI host table that of m, the model of the configuration NGINX now runs, and
// schedules a certificate push; full pushes of endpoints and certificates as asked.
func (r *Reloader) useHosts(m nginx.Model, endpointsFull, certsFull bool) {
	hosts := m.TLSHosts()
	r.mu.Lock()
	r.certs.hosts = hosts
	r.hostsFromModel = true
	r.full = r.full || endpointsFull
	r.certsFull = r.certsFull || certsFull
	r.mu.Unlock()
	if endpointsFull {
		r.endpoints.Queue().Add(pushKey{})
	}
	r.certLane.Queue().Add(certKey{})
}

func (r *Reloader) push(ctx context.Context, _ pushKey) error {
	r.mu.Lock()
	if !r.fresh {
		r.mu.Unlock()
		return nil // the first start pushes everything
	}
	full, fullFor := r.full, r.fullFor
	var batch map[nginx.UpstreamName][]nginx.Endpoint
	if full {
		batch = maps.Clone(r.desired)
	} else {
		batch = make(map[nginx.UpstreamName][]nginx.Endpoint, len(r.dirty))
		for name := range r.dirty {
			batch[name] = r.desired[name] // nil for removed upstreams: emptied
		}
	}
	dirty := r.dirty
	r.dirty = map[nginx.UpstreamName]struct{}{}
	r.full = false
	r.mu.Unlock()
	if len(batch) == 0 && !full {
		return nil
	}
	err := r.applier.SetEndpoints(ctx, batch, full)
	partial := dictFull(err)
	if err != nil && partial == nil {
		r.m.epUpdates.WithLabelValues("failure").Inc()
		r.mu.Lock()
		r.full = r.full || full
		for name := range dirty {
			r.dirty[name] = struct{}{}
		}
		r.mu.Unlock()
		return err
	}
	// A full dict is a partial success: what fit is live, and the same push would store the same lists.
	// It is not retried; the lists that did not fit go out again with the next push, which a removal
	// may have made room for.
	sent := make([]string, 0, len(batch))
	for name := range batch {
		sent = append(sent, string(name))
	}
	r.mu.Lock()
	if full {
		r.pushedFor = max(r.pushedFor, fullFor)
	}
	if partial != nil {
		for _, name := range partial.NotStored {
			if _, ok := batch[nginx.UpstreamName(name)]; ok {
				r.dirty[nginx.UpstreamName(name)] = struct{}{}
			}
		}
	}
	changed := r.endpointsRoom.pushed(full, sent, partial)
	r.mu.Unlock()
	r.notePush(r.m.epUpdates, r.endpointsRoom, changed, partial)
	r.log.Debug("endpoints pushed", zap.Int("upstreams", len(batch)), zap.Bool("full", full))
	return nil
}

// notePush counts a push that stored everything or what fit (partial), and logs and exports a change of
// what the dict had no room for. room is read under mu.
func (r *Reloader) notePush(updates *prometheus.CounterVec, room *dictRoom, changed bool, partial *nginx.DictFullError) {
	if partial != nil {
		updates.WithLabelValues("dict_full").Inc()
	} else {
		updates.WithLabelValues("success").Inc()
	}
	if !changed {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m.notStored.WithLabelValues(room.dict).Set(float64(len(room.notStored)))
	room.log(r.log, partial)
}

// hashNumber maps a hex hash to a float64 that a gauge can carry exactly (52 bits).
func hashNumber(hash string) float64 {
	if len(hash) > 13 {
		hash = hash[:13]
	}
	n, err := strconv.ParseUint(hash, 16, 64)
	if err != nil {
		return 0
	}
	return float64(n)
}
