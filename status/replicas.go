package status

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// revisionLabels differ between the pods of one controller across a rolling update; they are left out when
// the controller's pods are found by its own pod's labels, so old and new replicas count as one controller.
var revisionLabels = []string{
	"pod-template-hash",                  // Deployment
	"controller-revision-hash",           // DaemonSet, StatefulSet
	"pod-template-generation",            // DaemonSet
	"statefulset.kubernetes.io/pod-name", // StatefulSet: unique per pod
	"apps.kubernetes.io/pod-index",       // StatefulSet: unique per pod
}

// ReplicaSelector returns the selector that finds the controller's pods: the labels of its own pod without
// the per-revision and per-pod labels Kubernetes adds. ok is false when nothing is left to select by; then
// only the pod itself is known to belong to the controller.
func ReplicaSelector(self *corev1.Pod) (sel labels.Selector, ok bool) {
	set := maps.Clone(self.Labels)
	for _, l := range revisionLabels {
		delete(set, l)
	}
	if len(set) == 0 {
		return labels.Nothing(), false
	}
	return labels.SelectorFromSet(set), true
}

// IsActiveReplica reports whether a controller pod serves traffic for the purpose of publishing its node:
// scheduled, running, and not being deleted. Readiness is deliberately not required, so that a flapping
// readiness probe does not rewrite the status of every Ingress.
func IsActiveReplica(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
}

// IsReady reports whether a pod has the Ready condition and is not being deleted.
func IsReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// IsSibling reports whether a pod may still serve as a replica of the controller: it is not being deleted
// and has not ended (Succeeded or Failed, for example evicted). Phase and readiness do not matter otherwise:
// the replacement a ReplicaSet creates for a deleted or evicted pod is Pending or not Ready yet while the
// old pod shuts down, and it publishes the addresses as soon as it runs.
func IsSibling(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// IsLastReplica reports whether no other replica of the controller remains: no other pod selected by
// ReplicaSelector(self) is a sibling (see IsSibling). It answers true when self is not a pod at all (empty
// name, or no such pod: the controller runs outside the cluster) and when self has no labels to find
// siblings by. Pods being deleted do not count, so when every replica stops at once (scale to zero,
// uninstall) each of them sees itself as the last.
func IsLastReplica(ctx context.Context, client kubernetes.Interface, self types.NamespacedName) (bool, error) {
	if self.Name == "" {
		return true, nil
	}
	pod, err := client.CoreV1().Pods(self.Namespace).Get(ctx, self.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get controller pod %s: %w", self, err)
	}
	sel, ok := ReplicaSelector(pod)
	if !ok {
		return true, nil
	}
	list, err := client.CoreV1().Pods(self.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return false, fmt.Errorf("list controller pods in %s (%s): %w", self.Namespace, sel, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Name != self.Name && IsSibling(p) {
			return false, nil
		}
	}
	return true, nil
}

// ReplicaNodeAddresses returns the addresses of the nodes that run a replica of the controller: self's
// node, and the nodes of the other active replicas (see IsActiveReplica) among the pods in pods that
// ReplicaSelector(self) selects. self counts whatever its phase and even while it is being deleted: the
// process asking is running and still serves until it exits. node looks a node up by name; a node it
// does not know contributes nothing. internalFirst picks nodes' InternalIP addresses before their
// ExternalIP ones (see NodeAddresses).
func ReplicaNodeAddresses(self *corev1.Pod, pods []*corev1.Pod, node func(name string) *corev1.Node, internalFirst bool) []Address {
	sel, ok := ReplicaSelector(self)
	seen := map[string]bool{}
	var out []Address
	add := func(nodeName string) {
		if nodeName == "" || seen[nodeName] {
			return
		}
		seen[nodeName] = true
		out = append(out, NodeAddresses(node(nodeName), internalFirst)...)
	}
	add(self.Spec.NodeName)
	for _, p := range pods {
		sibling := p.Namespace == self.Namespace && p.Name != self.Name && ok && sel.Matches(labels.Set(p.Labels))
		if sibling && IsActiveReplica(p) {
			add(p.Spec.NodeName)
		}
	}
	return Normalize(out)
}
