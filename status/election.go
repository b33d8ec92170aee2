package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ElectionOptions configure the Lease-based leader election.
type ElectionOptions struct {
	// Disabled makes this replica the leader from Run until its context ends, without a Lease
	// (--disable-leader-election, for a single replica).
	Disabled bool
	// Namespace and Name locate the coordination.k8s.io/v1 Lease (POD_NAMESPACE, --election-id).
	Namespace, Name string
	// Identity is this replica's name in the Lease's holderIdentity. It must be unique among the
	// replicas: two candidates with one identity would both believe they lead.
	Identity string
	// LeaseDuration is how long a Lease that is not renewed keeps others from taking over
	// (--election-lease-duration). Kubernetes stores it in whole seconds, so it must be at least 1s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it gives up leading
	// (--election-renew-deadline). It must be shorter than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the pause between attempts to acquire or renew (--election-retry-period).
	// RenewDeadline must exceed 1.2 times RetryPeriod (client-go's jitter).
	RetryPeriod time.Duration
	// Recorder, if set, receives "became leader" and "stopped leading" Events on the Lease.
	Recorder resourcelock.EventRecorder
	// Log receives election logs; nil discards them.
	Log *zap.Logger
	// Clock drives the renewal guard of IsLeader; nil is the real clock.
	Clock clock.PassiveClock
}

// Validate reports option combinations the election cannot work with.
func (o ElectionOptions) Validate() error {
	if o.Disabled {
		return nil
	}
	var errs []error
	if o.Name == "" {
		errs = append(errs, errors.New("election id must not be empty"))
	} else if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("election id %q is not a valid Lease name: %v", o.Name, msgs))
	}
	if o.LeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("lease duration %s must be at least 1s", o.LeaseDuration))
	}
	if o.RenewDeadline <= 0 || o.RenewDeadline >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("renew deadline %s must be positive and shorter than the lease duration %s", o.RenewDeadline, o.LeaseDuration))
	}
	if o.RetryPeriod <= 0 || float64(o.RenewDeadline) <= leaderelection.JitterFactor*float64(o.RetryPeriod) {
		errs = append(errs, fmt.Errorf("retry period %s must be positive and the renew deadline %s longer than %.1f times it",
			o.RetryPeriod, o.RenewDeadline, leaderelection.JitterFactor))
	}
	return errors.Join(errs...)
}

// Callbacks tell the user of an Elector when leadership begins and ends.
type Callbacks struct {
	// OnStartedLeading runs (on its own goroutine) when this replica becomes the leader; ctx ends when it
	// stops leading. The goroutine may get to run only after leadership has ended and OnStoppedLeading
	// has run; ctx is cancelled then, so check ctx.Err() under the lock OnStoppedLeading takes before
	// taking leadership up.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs once for each OnStartedLeading, when leadership ends, after ctx is cancelled
	// (not necessarily after OnStartedLeading has run: see there).
	OnStoppedLeading func()
	// OnNewLeader, if set, runs when a different leader is observed (this replica included).
	OnNewLeader func(identity string)
}

// Elector campaigns for a Lease and keeps campaigning after it loses it, until its context ends.
type Elector struct {
	opts   ElectionOptions
	client kubernetes.Interface
	cb     Callbacks
	clock  clock.PassiveClock
	log    *zap.Logger

	mu      sync.Mutex
	leading bool
	// renewed is when this replica last wrote the Lease as its holder (UnixNano); see IsLeader.
	renewed atomic.Int64
}

// NewElector validates opts and prepares an Elector; Run campaigns.
func NewElector(client kubernetes.Interface, opts ElectionOptions, cb Callbacks) (*Elector, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Identity == "" && !opts.Disabled {
		return nil, errors.New("leader election identity must not be empty")
	}
	if cb.OnStartedLeading == nil || cb.OnStoppedLeading == nil {
		return nil, errors.New("leader election callbacks OnStartedLeading and OnStoppedLeading are required")
	}
	e := &Elector{opts: opts, client: client, cb: cb, clock: opts.Clock, log: opts.Log}
	if e.clock == nil {
		e.clock = clock.RealClock{}
	}
	if e.log == nil {
		e.log = zap.NewNop()
	}
	return e, nil
}

// Identity returns this replica's identity in the Lease.
func (e *Elector) Identity() string { return e.opts.Identity }

