package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/modules/endpoints"
	"github.com/ingress-reactor/ingress-reactor/modules/reloader"
	"github.com/ingress-reactor/ingress-reactor/modules/renderer"
	"github.com/ingress-reactor/ingress-reactor/modules/secretsync"
	"github.com/ingress-reactor/ingress-reactor/modules/stapling"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// DataPlane is the configuration shared by the renderer and the reloader: NGINX's paths, modules, ports and
// the default certificate, derived once from Config.
type DataPlane struct {
	Paths   nginx.Paths
	Render  nginx.RenderConfig
	Runtime nginx.RuntimeConfig
	// Template is the parsed --template, nil for the embedded one.
	Template *nginx.Template
	// SSLStore holds certificate files (--ssl-dir).
	SSLStore *certs.Store
	// FakeDefault is the generated default certificate, written to SSLStore.
	FakeDefault *certs.Certificate
	// missingNginx says why NGINX cannot run here (its Lua module was not found), nil when it can. Only
	// the NGINX Applier needs it: with a swapped Applier, the controller runs without NGINX installed.
	missingNginx error
}

// NewDataPlane prepares the data-plane configuration: it detects NGINX's dynamic modules, parses --template,
// and generates the fake default certificate into --ssl-dir. Missing NGINX modules fail only the start of
// NGINX itself (nginxOptions).
func NewDataPlane(cfg Config, log *zap.Logger) (*DataPlane, error) {
	paths, err := nginx.NewPaths(cfg.NginxDir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	if cfg.NginxModulesDir != "" {
		dirs = []string{cfg.NginxModulesDir}
	}
	mods, missingNginx := nginx.DetectModules(false, dirs...)
	if missingNginx != nil {
		missingNginx = fmt.Errorf("%w (run `make deps` to install NGINX with its Lua module)", missingNginx)
	}
	// The ssl directory itself is 0700, but its parent must stay traversable: with the default layout it
	// also holds NGINX's directory, whose temp paths NGINX's workers (another user under root) use.
	sslDir, err := filepath.Abs(cfg.SSLDir) // NGINX's configuration names the files by absolute path
	if err != nil {
		return nil, fmt.Errorf("--ssl-dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(sslDir), 0o755); err != nil {
		return nil, fmt.Errorf("--ssl-dir parent: %w", err)
	}
	store, err := certs.NewStore(sslDir)
	if err != nil {
		return nil, err
	}
	fake, err := certs.GenerateFakeDefault(time.Now())
	if err != nil {
		return nil, fmt.Errorf("generate default certificate: %w", err)
	}
	fakePaths, err := store.Write(fake)
	if err != nil {
		return nil, fmt.Errorf("write default certificate: %w", err)
	}
	token, err := nginx.NewStatusToken()
	if err != nil {
		return nil, err
	}
	dp := &DataPlane{
		Paths:        paths,
		SSLStore:     store,
		FakeDefault:  fake,
		missingNginx: missingNginx,
		Render: nginx.RenderConfig{
			HTTPPort:              cfg.HTTPPort,
			HTTPSPort:             cfg.HTTPSPort,
			StatusPort:            cfg.NginxStatusPort,
			StatusToken:           token,
			Paths:                 paths,
			Modules:               mods,
			WorkerProcesses:       cfg.WorkerProcesses,
			DefaultCertificate:    fakePaths.Cert,
			DefaultCertificateKey: fakePaths.Key,
			EndpointsDictMB:       cfg.EndpointsDictSize,
			CertificatesDictMB:    cfg.CertificatesDictSize,
			RoutesDictMB:          cfg.RoutesDictSize,
			LimitsDictMB:          cfg.LimitsDictSize,
		},
		Runtime: nginx.RuntimeConfig{
			Process:        nginx.ProcessConfig{Binary: cfg.NginxBinary, Paths: paths, Log: log.Named("nginx")},
			StatusPort:     cfg.NginxStatusPort,
			StatusToken:    token,
			ConfirmTimeout: cfg.NginxConfirmTimeout,
		},
	}
	// Access logs on, as in ingress-nginx, whose image links its access log to the pod's output; the
	// ConfigMap's access-log-path and disable-access-log replace this.
	dp.Render.AccessLog = "stdout"
	// NGINX listens on IPv6 too where the pod has it, as ingress-nginx does; the ConfigMap's disable-ipv6
	// and bind-address change that.
	dp.Render.IPv6 = nginx.HostHasIPv6()
	passthroughRender(cfg, &dp.Render)
	dp.Render.RequestMetrics = requestMetricsRender(cfg)
	// The settings are checked now, so a mistake stops the start with a clear error instead of failing
	// every render later.
	if _, _, err := nginx.Render(nginx.Model{}, dp.Render); err != nil {
		return nil, fmt.Errorf("nginx settings: %w", err)
	}
	if cfg.TemplatePath != "" {
		t, err := loadTemplate(cfg.TemplatePath)
		if err != nil {
			return nil, err
		}
		dp.Template = t
	}
	return dp, nil
}

func loadTemplate(path string) (*nginx.Template, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--template: %w", err)
	}
	t, err := nginx.ParseTemplate(string(text))
	if err != nil {
		return nil, fmt.Errorf("--template %s: %w", path, err)
	}
	return t, nil
}

// dataPlaneModules are the modules of the HTTP data plane and their options.
func dataPlaneModules(cfg Config) []fx.Option {
	var defaultBackend types.NamespacedName
	if cfg.DefaultBackendService != "" {
		defaultBackend, _ = ParseNamespacedName(cfg.DefaultBackendService) // validated by Config.Validate
	}
	var defaultCert types.NamespacedName
	if cfg.DefaultSSLCertificate != "" {
		defaultCert, _ = ParseNamespacedName(cfg.DefaultSSLCertificate) // validated by Config.Validate
	}
	return []fx.Option{
		fx.Provide(NewDataPlane),
		fx.Provide(func(dp *DataPlane) secretsync.Options {
			return secretsync.Options{DefaultCertificate: defaultCert, Store: dp.SSLStore, FakeDefault: dp.FakeDefault}
		}),
		fx.Supply(endpoints.Options{DefaultBackend: defaultBackend, AllowLoopback: cfg.LocalManifests != ""}),
		fx.Provide(func(dp *DataPlane) renderer.Options {
			return renderer.Options{
				Render:         dp.Render,
				Template:       dp.Template,
				DefaultBackend: defaultBackend,
				Translate:      translateOptions(cfg),
				Ownership:      nginx.HostOwnership(cfg.HostOwnership),
			}
		}),
		fx.Provide(func(dp *DataPlane) (reloader.NginxOptions, error) {
			return nginxOptions(cfg, dp)
		}),
		fx.Supply(reloader.Options{MaxRetries: cfg.ReloadRetries, Pod: podFromEnv()}),
		endpoints.Module,
		secretsync.Module,
		stapling.Module, // enable-ocsp
		renderer.Module,
		reloader.Module,
		fx.Invoke(watchTemplate),
	}
}

// nginxOptions are the NGINX Applier's options. They are only built when that Applier is, so a swapped
// Applier never needs NGINX.
func nginxOptions(cfg Config, dp *DataPlane) (reloader.NginxOptions, error) {
	if dp.missingNginx != nil {
		return reloader.NginxOptions{}, dp.missingNginx
	}
	return reloader.NginxOptions{Runtime: dp.Runtime, StopTimeout: cfg.ShutdownTimeout * 2 / 3}, nil
}

// podFromEnv returns the controller's own Pod from the downward-API variables POD_NAMESPACE and POD_NAME.
func podFromEnv() types.NamespacedName {
	return types.NamespacedName{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME")}
}

// watchTemplate re-reads --template when the file changes. A template that does not parse is logged and the
// previous one stays in use.
func watchTemplate(cfg Config, r *renderer.Renderer, log *zap.Logger, lc fx.Lifecycle) error {
	if cfg.TemplatePath == "" {
		return nil
	}
	log = log.Named("template")
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch --template: %w", err)
	}
	path, err := filepath.Abs(cfg.TemplatePath)
	if err != nil {
		return fmt.Errorf("watch --template: %w", err)
	}
	// Watch the directory: editors and ConfigMap mounts replace the file rather than write it in place.
	if err := w.Add(filepath.Dir(path)); err != nil {
		return errors.Join(fmt.Errorf("watch --template: %w", err), w.Close())
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Error("template watch error", zap.Error(err))
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Clean(ev.Name) != path && filepath.Base(ev.Name) != "..data" {
					continue
				}
				t, err := loadTemplate(path)
				if err != nil {
					log.Error("template changed but cannot be used; keeping the previous one", zap.Error(err))
					continue
				}
				log.Info("template reloaded", zap.String("path", path))
				r.SetTemplate(t)
			}
		}
	}()
	lc.Append(fx.Hook{OnStop: func(context.Context) error { close(done); return w.Close() }})
	return nil
}

// translateOptions are the controller-wide settings of Ingress translation that flags set.
func translateOptions(cfg Config) nginx.TranslateOptions {
	o := nginx.DefaultTranslateOptions()
	o.DisableCatchAll = cfg.DisableCatchAll
	o.DisableExternalName = cfg.DisableServiceExternalName
	return o
}
