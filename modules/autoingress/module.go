// Package autoingress gives Services that ask for it an Ingress of their own. A Service annotated with
// ingress-reactor.io/expose (and optional companions, see spec.go) gets an Ingress of the same name that it
// controls through an owner reference; the Ingress follows the annotations, is re-created when deleted and
// is deleted when the annotation goes. Ingresses this module does not control are never touched. Deleting the
// Service is left to Kubernetes garbage collection. Where several instances with different --ingress-class
// run this module, each Service is reconciled by one of them (claimOf), so they never undo each other's writes.
package autoingress

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersnetv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Module wires the auto-ingress controller into the application. It needs Options (the app supplies them
// when --enable-auto-ingress is set).
var Module = fx.Module("autoingress",
	fx.Provide(New),
	fx.Invoke(func(*Controller) {}),
)

// Event reasons on the Service, as they appear in `kubectl describe service`.
const (
	// ReasonInvalid (Warning): an expose annotation has a bad value; the Event says which and why.
	ReasonInvalid = "InvalidExposeAnnotation"
	// ReasonNotOwned (Warning): an Ingress of the Service's name exists that this module does not control.
	ReasonNotOwned = "IngressNotOwned"
	// ReasonOtherClass (Warning): the Service names no IngressClass and its Ingress names another
	// controller's class; this controller leaves it alone.
	ReasonOtherClass = "IngressOfOtherClass"
	// ReasonRejected (Warning): the API server refused the generated Ingress.
	ReasonRejected = "IngressRejected"
	// ReasonGaveUp (Warning): reconciling failed more often than the retry limit allows.
	ReasonGaveUp = "AutoIngressFailed"
	// ReasonCreated, ReasonUpdated and ReasonDeleted (Normal) report what was done to the owned Ingress.
	ReasonCreated = "IngressCreated"
	ReasonUpdated = "IngressUpdated"
	ReasonDeleted = "IngressDeleted"
)

const (
	defaultWorkers = 5
	defaultRetries = 10
	queueName      = "autoingress"
	// metricSyncs counts reconciliations by result.
	metricSyncs = "ingress_reactor_autoingress_syncs_total"
)

// Sync results, the values of the result label of ingress_reactor_autoingress_syncs_total.
const (
	resultCreated    = "created"
	resultUpdated    = "updated"
	resultDeleted    = "deleted"
	resultUnchanged  = "unchanged"
	resultInvalid    = "invalid"
	resultNotOwned   = "not_owned"
	resultOtherClass = "other_class"
	resultError      = "error"
)

// Options configure the auto-ingress controller.
type Options struct {
	// IngressClass is the controller's --ingress-class: the spec.ingressClassName of generated Ingresses
	// whose Service names none, and the class whose Services this controller reconciles (see claimOf).
	IngressClass string
	// Workers is how many Services are reconciled in parallel; 5 when zero.
	Workers int
	// MaxRetries is how often a failing Service is retried before it gets a Warning Event and is left
	// alone until it or its Ingress changes again; 10 when zero.
	MaxRetries int
}

// Params are the auto-ingress controller's fx inputs.
type Params struct {
	fx.In
	Options   Options
	Client    kubernetes.Interface
	Factory   informers.SharedInformerFactory
	Recorder  record.EventRecorder
	Metrics   *pipeline.Metrics
	Registry  prometheus.Registerer
	Log       *zap.Logger
	Lifecycle fx.Lifecycle `optional:"true"`
}

// Controller reconciles annotated Services with the Ingresses they own.
type Controller struct {
	opts      Options
	client    kubernetes.Interface
	services  modules.Services // the shared cache holds ServiceRecords: no generated lister
	ingresses listersnetv1.IngressLister
	recorder  record.EventRecorder
	ctrl      *pipeline.Controller[types.NamespacedName]
	synced    []cache.InformerSynced
	log       *zap.Logger
	syncs     *prometheus.CounterVec

	// warned remembers the last Warning sent per Service, so that an unchanged problem does not produce a
	// new Event on every resync or unrelated update. Different keys are synced in parallel.
	mu     sync.Mutex
	warned map[types.NamespacedName]string
}

// New builds the controller and registers its informer handlers. Without fx, pass a nil Lifecycle and call
// Start and Stop yourself.
func New(p Params) (*Controller, error) {
	if p.Options.Workers <= 0 {
		p.Options.Workers = defaultWorkers
	}
	if p.Options.MaxRetries == 0 {
		p.Options.MaxRetries = defaultRetries
	}
	svcInf := p.Factory.Core().V1().Services()
	ingInf := p.Factory.Networking().V1().Ingresses()
	log := p.Log.Named("autoingress")
	c := &Controller{
		opts:      p.Options,
		client:    p.Client,
		services:  modules.NewServices(p.Factory),
		ingresses: ingInf.Lister(),
		recorder:  p.Recorder,
		synced:    []cache.InformerSynced{svcInf.Informer().HasSynced, ingInf.Informer().HasSynced},
		log:       log,
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricSyncs,
			Help: "Reconciliations of annotated Services by result: created, updated, deleted, unchanged, invalid (bad annotation), not_owned (an Ingress of that name is not ours), other_class (left to the controller of another IngressClass), error (retried).",
		}, []string{"result"}),
		warned: map[types.NamespacedName]string{},
	}
	if err := p.Registry.Register(c.syncs); err != nil {
		return nil, fmt.Errorf("autoingress: register metrics: %w", err)
	}
	q := pipeline.NewQueue(pipeline.QueueOptions[types.NamespacedName]{
		Name:       queueName,
		MaxRetries: ptr.To(p.Options.MaxRetries),
		OnGiveUp:   c.gaveUp,
		Metrics:    p.Metrics,
		Logger:     log,
	})
	c.ctrl = pipeline.NewController(q, c.sync, pipeline.ControllerOptions{Workers: p.Options.Workers})

	// A Service matters while it is annotated, and once more when the annotation goes (the handler also
	// enqueues the old object, so removal is seen).
	if _, err := svcInf.Informer().AddEventHandler(pipeline.Handler[types.NamespacedName]{
		Filter: func(obj any) bool {
			svc, ok := modules.ServiceOf(obj)
			return ok && Requested(svc)
		},
	}.For(q)); err != nil {
		return nil, fmt.Errorf("autoingress: service handler: %w", err)
	}
	if _, err := ingInf.Informer().AddEventHandler(pipeline.Handler[types.NamespacedName]{
		Keys:         c.servicesOfIngress,
		UpdateFilter: ingressChanged,
	}.For(q)); err != nil {
		return nil, fmt.Errorf("autoingress: ingress handler: %w", err)
	}
	modules.Bind(p.Lifecycle, c)
	return c, nil
}

