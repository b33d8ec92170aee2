package statusleader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
	"github.com/ingress-reactor/ingress-reactor/status"
)

const (
	waitLimit = moduletest.WaitLimit
	ns        = "apps"
	ctlNS     = "ingress"
)

func ip(s string) status.Address { return status.Address{IP: s} }

// env is a Leader on a fake clientset, started, with the parts a test drives.
type env struct {
	t        *testing.T
	client   *fake.Clientset
	changes  *pipeline.Topic[modules.IngressChange]
	recorder *record.FakeRecorder
	reg      *prometheus.Registry
	clock    *clocktesting.FakeClock
	leader   *Leader
	stopped  bool

	mu      sync.Mutex
	patches []string                // names of Ingresses whose status was patched
	fail    func(name string) error // fails status patches
	failGet func(name string) error // fails reads of an Ingress from the API server (not the cache's)
}

// staticOptions publish 192.0.2.1 and 192.0.2.2 without leader election.
func staticOptions() Options {
	return Options{
		Discovery:      status.DiscoveryOptions{Static: []status.Address{ip("192.0.2.2"), ip("192.0.2.1")}, Pod: types.NamespacedName{Namespace: ctlNS, Name: "self"}},
		Election:       status.ElectionOptions{Disabled: true},
		UpdateInterval: time.Minute,
		WriteQPS:       1000, WriteBurst: 1000,
	}
}

func newEnv(t *testing.T, opts Options, objs ...runtime.Object) *env {
	t.Helper()
	return newEnvLogged(t, opts, zap.NewNop(), objs...)
}

// newEnvLogged is newEnv with the Leader logging to log.
func newEnvLogged(t *testing.T, opts Options, log *zap.Logger, objs ...runtime.Object) *env {
	t.Helper()
	h := moduletest.New(t, objs...)
	e := &env{
		t:        t,
		client:   h.Client,
		changes:  h.IngressChanges,
		recorder: record.NewFakeRecorder(100),
		reg:      h.Registry,
		clock:    clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
	// Installed before anything uses the client: the fake's reactor chain is not safe to change later.
	e.client.PrependReactor("patch", "ingresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.PatchAction).GetName()
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.fail != nil {
			if err := e.fail(name); err != nil {
				return true, nil, err
			}
		}
		e.patches = append(e.patches, name)
		return false, nil, nil
	})
	e.client.PrependReactor("get", "ingresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.failGet != nil {
			if err := e.failGet(a.(k8stesting.GetAction).GetName()); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	opts.Clock = e.clock
	l, err := New(Params{
		Options: opts, Client: e.client, Factory: h.Factory, IngressChanges: e.changes,
		Recorder: e.recorder, Metrics: h.Metrics, Registry: e.reg, Log: log,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.leader = l
	h.Start()
	l.Start(context.Background())
	t.Cleanup(func() {
		if !e.stopped {
			e.stop()
		}
	})
	return e
}

func (e *env) stop() {
	e.t.Helper()
	e.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := e.leader.Stop(ctx); err != nil {
		e.t.Errorf("Stop: %v", err)
	}
}

func (e *env) setFail(f func(name string) error) {
	e.mu.Lock()
	e.fail = f
	e.mu.Unlock()
}

func (e *env) setFailGet(f func(name string) error) {
	e.mu.Lock()
	e.failGet = f
	e.mu.Unlock()
}

func (e *env) patchCount(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, p := range e.patches {
		if p == name {
			n++
		}
	}
	return n
}

func (e *env) accept(name string) {
	e.changes.Publish(modules.IngressChange{Key: key(name), Accepted: true})
}
func (e *env) notOurs(name string) {
	e.changes.Publish(modules.IngressChange{Key: key(name), Accepted: false})
}
func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func (e *env) status(name string) []status.Address {
	e.t.Helper()
	ing, err := e.client.NetworkingV1().Ingresses(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get ingress %s: %v", name, err)
	}
	return ing.Status.LoadBalancer.Ingress
}

// waitStatus polls until the Ingress's status equals want.
func (e *env) waitStatus(name string, want ...status.Address) {
	e.t.Helper()
	moduletest.Eventually(e.t, "status of "+name+" to be "+status.String(want), func() bool {
		return reflect.DeepEqual(e.status(name), want)
	})
}

func (e *env) metric(m prometheus.Metric) float64 { return value(e.t, m) }

// value reads a gauge or counter.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Gauge != nil {
		return d.Gauge.GetValue()
	}
	return d.Counter.GetValue()
}

func ingress(name string, addrs ...status.Address) *networkingv1.Ingress {
	return gen.Ingress(ns, name, gen.IngressFunc(func(i *networkingv1.Ingress) { i.Status.LoadBalancer.Ingress = addrs }))
}

// setStatus writes an Ingress's status as someone else would, once the leader has finished the syncs
// it queued: a sync that read the Ingress before this write may land after it, and for an Ingress that
// is ours it publishes exactly our addresses, taking away what this write added.
func (e *env) setStatus(name string, addrs ...status.Address) {
	e.t.Helper()
	e.settle()
	ing, err := e.client.NetworkingV1().Ingresses(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = addrs
	ing.ResourceVersion += "0"
	if _, err := e.client.NetworkingV1().Ingresses(ns).UpdateStatus(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	moduletest.Eventually(e.t, "the cache to see the new status", func() bool {
		c, err := e.leader.ingresses.Ingresses(ns).Get(name)
		return err == nil && reflect.DeepEqual(c.Status.LoadBalancer.Ingress, addrs)
	})
}

// settle waits until every key added to the leader's queue has been synced. The queue's metrics count a
// key once per sync it will get (adds_total) and once per sync done (work_duration_seconds); when the
// adds read before and after the syncs done agree with them, nothing was queued or running meanwhile.
func (e *env) settle() {
	e.t.Helper()
	moduletest.Eventually(e.t, "the leader to finish the syncs it queued", func() bool {
		added := e.queueCount("workqueue_adds_total")
		done := e.queueCount("workqueue_work_duration_seconds")
		return done == added && e.queueCount("workqueue_adds_total") == added
	})
}

// queueCount reads the counter, or the histogram's count, of the leader's queue from the registry.
func (e *env) queueCount(family string) uint64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "name" || l.GetValue() != "statusleader" {
					continue
				}
				if m.Histogram != nil {
					return m.Histogram.GetSampleCount()
				}
				return uint64(m.Counter.GetValue())
			}
		}
	}
	e.t.Fatalf("metric %s of queue statusleader not found", family)
	return 0
}

