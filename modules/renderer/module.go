// Package renderer is the structure lane's producer: it translates every accepted Ingress into the model,
// renders nginx.conf and publishes it as Rendered when the configuration actually changed. A bad Ingress is
// rejected alone, with a Warning Event and a metric; everything else keeps being served.
package renderer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
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
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires the renderer into the application.
var Module = fx.Module("renderer",
	fx.Provide(New),
	fx.Invoke(func(*Renderer) {}),
)

// Event reasons, as they appear in `kubectl describe ingress`.
const (
	ReasonRejected = "Rejected"
	ReasonConflict = "Conflict"
	ReasonWarning  = "BackendWarning"
	// ReasonPathTakeover (Normal) goes to both Ingresses when one namespace's path takes requests that
	// another namespace's path on the same host served before.
	ReasonPathTakeover = "PathTakeover"
	// ReasonQuarantined: NGINX refused a route of the Ingress, which is out of service until it changes.
	ReasonQuarantined = "Quarantined"
)

// Options configure the renderer.
type Options struct {
	// Render is the controller-level part of nginx.conf.
	Render nginx.RenderConfig
	// Template replaces the embedded template when set (--template).
	Template *nginx.Template
	// DefaultBackend is --default-backend-service.
	DefaultBackend types.NamespacedName
	// Translate shapes every Ingress's translation.
	Translate nginx.TranslateOptions
	// Ownership is --host-ownership; empty means shared hosts.
	Ownership nginx.HostOwnership
}

// Params are the renderer's fx inputs.
type Params struct {
	fx.In
	Options        Options
	Factory        informers.SharedInformerFactory
	IngressChanges *pipeline.Topic[modules.IngressChange]
	Announced      *modules.IngressesAnnounced
	Rendered       *pipeline.Topic[modules.Rendered]
	// Refused are the routes the data plane refused: their Ingresses are quarantined.
	Refused *pipeline.Topic[modules.RoutesRefused] `optional:"true"`
	// Settings are the ConfigMap's (--configmap); without the topic the defaults apply. The first
	// render waits for SettingsLoaded when it is given.
	Settings       *pipeline.Topic[modules.SettingsChange] `optional:"true"`
	SettingsLoaded *modules.SettingsLoaded                 `optional:"true"`
	Recorder       record.EventRecorder
	Metrics        *pipeline.Metrics
	Registry       prometheus.Registerer
	Log            *zap.Logger
	Lifecycle      fx.Lifecycle `optional:"true"`
}

// renderKey is the structure lane's single work item: every change coalesces into one render.
type renderKey struct{}

// Renderer turns the accepted Ingresses into nginx.conf.
type Renderer struct {
	opts      Options
	announced *modules.IngressesAnnounced
	ingresses listersnetv1.IngressLister
	// services reads the shared Service cache, which holds ServiceRecords (no generated lister can).
	services interface {
		Get(types.NamespacedName) (*corev1.Service, bool)
	}
	secrets    modules.Secrets // the shared cache holds SecretRecords: no generated lister
	configMaps listerscorev1.ConfigMapLister
	recorder   record.EventRecorder
	out        *pipeline.Topic[modules.Rendered]
	ctrl       *pipeline.Controller[renderKey]
	builder    *nginx.ModelBuilder
	synced     []cache.InformerSynced
	log        *zap.Logger
	metrics    rendererMetrics

	settingsLoaded *modules.SettingsLoaded

	mu       sync.Mutex
	accepted map[types.NamespacedName]struct{}
	// settings are the ConfigMap's latest; they shape the translation and nginx.conf.
	settings nginx.Settings
	// changedIngresses and changedServices are what changed since the last render began; the next one
	// builds only what they touch (ModelBuilder.Update). built is false until a render has built every
	// accepted Ingress (ModelBuilder.Build).
	changedIngresses map[types.NamespacedName]struct{}
	changedServices  map[types.NamespacedName]struct{}
	// changedObjects are the Secrets and ConfigMaps that annotations read and that changed
	// (ModelBuilder.DependsOnObject).
	changedObjects map[nginx.ObjectRef]struct{}
	built          bool
	// refusals are the data plane's refusals not yet looked at; quarantine the Ingress versions kept
	// out of the model for one, until they change.
	refusals   []modules.RoutesRefused
	quarantine map[types.NamespacedName]quarantined

	// Touched only by sync (one worker).
	// published says a configuration went out; lastHash and lastModel are the last one's.
	published bool
	lastHash  string
	lastModel nginx.Model
	// backendTLS and olderBackendTLS are the stems of the backend TLS files of the last two published
	// configurations, kept on disk until two more are published: NGINX may still be loading one, or
	// keep the older one live when it refused the newer.
	backendTLS, olderBackendTLS map[string]struct{}
	// dhParamFiles are the ssl-dh-param files of the last two published configurations ("" for none),
	// which WriteDHParamFile keeps.
	dhParamFiles [2]string
	// reported remembers the last Event sent per Ingress, so an unchanged problem is not repeated on
	// every render.
	reported map[types.NamespacedName]string
	// takeovers are the takeovers already announced; each is announced once, when it first appears.
	takeovers map[nginx.Takeover]struct{}
}