// Start waits for the Service and Ingress caches in the background, then starts the workers.
func (c *Controller) Start(ctx context.Context) {
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
			return
		}
		c.ctrl.Start(ctx)
	}()
}

// Stop stops the workers, letting in-flight work finish within ctx.
func (c *Controller) Stop(ctx context.Context) error { return c.ctrl.Stop(ctx) }

// servicesOfIngress maps an Ingress event to the Services it can concern: the Service its controller
// reference names (ours are re-created or corrected), and an annotated Service of the same name (a foreign
// Ingress that goes away frees the name).
func (c *Controller) servicesOfIngress(obj any) []types.NamespacedName {
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		// A tombstone without its object: only the name is known.
		if k, ok := pipeline.KeyOf(obj); ok {
			return []types.NamespacedName{k}
		}
		return nil
	}
	var keys []types.NamespacedName
	if ref := metav1.GetControllerOfNoCopy(ing); ref != nil && isServiceRef(ref) {
		keys = append(keys, types.NamespacedName{Namespace: ing.Namespace, Name: ref.Name})
	}
	if svc, ok := c.services.Get(types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}); ok && Requested(svc) {
		if len(keys) == 0 || keys[0].Name != ing.Name {
			keys = append(keys, types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name})
		}
	}
	return keys
}

// ingressChanged lets through the Ingress updates that can call for a correction: spec, labels, owner
// references or deletion. Status updates (an ingress controller writing its address) are skipped.
func ingressChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*networkingv1.Ingress)
	n, ok2 := newObj.(*networkingv1.Ingress)
	if !ok1 || !ok2 {
		return true
	}
	if o.ResourceVersion == n.ResourceVersion {
		return false
	}
	return o.Generation != n.Generation || o.Generation == 0 ||
		!apiequality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		!apiequality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
		!o.DeletionTimestamp.Equal(n.DeletionTimestamp)
}

// sync brings the Ingress named like the Service in line with the Service's annotations.
func (c *Controller) sync(ctx context.Context, key types.NamespacedName) error {
	result, err := c.reconcile(ctx, key)
	c.syncs.WithLabelValues(result).Inc()
	return err
}

