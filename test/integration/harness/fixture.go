//go:build integration

package harness

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// Fixture is one test's slice of the shared environment: its own namespace, and its own
// IngressClass whose spec.controller is a controller class no other test uses.
type Fixture struct {
	// T is the test.
	T *testing.T
	// Env is the run's shared environment.
	Env *Env
	// Client talks to the API server as an admin.
	Client kubernetes.Interface
	// Ctx is cancelled when the test ends.
	Ctx context.Context
	// ID is unique per fixture within the run; it is part of every name below.
	ID string
	// Namespace is created for this test.
	Namespace string
	// IngressClass is the name of the IngressClass created for this test.
	IngressClass string
	// ControllerClass is that IngressClass's spec.controller.
	ControllerClass string
	// ReactorWrapper, when not empty, is the command (and its first arguments) that StartReactor
	// and StartReactorWith run instead of Env.ReactorBinary, with the controller's arguments
	// after it: TestImage enters the image's root filesystem with it.
	ReactorWrapper []string
}

var fixtureSeq atomic.Int64

// New creates a fixture: a namespace and an IngressClass for the test, removed when it
// ends. (Nothing finalises namespaces without a controller-manager, so the namespace
// stays Terminating; the next run starts a fresh API server anyway.)
func New(t *testing.T) *Fixture {
	t.Helper()
	e := Shared()
	id := fmt.Sprintf("%d-%s", fixtureSeq.Add(1), shortName(t.Name(), 30))
	f := &Fixture{
		T:               t,
		Env:             e,
		Client:          e.Client,
		Ctx:             t.Context(),
		ID:              id,
		Namespace:       "it-" + id,
		IngressClass:    "reactor-" + id,
		ControllerClass: "k8s.io/ingress-reactor-" + id,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", f.Namespace, err)
	}
	_, err = e.Client.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: f.IngressClass},
		Spec:       networkingv1.IngressClassSpec{Controller: f.ControllerClass},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create IngressClass %s: %v", f.IngressClass, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Client.NetworkingV1().IngressClasses().Delete(ctx, f.IngressClass, metav1.DeleteOptions{}); err != nil {
			t.Logf("delete IngressClass %s: %v", f.IngressClass, err)
		}
		if err := e.Client.CoreV1().Namespaces().Delete(ctx, f.Namespace, metav1.DeleteOptions{}); err != nil {
			t.Logf("delete namespace %s: %v", f.Namespace, err)
		}
		if t.Failed() {
			t.Logf("kube-apiserver and etcd output: %s (removed after the run unless INTEGRATION_KEEP=1)", e.APIServerLog)
		}
	})
	return f
}

// shortName turns a test name into a DNS label fragment of at most max characters.
func shortName(name string, max int) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(name) {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		switch {
		case ok:
			b.WriteRune(c)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= max {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// IngressBackend is a simple path rule for Ingress.
type IngressBackend struct {
	// Path is the HTTP path; "/" when empty.
	Path string
	// PathType is Prefix when empty.
	PathType networkingv1.PathType
	// Service and Port name the backend Service and its port number.
	Service string
	Port    int32
}

// Ingress returns (without creating it) an Ingress of the fixture's class and namespace
// with one rule for host (no host when empty) and the given paths.
func (f *Fixture) Ingress(name, host string, paths ...IngressBackend) *networkingv1.Ingress {
	rule := networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{}}}
	for _, p := range paths {
		if p.Path == "" {
			p.Path = "/"
		}
		if p.PathType == "" {
			p.PathType = networkingv1.PathTypePrefix
		}
		pt := p.PathType
		rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{
			Path:     p.Path,
			PathType: &pt,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: p.Service,
				Port: networkingv1.ServiceBackendPort{Number: p.Port},
			}},
		})
	}
	class := f.IngressClass
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules:            []networkingv1.IngressRule{rule},
		},
	}
}

