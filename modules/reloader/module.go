// Package reloader owns the data plane through an Applier. It runs four lanes, each with its own queue
// and worker, so none waits behind another:
//   - structure (structure.go): applies each Rendered configuration: test, install, reload, confirm;
//   - routes (routes.go): pushes host and path routes, without a reload;
//   - endpoints (endpoints.go): pushes endpoint lists, without a reload;
//   - certificates (certificates.go): pushes certificates and the SNI host table, without a reload.
//
// The push lanes are one type, pushLane (lane.go), over different stores. Routes and the SNI host table
// come from each Rendered's model at once: nginx.conf holds neither.
package reloader

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires the reloader and its default NGINX Applier into the application.
var Module = fx.Module("reloader",
	fx.Provide(NewNginxApplier, New),
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
	// MinReloadGap and MaxReloadGap pace reloads under churn (see pacer); zero means
	// DefaultMinReloadGap and DefaultMaxReloadGap.
	MinReloadGap, MaxReloadGap time.Duration
}

// Params are the reloader's fx inputs.
type Params struct {
	fx.In
	Options   Options
	Applier   Applier
	Rendered  *pipeline.Topic[modules.Rendered]
	Endpoints *pipeline.Topic[modules.EndpointsChange]
	Certs     *pipeline.Topic[modules.CertChange]
	// Refused hears the routes the data plane refused; without it they are only logged.
	Refused *pipeline.Topic[modules.RoutesRefused] `optional:"true"`
	// OCSP carries the OCSP responses to staple (enable-ocsp); without it nothing is stapled.
	OCSP      *pipeline.Topic[modules.OCSPChange] `optional:"true"`
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
	// Live fails /healthz when the data plane is beyond repair in this process (Applier.Alive).
	Live modules.ReadyCheck `group:"healthz"`
}

// Reloader drives an Applier from the Rendered, EndpointsChange and CertChange topics.
type Reloader struct {
	opts      Options
	applier   Applier
	recorder  record.EventRecorder
	log       *zap.Logger
	m         reloaderMetrics
	structure *structureLane
	routes    *pushLane[routeBatch]
	endpoints *pushLane[endpointBatch]
	certs     *pushLane[certBatch]
	// routeStore, epStore and certStore are the lanes' stores, guarded by their lane's lock.
	routeStore *routeStore
	// refused hears what the data plane refused (routes, profiles); nil: only logged.
	refused   *pipeline.Topic[modules.RoutesRefused]
	epStore   *endpointStore
	certStore *certState

	done     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once
	stopErr  error
}

// New builds the reloader.
func New(p Params) (ReadyResult, error) {
	log := p.Log.Named("reloader")
	m, err := newMetrics(p.Registry)
	if err != nil {
		return ReadyResult{}, err
	}
	r := &Reloader{
		opts:       p.Options,
		applier:    p.Applier,
		recorder:   p.Recorder,
		log:        log,
		m:          m,
		done:       make(chan struct{}),
		routeStore: newRouteStore(),
		refused:    p.Refused,
		epStore:    newEndpointStore(),
		certStore:  newCertState(),
	}
	maxGap := p.Options.MaxReloadGap
	if maxGap == 0 {
		maxGap = DefaultMaxReloadGap
	}
	r.structure = newStructureLane(&structureLane{
		opts: p.Options, applier: p.Applier, log: log, m: &r.m,
		events: r.reloadFailed, wentLive: r.wentLive,
		refusedProfiles: r.refusedProfiles,
		firstStart: func(profiles []string) {
			r.routes.change(func() {
				r.routeStore.profilesLive(profiles)
				r.m.hostsHeld.Set(float64(len(r.routeStore.held)))
			}, false)
		},
		pacer: newPacer(p.Options.MinReloadGap, maxGap, nil),
	}, p.Metrics)
	// The flags of app's Config that size the dicts.
	r.routes = newPushLane(laneOptions{
		name: "reloader-routes", what: "route", qps: 1000, burst: 1000,
		room: newDictRoom("routes", "--routes-dict-size"), updates: m.routeUpdates, notStored: m.notStored,
	}, store[routeBatch](r.routeStore), p.Applier, p.Metrics, log)
	r.endpoints = newPushLane(laneOptions{
		name: "reloader-endpoints", what: "endpoint", qps: 1000, burst: 1000,
		room: newDictRoom("endpoints", "--endpoints-dict-size"), updates: m.epUpdates, notStored: m.notStored,
	}, store[endpointBatch](r.epStore), p.Applier, p.Metrics, log)
	r.certs = newPushLane(laneOptions{
		name: "reloader-certificates", what: "certificate", qps: 100, burst: 100,
		room: newDictRoom("certificates", "--certificates-dict-size"), updates: m.certUpdates, notStored: m.notStored,
	}, store[certBatch](r.certStore), p.Applier, p.Metrics, log)

	r.routeStore.onRefused = func(q modules.RoutesRefused, attributed bool) {
		if !attributed {
			log.Error("NGINX refused the routes of a host, and no route of the model is named: the host keeps the routes it had",
				zap.String("host", string(q.Host)), zap.String("reason", q.Reason))
			return
		}
		log.Warn("NGINX refused a route; its Ingress is quarantined", zap.Stringer("ingress", q.Ingress),
			zap.String("host", string(q.Host)), zap.String("path", q.Location.Path), zap.String("reason", q.Reason))
		if r.refused != nil {
			r.refused.Publish(q)
		}
	}
	p.Rendered.Subscribe(r.rendered)
	p.Certs.Subscribe(func(c modules.CertChange) {
		r.certs.change(func() { r.certStore.apply(c) }, false)
	})
	if p.OCSP != nil {
		p.OCSP.Subscribe(func(c modules.OCSPChange) {
			r.certs.change(func() { r.certStore.setStaple(c) }, false)
		})
	}
	p.Endpoints.Subscribe(func(c modules.EndpointsChange) {
		r.endpoints.change(func() { r.epStore.apply(c) }, false)
	})
	modules.Bind(p.Lifecycle, r)
	return ReadyResult{
		Reloader: r,
		Ready:    modules.ReadyCheck{Name: "nginx", Check: r.Ready},
		Live:     modules.ReadyCheck{Name: "nginx", Check: r.applier.Alive},
	}, nil
}

