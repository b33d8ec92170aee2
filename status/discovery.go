package status

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Source says where the published addresses come from, in order of precedence.
type Source string

const (
	// SourceStatic is --publish-status-address: a fixed list.
	SourceStatic Source = "publish-status-address"
	// SourceService is --publish-service: a Service's load balancer or external IPs.
	SourceService Source = "publish-service"
	// SourceNodes is the default: the addresses of the nodes running the controller's pods.
	SourceNodes Source = "nodes"
)

// DiscoveryOptions say where the addresses to publish come from; the first one set wins.
type DiscoveryOptions struct {
	// Static is --publish-status-address, parsed (see ParseAddresses).
	Static []Address
	// PublishService is --publish-service.
	PublishService types.NamespacedName
	// Pod is the controller's own pod (POD_NAMESPACE, POD_NAME). Without Static or PublishService, the
	// controller's pods are those in Pod's namespace that carry Pod's labels (see ReplicaSelector).
	Pod types.NamespacedName
	// NodeInternalIP publishes nodes' InternalIP addresses even where they have ExternalIP ones
	// (--report-node-internal-ip-address).
	NodeInternalIP bool
}

// Discovery finds the addresses to publish. It watches only what its source needs, with informers of its
// own: the published Service alone (one object), or the pods of the controller's namespace and the nodes
// (kept as name and addresses only). They are independent of any namespace the rest of the controller is
// limited to.
type Discovery struct {
	opts     DiscoveryOptions
	source   Source
	factory  informers.SharedInformerFactory
	services listerscorev1.ServiceLister
	pods     listerscorev1.PodLister
	nodes    listerscorev1.NodeLister
	infs     []cache.SharedIndexInformer
}

// NewDiscovery prepares the informers the configured source needs; Start starts them. Without Static,
// PublishService or Pod.Name no source is available: nothing is watched and Addresses reports ErrNoPod.
func NewDiscovery(client kubernetes.Interface, opts DiscoveryOptions) *Discovery {
	d := &Discovery{opts: opts, source: SourceNodes}
	switch {
	case len(opts.Static) > 0:
		d.source = SourceStatic
	case opts.PublishService.Name != "":
		d.source = SourceService
		d.factory = informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithNamespace(opts.PublishService.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", opts.PublishService.Name).String()
			}))
		svc := d.factory.Core().V1().Services()
		d.services = svc.Lister()
		d.infs = append(d.infs, svc.Informer())
	case opts.Pod.Name == "":
		// Outside a pod nothing tells which pods are the controller's: watching every pod and node would
		// cost memory and API traffic for an answer that is always ErrNoPod.
	default:
		d.factory = informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithNamespace(opts.Pod.Namespace),
			informers.WithTransform(minimalTransform))
		pods, nodes := d.factory.Core().V1().Pods(), d.factory.Core().V1().Nodes()
		d.pods, d.nodes = pods.Lister(), nodes.Lister()
		d.infs = append(d.infs, pods.Informer(), nodes.Informer())
	}
	return d
}

// Source returns where the addresses come from.
func (d *Discovery) Source() Source { return d.source }

// OnChange calls fn (on an informer goroutine) whenever something the addresses depend on changes.
// fn should be quick. Call it before Start.
func (d *Discovery) OnChange(fn func()) error {
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { fn() },
		UpdateFunc: func(o, n any) { relevantUpdate(o, n, fn) },
		DeleteFunc: func(any) { fn() },
	}
	for _, inf := range d.infs {
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("status discovery: add event handler: %w", err)
		}
	}
	return nil
}

// Start starts the informers; they stop when stop is closed or Shutdown is called.
func (d *Discovery) Start(stop <-chan struct{}) {
	if d.factory != nil {
		d.factory.Start(stop)
	}
}

