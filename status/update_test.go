package status

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestWrite(t *testing.T) {
	tests := map[string]struct {
		current   []Address
		want      []Address
		wantWrite bool
		wantAfter []Address
	}{
		"publish to an empty status": {want: []Address{ip("192.0.2.1")}, wantWrite: true, wantAfter: []Address{ip("192.0.2.1")}},
		"already current":            {current: []Address{ip("192.0.2.1")}, want: []Address{ip("192.0.2.1")}},
		"already current in another order with a duplicate": {
			current: []Address{host("lb.example"), ip("192.0.2.1"), ip("192.0.2.1")},
			want:    []Address{ip("192.0.2.1"), host("lb.example")},
		},
		"changed address": {
			current: []Address{ip("192.0.2.1")}, want: []Address{ip("192.0.2.2")},
			wantWrite: true, wantAfter: []Address{ip("192.0.2.2")},
		},
		"written sorted": {
			want:      []Address{host("lb.example"), ip("192.0.2.9"), ip("192.0.2.10")},
			wantWrite: true, wantAfter: []Address{ip("192.0.2.9"), ip("192.0.2.10"), host("lb.example")},
		},
		"clear":                 {current: []Address{ip("192.0.2.1")}, want: nil, wantWrite: true, wantAfter: nil},
		"clear an empty status": {want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ing := ingress("web", tc.current...)
			client := fake.NewClientset(ing)
			client.ClearActions()
			wrote, err := Write(context.Background(), client.NetworkingV1(), ing, tc.want)
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if wrote != tc.wantWrite {
				t.Errorf("Write reported wrote=%v, want %v", wrote, tc.wantWrite)
			}
			if n := len(client.Actions()); tc.wantWrite && n != 1 || !tc.wantWrite && n != 0 {
				t.Errorf("Write made %d API calls: %v", n, client.Actions())
			}
			got, err := client.NetworkingV1().Ingresses("apps").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			after := tc.wantAfter
			if !tc.wantWrite {
				after = tc.current
			}
			if !reflect.DeepEqual(got.Status.LoadBalancer.Ingress, after) {
				t.Errorf("status after Write = %v, want %v", got.Status.LoadBalancer.Ingress, after)
			}
			if _, ok := got.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; !ok {
				t.Errorf("Write removed an annotation: %v", got.Annotations)
			}
		})
	}
}

func TestWritePatchIsOptimisticAndStatusOnly(t *testing.T) {
	ing := ingress("web")
	ing.ResourceVersion = "42"
	client := fake.NewClientset(ing)
	var patch []byte
	var sub string
	client.PrependReactor("patch", "ingresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		patch, sub = pa.GetPatch(), pa.GetSubresource()
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, "web", nil)
	})
	_, err := Write(context.Background(), client.NetworkingV1(), ing, []Address{ip("192.0.2.1")})
	if !apierrors.IsConflict(err) {
		t.Errorf("Write error = %v, want the API server's Conflict, recognisable by apierrors.IsConflict", err)
	}
	if sub != "status" {
		t.Errorf("patched subresource %q, want status", sub)
	}
	var body map[string]any
	if err := json.Unmarshal(patch, &body); err != nil {
		t.Fatalf("patch is not JSON: %s", patch)
	}
	want := map[string]any{
		"metadata": map[string]any{"resourceVersion": "42"},
		"status":   map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "192.0.2.1"}}}},
	}
	if !reflect.DeepEqual(body, want) {
		t.Errorf("patch = %s, want only the resourceVersion precondition and the status", patch)
	}
}
