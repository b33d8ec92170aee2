// Package settings watches ingress-nginx's ConfigMap (--configmap) and publishes the controller-wide
// settings it holds as SettingsChange. Invalid values keep their key's last good value; they, and keys
// without effect, get a Warning Event on the ConfigMap, a log line and a metric, and everything else
// applies. Without --configmap, or while the ConfigMap does not exist at the start, ingress-nginx's
// defaults apply; a deletion keeps the settings applied (as ingress-nginx does). add-headers and
// proxy-set-headers name other ConfigMaps of the same namespace: the watcher follows them all, and a
// change of a referenced one re-publishes the settings; so does a change of the Secret that
// ssl-dh-param names, which an informer of that one object follows (secret.go).
package settings

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires the settings watcher into the application.
var Module = fx.Module("settings",
	fx.Provide(New),
	fx.Invoke(func(*Watcher) {}),
)

// ReasonInvalidSetting is the Warning Event reason on the ConfigMap.
const ReasonInvalidSetting = "InvalidSetting"

// maxEventProblems bounds the problems one Event lists; the log has them all.
const maxEventProblems = 10

// Options configure the watcher.
type Options struct {
	// ConfigMap is --configmap; zero means none: the defaults are published once.
	ConfigMap types.NamespacedName
}

// Params are the watcher's fx inputs.
type Params struct {
	fx.In
	Options   Options
	Client    kubernetes.Interface `optional:"true"`
	Changes   *pipeline.Topic[modules.SettingsChange]
	Loaded    *modules.SettingsLoaded
	Recorder  record.EventRecorder
	Registry  prometheus.Registerer
	Log       *zap.Logger
	Lifecycle fx.Lifecycle `optional:"true"`
}

// Watcher follows the ConfigMap.
type Watcher struct {
	opts     Options
	changes  *pipeline.Topic[modules.SettingsChange]
	loaded   *modules.SettingsLoaded
	recorder record.EventRecorder
	log      *zap.Logger
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	problems prometheus.Gauge
	loads    *prometheus.CounterVec
	stop     chan struct{}
	stopOnce sync.Once

	mu sync.Mutex
	// lastGood are the values applied last time, per key; current the settings published last.
	lastGood map[string]string
	current  nginx.Settings
	// data is the ConfigMap's data last applied, nil when it did not exist: an event that changes
	// nothing else (labels, a resync) repeats no Event. refs are the data of the ConfigMaps its
	// reference keys name, as read then (nil: missing or refused).
	data map[string]string
	refs map[string]map[string]string

	// client reads the Secret that ssl-dh-param names; secret follows it (secret.go).
	client kubernetes.Interface
	secret *secretSource
}

// refKeys are the keys whose value names another ConfigMap of the namespace.
var refKeys = []string{"add-headers", "proxy-set-headers"}

// resolveRefs reads the ConfigMaps that data's reference keys name from the store.
func (w *Watcher) resolveRefs(data map[string]string) map[string]map[string]string {
	refs := map[string]map[string]string{}
	for _, k := range refKeys {
		ref := strings.TrimSpace(data[k])
		if ref == "" {
			continue
		}
		key := ref
		if !strings.Contains(ref, "/") {
			key = w.opts.ConfigMap.Namespace + "/" + ref
		}
		refs[ref] = nil
		if ns, _, _ := strings.Cut(key, "/"); ns != w.opts.ConfigMap.Namespace {
			continue
		}
		if obj, exists, err := w.informer.GetStore().GetByKey(key); err == nil && exists {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				refs[ref] = cm.Data
				if refs[ref] == nil {
					refs[ref] = map[string]string{}
				}
			}
		}
	}
	if w.secret != nil {
		refs[nginx.SecretRefPrefix+w.secret.key.String()] = w.secretData()
	}
	return refs
}