func TestAcceptedIngressGetsPublishedAddressesSorted(t *testing.T) {
	e := newEnv(t, staticOptions(), ingress("web"), ingress("other-class"), ingress("current", ip("192.0.2.2"), ip("192.0.2.1")))
	e.accept("web")
	e.accept("current")
	e.waitStatus("web", ip("192.0.2.1"), ip("192.0.2.2"))

	// The Ingress that already had the addresses (in another order) is not written; the one that is not
	// ours is never touched.
	e.accept("web") // a later change of web queues it again: still no write, it is current
	moduletest.Eventually(t, "the queue to drain", func() bool { return e.leader.ctrl.Queue().Len() == 0 })
	if n := e.patchCount("current"); n != 0 {
		t.Errorf("an Ingress whose status already matched was written %d times", n)
	}
	if got := e.status("other-class"); got != nil {
		t.Errorf("an Ingress that is not ours got status %v", got)
	}
	if got := e.metric(e.leader.m.leader); got != 1 {
		t.Errorf("ingress_reactor_leader = %v with leader election disabled, want 1", got)
	}
	if got := e.metric(e.leader.m.addresses); got != 2 {
		t.Errorf("ingress_reactor_status_addresses = %v, want 2", got)
	}
}

func TestIngressThatStopsBeingOursLosesOnlyOurAddresses(t *testing.T) {
	e := newEnv(t, staticOptions(), ingress("web"))
	e.accept("web")
	e.waitStatus("web", ip("192.0.2.1"), ip("192.0.2.2"))

	// The Ingress moves to another controller, which has already added its own address.
	e.setStatus("web", ip("192.0.2.1"), ip("192.0.2.2"), ip("198.51.100.9"))
	e.notOurs("web")
	e.waitStatus("web", ip("198.51.100.9"))

	// Once it is cleared, periodic re-checks leave it alone.
	before := e.patchCount("web")
	moduletest.Eventually(t, "the periodic ticker", e.clock.HasWaiters)
	e.clock.Step(time.Minute)
	moduletest.Eventually(t, "the queue to drain", func() bool { return e.leader.ctrl.Queue().Len() == 0 })
	if got := e.patchCount("web"); got != before {
		t.Errorf("a cleared Ingress that is not ours was written again (%d writes)", got-before)
	}
}

