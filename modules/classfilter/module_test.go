package classfilter

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
)

const (
	ns           = "apps"
	ourClass     = "reactor"
	ourCtrl      = "k8s.io/ingress-reactor"
	acceptedName = "ingress_reactor_ingresses_accepted"
)

// moduleEnv is a started ClassFilter with the IngressChanges it publishes.
type moduleEnv struct {
	t       *testing.T
	h       *moduletest.Harness
	filter  *ClassFilter
	changes *moduletest.Collector[modules.IngressChange]
	rv      int
	// last is the change expect saw last: the filter may announce an Ingress's state again (two workers,
	// an update event beside a requeue), which consumers take as a no-op, so a repeat is not an error.
	last *modules.IngressChange
}

func newModuleEnv(t *testing.T, objs ...runtime.Object) *moduleEnv {
	t.Helper()
	h := moduletest.New(t, objs...)
	c, err := New(Params{
		Options: Options{IngressClass: ourClass, ControllerClass: ourCtrl},
		Factory: h.Factory, Changes: h.IngressChanges, Announced: h.Announced, Metrics: h.Metrics, Registry: h.Registry, Log: h.Log,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e := &moduleEnv{t: t, h: h, filter: c, changes: moduletest.Collect(h.IngressChanges), rv: 1}
	h.Start()
	h.Run(c)
	return e
}

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func accepted(name string) modules.IngressChange {
	return modules.IngressChange{Key: key(name), Accepted: true}
}

func removed(name string) modules.IngressChange {
	return modules.IngressChange{Key: key(name), Accepted: false}
}

// waitAnnounced waits for the signal that every Ingress existing at start has been announced.
func (e *moduleEnv) waitAnnounced() {
	e.t.Helper()
	select {
	case <-e.h.Announced.Done():
	case <-time.After(30 * time.Second):
		e.t.Fatal("the existing Ingresses were never announced as complete")
	}
}

// expect waits for want as the next message and fails on any other message before it.
func (e *moduleEnv) expect(want modules.IngressChange) {
	e.t.Helper()
	got := e.changes.WaitFor(e.t, "an IngressChange", func(c modules.IngressChange) bool {
		return e.last == nil || want == *e.last || c != *e.last
	})
	for _, c := range got[:len(got)-1] {
		if c != *e.last {
			e.t.Fatalf("published %+v, want %+v", got, want)
		}
	}
	if got[len(got)-1] != want {
		e.t.Fatalf("published %+v, want %+v", got, want)
	}
	e.last = &want
}

// quiet asserts that nothing was published since the last expect until a marker Ingress of ours (by the
// legacy annotation, which needs no IngressClass) is announced. The informer delivers the test's changes
// before the marker's; with two workers a wrong announcement can still trail the marker, so this catches
// most, not all, of them.
func (e *moduleEnv) quiet(marker string) {
	e.t.Helper()
	e.apply(gen.Ingress(ns, marker, gen.Annotations(LegacyClassAnnotation, ourClass)))
	got := e.changes.WaitFor(e.t, "the marker "+marker, func(c modules.IngressChange) bool { return c.Key == key(marker) })
	if len(got) != 1 {
		e.t.Fatalf("published %+v before the marker, want nothing", got[:len(got)-1])
	}
}

// apply creates or updates an object with a fresh resource version, as the API server would.
func (e *moduleEnv) apply(obj runtime.Object) {
	e.t.Helper()
	e.rv++
	ctx := context.Background()
	api := e.h.Client.NetworkingV1()
	var err error
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		gen.ResourceVersion(strconv.Itoa(e.rv))(o)
		if _, err = api.Ingresses(o.Namespace).Update(ctx, o, metav1.UpdateOptions{}); err != nil {
			_, err = api.Ingresses(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
	case *networkingv1.IngressClass:
		gen.ResourceVersion(strconv.Itoa(e.rv))(o)
		if _, err = api.IngressClasses().Update(ctx, o, metav1.UpdateOptions{}); err != nil {
			_, err = api.IngressClasses().Create(ctx, o, metav1.CreateOptions{})
		}
	default:
		e.t.Fatalf("apply %T: not supported", obj)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *moduleEnv) deleteIngress(name string) {
	e.t.Helper()
	if err := e.h.Client.NetworkingV1().Ingresses(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *moduleEnv) deleteClass(name string) {
	e.t.Helper()
	if err := e.h.Client.NetworkingV1().IngressClasses().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *moduleEnv) acceptedGauge() float64 {
	return moduletest.MetricValue(e.t, e.h.Registry, acceptedName)
}

// Every Ingress of ours that exists at start is announced before the signal that they all were; others never are.
func TestModuleAnnouncesExistingIngressesBeforeSignalling(t *testing.T) {
	e := newModuleEnv(t,
		gen.IngressClass(ourClass, ourCtrl),
		gen.IngressClass("other", "example.com/other"),
		gen.Ingress(ns, "web", gen.Class(ourClass), gen.Rule("web.example", "/", gen.Backend("web", 80))),
		gen.Ingress(ns, "legacy", gen.Annotations(LegacyClassAnnotation, ourClass)),
		gen.Ingress(ns, "foreign", gen.Class("other")),
		gen.Ingress(ns, "classless"),
	)
	e.waitAnnounced()
	got := e.changes.All()
	want := []modules.IngressChange{accepted("legacy"), accepted("web")}
	slices.SortFunc(got, func(a, b modules.IngressChange) int { return cmpKey(a.Key, b.Key) })
	got = slices.Compact(got) // the informer's adds and the start-up pass may both announce one Ingress
	if !slices.Equal(got, want) {
		t.Fatalf("published %+v, want %+v", got, want)
	}
	if got := e.acceptedGauge(); got != 2 {
		t.Errorf("%s = %v, want 2", acceptedName, got)
	}
}

func cmpKey(a, b types.NamespacedName) int {
	if a.String() < b.String() {
		return -1
	}
	if a.String() > b.String() {
		return 1
	}
	return 0
}

// An Ingress that moves between classes, and one that is deleted, is announced as it becomes ours and as
// it stops being ours.
func TestModuleFollowsIngressClassChangesAndDeletes(t *testing.T) {
	e := newModuleEnv(t, gen.IngressClass(ourClass, ourCtrl), gen.IngressClass("other", "example.com/other"))
	e.waitAnnounced()

	e.apply(gen.Ingress(ns, "web", gen.Class(ourClass)))
	e.expect(accepted("web"))

	e.apply(gen.Ingress(ns, "web", gen.Class(ourClass), gen.Rule("web.example", "/", gen.Backend("web", 80))))
	e.expect(accepted("web")) // a change while ours is announced too

	e.apply(gen.Ingress(ns, "web", gen.Class("other")))
	e.expect(removed("web"))
	if got := e.acceptedGauge(); got != 0 {
		t.Errorf("%s = %v after the Ingress left, want 0", acceptedName, got)
	}

	e.apply(gen.Ingress(ns, "web", gen.Annotations(LegacyClassAnnotation, ourClass)))
	e.expect(accepted("web"))

	e.deleteIngress("web")
	e.expect(removed("web"))

	// Deleting an Ingress that never was ours, or changing one, announces nothing.
	e.apply(gen.Ingress(ns, "foreign", gen.Class("other")))
	e.apply(gen.Ingress(ns, "foreign", gen.Class("other"), gen.Rule("f.example", "/", gen.Backend("f", 80))))
	e.deleteIngress("foreign")
	e.quiet("marker")
}

// IngressClass events re-decide the Ingresses they can affect: those naming the class, and those
// naming none when the default class moves.
func TestModuleFollowsIngressClassEvents(t *testing.T) {
	e := newModuleEnv(t,
		gen.Ingress(ns, "late", gen.Class("late")),
		gen.Ingress(ns, "classless"),
	)
	e.waitAnnounced()

	e.apply(gen.IngressClass("late", ourCtrl))
	e.expect(accepted("late"))

	e.apply(gen.IngressClass("late", "example.com/other"))
	e.expect(removed("late"))

	e.apply(gen.IngressClass(ourClass, ourCtrl, gen.DefaultClass()))
	e.expect(accepted("classless"))

	e.deleteClass(ourClass)
	e.expect(removed("classless"))
	e.quiet("marker")
}
