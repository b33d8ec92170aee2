// Package statusleader publishes where accepted Ingresses are served (status.loadBalancer.ingress). Replicas
// elect a leader through a Lease and only the leader writes; it writes an Ingress only when its addresses
// differ from the desired ones, re-checks every Ingress periodically and whenever the published addresses
// change, and takes its addresses back from Ingresses that stop being ours. On shutdown the leader clears
// what it published when it is the last replica.
package statusleader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersnetv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
	"github.com/ingress-reactor/ingress-reactor/status"
)

// Module wires the status leader into the application.
var Module = fx.Module("statusleader",
	fx.Provide(New),
	fx.Invoke(func(*Leader) {}),
)

// ReasonUpdateStatusFailed is the reason of the Warning Event on an Ingress whose status could not be
// written within the queue's retry limit.
const ReasonUpdateStatusFailed = "UpdateStatusFailed"

// Defaults for Options fields left at their zero value.
const (
	DefaultUpdateInterval = 60 * time.Second
	DefaultWriteQPS       = 20.0
	DefaultWriteBurst     = 50
	DefaultWorkers        = 2
	// shutdownWorkers write in parallel when the last replica clears its addresses on shutdown.
	shutdownWorkers = 4
	// writeAttempts bounds the writes of one Ingress's status in a row, each after a conflict made it
	// re-read the Ingress from the API server.
	writeAttempts = 3
	// conflictRetryDelay is how long an Ingress whose every write attempt met a newer copy waits before
	// it is synced again; such retries are outside the queue's retry limit.
	conflictRetryDelay = time.Second
)

// Options configure the status leader.
type Options struct {
	// Discovery says where the addresses to publish come from.
	Discovery status.DiscoveryOptions
	// Election configures the Lease; New fills its Recorder and Log when they are nil.
	Election status.ElectionOptions
	// UpdateInterval is --status-update-interval: how often the leader re-checks every Ingress.
	UpdateInterval time.Duration
	// UpdateOnShutdown is --update-status-on-shutdown: the last replica to stop clears what it published,
	// if it leads.
	UpdateOnShutdown bool
	// WriteQPS and WriteBurst shape the token bucket of status writes, so that thousands of Ingresses
	// do not flood the API server when the addresses change.
	WriteQPS   float64
	WriteBurst int
	// Workers is how many Ingresses are synced in parallel.
	Workers int
	// Clock drives the periodic re-check and the queue's retry delays; nil is the real clock.
	Clock clock.WithTicker
}