// lookup resolves a reference from refs, saying why one cannot be used.
func (w *Watcher) lookup(refs map[string]map[string]string) nginx.SettingsRefLookup {
	return func(ref string) (map[string]string, error) {
		if secret, ok := strings.CutPrefix(ref, nginx.SecretRefPrefix); ok {
			if data := refs[ref]; data != nil {
				return data, nil
			}
			return nil, fmt.Errorf("secret %s does not exist or cannot be read", secret)
		}
		ns, _, found := strings.Cut(ref, "/")
		if found && ns != w.opts.ConfigMap.Namespace {
			return nil, fmt.Errorf("configmap %s is not in the namespace of --configmap (%s)", ref, w.opts.ConfigMap.Namespace)
		}
		data, ok := refs[ref]
		if !ok || data == nil {
			return nil, fmt.Errorf("configmap %s does not exist", ref)
		}
		return data, nil
	}
}

// New builds the watcher and, with --configmap, its informer on the ConfigMaps of its namespace
// (whatever --watch-namespace says).
func New(p Params) (*Watcher, error) {
	w := &Watcher{
		opts:     p.Options,
		client:   p.Client,
		changes:  p.Changes,
		loaded:   p.Loaded,
		recorder: p.Recorder,
		log:      p.Log.Named("settings"),
		stop:     make(chan struct{}),
		problems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_configmap_problems",
			Help: "Keys of the --configmap ConfigMap not applied as written: invalid values (their last good value applies), keys without effect and unknown keys.",
		}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_configmap_loads_total",
			Help: "Versions of the --configmap ConfigMap read, by result: applied (every key as written), partial (some keys not), absent (the ConfigMap does not exist: defaults).",
		}, []string{"result"}),
	}
	if p.Registry != nil {
		if err := p.Registry.Register(w.problems); err != nil {
			return nil, err
		}
		if err := p.Registry.Register(w.loads); err != nil {
			return nil, err
		}
	}
	if w.opts.ConfigMap.Name != "" {
		if p.Client == nil {
			return nil, fmt.Errorf("--configmap %s needs a Kubernetes client", w.opts.ConfigMap)
		}
		// Every ConfigMap of the namespace: add-headers and proxy-set-headers name others of it, whose
		// changes apply like the --configmap's own.
		w.factory = informers.NewSharedInformerFactoryWithOptions(p.Client, 0,
			informers.WithNamespace(w.opts.ConfigMap.Namespace))
		w.informer = w.factory.Core().V1().ConfigMaps().Informer()
		if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { w.sync() },
			UpdateFunc: func(any, any) { w.sync() },
			DeleteFunc: func(any) { w.sync() },
		}); err != nil {
			return nil, err
		}
	}
	if p.Lifecycle != nil {
		p.Lifecycle.Append(fx.Hook{OnStart: w.Start, OnStop: w.Stop})
	}
	return w, nil
}

// Start publishes the defaults at once without --configmap; with it, it starts the informer and publishes
// the ConfigMap's settings once the informer has synced (waiting for the API is not part of the start:
// the renderer's first render waits for SettingsLoaded, and /readyz with it).
func (w *Watcher) Start(context.Context) error {
	if w.factory == nil {
		w.publish(nginx.DefaultSettings())
		w.problems.Set(0)
		return nil
	}
	w.factory.Start(w.stop)
	go func() {
		if !cache.WaitForCacheSync(w.stop, w.informer.HasSynced) {
			return
		}
		w.sync()
	}()
	return nil
}

// Stop ends the informer.
func (w *Watcher) Stop(context.Context) error {
	w.stopOnce.Do(func() { close(w.stop) })
	if w.factory != nil {
		w.factory.Shutdown()
	}
	w.stopSecret()
	return nil
}

