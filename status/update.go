package status

import (
	"context"
	"encoding/json"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	networkingclient "k8s.io/client-go/kubernetes/typed/networking/v1"
)

// Current returns the addresses an Ingress's status holds, normalised.
func Current(ing *networkingv1.Ingress) []Address {
	return Normalize(ing.Status.LoadBalancer.Ingress)
}

// Write sets ing's status.loadBalancer.ingress to the normalised want, unless the Ingress already holds
// exactly that (in any order). It reports whether it wrote.
//
// The write is a JSON merge patch of the status subresource that carries ing's resourceVersion, so it is
// optimistic: if the Ingress changed since ing was read, the API server answers Conflict
// (apierrors.IsConflict) and nothing is written. Unlike an update of the whole object, the patch touches
// nothing but the status, which matters because informer caches hold Ingresses without managedFields and
// the last-applied-configuration annotation, and an update from such a copy would delete the annotation.
func Write(ctx context.Context, client networkingclient.IngressesGetter, ing *networkingv1.Ingress, want []Address) (bool, error) {
	want = Normalize(want)
	if Equal(Current(ing), want) {
		return false, nil
	}
	patch, err := statusPatch(ing.ResourceVersion, want)
	if err != nil {
		return false, err
	}
	if _, err := client.Ingresses(ing.Namespace).Patch(ctx, ing.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return false, fmt.Errorf("write status of ingress %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	return true, nil
}

// statusPatch builds {"metadata":{"resourceVersion":rv},"status":{"loadBalancer":{"ingress":want}}}; an
// empty want is null, which removes the list.
func statusPatch(resourceVersion string, want []Address) ([]byte, error) {
	type loadBalancer struct {
		Ingress []Address `json:"ingress"`
	}
	type status struct {
		LoadBalancer loadBalancer `json:"loadBalancer"`
	}
	type meta struct {
		ResourceVersion string `json:"resourceVersion,omitempty"`
	}
	body := struct {
		Metadata meta   `json:"metadata"`
		Status   status `json:"status"`
	}{meta{resourceVersion}, status{loadBalancer{want}}}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode status patch: %w", err)
	}
	return b, nil
}
