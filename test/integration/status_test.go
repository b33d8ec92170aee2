//go:build integration

package integration

import (
	"context"
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// Election timings short enough for a test; they satisfy lease > renew deadline > 1.2 x retry period.
const (
	statusLease       = 3 * time.Second
	statusRenew       = 2 * time.Second
	statusRetry       = 500 * time.Millisecond
	statusLeaderGauge = "ingress_reactor_leader"
	statusUpdates     = "ingress_reactor_status_updates_total"
)

// statusPublished is what --publish-status-address below publishes, as the API returns it (sorted: IPs
// first, in address order, then hostnames).
var statusPublished = []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.7"}, {IP: "203.0.113.10"}, {Hostname: "lb.status.example"}}

// statusArgs turn status writing on (the harness turns it off by default) with short election timings;
// extra come last and win.
func statusArgs(extra ...string) []string {
	return append([]string{
		"--update-status=true",
		"--publish-status-address=lb.status.example,203.0.113.10,203.0.113.7,203.0.113.10",
		"--election-lease-duration=" + statusLease.String(),
		"--election-renew-deadline=" + statusRenew.String(),
		"--election-retry-period=" + statusRetry.String(),
		"--status-update-interval=2s",
	}, extra...)
}

// ingressStatus returns the Ingress's status.loadBalancer.ingress from the API server.
func ingressStatus(f *harness.Fixture, name string) ([]networkingv1.IngressLoadBalancerIngress, error) {
	ing, err := f.Client.NetworkingV1().Ingresses(f.Namespace).Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return ing.Status.LoadBalancer.Ingress, nil
}

// waitIngressStatus waits until the Ingress's status equals want (nil: no entries).
func waitIngressStatus(t *testing.T, f *harness.Fixture, name string, want []networkingv1.IngressLoadBalancerIngress) {
	t.Helper()
	harness.Eventually(t, harness.DefaultTimeout, fmt.Sprintf("status of Ingress %s to be %v", name, want), func() (bool, string) {
		got, err := ingressStatus(f, name)
		if err != nil {
			return false, err.Error()
		}
		return reflect.DeepEqual(got, want) || len(got) == 0 && len(want) == 0, fmt.Sprintf("%v", got)
	})
}

// setIngressStatus overwrites an Ingress's status as another writer would.
func setIngressStatus(t *testing.T, f *harness.Fixture, name string, addrs []networkingv1.IngressLoadBalancerIngress) {
	t.Helper()
	api := f.Client.NetworkingV1().Ingresses(f.Namespace)
	ing, err := api.Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = addrs
	if _, err := api.UpdateStatus(f.Ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("overwrite status of %s: %v", name, err)
	}
}

// leaderState scrapes one reactor: whether it leads, its identity, and how many status writes succeeded.
func leaderState(r *harness.Reactor) (leading bool, identity string, writes float64, err error) {
	m, err := r.Metrics()
	if err != nil {
		return false, "", 0, err
	}
	fam := m[statusLeaderGauge]
	if fam == nil || len(fam.Metric) != 1 {
		return false, "", 0, fmt.Errorf("no single %s sample: %s", statusLeaderGauge, m.Describe(statusLeaderGauge))
	}
	for _, l := range fam.Metric[0].Label {
		if l.GetName() == "identity" {
			identity = l.GetValue()
		}
	}
	writes, _ = m.Value(statusUpdates, map[string]string{"result": "success"})
	return fam.Metric[0].GetGauge().GetValue() == 1, identity, writes, nil
}

// waitOneLeader waits until exactly one of rs leads and returns it, failing if two ever lead at once.
func waitOneLeader(t *testing.T, timeout time.Duration, rs ...*harness.Reactor) *harness.Reactor {
	t.Helper()
	var leader *harness.Reactor
	harness.Eventually(t, timeout, "exactly one leader", func() (bool, string) {
		leader = nil
		n := 0
		seen := ""
		for _, r := range rs {
			leading, id, _, err := leaderState(r)
			if err != nil {
				return false, err.Error()
			}
			seen += fmt.Sprintf("%s=%v ", id, leading)
			if leading {
				leader = r
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%d replicas lead at once: %s", n, seen)
		}
		return n == 1, seen
	})
	return leader
}

func leaseHolder(f *harness.Fixture, name string) (string, error) {
	l, err := f.Client.CoordinationV1().Leases(f.Namespace).Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return holderOf(l), nil
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestStatusOneLeaderWritesAndTakeoverAfterSIGKILL: two replicas with one election id: exactly one leads
// and writes the --publish-status-address addresses (sorted, de-duplicated); when the leader is killed
// (SIGKILL, no release of the Lease) the other takes over once the Lease expires and keeps every status
// current: new Ingresses, and an overwritten status restored.
func TestStatusOneLeaderWritesAndTakeoverAfterSIGKILL(t *testing.T) {
	f := harness.New(t)
	f.CreateIngress(f.Ingress("web", "web.status.example", harness.IngressBackend{Service: "svc", Port: 80}))
	other := f.Ingress("foreign", "foreign.status.example", harness.IngressBackend{Service: "svc", Port: 80})
	otherClass := "someone-elses"
	other.Spec.IngressClassName = &otherClass
	f.CreateIngress(other)

	a := f.StartReactor(statusArgs()...)
	b := f.StartReactor(statusArgs()...)
	a.WaitReady()
	b.WaitReady()

	waitIngressStatus(t, f, "web", statusPublished)
	leader := waitOneLeader(t, harness.DefaultTimeout, a, b)
	follower := a
	if leader == a {
		follower = b
	}
	_, leaderID, _, err := leaderState(leader)
	if err != nil {
		t.Fatal(err)
	}
	electionID := "ingress-reactor-" + f.ID // the harness's --election-id
	if h, err := leaseHolder(f, electionID); err != nil || h != leaderID {
		t.Errorf("Lease %s holder = %q (%v), want the leader's identity %q", electionID, h, err, leaderID)
	}
	if _, _, writes, err := leaderState(follower); err != nil || writes != 0 {
		t.Errorf("the replica that does not lead wrote status %v times (%v)", writes, err)
	}
	if got, _ := ingressStatus(f, "foreign"); len(got) != 0 {
		t.Errorf("an Ingress of another class got status %v", got)
	}

	// Kill the leader's whole process group, as when its pod dies: no Lease release.
	killed := time.Now()
	if err := syscall.Kill(-leader.Pid(), syscall.SIGKILL); err != nil {
		t.Fatalf("kill the leader: %v", err)
	}
	leader.Wait(t, harness.StopTimeout)

	// The follower may take over only after the Lease expires, which it measures from the moment it
	// observed the last renewal and notices at its next attempt (attempts come every retry period plus up
	// to 120 % jitter): at most a lease duration plus 2 x 2.2 retry periods after the kill. The bound
	// below adds slack for a loaded machine; the measured time is logged.
	takeoverBound := statusLease + 5*statusRetry + 10*time.Second
	harness.Eventually(t, takeoverBound, "the follower to take over", func() (bool, string) {
		leading, id, _, err := leaderState(follower)
		if err != nil {
			return false, err.Error()
		}
		return leading, fmt.Sprintf("%s leading=%v", id, leading)
	})
	t.Logf("takeover %s after SIGKILL of the leader (lease duration %s, retry period %s)", time.Since(killed).Round(10*time.Millisecond), statusLease, statusRetry)
	_, followerID, _, _ := leaderState(follower)
	if h, err := leaseHolder(f, electionID); err != nil || h != followerID {
		t.Errorf("Lease holder after takeover = %q (%v), want %q", h, err, followerID)
	}

	// The new leader keeps status current: a new Ingress, and a status someone overwrote.
	f.CreateIngress(f.Ingress("api", "api.status.example", harness.IngressBackend{Service: "svc", Port: 80}))
	waitIngressStatus(t, f, "api", statusPublished)
	setIngressStatus(t, f, "web", []networkingv1.IngressLoadBalancerIngress{{IP: "198.51.100.66"}})
	waitIngressStatus(t, f, "web", statusPublished)
	if _, _, writes, err := leaderState(follower); err != nil || writes < 2 {
		t.Errorf("new leader counted %v successful writes (%v), want at least 2", writes, err)
	}
}

// TestStatusClearedWhenIngressLeavesOurClass: an Ingress moved to another class loses the addresses we
// published, and keeps what another controller wrote; moved back, it gets them again.
func TestStatusClearedWhenIngressLeavesOurClass(t *testing.T) {
	f := harness.New(t)
	f.CreateIngress(f.Ingress("web", "web.status.example", harness.IngressBackend{Service: "svc", Port: 80}))
	r := f.StartReactor(statusArgs()...)
	r.WaitReady()
	waitIngressStatus(t, f, "web", statusPublished)

	// Another controller claims it and writes its own address next to ours; then the class changes.
	theirs := networkingv1.IngressLoadBalancerIngress{IP: "198.51.100.20"}
	setIngressStatus(t, f, "web", append([]networkingv1.IngressLoadBalancerIngress{theirs}, statusPublished...))
	otherClass := "someone-elses"
	f.UpdateIngress("web", func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = &otherClass })
	waitIngressStatus(t, f, "web", []networkingv1.IngressLoadBalancerIngress{theirs})

	f.UpdateIngress("web", func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = &f.IngressClass })
	waitIngressStatus(t, f, "web", statusPublished)
}

// statusControllerPod creates a pod object that stands for a controller replica (nothing runs it: there
// is no kubelet) and sets its status: running on node, ready or not.
func statusControllerPod(t *testing.T, f *harness.Fixture, name, node string, ready bool) {
	t.Helper()
	pods := f.Client.CoreV1().Pods(f.Namespace)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace, Labels: map[string]string{
			"app.kubernetes.io/name": "ingress-reactor", "pod-template-hash": name,
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "controller", Image: "ingress-reactor"}}},
	}
	p, err := pods.Create(f.Ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	setPodReady(t, f, p, ready)
}

