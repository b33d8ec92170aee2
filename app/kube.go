package app

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/informers"
	informerscorev1 "k8s.io/client-go/informers/core/v1"
	informersdiscoveryv1 "k8s.io/client-go/informers/discovery/v1"
	informersnetv1 "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ingress-reactor/ingress-reactor/internal/localapi"
	"github.com/ingress-reactor/ingress-reactor/modules"
)

// KubeSource is where the controller reads Kubernetes objects from: a real API server, or the in-process local one.
type KubeSource struct {
	Client  kubernetes.Interface
	Factory informers.SharedInformerFactory
	// Local is set in --local-manifests mode.
	Local *localapi.Manifests

	log    *zap.Logger
	synced chan struct{}
	events *prometheus.CounterVec
	stop   chan struct{}
}

// KubeSourceParams are the fx inputs of NewKubeSource.
type KubeSourceParams struct {
	fx.In
	Config    Config
	Log       *zap.Logger
	Registry  prometheus.Registerer
	Lifecycle fx.Lifecycle
}

// KubeSourceResult exposes the source's parts to the modules.
type KubeSourceResult struct {
	fx.Out
	Source  *KubeSource
	Client  kubernetes.Interface
	Factory informers.SharedInformerFactory
	Ready   modules.ReadyCheck `group:"readyz"`
}

// restConfig builds the client configuration from --kubeconfig or the in-cluster environment.
func restConfig(c Config) (*rest.Config, error) {
	if c.APIServerHost != "" {
		// As ingress-nginx: the address overrides the kubeconfig's server, and without a kubeconfig the
		// client sends no credentials.
		cfg, err := clientcmd.BuildConfigFromFlags(c.APIServerHost, c.KubeConfig)
		if err != nil {
			return nil, fmt.Errorf("--apiserver-host %s: %w", c.APIServerHost, err)
		}
		if c.CertificateAuthority != "" {
			cfg.CAFile, cfg.CAData = c.CertificateAuthority, nil
		}
		return cfg, nil
	}
	if c.KubeConfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeConfig)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s: %w", c.KubeConfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster configuration (set --kubeconfig or --local-manifests outside a cluster): %w", err)
	}
	return cfg, nil
}

// NewKubeSource connects to the configured source and prepares the single shared informer factory.
// Informers that modules obtain from the factory during construction are started in OnStart.
func NewKubeSource(p KubeSourceParams) (KubeSourceResult, error) {
	s := &KubeSource{
		log:    p.Log.Named("kube"),
		synced: make(chan struct{}),
		stop:   make(chan struct{}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_informer_events_total",
			Help: "Informer events received, by resource and event (add, update, delete).",
		}, []string{"resource", "event"}),
	}
	if err := p.Registry.Register(s.events); err != nil {
		return KubeSourceResult{}, fmt.Errorf("register informer metrics: %w", err)
	}
	if p.Config.LocalManifests != "" {
		cs := localapi.NewClientset()
		s.Client = cs
		s.Local = localapi.NewManifests(p.Config.LocalManifests, cs, p.Log.Named("local"))
	} else {
		rc, err := restConfig(p.Config)
		if err != nil {
			return KubeSourceResult{}, err
		}
		rc.UserAgent = "ingress-reactor/" + p.Config.Version
		reachable := prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_kube_api_reachable",
			Help: "1 while the Kubernetes API server answers, 0 while it cannot be reached (reads wait for it).",
		})
		if err := p.Registry.Register(reachable); err != nil {
			return KubeSourceResult{}, fmt.Errorf("register API server metrics: %w", err)
		}
		rc.Wrap(newAPIWaiter(s.log, reachable, s.stop).wrap)
		rc.QPS, rc.Burst = 50, 100
		// Every type the controller reads or writes is built in, so the API server can send and take
		// protobuf: it decodes with less work and less garbage than JSON, which matters for the lists of
		// every Ingress, Service, EndpointSlice and Secret at start.
		rc.ContentType = "application/vnd.kubernetes.protobuf"
		rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return KubeSourceResult{}, fmt.Errorf("kubernetes client: %w", err)
		}
		s.Client = cs
	}
	opts := []informers.SharedInformerOption{informers.WithTransform(cacheTransform)}
	if p.Config.WatchNamespace != "" {
		opts = append(opts, informers.WithNamespace(p.Config.WatchNamespace))
	}
	s.Factory = informers.NewSharedInformerFactoryWithOptions(s.Client, p.Config.SyncPeriod, opts...)

	// The core informers every configuration needs are registered here, so their caches exist before
	// any module asks and their events are counted. They are made without client-go's namespace index:
	// modules look objects up by key, never list one namespace, and the index holds a set of every
	// object's key per namespace (2 MB at 10,000 Ingresses with their Services, EndpointSlices and
	// Secrets). A List by namespace would still work, by a scan.
	registerUnindexedInformers(s.Factory, p.Config.WatchNamespace)
	if err := shareUnchangedSecretData(s.Factory.Core().V1().Secrets().Informer()); err != nil {
		return KubeSourceResult{}, err
	}
	s.track("ingresses", s.Factory.Networking().V1().Ingresses().Informer())
	s.track("ingressclasses", s.Factory.Networking().V1().IngressClasses().Informer())
	s.track("services", s.Factory.Core().V1().Services().Informer())
	s.track("endpointslices", s.Factory.Discovery().V1().EndpointSlices().Informer())
	s.track("secrets", s.Factory.Core().V1().Secrets().Informer())
	s.track("configmaps", s.Factory.Core().V1().ConfigMaps().Informer())

	p.Lifecycle.Append(fx.Hook{OnStart: s.start, OnStop: s.shutdown})
	ready := modules.ReadyCheck{Name: "informers", Check: func() error {
		select {
		case <-s.synced:
			return nil
		default:
			return fmt.Errorf("informer caches not synced yet")
		}
	}}
	return KubeSourceResult{Source: s, Client: s.Client, Factory: s.Factory, Ready: ready}, nil
}