func TestDeletedIngressIsForgotten(t *testing.T) {
	e := newEnv(t, staticOptions(), ingress("web"))
	e.accept("web")
	e.waitStatus("web", ip("192.0.2.1"), ip("192.0.2.2"))
	if err := e.client.NetworkingV1().Ingresses(ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the cache to see the deletion", func() bool {
		_, err := e.leader.ingresses.Ingresses(ns).Get("web")
		return apierrors.IsNotFound(err)
	})
	e.notOurs("web")
	moduletest.Eventually(t, "the ingress to be forgotten", func() bool {
		e.leader.mu.Lock()
		defer e.leader.mu.Unlock()
		_, ours := e.leader.ours[key("web")]
		_, lost := e.leader.lost[key("web")]
		return !ours && !lost
	})
}

func TestPeriodicRecheckRestoresStatus(t *testing.T) {
	e := newEnv(t, staticOptions(), ingress("web"))
	e.accept("web")
	e.waitStatus("web", ip("192.0.2.1"), ip("192.0.2.2"))

	e.setStatus("web", ip("203.0.113.66"))
	moduletest.Eventually(t, "the periodic ticker", e.clock.HasWaiters)
	e.clock.Step(time.Minute)
	e.waitStatus("web", ip("192.0.2.1"), ip("192.0.2.2"))
}

func TestPublishServiceChangeRewritesEveryIngress(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: ctlNS, ResourceVersion: "1"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
		Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.1"}}}},
	}
	opts := staticOptions()
	opts.Discovery = status.DiscoveryOptions{PublishService: types.NamespacedName{Namespace: ctlNS, Name: "lb"}}
	e := newEnv(t, opts, svc, ingress("a"), ingress("b"))
	e.accept("a")
	e.accept("b")
	e.waitStatus("a", ip("203.0.113.1"))
	e.waitStatus("b", ip("203.0.113.1"))

	svc = svc.DeepCopy()
	svc.ResourceVersion = "2"
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.2"}, {Hostname: "lb.example"}}
	if _, err := e.client.CoreV1().Services(ctlNS).UpdateStatus(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("a", ip("203.0.113.2"), status.Address{Hostname: "lb.example"})
	e.waitStatus("b", ip("203.0.113.2"), status.Address{Hostname: "lb.example"})
}

func TestUnknownAddressesLeaveStatusAlone(t *testing.T) {
	opts := staticOptions()
	opts.Discovery = status.DiscoveryOptions{PublishService: types.NamespacedName{Namespace: ctlNS, Name: "missing"}}
	e := newEnv(t, opts, ingress("web", ip("203.0.113.1")))
	e.accept("web")
	moduletest.Eventually(t, "the leader to report the missing Service", func() bool {
		_, err := e.leader.Addresses()
		return errors.Is(err, status.ErrNoPublishService)
	})
	moduletest.Eventually(t, "the queue to drain", func() bool { return e.leader.ctrl.Queue().Len() == 0 })
	if got := e.status("web"); !reflect.DeepEqual(got, []status.Address{ip("203.0.113.1")}) {
		t.Errorf("status = %v; a missing publish Service must not clear it", got)
	}
	if got := e.metric(e.leader.m.addresses); got != -1 {
		t.Errorf("ingress_reactor_status_addresses = %v while addresses are unknown, want -1", got)
	}
}

// conflictsFirst fails the first n status writes with a conflict, then lets them through.
func conflictsFirst(n int) func(string) error {
	conflicts := 0
	return func(name string) error {
		if conflicts < n {
			conflicts++
			return apierrors.NewConflict(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, name, errors.New("modified"))
		}
		return nil
	}
}

// Conflicts say only that the cached copy was stale: however many there are, they are retried without
// using up the retry limit, so they never end in a false UpdateStatusFailed Event, an error or a warning.
func TestConflictIsRetriedQuietly(t *testing.T) {
	for name, n := range map[string]int{
		"two conflicts":             2,
		"more than the retry limit": 3 * (pipeline.DefaultMaxRetries + 1),
	} {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			e := newEnvLogged(t, staticOptions(), zap.New(core), ingress("web"))
			e.setFail(conflictsFirst(n))
			e.accept("web")
			// Retries wait for their delay on the fake clock.
			moduletest.Eventually(t, "the status after the conflicts", func() bool {
				e.clock.Step(time.Second)
				return reflect.DeepEqual(e.status("web"), []status.Address{ip("192.0.2.1"), ip("192.0.2.2")})
			})
			if got := value(t, e.leader.m.updates.WithLabelValues("conflict")); got != float64(n) {
				t.Errorf("conflicts counted = %v, want %d", got, n)
			}
			if got := value(t, e.leader.m.updates.WithLabelValues("error")); got != 0 {
				t.Errorf("errors counted = %v for conflicts, want 0", got)
			}
			select {
			case ev := <-e.recorder.Events:
				t.Errorf("conflicts produced an Event: %s", ev)
			default:
			}
			for _, l := range logs.All() {
				if l.Level >= zap.WarnLevel {
					t.Errorf("conflicts were logged as a problem: %s %q", l.Level, l.Message)
				}
			}
		})
	}
}

