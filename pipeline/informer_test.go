package pipeline

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// objectMeta builds metadata; annotations come as key, value pairs.
func objectMeta(ns, name, rv string, managed bool, annotations ...string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}
	if managed {
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[annotations[i]] = annotations[i+1]
	}
	return m
}

func ingress(ns, name string, managed bool, annotations ...string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: objectMeta(ns, name, "1", managed, annotations...)}
}

func TestStripTransform(t *testing.T) {
	const lastApplied = LastAppliedConfigAnnotation
	tests := map[string]struct {
		in              *networkingv1.Ingress
		wantAnnotations map[string]string
	}{
		"managed fields and last-applied go, other annotations stay": {
			in:              ingress("ns", "a", true, lastApplied, `{"big":"json"}`, "nginx.ingress.kubernetes.io/rewrite-target", "/"),
			wantAnnotations: map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/"},
		},
		"only last-applied: annotations become empty": {
			in:              ingress("ns", "b", false, lastApplied, "{}"),
			wantAnnotations: nil,
		},
		"nothing to strip": {
			in:              ingress("ns", "c", false, "keep", "me"),
			wantAnnotations: map[string]string{"keep": "me"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := tc.in.Annotations
			beforeCopy := maps.Clone(before)
			out, err := StripTransform(tc.in)
			if err != nil {
				t.Fatalf("StripTransform: %v", err)
			}
			ing := out.(*networkingv1.Ingress)
			if ing != tc.in {
				t.Error("StripTransform replaced a fresh object instead of stripping it in place")
			}
			if ing.ManagedFields != nil {
				t.Errorf("managedFields left: %v", ing.ManagedFields)
			}
			if !maps.Equal(ing.Annotations, tc.wantAnnotations) || (ing.Annotations == nil) != (tc.wantAnnotations == nil) {
				t.Errorf("annotations = %v, want %v", ing.Annotations, tc.wantAnnotations)
			}
			if !maps.Equal(before, beforeCopy) {
				t.Error("the original annotation map was edited; it may be shared")
			}
			again, _ := StripTransform(ing)
			if !maps.Equal(again.(*networkingv1.Ingress).Annotations, tc.wantAnnotations) {
				t.Error("StripTransform is not idempotent")
			}
		})
	}
}

func TestStripTransformTombstoneLeavesTheSharedObjectAlone(t *testing.T) {
	shared := ingress("ns", "a", true, LastAppliedConfigAnnotation, "{}")
	out, err := StripTransform(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: shared})
	if err != nil {
		t.Fatalf("StripTransform: %v", err)
	}
	tomb, ok := out.(cache.DeletedFinalStateUnknown)
	if !ok {
		t.Fatalf("StripTransform returned %T, want the tombstone", out)
	}
	if shared.ManagedFields == nil || shared.Annotations[LastAppliedConfigAnnotation] != "{}" {
		t.Error("the object inside the tombstone, shared with the cache, was modified")
	}
	inner := tomb.Obj.(*networkingv1.Ingress)
	if inner == shared || inner.ManagedFields != nil || len(inner.Annotations) != 0 || tomb.Key != "ns/a" {
		t.Errorf("tombstone should carry a stripped copy, got %+v", tomb)
	}

	clean := ingress("ns", "b", false)
	out, _ = StripTransform(cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: clean})
	if out.(cache.DeletedFinalStateUnknown).Obj != clean {
		t.Error("a tombstone with nothing to strip should keep its object, not a copy")
	}
}

func TestStripTransformPassesOtherValuesThrough(t *testing.T) {
	for _, v := range []any{"a string", 42, nil, cache.DeletedFinalStateUnknown{Key: "ns/x"}} {
		out, err := StripTransform(v)
		if err != nil || out != v {
			t.Errorf("StripTransform(%#v) = %#v, %v; want it unchanged", v, out, err)
		}
	}
}

