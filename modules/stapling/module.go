// Package stapling keeps OCSP responses for the served certificates while the ConfigMap's enable-ocsp is
// true: it follows CertChange and SettingsChange, drives a certs.OCSPStapler (which fetches, checks and
// refreshes the responses), and publishes each change as an OCSPChange, which the reloader's certificate
// lane pushes to NGINX with the certificate: no reload. A responder that fails costs the certificate its
// staple once the last response expires, never a handshake.
package stapling

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires OCSP stapling into the application.
var Module = fx.Module("stapling",
	fx.Provide(New),
	fx.Invoke(func(*Stapling) {}),
)

// Options configure the module.
type Options struct {
	// Client fetches the responses; nil: certs.NewOCSPClient().
	Client *http.Client
	// LogEvery is the least time between two log lines of one failure class; 0 means 10 minutes.
	LogEvery time.Duration
}

// Params are the module's fx inputs.
type Params struct {
	fx.In
	Options   Options `optional:"true"`
	Certs     *pipeline.Topic[modules.CertChange]
	Settings  *pipeline.Topic[modules.SettingsChange]
	Out       *pipeline.Topic[modules.OCSPChange]
	Registry  prometheus.Registerer
	Log       *zap.Logger
	Lifecycle fx.Lifecycle `optional:"true"`
}

// Stapling is the running module.
type Stapling struct {
	stapler  *certs.OCSPStapler
	log      *zap.Logger
	logEvery time.Duration
	fetches  *prometheus.CounterVec

	logMu sync.Mutex
	// logged is when each failure class was last logged.
	logged map[string]time.Time

	cancel context.CancelFunc
	done   chan struct{}
}

// New builds the module; it fetches nothing before enable-ocsp is true.
func New(p Params) (*Stapling, error) {
	s := &Stapling{
		log:      p.Log.Named("stapling"),
		logEvery: p.Options.LogEvery,
		logged:   map[string]time.Time{},
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_ocsp_fetches_total",
			Help: "OCSP responses fetched for stapling (enable-ocsp), by result: good, revoked, unknown, unreachable, invalid.",
		}, []string{"result"}),
	}
	if s.logEvery <= 0 {
		s.logEvery = 10 * time.Minute
	}
	for _, r := range []string{certs.OCSPGood, certs.OCSPRevoked, certs.OCSPUnknown, certs.OCSPUnreachable, certs.OCSPInvalid} {
		s.fetches.WithLabelValues(r)
	}
	s.stapler = certs.NewOCSPStapler(certs.OCSPStaplerOptions{
		Client: p.Options.Client,
		OnStaple: func(secret types.NamespacedName, st *certs.Staple) {
			p.Out.Publish(modules.OCSPChange{Secret: secret, Staple: st})
		},
		OnFetch: s.fetched,
	})
	stapled := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ingress_reactor_ocsp_stapled",
		Help: "Certificates that have a current OCSP response to staple (enable-ocsp).",
	}, func() float64 { return float64(s.stapler.Stapled()) })
	for _, c := range []prometheus.Collector{s.fetches, stapled} {
		if err := p.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	p.Certs.Subscribe(func(c modules.CertChange) {
		err := s.stapler.Set(c.Secret, c.Certificate)
		if err != nil && c.Certificate != nil {
			level := zap.DebugLevel
			if !errors.Is(err, certs.ErrNoOCSPResponder) {
				level = zap.InfoLevel
			}
			s.log.Log(level, "certificate not stapled", zap.Stringer("secret", c.Secret), zap.Error(err))
		}
	})
	p.Settings.Subscribe(func(c modules.SettingsChange) { s.stapler.SetEnabled(c.Settings.EnableOCSP) })
	modules.Bind(p.Lifecycle, s)
	return s, nil
}

// fetched counts a fetch and logs a failure, at most once per class and LogEvery: a responder that is
// down fails for every certificate it serves. The error names the responder, never key material.
func (s *Stapling) fetched(secret types.NamespacedName, result string, err error) {
	s.fetches.WithLabelValues(result).Inc()
	if err == nil {
		return
	}
	s.logMu.Lock()
	now := time.Now()
	last, seen := s.logged[result]
	quiet := seen && now.Sub(last) < s.logEvery
	if !quiet {
		s.logged[result] = now
	}
	s.logMu.Unlock()
	if !quiet {
		s.log.Warn("OCSP response not stapled; this class of failure is logged again in "+s.logEvery.String()+" at the earliest",
			zap.Stringer("secret", secret), zap.String("result", result), zap.Error(err))
	}
}

// Start runs the stapler until Stop.
func (s *Stapling) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		s.stapler.Run(ctx)
	}()
}

// Stop ends the fetches in flight and waits for them, within ctx.
func (s *Stapling) Stop(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