func TestPersistentFailureEmitsWarningEvent(t *testing.T) {
	unavailable := func(string) error { return apierrors.NewServiceUnavailable("apiserver restarting") }
	tests := map[string]struct {
		failPatch, failGet func(name string) error
		wantCause          string
	}{
		"the write fails": {
			failPatch: func(string) error {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "ingresses"}, "web", errors.New("RBAC"))
			},
			wantCause: "RBAC",
		},
		// The Get returns no Ingress then; the error still names the one it read.
		"the re-read after a conflict fails": {
			failPatch: conflictsFirst(math.MaxInt),
			failGet:   unavailable,
			wantCause: "get ingress apps/web: apiserver restarting",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, staticOptions(), ingress("web"))
			e.setFail(tc.failPatch)
			e.setFailGet(tc.failGet)
			e.accept("web")
			var ev string
			// Retries wait for their backoff on the fake clock.
			moduletest.Eventually(t, "a Warning Event once the retries are exhausted", func() bool {
				e.clock.Step(time.Minute)
				select {
				case ev = <-e.recorder.Events:
					return true
				default:
					return false
				}
			})
			if !strings.Contains(ev, "Warning "+ReasonUpdateStatusFailed) || !strings.Contains(ev, tc.wantCause) {
				t.Errorf("event = %q, want a Warning %s naming the cause %q", ev, ReasonUpdateStatusFailed, tc.wantCause)
			}
			// At least the first attempt and every retry (periodic re-checks on the stepped clock add more).
			if got := value(t, e.leader.m.updates.WithLabelValues("error")); got < float64(pipeline.DefaultMaxRetries+1) {
				t.Errorf("errors counted = %v, want at least %d", got, pipeline.DefaultMaxRetries+1)
			}
			e.setFailGet(nil)
			if got := e.status("web"); got != nil {
				t.Errorf("status = %v although every write failed", got)
			}
		})
	}
}

// electionOptions elect through the Lease ctlNS/ingress-reactor-leader as "self", with short timings.
func electionOptions() status.ElectionOptions {
	return status.ElectionOptions{
		Namespace: ctlNS, Name: "ingress-reactor-leader", Identity: "self",
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 50 * time.Millisecond,
	}
}

// leaseOfOther is a fresh Lease held by another replica for an hour.
func leaseOfOther() *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress-reactor-leader", Namespace: ctlNS},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("other"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
}

func TestOnlyTheLeaseHolderWrites(t *testing.T) {
	// Another replica holds a fresh Lease; this one must not write until it takes over.
	lease := leaseOfOther()
	opts := staticOptions()
	opts.Election = electionOptions()
	e := newEnv(t, opts, lease, ingress("web"))
	e.accept("web")
	moduletest.Eventually(t, "the ingress to be tracked", func() bool {
		e.leader.mu.Lock()
		defer e.leader.mu.Unlock()
		_, ok := e.leader.ours[key("web")]
		return ok
	})
	moduletest.Eventually(t, "the queue to drain", func() bool { return e.leader.ctrl.Queue().Len() == 0 })
	if e.leader.IsLeader() || e.metric(e.leader.m.leader) != 0 {
		t.Fatal("leads although another replica holds the Lease")
	}
	if n := e.patchCount("web"); n != 0 {
		t.Fatalf("a replica that does not lead wrote status %d times", n)
	}

	// The other replica releases the Lease (as it does when it stops): this one takes over and writes.
	lease.Spec.HolderIdentity = ptr.To("")
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](1)
	if _, err := e.client.CoordinationV1().Leases(ctlNS).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("web", ip("192.0.2.1"), ip("192.0.2.2"))
	if got := e.metric(e.leader.m.leader); got != 1 {
		t.Errorf("ingress_reactor_leader = %v while leading, want 1", got)
	}

	e.stop()
	l, err := e.client.CoordinationV1().Leases(ctlNS).Get(context.Background(), "ingress-reactor-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" {
		t.Errorf("Lease holder after Stop = %q, want it released", h)
	}
	if got := e.metric(e.leader.m.leader); got != 0 {
		t.Errorf("ingress_reactor_leader = %v after Stop, want 0", got)
	}
}

