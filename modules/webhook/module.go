// Package webhook is the validating admission webhook (--validating-webhook): the API server sends it
// each Ingress of our class before storing it, and it answers with the renderer's verdict, computed by
// nginx.ReviewIngress from the informer caches. A bad Ingress is refused at `kubectl apply` with the
// message its Warning Event would carry; one that loses a conflict is admitted with that message as an
// admission warning. The webhook never runs NGINX, writes no file, renders no configuration and never
// talks to NGINX's status server: an admission request only reads the caches.
package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	listersnetv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires the admission webhook into the application. It needs Options (the app supplies them when
// --validating-webhook is set).
var Module = fx.Module("webhook",
	fx.Provide(New),
	fx.Invoke(func(*Webhook) {}),
)

// Path is the one path served: ingress-nginx's, so its ValidatingWebhookConfiguration works unchanged.
const Path = "/networking/v1/ingresses"

// MaxBodyBytes bounds an AdmissionReview: an UPDATE carries the object and its old version, each at
// most the API server's 3 MiB request limit, and the review around them.
const MaxBodyBytes = 7 << 20

// Options configure the webhook.
type Options struct {
	// Address is --validating-webhook, for example ":8443".
	Address string
	// CertFile and KeyFile are --validating-webhook-certificate and --validating-webhook-key, PEM files;
	// they are read again when they change.
	CertFile, KeyFile string
	// Accepts is the class filter's rule: an Ingress it refuses is admitted without a look.
	Accepts func(*networkingv1.Ingress) bool
	// WatchNamespace is --watch-namespace: Ingresses of other namespaces are admitted without a look.
	WatchNamespace string
	// Translate and Ownership are the renderer's (the ConfigMap's settings are applied on top, as there).
	Translate nginx.TranslateOptions
	Ownership nginx.HostOwnership
}

// Params are the webhook's fx inputs.
type Params struct {
	fx.In
	Options        Options
	Factory        informers.SharedInformerFactory
	Settings       *pipeline.Topic[modules.SettingsChange] `optional:"true"`
	SettingsLoaded *modules.SettingsLoaded                 `optional:"true"`
	Registry       prometheus.Registerer
	Log            *zap.Logger
	Lifecycle      fx.Lifecycle `optional:"true"`
}

// Result is what the module provides: the webhook and its readiness check ("admission-webhook": the
// caches are synced and the server listens).
type Result struct {
	fx.Out
	Webhook *Webhook
	Ready   modules.ReadyCheck `group:"readyz"`
}

// Webhook serves AdmissionReviews for Ingresses over TLS.
type Webhook struct {
	opts       Options
	ingresses  listersnetv1.IngressLister
	indexer    cache.Indexer
	services   modules.Services // the shared cache holds ServiceRecords: no generated lister
	secrets    modules.Secrets  // the shared cache holds SecretRecords: no generated lister
	configMaps listerscorev1.ConfigMapLister
	synced     []cache.InformerSynced
	// translations caches the other Ingresses' translations; it is the webhook's own, so admission
	// requests never touch the renderer's state.
	translations   *nginx.TranslationCache
	cert           *certificate
	settingsLoaded *modules.SettingsLoaded
	metrics        metrics
	log            *zap.Logger

	// reviews bounds the reviews judged at once: a client that floods the webhook (it answers anyone who
	// reaches its port, as the API server does not present a client certificate) gets no more CPU than
	// that; the others wait for their turn, within their request's lifetime.
	reviews chan struct{}

	settings atomic.Pointer[nginx.Settings]
	ready    atomic.Bool
	serving  atomic.Bool
	addr     atomic.Pointer[net.TCPAddr]

	mu     sync.Mutex
	server *http.Server
	done   chan struct{}
}

// New builds the webhook and loads its certificate: a certificate that cannot be loaded fails the start.
// Without fx, pass a nil Lifecycle and call Start and Stop.
func New(p Params) (Result, error) {
	log := p.Log.Named("webhook")
	m := newMetrics()
	for _, c := range m.collectors() {
		if err := p.Registry.Register(c); err != nil {
			return Result{}, fmt.Errorf("webhook: register metrics: %w", err)
		}
	}
	cert, err := loadCertificate(p.Options.CertFile, p.Options.KeyFile, log, m.certReloads)
	if err != nil {
		return Result{}, err
	}
	ingInf := p.Factory.Networking().V1().Ingresses()
	// The Ingresses by host, so that a review looks only at those near the candidate's hosts.
	if err := ingInf.Informer().AddIndexers(cache.Indexers{hostIndex: func(obj any) ([]string, error) {
		ing, ok := obj.(*networkingv1.Ingress)
		if !ok {
			return nil, nil
		}
		return nginx.AdmissionIndexKeys(ing), nil
	}}); err != nil {
		return Result{}, fmt.Errorf("webhook: add ingress index: %w", err)
	}
	w := &Webhook{
		opts:       p.Options,
		ingresses:  ingInf.Lister(),
		indexer:    ingInf.Informer().GetIndexer(),
		services:   modules.NewServices(p.Factory),
		secrets:    modules.NewSecrets(p.Factory),
		configMaps: p.Factory.Core().V1().ConfigMaps().Lister(),
		synced: []cache.InformerSynced{
			ingInf.Informer().HasSynced,
			p.Factory.Networking().V1().IngressClasses().Informer().HasSynced,
			p.Factory.Core().V1().Services().Informer().HasSynced,
			p.Factory.Core().V1().Secrets().Informer().HasSynced,
			p.Factory.Core().V1().ConfigMaps().Informer().HasSynced,
		},
		translations:   nginx.NewTranslationCache(),
		cert:           cert,
		settingsLoaded: p.SettingsLoaded,
		reviews:        make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		metrics:        m,
		log:            log,
	}
	w.settings.Store(&nginx.Settings{})
	// A deleted Ingress leaves the translation cache, which so holds at most the cached Ingresses.
	if _, err := ingInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if k, ok := pipeline.KeyOf(obj); ok {
			w.translations.Evict(k)
		}
	}}); err != nil {
		return Result{}, fmt.Errorf("webhook: ingress handler: %w", err)
	}
	if p.Settings != nil {
		p.Settings.Subscribe(func(c modules.SettingsChange) {
			s := c.Settings
			w.settings.Store(&s)
		})
	}
	if p.Lifecycle != nil {
		ctx, cancel := context.WithCancel(context.Background())
		p.Lifecycle.Append(fx.Hook{
			OnStart: func(context.Context) error { return w.Start(ctx) },
			OnStop: func(stopCtx context.Context) error {
				cancel()
				return w.Stop(stopCtx)
			},
		})
	}
	ready := modules.ReadyCheck{Name: "admission-webhook", Check: func() error {
		switch {
		case !w.serving.Load():
			return errors.New("admission webhook not listening yet")
		case !w.ready.Load():
			return errors.New("admission webhook waiting for the caches")
		}
		return nil
	}}
	return Result{Webhook: w, Ready: ready}, nil
}

