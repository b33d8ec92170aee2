//go:build integration

package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// The annotations are spelled out rather than imported: they are the user-facing contract (docs/auto-ingress.md).
const (
	exposeAnnotation     = "ingress-reactor.io/expose"
	exposePathAnnotation = "ingress-reactor.io/expose-path"
	autoIngressManagedBy = "ingress-reactor-autoingress"
)

// TestAutoIngressExposesAnnotatedService: annotating a Service gives it an Ingress it controls, of our class,
// which NGINX serves; a deleted Ingress comes back; an edited annotation changes the route; removing the
// annotation removes the Ingress and the route. (Without a controller-manager nothing garbage-collects, so
// deleting the Service is covered by checking the owner reference.)
func TestAutoIngressExposesAnnotatedService(t *testing.T) {
	f := harness.New(t)
	backend := f.StartBackend("autoingress-web", false)
	svc := f.CreateService("web", 80, backend.Port)
	f.ServeBackends("web", backend)
	r := f.StartReactor("--enable-auto-ingress")
	r.WaitReady()

	const host = "web.autoingress.example"
	if resp, err := r.Get(host, "/"); err == nil && resp.Echo != nil {
		t.Fatalf("before the annotation, %s is already routed to a backend: %v", host, resp)
	}

	updateService(f, "web", func(s *corev1.Service) { setAnnotation(s, exposeAnnotation, host) })
	ing := waitForIngress(f, r, "web", "the Ingress for the annotated Service", func(ing *networkingv1.Ingress) bool { return ing != nil })

	ref := metav1.GetControllerOf(ing)
	switch {
	case len(ing.OwnerReferences) != 1 || ref == nil:
		t.Errorf("owner references = %+v, want exactly one controller reference", ing.OwnerReferences)
	case ref.APIVersion != "v1" || ref.Kind != "Service" || ref.Name != "web" || ref.UID != svc.UID:
		t.Errorf("controller reference = %+v, want v1 Service web uid %s", *ref, svc.UID)
	case ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion:
		// Where OwnerReferencesPermissionEnforcement is on, that would need update on services/finalizers.
		t.Errorf("controller reference %+v sets blockOwnerDeletion=true, which needs update on services/finalizers in some clusters", *ref)
	}
	if c := ing.Spec.IngressClassName; c == nil || *c != f.IngressClass {
		t.Errorf("spec.ingressClassName = %v, want the controller's --ingress-class %q", c, f.IngressClass)
	}
	if got := ing.Labels["app.kubernetes.io/managed-by"]; got != autoIngressManagedBy {
		t.Errorf("label app.kubernetes.io/managed-by = %q, want %q", got, autoIngressManagedBy)
	}
	waitServedBy(r, host, "/hello", backend.Name)
	waitServiceEvent(f, r, "web", corev1.EventTypeNormal, "IngressCreated", host)

	// Deleted while the Service is annotated: re-created.
	if err := f.Client.NetworkingV1().Ingresses(f.Namespace).Delete(f.Ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete Ingress: %v", err)
	}
	waitForIngress(f, r, "web", "the deleted Ingress to be re-created", func(now *networkingv1.Ingress) bool {
		return now != nil && now.UID != ing.UID
	})
	waitServedBy(r, host, "/hello", backend.Name)

	// Edited: the route follows.
	updateService(f, "web", func(s *corev1.Service) { setAnnotation(s, exposePathAnnotation, "/app") })
	waitForIngress(f, r, "web", "the Ingress to follow the new path", func(ing *networkingv1.Ingress) bool {
		return ing != nil && ing.Spec.Rules[0].HTTP.Paths[0].Path == "/app"
	})
	waitServedBy(r, host, "/app/x", backend.Name)
	waitNotServed(r, host, "/other")

	// Annotation removed: the Ingress and the route go.
	updateService(f, "web", func(s *corev1.Service) {
		delete(s.Annotations, exposeAnnotation)
		delete(s.Annotations, exposePathAnnotation)
	})
	waitForIngress(f, r, "web", "the Ingress to be deleted", func(ing *networkingv1.Ingress) bool { return ing == nil })
	waitNotServed(r, host, "/app/x")
}