func (c *Controller) reconcile(ctx context.Context, key types.NamespacedName) (string, error) {
	svc, ok := c.services.Get(key)
	switch {
	case !ok:
		// Garbage collection deletes the Ingress through its owner reference; nothing to do here.
		c.clearWarning(key)
		return resultUnchanged, nil
	case svc.DeletionTimestamp != nil:
		return resultUnchanged, nil
	}
	ing, err := c.ingresses.Ingresses(key.Namespace).Get(key.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return resultError, fmt.Errorf("get ingress %s: %w", key, err)
	}
	if err != nil {
		ing = nil
	}

	if !Requested(svc) {
		c.clearWarning(key)
		if ing == nil || !ControlledBy(ing, svc) {
			return resultUnchanged, nil
		}
		return c.delete(ctx, svc, ing)
	}

	var owned *networkingv1.Ingress
	if ing != nil && ControlledBy(ing, svc) && ing.DeletionTimestamp == nil {
		owned = ing
	}
	switch claimOf(svc, owned, c.opts.IngressClass) {
	case claimNamedOther:
		c.clearWarning(key)
		return resultOtherClass, nil
	case claimHeldByOther:
		c.warn(svc, ReasonOtherClass, fmt.Sprintf("Ingress %s has ingressClassName %q, not this controller's %q, and the Service names no class: "+
			"another ingress-reactor instance (or a hand edit) set that class, so the Ingress is left to that class's controller. "+
			"Set %s on the Service to choose the class",
			owned.Name, *owned.Spec.IngressClassName, c.opts.IngressClass, AnnotationIngressClass))
		return resultOtherClass, nil
	}

	expose, err := ParseExpose(svc, c.opts.IngressClass)
	if err != nil {
		msg := "Invalid expose annotations, no Ingress created or changed: " + err.Error()
		if ing != nil && ControlledBy(ing, svc) {
			msg = "Invalid expose annotations; Ingress " + ing.Name + " keeps its last valid configuration: " + err.Error()
		}
		c.warn(svc, ReasonInvalid, msg)
		return resultInvalid, nil
	}
	want := DesiredIngress(svc, expose)

	switch {
	case ing == nil:
		return c.create(ctx, svc, want)
	case !ControlledBy(ing, svc):
		msg := fmt.Sprintf("Ingress %s exists and is not controlled by this Service; it is left unchanged. "+
			"Delete or rename it, or rename the Service, to let the expose annotation take effect", ing.Name)
		if ref := metav1.GetControllerOfNoCopy(ing); ref != nil && isServiceRef(ref) && ref.Name == svc.Name {
			msg = fmt.Sprintf("Ingress %s belongs to an earlier Service of this name (uid %s) and waits for garbage collection; "+
				"it is re-created for this Service once it is gone", ing.Name, ref.UID)
		}
		c.warn(svc, ReasonNotOwned, msg)
		return resultNotOwned, nil
	case ing.DeletionTimestamp != nil:
		// Its deletion event brings us back to re-create it.
		return resultUnchanged, nil
	}
	c.clearWarning(key)
	if apiequality.Semantic.DeepEqual(ing.Spec, want.Spec) && hasLabels(ing.Labels, want.Labels) {
		return resultUnchanged, nil
	}
	return c.update(ctx, svc, ing, want)
}

func (c *Controller) create(ctx context.Context, svc *corev1.Service, want *networkingv1.Ingress) (string, error) {
	_, err := c.client.NetworkingV1().Ingresses(want.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: ManagedByValue})
	switch {
	case err == nil:
	case apierrors.IsInvalid(err):
		// The API server's validation differs from ours; only an edit of the Service can help.
		c.warn(svc, ReasonRejected, "The API server rejected the generated Ingress: "+err.Error())
		return resultInvalid, pipeline.Terminal(fmt.Errorf("create ingress %s/%s: %w", want.Namespace, want.Name, err))
	default:
		// AlreadyExists means our cache is behind; the retry sees the object.
		return resultError, fmt.Errorf("create ingress %s/%s: %w", want.Namespace, want.Name, err)
	}
	c.clearWarning(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	c.log.Info("ingress created", zap.String("service", svc.Namespace+"/"+svc.Name), zap.String("host", want.Spec.Rules[0].Host))
	c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonCreated, "Created Ingress %s for host %s", want.Name, want.Spec.Rules[0].Host)
	return resultCreated, nil
}

