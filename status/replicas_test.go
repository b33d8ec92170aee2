package status

import (
	"context"
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestReplicaSelectorIgnoresRevisionLabels(t *testing.T) {
	self := pod("a", "n1", withLabels(map[string]string{
		"app": "ctl", "pod-template-hash": "abc", "controller-revision-hash": "x", "statefulset.kubernetes.io/pod-name": "a",
	}))
	sel, ok := ReplicaSelector(self)
	if !ok {
		t.Fatal("ReplicaSelector found nothing to select by")
	}
	for _, l := range []map[string]string{{"app": "ctl", "pod-template-hash": "other"}, {"app": "ctl"}} {
		if !sel.Matches(labelsSet(l)) {
			t.Errorf("selector %s does not match a replica of another revision %v", sel, l)
		}
	}
	if sel.Matches(labelsSet(map[string]string{"app": "web", "pod-template-hash": "abc"})) {
		t.Errorf("selector %s matches another application's pod", sel)
	}
	if _, ok := ReplicaSelector(pod("b", "n1", withLabels(map[string]string{"pod-template-hash": "abc"}))); ok {
		t.Error("a pod with only revision labels yields a selector; it would select the whole namespace")
	}
}

func TestReplicaNodeAddresses(t *testing.T) {
	nodes := map[string]*corev1.Node{
		"n1": node("n1", "ExternalIP=203.0.113.1", "InternalIP=10.0.0.1"),
		"n2": node("n2", "InternalIP=10.0.0.2"),
		"n3": node("n3", "ExternalIP=203.0.113.3"),
	}
	lookup := func(name string) *corev1.Node { return nodes[name] }
	self := pod("self", "n1")
	tests := map[string]struct {
		self *corev1.Pod // nil is self
		pods []*corev1.Pod
		want []Address
	}{
		"only self":                {pods: []*corev1.Pod{self}, want: []Address{ip("203.0.113.1")}},
		"replica on another node":  {pods: []*corev1.Pod{self, pod("b", "n2")}, want: []Address{ip("10.0.0.2"), ip("203.0.113.1")}},
		"two replicas on one node": {pods: []*corev1.Pod{self, pod("b", "n1")}, want: []Address{ip("203.0.113.1")}},
		"other app's pod ignored":  {pods: []*corev1.Pod{self, pod("web", "n3", withLabels(map[string]string{"app": "web"}))}, want: []Address{ip("203.0.113.1")}},
		"terminating replica":      {pods: []*corev1.Pod{self, pod("b", "n3", terminating())}, want: []Address{ip("203.0.113.1")}},
		"pending replica":          {pods: []*corev1.Pod{self, pod("b", "n3", withPhase(corev1.PodPending))}, want: []Address{ip("203.0.113.1")}},
		"unready replica counts":   {pods: []*corev1.Pod{self, pod("b", "n3", notReady())}, want: []Address{ip("203.0.113.1"), ip("203.0.113.3")}},
		"unscheduled replica":      {pods: []*corev1.Pod{self, pod("b", "")}, want: []Address{ip("203.0.113.1")}},
		"replica on unknown node":  {pods: []*corev1.Pod{self, pod("b", "gone")}, want: []Address{ip("203.0.113.1")}},
		// The process asking runs and serves until it exits, whatever its pod says: during its grace period,
		// and before the kubelet reported it Running.
		"self terminating, replica": {self: pod("self", "n1", terminating()), pods: []*corev1.Pod{pod("self", "n1", terminating()), pod("b", "n3")}, want: []Address{ip("203.0.113.1"), ip("203.0.113.3")}},
		"self terminating alone":    {self: pod("self", "n1", terminating()), pods: []*corev1.Pod{pod("self", "n1", terminating())}, want: []Address{ip("203.0.113.1")}},
		"self still pending":        {self: pod("self", "n1", withPhase(corev1.PodPending)), pods: []*corev1.Pod{pod("self", "n1", withPhase(corev1.PodPending))}, want: []Address{ip("203.0.113.1")}},
		"self not in the pod list":  {pods: nil, want: []Address{ip("203.0.113.1")}},
		"self not on a node yet":    {self: pod("self", ""), pods: []*corev1.Pod{pod("self", "")}, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			self := self
			if tc.self != nil {
				self = tc.self
			}
			if got := ReplicaNodeAddresses(self, tc.pods, lookup, false); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ReplicaNodeAddresses = %v, want %v", String(got), String(tc.want))
			}
		})
	}
}

func TestIsLastReplica(t *testing.T) {
	self := types.NamespacedName{Namespace: testNamespace, Name: "self"}
	tests := map[string]struct {
		self    types.NamespacedName
		objs    []runtime.Object
		want    bool
		wantErr bool
	}{
		"not a pod (no POD_NAME)":     {self: types.NamespacedName{Namespace: testNamespace}, want: true},
		"own pod does not exist":      {self: self, objs: []runtime.Object{pod("b", "n1")}, want: true},
		"alone":                       {self: self, objs: []runtime.Object{pod("self", "n1")}, want: true},
		"another ready replica":       {self: self, objs: []runtime.Object{pod("self", "n1"), pod("b", "n2")}, want: false},
		"replica of another revision": {self: self, objs: []runtime.Object{pod("self", "n1"), pod("b", "n2", withLabels(map[string]string{"app": "ctl", "pod-template-hash": "new"}))}, want: false},
		// The replacement a ReplicaSet creates while a single replica is deleted, evicted or drained.
		"replacement not ready yet":     {self: self, objs: []runtime.Object{pod("self", "n1", terminating()), pod("b", "n2", notReady())}, want: false},
		"replacement pending":           {self: self, objs: []runtime.Object{pod("self", "n1", terminating()), pod("b", "", withPhase(corev1.PodPending), notReady())}, want: false},
		"other replica failed":          {self: self, objs: []runtime.Object{pod("self", "n1"), pod("b", "n2", withPhase(corev1.PodFailed), notReady())}, want: true},
		"other replica succeeded":       {self: self, objs: []runtime.Object{pod("self", "n1"), pod("b", "n2", withPhase(corev1.PodSucceeded), notReady())}, want: true},
		"other replica stopping too":    {self: self, objs: []runtime.Object{pod("self", "n1"), pod("b", "n2", terminating())}, want: true},
		"other app's pod":               {self: self, objs: []runtime.Object{pod("self", "n1"), pod("web", "n2", withLabels(map[string]string{"app": "web"}))}, want: true},
		"self without sibling labels":   {self: self, objs: []runtime.Object{pod("self", "n1", withLabels(nil)), pod("b", "n2", withLabels(nil))}, want: true},
		"self terminating, other ready": {self: self, objs: []runtime.Object{pod("self", "n1", terminating()), pod("b", "n2")}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(tc.objs...)
			got, err := IsLastReplica(context.Background(), client, tc.self)
			if err != nil {
				t.Fatalf("IsLastReplica: %v", err)
			}
			if got != tc.want {
				t.Errorf("IsLastReplica = %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("API error is not taken for last", func(t *testing.T) {
		client := fake.NewClientset(pod("self", "n1"))
		client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("boom")
		})
		if last, err := IsLastReplica(context.Background(), client, self); err == nil || last {
			t.Errorf("IsLastReplica = %v, %v; want false and an error when pods cannot be listed", last, err)
		}
	})
}
