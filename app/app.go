// Package app assembles the controller: configuration and flags, the logger, the Kubernetes source, the
// health/metrics server, and the list of modules that the feature flags switch on. It is the only package
// that names modules; teams that want a different implementation of a part pass fx.Replace or fx.Decorate
// options to New instead of forking.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// New builds the fx application for cfg. The extra options are applied last, so fx.Replace and fx.Decorate
// in them override what the modules provide.
func New(cfg Config, log *zap.Logger, extra ...fx.Option) *fx.App {
	opts := []fx.Option{
		healthServerStop, // first: its stop hook must be registered before any module's
		fx.WithLogger(func() fxevent.Logger {
			l := &fxevent.ZapLogger{Logger: log.Named("fx")}
			l.UseLogLevel(zap.DebugLevel)
			// fx's errors name the whole chain of constructors that led to a failure; Run reports the
			// cause itself, so the chain is for debugging only.
			l.UseErrorLevel(zap.DebugLevel)
			return l
		}),
		fx.StartTimeout(cfg.StartTimeout),
		fx.StopTimeout(cfg.ShutdownTimeout),
		fx.Supply(cfg, log),
		fx.Provide(
			NewRegistry,
			pipeline.NewMetrics,
			NewKubeSource,
			NewEventRecorder,
		),
		drainModule,
		fx.Invoke(RunHealthServer),
		fx.Invoke(runIdleMemoryRelease),
	}
	opts = append(opts, Modules(cfg)...)
	opts = append(opts, extra...)
	return fx.New(opts...)
}

// Run starts the controller within --start-timeout and blocks until SIGTERM or SIGINT. With
// --shutdown-grace-period it then reports not ready and keeps serving for that long (a second signal cuts
// it short); then it stops everything within --shutdown-timeout.
func Run(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := NewLogger(cfg)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	log.Info("starting ingress-reactor", zap.String("version", cfg.Version), zap.String("commit", cfg.Commit))
	if w := cfg.IgnoredFlagsWarning(); w != "" {
		log.Warn(w)
	}
	applyGoMemoryLimit(cfg, log, processMemoryLimitHost())

	var drain *Drain
	a := New(cfg, log, fx.Populate(&drain))
	if err := a.Err(); err != nil {
		return startFailure(log, err)
	}
	// Signals are caught before starting, so one that arrives during start-up (waiting for caches, the
	// first NGINX start) still leads to a graceful stop.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	if err := start(a, cfg.StartTimeout, log); err != nil {
		return err
	}
	var sig os.Signal
	grace := cfg.ShutdownGracePeriod
	select {
	case sig = <-sigs: // during start-up: the controller was never ready, so nobody sends it traffic to drain
		grace = 0
	default:
		sig = <-sigs
	}
	if grace > 0 {
		drain.Begin()
		log.Info("draining: not ready, still serving", zap.Stringer("signal", sig), zap.Duration("grace-period", grace))
		timer := time.NewTimer(grace)
		select {
		case <-timer.C:
		case sig = <-sigs: // a second signal ends the grace period
			timer.Stop()
		}
	}
	signal.Stop(sigs)
	log.Info("stopping", zap.Stringer("signal", sig), zap.Duration("timeout", cfg.ShutdownTimeout))
	stopCtx, cancelStop := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancelStop()
	if err := a.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	log.Info("stopped")
	return nil
}

// start starts a within timeout (--start-timeout). A start that does not finish in time fails with an
// error that names the flag, so an operator knows what to raise.
func start(a *fx.App, timeout time.Duration, log *zap.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := a.Start(ctx)
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("start-up failed: not finished within --start-timeout (%s)", timeout)
	}
	return startFailure(log, err) // fx has stopped what did start
}

// startFailure reduces an error of building or starting the application to its cause, which names what
// an operator can fix (for example that NGINX's workers cannot reach --nginx-dir). fx's chain of the
// constructors that led there is logged at debug level only.
func startFailure(log *zap.Logger, err error) error {
	cause := dig.RootCause(err)
	if cause != err {
		log.Debug("start-up failure: dependency chain", zap.Error(err))
	}
	return fmt.Errorf("start-up failed: %w", cause)
}

// NewEventRecorder returns the recorder modules use to put Events on the objects they act on.
// Events are also logged, so local mode shows them without kubectl.
func NewEventRecorder(client kubernetes.Interface, log *zap.Logger, lc fx.Lifecycle) record.EventRecorder {
	b := record.NewBroadcaster()
	elog := log.Named("event")
	b.StartEventWatcher(func(e *corev1.Event) {
		fields := []zap.Field{
			zap.String("type", e.Type), zap.String("reason", e.Reason),
			zap.String("object", e.InvolvedObject.Kind+" "+e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name),
			zap.String("message", e.Message),
		}
		if e.Type == corev1.EventTypeWarning {
			elog.Warn("event", fields...)
		} else {
			elog.Info("event", fields...)
		}
	})
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	lc.Append(fx.Hook{OnStop: func(context.Context) error { b.Shutdown(); return nil }})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ingress-reactor"})
}