// CreateIngress creates ing (in the fixture's namespace when it names none) and fails
// the test on error.
func (f *Fixture) CreateIngress(ing *networkingv1.Ingress) *networkingv1.Ingress {
	f.T.Helper()
	if ing.Namespace == "" {
		ing.Namespace = f.Namespace
	}
	out, err := f.Client.NetworkingV1().Ingresses(ing.Namespace).Create(f.Ctx, ing, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatalf("create Ingress %s/%s: %v", ing.Namespace, ing.Name, err)
	}
	return out
}

// UpdateIngress re-reads the Ingress, applies mutate and updates it, retrying on
// conflicts; it fails the test on any other error.
func (f *Fixture) UpdateIngress(name string, mutate func(*networkingv1.Ingress)) *networkingv1.Ingress {
	f.T.Helper()
	api := f.Client.NetworkingV1().Ingresses(f.Namespace)
	for attempt := 0; ; attempt++ {
		ing, err := api.Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			f.T.Fatalf("get Ingress %s/%s: %v", f.Namespace, name, err)
		}
		mutate(ing)
		out, err := api.Update(f.Ctx, ing, metav1.UpdateOptions{})
		if err == nil {
			return out
		}
		if attempt >= 5 || !apierrors.IsConflict(err) {
			f.T.Fatalf("update Ingress %s/%s: %v", f.Namespace, name, err)
		}
	}
}

// DeleteIngress deletes the Ingress and fails the test on error.
func (f *Fixture) DeleteIngress(name string) {
	f.T.Helper()
	if err := f.Client.NetworkingV1().Ingresses(f.Namespace).Delete(f.Ctx, name, metav1.DeleteOptions{}); err != nil {
		f.T.Fatalf("delete Ingress %s/%s: %v", f.Namespace, name, err)
	}
}

// CreateService creates a ClusterIP Service with one TCP port named "http" (port ->
// targetPort) and no selector (tests provide its EndpointSlices), and fails the test on
// error.
func (f *Fixture) CreateService(name string, port int32, targetPort int) *corev1.Service {
	f.T.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{
				Name:       "http",
				Protocol:   corev1.ProtocolTCP,
				Port:       port,
				TargetPort: intstr.FromInt(targetPort),
			}},
		},
	}
	out, err := f.Client.CoreV1().Services(f.Namespace).Create(f.Ctx, svc, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatalf("create Service %s/%s: %v", f.Namespace, name, err)
	}
	return out
}

// CreateObjects creates objs (Services, EndpointSlices, Secrets and Ingresses; in the
// fixture's namespace unless they name one) from workers goroutines, for tests that need
// thousands of them, and fails the test on the first error. Objects built by internal/gen
// may be passed as they are: their resource version and UID are cleared first.
func (f *Fixture) CreateObjects(workers int, objs ...metav1.Object) {
	f.T.Helper()
	g, ctx := errgroup.WithContext(f.Ctx)
	g.SetLimit(workers)
	for _, o := range objs {
		g.Go(func() error { return f.createObject(ctx, o) })
	}
	if err := g.Wait(); err != nil {
		f.T.Fatal(err)
	}
}

func (f *Fixture) createObject(ctx context.Context, o metav1.Object) error {
	if o.GetNamespace() == "" {
		o.SetNamespace(f.Namespace)
	}
	o.SetResourceVersion("")
	o.SetUID("")
	ns, opts := o.GetNamespace(), metav1.CreateOptions{}
	var err error
	switch o := o.(type) {
	case *corev1.Service:
		_, err = f.Client.CoreV1().Services(ns).Create(ctx, o, opts)
	case *corev1.Secret:
		_, err = f.Client.CoreV1().Secrets(ns).Create(ctx, o, opts)
	case *discoveryv1.EndpointSlice:
		_, err = f.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, o, opts)
	case *networkingv1.Ingress:
		_, err = f.Client.NetworkingV1().Ingresses(ns).Create(ctx, o, opts)
	default:
		return fmt.Errorf("CreateObjects cannot create a %T", o)
	}
	if err != nil {
		return fmt.Errorf("create %T %s/%s: %w", o, ns, o.GetName(), err)
	}
	return nil
}
