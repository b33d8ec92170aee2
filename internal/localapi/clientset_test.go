package localapi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// localWaitLimit bounds every wait below, so a lost event fails the test with a message instead of hanging
// it. Passing tests never come near it; it is not a speed claim.
const localWaitLimit = time.Minute

// watchedCache is a running informer on one resource of a Clientset; changed is signalled after
// every event the informer handles.
type watchedCache struct {
	informer cache.SharedIndexInformer
	changed  chan struct{}
	// shutdown stops the informer's factory and waits for its goroutines.
	shutdown func()
}

func startServiceCache(t *testing.T, cs *Clientset, ns string) *watchedCache {
	t.Helper()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	return startCache(t, f, f.Core().V1().Services().Informer())
}

func startCache(t *testing.T, f informers.SharedInformerFactory, inf cache.SharedIndexInformer) *watchedCache {
	t.Helper()
	c := &watchedCache{informer: inf, changed: make(chan struct{}, 1)}
	signal := func() {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	f.Start(stop)
	c.shutdown = sync.OnceFunc(func() { close(stop); f.Shutdown() })
	t.Cleanup(c.shutdown)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return c
}

// waitFor returns once cond holds, checking after every informer event.
func (c *watchedCache) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	limit := time.NewTimer(localWaitLimit)
	defer limit.Stop()
	for !cond() {
		select {
		case <-c.changed:
		case <-limit.C:
			t.Fatalf("the informer never reached: %s (cache holds %d objects)", what, len(c.informer.GetStore().ListKeys()))
		}
	}
}

// nextEvents reads n events from w.
func nextEvents(t *testing.T, w watch.Interface, n int) []watch.Event {
	t.Helper()
	limit := time.NewTimer(localWaitLimit)
	defer limit.Stop()
	out := make([]watch.Event, 0, n)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %d of %d events", len(out), n)
			}
			out = append(out, ev)
		case <-limit.C:
			t.Fatalf("watch delivered %d of %d events", len(out), n)
		}
	}
	return out
}

// watchServices starts a watch of the Services in ns ("" for all) from resourceVersion rv, stopped at
// the test's end.
func watchServices(t *testing.T, cs *Clientset, ns, rv string) watch.Interface {
	t.Helper()
	w, err := cs.CoreV1().Services(ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func describe(ev watch.Event) string {
	if s, ok := ev.Object.(*metav1.Status); ok {
		return fmt.Sprintf("%s %s", ev.Type, s.Reason)
	}
	m := ev.Object.(metav1.Object)
	return fmt.Sprintf("%s %s/%s", ev.Type, m.GetNamespace(), m.GetName())
}

func rvOf(t *testing.T, obj runtime.Object) int64 {
	t.Helper()
	rv, err := strconv.ParseInt(obj.(metav1.Object).GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion of %T: %v", obj, err)
	}
	return rv
}

func service(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: port}}},
	}
}

func servicesYAML(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: ns-%d}\nspec:\n  ports: [{port: %d}]\n", i, i%3, 1000+i)
	}
	return b.String()
}

func listRV(t *testing.T, cs *Clientset) string {
	t.Helper()
	list, err := cs.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.ResourceVersion
}

// The reported crash: a file with hundreds of objects loaded and then deleted. The fake clientset's own
// watchers panicked ("channel full") once a watch was 100 events behind. Here a raw watch that nobody reads
// until the end stands for the slowest possible reader.
func TestLocalManifestsLargeFileLoadedAndRemoved(t *testing.T) {
	const n = 300
	dir := t.TempDir()
	path := filepath.Join(dir, "many.yaml")
	writeFile(t, path, servicesYAML(n))
	cs := NewClientset()
	l := NewManifests(dir, cs, zaptest.NewLogger(t))
	c := startServiceCache(t, cs, "")
	unread := watchServices(t, cs, "", listRV(t, cs))

	l.Sync(path)
	c.waitFor(t, fmt.Sprintf("%d services after the load", n), func() bool { return len(c.informer.GetStore().ListKeys()) == n })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	l.Sync(path)
	c.waitFor(t, "no services after the file is removed", func() bool { return len(c.informer.GetStore().ListKeys()) == 0 })

	events := nextEvents(t, unread, 2*n)
	last := int64(0)
	for i, ev := range events {
		want := watch.Added
		if i >= n {
			want = watch.Deleted
		}
		if ev.Type != want {
			t.Fatalf("event %d: want %s, got %s", i, want, describe(ev))
		}
		if rv := rvOf(t, ev.Object); rv <= last {
			t.Fatalf("event %d (%s): resourceVersion %d does not follow %d", i, describe(ev), rv, last)
		} else {
			last = rv
		}
		// A deletion carries the object's last state.
		svc := ev.Object.(*corev1.Service)
		idx, _ := strconv.Atoi(strings.TrimPrefix(svc.Name, "svc-"))
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != int32(1000+idx) || svc.Namespace != fmt.Sprintf("ns-%d", idx%3) {
			t.Fatalf("event %d (%s): object is not the loaded one: %+v", i, describe(ev), svc.Spec.Ports)
		}
	}
}