// HasSynced reports whether the informers have listed their objects once.
func (d *Discovery) HasSynced() bool {
	for _, inf := range d.infs {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// Shutdown waits for the informers' goroutines after stop was closed.
func (d *Discovery) Shutdown() {
	if d.factory != nil {
		d.factory.Shutdown()
	}
}

// Errors of Addresses, for errors.Is.
var (
	// ErrNoPublishService means the --publish-service Service does not exist.
	ErrNoPublishService = errors.New("publish service not found")
	// ErrNoPod means the controller's own pod is unknown, so its nodes cannot be found.
	ErrNoPod = errors.New("controller pod not found")
	// ErrNoNodeAddresses means the nodes of the controller's pods have no address (yet): the addresses are
	// unknown, which is no reason to clear what the Ingresses have.
	ErrNoNodeAddresses = errors.New("no node addresses")
)

// Addresses returns the normalised addresses to publish now. An error means they cannot be known (the
// Service or the controller's pod is missing): callers keep what the Ingresses have rather than clear it.
// An empty list without error is an answer, for example a LoadBalancer Service still pending; the node
// source never gives one, since the controller runs on a node (see ErrNoNodeAddresses).
func (d *Discovery) Addresses() ([]Address, error) {
	switch d.source {
	case SourceStatic:
		return Normalize(d.opts.Static), nil
	case SourceService:
		svc, err := d.services.Services(d.opts.PublishService.Namespace).Get(d.opts.PublishService.Name)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s", ErrNoPublishService, d.opts.PublishService)
		}
		if err != nil {
			return nil, fmt.Errorf("get publish service %s: %w", d.opts.PublishService, err)
		}
		return ServiceAddresses(svc), nil
	default:
		if d.opts.Pod.Name == "" {
			return nil, fmt.Errorf("%w: POD_NAME is not set (not running in a pod?), so no status address source is available; "+
				"set --publish-status-address or --publish-service", ErrNoPod)
		}
		self, err := d.pods.Pods(d.opts.Pod.Namespace).Get(d.opts.Pod.Name)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s (set --publish-status-address or --publish-service outside a pod)", ErrNoPod, d.opts.Pod)
		}
		if err != nil {
			return nil, fmt.Errorf("get controller pod %s: %w", d.opts.Pod, err)
		}
		pods, err := d.pods.Pods(d.opts.Pod.Namespace).List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("list pods in %s: %w", d.opts.Pod.Namespace, err)
		}
		addrs := ReplicaNodeAddresses(self, pods, func(name string) *corev1.Node {
			n, err := d.nodes.Get(name)
			if err != nil {
				return nil
			}
			return n
		}, d.opts.NodeInternalIP)
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%w: neither the node of controller pod %s (%q) nor those of its other running replicas have an ExternalIP or InternalIP",
				ErrNoNodeAddresses, d.opts.Pod, self.Spec.NodeName)
		}
		return addrs, nil
	}
}

// relevantUpdate calls fn unless the update changed nothing but the resource version (a resync, or a
// node heartbeat that the minimal transform reduced to no change).
func relevantUpdate(oldObj, newObj any, fn func()) {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
		return
	}
	switch o := oldObj.(type) {
	case *corev1.Node:
		if n, ok := newObj.(*corev1.Node); ok && apiequality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses) {
			return
		}
	case *corev1.Pod:
		if n, ok := newObj.(*corev1.Pod); ok && samePodForStatus(o, n) {
			return
		}
	}
	fn()
}

func samePodForStatus(a, b *corev1.Pod) bool {
	return a.Spec.NodeName == b.Spec.NodeName && a.Status.Phase == b.Status.Phase &&
		(a.DeletionTimestamp == nil) == (b.DeletionTimestamp == nil) &&
		apiequality.Semantic.DeepEqual(a.Labels, b.Labels) && IsReady(a) == IsReady(b)
}

// minimalTransform keeps only what address discovery reads from pods and nodes, so that watching every
// node of a large cluster costs little memory.
func minimalTransform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion},
			Status:     corev1.NodeStatus{Addresses: o.Status.Addresses},
		}, nil
	case *corev1.Pod:
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: o.Name, Namespace: o.Namespace, UID: o.UID, ResourceVersion: o.ResourceVersion,
				Labels: o.Labels, DeletionTimestamp: o.DeletionTimestamp,
			},
			Spec:   corev1.PodSpec{NodeName: o.Spec.NodeName},
			Status: corev1.PodStatus{Phase: o.Status.Phase},
		}
		for _, c := range o.Status.Conditions {
			if c.Type == corev1.PodReady {
				p.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
			}
		}
		return p, nil
	default:
		// Tombstones carry objects that were transformed when they entered the cache.
		return obj, nil
	}
}