func (o Options) withDefaults() Options {
	if o.UpdateInterval <= 0 {
		o.UpdateInterval = DefaultUpdateInterval
	}
	if o.WriteQPS <= 0 {
		o.WriteQPS = DefaultWriteQPS
	}
	if o.WriteBurst <= 0 {
		o.WriteBurst = DefaultWriteBurst
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Params are the status leader's fx inputs.
type Params struct {
	fx.In
	Options        Options
	Client         kubernetes.Interface
	Factory        informers.SharedInformerFactory
	IngressChanges *pipeline.Topic[modules.IngressChange]
	Recorder       record.EventRecorder
	Metrics        *pipeline.Metrics
	Registry       prometheus.Registerer
	Log            *zap.Logger
	Lifecycle      fx.Lifecycle `optional:"true"`
}

// Leader keeps the status of accepted Ingresses current while this replica leads.
type Leader struct {
	opts      Options
	client    kubernetes.Interface
	ingresses listersnetv1.IngressLister
	ingSynced cache.InformerSynced
	discovery *status.Discovery
	elector   *status.Elector
	ctrl      *pipeline.Controller[types.NamespacedName]
	recorder  record.EventRecorder
	limiter   *rate.Limiter
	log       *zap.Logger
	m         leaderMetrics

	// cancel ends the background goroutines Start began; wg waits for them.
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopDisc chan struct{}
	stopOnce sync.Once
	elected  chan struct{} // closed when the election loop has returned

	mu sync.Mutex
	// ours are the Ingresses the class filter accepted; lost are those that stopped being ours while
	// they still exist and may still carry our addresses.
	ours map[types.NamespacedName]struct{}
	lost map[types.NamespacedName]struct{}
	// addrs is the latest discovery answer, addrsErr why there is none; known is false until the
	// first discovery after the caches synced.
	addrs    []status.Address
	addrsErr error
	known    bool
	// published is the last address list that was known; shutdown takes it back.
	published []status.Address
	// leaderCtx is set while leading and ends when leadership does.
	leaderCtx context.Context
}

type leaderMetrics struct {
	leader    prometheus.Gauge
	updates   *prometheus.CounterVec
	addresses prometheus.Gauge
}

// New builds the status leader: it registers its informers, its subscription to IngressChange and its
// metrics. Without fx, pass a nil Lifecycle and call Start and Stop yourself.
func New(p Params) (*Leader, error) {
	opts := p.Options.withDefaults()
	log := p.Log.Named("statusleader")
	if opts.Election.Log == nil {
		opts.Election.Log = log
	}
	if opts.Election.Recorder == nil && p.Recorder != nil {
		opts.Election.Recorder = p.Recorder
	}
	ingInf := p.Factory.Networking().V1().Ingresses()
	l := &Leader{
		opts:      opts,
		client:    p.Client,
		ingresses: ingInf.Lister(),
		ingSynced: ingInf.Informer().HasSynced,
		discovery: status.NewDiscovery(p.Client, opts.Discovery),
		recorder:  p.Recorder,
		limiter:   rate.NewLimiter(rate.Limit(opts.WriteQPS), opts.WriteBurst),
		log:       log,
		stopDisc:  make(chan struct{}),
		elected:   make(chan struct{}),
		ours:      map[types.NamespacedName]struct{}{},
		lost:      map[types.NamespacedName]struct{}{},
	}
	elector, err := status.NewElector(p.Client, opts.Election, status.Callbacks{
		OnStartedLeading: l.startedLeading,
		OnStoppedLeading: l.stoppedLeading,
	})
	if err != nil {
		return nil, fmt.Errorf("statusleader: %w", err)
	}
	l.elector = elector
	identity := elector.Identity()
	if opts.Election.Disabled && identity == "" {
		identity = "leader-election-disabled"
	}
	l.m = leaderMetrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_leader",
			Help: "1 while this replica is the leader that writes Ingress status, 0 otherwise.",
			// lease: the Lease's name (--election-id), the same on every replica, which
			// ingress-nginx's leader_election_status labels "name" (app/compatmetrics.go).
			ConstLabels: prometheus.Labels{"identity": identity, "lease": opts.Election.Name},
		}),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingress_reactor_status_updates_total",
			Help: "Writes of Ingress status addresses, by result (success, conflict, error).",
		}, []string{"result"}),
		addresses: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ingress_reactor_status_addresses",
			Help: "Number of addresses published in the status of accepted Ingresses (-1 while they cannot be determined).",
		}),
	}
	for _, c := range []prometheus.Collector{l.m.leader, l.m.updates, l.m.addresses} {
		if err := p.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("statusleader: register metrics: %w", err)
		}
	}
	for _, r := range []string{"success", "conflict", "error"} {
		l.m.updates.WithLabelValues(r)
	}
	l.m.addresses.Set(-1)

	q := pipeline.NewQueue(pipeline.QueueOptions[types.NamespacedName]{
		Name: "statusleader", Metrics: p.Metrics, Logger: log,
		BaseDelay: 100 * time.Millisecond, MaxDelay: time.Minute,
		OnGiveUp: l.gaveUp, Clock: opts.Clock,
	})
	l.ctrl = pipeline.NewController(q, l.sync, pipeline.ControllerOptions{Workers: opts.Workers})

	if err := l.discovery.OnChange(l.refreshAddresses); err != nil {
		return nil, fmt.Errorf("statusleader: %w", err)
	}
	l.subscribe(p.IngressChanges)
	if p.Lifecycle != nil {
		p.Lifecycle.Append(fx.Hook{
			OnStart: func(context.Context) error { l.Start(context.Background()); return nil },
			OnStop:  l.Stop,
		})
	}
	return l, nil
}

// Start begins in the background: it starts the discovery informers, waits for the caches, then runs
// the workers, the election and the periodic re-check. ctx must outlive the Leader; Stop ends it all.
func (l *Leader) Start(ctx context.Context) {
	ctx, l.cancel = context.WithCancel(ctx)
	l.discovery.Start(l.stopDisc)
	l.wg.Go(func() {
		if !cache.WaitForCacheSync(ctx.Done(), l.ingSynced, l.discovery.HasSynced) {
			close(l.elected)
			return
		}
		l.refreshAddresses()
		l.ctrl.Start(ctx)
		l.wg.Go(func() { l.recheckEvery(ctx) })
		l.log.Info("campaigning for status leadership",
			zap.String("identity", l.elector.Identity()), zap.Bool("election", !l.opts.Election.Disabled),
			zap.String("lease", l.opts.Election.Namespace+"/"+l.opts.Election.Name),
			zap.String("addressSource", string(l.discovery.Source())))
		l.elector.Run(ctx)
		close(l.elected)
	})
}

// Stop stops writing, clears this replica's addresses when it leads, is the last replica and
// --update-status-on-shutdown is set, then releases the Lease, all within ctx.
func (l *Leader) Stop(ctx context.Context) error {
	// Workers first, so nothing writes while the shutdown decides; the Lease is still held meanwhile,
	// so no other replica writes either.
	err := l.ctrl.Stop(ctx)
	if l.opts.UpdateOnShutdown {
		l.clearOnShutdown(ctx)
	}
	released := true
	if l.cancel != nil {
		l.cancel()
		select {
		case <-l.elected:
		case <-ctx.Done():
			released = false
			err = errors.Join(err, fmt.Errorf("statusleader: lease not released before the stop deadline: %w", ctx.Err()))
		}
	}
	l.stopOnce.Do(func() { close(l.stopDisc) })
	l.discovery.Shutdown()
	if released {
		// The election goroutine is done; the others return as soon as their context ends. Past the
		// deadline the release attempt (bounded by the renew deadline) is left to finish on its own.
		l.wg.Wait()
	}
	l.m.leader.Set(0)
	return err
}

// IsLeader reports whether this replica currently writes status.
func (l *Leader) IsLeader() bool { return l.elector.IsLeader() }

// Addresses returns the addresses currently published and why they are unknown, if they are.
func (l *Leader) Addresses() ([]status.Address, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs, l.addrsErr
}