// A burst of creates from several writers at once reaches an informer and a watch that is not read
// meanwhile, every object exactly once.
func TestLocalClientsetBurstOfAddsSeenCompletely(t *testing.T) {
	const writers, each = 8, 125
	cs := NewClientset()
	c := startServiceCache(t, cs, "")
	unread := watchServices(t, cs, "", listRV(t, cs))

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := cs.CoreV1().Services("burst").Create(context.Background(), service("burst", fmt.Sprintf("w%d-%d", w, i), 80), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.waitFor(t, "every created service", func() bool { return len(c.informer.GetStore().ListKeys()) == writers*each })

	seen := map[string]bool{}
	for _, ev := range nextEvents(t, unread, writers*each) {
		if ev.Type != watch.Added {
			t.Fatalf("want only ADDED, got %s", describe(ev))
		}
		name := ev.Object.(*corev1.Service).Name
		if seen[name] {
			t.Fatalf("%s delivered twice", name)
		}
		seen[name] = true
	}
}

// The controller writes through the typed clients in local mode (Ingress status, auto-ingress Ingresses,
// Events); informers see those writes, each with a new resourceVersion, and stale writes conflict as on
// a real API server.
func TestLocalClientsetTypedWritesReachInformers(t *testing.T) {
	ctx := context.Background()
	cs := NewClientset()
	f := informers.NewSharedInformerFactory(cs, 0)
	c := startCache(t, f, f.Networking().V1().Ingresses().Informer())
	lister := f.Networking().V1().Ingresses().Lister().Ingresses("demo")
	ingresses := cs.NetworkingV1().Ingresses("demo")
	cached := func() *networkingv1.Ingress {
		ing, err := lister.Get("web")
		if err != nil {
			return nil
		}
		return ing
	}

	created, err := ingresses.Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "uid-web"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, "the created Ingress", func() bool { return cached() != nil })
	if got := cached().ResourceVersion; got != created.ResourceVersion || got == "" {
		t.Fatalf("cached resourceVersion %q, Create returned %q", got, created.ResourceVersion)
	}

	withStatus := created.DeepCopy()
	withStatus.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
	updated, err := ingresses.UpdateStatus(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == created.ResourceVersion {
		t.Fatalf("UpdateStatus kept resourceVersion %s", created.ResourceVersion)
	}
	c.waitFor(t, "the status update", func() bool {
		ing := cached()
		return len(ing.Status.LoadBalancer.Ingress) == 1 && ing.Status.LoadBalancer.Ingress[0].IP == "192.0.2.10"
	})

	// An update or a patch from the old version conflicts and changes nothing.
	if _, err := ingresses.UpdateStatus(ctx, withStatus, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("UpdateStatus with a stale resourceVersion: want a conflict, got %v", err)
	}
	stalePatch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"labels":{"stale":"yes"}}}`, created.ResourceVersion)
	if _, err := ingresses.Patch(ctx, "web", types.MergePatchType, []byte(stalePatch), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("patch with a stale resourceVersion: want a conflict, got %v", err)
	}

	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"labels":{"owner":"auto"}}}`, updated.ResourceVersion)
	patched, err := ingresses.Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.ResourceVersion == updated.ResourceVersion || patched.Labels["owner"] != "auto" {
		t.Fatalf("patch returned resourceVersion %s (before %s), labels %v", patched.ResourceVersion, updated.ResourceVersion, patched.Labels)
	}
	c.waitFor(t, "the patched label", func() bool { return cached().Labels["owner"] == "auto" })
	if got := cached(); got.ResourceVersion != patched.ResourceVersion || got.Labels["stale"] != "" {
		t.Fatalf("cache holds resourceVersion %s labels %v; want %s without the stale label", got.ResourceVersion, got.Labels, patched.ResourceVersion)
	}

	// A Delete whose preconditions do not hold conflicts; one whose preconditions hold deletes.
	wrongUID := types.UID("other")
	if err := ingresses.Delete(ctx, "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with another UID: want a conflict, got %v", err)
	}
	uid, rv := patched.UID, patched.ResourceVersion
	if err := ingresses.Delete(ctx, "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, "the Ingress gone", func() bool { return cached() == nil })
	if _, err := ingresses.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after Delete: want not found, got %v", err)
	}
}

