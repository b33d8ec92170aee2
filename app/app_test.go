package app

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap/zaptest"

	"github.com/ingress-reactor/ingress-reactor/internal/freeport"
	"github.com/ingress-reactor/ingress-reactor/modules/reloader"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// recordingApplier stands in for NGINX: it shows that a team can swap the data plane with fx.Replace.
type recordingApplier struct {
	mu        sync.Mutex
	confs     [][]byte
	endpoints map[nginx.UpstreamName][]nginx.Endpoint
	routes    map[nginx.Hostname][]byte
	starts    *reloader.Starts
	started   bool
	// routesPushed gets a value (if it has none) after each routes push.
	routesPushed chan struct{}
}

func newRecordingApplier() *recordingApplier {
	return &recordingApplier{starts: reloader.NewStarts(), routesPushed: make(chan struct{}, 1)}
}

func (a *recordingApplier) Apply(_ context.Context, conf []byte, _ string) error {
	a.mu.Lock()
	a.confs = append(a.confs, conf)
	first := !a.started
	a.started = true
	a.mu.Unlock()
	if first {
		a.starts.Set(1) // a fresh data plane: the reloader pushes every endpoint
	}
	return nil
}

func (a *recordingApplier) SetEndpoints(_ context.Context, ups map[nginx.UpstreamName][]nginx.Endpoint, full bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if full || a.endpoints == nil {
		a.endpoints = map[nginx.UpstreamName][]nginx.Endpoint{}
	}
	for k, v := range ups {
		a.endpoints[k] = v
	}
	return nil
}

func (a *recordingApplier) SetCertificates(context.Context, nginx.CertificateUpdate, bool) error {
	return nil
}

func (a *recordingApplier) SetRoutes(_ context.Context, u nginx.RouteUpdate, full bool) error {
	defer func() {
		select {
		case a.routesPushed <- struct{}{}:
		default:
		}
	}()
	a.mu.Lock()
	defer a.mu.Unlock()
	if full || a.routes == nil {
		a.routes = map[nginx.Hostname][]byte{}
	}
	for h, e := range u.Hosts {
		if e == nil {
			delete(a.routes, h)
		} else {
			a.routes[h] = e
		}
	}
	return nil
}

// Filled reports no store filled: the reloader pushes everything after each configuration.
func (a *recordingApplier) Filled(context.Context) (nginx.Filled, error) { return nginx.Filled{}, nil }

func (a *recordingApplier) Starts() *reloader.Starts { return a.starts }

func (a *recordingApplier) Ready() error { return nil }

func (a *recordingApplier) Alive() error { return nil }

func freePort(t testing.TB) int { t.Helper(); return freeport.Get(t) }

// swappedApp is the controller on the local example with the Applier swapped for a recording one. NGINX
// is never needed: the test points at an NGINX binary and a modules directory that do not exist.
func swappedApp(t *testing.T, extra ...fx.Option) (*fx.App, *recordingApplier, Config) {
	t.Helper()
	cfg := withoutNginx(t, DefaultConfig())
	cfg.LocalManifests = "../examples/local"
	cfg.HealthzHost = "127.0.0.1"
	cfg.HealthzPort = freePort(t)
	cfg.NginxDir = t.TempDir()
	cfg.SSLDir = t.TempDir() + "/ssl"
	cfg.UpdateStatus = false
	cfg.ShutdownTimeout = 10 * time.Second

	// fx.Replace swaps the Applier without touching the module.
	rec := newRecordingApplier()
	app := New(cfg, zaptest.NewLogger(t), append([]fx.Option{
		fx.Replace(fx.Annotate(rec, fx.As(new(reloader.Applier)))),
	}, extra...)...)
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	return app, rec, cfg
}

