package localapi

import (
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
)

// Clientset is local mode's in-process API: client-go's fake clientset made fit for a process that runs
// for hours. The fake's own watchers (watch.RaceFreeFakeWatcher) hold 100 events and panic when a writer
// gets further ahead of a reader than that, which loading or removing a large manifest file does. Here every
// write, whether through the typed clients or through Tracker(), goes through a localStore that hands out
// a new resourceVersion per change, tells every watcher through an unbounded per-watcher queue, and lets a
// watch resume from a recent resourceVersion as an API server does, so informers miss nothing between
// their List and their Watch. With real resourceVersions come the API server's optimistic lock: an update
// or patch naming an old resourceVersion, or a delete whose preconditions fail, conflicts. Storage, field
// management, patches and apply stay the fake's own; like the fake, watches ignore selectors.
type Clientset struct {
	*fake.Clientset
	store *localStore
}

// NewClientset returns an empty local API.
func NewClientset() *Clientset {
	cs := fake.NewClientset()
	store := newLocalStore(newFieldManagedTracker())
	// Prepended, so the fake's own reactors (which write to its tracker, left empty, and would feed its
	// bounded watchers) never run.
	cs.PrependReactor("*", "*", clienttesting.ObjectReaction(store))
	cs.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if a, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = a.ListOptions
		}
		w, err := store.Watch(action.GetResource(), action.GetNamespace(), opts)
		return true, w, err
	})
	return &Clientset{Clientset: cs, store: store}
}

// Tracker returns the object tracker behind the clientset; writes through it reach every watcher.
func (c *Clientset) Tracker() clienttesting.ObjectTracker { return c.store }

// localHistory is how many recent changes a watch can resume from. A watch from an older
// resourceVersion gets an Expired error, and an informer then lists again.
const localHistory = 4096

// localStore wraps the fake clientset's object tracker. The tracker keeps the objects; localStore keeps
// their resourceVersions (one counter for the whole API, as etcd has), the recent changes and the watchers.
// Objects leave localStore stamped with their resourceVersion; the copies inside the tracker are not.
type localStore struct {
	inner clienttesting.ObjectTracker

	mu sync.RWMutex
	// rv is the resourceVersion of the newest change; 1 stands for the empty store.
	rv int64
	// versions holds the resourceVersion of every stored object.
	versions map[schema.GroupVersionResource]map[types.NamespacedName]int64
	// history holds the changes after resourceVersion floor, oldest first; at most historySize.
	history     []localEvent
	historySize int
	floor       int64
	watchers    map[schema.GroupVersionResource]map[*localWatcher]struct{}
}

// localEvent is one change: the object as it was after the change (before it, for a deletion).
type localEvent struct {
	gvr       schema.GroupVersionResource
	namespace string
	rv        int64
	typ       watch.EventType
	obj       runtime.Object
}

var _ clienttesting.ObjectTracker = (*localStore)(nil)

func newLocalStore(inner clienttesting.ObjectTracker) *localStore {
	return &localStore{
		inner:       inner,
		rv:          1,
		floor:       1,
		historySize: localHistory,
		versions:    map[schema.GroupVersionResource]map[types.NamespacedName]int64{},
		watchers:    map[schema.GroupVersionResource]map[*localWatcher]struct{}{},
	}
}

// version returns the stored resourceVersion of an object, and whether it exists.
func (s *localStore) version(gvr schema.GroupVersionResource, ns, name string) (int64, bool) {
	rv, ok := s.versions[gvr][types.NamespacedName{Namespace: ns, Name: name}]
	return rv, ok
}

// stamp sets the stored resourceVersion on an object that left the tracker.
func (s *localStore) stamp(gvr schema.GroupVersionResource, obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if rv, ok := s.version(gvr, m.GetNamespace(), m.GetName()); ok {
		m.SetResourceVersion(strconv.FormatInt(rv, 10))
	}
}

