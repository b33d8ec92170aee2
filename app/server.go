package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/ingress-reactor/ingress-reactor/modules"
)

// NewRegistry returns the Prometheus registry that every module registers on, with Go and process collectors.
func NewRegistry() (*prometheus.Registry, prometheus.Registerer) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, reg
}

// HealthServerParams are the fx inputs of the health, metrics and profiling server.
type HealthServerParams struct {
	fx.In
	Config    Config
	Log       *zap.Logger
	Registry  *prometheus.Registry
	Checks    []modules.ReadyCheck `group:"readyz"`
	Live      []modules.ReadyCheck `group:"healthz"`
	Lifecycle fx.Lifecycle
	Server    *healthServer
}

// NewHealthMux builds the handler of the healthz port: /healthz (and healthPath, --health-check-path, when
// it is another path), /readyz, /metrics and, with --profiling, /debug/pprof/. /metrics adds ingress-nginx's
// names of the controller metrics that mean the same as ours (compatmetrics.go), with constLabels.
func NewHealthMux(profiling bool, healthPath string, reg *prometheus.Registry, constLabels map[string]string, ready, live []modules.ReadyCheck) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", checksHandler("healthz", live))
	if healthPath != "" && healthPath != "/healthz" {
		mux.HandleFunc(healthPath, checksHandler("healthz", live))
	}
	mux.HandleFunc("/readyz", checksHandler("readyz", ready))
	mux.Handle("/metrics", promhttp.HandlerFor(compatGatherer{g: reg, constLabels: constLabels}, promhttp.HandlerOpts{Registry: reg}))
	if profiling {
		mux.HandleFunc("/debug/pprof/", loopbackOnly(pprof.Index))
		mux.HandleFunc("/debug/pprof/cmdline", loopbackOnly(pprof.Cmdline))
		mux.HandleFunc("/debug/pprof/profile", loopbackOnly(pprof.Profile))
		mux.HandleFunc("/debug/pprof/symbol", loopbackOnly(pprof.Symbol))
		mux.HandleFunc("/debug/pprof/trace", loopbackOnly(pprof.Trace))
	}
	return mux
}

// loopbackOnly answers 403 to clients that are not on the loopback interface. The healthz port is
// reachable from the cluster (probes, Prometheus), but profiles and the command line are for an operator,
// who reaches them with kubectl port-forward (which connects from inside the pod, over loopback).
func loopbackOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			http.Error(w, "profiling is served to loopback clients only (use kubectl port-forward)", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

// checksHandler answers 200 "ok" when every check passes, else 503 with the failing checks.
func checksHandler(what string, checks []modules.ReadyCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		var failed []string
		for _, c := range checks {
			if err := c.Check(); err != nil {
				failed = append(failed, fmt.Sprintf("[-] %s: %v", c.Name, err))
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(strings.Join(failed, "\n") + "\n" + what + " check failed\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}

// healthServer carries the health server from RunHealthServer, which builds and starts it, to the stop
// hook of healthServerStop.
type healthServer struct{ srv *http.Server }

// healthServerStop shuts the health server down last. fx stops hooks in the reverse order of their
// registration and runs the invokes of modules before those of the application, so RunHealthServer's own
// hook would stop first; this module, listed before every other, registers the stop hook before any
// module does. /healthz, /readyz and /metrics so keep answering while the modules stop and NGINX drains.
var healthServerStop = fx.Module("healthz-stop",
	fx.Provide(func() *healthServer { return &healthServer{} }),
	fx.Invoke(func(h *healthServer, lc fx.Lifecycle) {
		lc.Append(fx.Hook{OnStop: func(ctx context.Context) error {
			if h.srv == nil {
				return nil
			}
			return h.srv.Shutdown(ctx)
		}})
	}),
)

// RunHealthServer binds the healthz port at start (failing start if it is taken); healthServerStop shuts
// it down at stop, after everything else.
func RunHealthServer(p HealthServerParams) {
	log := p.Log.Named("healthz")
	srv := &http.Server{
		Addr:              net.JoinHostPort(p.Config.HealthzHost, strconv.Itoa(p.Config.HealthzPort)),
		Handler:           NewHealthMux(p.Config.Profiling, p.Config.HealthCheckPath, p.Registry, ingressNginxConstLabels(p.Config), p.Checks, p.Live),
		ReadHeaderTimeout: 10 * time.Second,
	}
	p.Server.srv = srv
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", srv.Addr)
			if err != nil {
				return fmt.Errorf("healthz server: %w", err)
			}
			log.Info("serving health, readiness and metrics", zap.String("address", ln.Addr().String()), zap.Bool("profiling", p.Config.Profiling))
			go func() {
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("healthz server stopped", zap.Error(err))
				}
			}()
			return nil
		},
	})
}