func controllerPod(name string, ready bool) *corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ctlNS, Labels: map[string]string{"app": "ingress-reactor"}},
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}},
	}
}

func withPhase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = phase
	return p
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p.Finalizers = []string{"test/keep"}
	return p
}

func TestShutdownClearsOnlyWhenLastReplica(t *testing.T) {
	tests := map[string]struct {
		onShutdown bool
		others     []runtime.Object
		wantClear  bool
	}{
		"last replica clears":                {onShutdown: true, wantClear: true},
		"another ready replica keeps status": {onShutdown: true, others: []runtime.Object{controllerPod("other", true)}},
		// A single replica being deleted, evicted or drained: its replacement exists but is not Ready yet.
		"an unready replica keeps status":        {onShutdown: true, others: []runtime.Object{controllerPod("other", false)}},
		"a pending replica keeps status":         {onShutdown: true, others: []runtime.Object{withPhase(controllerPod("other", false), corev1.PodPending)}},
		"a replica being deleted does not count": {onShutdown: true, others: []runtime.Object{terminating(controllerPod("other", true))}, wantClear: true},
		"an evicted replica does not count":      {onShutdown: true, others: []runtime.Object{withPhase(controllerPod("other", false), corev1.PodFailed)}, wantClear: true},
		"--update-status-on-shutdown=false":      {onShutdown: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := staticOptions()
			opts.UpdateOnShutdown = tc.onShutdown
			objs := append([]runtime.Object{controllerPod("self", true), ingress("web"), ingress("shared")}, tc.others...)
			e := newEnv(t, opts, objs...)
			e.accept("web")
			e.accept("shared")
			e.waitStatus("web", ip("192.0.2.1"), ip("192.0.2.2"))
			e.waitStatus("shared", ip("192.0.2.1"), ip("192.0.2.2"))
			// Another controller also publishes on "shared"; its entry must survive our shutdown.
			e.setStatus("shared", ip("192.0.2.1"), ip("192.0.2.2"), ip("198.51.100.9"))

			e.stop()
			if tc.wantClear {
				if got := e.status("web"); got != nil {
					t.Errorf("status of web after the last replica stopped = %v, want cleared", got)
				}
				if got := e.status("shared"); !reflect.DeepEqual(got, []status.Address{ip("198.51.100.9")}) {
					t.Errorf("status of shared after the last replica stopped = %v, want only the other controller's entry", got)
				}
			} else if got := e.status("web"); !reflect.DeepEqual(got, []status.Address{ip("192.0.2.1"), ip("192.0.2.2")}) {
				t.Errorf("status of web after stop = %v, want it kept", got)
			}
		})
	}
}

func TestShutdownOfAReplicaThatDoesNotLeadClearsNothing(t *testing.T) {
	// Another replica holds the Lease and keeps writing; this one must not take the addresses away, even
	// when it believes it is the last replica (its pod is the only one it sees).
	opts := staticOptions()
	opts.UpdateOnShutdown = true
	opts.Election = electionOptions()
	published := []status.Address{ip("192.0.2.1"), ip("192.0.2.2")}
	e := newEnv(t, opts, leaseOfOther(), controllerPod("self", true), ingress("web", published...))
	e.accept("web")
	moduletest.Eventually(t, "the ingress to be tracked and the addresses known", func() bool {
		e.leader.mu.Lock()
		defer e.leader.mu.Unlock()
		_, ok := e.leader.ours[key("web")]
		return ok && len(e.leader.published) > 0
	})
	if e.leader.IsLeader() {
		t.Fatal("leads although another replica holds the Lease")
	}
	e.stop()
	if got := e.status("web"); !reflect.DeepEqual(got, published) {
		t.Errorf("status after a replica that does not lead stopped = %v, want %v kept", status.String(got), status.String(published))
	}
}