// quarantined is an Ingress version whose route the data plane refused.
type quarantined struct {
	resourceVersion string
	refusal         *nginx.Refusal
	since           time.Time
}

// quarantineRetry is how long a quarantined Ingress version stays out before it is tried again: what
// NGINX refused may have been a limit that changed since (a --template edit, a restart).
const quarantineRetry = 5 * time.Minute

// QuarantineError rejects an Ingress version whose route NGINX refused.
type QuarantineError struct {
	Host   nginx.Hostname
	Path   string
	Reason string
	// Profile says NGINX refused the configuration of the route's profile settings (nginx -t), not the
	// route itself.
	Profile bool
}

func (e *QuarantineError) Error() string {
	host := string(e.Host)
	if host == "" {
		host = "(any host)"
	}
	if e.Profile {
		return fmt.Sprintf("quarantined: NGINX refused the configuration that its profile settings (such as custom-http-errors) need, "+
			"used by host %s, path %q (%s); this version stays out of service until the Ingress changes, or is tried again in %s "+
			"(its last version NGINX took, if any, is served meanwhile)", host, e.Path, e.Reason, quarantineRetry)
	}
	return fmt.Sprintf("quarantined: NGINX refused its route for host %s, path %q (%s); this version stays out of service until the Ingress "+
		"changes, or is tried again in %s (its last version NGINX took, if any, is served meanwhile)", host, e.Path, e.Reason, quarantineRetry)
}

type rendererMetrics struct {
	quarantined prometheus.Gauge
	renders     *prometheus.CounterVec
	rejected    prometheus.Gauge
	stale       prometheus.Gauge
	rejects     *prometheus.CounterVec
	conflicts   prometheus.Gauge
	duration    prometheus.Histogram
	confBytes   prometheus.Gauge
}