// registerUnindexedInformers makes the factory's informers of the types the shared caches hold, with
// no indexers (modules may add their own).
func registerUnindexedInformers(f informers.SharedInformerFactory, namespace string) {
	none := cache.Indexers{}
	f.InformerFor(&networkingv1.Ingress{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return informersnetv1.NewFilteredIngressInformer(c, namespace, resync, none, nil)
	})
	f.InformerFor(&corev1.Service{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return informerscorev1.NewFilteredServiceInformer(c, namespace, resync, none, nil)
	})
	f.InformerFor(&discoveryv1.EndpointSlice{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return informersdiscoveryv1.NewFilteredEndpointSliceInformer(c, namespace, resync, none, nil)
	})
	f.InformerFor(&corev1.Secret{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return informerscorev1.NewFilteredSecretInformer(c, namespace, resync, none, nil)
	})
	f.InformerFor(&corev1.ConfigMap{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return informerscorev1.NewFilteredConfigMapInformer(c, namespace, resync, none, nil)
	})
}

// shareUnchangedSecretData makes the Secret informer's transform reuse the cached copy of each data value
// that an update leaves unchanged. An update that does not change a Secret's content (a label, an
// annotation, an owner changed) and every relist (after a watch could not resume) decode every value anew;
// the syncer keeps serving the certificate it parsed from the cached values before, so without this each
// such certificate's PEM would be held twice, once by the certificate and once by the cache (about 1 KB
// per TLS Secret). It costs one comparison of the values per update. The cached record is never written:
// the values are swapped in the decoded Secret, the transform's own, before its record is built.
func shareUnchangedSecretData(inf cache.SharedIndexInformer) error {
	store := inf.GetStore()
	return inf.SetTransform(func(obj any) (any, error) {
		if s, ok := obj.(*corev1.Secret); ok && len(s.Data) > 0 {
			if old, exists, _ := store.GetByKey(s.Namespace + "/" + s.Name); exists {
				if r, ok := old.(*modules.SecretRecord); ok {
					reuseEqualValues(s.Data, r)
				}
			}
		}
		return cacheTransform(obj)
	})
}

// reuseEqualValues points each value of data that equals the value of the same key in cached to the cached
// one. data is a new object's, not yet in any cache; cached is never written.
func reuseEqualValues(data map[string][]byte, cached *modules.SecretRecord) {
	for k, v := range data {
		if c, ok := cached.Value(k); ok && bytes.Equal(c, v) {
			data[k] = c
		}
	}
}

// Track counts a module's own informer's events in ingress_reactor_informer_events_total under resource.
func (s *KubeSource) track(resource string, inf cache.SharedIndexInformer) {
	add := s.events.WithLabelValues(resource, "add")
	upd := s.events.WithLabelValues(resource, "update")
	del := s.events.WithLabelValues(resource, "delete")
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { add.Inc() },
		UpdateFunc: func(any, any) { upd.Inc() },
		DeleteFunc: func(any) { del.Inc() },
	})
}

// Synced is closed once every informer started at OnStart has synced its cache.
func (s *KubeSource) Synced() <-chan struct{} { return s.synced }

func (s *KubeSource) start(context.Context) error {
	if s.Local != nil {
		// Load before informers list, so the first list already holds the manifests.
		s.Local.LoadAll()
		if err := s.Local.Start(); err != nil {
			return err
		}
	}
	if lc, ok := s.Client.(*localapi.Clientset); ok {
		go forgetActions(lc, localActionsPeriod, s.stop)
	}
	s.Factory.Start(s.stop)
	go func() {
		began := time.Now()
		for typ, ok := range s.Factory.WaitForCacheSync(s.stop) {
			if !ok {
				s.log.Warn("informer cache did not sync before shutdown", zap.String("type", typ.String()))
				return
			}
		}
		s.log.Info("informer caches synced", zap.Duration("took", time.Since(began)))
		close(s.synced)
	}()
	return nil
}

// localActionsPeriod is how often local mode drops the fake clientset's record of API calls.
const localActionsPeriod = 30 * time.Second

// forgetActions clears, every period until stop closes, the list of every API call that client-go's fake
// clientset keeps for tests to inspect. Nothing in the controller reads it, and in a long local run
// (Lease renewals, Events, status writes) it would otherwise grow without bound.
func forgetActions(cs *localapi.Clientset, period time.Duration, stop <-chan struct{}) {
	every(period, stop, func(time.Time) { cs.ClearActions() })
}

// every calls fn with the tick's time once per period until stop closes.
func every(period time.Duration, stop <-chan struct{}, fn func(time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			fn(now)
		}
	}
}

func (s *KubeSource) shutdown(context.Context) error {
	close(s.stop)
	if s.Local != nil {
		s.Local.Stop()
	}
	s.Factory.Shutdown()
	return nil
}
