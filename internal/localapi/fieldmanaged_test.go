package localapi

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// managers returns the managedFields entries of an object as manager -> operation.
func managers(m metav1.Object) map[string]metav1.ManagedFieldsOperationType {
	got := map[string]metav1.ManagedFieldsOperationType{}
	for _, e := range m.GetManagedFields() {
		got[e.Manager] = e.Operation
	}
	return got
}

// TestLocalClientsetFieldManagement: the local API keeps managedFields per manager and serves
// server-side apply with its conflicts, as the fake clientset's field-managed tracker does, through the
// field managers it builds once per resource and reuses for every write.
func TestLocalClientsetFieldManagement(t *testing.T) {
	ctx := context.Background()
	cs := NewClientset()
	services := cs.CoreV1().Services("demo")

	created, err := services.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "demo"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(created); got["creator"] != metav1.ManagedFieldsOperationUpdate {
		t.Fatalf("after create: managers %v, want creator (Update)", got)
	}

	// A second object of the same kind reuses the field manager; its managedFields are its own.
	other, err := services.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "demo", Labels: map[string]string{"app": "b"}}},
		metav1.CreateOptions{FieldManager: "someone"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(other); len(got) != 1 || got["someone"] != metav1.ManagedFieldsOperationUpdate {
		t.Fatalf("second object: managers %v, want only someone (Update)", got)
	}

	applied, err := services.Apply(ctx, corev1ac.Service("a", "demo").WithLabels(map[string]string{"team": "one"}), metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	if applied.Labels["team"] != "one" || len(applied.Spec.Ports) != 1 {
		t.Fatalf("after apply: labels %v, ports %v; want team=one and the created port kept", applied.Labels, applied.Spec.Ports)
	}
	if got := managers(applied); got["creator"] != metav1.ManagedFieldsOperationUpdate || got["applier"] != metav1.ManagedFieldsOperationApply {
		t.Fatalf("after apply: managers %v, want creator (Update) and applier (Apply)", got)
	}

	// Another manager that applies the same field conflicts unless it forces.
	rival := corev1ac.Service("a", "demo").WithLabels(map[string]string{"team": "two"})
	if _, err := services.Apply(ctx, rival, metav1.ApplyOptions{FieldManager: "rival"}); !apierrors.IsConflict(err) {
		t.Fatalf("apply of a field another manager owns: want a conflict, got %v", err)
	}
	forced, err := services.Apply(ctx, rival, metav1.ApplyOptions{FieldManager: "rival", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if forced.Labels["team"] != "two" {
		t.Fatalf("forced apply: labels %v, want team=two", forced.Labels)
	}

	// Apply creates an object that does not exist.
	fresh, err := services.Apply(ctx, corev1ac.Service("c", "demo").WithSpec(corev1ac.ServiceSpec().WithPorts(corev1ac.ServicePort().WithPort(81))), metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh.Spec.Ports) != 1 || fresh.Spec.Ports[0].Port != 81 || managers(fresh)["applier"] != metav1.ManagedFieldsOperationApply {
		t.Fatalf("apply of a new object: ports %v, managers %v", fresh.Spec.Ports, managers(fresh))
	}
}