// New builds the renderer, subscribes it to IngressChange and watches Services that Ingresses use.
func New(p Params) (*Renderer, error) {
	log := p.Log.Named("renderer")
	r := &Renderer{
		opts:             p.Options,
		announced:        p.Announced,
		ingresses:        p.Factory.Networking().V1().Ingresses().Lister(),
		services:         modules.NewServices(p.Factory),
		secrets:          modules.NewSecrets(p.Factory),
		configMaps:       p.Factory.Core().V1().ConfigMaps().Lister(),
		recorder:         p.Recorder,
		out:              p.Rendered,
		builder:          nginx.NewModelBuilder(),
		log:              log,
		accepted:         map[types.NamespacedName]struct{}{},
		changedIngresses: map[types.NamespacedName]struct{}{},
		changedServices:  map[types.NamespacedName]struct{}{},
		changedObjects:   map[nginx.ObjectRef]struct{}{},
		reported:         map[types.NamespacedName]string{},
		quarantine:       map[types.NamespacedName]quarantined{},
		synced: []cache.InformerSynced{
			p.Factory.Networking().V1().Ingresses().Informer().HasSynced,
			p.Factory.Core().V1().Services().Informer().HasSynced,
			p.Factory.Core().V1().Secrets().Informer().HasSynced,
			p.Factory.Core().V1().ConfigMaps().Informer().HasSynced,
		},
		metrics: rendererMetrics{
			quarantined: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "ingress_reactor_ingresses_quarantined",
				Help: "Ingresses kept out of service because NGINX refused one of their routes; each returns when it changes.",
			}),
			renders: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "ingress_reactor_renders_total",
				Help: "Renders of nginx.conf, by result: changed (published), unchanged (same hash, skipped), error.",
			}, []string{"result"}),
			rejected: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "ingress_reactor_ingresses_rejected",
				Help: "Accepted Ingresses whose current version cannot be translated (those served from their last good version included).",
			}),
			stale: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "ingress_reactor_ingresses_stale",
				Help: "Ingresses whose update was rejected and whose last good version is served instead.",
			}),
			rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "ingress_reactor_ingress_rejections_total",
				Help: "Ingress versions rejected by translation, by namespace.",
			}, []string{"namespace"}),
			conflicts: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "ingress_reactor_ingress_conflicts",
				Help: "Paths or TLS hosts of Ingresses ignored because an older Ingress claims them.",
			}),
			duration: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "ingress_reactor_render_duration_seconds",
				Help:    "Time to translate the accepted Ingresses and render nginx.conf.",
				Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
			}),
			confBytes: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "ingress_reactor_config_bytes",
				Help: "Size of the last rendered nginx.conf.",
			}),
		},
	}
	for _, c := range []prometheus.Collector{r.metrics.quarantined, r.metrics.renders, r.metrics.rejected, r.metrics.stale, r.metrics.rejects, r.metrics.conflicts, r.metrics.duration, r.metrics.confBytes} {
		if err := p.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("renderer: register metrics: %w", err)
		}
	}
	q := pipeline.NewQueue(pipeline.QueueOptions[renderKey]{
		Name: "renderer", Metrics: p.Metrics, Logger: log,
		// Rendering is coalesced into one key, so churn costs back-to-back renders, never a backlog. QPS and
		// Burst shape only the retries of a failed render (pipeline.QueueOptions).
		QPS: 5, Burst: 10, MaxRetries: ptr.To(5),
	})
	r.ctrl = pipeline.NewController(q, r.sync, pipeline.ControllerOptions{Workers: 1})

	p.IngressChanges.Subscribe(func(c modules.IngressChange) {
		r.mu.Lock()
		if c.Accepted {
			r.accepted[c.Key] = struct{}{}
		} else {
			delete(r.accepted, c.Key)
			delete(r.quarantine, c.Key)
		}
		r.changedIngresses[c.Key] = struct{}{}
		r.mu.Unlock()
		q.Add(renderKey{})
	})
	r.settingsLoaded = p.SettingsLoaded
	if p.Settings != nil {
		p.Settings.Subscribe(func(c modules.SettingsChange) {
			r.mu.Lock()
			if c.Settings.TranslateOptions(r.opts.Translate) != r.settings.TranslateOptions(r.opts.Translate) {
				r.built = false // every Ingress is translated again with the new defaults
			}
			r.settings = c.Settings
			r.mu.Unlock()
			r.Trigger()
		})
	}
	if p.Refused != nil {
		p.Refused.Subscribe(func(q modules.RoutesRefused) {
			r.mu.Lock()
			r.refusals = append(r.refusals, q)
			r.mu.Unlock()
			r.Trigger()
		})
	}
	svcInf := p.Factory.Core().V1().Services().Informer()
	if _, err := svcInf.AddEventHandler(pipeline.Handler[renderKey]{
		Keys:         r.serviceChanged,
		UpdateFilter: pipeline.ResourceVersionChanged,
	}.For(q)); err != nil {
		return nil, fmt.Errorf("renderer: service handler: %w", err)
	}
	// Secrets that annotations name (proxy-ssl-secret). The informer is the one secretsync reads TLS
	// Secrets from; app's cache transform makes its objects modules.SecretRecords, which pipeline.KeyOf
	// reads (tombstones too).
	secInf := p.Factory.Core().V1().Secrets().Informer()
	if _, err := secInf.AddEventHandler(pipeline.Handler[renderKey]{
		Keys:         func(obj any) []renderKey { return r.objectChanged(nginx.KindSecret, obj) },
		UpdateFilter: pipeline.ResourceVersionChanged,
	}.For(q)); err != nil {
		return nil, fmt.Errorf("renderer: secret handler: %w", err)
	}
	// ConfigMaps that annotations name (custom-headers), trimmed by app's cache transform.
	cmInf := p.Factory.Core().V1().ConfigMaps().Informer()
	if _, err := cmInf.AddEventHandler(pipeline.Handler[renderKey]{
		Keys:         func(obj any) []renderKey { return r.objectChanged(nginx.KindConfigMap, obj) },
		UpdateFilter: pipeline.ResourceVersionChanged,
	}.For(q)); err != nil {
		return nil, fmt.Errorf("renderer: configmap handler: %w", err)
	}
	modules.Bind(p.Lifecycle, r)
	return r, nil
}