// Addr returns the address the webhook listens on, nil before Start.
func (w *Webhook) Addr() *net.TCPAddr { return w.addr.Load() }

// Start binds the address now, so that a port in use fails the start, serves at once (reviews get 503
// until the caches have synced, so the API server applies the failure policy), and watches the
// certificate files.
func (w *Webhook) Start(ctx context.Context) error {
	l, err := net.Listen("tcp", w.opts.Address)
	if err != nil {
		return fmt.Errorf("admission webhook: listen on %s (--validating-webhook): %w", w.opts.Address, err)
	}
	if a, ok := l.Addr().(*net.TCPAddr); ok {
		w.addr.Store(a)
	}
	if err := w.cert.watch(ctx); err != nil {
		return errors.Join(err, l.Close())
	}
	errorLog, err := zap.NewStdLogAt(w.log.Named("http"), zap.DebugLevel)
	if err != nil {
		return errors.Join(err, l.Close())
	}
	srv := &http.Server{
		Handler: w.Handler(),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: w.cert.get,
		},
		ReadHeaderTimeout: 5 * time.Second,
		// The API server gives a webhook at most 30 s (timeoutSeconds); a slower client is not it.
		ReadTimeout:    15 * time.Second,
		WriteTimeout:   30 * time.Second,
		IdleTimeout:    90 * time.Second,
		MaxHeaderBytes: 16 << 10,
		// Handshake errors of clients that are not the API server are theirs: debug level.
		ErrorLog: errorLog,
	}
	w.mu.Lock()
	w.server = srv
	w.done = make(chan struct{})
	w.mu.Unlock()
	w.serving.Store(true)
	w.log.Info("serving admission reviews", zap.String("address", l.Addr().String()), zap.String("path", Path))
	go func() {
		defer close(w.done)
		if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("admission webhook server stopped", zap.Error(err))
		}
		w.serving.Store(false)
	}()
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
			return
		}
		if w.settingsLoaded != nil {
			select {
			case <-w.settingsLoaded.Done():
			case <-ctx.Done():
				return
			}
		}
		w.ready.Store(true)
	}()
	return nil
}

// Stop stops accepting reviews and lets those in flight finish within ctx.
func (w *Webhook) Stop(ctx context.Context) error {
	w.mu.Lock()
	srv, done := w.server, w.done
	w.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, srv.Close())
	}
	<-done
	return err
}

// hostIndex is the Ingress informer's index of nginx.AdmissionIndexKeys.
const hostIndex = "webhook-admission-hosts"

// review judges an Ingress of our class against the caches.
func (w *Webhook) review(ing *networkingv1.Ingress) nginx.AdmissionResult {
	settings := w.settings.Load()
	return nginx.ReviewIngress(nginx.AdmissionInput{
		Ingress: ing,
		Indexed: w.indexed,
		Accepts: w.opts.Accepts,
		Lookups: nginx.Lookups{
			Services:   nginx.ServiceLookupFunc(w.lookupService),
			Secrets:    nginx.SecretLookupFunc(w.lookupSecret),
			ConfigMaps: nginx.ConfigMapLookupFunc(w.lookupConfigMap),
		},
		Options:   settings.TranslateOptions(w.opts.Translate),
		Ownership: w.opts.Ownership,
		Cache:     w.translations,
		Now:       time.Now(),
	})
}

// indexed returns the cached Ingresses filed under key.
func (w *Webhook) indexed(key string) []*networkingv1.Ingress {
	objs, err := w.indexer.ByIndex(hostIndex, key)
	if err != nil {
		return nil // the index exists from New on
	}
	out := make([]*networkingv1.Ingress, 0, len(objs))
	for _, o := range objs {
		if ing, ok := o.(*networkingv1.Ingress); ok {
			out = append(out, ing)
		}
	}
	return out
}

func (w *Webhook) lookupService(key types.NamespacedName) (*corev1.Service, bool) {
	return w.services.Get(key)
}

func (w *Webhook) lookupSecret(key types.NamespacedName) (*corev1.Secret, bool) {
	return w.secrets.Get(key)
}

func (w *Webhook) lookupConfigMap(key types.NamespacedName) (*corev1.ConfigMap, bool) {
	c, err := w.configMaps.ConfigMaps(key.Namespace).Get(key.Name)
	return c, err == nil
}