// checkVersion is the API server's optimistic lock: a write that names a resourceVersion must name the current one.
func (s *localStore) checkVersion(gvr schema.GroupVersionResource, ns string, m metav1.Object) error {
	want := m.GetResourceVersion()
	if want == "" {
		return nil
	}
	if cur, ok := s.version(gvr, ns, m.GetName()); ok && strconv.FormatInt(cur, 10) != want {
		return apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return nil
}

// changed records a change of the object ns/name that the tracker has just made, and tells the watchers.
// obj is the object's last state for a deletion; otherwise the stored object is read back. Callers hold s.mu.
func (s *localStore) changed(gvr schema.GroupVersionResource, ns, name string, typ watch.EventType, obj runtime.Object) error {
	s.rv++
	key := types.NamespacedName{Namespace: ns, Name: name}
	if typ == watch.Deleted {
		delete(s.versions[gvr], key)
	} else {
		if s.versions[gvr] == nil {
			s.versions[gvr] = map[types.NamespacedName]int64{}
		}
		s.versions[gvr][key] = s.rv
		var err error
		if obj, err = s.inner.Get(gvr, ns, name); err != nil {
			return fmt.Errorf("read back %s %s/%s: %w", gvr.Resource, ns, name, err)
		}
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	}
	ev := localEvent{gvr: gvr, namespace: ns, rv: s.rv, typ: typ, obj: obj}
	if len(s.history) >= s.historySize {
		// Drop the older half at once, so trimming costs O(1) per change on average.
		half := (len(s.history) + 1) / 2
		s.floor = s.history[half-1].rv
		s.history = append(s.history[:0:0], s.history[half:]...)
	}
	s.history = append(s.history, ev)
	for w := range s.watchers[gvr] {
		if w.matches(ev) {
			w.push(ev)
		}
	}
	return nil
}

// Add stores obj (or every item of a list) under the resource its kind suggests, as the fake tracker's Add does.
func (s *localStore) Add(obj runtime.Object) error {
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		if errs := runtime.DecodeList(items, scheme.Codecs.UniversalDecoder()); len(errs) > 0 {
			return errs[0]
		}
		for _, item := range items {
			if err := s.Add(item); err != nil {
				return err
			}
		}
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.inner.Add(obj); err != nil {
		return err
	}
	for _, gvk := range gvks {
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		if gvr.Version == runtime.APIVersionInternal {
			gvr.Version = ""
		}
		if err := s.changed(gvr, m.GetNamespace(), m.GetName(), watch.Added, nil); err != nil {
			return err
		}
	}
	return nil
}

// Get returns a copy of the stored object.
func (s *localStore) Get(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.GetOptions) (runtime.Object, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	obj, err := s.inner.Get(gvr, ns, name, opts...)
	if err != nil {
		return nil, err
	}
	s.stamp(gvr, obj)
	return obj, nil
}

// List returns the stored objects of a resource in ns ("" for all), with the store's current resourceVersion.
func (s *localStore) List(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, ns string, opts ...metav1.ListOptions) (runtime.Object, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	list, err := s.inner.List(gvr, gvk, ns, opts...)
	if err != nil {
		return nil, err
	}
	if lm, err := meta.ListAccessor(list); err == nil {
		lm.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	}
	err = meta.EachListItem(list, func(item runtime.Object) error {
		s.stamp(gvr, item)
		return nil
	})
	return list, err
}

// Create stores a new object.
func (s *localStore) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	return s.write(gvr, ns, obj, false, func(int64) error { return s.inner.Create(gvr, obj, ns, opts...) })
}

// Update replaces a stored object; a resourceVersion in obj must be the stored one.
func (s *localStore) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	return s.write(gvr, ns, obj, true, func(int64) error { return s.inner.Update(gvr, obj, ns, opts...) })
}

// Patch stores a patched object (the fake's patch reaction computes it from Get); a resourceVersion that
// the patch sets must be the stored one. obj is what the patch call returns, so it gets the new resourceVersion.
func (s *localStore) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	return s.write(gvr, ns, obj, true, func(rv int64) error {
		if err := s.inner.Patch(gvr, obj, ns, opts...); err != nil {
			return err
		}
		if m, err := meta.Accessor(obj); err == nil {
			m.SetResourceVersion(strconv.FormatInt(rv, 10))
		}
		return nil
	})
}

// Apply applies a server-side-apply configuration, creating the object if needed.
func (s *localStore) Apply(gvr schema.GroupVersionResource, applyConfiguration runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	return s.write(gvr, ns, applyConfiguration, false, func(int64) error {
		return s.inner.Apply(gvr, applyConfiguration, ns, opts...)
	})
}

// write runs one tracker write of obj under the store's lock and records the change: ADDED when the
// object did not exist before, MODIFIED when it did. With checkRV, a resourceVersion in obj must be the
// stored one (the API server's optimistic lock for updates and patches). do gets the resourceVersion
// that the change will have.
func (s *localStore) write(gvr schema.GroupVersionResource, ns string, obj runtime.Object, checkRV bool, do func(rv int64) error) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if checkRV {
		if err := s.checkVersion(gvr, ns, m); err != nil {
			return err
		}
	}
	_, existed := s.version(gvr, ns, m.GetName())
	if err := do(s.rv + 1); err != nil {
		return err
	}
	typ := watch.Added
	if existed {
		typ = watch.Modified
	}
	return s.changed(gvr, ns, m.GetName(), typ, nil)
}

// Delete removes a stored object, honouring the UID and resourceVersion preconditions of opts.
func (s *localStore) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, err := s.inner.Get(gvr, ns, name)
	if err != nil {
		return err
	}
	s.stamp(gvr, last)
	if len(opts) > 0 && opts[0].Preconditions != nil {
		if err := checkPreconditions(gvr, last, opts[0].Preconditions); err != nil {
			return err
		}
	}
	if err := s.inner.Delete(gvr, ns, name, opts...); err != nil {
		return err
	}
	return s.changed(gvr, ns, name, watch.Deleted, last)
}

