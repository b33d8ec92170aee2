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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// shutdownAttempts bounds the conflict retries of one Ingress on shutdown, where no queue retries.
	shutdownAttempts = 3
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
			Name:        "ingress_reactor_leader",
			Help:        "1 while this replica is the leader that writes Ingress status, 0 otherwise.",
			ConstLabels: prometheus.Labels{"identity": identity},
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
	p.IngressChanges.Subscribe(l.ingressChanged)
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

// ingressChanged tracks which Ingresses are ours and queues the one that changed.
func (l *Leader) ingressChanged(c modules.IngressChange) {
	l.mu.Lock()
	if c.Accepted {
		l.ours[c.Key] = struct{}{}
		delete(l.lost, c.Key)
	} else {
		delete(l.ours, c.Key)
		if _, err := l.ingresses.Ingresses(c.Key.Namespace).Get(c.Key.Name); err == nil {
			l.lost[c.Key] = struct{}{}
		} else {
			delete(l.lost, c.Key)
		}
	}
	l.mu.Unlock()
	l.ctrl.Queue().Add(c.Key)
}

// refreshAddresses asks discovery for the addresses and, when they changed, re-checks every Ingress.
func (l *Leader) refreshAddresses() {
	if !l.discovery.HasSynced() {
		return // events of the initial list; Start refreshes once the caches are complete
	}
	addrs, err := l.discovery.Addresses()
	l.mu.Lock()
	prevErr, prevKnown := l.addrsErr, l.known
	changed := !prevKnown || (err == nil) != (prevErr == nil) || !status.Equal(addrs, l.addrs)
	l.addrs, l.addrsErr, l.known = addrs, err, true
	if err == nil {
		l.published = addrs
	}
	leading := l.leadingLocked()
	l.mu.Unlock()

	switch {
	case err != nil:
		l.m.addresses.Set(-1)
		if prevErr == nil || prevErr.Error() != err.Error() {
			l.log.Warn("cannot determine the addresses to publish; Ingress status is left as it is", zap.Error(err))
		}
	case changed:
		l.m.addresses.Set(float64(len(addrs)))
		l.log.Info("addresses to publish", zap.String("source", string(l.discovery.Source())), zap.String("addresses", status.String(addrs)))
		if leading {
			l.enqueueAll()
		}
	}
}

// startedLeading runs on its own goroutine, which may get to run only after leadership has ended and
// stoppedLeading has run (status.Callbacks): ctx is cancelled then and must not be taken up. Checking it
// under l.mu orders this against stoppedLeading, which runs after the cancel; the gauge is set under the
// same lock so that it cannot end at 1 on a replica that does not lead.
func (l *Leader) startedLeading(ctx context.Context) {
	l.mu.Lock()
	if ctx.Err() != nil {
		l.mu.Unlock()
		return
	}
	l.leaderCtx = ctx
	l.m.leader.Set(1)
	l.mu.Unlock()
	l.enqueueAll()
}

func (l *Leader) stoppedLeading() {
	l.mu.Lock()
	l.leaderCtx = nil
	l.m.leader.Set(0)
	l.mu.Unlock()
}

// leadingLocked reports whether leadership has begun and not ended; l.mu must be held. The leader context
// is cancelled a moment before stoppedLeading clears it.
func (l *Leader) leadingLocked() bool {
	return l.leaderCtx != nil && l.leaderCtx.Err() == nil
}

// enqueueAll queues every Ingress that is ours or may still carry our addresses.
func (l *Leader) enqueueAll() {
	l.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(l.ours)+len(l.lost))
	for k := range l.ours {
		keys = append(keys, k)
	}
	for k := range l.lost {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	q := l.ctrl.Queue()
	for _, k := range keys {
		q.Add(k)
	}
}

// recheckEvery refreshes the addresses (a safety net for missed events) and, while leading, re-checks
// every Ingress once per UpdateInterval. A replica that does not lead forgets the lost Ingresses that no
// longer carry our addresses (the leader cleared them), so that set does not grow without bound.
func (l *Leader) recheckEvery(ctx context.Context) {
	t := l.opts.Clock.NewTicker(l.opts.UpdateInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		l.refreshAddresses()
		if l.elector.IsLeader() {
			l.enqueueAll()
		} else {
			l.pruneLost()
		}
	}
}

func (l *Leader) pruneLost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addrsErr != nil {
		return
	}
	for k := range l.lost {
		ing, err := l.ingresses.Ingresses(k.Namespace).Get(k.Name)
		if err != nil || !status.Overlaps(ing.Status.LoadBalancer.Ingress, l.addrs) {
			delete(l.lost, k)
		}
	}
}