// TestAutoIngressLeavesOthersAlone: an Ingress the Service does not control is never changed, only reported
// in a Warning Event on the Service; an invalid annotation produces a Warning Event and no Ingress.
func TestAutoIngressLeavesOthersAlone(t *testing.T) {
	f := harness.New(t)
	foreign := f.CreateIngress(f.Ingress("api", "hand-made.example", harness.IngressBackend{Service: "elsewhere", Port: 80}))
	f.CreateService("api", 80, 8080)
	f.CreateService("bad", 80, 8080)
	r := f.StartReactor("--enable-auto-ingress")
	r.WaitReady()

	updateService(f, "api", func(s *corev1.Service) { setAnnotation(s, exposeAnnotation, "api.autoingress.example") })
	updateService(f, "bad", func(s *corev1.Service) { setAnnotation(s, exposeAnnotation, "Not A Host") })

	waitServiceEvent(f, r, "api", corev1.EventTypeWarning, "IngressNotOwned", "not controlled by this Service")
	waitServiceEvent(f, r, "bad", corev1.EventTypeWarning, "InvalidExposeAnnotation", exposeAnnotation)

	now, err := f.Client.NetworkingV1().Ingresses(f.Namespace).Get(f.Ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the foreign Ingress: %v", err)
	}
	if now.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the foreign Ingress was written to: resourceVersion %s -> %s, owners %+v, spec %+v",
			foreign.ResourceVersion, now.ResourceVersion, now.OwnerReferences, now.Spec)
	}
	if _, err := f.Client.NetworkingV1().Ingresses(f.Namespace).Get(f.Ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an Ingress exists for the Service with an invalid annotation (err %v), want none", err)
	}
}

// TestAutoIngressInstancesOfTwoClassesDoNotFight: two controllers with different --ingress-class both run
// auto-ingress. For a Service that names no class, the one that creates the Ingress keeps it and the other
// leaves it alone, says so in one Warning Event and never patches its own class in; naming a class hands the
// Service to the controller of that class.
func TestAutoIngressInstancesOfTwoClassesDoNotFight(t *testing.T) {
	f := harness.New(t)
	f.CreateService("web", 80, 8080)
	classA, classB := f.IngressClass, f.IngressClass+"-b"
	a := f.StartReactor("--enable-auto-ingress")
	b := f.StartReactor("--enable-auto-ingress", "--ingress-class="+classB)
	a.WaitReady()
	b.WaitReady() // the harness fails the test should either instance exit before its end

	updateService(f, "web", func(s *corev1.Service) { setAnnotation(s, exposeAnnotation, "web.two.example") })
	ing := waitForIngress(f, a, "web", "the Ingress for the annotated Service", func(ing *networkingv1.Ingress) bool { return ing != nil })
	if ing.Spec.IngressClassName == nil || (*ing.Spec.IngressClassName != classA && *ing.Spec.IngressClassName != classB) {
		t.Fatalf("spec.ingressClassName = %v, want %s or %s", ing.Spec.IngressClassName, classA, classB)
	}
	winner := *ing.Spec.IngressClassName
	// Before the fix the instances patched the class back and forth and this Event never came.
	waitServiceEvent(f, a, "web", corev1.EventTypeWarning, "IngressOfOtherClass", fmt.Sprintf("ingressClassName %q", winner))
	now, err := f.Client.NetworkingV1().Ingresses(f.Namespace).Get(f.Ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Ingress: %v", err)
	}
	if now.Generation != 1 || now.UID != ing.UID || *now.Spec.IngressClassName != winner {
		t.Errorf("the Ingress was rewritten after %s created it: uid %s generation %d class %v", winner, now.UID, now.Generation, *now.Spec.IngressClassName)
	}

	loser := classA
	if winner == classA {
		loser = classB
	}
	updateService(f, "web", func(s *corev1.Service) { setAnnotation(s, "ingress-reactor.io/expose-ingress-class", loser) })
	waitForIngress(f, a, "web", "the Ingress to move to the class the Service names", func(ing *networkingv1.Ingress) bool {
		return ing != nil && ing.Spec.IngressClassName != nil && *ing.Spec.IngressClassName == loser
	})
}