// IsLeader reports whether this replica may act as the leader right now: it holds the Lease and renewed
// it less than RenewDeadline ago. The second condition makes a replica that cannot renew stop at once,
// without waiting for client-go to give up and release the Lease (which can take another RenewDeadline
// when the API server is unreachable). Others take over only after LeaseDuration, which is longer.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	leading := e.leading
	e.mu.Unlock()
	if !leading {
		return false
	}
	if e.opts.Disabled {
		return true
	}
	return e.clock.Since(time.Unix(0, e.renewed.Load())) < e.opts.RenewDeadline
}

// Run campaigns until ctx ends. Leadership that is lost is campaigned for again after RetryPeriod. When
// ctx ends while leading, the Lease is released, so another replica takes over without waiting for it
// to expire. Run returns after OnStoppedLeading has run.
func (e *Elector) Run(ctx context.Context) {
	if e.opts.Disabled {
		e.started(ctx)
		<-ctx.Done()
		e.stopped()
		return
	}
	for ctx.Err() == nil {
		if err := e.runOnce(ctx); err != nil {
			e.log.Error("leader election cannot run", zap.Error(err))
			return
		}
		if ctx.Err() == nil {
			e.log.Info("leadership lost; campaigning again", zap.String("identity", e.opts.Identity))
			select {
			case <-ctx.Done():
			case <-time.After(e.opts.RetryPeriod):
			}
		}
	}
}

// runOnce is one campaign: acquire, lead until the Lease cannot be renewed, release.
func (e *Elector) runOnce(ctx context.Context) error {
	lock := &trackingLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.opts.Namespace, Name: e.opts.Name},
			Client:     e.client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.opts.Identity, EventRecorder: e.opts.Recorder},
		},
		clock:   e.clock,
		renewed: &e.renewed,
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.opts.LeaseDuration,
		RenewDeadline:   e.opts.RenewDeadline,
		RetryPeriod:     e.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.opts.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: e.started,
			OnStoppedLeading: e.stopped,
			OnNewLeader: func(id string) {
				e.log.Info("leader observed", zap.String("leader", id), zap.Bool("self", id == e.opts.Identity))
				if e.cb.OnNewLeader != nil {
					e.cb.OnNewLeader(id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election %s/%s: %w", e.opts.Namespace, e.opts.Name, err)
	}
	le.Run(ctx)
	return nil
}

// started runs on client-go's goroutine. client-go may call stopped before this goroutine runs; ctx is
// already cancelled then and leadership is not taken up. stopped may also run between the unlock below and
// the callback; OnStartedLeading sees the cancelled ctx then (see Callbacks).
func (e *Elector) started(ctx context.Context) {
	e.mu.Lock()
	if ctx.Err() != nil {
		e.mu.Unlock()
		return
	}
	e.leading = true
	e.mu.Unlock()
	e.log.Info("became leader", zap.String("identity", e.opts.Identity))
	e.cb.OnStartedLeading(ctx)
}

// stopped runs whenever a campaign ends, whether or not it led.
func (e *Elector) stopped() {
	e.mu.Lock()
	was := e.leading
	e.leading = false
	e.mu.Unlock()
	if was {
		e.log.Info("stopped leading", zap.String("identity", e.opts.Identity))
		e.cb.OnStoppedLeading()
	}
}

// trackingLock records when this replica last wrote the Lease as its holder.
type trackingLock struct {
	resourcelock.Interface
	clock   clock.PassiveClock
	renewed *atomic.Int64
}

// Create creates the Lease and, on success, counts as a renewal.
func (l *trackingLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	at := l.clock.Now()
	err := l.Interface.Create(ctx, r)
	l.record(err, r, at)
	return err
}

// Update writes the Lease and, on success, counts as a renewal when this replica is the holder.
func (l *trackingLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	at := l.clock.Now()
	err := l.Interface.Update(ctx, r)
	l.record(err, r, at)
	return err
}

// record takes the time from before the write: the Lease's renewTime is no later than that, so others
// measure its expiry from a later point than this replica does.
func (l *trackingLock) record(err error, r resourcelock.LeaderElectionRecord, at time.Time) {
	if err == nil && r.HolderIdentity == l.Identity() {
		l.renewed.Store(at.UnixNano())
	}
}