func TestLeadershipThatEndedBeforeItWasTakenUpIsIgnored(t *testing.T) {
	// client-go runs OnStartedLeading on a goroutine of its own; when the campaign ends at once, that
	// goroutine may run only after OnStoppedLeading, with a context that is already cancelled.
	opts := staticOptions()
	opts.Election = electionOptions() // never run: this replica does not lead
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts.Clock = clk
	client := fake.NewClientset()
	changes := pipeline.NewTopic[modules.IngressChange]("ingress-changes")
	l, err := New(Params{
		Options: opts, Client: client, Factory: informers.NewSharedInformerFactory(client, 0), IngressChanges: changes,
		Metrics: pipeline.NewMetrics(nil), Registry: prometheus.NewRegistry(), Log: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	q := l.ctrl.Queue()
	t.Cleanup(func() { q.ShutDown(); changes.Close() })
	l.refreshAddresses()
	l.mu.Lock()
	l.ours[key("web")] = struct{}{}
	l.mu.Unlock()

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	l.stoppedLeading()
	l.startedLeading(ended)
	if got := value(t, l.m.leader); got != 0 {
		t.Errorf("ingress_reactor_leader = %v after leadership ended, want 0", got)
	}
	if n := q.Len(); n != 0 {
		t.Errorf("%d Ingresses queued for a leadership that had ended", n)
	}

	// Between client-go's cancel and OnStoppedLeading the leader context is set but cancelled: that is
	// not leading, and nothing is re-queued to wait for it.
	l.mu.Lock()
	l.leaderCtx = ended
	l.mu.Unlock()
	if err := l.sync(context.Background(), key("web")); err != nil {
		t.Fatalf("sync: %v", err)
	}
	// A re-queue would wait one retry period; a marker queued after it with the same delay is not ready
	// before it, so once the marker is out, a re-queued key is too.
	marker := key("marker")
	q.AddAfter(marker, opts.Election.RetryPeriod)
	var got []types.NamespacedName
	moduletest.Eventually(t, "the marker", func() bool {
		clk.Step(opts.Election.RetryPeriod)
		for q.Len() > 0 {
			k, _ := q.Get()
			q.Finish(k, nil)
			got = append(got, k)
		}
		return len(got) > 0 && got[len(got)-1] == marker
	})
	if !reflect.DeepEqual(got, []types.NamespacedName{marker}) {
		t.Errorf("queued after sync = %v, want only the marker: a replica that does not lead re-queued the Ingress", got)
	}
}

func TestOwnTerminatingPodKeepsPublishingItsNode(t *testing.T) {
	// A single replica during its grace period (preStop, draining): it still serves on its node, so the
	// node's address stays published, with or without --update-status-on-shutdown.
	opts := staticOptions()
	opts.Discovery = status.DiscoveryOptions{Pod: types.NamespacedName{Namespace: ctlNS, Name: "self"}}
	n1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.1"}}}}
	n2 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.2"}}}}
	e := newEnv(t, opts, controllerPod("self", true), n1, n2, ingress("web"))
	e.accept("web")
	e.waitStatus("web", ip("203.0.113.1"))

	self, err := e.client.CoreV1().Pods(ctlNS).Get(context.Background(), "self", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	self = terminating(self)
	self.ResourceVersion = "2"
	if _, err := e.client.CoreV1().Pods(ctlNS).Update(context.Background(), self, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The replacement starts on n2. Discovery sees the pods in order, so once n2 is published the
	// terminating pod has been seen too, and its node must still be there.
	b := controllerPod("b", false)
	b.Spec.NodeName = "n2"
	if _, err := e.client.CoreV1().Pods(ctlNS).Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("web", ip("203.0.113.1"), ip("203.0.113.2"))
}

func TestNoAddressSourceIsLoggedOnce(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	opts := staticOptions()
	opts.Discovery = status.DiscoveryOptions{Pod: types.NamespacedName{Namespace: ctlNS}} // outside a pod, no flag
	e := newEnvLogged(t, opts, zap.New(core), ingress("web", ip("203.0.113.1")))
	e.accept("web")
	moduletest.Eventually(t, "the leader to report the missing source", func() bool {
		_, err := e.leader.Addresses()
		return errors.Is(err, status.ErrNoPod)
	})
	for range 3 {
		e.leader.refreshAddresses() // as the periodic re-check does
	}
	warnings := logs.FilterMessageSnippet("cannot determine the addresses").All()
	if len(warnings) != 1 {
		t.Fatalf("%d warnings about the addresses, want exactly 1: %v", len(warnings), warnings)
	}
	if msg := fmt.Sprint(warnings[0].ContextMap()["error"]); !strings.Contains(msg, "no status address source") {
		t.Errorf("warning says %q; want it to say that no status address source is available", msg)
	}
	if got := e.status("web"); !reflect.DeepEqual(got, []status.Address{ip("203.0.113.1")}) {
		t.Errorf("status = %v without an address source, want it left alone", got)
	}
}