// objectChanged notes a change of a Secret or ConfigMap that an Ingress's annotations read, for the
// next render, which translates again only those Ingresses. Any other object is dropped.
func (r *Renderer) objectChanged(kind nginx.ObjectKind, obj any) []renderKey {
	k, ok := pipeline.KeyOf(obj)
	if !ok {
		return nil
	}
	ref := nginx.ObjectRef{Kind: kind, Key: k}
	if !r.builder.DependsOnObject(ref) {
		return nil
	}
	r.mu.Lock()
	r.changedObjects[ref] = struct{}{}
	r.mu.Unlock()
	return []renderKey{{}}
}

func (r *Renderer) lookupSecret(key types.NamespacedName) (*corev1.Secret, bool) {
	return r.secrets.Get(key)
}

func (r *Renderer) lookupConfigMap(key types.NamespacedName) (*corev1.ConfigMap, bool) {
	c, err := r.configMaps.ConfigMaps(key.Namespace).Get(key.Name)
	return c, err == nil
}

// Start waits for the caches and starts the worker. The first render happens once the class filter has
// announced every existing Ingress (modules.IngressesAnnounced; an empty cluster still gets a
// configuration then), and after every change.
func (r *Renderer) Start(ctx context.Context) {
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), r.synced...) {
			return
		}
		r.ctrl.Start(ctx)
		select {
		case <-r.announced.Done():
		case <-ctx.Done():
			return
		}
		if r.settingsLoaded != nil {
			select {
			case <-r.settingsLoaded.Done():
			case <-ctx.Done():
				return
			}
		}
		r.Trigger() // the first render
	}()
}

// Stop stops rendering, letting an in-flight render finish within ctx.
func (r *Renderer) Stop(ctx context.Context) error { return r.ctrl.Stop(ctx) }

// Trigger asks for a render, for example after the template changed.
func (r *Renderer) Trigger() { r.ctrl.Queue().Add(renderKey{}) }

// SetTemplate replaces the template used from the next render on (nil means the embedded one).
func (r *Renderer) SetTemplate(t *nginx.Template) {
	r.mu.Lock()
	r.opts.Template = t
	r.mu.Unlock()
	r.Trigger()
}

// serviceChanged notes a change of a Service that the build depends on (or the default backend) for
// the next render, which translates again only the Ingresses that depend on it. A change to any other
// Service is dropped: it cannot change the configuration.
func (r *Renderer) serviceChanged(obj any) []renderKey {
	k, ok := pipeline.KeyOf(obj)
	if !ok {
		return nil
	}
	if k != r.opts.DefaultBackend && !r.builder.DependsOn(k) {
		return nil
	}
	r.mu.Lock()
	r.changedServices[k] = struct{}{}
	r.mu.Unlock()
	return []renderKey{{}}
}

