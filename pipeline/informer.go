package pipeline

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// LastAppliedConfigAnnotation is the annotation in which `kubectl apply`
// keeps a full copy of the object; StripTransform removes it from the cache.
const LastAppliedConfigAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

var _ cache.TransformFunc = StripTransform

// StripTransform is an informer transform (cache.TransformFunc) that removes
// metadata.managedFields and the last-applied-configuration annotation from
// every Kubernetes object, which often halves the memory the caches hold.
// Nothing in this controller reads either field.
//
// An informer calls its transform on an object freshly decoded from the API
// server, before anything else can see it, so StripTransform edits that object
// in place (replacing the annotation map rather than editing it). A
// cache.DeletedFinalStateUnknown tombstone holds an object that is already in
// the cache and shared with listers: if it still needs stripping, the tombstone
// gets a stripped deep copy and the shared object is left alone. Values that
// are not Kubernetes objects pass through unchanged. It never fails and is
// idempotent.
func StripTransform(obj any) (any, error) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if needsStrip(tomb.Obj) {
			if ro, ok := tomb.Obj.(runtime.Object); ok {
				cp := ro.DeepCopyObject()
				strip(cp)
				tomb.Obj = cp
			}
		}
		return tomb, nil
	}
	strip(obj)
	return obj, nil
}

func needsStrip(obj any) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	_, hasLastApplied := m.GetAnnotations()[LastAppliedConfigAnnotation]
	return len(m.GetManagedFields()) > 0 || hasLastApplied
}

func strip(obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	ann := m.GetAnnotations()
	if _, ok := ann[LastAppliedConfigAnnotation]; ok {
		kept := maps.Clone(ann)
		delete(kept, LastAppliedConfigAnnotation)
		if len(kept) == 0 {
			kept = nil
		}
		m.SetAnnotations(kept)
	}
}

// KeyOf returns the namespace and name of a Kubernetes object, or of the
// object a cache.DeletedFinalStateUnknown tombstone stands for (from its key
// if it carries no object). ok is false for anything without a name.
func KeyOf(obj any) (key types.NamespacedName, ok bool) {
	if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		if tomb.Obj != nil {
			if key, ok := KeyOf(tomb.Obj); ok {
				return key, true
			}
		}
		ns, name, err := cache.SplitMetaNamespaceKey(tomb.Key)
		if err != nil || name == "" {
			return types.NamespacedName{}, false
		}
		return types.NamespacedName{Namespace: ns, Name: name}, true
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetName() == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}, true
}

// ResourceVersionChanged is an UpdateFilter that drops the updates an
// informer's periodic resync delivers for unchanged objects. Use it where a
// resync has nothing to repair.
func ResourceVersionChanged(oldObj, newObj any) bool {
	o, errOld := meta.Accessor(oldObj)
	n, errNew := meta.Accessor(newObj)
	if errOld != nil || errNew != nil {
		return true
	}
	return o.GetResourceVersion() != n.GetResourceVersion()
}

// Handler turns informer events into queue keys.
//
// Filter and Keys receive the object itself: tombstones of deleted objects
// are unwrapped first (only a tombstone that carries no object is passed as
// is). An update enqueues the keys of the old object if it passes Filter and
// those of the new one if it passes, so a consumer hears about an object that
// stops matching as well as one that starts to.
type Handler[K comparable] struct {
	// Filter, if set, selects the objects whose keys are enqueued.
	Filter func(obj any) bool
	// Keys returns the keys to enqueue for an object: its own, or those of
	// the objects that depend on it. Nil means KeyOf, which needs K to be
	// types.NamespacedName.
	Keys func(obj any) []K
	// UpdateFilter, if set, skips updates it returns false for (for example
	// ResourceVersionChanged, to skip resyncs).
	UpdateFilter func(oldObj, newObj any) bool
}

// For returns an event handler that enqueues into q, for an informer's
// AddEventHandler. It panics if Keys is nil and K is not
// types.NamespacedName, a wiring bug that should fail at startup.
func (h Handler[K]) For(q *Queue[K]) cache.ResourceEventHandler {
	if h.Keys == nil {
		h.Keys = namespacedNameKeys[K]()
	}
	return &eventHandler[K]{h: h, q: q}
}

// namespacedNameKeys is the default key function: the object's own
// namespace/name.
func namespacedNameKeys[K comparable]() func(any) []K {
	var zero K
	if _, ok := any(zero).(types.NamespacedName); !ok {
		panic("pipeline: Handler.Keys is required when the key type is not types.NamespacedName")
	}
	return func(obj any) []K {
		key, ok := KeyOf(obj)
		if !ok {
			return nil
		}
		return []K{any(key).(K)}
	}
}

type eventHandler[K comparable] struct {
	h Handler[K]
	q *Queue[K]
}

func (e *eventHandler[K]) OnAdd(obj any, _ bool) {
	e.enqueue(obj)
}

func (e *eventHandler[K]) OnUpdate(oldObj, newObj any) {
	if e.h.UpdateFilter != nil && !e.h.UpdateFilter(oldObj, newObj) {
		return
	}
	e.enqueue(oldObj)
	e.enqueue(newObj)
}

func (e *eventHandler[K]) OnDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok && tomb.Obj != nil {
		obj = tomb.Obj
	}
	e.enqueue(obj)
}

func (e *eventHandler[K]) enqueue(obj any) {
	if e.h.Filter != nil && !e.h.Filter(obj) {
		return
	}
	for _, k := range e.h.Keys(obj) {
		e.q.Add(k)
	}
}
