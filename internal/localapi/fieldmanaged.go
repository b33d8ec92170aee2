package localapi

import (
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
)

// fieldManagedTracker is an object tracker that keeps managedFields and serves server-side apply, as
// client-go's field-managed tracker (behind fake.NewClientset) does, but builds its REST mapper once and
// one field manager per resource. client-go's tracker builds both anew on every write: a REST mapper over
// the whole scheme and a structured-merge manager cost well over 1 ms per write, which made loading
// 12,000 manifest objects take 20-30 s. A field manager holds no per-object state (the API server keeps
// one per resource for all requests), so reusing it changes nothing but the cost.
type fieldManagedTracker struct {
	clienttesting.ObjectTracker
	mapper    meta.RESTMapper
	converter managedfields.TypeConverter

	mu    sync.Mutex
	kinds map[schema.GroupVersionResource]resourceKind
}

func newFieldManagedTracker() *fieldManagedTracker {
	return &fieldManagedTracker{
		ObjectTracker: clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder()),
		mapper:        testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme),
		converter:     applyconfigurations.NewTypeConverter(scheme.Scheme),
		kinds:         map[schema.GroupVersionResource]resourceKind{},
	}
}

// managerFor returns the kind and the field manager of a resource.
func (t *fieldManagedTracker) managerFor(gvr schema.GroupVersionResource) (schema.GroupVersionKind, *managedfields.FieldManager, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := t.kinds[gvr]; ok {
		return k.gvk, k.manager, nil
	}
	gvk, err := t.mapper.KindFor(gvr)
	if err != nil {
		return gvk, nil, err
	}
	m, err := managedfields.NewDefaultFieldManager(t.converter, scheme.Scheme, noDefaults{}, scheme.Scheme, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		return gvk, nil, fmt.Errorf("field manager for %s: %w", gvk, err)
	}
	t.kinds[gvr] = resourceKind{gvk: gvk, manager: m}
	return gvk, m, nil
}

// resourceKind is what the tracker keeps per resource: its kind and the field manager of that kind.
type resourceKind struct {
	gvk     schema.GroupVersionKind
	manager *managedfields.FieldManager
}

// live returns the stored object ns/name, or, when there is none and absentOK, a new empty object of
// kind gvk; exists tells which.
func (t *fieldManagedTracker) live(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, ns, name string, absentOK bool) (obj runtime.Object, exists bool, err error) {
	obj, err = t.ObjectTracker.Get(gvr, ns, name, metav1.GetOptions{})
	if err == nil {
		return obj, true, nil
	}
	if !absentOK || !apierrors.IsNotFound(err) {
		return nil, false, err
	}
	if obj, err = scheme.Scheme.New(gvk); err != nil {
		return nil, false, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, false, nil
}

// Create stores a new object with its managedFields.
func (t *fieldManagedTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	var o metav1.CreateOptions
	if len(opts) > 1 {
		return fmt.Errorf("expected at most one CreateOptions, got %d", len(opts))
	} else if len(opts) == 1 {
		o = opts[0]
	}
	gvk, mgr, err := t.managerFor(gvr)
	if err != nil {
		return err
	}
	// A create names its kind by the resource it is sent to, whatever the object says.
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	live, _, err := t.live(gvr, gvk, ns, m.GetName(), true)
	if err != nil {
		return err
	}
	managed, err := mgr.Update(live, obj, o.FieldManager)
	if err != nil {
		return err
	}
	return t.ObjectTracker.Create(gvr, managed, ns, o)
}

// Update replaces a stored object and updates its managedFields.
func (t *fieldManagedTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	var o metav1.UpdateOptions
	if len(opts) > 1 {
		return fmt.Errorf("expected at most one UpdateOptions, got %d", len(opts))
	} else if len(opts) == 1 {
		o = opts[0]
	}
	managed, err := t.managedUpdate(gvr, obj, ns, o.FieldManager)
	if err != nil {
		return err
	}
	return t.ObjectTracker.Update(gvr, managed, ns, o)
}

// Patch stores a patched object and updates its managedFields.
func (t *fieldManagedTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	var o metav1.PatchOptions
	if len(opts) > 1 {
		return fmt.Errorf("expected at most one PatchOptions, got %d", len(opts))
	} else if len(opts) == 1 {
		o = opts[0]
	}
	managed, err := t.managedUpdate(gvr, obj, ns, o.FieldManager)
	if err != nil {
		return err
	}
	return t.ObjectTracker.Patch(gvr, managed, ns, opts...)
}

// managedUpdate returns obj with the managedFields of an update by manager of the stored object.
func (t *fieldManagedTracker) managedUpdate(gvr schema.GroupVersionResource, obj runtime.Object, ns, manager string) (runtime.Object, error) {
	gvk, mgr, err := t.managerFor(gvr)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	old, _, err := t.live(gvr, gvk, ns, m.GetName(), false)
	if err != nil {
		return nil, err
	}
	return mgr.Update(old, obj, manager)
}

// Apply merges a server-side-apply configuration into the stored object, creating it if needed.
func (t *fieldManagedTracker) Apply(gvr schema.GroupVersionResource, applyConfiguration runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	var o metav1.PatchOptions
	if len(opts) > 1 {
		return fmt.Errorf("expected at most one PatchOptions, got %d", len(opts))
	} else if len(opts) == 1 {
		o = opts[0]
	}
	gvk, mgr, err := t.managerFor(gvr)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(applyConfiguration)
	if err != nil {
		return err
	}
	live, exists, err := t.live(gvr, gvk, ns, m.GetName(), true)
	if err != nil {
		return err
	}
	force := o.Force != nil && *o.Force
	applied, err := mgr.Apply(live, applyConfiguration, o.FieldManager, force)
	if err != nil {
		return err
	}
	if exists {
		return t.ObjectTracker.Update(gvr, applied, ns, metav1.UpdateOptions{DryRun: o.DryRun, FieldManager: o.FieldManager, FieldValidation: o.FieldValidation})
	}
	return t.ObjectTracker.Create(gvr, applied, ns, metav1.CreateOptions{DryRun: o.DryRun, FieldManager: o.FieldManager, FieldValidation: o.FieldValidation})
}

// noDefaults is the field managers' defaulter: like the fake API, the local one applies no defaults.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}