// takeRefusals quarantines the Ingress versions whose routes the data plane refused. A refusal counts
// only when the last published model still has the refused route: otherwise a newer version of the
// Ingress replaced it, and that version's routes are pushed (and judged) anyway.
func (r *Renderer) takeRefusals() {
	r.mu.Lock()
	refusals := r.refusals
	r.refusals = nil
	for k, q := range r.quarantine {
		if time.Since(q.since) >= quarantineRetry {
			delete(r.quarantine, k) // tried again; refused again, it comes back
			r.changedIngresses[k] = struct{}{}
		}
	}
	r.mu.Unlock()
	for _, q := range refusals {
		if !r.published || !servesLocation(&r.lastModel, q.Host, &q.Location) {
			continue
		}
		ing := r.builder.Ingress(q.Ingress)
		if ing == nil {
			continue
		}
		r.mu.Lock()
		r.quarantine[q.Ingress] = quarantined{resourceVersion: ing.ResourceVersion, since: time.Now(), refusal: &nginx.Refusal{
			Err: &QuarantineError{Host: q.Host, Path: q.Location.Path, Reason: q.Reason, Profile: !q.Profile.IsZero()}, Host: q.Host,
			Location: q.Location, Profile: q.Profile}}
		r.changedIngresses[q.Ingress] = struct{}{}
		r.mu.Unlock()
		r.ctrl.Queue().AddAfter(renderKey{}, quarantineRetry)
	}
}

// servesLocation reports whether m's server for host has location l.
func servesLocation(m *nginx.Model, host nginx.Hostname, l *nginx.Location) bool {
	s := m.Server(host)
	return s != nil && slices.ContainsFunc(s.Locations, func(x nginx.Location) bool { return x.Equal(l) })
}

// quarantined returns the refusal that keeps a quarantined Ingress version out of the model; a changed
// Ingress leaves the quarantine and gets another chance.
func (r *Renderer) quarantined(ing *networkingv1.Ingress) *nginx.Refusal {
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	r.mu.Lock()
	defer r.mu.Unlock()
	q, ok := r.quarantine[key]
	if !ok {
		return nil
	}
	if q.resourceVersion != ing.ResourceVersion {
		delete(r.quarantine, key)
		return nil
	}
	return q.refusal
}

// acceptedIngress returns an Ingress that the class filter accepted, from the informer's cache.
func (r *Renderer) acceptedIngress(key types.NamespacedName) (*networkingv1.Ingress, bool) {
	r.mu.Lock()
	_, ok := r.accepted[key]
	r.mu.Unlock()
	if !ok {
		return nil, false
	}
	ing, err := r.ingresses.Ingresses(key.Namespace).Get(key.Name)
	return ing, err == nil
}

func (r *Renderer) lookupService(key types.NamespacedName) (*corev1.Service, bool) {
	return r.services.Get(key)
}