// sync brings one Ingress's status in line: our addresses while it is ours, without them once it is not.
func (l *Leader) sync(ctx context.Context, key types.NamespacedName) error {
	l.mu.Lock()
	_, ours := l.ours[key]
	_, lost := l.lost[key]
	addrs, known := l.addrs, l.known && l.addrsErr == nil
	leading, leaderCtx := l.leadingLocked(), l.leaderCtx
	l.mu.Unlock()
	if !leading || !known || (!ours && !lost) {
		return nil // a replica that does not lead re-checks everything when it starts leading
	}
	if !l.elector.IsLeader() {
		// Still leading but overdue with renewing the Lease: hold off; if leadership ends, the next
		// leader re-checks everything, and if it is renewed, this key is synced then.
		l.ctrl.Queue().AddAfter(key, l.opts.Election.RetryPeriod)
		return nil
	}
	ing, err := l.ingresses.Ingresses(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		l.forgetLost(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ingress %s: %w", key, err)
	}
	want := addrs
	if !ours {
		want = status.Remove(ing.Status.LoadBalancer.Ingress, addrs)
	}
	if status.Equal(status.Current(ing), want) {
		if !ours {
			l.forgetLost(key)
		}
		return nil
	}
	if err := l.limiter.Wait(ctx); err != nil {
		return fmt.Errorf("wait to write status of %s: %w", key, err)
	}
	// Waiting may have taken a while: leadership must still hold, and a write in flight is abandoned the
	// moment it ends.
	if leaderCtx.Err() != nil {
		return nil
	}
	if !l.elector.IsLeader() {
		l.ctrl.Queue().AddAfter(key, l.opts.Election.RetryPeriod)
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(leaderCtx, cancel)()
	_, err = status.Write(wctx, l.client.NetworkingV1(), ing, want)
	switch {
	case err == nil:
		l.m.updates.WithLabelValues("success").Inc()
		l.log.Debug("ingress status written", zap.Stringer("ingress", key), zap.Bool("ours", ours), zap.String("addresses", status.String(want)))
		if !ours {
			l.log.Info("addresses removed from an ingress that is no longer ours", zap.Stringer("ingress", key))
			l.forgetLost(key)
		}
		return nil
	case apierrors.IsNotFound(err):
		l.forgetLost(key)
		return nil
	case apierrors.IsConflict(err):
		// Someone changed the Ingress since the cache saw it; the retry reads the newer copy.
		l.m.updates.WithLabelValues("conflict").Inc()
		return err
	case leaderCtx.Err() != nil:
		return nil // leadership ended during the write; the next leader re-checks everything
	default:
		l.m.updates.WithLabelValues("error").Inc()
		return err
	}
}

func (l *Leader) forgetLost(key types.NamespacedName) {
	l.mu.Lock()
	delete(l.lost, key)
	l.mu.Unlock()
}

// gaveUp puts a Warning Event on an Ingress whose status could not be written.
func (l *Leader) gaveUp(key types.NamespacedName, err error) {
	if l.recorder == nil {
		return
	}
	ing, gerr := l.ingresses.Ingresses(key.Namespace).Get(key.Name)
	if gerr != nil {
		return
	}
	l.recorder.Eventf(ing, corev1.EventTypeWarning, ReasonUpdateStatusFailed, "Cannot update the load-balancer status: %v", err)
}

// clearOnShutdown takes this replica's addresses back from every Ingress it serves, when it is the leader
// and no other replica will keep publishing them. A replica that does not lead never writes: the leader
// may still be running and would write the addresses back, or have published others meanwhile.
func (l *Leader) clearOnShutdown(ctx context.Context) {
	l.mu.Lock()
	published := l.published
	keys := make([]types.NamespacedName, 0, len(l.ours))
	for k := range l.ours {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	if len(published) == 0 || len(keys) == 0 {
		return
	}
	if !l.elector.IsLeader() {
		l.log.Info("not the leader: leaving Ingress status to the leader on shutdown")
		return
	}
	last, err := status.IsLastReplica(ctx, l.client, l.opts.Discovery.Pod)
	if err != nil {
		l.log.Warn("cannot tell whether other replicas keep running; leaving Ingress status as it is", zap.Error(err))
		return
	}
	if !last {
		l.log.Info("other replicas keep publishing; leaving Ingress status as it is")
		return
	}
	l.log.Info("last replica stopping: clearing published addresses", zap.Int("ingresses", len(keys)), zap.String("addresses", status.String(published)))
	work := make(chan types.NamespacedName)
	var mu sync.Mutex
	var cleared, failed int
	var wg sync.WaitGroup
	for range min(shutdownWorkers, len(keys)) {
		wg.Go(func() {
			for key := range work {
				wrote, err := l.clearOne(ctx, key, published)
				mu.Lock()
				switch {
				case err != nil:
					failed++
					l.log.Warn("cannot clear ingress status on shutdown", zap.Stringer("ingress", key), zap.Error(err))
				case wrote:
					cleared++
				}
				mu.Unlock()
			}
		})
	}
	for _, k := range keys {
		select {
		case work <- k:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	l.log.Info("cleared ingress status on shutdown", zap.Int("cleared", cleared), zap.Int("failed", failed),
		zap.Int("skipped", len(keys)-cleared-failed))
}

// clearOne removes published from one Ingress, re-reading it from the API server after a conflict.
func (l *Leader) clearOne(ctx context.Context, key types.NamespacedName, published []status.Address) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	ing, err := l.ingresses.Ingresses(key.Namespace).Get(key.Name)
	for attempt := 1; ; attempt++ {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("get ingress %s: %w", key, err)
		}
		var wrote bool
		wrote, err = status.Write(ctx, l.client.NetworkingV1(), ing, status.Remove(ing.Status.LoadBalancer.Ingress, published))
		if err == nil {
			if wrote {
				l.m.updates.WithLabelValues("success").Inc()
			}
			return wrote, nil
		}
		if !apierrors.IsConflict(err) || attempt >= shutdownAttempts {
			l.m.updates.WithLabelValues("error").Inc()
			return false, err
		}
		l.m.updates.WithLabelValues("conflict").Inc()
		ing, err = l.client.NetworkingV1().Ingresses(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	}
}