// update patches spec and our labels only, with the cached resourceVersion as a precondition: a conflict
// fails the patch and the queue retries with a fresh cache. A patch (rather than an update of the cached
// object) leaves alone what the informer cache strips, and annotations other tools put on the Ingress.
func (c *Controller) update(ctx context.Context, svc *corev1.Service, cur, want *networkingv1.Ingress) (string, error) {
	patch, err := updatePatch(cur.ResourceVersion, want)
	if err != nil {
		return resultError, pipeline.Terminal(fmt.Errorf("build patch for ingress %s/%s: %w", cur.Namespace, cur.Name, err))
	}
	_, err = c.client.NetworkingV1().Ingresses(cur.Namespace).Patch(ctx, cur.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: ManagedByValue})
	switch {
	case err == nil:
	case apierrors.IsInvalid(err):
		c.warn(svc, ReasonRejected, "The API server rejected the update of the generated Ingress: "+err.Error())
		return resultInvalid, pipeline.Terminal(fmt.Errorf("update ingress %s/%s: %w", cur.Namespace, cur.Name, err))
	default:
		// Conflicts land here too and are retried quietly by the queue.
		return resultError, fmt.Errorf("update ingress %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	c.log.Info("ingress updated", zap.String("service", svc.Namespace+"/"+svc.Name), zap.String("host", want.Spec.Rules[0].Host))
	c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonUpdated, "Updated Ingress %s to follow the expose annotations", cur.Name)
	return resultUpdated, nil
}

// updatePatch is a JSON merge patch that sets the whole spec (explicit nulls clear fields we do not set)
// and our labels, guarded by resourceVersion.
func updatePatch(resourceVersion string, want *networkingv1.Ingress) ([]byte, error) {
	specJSON, err := json.Marshal(want.Spec)
	if err != nil {
		return nil, err
	}
	spec := map[string]any{}
	if err := json.Unmarshal(specJSON, &spec); err != nil {
		return nil, err
	}
	for _, field := range []string{"ingressClassName", "defaultBackend", "tls", "rules"} {
		if _, ok := spec[field]; !ok {
			spec[field] = nil
		}
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion, "labels": want.Labels},
		"spec":     spec,
	})
}

// delete removes an Ingress we control, only if it is still the version we looked at: should someone have
// taken it over meanwhile, the precondition fails and the retry sees the new owner.
func (c *Controller) delete(ctx context.Context, svc *corev1.Service, ing *networkingv1.Ingress) (string, error) {
	uid, rv := ing.UID, ing.ResourceVersion
	err := c.client.NetworkingV1().Ingresses(ing.Namespace).Delete(ctx, ing.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	switch {
	case apierrors.IsNotFound(err):
		return resultUnchanged, nil
	case err != nil:
		return resultError, fmt.Errorf("delete ingress %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	c.log.Info("ingress deleted: expose annotation removed", zap.String("service", svc.Namespace+"/"+svc.Name))
	c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonDeleted, "Deleted Ingress %s: the expose annotation was removed", ing.Name)
	return resultDeleted, nil
}

// hasLabels reports whether every label of want is set to the same value in have.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// warn sends a Warning Event on svc unless the same message was the last one sent for it.
func (c *Controller) warn(svc *corev1.Service, reason, msg string) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	c.mu.Lock()
	repeated := c.warned[key] == reason+msg
	c.warned[key] = reason + msg
	c.mu.Unlock()
	if !repeated {
		c.recorder.Event(svc, corev1.EventTypeWarning, reason, msg)
	}
}

func (c *Controller) clearWarning(key types.NamespacedName) {
	c.mu.Lock()
	delete(c.warned, key)
	c.mu.Unlock()
}

// gaveUp puts a Warning Event on the Service whose reconciliation failed too often.
func (c *Controller) gaveUp(key types.NamespacedName, lastErr error) {
	msg := fmt.Sprintf("Gave up reconciling the Ingress after %d retries; it is retried when the Service or the Ingress changes. Last error: %v",
		max(c.opts.MaxRetries, 0), lastErr)
	svc, ok := c.services.Get(key)
	if !ok {
		return // deleted meanwhile: there is no one to tell
	}
	c.clearWarning(key)
	c.recorder.Event(svc, corev1.EventTypeWarning, ReasonGaveUp, msg)
}