func setPodReady(t *testing.T, f *harness.Fixture, p *corev1.Pod, ready bool) {
	t.Helper()
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond, LastTransitionTime: metav1.Now()}}
	if _, err := f.Client.CoreV1().Pods(f.Namespace).UpdateStatus(f.Ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set status of pod %s: %v", p.Name, err)
	}
}

// TestStatusShutdownClearsOnlyOnLastReplica: with --update-status-on-shutdown, a replica that stops while
// another replica exists leaves the status alone, even when that one is not Ready yet (the replacement of
// a single replica that is deleted or evicted); the last one clears it.
func TestStatusShutdownClearsOnlyOnLastReplica(t *testing.T) {
	f := harness.New(t)
	self := "ingress-reactor-" + f.ID // the harness's POD_NAME
	statusControllerPod(t, f, self, "", true)
	statusControllerPod(t, f, self+"-other", "", false)
	f.CreateIngress(f.Ingress("web", "web.status.example", harness.IngressBackend{Service: "svc", Port: 80}))

	r := f.StartReactor(statusArgs("--update-status-on-shutdown=true")...)
	r.WaitReady()
	waitIngressStatus(t, f, "web", statusPublished)
	if code := r.Stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if got, err := ingressStatus(f, "web"); err != nil || !reflect.DeepEqual(got, statusPublished) {
		t.Errorf("status after a replica stopped while another, not yet ready, exists = %v (%v), want it kept", got, err)
	}

	// Unscheduled, the other pod goes at once (no kubelet to wait for).
	if err := f.Client.CoreV1().Pods(f.Namespace).Delete(f.Ctx, self+"-other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r = f.StartReactor(statusArgs("--update-status-on-shutdown=true")...)
	r.WaitReady()
	r.WaitMetric(statusLeaderGauge, nil, "== 1", func(v float64) bool { return v == 1 })
	if code := r.Stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	// Cleared before the process exited: no waiting.
	if got, err := ingressStatus(f, "web"); err != nil || len(got) != 0 {
		t.Errorf("status after the last replica stopped = %v (%v), want it cleared", got, err)
	}
}

// TestStatusPublishesNodesOfControllerPods: without an address flag, the addresses of the nodes that run
// the controller's pods (found by the labels of its own pod) are published: ExternalIP, else InternalIP.
// A replica that appears on another node adds that node's address. The controller's own pod keeps its
// node published while it is being deleted (it still serves until the process exits); a replica being
// deleted does not.
func TestStatusPublishesNodesOfControllerPods(t *testing.T) {
	f := harness.New(t)
	n1, n2 := "it-"+f.ID+"-n1", "it-"+f.ID+"-n2"
	statusNode(t, f, n1, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.1.0.1"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.51"})
	statusNode(t, f, n2, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.1.0.2"})
	self := "ingress-reactor-" + f.ID
	statusControllerPod(t, f, self, n1, true)
	f.CreateIngress(f.Ingress("web", "web.status.example", harness.IngressBackend{Service: "svc", Port: 80}))

	r := f.StartReactor("--update-status=true", "--status-update-interval=1m",
		"--election-lease-duration=3s", "--election-renew-deadline=2s", "--election-retry-period=500ms")
	r.WaitReady()
	waitIngressStatus(t, f, "web", []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.51"}})

	statusControllerPod(t, f, self+"-b", n2, false) // unready replicas still publish their node
	waitIngressStatus(t, f, "web", []networkingv1.IngressLoadBalancerIngress{{IP: "10.1.0.2"}, {IP: "203.0.113.51"}})

	// Both pods are bound to a node, so deleting them only marks them (no kubelet finishes the deletion):
	// the grace period of a real pod. Afterwards only the controller's own node is left; before, an
	// empty list was published here.
	for _, name := range []string{self, self + "-b"} {
		if err := f.Client.CoreV1().Pods(f.Namespace).Delete(f.Ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitIngressStatus(t, f, "web", []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.51"}})
}

// TestStatusFollowsPublishService: with --publish-service, the Service's load-balancer addresses are
// published, or its external IPs while it has none; a change is published without waiting for the
// periodic re-check.
func TestStatusFollowsPublishService(t *testing.T) {
	f := harness.New(t)
	svcs := f.Client.CoreV1().Services(f.Namespace)
	svc, err := svcs.Create(f.Ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: f.Namespace},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ExternalIPs: []string{"198.51.100.30"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.CreateIngress(f.Ingress("web", "web.status.example", harness.IngressBackend{Service: "svc", Port: 80}))
	r := f.StartReactor("--update-status=true", "--status-update-interval=10m", "--publish-service="+f.Namespace+"/edge",
		"--election-lease-duration=3s", "--election-renew-deadline=2s", "--election-retry-period=500ms")
	r.WaitReady()
	waitIngressStatus(t, f, "web", []networkingv1.IngressLoadBalancerIngress{{IP: "198.51.100.30"}})

	ctx, cancel := context.WithTimeout(f.Ctx, 30*time.Second)
	defer cancel()
	svc.Spec.ExternalIPs = []string{"198.51.100.31", "198.51.100.30"}
	if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIngressStatus(t, f, "web", []networkingv1.IngressLoadBalancerIngress{{IP: "198.51.100.30"}, {IP: "198.51.100.31"}})
}

// statusNode creates a cluster-scoped Node with the given addresses, removed when the test ends.
func statusNode(t *testing.T, f *harness.Fixture, name string, addrs ...corev1.NodeAddress) {
	t.Helper()
	nodes := f.Client.CoreV1().Nodes()
	n, err := nodes.Create(f.Ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = nodes.Delete(ctx, name, metav1.DeleteOptions{})
	})
	n.Status.Addresses = addrs
	if _, err := nodes.UpdateStatus(f.Ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set addresses of node %s: %v", name, err)
	}
}