func TestKeyOf(t *testing.T) {
	tests := map[string]struct {
		obj    any
		want   types.NamespacedName
		wantOK bool
	}{
		"namespaced":          {ingress("ns", "a", false), types.NamespacedName{Namespace: "ns", Name: "a"}, true},
		"cluster scoped":      {&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}}, types.NamespacedName{Name: "nginx"}, true},
		"tombstone":           {cache.DeletedFinalStateUnknown{Key: "x/y", Obj: ingress("ns", "a", false)}, types.NamespacedName{Namespace: "ns", Name: "a"}, true},
		"tombstone no object": {cache.DeletedFinalStateUnknown{Key: "ns/b"}, types.NamespacedName{Namespace: "ns", Name: "b"}, true},
		"tombstone bad key":   {cache.DeletedFinalStateUnknown{Key: "a/b/c"}, types.NamespacedName{}, false},
		"no name":             {&corev1.Secret{}, types.NamespacedName{}, false},
		"not an object":       {"ns/a", types.NamespacedName{}, false},
		"nil":                 {nil, types.NamespacedName{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := KeyOf(tc.obj)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("KeyOf = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestResourceVersionChanged(t *testing.T) {
	a1 := &corev1.Secret{ObjectMeta: objectMeta("ns", "a", "1", false)}
	a1again := &corev1.Secret{ObjectMeta: objectMeta("ns", "a", "1", false)}
	a2 := &corev1.Secret{ObjectMeta: objectMeta("ns", "a", "2", false)}
	if ResourceVersionChanged(a1, a1again) {
		t.Error("a resync (same resourceVersion) counted as a change")
	}
	if !ResourceVersionChanged(a1, a2) {
		t.Error("a new resourceVersion not counted as a change")
	}
	if !ResourceVersionChanged("x", a2) {
		t.Error("objects without metadata must not be filtered out")
	}
}

// drain returns the keys ready in q, in order.
func drain[K comparable](t *testing.T, q *Queue[K]) []K {
	t.Helper()
	var keys []K
	for q.Len() > 0 {
		k := getWithin(t, q)
		keys = append(keys, k)
		q.Finish(k, nil)
	}
	return keys
}

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func TestHandlerFor(t *testing.T) {
	classA := func(obj any) bool {
		ing, ok := obj.(*networkingv1.Ingress)
		return ok && ing.Annotations["class"] == "a"
	}
	inA := ingress("ns", "web", false, "class", "a")
	inB := ingress("ns", "web", false, "class", "b")
	other := ingress("ns", "api", false, "class", "a")
	renamed := ingress("ns", "web2", false, "class", "a")
	resynced := ingress("ns", "web", false, "class", "a") // same resourceVersion as inA

	type event func(cache.ResourceEventHandler)
	add := func(o any) event { return func(h cache.ResourceEventHandler) { h.OnAdd(o, false) } }
	update := func(o, n any) event { return func(h cache.ResourceEventHandler) { h.OnUpdate(o, n) } }
	del := func(o any) event { return func(h cache.ResourceEventHandler) { h.OnDelete(o) } }

	tests := map[string]struct {
		handler Handler[types.NamespacedName]
		events  []event
		want    []types.NamespacedName
	}{
		"default keys: add, update, delete": {
			events: []event{add(inA), update(inA, renamed), del(other)},
			want:   []types.NamespacedName{nn("ns", "web"), nn("ns", "web2"), nn("ns", "api")},
		},
		"filter drops non-matching adds": {
			handler: Handler[types.NamespacedName]{Filter: classA},
			events:  []event{add(inB), add(other)},
			want:    []types.NamespacedName{nn("ns", "api")},
		},
		"update to a non-matching object still enqueues the old key": {
			handler: Handler[types.NamespacedName]{Filter: classA},
			events:  []event{update(inA, inB)},
			want:    []types.NamespacedName{nn("ns", "web")},
		},
		"update to a matching object enqueues it": {
			handler: Handler[types.NamespacedName]{Filter: classA},
			events:  []event{update(inB, inA)},
			want:    []types.NamespacedName{nn("ns", "web")},
		},
		"update between non-matching objects is ignored": {
			handler: Handler[types.NamespacedName]{Filter: classA},
			events:  []event{update(inB, inB)},
		},
		"update filter skips resyncs": {
			handler: Handler[types.NamespacedName]{UpdateFilter: ResourceVersionChanged},
			events:  []event{update(inA, resynced)},
		},
		"tombstone is unwrapped for filter and keys": {
			handler: Handler[types.NamespacedName]{Filter: classA},
			events: []event{
				del(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: inA}),
				del(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: inB}),
			},
			want: []types.NamespacedName{nn("ns", "web")},
		},
		"tombstone without object uses its key": {
			events: []event{del(cache.DeletedFinalStateUnknown{Key: "ns/gone"})},
			want:   []types.NamespacedName{nn("ns", "gone")},
		},
		"custom keys fan out to dependents": {
			handler: Handler[types.NamespacedName]{Keys: func(obj any) []types.NamespacedName {
				k, _ := KeyOf(obj)
				return []types.NamespacedName{nn(k.Namespace, "dep-1"), nn(k.Namespace, "dep-2")}
			}},
			events: []event{add(inA)},
			want:   []types.NamespacedName{nn("ns", "dep-1"), nn("ns", "dep-2")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q := NewQueue(QueueOptions[types.NamespacedName]{})
			defer q.ShutDown()
			h := tc.handler.For(q)
			for _, e := range tc.events {
				e(h)
			}
			if got := drain(t, q); !slices.Equal(got, tc.want) {
				t.Errorf("enqueued %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHandlerForNeedsKeysForOtherKeyTypes(t *testing.T) {
	q := NewQueue(QueueOptions[string]{})
	defer q.ShutDown()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("For without Keys on a string queue did not panic")
			}
		}()
		Handler[string]{}.For(q)
	}()
	h := Handler[string]{Keys: func(obj any) []string {
		k, _ := KeyOf(obj)
		return []string{k.String()}
	}}.For(q)
	h.OnAdd(ingress("ns", "a", false), true)
	if got := drain(t, q); !slices.Equal(got, []string{"ns/a"}) {
		t.Errorf("enqueued %v, want [ns/a]", got)
	}
}

// TestInformerGlue wires the transform and a handler into a real shared
// informer over a fake clientset, as the app does.
func TestInformerGlue(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(StripTransform))
	informer := factory.Networking().V1().Ingresses()
	q := NewQueue(QueueOptions[types.NamespacedName]{Name: "ingresses"})
	defer q.ShutDown()
	if _, err := informer.Informer().AddEventHandler(Handler[types.NamespacedName]{}.For(q)); err != nil {
		t.Fatalf("AddEventHandler: %v", err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // Shutdown waits for the informers, which stop on ctx
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatal("cache did not sync")
	}

	ing := ingress("default", "web", true, LastAppliedConfigAnnotation, `{"spec":{}}`, "keep", "me")
	if _, err := client.NetworkingV1().Ingresses("default").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := getWithin(t, q); got != nn("default", "web") {
		t.Fatalf("enqueued %v, want default/web", got)
	}
	q.Finish(nn("default", "web"), nil)

	cached, err := informer.Lister().Ingresses("default").Get("web")
	if err != nil {
		t.Fatalf("lister: %v", err)
	}
	if cached.ManagedFields != nil || !maps.Equal(cached.Annotations, map[string]string{"keep": "me"}) {
		t.Errorf("cached object not stripped: managedFields %v, annotations %v", cached.ManagedFields, cached.Annotations)
	}

	if err := client.NetworkingV1().Ingresses("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got := getWithin(t, q); got != nn("default", "web") {
		t.Fatalf("enqueued %v on delete, want default/web", got)
	}
	q.Finish(nn("default", "web"), nil)
}
