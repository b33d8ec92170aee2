package status

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const testNamespace = "ingress"

// ip and host build Address values.
func ip(s string) Address   { return Address{IP: s} }
func host(s string) Address { return Address{Hostname: s} }

// podOpt changes a test pod.
type podOpt func(*corev1.Pod)

// pod returns a running, ready controller pod in testNamespace with the app=ctl label on node.
func pod(name, node string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: map[string]string{
			"app": "ctl", "pod-template-hash": "h-" + name,
		}},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withLabels(l map[string]string) podOpt { return func(p *corev1.Pod) { p.Labels = l } }
func withPhase(ph corev1.PodPhase) podOpt   { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func notReady() podOpt {
	return func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
}
func terminating() podOpt {
	return func(p *corev1.Pod) {
		now := metav1.NewTime(time.Unix(1700000000, 0))
		p.DeletionTimestamp = &now
		p.Finalizers = []string{"test/keep"} // the fake clientset keeps it then
	}
}

// node returns a node with the given addresses, written as "ExternalIP=1.2.3.4".
func node(name string, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, a := range addrs {
		typ, addr, _ := cut(a)
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(typ), Address: addr})
	}
	return n
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// ingress returns an Ingress in namespace "apps" whose status holds addrs.
func ingress(name string, addrs ...Address) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", ResourceVersion: "1",
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: addrs}},
	}
}

func labelsSet(m map[string]string) labels.Set { return labels.Set(m) }
