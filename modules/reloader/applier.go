package reloader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Applier is the data plane as the reloader sees it. The default is NGINX (NewNginxApplier); a team can
// swap it with fx.Decorate or fx.Replace in app.New's extra options, for example to wrap it with auditing
// or to drive another proxy. Everything the reloader learns from the data plane goes through these
// methods, so a wrapper that embeds the Applier it wraps passes all of it on, and one that does not must
// say what it does with each.
type Applier interface {
	// Apply makes conf, identified by hash, the running configuration, or returns why not. A failed Apply
	// must leave the running configuration untouched.
	Apply(ctx context.Context, conf []byte, hash string) error
	// SetEndpoints replaces the endpoint lists of the given upstreams without a reload. With full, the
	// given upstreams are the complete set and all others are emptied. An *nginx.DictFullError is a
	// partial success: what fit is live.
	SetEndpoints(ctx context.Context, upstreams map[nginx.UpstreamName][]nginx.Endpoint, full bool) error
	// SetCertificates changes the certificates served per SNI name without a reload. With full, u is the
	// complete set. An *nginx.DictFullError is a partial success, as for SetEndpoints.
	SetCertificates(ctx context.Context, u nginx.CertificateUpdate, full bool) error
	// SetRoutes changes the host and path routes served without a reload. With full, u is the complete
	// table. An *nginx.DictFullError is a partial success, as for SetEndpoints.
	SetRoutes(ctx context.Context, u nginx.RouteUpdate, full bool) error
	// Filled reports which stores (endpoints, certificates, routes) a full push has filled since the data plane
	// created them. A reload can empty a store (NGINX replaces a shared dict whose size changed with an
	// empty one): after each configuration that went live, the reloader pushes in full the stores not
	// reported filled. An Applier that cannot tell returns the zero Filled, and gets full pushes of
	// all of them after every new configuration.
	Filled(ctx context.Context) (nginx.Filled, error)
	// Starts is where the data plane reports its start count each time a fresh instance is ready to
	// receive endpoints, certificates and routes (the first start included). A fresh instance holds none:
	// the reloader pushes all of them again. The reloader is its only reader.
	Starts() *Starts
	// Ready returns nil once a configuration is live.
	Ready() error
	// Alive returns an error once the data plane is beyond repair in this process; /healthz then fails,
	// so the kubelet restarts the pod.
	Alive() error
}

// Starts carries the start count of the data plane; see Applier.Starts.
type Starts = pipeline.Latest[uint64]

// NewStarts returns an empty Starts for an Applier to report into.
func NewStarts() *Starts { return pipeline.NewLatest[uint64]() }

// NginxOptions configure the default Applier.
type NginxOptions struct {
	Runtime nginx.RuntimeConfig
	// StopTimeout bounds NGINX's graceful stop; after it NGINX is killed.
	StopTimeout time.Duration
}

// NginxParams are the fx inputs of NewNginxApplier.
type NginxParams struct {
	fx.In
	Options   NginxOptions
	Registry  prometheus.Registerer
	Log       *zap.Logger
	Lifecycle fx.Lifecycle
}

// NginxApplier drives a supervised NGINX through nginx.Runtime.
type NginxApplier struct {
	rt     *nginx.Runtime
	starts *Starts
}

// NewNginxApplier prepares NGINX's working directory; NGINX itself starts with the first Apply and is
// stopped gracefully (SIGQUIT, then SIGKILL after StopTimeout) when the application stops.
func NewNginxApplier(p NginxParams) (Applier, error) {
	cfg := p.Options.Runtime
	starts := NewStarts()
	userOnReady := cfg.OnReady
	cfg.OnReady = func(n uint64) {
		if userOnReady != nil {
			userOnReady(n)
		}
		starts.Set(n)
	}
	if cfg.Process.Log == nil {
		cfg.Process.Log = p.Log.Named("nginx")
	}
	rt, err := nginx.NewRuntime(cfg)
	if err != nil {
		return nil, fmt.Errorf("prepare nginx: %w", err)
	}
	restarts := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ingress_reactor_nginx_restarts_total",
		Help: "Times the NGINX master died and was started again by the controller.",
	}, func() float64 { return float64(rt.Process().Restarts()) })
	if err := p.Registry.Register(restarts); err != nil {
		return nil, fmt.Errorf("register nginx metrics: %w", err)
	}
	stopTimeout := p.Options.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = 20 * time.Second
	}
	p.Lifecycle.Append(fx.Hook{OnStop: func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, stopTimeout)
		defer cancel()
		rt.Client().CloseIdleConnections()
		if err := rt.Stop(ctx); err != nil && !errors.Is(err, nginx.ErrNotRunning) {
			return fmt.Errorf("stop nginx: %w", err)
		}
		return nil
	}})
	return &NginxApplier{rt: rt, starts: starts}, nil
}

// Apply tests, installs and reloads conf; see nginx.Runtime.Apply.
func (a *NginxApplier) Apply(ctx context.Context, conf []byte, hash string) error {
	return a.rt.Apply(ctx, conf, hash)
}

// SetEndpoints posts endpoint lists to NGINX's internal status server.
func (a *NginxApplier) SetEndpoints(ctx context.Context, ups map[nginx.UpstreamName][]nginx.Endpoint, full bool) error {
	if full {
		return a.rt.Client().ReplaceEndpoints(ctx, ups)
	}
	return a.rt.Client().PushEndpoints(ctx, ups)
}

// SetCertificates posts certificates and the SNI host table to NGINX's internal status server.
func (a *NginxApplier) SetCertificates(ctx context.Context, u nginx.CertificateUpdate, full bool) error {
	if full {
		return a.rt.Client().ReplaceCertificates(ctx, u)
	}
	return a.rt.Client().PushCertificates(ctx, u)
}

// SetRoutes posts host and path routes to NGINX's internal status server.
func (a *NginxApplier) SetRoutes(ctx context.Context, u nginx.RouteUpdate, full bool) error {
	if full {
		return a.rt.Client().ReplaceRoutes(ctx, u)
	}
	return a.rt.Client().PushRoutes(ctx, u)
}

// Filled reports which of NGINX's shared dicts a full push has filled since NGINX created them.
func (a *NginxApplier) Filled(ctx context.Context) (nginx.Filled, error) {
	return a.rt.Client().Filled(ctx)
}

// Starts reports each start of NGINX once its status server answers.
func (a *NginxApplier) Starts() *Starts { return a.starts }

// Alive returns an error once NGINX kept dying and its supervisor gave up restarting it, or when its
// current start is stuck without a configuration coming to replace it (see nginx.Runtime.Alive): the
// process then fails /healthz, so the kubelet restarts the pod instead of leaving a dead replica in place.
func (a *NginxApplier) Alive() error {
	if a.rt.Process().GaveUp() {
		return fmt.Errorf("nginx kept dying and is no longer restarted: %v", a.rt.Process().Err())
	}
	return a.rt.Alive()
}

// Ready reports whether a configuration is live and NGINX runs.
func (a *NginxApplier) Ready() error { return a.rt.Ready() }

// Runtime exposes the underlying runtime, for diagnostics and tests.
func (a *NginxApplier) Runtime() *nginx.Runtime { return a.rt }
