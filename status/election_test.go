package status

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func electionOptions(identity string) ElectionOptions {
	return ElectionOptions{
		Namespace: testNamespace, Name: "ingress-reactor-leader", Identity: identity,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
	}
}

// candidate is an Elector running in the background with counters of its callbacks.
type candidate struct {
	*Elector
	cancel context.CancelFunc
	done   chan struct{}

	mu               sync.Mutex
	started, stopped int
	leaderCtx        context.Context // the ctx of the last OnStartedLeading
}

func runCandidate(t *testing.T, client kubernetes.Interface, opts ElectionOptions) *candidate {
	t.Helper()
	c := &candidate{done: make(chan struct{})}
	e, err := NewElector(client, opts, Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			c.mu.Lock()
			c.started++
			c.leaderCtx = ctx
			c.mu.Unlock()
			<-ctx.Done()
		},
		OnStoppedLeading: func() { c.mu.Lock(); c.stopped++; c.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Elector = e
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { e.Run(ctx); close(c.done) }()
	t.Cleanup(func() { c.stop(t) })
	return c
}

// stop cancels the candidate and waits for Run to return.
func (c *candidate) stop(t *testing.T) {
	t.Helper()
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func (c *candidate) counts() (started, stopped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started, c.stopped
}

func leaseHolder(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	l, err := client.CoordinationV1().Leases(testNamespace).Get(context.Background(), "ingress-reactor-leader", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func TestElectionOneLeaderAndHandOverOnStop(t *testing.T) {
	client := fake.NewClientset()
	a := runCandidate(t, client, electionOptions("a"))
	b := runCandidate(t, client, electionOptions("b"))

	var leader, other *candidate
	waitFor(t, "a leader", func() bool {
		if a.IsLeader() && b.IsLeader() {
			t.Fatal("both candidates lead at once")
		}
		switch {
		case a.IsLeader():
			leader, other = a, b
		case b.IsLeader():
			leader, other = b, a
		}
		return leader != nil
	})
	if got := leaseHolder(t, client); got != leader.Identity() {
		t.Errorf("Lease holder = %q, want the leader %q", got, leader.Identity())
	}

	leader.stop(t)
	if started, stopped := leader.counts(); started != 1 || stopped != 1 {
		t.Errorf("stopped leader: OnStartedLeading ran %d times and OnStoppedLeading %d times, want 1 and 1", started, stopped)
	}
	if leader.IsLeader() {
		t.Error("a stopped candidate still reports leading")
	}
	// The Lease was released, so the other candidate takes over well within the lease duration.
	waitFor(t, "the other candidate to take over", other.IsLeader)
	if got := leaseHolder(t, client); got != other.Identity() {
		t.Errorf("Lease holder = %q after hand-over, want %q", got, other.Identity())
	}
	if started, stopped := other.counts(); started != 1 || stopped != 0 {
		t.Errorf("new leader: OnStartedLeading ran %d times and OnStoppedLeading %d times, want 1 and 0", started, stopped)
	}
}

func TestElectionStopsLeadingAtOnceWhenRenewalsFail(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1700000000, 0))
	opts := electionOptions("a")
	opts.RenewDeadline = 10 * time.Second // client-go gives up after this much real time; the guard must not wait for it
	opts.LeaseDuration = 15 * time.Second
	opts.Clock = clk
	setFail := failableLeaseUpdates(client)
	a := runCandidate(t, client, opts)
	waitFor(t, "leadership", a.IsLeader)

	setFail(true)
	clk.SetTime(clk.Now().Add(opts.RenewDeadline - time.Millisecond))
	if !a.IsLeader() {
		t.Fatal("leadership ended before the renew deadline passed")
	}
	clk.SetTime(clk.Now().Add(time.Millisecond))
	if a.IsLeader() {
		t.Error("IsLeader is still true a renew deadline after the last successful renewal")
	}
}

func TestElectionCampaignsAgainAfterLosingTheLease(t *testing.T) {
	client := fake.NewClientset()
	setFail := failableLeaseUpdates(client)
	opts := electionOptions("a")
	opts.LeaseDuration, opts.RenewDeadline = 1500*time.Millisecond, 500*time.Millisecond
	a := runCandidate(t, client, opts)
	waitFor(t, "leadership", func() bool { started, _ := a.counts(); return started == 1 && a.IsLeader() })

	setFail(true)
	waitFor(t, "leadership to be given up", func() bool { _, stopped := a.counts(); return stopped == 1 })
	// OnStoppedLeading runs after the leader's ctx is cancelled (see Callbacks); whether the callback's
	// goroutine has woken up from <-ctx.Done() by now is up to the scheduler, so look at the ctx itself.
	a.mu.Lock()
	leaderCtx := a.leaderCtx
	a.mu.Unlock()
	if leaderCtx.Err() == nil {
		t.Error("the leader's context was not cancelled when leadership ended")
	}

	setFail(false)
	waitFor(t, "leadership again", func() bool { started, _ := a.counts(); return started == 2 && a.IsLeader() })
}

func TestElectionDisabledLeadsWithoutALease(t *testing.T) {
	client := fake.NewClientset()
	a := runCandidate(t, client, ElectionOptions{Disabled: true})
	waitFor(t, "leadership", a.IsLeader)
	a.stop(t)
	if started, stopped := a.counts(); started != 1 || stopped != 1 || a.IsLeader() {
		t.Errorf("started %d, stopped %d, leading %v after stop; want 1, 1, false", started, stopped, a.IsLeader())
	}
	for _, act := range client.Actions() {
		if act.GetResource().Resource == "leases" {
			t.Errorf("disabled election touched a Lease: %v", act)
		}
	}
}

func TestElectionOptionsValidate(t *testing.T) {
	ok := electionOptions("a")
	tests := map[string]struct {
		mutate  func(*ElectionOptions)
		wantErr string
	}{
		"valid":                      {mutate: func(*ElectionOptions) {}},
		"disabled ignores the rest":  {mutate: func(o *ElectionOptions) { *o = ElectionOptions{Disabled: true} }},
		"empty name":                 {mutate: func(o *ElectionOptions) { o.Name = "" }, wantErr: "must not be empty"},
		"bad name":                   {mutate: func(o *ElectionOptions) { o.Name = "Leader_1" }, wantErr: "not a valid Lease name"},
		"sub-second lease":           {mutate: func(o *ElectionOptions) { o.LeaseDuration = 500 * time.Millisecond }, wantErr: "at least 1s"},
		"renew deadline not shorter": {mutate: func(o *ElectionOptions) { o.RenewDeadline = o.LeaseDuration }, wantErr: "shorter than the lease duration"},
		"retry period too long":      {mutate: func(o *ElectionOptions) { o.RetryPeriod = o.RenewDeadline }, wantErr: "longer than 1.2 times"},
		"retry period zero":          {mutate: func(o *ElectionOptions) { o.RetryPeriod = 0 }, wantErr: "retry period"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := ok
			tc.mutate(&o)
			err := o.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

// failableLeaseUpdates makes Lease updates fail while the returned switch is on. The fake clientset's
// reactor chain must not change while a client uses it, so the reactor is installed up front.
func failableLeaseUpdates(client *fake.Clientset) (setFail func(bool)) {
	var mu sync.Mutex
	fail := false
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return true, nil, errors.New("API server unreachable")
		}
		return false, nil, nil
	})
	return func(f bool) { mu.Lock(); fail = f; mu.Unlock() }
}