// rendered takes a new configuration. Its routes and SNI host table go to the push lanes at once, in
// the order the renderer published them: nginx.conf holds neither, so they never wait for a reload (nor
// for a configuration NGINX refuses, such as a broken --template). The structure lane applies the
// configuration itself when its hash is new.
func (r *Reloader) rendered(v modules.Rendered) {
	r.routes.change(func() {
		r.routeStore.useModel(&v.Model)
		r.m.hostsHeld.Set(float64(len(r.routeStore.held)))
	}, false)
	r.certs.change(func() { r.certStore.useModel(&v.Model) }, false)
	r.structure.offer(v)
}

// refusedProfiles takes out, through the quarantine, the Ingresses whose profiles' locations made "nginx
// -t" fail: one RoutesRefused for each, naming one of its locations that use a failing profile.
func (r *Reloader) refusedProfiles(v modules.Rendered, failing []nginx.ProfileSettings, reason string) {
	seen := map[types.NamespacedName]bool{}
	for i := range v.Model.Servers {
		srv := &v.Model.Servers[i]
		for _, l := range srv.Locations {
			if seen[l.Ingress] || l.Profile == nil || !slices.Contains(failing, *l.Profile) {
				continue
			}
			seen[l.Ingress] = true
			r.log.Warn("nginx -t failed in a profile's location; its Ingress is quarantined", zap.Stringer("ingress", l.Ingress),
				zap.String("profile", l.Profile.Name()), zap.String("reason", reason))
			if r.refused != nil {
				r.refused.Publish(modules.RoutesRefused{Ingress: l.Ingress, Host: srv.Host, Location: l, Reason: reason, Profile: *l.Profile})
			}
		}
	}
}

// wentLive is called by the structure lane once a configuration runs, with the stores its reload kept
// filled (the others get a full push) and the profiles it has.
func (r *Reloader) wentLive(kept nginx.Filled, profiles []string) {
	// Routes that name a profile wait for a configuration that has it.
	r.routes.change(func() {
		r.routeStore.profilesLive(profiles)
		r.m.hostsHeld.Set(float64(len(r.routeStore.held)))
	}, false)
	if !kept.Routes {
		r.routes.change(nil, true)
	}
	if !kept.Certificates {
		r.certs.change(nil, true)
	}
	if !kept.Endpoints {
		r.endpoints.change(nil, true)
	}
}

// Ready returns nil once a configuration is live and the data plane's current instance has received
// every endpoint and every certificate: a Pod marked ready then routes, with the right certificates, at
// once. The data plane's Ready covers a fresh instance that has not reported its start yet.
func (r *Reloader) Ready() error {
	if err := r.applier.Ready(); err != nil {
		return err
	}
	starts, ok := r.applier.Starts().Get()
	if !ok || r.routes.completeFor() != starts {
		return errors.New("routes not pushed to nginx yet")
	}
	if r.endpoints.completeFor() != starts {
		return errors.New("endpoints not pushed to nginx yet")
	}
	if r.certs.completeFor() != starts {
		return errors.New("certificates not pushed to nginx yet")
	}
	return nil
}

// Start starts the four lanes and the watch for data-plane starts.
func (r *Reloader) Start(ctx context.Context) {
	r.structure.ctrl.Start(ctx)
	r.routes.ctrl.Start(ctx)
	r.endpoints.ctrl.Start(ctx)
	r.certs.ctrl.Start(ctx)
	starts := r.applier.Starts()
	r.wg.Go(func() {
		for {
			select {
			case <-r.done:
				return
			case <-starts.C():
				n, _ := starts.Get()
				r.log.Info("nginx ready; pushing all routes, endpoints and certificates", zap.Uint64("starts", n))
				r.routes.started(n)
				r.endpoints.started(n)
				r.certs.started(n)
				// A configuration that was given up on gets another chance with the fresh NGINX.
				r.structure.retry()
			}
		}
	})
}

// Stop stops the lanes, letting in-flight work finish within ctx. Calls after the first return the
// first one's result.
func (r *Reloader) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() {
		close(r.done)
		r.wg.Wait()
		r.stopErr = errors.Join(r.structure.ctrl.Stop(ctx), r.routes.ctrl.Stop(ctx), r.endpoints.ctrl.Stop(ctx), r.certs.ctrl.Stop(ctx))
	})
	return r.stopErr
}