func (r *Renderer) sync(context.Context, renderKey) error {
	select {
	case <-r.announced.Done():
	default:
		return nil // Start triggers the first render once the class filter has announced every Ingress
	}
	if r.settingsLoaded != nil {
		select {
		case <-r.settingsLoaded.Done():
		default:
			return nil // ... and the ConfigMap's settings are known
		}
	}
	timer := prometheus.NewTimer(r.metrics.duration)
	r.takeRefusals()
	r.mu.Lock()
	built := r.built
	var keys, services []types.NamespacedName
	var objects []nginx.ObjectRef
	if built {
		keys = slices.Collect(maps.Keys(r.changedIngresses))
		services = slices.Collect(maps.Keys(r.changedServices))
		objects = slices.Collect(maps.Keys(r.changedObjects))
	} else {
		keys = slices.Collect(maps.Keys(r.accepted))
	}
	// New maps rather than clear: a cleared map keeps its size, and the start's burst (every Ingress
	// announced at once) would keep 10,000 entries' worth of it for the life of the process.
	r.changedIngresses = map[types.NamespacedName]struct{}{}
	r.changedServices = map[types.NamespacedName]struct{}{}
	r.changedObjects = map[nginx.ObjectRef]struct{}{}
	r.built = true
	tmpl := r.opts.Template
	settings := r.settings
	r.mu.Unlock()
	translate := settings.TranslateOptions(r.opts.Translate)
	renderCfg := r.opts.Render
	renderCfg.Settings = settings
	// A build that does not finish (a panic, which the controller recovers and retries) must not lose
	// what it was given: the retry builds everything again.
	finished := false
	defer func() {
		if !finished {
			r.mu.Lock()
			r.built = false
			r.mu.Unlock()
		}
	}()

	var build nginx.Build
	if built {
		// Only what changed since the last render is looked at: a change at 10,000 Ingresses costs a few
		// milliseconds (about 1 at 1,000; docs/benchmarks.md).
		build = r.builder.Update(nginx.UpdateInput{
			Ingresses:      keys,
			Services:       services,
			Objects:        objects,
			Get:            r.acceptedIngress,
			Lookup:         nginx.ServiceLookupFunc(r.lookupService),
			Secrets:        nginx.SecretLookupFunc(r.lookupSecret),
			ConfigMaps:     nginx.ConfigMapLookupFunc(r.lookupConfigMap),
			Options:        translate,
			DefaultBackend: r.opts.DefaultBackend,
			Ownership:      r.opts.Ownership,
			Quarantine:     r.quarantined,
		})
	} else {
		// By namespace, then name, without building "namespace/name" strings.
		slices.SortFunc(keys, func(a, b types.NamespacedName) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
		ings := make([]*networkingv1.Ingress, 0, len(keys))
		for _, key := range keys {
			if ing, err := r.ingresses.Ingresses(key.Namespace).Get(key.Name); err == nil {
				ings = append(ings, ing)
			}
		}
		build = r.builder.Build(nginx.BuildInput{
			Ingresses:      ings,
			Services:       nginx.ServiceLookupFunc(r.lookupService),
			Secrets:        nginx.SecretLookupFunc(r.lookupSecret),
			ConfigMaps:     nginx.ConfigMapLookupFunc(r.lookupConfigMap),
			Options:        translate,
			DefaultBackend: r.opts.DefaultBackend,
			Ownership:      r.opts.Ownership,
			Quarantine:     r.quarantined,
		})
	}
	finished = true
	r.mu.Lock()
	r.metrics.quarantined.Set(float64(len(r.quarantine)))
	r.mu.Unlock()
	r.report(build)
	r.metrics.rejected.Set(float64(len(build.Rejected)))
	r.metrics.stale.Set(float64(build.Stale))
	r.metrics.conflicts.Set(float64(len(build.Conflicts)))
	model := build.Model

	var (
		conf []byte
		hash string
		err  error
	)
	if tmpl != nil {
		conf, hash, err = tmpl.Render(model, renderCfg)
	} else {
		conf, hash, err = nginx.Render(model, renderCfg)
	}
	timer.ObserveDuration()
	if err != nil {
		r.metrics.renders.WithLabelValues("error").Inc()
		return fmt.Errorf("render nginx.conf: %w", err)
	}
	// Routes and the SNI table (which Secret each TLS host presents) are not part of nginx.conf: a change
	// to them alone is published too, and the reloader pushes it without a reload.
	if r.published && hash == r.lastHash && model.SameRoutes(&r.lastModel) {
		r.metrics.renders.WithLabelValues("unchanged").Inc()
		return nil
	}
	// The files that nginx.conf names are in place before it is published; those of the previous
	// configuration stay until the next one is.
	keep := maps.Clone(r.backendTLS)
	if keep == nil {
		keep = map[string]struct{}{}
	}
	maps.Copy(keep, r.olderBackendTLS)
	written, err := nginx.WriteBackendTLSFiles(r.opts.Render.Paths, build.BackendTLS, keep)
	if err != nil {
		r.metrics.renders.WithLabelValues("error").Inc()
		return fmt.Errorf("render nginx.conf: %w", err)
	}
	r.backendTLS, r.olderBackendTLS = written, r.backendTLS
	// ssl-dh-param: its file is named by a hash of its content, so the previous configuration keeps its own.
	if err := nginx.WriteDHParamFile(r.opts.Render.Paths, renderCfg.Settings, r.dhParamFiles[:]...); err != nil {
		r.metrics.renders.WithLabelValues("error").Inc()
		return fmt.Errorf("render nginx.conf: %w", err)
	}
	r.dhParamFiles = [2]string{renderCfg.Settings.DHParamFile(r.opts.Render.Paths), r.dhParamFiles[0]}
	r.published, r.lastHash, r.lastModel = true, hash, model
	r.metrics.renders.WithLabelValues("changed").Inc()
	r.metrics.confBytes.Set(float64(len(conf)))
	r.log.Info("configuration rendered", zap.String("hash", hash), zap.Int("ingresses", build.Translated),
		zap.Int("rejected", len(build.Rejected)), zap.Int("servers", len(model.Servers)), zap.Int("bytes", len(conf)))
	r.out.Publish(modules.Rendered{Model: model, Config: conf, Hash: hash})
	return nil
}

// report sends the Warning Events of a build: rejections, warnings and lost conflicts. An Event already
// sent for the same version of an Ingress is not sent again.
func (r *Renderer) report(build nginx.Build) {
	problems := map[types.NamespacedName]string{}
	for _, rej := range build.Rejected {
		ing := rej.Ingress
		key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		msg := "Ingress not served: " + rej.Err.Error()
		if rej.Stale {
			msg = "Ingress update not served: " + rej.Err.Error() + "; its last good version is still served"
		}
		if r.reported[key] != ing.ResourceVersion+msg {
			r.metrics.rejects.WithLabelValues(key.Namespace).Inc()
			reason := ReasonRejected
			if _, ok := errors.AsType[*QuarantineError](rej.Err); ok {
				reason = ReasonQuarantined
			}
			r.recorder.Event(ing, corev1.EventTypeWarning, reason, msg)
			r.log.Warn("ingress rejected", zap.Stringer("ingress", key), zap.String("reason", rej.Err.Error()), zap.Bool("previous_version_served", rej.Stale))
		}
		problems[key] = ing.ResourceVersion + msg
	}
	for _, w := range build.Warnings {
		ing := w.Ingress
		key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		msg := strings.Join(w.Warnings, "; ")
		// Contains, not equality: conflict messages are appended to the same entry below.
		if !strings.Contains(r.reported[key], ing.ResourceVersion+msg) {
			r.recorder.Event(ing, corev1.EventTypeWarning, ReasonWarning, msg)
		}
		problems[key] = ing.ResourceVersion + msg
	}
	if build.DefaultBackendMissing {
		r.log.Warn("default backend service not found or without a TCP port; serving the built-in 404", zap.Stringer("service", r.opts.DefaultBackend))
	}
	for _, c := range build.Conflicts {
		msg := c.Message()
		key := c.Loser
		if ing, err := r.ingresses.Ingresses(key.Namespace).Get(key.Name); err == nil {
			if !strings.Contains(r.reported[key], ing.ResourceVersion+msg) {
				r.recorder.Event(ing, corev1.EventTypeWarning, ReasonConflict, msg)
			}
			problems[key] += ing.ResourceVersion + msg
		}
	}
	r.reported = problems

	seen := make(map[nginx.Takeover]struct{}, len(build.Takeovers))
	for _, t := range build.Takeovers {
		seen[t] = struct{}{}
		if _, ok := r.takeovers[t]; ok {
			continue
		}
		if ing, err := r.ingresses.Ingresses(t.Taker.Namespace).Get(t.Taker.Name); err == nil {
			r.recorder.Event(ing, corev1.EventTypeNormal, ReasonPathTakeover, t.TakerMessage())
		}
		if ing, err := r.ingresses.Ingresses(t.From.Namespace).Get(t.From.Name); err == nil {
			r.recorder.Event(ing, corev1.EventTypeNormal, ReasonPathTakeover, t.FromMessage())
		}
		r.log.Info("path takes requests from another namespace's path", zap.Stringer("ingress", t.Taker), zap.Stringer("from", t.From),
			zap.String("host", string(t.Host)), zap.String("path", t.Path), zap.String("from_path", t.FromPath))
	}
	r.takeovers = seen
}