// sync reads the ConfigMap from the cache and publishes its settings when they changed. Before the cache
// has synced it does nothing: the first publication must see the ConfigMap if it exists.
func (w *Watcher) sync() {
	select {
	case <-w.stop:
		return // a Secret informer's late call must not follow a Secret again
	default:
	}
	if !w.informer.HasSynced() {
		return
	}
	var cm *corev1.ConfigMap
	obj, exists, err := w.informer.GetStore().GetByKey(w.opts.ConfigMap.String())
	if err == nil && exists {
		cm, _ = obj.(*corev1.ConfigMap)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var data map[string]string
	if cm != nil {
		data = cm.Data
		if data == nil {
			data = map[string]string{}
		}
	}
	if !w.followSecret(data) {
		return // the Secret's informer calls sync once it has synced
	}
	refs := w.resolveRefs(data)
	if w.current.Loaded() && (data == nil) == (w.data == nil) && maps.Equal(data, w.data) && reflect.DeepEqual(refs, w.refs) {
		return
	}
	w.refs = refs
	if cm == nil && w.data != nil {
		// Deleted after it was applied: its settings stay, as in ingress-nginx, which ignores the deletion.
		// Falling back to the defaults would drop the global auth (every Ingress open) and HSTS at once.
		w.data = nil
		w.log.Warn("ConfigMap deleted; its settings stay applied until it is created again or the controller restarts",
			zap.Stringer("configmap", w.opts.ConfigMap))
		return
	}
	w.data = data
	if cm == nil {
		w.log.Info("ConfigMap does not exist; ingress-nginx's defaults apply until it does", zap.Stringer("configmap", w.opts.ConfigMap))
		w.lastGood = nil
		w.problems.Set(0)
		w.loads.WithLabelValues("absent").Inc()
		w.publishLocked(nginx.DefaultSettings())
		return
	}
	s, good, problems := nginx.ParseSettingsRefs(cm.Data, w.lastGood, w.lookup(refs))
	w.lastGood = good
	w.problems.Set(float64(len(problems)))
	if len(problems) == 0 {
		w.loads.WithLabelValues("applied").Inc()
	} else {
		w.loads.WithLabelValues("partial").Inc()
		w.report(cm, problems)
	}
	w.log.Info("ConfigMap read", zap.Stringer("configmap", w.opts.ConfigMap), zap.String("resourceVersion", cm.ResourceVersion),
		zap.Int("keys", len(cm.Data)), zap.Int("problems", len(problems)))
	w.publishLocked(s)
}

// report logs every problem and records one Warning Event on the ConfigMap listing them.
func (w *Watcher) report(cm *corev1.ConfigMap, problems []nginx.SettingProblem) {
	lines := make([]string, 0, maxEventProblems+1)
	for i, p := range problems {
		w.log.Warn("ConfigMap key not applied as written", zap.Stringer("configmap", w.opts.ConfigMap), zap.String("key", p.Key),
			zap.String("reason", p.Reason), zap.Bool("lastGoodKept", p.KeptLastGood))
		if i < maxEventProblems {
			lines = append(lines, p.String())
		}
	}
	if len(problems) > maxEventProblems {
		lines = append(lines, fmt.Sprintf("and %d more (see the controller's log)", len(problems)-maxEventProblems))
	}
	if w.recorder != nil {
		w.recorder.Eventf(cm, corev1.EventTypeWarning, ReasonInvalidSetting, "%d key(s) not applied as written; the rest applies: %s",
			len(problems), strings.Join(lines, "; "))
	}
}

func (w *Watcher) publish(s nginx.Settings) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.publishLocked(s)
}

// publishLocked publishes s unless it equals what was published, then fires SettingsLoaded once the
// subscribers have it.
func (w *Watcher) publishLocked(s nginx.Settings) {
	if w.current.Loaded() && reflect.DeepEqual(s, w.current) {
		return
	}
	w.current = s
	w.changes.Publish(modules.SettingsChange{Settings: s})
	select {
	case <-w.loaded.Done():
		return
	default:
	}
	// The renderer must hold the first settings before it hears that they are loaded.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := w.changes.Flush(ctx); err == nil {
		w.loaded.Load()
	}
	cancel()
}