// TestHealthServerStopsLast: while the modules stop (a module's stop hook, registered like theirs, asks),
// /healthz still answers.
func TestHealthServerStopsLast(t *testing.T) {
	var during atomic.Int32
	var cfg Config
	probe := fx.Module("probe", fx.Invoke(func(lc fx.Lifecycle) {
		lc.Append(fx.Hook{OnStop: func(ctx context.Context) error {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", cfg.HealthzPort))
			if err == nil {
				during.Store(int32(resp.StatusCode))
				_ = resp.Body.Close()
			}
			return nil
		}})
	}))
	app, _, c := swappedApp(t, probe)
	cfg = c
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := during.Load(); got != http.StatusOK {
		t.Errorf("/healthz while the modules stopped: %d, want 200 (0: no answer)", got)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", cfg.HealthzPort)); err == nil {
		_ = resp.Body.Close()
		t.Error("the health server still answers after Stop")
	}
}

// withoutNginx points cfg at an NGINX binary and a modules directory that do not exist.
func withoutNginx(t *testing.T, cfg Config) Config {
	t.Helper()
	cfg.NginxBinary = filepath.Join(t.TempDir(), "no-nginx")
	cfg.NginxModulesDir = t.TempDir()
	return cfg
}

// Without a swap, a missing Lua module stops the start and says how to install it.
func TestNginxApplierNeedsTheLuaModule(t *testing.T) {
	cfg := withoutNginx(t, DefaultConfig())
	cfg.LocalManifests = "../examples/local"
	cfg.NginxDir = t.TempDir()
	cfg.SSLDir = t.TempDir() + "/ssl"
	cfg.UpdateStatus = false
	err := New(cfg, zaptest.NewLogger(t)).Err()
	if err == nil || !strings.Contains(err.Error(), "ngx_http_lua_module.so") || !strings.Contains(err.Error(), "make deps") {
		t.Fatalf("start without the Lua module: %v, want an error naming the module and make deps", err)
	}
}

func TestApplierCanBeSwapped(t *testing.T) {
	app, rec, _ := swappedApp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := app.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()

	deadline := time.Now().Add(20 * time.Second)
	for {
		rec.mu.Lock()
		confs := len(rec.confs)
		_, routed := rec.routes["demo.localhost"]
		eps := len(rec.endpoints)
		rec.mu.Unlock()
		if confs > 0 && routed && eps == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("swapped applier: want a configuration, routes for demo.localhost and 2 upstreams with endpoints, got %d configurations, routes for it %v and %d upstreams", confs, routed, eps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStartTimeoutIsItsOwn: --start-timeout, not --shutdown-timeout, bounds the start.
func TestStartTimeoutIsItsOwn(t *testing.T) {
	app, _, cfg := swappedApp(t)
	if cfg.StartTimeout != DefaultConfig().StartTimeout || cfg.StartTimeout == cfg.ShutdownTimeout {
		t.Fatalf("test setup: start timeout %s, shutdown timeout %s", cfg.StartTimeout, cfg.ShutdownTimeout)
	}
	if got := app.StartTimeout(); got != cfg.StartTimeout {
		t.Errorf("fx start timeout %s, want --start-timeout %s", got, cfg.StartTimeout)
	}
	if got := app.StopTimeout(); got != cfg.ShutdownTimeout {
		t.Errorf("fx stop timeout %s, want --shutdown-timeout %s", got, cfg.ShutdownTimeout)
	}
}

// TestStartBeyondTimeoutNamesTheFlag: a start hook that does not return within --start-timeout fails the
// start with an error that names the flag.
func TestStartBeyondTimeoutNamesTheFlag(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	app := fx.New(fx.NopLogger, fx.Invoke(func(lc fx.Lifecycle) {
		lc.Append(fx.Hook{OnStart: func(context.Context) error {
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
			return nil
		}})
	}))
	err := start(app, 50*time.Millisecond, zaptest.NewLogger(t))
	if err == nil || !strings.Contains(err.Error(), "--start-timeout (50ms)") {
		t.Fatalf("start of a hook that outlasts the timeout: %v, want an error naming --start-timeout (50ms)", err)
	}
}