func checkPreconditions(gvr schema.GroupVersionResource, obj runtime.Object, p *metav1.Preconditions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if p.UID != nil && *p.UID != m.GetUID() {
		return apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
			fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
		return apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
			fmt.Errorf("precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

// Watch starts a watch of a resource in ns ("" for all namespaces). Without a resourceVersion (or with "0")
// it first sends every existing object as ADDED; with one it first sends the changes after it, or, when
// those are no longer kept, one Expired error (an informer then lists again). Selectors are ignored, as by
// the fake tracker.
func (s *localStore) Watch(gvr schema.GroupVersionResource, ns string, opts ...metav1.ListOptions) (watch.Interface, error) {
	if len(opts) > 1 {
		return nil, fmt.Errorf("expected at most one ListOptions, got %d", len(opts))
	}
	from := int64(0)
	if len(opts) == 1 && opts[0].ResourceVersion != "" {
		rv, err := strconv.ParseInt(opts[0].ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: %v", opts[0].ResourceVersion, err))
		}
		from = rv
	}
	w := newLocalWatcher(s, gvr, ns)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case from == 0:
		for key := range s.versions[gvr] {
			if ns != metav1.NamespaceAll && key.Namespace != ns {
				continue
			}
			obj, err := s.inner.Get(gvr, key.Namespace, key.Name)
			if err != nil {
				w.abandon()
				return nil, fmt.Errorf("read %s %s: %w", gvr.Resource, key, err)
			}
			s.stamp(gvr, obj)
			w.push(localEvent{gvr: gvr, namespace: key.Namespace, typ: watch.Added, obj: obj})
		}
	case from < s.floor || from > s.rv:
		status := apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d is not available: the local API keeps changes after %d up to %d", from, s.floor, s.rv)).ErrStatus
		w.push(localEvent{typ: watch.Error, obj: &status})
		w.finish()
		return w, nil
	default:
		for _, ev := range s.history {
			if ev.rv > from && ev.gvr == gvr && w.matches(ev) {
				w.push(ev)
			}
		}
	}
	if s.watchers[gvr] == nil {
		s.watchers[gvr] = map[*localWatcher]struct{}{}
	}
	s.watchers[gvr][w] = struct{}{}
	return w, nil
}

func (s *localStore) forget(w *localWatcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers[w.gvr], w)
}

// localWatcher is one watch. Events wait in an unbounded queue, so a writer never blocks on, or is limited
// by, a slow reader; a goroutine hands them to ResultChan in order.
type localWatcher struct {
	store     *localStore
	gvr       schema.GroupVersionResource
	namespace string
	result    chan watch.Event

	mu       sync.Mutex
	queue    []watch.Event
	finished bool // no event follows the queued ones: close ResultChan once they are read
	wake     chan struct{}

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

func newLocalWatcher(s *localStore, gvr schema.GroupVersionResource, ns string) *localWatcher {
	w := &localWatcher{
		store:     s,
		gvr:       gvr,
		namespace: ns,
		result:    make(chan watch.Event),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	go w.run()
	return w
}

func (w *localWatcher) matches(ev localEvent) bool {
	return w.namespace == metav1.NamespaceAll || w.namespace == ev.namespace
}

// push queues a copy of the event's object: readers (informer transforms) may change what they receive.
func (w *localWatcher) push(ev localEvent) {
	w.mu.Lock()
	w.queue = append(w.queue, watch.Event{Type: ev.typ, Object: ev.obj.DeepCopyObject()})
	w.mu.Unlock()
	w.signal()
}

// finish marks the end of the events: ResultChan closes after the queued ones.
func (w *localWatcher) finish() {
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	w.signal()
}

func (w *localWatcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *localWatcher) run() {
	defer close(w.done)
	defer close(w.result)
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			finished := w.finished
			w.mu.Unlock()
			if finished {
				return
			}
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				return
			}
		}
		ev := w.queue[0]
		w.queue[0] = watch.Event{}
		w.queue = w.queue[1:]
		w.mu.Unlock()
		select {
		case w.result <- ev:
		case <-w.stop:
			return
		}
	}
}

// ResultChan delivers the events; it is closed after Stop returns.
func (w *localWatcher) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch: the watcher leaves the store, queued events are dropped and ResultChan is closed.
// abandon ends a watcher that was never handed out (it is not in the store yet): its goroutine exits.
func (w *localWatcher) abandon() {
	w.stopOnce.Do(func() {
		close(w.stop)
		<-w.done
	})
}

func (w *localWatcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.store.forget(w)
		<-w.done
		w.mu.Lock()
		w.queue = nil
		w.mu.Unlock()
	})
}