func setAnnotation(s *corev1.Service, k, v string) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[k] = v
}

// updateService re-reads the Service, applies mutate and updates it, retrying on conflicts.
func updateService(f *harness.Fixture, name string, mutate func(*corev1.Service)) {
	f.T.Helper()
	api := f.Client.CoreV1().Services(f.Namespace)
	for attempt := 0; ; attempt++ {
		svc, err := api.Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			f.T.Fatalf("get Service %s/%s: %v", f.Namespace, name, err)
		}
		mutate(svc)
		if _, err = api.Update(f.Ctx, svc, metav1.UpdateOptions{}); err == nil {
			return
		}
		if attempt >= 5 || !apierrors.IsConflict(err) {
			f.T.Fatalf("update Service %s/%s: %v", f.Namespace, name, err)
		}
	}
}

// waitForIngress polls the API for the Ingress (nil while it does not exist) until cond holds, and returns it.
func waitForIngress(f *harness.Fixture, r *harness.Reactor, name, what string, cond func(*networkingv1.Ingress) bool) *networkingv1.Ingress {
	f.T.Helper()
	var ing *networkingv1.Ingress
	r.Eventually(harness.DefaultTimeout, what, func() (bool, string) {
		got, err := f.Client.NetworkingV1().Ingresses(f.Namespace).Get(f.Ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			ing = nil
		case err != nil:
			return false, err.Error()
		default:
			ing = got
		}
		if ing == nil {
			return cond(nil), "no Ingress " + name
		}
		return cond(ing), fmt.Sprintf("uid %s owners %+v spec %+v", ing.UID, ing.OwnerReferences, ing.Spec)
	})
	return ing
}

// waitServedBy waits until NGINX answers host and path from the named backend.
func waitServedBy(r *harness.Reactor, host, path, backend string) {
	r.Eventually(harness.DefaultTimeout, fmt.Sprintf("%s%s to be served by %s", host, path, backend), func() (bool, string) {
		resp, err := r.Get(host, path)
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Name == backend, resp.String()
	})
}

// waitNotServed waits until NGINX answers host and path with 404 from no backend.
func waitNotServed(r *harness.Reactor, host, path string) {
	r.Eventually(harness.DefaultTimeout, fmt.Sprintf("%s%s to be no longer routed", host, path), func() (bool, string) {
		resp, err := r.Get(host, path)
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == http.StatusNotFound && resp.Echo == nil, resp.String()
	})
}

// waitServiceEvent waits for an Event of type and reason on the Service whose message contains text.
func waitServiceEvent(f *harness.Fixture, r *harness.Reactor, service, typ, reason, text string) {
	f.T.Helper()
	selector := fields.Set{
		"involvedObject.kind": "Service",
		"involvedObject.name": service,
		"type":                typ,
		"reason":              reason,
	}.AsSelector().String()
	r.Eventually(harness.DefaultTimeout, fmt.Sprintf("a %s %s Event on Service %s", typ, reason, service), func() (bool, string) {
		evs, err := f.Client.CoreV1().Events(f.Namespace).List(f.Ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, e := range evs.Items {
			if strings.Contains(e.Message, text) {
				return true, e.Message
			}
			msgs = append(msgs, e.Message)
		}
		return false, fmt.Sprintf("%d events: %q", len(msgs), msgs)
	})
}
