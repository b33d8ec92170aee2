package reloader

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// applyKey is the single key of the structure lane's queue: "apply the newest configuration".
type applyKey struct{}

// retryAfterGiveUp is the pause before the structure lane tries a configuration again after exhausting
// its retries.
const retryAfterGiveUp = 10 * time.Minute

// structureLane applies each Rendered configuration: test, install, reload, confirm. It has one worker,
// which alone writes live and attempted.
type structureLane struct {
	opts    Options
	applier Applier
	log     *zap.Logger
	m       *reloaderMetrics
	events  func(hash string, err error)
	latest  *pipeline.Latest[modules.Rendered]
	ctrl    *pipeline.Controller[applyKey]
	// pacer spaces reloads under churn; retries and restarts do not wait for it.
	pacer *pacer
	// wentLive is called after a configuration went live, with the stores it kept filled (a store not
	// reported filled needs a full push).
	wentLive func(kept nginx.Filled, profiles []string)
	// refusedProfiles is called when "nginx -t" failed in the locations of profiles (nginx.FailingProfiles):
	// the Ingresses that use them are taken out, so that the rest of the configuration goes live.
	refusedProfiles func(v modules.Rendered, profiles []nginx.ProfileSettings, reason string)
	// firstStart is called before the first configuration is applied, with its profiles: NGINX starts
	// with them, and the route lane's full push after that start must not hold their routes back.
	firstStart func(profiles []string)
	// live is the hash of the last configuration applied successfully.
	live atomic.Pointer[string]
	// attempted is the hash of the configuration last tried; a different one starts with a fresh retry
	// budget.
	attempted string
}

func newStructureLane(s *structureLane, metrics *pipeline.Metrics) *structureLane {
	s.latest = pipeline.NewLatest[modules.Rendered]()
	q := pipeline.NewQueue(pipeline.QueueOptions[applyKey]{
		Name: "reloader-structure", Metrics: metrics, Logger: s.log,
		BaseDelay: 500 * time.Millisecond, MaxDelay: time.Minute, QPS: 2, Burst: 4,
		MaxRetries: ptr.To(s.opts.MaxRetries),
		OnGiveUp: func(_ applyKey, err error) {
			v, _ := s.latest.Get()
			s.log.Error("configuration not applied after its retries; trying again at the next change or in a while",
				zap.String("hash", v.Hash), zap.Duration("after", retryAfterGiveUp), zap.Error(err))
			// A cause that passes (a full disk, NGINX restarting) must not leave old routes forever.
			s.ctrl.Queue().AddAfter(applyKey{}, retryAfterGiveUp)
		},
	})
	s.ctrl = pipeline.NewController(q, s.apply, pipeline.ControllerOptions{Workers: 1})
	return s
}

// isLive reports whether the data plane runs the configuration with hash h.
func (s *structureLane) isLive(h string) bool {
	p := s.live.Load()
	return p != nil && *p == h
}

// offer makes v the configuration to apply next, once the pacer's gap after the last reload has passed:
// changes that arrive meanwhile coalesce into one reload of the newest.
func (s *structureLane) offer(v modules.Rendered) {
	s.latest.Set(v)
	if s.isLive(v.Hash) {
		// Nothing to reload (a change of routes or of the SNI table, which the push lanes took); a pending
		// apply of an older configuration finds this one and does nothing.
		return
	}
	if wait := s.pacer.wait(); wait > 0 {
		s.ctrl.Queue().AddAfter(applyKey{}, wait)
		return
	}
	s.retry()
}

// retry asks the lane to apply the newest configuration if it is not live (a no-op when it is).
func (s *structureLane) retry() { s.ctrl.Queue().Add(applyKey{}) }

func (s *structureLane) apply(ctx context.Context, _ applyKey) error {
	v, ok := s.latest.Get()
	if !ok {
		return nil
	}
	if s.isLive(v.Hash) {
		// The same configuration again: the renderer published a change of routes or of the SNI table
		// only, which the push lanes apply. Nothing to reload or count.
		return nil
	}
	if v.Hash != s.attempted {
		// The retry limit is per configuration: a newer one must not inherit the failures of the one
		// it replaces (the queue counts them per key, and the lane has a single key).
		s.ctrl.Queue().Forget(applyKey{})
		s.attempted = v.Hash
	}
	if s.live.Load() == nil && s.firstStart != nil {
		s.firstStart(v.Model.ProfileNames())
	}
	began := time.Now()
	err := s.applier.Apply(ctx, v.Config, v.Hash)
	s.m.duration.Observe(time.Since(began).Seconds())
	if err != nil && ctx.Err() != nil {
		s.log.Info("configuration not applied: shutting down", zap.String("hash", v.Hash))
		return nil
	}
	if ae, ok := errors.AsType[*nginx.ApplyError](err); ok && ae.Stage == "test" && s.refusedProfiles != nil {
		if failing := nginx.FailingProfiles(v.Config, ae.Err.Error(), v.Model.Profiles); len(failing) > 0 {
			s.refusedProfiles(v, failing, ae.Err.Error())
		}
	}
	if err != nil {
		s.m.reloads.WithLabelValues("failure").Inc()
		s.m.lastSuccess.Set(0)
		s.log.Error("nginx configuration not applied; the running one stays", zap.String("hash", v.Hash), zap.Error(err))
		s.events(v.Hash, err)
		return err
	}
	s.live.Store(&v.Hash)
	s.m.reloadGap.Set(s.pacer.reloaded().Seconds())
	// Counted as soon as NGINX serves it: what follows asks NGINX about its stores, and the metrics must
	// not lag behind the traffic meanwhile.
	s.m.reloads.WithLabelValues("success").Inc()
	s.m.lastSuccess.Set(1)
	s.m.lastTime.Set(float64(time.Now().Unix()))
	s.m.hash.Set(hashNumber(v.Hash))
	// A reload keeps the shared dicts, except one whose size or definition changed: NGINX gives that one
	// a new, empty zone, which needs a full push.
	s.wentLive(s.keptStores(ctx), v.Model.ProfileNames())
	return nil
}

// keptStores says which of the data plane's stores a configuration that went live kept filled; the
// others need a full push. When the data plane cannot tell, none.
func (s *structureLane) keptStores(ctx context.Context) nginx.Filled {
	f, err := s.applier.Filled(ctx)
	if err != nil {
		s.log.Warn("cannot tell whether the reload emptied the shared dicts; pushing everything", zap.Error(err))
		return nginx.Filled{}
	}
	if !f.Endpoints || !f.Certificates || !f.Routes {
		s.log.Info("pushing what the data plane lost in the reload",
			zap.Bool("routes", !f.Routes), zap.Bool("endpoints", !f.Endpoints), zap.Bool("certificates", !f.Certificates))
	}
	return f
}

// reloadFailed reports a configuration the data plane refused as a Warning Event on the controller's
// Pod, when it is known.
func (r *Reloader) reloadFailed(hash string, err error) {
	if r.opts.Pod.Name == "" {
		return
	}
	r.recorder.Event(&corev1.ObjectReference{Kind: "Pod", Namespace: r.opts.Pod.Namespace, Name: r.opts.Pod.Name, APIVersion: "v1"},
		corev1.EventTypeWarning, ReasonReloadFailed, fmt.Sprintf("configuration %.12s not applied: %v", hash, err))
}
