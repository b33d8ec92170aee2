package status

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// startDiscovery starts d with an OnChange that signals changes, and waits for its caches.
func startDiscovery(t *testing.T, d *Discovery) <-chan struct{} {
	t.Helper()
	changed := make(chan struct{}, 100)
	if err := d.OnChange(func() { changed <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); d.Shutdown() })
	d.Start(stop)
	waitFor(t, "discovery caches to sync", d.HasSynced)
	return changed
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitAddresses polls d.Addresses until it returns want without error.
func waitAddresses(t *testing.T, d *Discovery, want []Address) {
	t.Helper()
	var got []Address
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err = d.Addresses()
		if err == nil && reflect.DeepEqual(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Addresses = %v, %v; want %v", String(got), err, String(want))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDiscoveryPrecedence(t *testing.T) {
	static := []Address{ip("192.0.2.1")}
	svc := types.NamespacedName{Namespace: testNamespace, Name: "lb"}
	self := types.NamespacedName{Namespace: testNamespace, Name: "self"}
	tests := map[string]struct {
		opts DiscoveryOptions
		want Source
	}{
		"static wins":            {opts: DiscoveryOptions{Static: static, PublishService: svc, Pod: self}, want: SourceStatic},
		"service before nodes":   {opts: DiscoveryOptions{PublishService: svc, Pod: self}, want: SourceService},
		"nodes by default":       {opts: DiscoveryOptions{Pod: self}, want: SourceNodes},
		"nodes even without pod": {opts: DiscoveryOptions{}, want: SourceNodes},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := NewDiscovery(fake.NewClientset(), tc.opts).Source(); got != tc.want {
				t.Errorf("Source = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDiscoveryStaticWatchesNothing(t *testing.T) {
	client := fake.NewClientset()
	d := NewDiscovery(client, DiscoveryOptions{Static: []Address{host("lb.example"), ip("192.0.2.1")}})
	startDiscovery(t, d)
	waitAddresses(t, d, []Address{ip("192.0.2.1"), host("lb.example")})
	if n := len(client.Actions()); n != 0 {
		t.Errorf("static addresses made %d API calls: %v", n, client.Actions())
	}
}

func TestDiscoveryFollowsThePublishService(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	d := NewDiscovery(client, DiscoveryOptions{PublishService: types.NamespacedName{Namespace: testNamespace, Name: "lb"}})
	changed := startDiscovery(t, d)

	if _, err := d.Addresses(); !errors.Is(err, ErrNoPublishService) {
		t.Fatalf("Addresses without the Service: error %v, want ErrNoPublishService", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: testNamespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	svc, err := client.CoreV1().Services(testNamespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed)
	waitAddresses(t, d, nil) // pending load balancer: an answer, not an error

	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.5"}}
	svc.ResourceVersion = "2"
	if _, err := client.CoreV1().Services(testNamespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed)
	waitAddresses(t, d, []Address{ip("203.0.113.5")})

	// Another Service in the namespace is not the published one.
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: testNamespace}, Spec: corev1.ServiceSpec{ExternalIPs: []string{"198.51.100.1"}}}
	if _, err := client.CoreV1().Services(testNamespace).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAddresses(t, d, []Address{ip("203.0.113.5")})
}

func TestDiscoveryFollowsControllerNodes(t *testing.T) {
	ctx := context.Background()
	self := pod("self", "n1")
	client := fake.NewClientset(self, node("n1", "ExternalIP=203.0.113.1"), node("n2", "InternalIP=10.0.0.2"),
		pod("web", "n2", withLabels(map[string]string{"app": "web"})))
	d := NewDiscovery(client, DiscoveryOptions{Pod: types.NamespacedName{Namespace: testNamespace, Name: "self"}})
	changed := startDiscovery(t, d)
	waitAddresses(t, d, []Address{ip("203.0.113.1")})
	drain(changed)

	// A second replica starts on n2.
	if _, err := client.CoreV1().Pods(testNamespace).Create(ctx, pod("b", "n2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed)
	waitAddresses(t, d, []Address{ip("10.0.0.2"), ip("203.0.113.1")})

	// n2 gets an external address.
	n2 := node("n2", "InternalIP=10.0.0.2", "ExternalIP=203.0.113.2")
	n2.ResourceVersion = "9"
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed)
	waitAddresses(t, d, []Address{ip("203.0.113.1"), ip("203.0.113.2")})

	// The second replica goes away.
	if err := client.CoreV1().Pods(testNamespace).Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changed)
	waitAddresses(t, d, []Address{ip("203.0.113.1")})
}

func TestDiscoveryWithoutOwnPodIsAnError(t *testing.T) {
	for name, pod := range map[string]types.NamespacedName{
		"POD_NAME unset":  {Namespace: testNamespace},
		"pod not present": {Namespace: testNamespace, Name: "missing"},
	} {
		t.Run(name, func(t *testing.T) {
			d := NewDiscovery(fake.NewClientset(), DiscoveryOptions{Pod: pod})
			startDiscovery(t, d)
			if _, err := d.Addresses(); !errors.Is(err, ErrNoPod) {
				t.Errorf("Addresses error = %v, want ErrNoPod (an empty list would clear every Ingress)", err)
			}
		})
	}
}

func TestDiscoveryOutsideAPodWatchesNothing(t *testing.T) {
	client := fake.NewClientset(pod("self", "n1"), node("n1", "ExternalIP=203.0.113.1"))
	d := NewDiscovery(client, DiscoveryOptions{Pod: types.NamespacedName{Namespace: testNamespace}})
	startDiscovery(t, d)
	if _, err := d.Addresses(); !errors.Is(err, ErrNoPod) || !strings.Contains(err.Error(), "no status address source") {
		t.Errorf("Addresses error = %v, want ErrNoPod saying that no address source is available", err)
	}
	// Started informers would have listed by now: HasSynced waits for their first list.
	if n := len(client.Actions()); n != 0 {
		t.Errorf("discovery without POD_NAME made %d API calls (it cannot use their answers): %v", n, client.Actions())
	}
}

func TestDiscoveryKeepsOwnTerminatingPod(t *testing.T) {
	// A single replica in its grace period: its pod is being deleted but it still serves on n1.
	client := fake.NewClientset(pod("self", "n1", terminating()), node("n1", "ExternalIP=203.0.113.1"))
	d := NewDiscovery(client, DiscoveryOptions{Pod: types.NamespacedName{Namespace: testNamespace, Name: "self"}})
	startDiscovery(t, d)
	waitAddresses(t, d, []Address{ip("203.0.113.1")})
}

func TestDiscoveryWithoutNodeAddressesIsAnError(t *testing.T) {
	client := fake.NewClientset(pod("self", "n1"), node("n1"))
	d := NewDiscovery(client, DiscoveryOptions{Pod: types.NamespacedName{Namespace: testNamespace, Name: "self"}})
	startDiscovery(t, d)
	if addrs, err := d.Addresses(); !errors.Is(err, ErrNoNodeAddresses) {
		t.Errorf("Addresses = %v, %v; want ErrNoNodeAddresses (an empty list would clear every Ingress)", String(addrs), err)
	}
}

func TestMinimalTransformKeepsWhatDiscoveryReads(t *testing.T) {
	full := pod("self", "n1", terminating())
	full.Spec.Containers = []corev1.Container{{Name: "c", Image: "img"}}
	full.Annotations = map[string]string{"big": "value"}
	out, err := minimalTransform(full)
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*corev1.Pod)
	if len(p.Spec.Containers) != 0 || p.Annotations != nil {
		t.Errorf("transform kept fields discovery does not read: %+v", p)
	}
	if p.Spec.NodeName != "n1" || p.DeletionTimestamp == nil || !reflect.DeepEqual(p.Labels, full.Labels) ||
		p.Status.Phase != corev1.PodRunning || len(p.Status.Conditions) != 1 {
		t.Errorf("transform dropped a field discovery reads: %+v", p)
	}
	n := node("n1", "ExternalIP=203.0.113.1")
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"img"}}}
	out, _ = minimalTransform(n)
	if got := out.(*corev1.Node); len(got.Status.Images) != 0 || !reflect.DeepEqual(got.Status.Addresses, n.Status.Addresses) {
		t.Errorf("node transform = %+v", got)
	}
	var obj runtime.Object = &corev1.ConfigMap{}
	if out, _ := minimalTransform(obj); out != obj {
		t.Error("transform changed an object of another type")
	}
}

func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// waitChange waits up to 10 seconds for an OnChange call.
func waitChange(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for OnChange")
	}
}