// A watch of one namespace sees that namespace's changes only; a watch of all namespaces sees every one.
func TestLocalClientsetWatchNamespaces(t *testing.T) {
	ctx := context.Background()
	cs := NewClientset()
	inA := watchServices(t, cs, "a", "")
	all := watchServices(t, cs, "", "")
	otherKind, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer otherKind.Stop()

	for _, s := range []*corev1.Service{service("b", "one", 80), service("b", "two", 80), service("a", "three", 80)} {
		if _, err := cs.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CoreV1().Services("b").Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Services("a").Delete(ctx, "three", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "marker"}}
	if _, err := cs.CoreV1().ConfigMaps("a").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Each watch's events come in order, so the first ones show what it skipped.
	assertEvents(t, "namespace a", nextEvents(t, inA, 2), "ADDED a/three", "DELETED a/three")
	assertEvents(t, "all namespaces", nextEvents(t, all, 5), "ADDED b/one", "ADDED b/two", "ADDED a/three", "DELETED b/one", "DELETED a/three")
	assertEvents(t, "configmaps", nextEvents(t, otherKind, 1), "ADDED a/marker")
}

func assertEvents(t *testing.T, what string, got []watch.Event, want ...string) {
	t.Helper()
	var desc []string
	for _, ev := range got {
		desc = append(desc, describe(ev))
	}
	if strings.Join(desc, ", ") != strings.Join(want, ", ") {
		t.Fatalf("%s: want %v, got %v", what, want, desc)
	}
}

// A watch from a resourceVersion gets exactly the changes after it, deletions included, which is what an
// informer needs between its List and its Watch; one from a version no longer kept gets Expired and ends.
func TestLocalClientsetWatchResumes(t *testing.T) {
	ctx := context.Background()
	cs := NewClientset()
	cs.store.historySize = 8 // what the test writes to push a version out of the history
	svcs := cs.CoreV1().Services("demo")
	if _, err := svcs.Create(ctx, service("demo", "old", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	from := listRV(t, cs)
	if _, err := svcs.Create(ctx, service("demo", "new", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := svcs.Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	resumed := watchServices(t, cs, "demo", from)
	assertEvents(t, "resumed watch", nextEvents(t, resumed, 2), "ADDED demo/new", "DELETED demo/old")

	fresh := watchServices(t, cs, "demo", "")
	assertEvents(t, "watch without resourceVersion", nextEvents(t, fresh, 1), "ADDED demo/new")

	for i := range cs.store.historySize {
		if _, err := cs.CoreV1().ConfigMaps("demo").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expired := watchServices(t, cs, "demo", from)
	ev := nextEvents(t, expired, 1)[0]
	if ev.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
		t.Fatalf("watch from a version no longer kept: want an Expired error, got %s", describe(ev))
	}
	if _, open := <-expired.ResultChan(); open {
		t.Fatal("watch from a version no longer kept stays open after its error")
	}
}

// Stop closes the result channel even with events queued, and the watcher leaves the store; an informer
// factory's Shutdown leaves no watcher behind.
func TestLocalClientsetWatchStop(t *testing.T) {
	ctx := context.Background()
	cs := NewClientset()
	w := watchServices(t, cs, "", "")
	for i := range 3 {
		if _, err := cs.CoreV1().Services("demo").Create(ctx, service("demo", fmt.Sprint(i), 80), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.Stop()
	w.Stop()
	if ev, open := <-w.ResultChan(); open {
		t.Fatalf("after Stop the watch still delivers: %s", describe(ev))
	}

	// Each informer's watch is running once it has seen an object created after its List.
	services := startServiceCache(t, cs, "")
	fi := informers.NewSharedInformerFactory(cs, 0)
	ingresses := startCache(t, fi, fi.Networking().V1().Ingresses().Informer())
	if _, err := cs.CoreV1().Services("demo").Create(ctx, service("demo", "late", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.NetworkingV1().Ingresses("demo").Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "late"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	services.waitFor(t, "the service created after the list", func() bool { return len(services.informer.GetStore().ListKeys()) == 4 })
	ingresses.waitFor(t, "the Ingress created after the list", func() bool { return len(ingresses.informer.GetStore().ListKeys()) == 1 })
	if n := watcherCount(cs); n != 2 {
		t.Fatalf("two running informers: want 2 watchers, got %d", n)
	}
	services.shutdown()
	ingresses.shutdown()
	if n := watcherCount(cs); n != 0 {
		t.Fatalf("after the factory's Shutdown: want no watchers, got %d", n)
	}
}

func watcherCount(cs *Clientset) int {
	cs.store.mu.RLock()
	defer cs.store.mu.RUnlock()
	n := 0
	for _, ws := range cs.store.watchers {
		n += len(ws)
	}
	return n
}
