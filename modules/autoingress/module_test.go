package autoingress

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// waitLimit bounds every wait; passing tests never get near it, it only bounds a broken one.
const waitLimit = moduletest.WaitLimit

var ingressesGVR = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}

// testEnv is a controller on a fake clientset with synced informers.
type testEnv struct {
	client   *fake.Clientset
	ctrl     *Controller
	recorder *record.FakeRecorder
	logs     *observer.ObservedLogs
	ctx      context.Context
}

// newTestEnv builds the controller over objs. reactors run before the fake's own object tracker, to inject
// API errors. The informers are started and synced; the workers are not (see run).
func newTestEnv(t *testing.T, opts Options, objs []runtime.Object, reactors ...k8stesting.ReactionFunc) *testEnv {
	t.Helper()
	client := fake.NewClientset(objs...)
	for _, r := range reactors {
		client.PrependReactor("*", "ingresses", r)
	}
	return newTestEnvOn(t, client, opts)
}

// newTestEnvOn builds a controller with informers of its own over an existing fake API, as a second
// controller instance in the same cluster would be.
func newTestEnvOn(t *testing.T, client *fake.Clientset, opts Options) *testEnv {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	if opts.IngressClass == "" {
		opts.IngressClass = testClass
	}
	recorder := record.NewFakeRecorder(1000)
	c, err := New(Params{
		Options:  opts,
		Client:   client,
		Factory:  factory,
		Recorder: recorder,
		Metrics:  pipeline.NewMetrics(reg),
		Registry: reg,
		Log:      zap.New(core),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache of %v did not sync", typ)
		}
	}
	// Writes must reach the tracker before the test looks; the action log is the fake's record of them.
	client.ClearActions()
	return &testEnv{client: client, ctrl: c, recorder: recorder, logs: logs, ctx: ctx}
}

// run starts the workers and stops them when the test ends.
func (e *testEnv) run(t *testing.T) {
	t.Helper()
	e.ctrl.Start(e.ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := e.ctrl.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
}

// writes lists the write verbs sent for Ingresses, e.g. ["create"].
func (e *testEnv) writes() []string {
	var out []string
	for _, a := range e.client.Actions() {
		if a.GetResource() != ingressesGVR {
			continue
		}
		switch v := a.GetVerb(); v {
		case "create", "update", "patch", "delete":
			out = append(out, v)
		}
	}
	return out
}

// events drains the Events recorded so far ("Type Reason message").
func (e *testEnv) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// ingress reads the Ingress from the fake API; nil when it does not exist.
func (e *testEnv) ingress(t *testing.T, name string) *networkingv1.Ingress {
	t.Helper()
	ing, err := e.client.NetworkingV1().Ingresses(testNS).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get ingress %s: %v", name, err)
	}
	return ing
}

func (e *testEnv) syncCount(result string) float64 {
	var m dto.Metric
	if err := e.ctrl.syncs.WithLabelValues(result).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: testNS, Name: name}
}

func TestSync(t *testing.T) {
	conflictOnPatch := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "patch" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, "web", errors.New("the object has been modified"))
	}
	rejectCreate := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "create" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}, "web",
			field.ErrorList{field.Invalid(field.NewPath("spec", "rules").Index(0).Child("host"), "x", "admission says no")})
	}
	// What the OwnerReferencesPermissionEnforcement admission plugin (on by default in OpenShift) does to a
	// controller that may not update services/finalizers: an owner reference that blocks the Service's
	// deletion is refused.
	forbidBlockingOwnerRefs := func(a k8stesting.Action) (bool, runtime.Object, error) {
		create, ok := a.(k8stesting.CreateAction)
		if !ok {
			return false, nil, nil
		}
		ing, ok := create.GetObject().(*networkingv1.Ingress)
		if !ok {
			return false, nil, nil
		}
		for _, ref := range ing.OwnerReferences {
			if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, ing.Name,
					errors.New("cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"))
			}
		}
		return false, nil, nil
	}
	deleting := metav1.Now()

	tests := map[string]struct {
		objs     []runtime.Object
		reactors []k8stesting.ReactionFunc
		// key is the Service synced; "web" when empty.
		key string
		// want is the Ingress "web" after the sync (compared on labels, annotations, owner references and
		// spec); nil means it must not exist.
		want *networkingv1.Ingress
		// wantWrites are the Ingress write verbs sent.
		wantWrites []string
		// wantEvents are "Type Reason" of the Events on the Service, in order; wantEventText must appear in
		// the first one.
		wantEvents    []string
		wantEventText string
		wantResult    string
		// wantErr: "" none, "retry" an error the queue retries, "terminal" one it does not.
		wantErr string
	}{
		"annotated service gets an owned ingress": {
			objs:       []runtime.Object{service("web", exposed("app.example.com"))},
			want:       generated("web", "app.example.com"),
			wantWrites: []string{"create"},
			wantEvents: []string{"Normal " + ReasonCreated}, wantEventText: "app.example.com",
			wantResult: resultCreated,
		},
		"every companion annotation shapes the ingress": {
			objs: []runtime.Object{service("web", exposed("api.example.com"), ports(port("http", 80), port("admin", 9000)), annotated(
				AnnotationPath, "/admin", AnnotationPathType, "Exact", AnnotationPort, "admin",
				AnnotationTLSSecret, "api-tls", AnnotationIngressClass, testClass))},
			want: ingress("web", ownedBy("web", svcUID), managed(), withClass(testClass),
				withRule("api.example.com", "/admin", networkingv1.PathTypeExact, networkingv1.ServiceBackendPort{Name: "admin"}),
				withTLS("api.example.com", "api-tls")),
			wantWrites: []string{"create"},
			wantEvents: []string{"Normal " + ReasonCreated},
			wantResult: resultCreated,
		},
		"owner reference does not block the service's deletion, so no services/finalizers permission is needed": {
			objs:       []runtime.Object{service("web", exposed("app.example.com"))},
			reactors:   []k8stesting.ReactionFunc{forbidBlockingOwnerRefs},
			want:       generated("web", "app.example.com"),
			wantWrites: []string{"create"},
			wantEvents: []string{"Normal " + ReasonCreated},
			wantResult: resultCreated,
		},
		"service naming another class is left to the instance of that class": {
			objs:       []runtime.Object{service("web", exposed("app.example.com"), annotated(AnnotationIngressClass, "other"))},
			want:       nil,
			wantResult: resultOtherClass,
		},
		"service naming another class: its ingress of our class is left to the instance of that class": {
			objs: []runtime.Object{
				service("web", exposed("new.example.com"), annotated(AnnotationIngressClass, "other")),
				generated("web", "old.example.com"),
			},
			want:       generated("web", "old.example.com"),
			wantResult: resultOtherClass,
		},
		"service naming our class takes its ingress over from another class": {
			objs: []runtime.Object{
				service("web", exposed("app.example.com"), annotated(AnnotationIngressClass, testClass)),
				generated("web", "app.example.com", withClass("other")),
			},
			want:       generated("web", "app.example.com"),
			wantWrites: []string{"patch"},
			wantEvents: []string{"Normal " + ReasonUpdated},
			wantResult: resultUpdated,
		},
		"service naming no class: its ingress of another class is not patched back, one warning": {
			objs: []runtime.Object{
				service("web", exposed("new.example.com")),
				generated("web", "old.example.com", withClass("other")),
			},
			want:       generated("web", "old.example.com", withClass("other")),
			wantEvents: []string{"Warning " + ReasonOtherClass}, wantEventText: `ingressClassName "other"`,
			wantResult: resultOtherClass,
		},
		"service naming no class: its ingress without a class gets ours back": {
			objs: []runtime.Object{
				service("web", exposed("app.example.com")),
				generated("web", "app.example.com", gen.IngressFunc(func(i *networkingv1.Ingress) { i.Spec.IngressClassName = nil })),
			},
			want:       generated("web", "app.example.com"),
			wantWrites: []string{"patch"},
			wantEvents: []string{"Normal " + ReasonUpdated},
			wantResult: resultUpdated,
		},
		"invalid class name: clear event, no ingress": {
			objs:       []runtime.Object{service("web", exposed("app.example.com"), annotated(AnnotationIngressClass, "Not A Class"))},
			want:       nil,
			wantEvents: []string{"Warning " + ReasonInvalid}, wantEventText: AnnotationIngressClass + `: "Not A Class" is not a valid IngressClass name`,
			wantResult: resultInvalid,
		},
		"ingress already as wanted is not written": {
			objs:       []runtime.Object{service("web", exposed("app.example.com")), generated("web", "app.example.com")},
			want:       generated("web", "app.example.com"),
			wantResult: resultUnchanged,
		},
		"edited host updates the ingress and keeps what others added": {
			objs: []runtime.Object{
				service("web", exposed("new.example.com")),
				generated("web", "old.example.com", withLabel("team", "a"), withAnnotation("nginx.ingress.kubernetes.io/proxy-body-size", "8m")),
			},
			want:       generated("web", "new.example.com", withLabel("team", "a"), withAnnotation("nginx.ingress.kubernetes.io/proxy-body-size", "8m")),
			wantWrites: []string{"patch"},
			wantEvents: []string{"Normal " + ReasonUpdated},
			wantResult: resultUpdated,
		},
		"removed tls annotation clears the tls section": {
			objs: []runtime.Object{
				service("web", exposed("app.example.com")),
				generated("web", "app.example.com", withTLS("app.example.com", "old-tls")),
			},
			want:       generated("web", "app.example.com"),
			wantWrites: []string{"patch"},
			wantEvents: []string{"Normal " + ReasonUpdated},
			wantResult: resultUpdated,
		},
		"lost managed-by label is put back": {
			objs: []runtime.Object{
				service("web", exposed("app.example.com")),
				generated("web", "app.example.com", gen.IngressFunc(func(i *networkingv1.Ingress) { i.Labels = nil })),
			},
			want:       generated("web", "app.example.com"),
			wantWrites: []string{"patch"},
			wantEvents: []string{"Normal " + ReasonUpdated},
			wantResult: resultUpdated,
		},
		"hand edit of the owned ingress's spec is reverted": {
			objs: []runtime.Object{
				service("web", exposed("app.example.com")),
				generated("web", "app.example.com", withRule("app.example.com", "/", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Number: 9999})),
			},
			want:       generated("web", "app.example.com"),
			wantWrites: []string{"patch"},
			wantEvents: []string{"Normal " + ReasonUpdated},
			wantResult: resultUpdated,
		},
		"removed annotation deletes the owned ingress": {
			objs:       []runtime.Object{service("web"), generated("web", "app.example.com")},
			want:       nil,
			wantWrites: []string{"delete"},
			wantEvents: []string{"Normal " + ReasonDeleted},
			wantResult: resultDeleted,
		},
		"removed annotation leaves a foreign ingress alone": {
			objs:       []runtime.Object{service("web"), ingress("web", withClass("other"))},
			want:       ingress("web", withClass("other")),
			wantResult: resultUnchanged,
		},
		"foreign ingress of the same name is not touched": {
			objs: []runtime.Object{
				service("web", exposed("app.example.com")),
				ingress("web", withClass("other"), withRule("hand.example", "/", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Number: 1})),
			},
			want:       ingress("web", withClass("other"), withRule("hand.example", "/", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Number: 1})),
			wantEvents: []string{"Warning " + ReasonNotOwned}, wantEventText: "not controlled by this Service",
			wantResult: resultNotOwned,
		},
		"ingress of an earlier service of the same name waits for garbage collection": {
			objs: []runtime.Object{
				service("web", exposed("app.example.com")),
				generated("web", "app.example.com", ownedBy("web", "old-uid"), withRule("app.example.com", "/old", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Number: 80})),
			},
			want:       generated("web", "app.example.com", ownedBy("web", "old-uid"), withRule("app.example.com", "/old", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Number: 80})),
			wantEvents: []string{"Warning " + ReasonNotOwned}, wantEventText: "garbage collection",
			wantResult: resultNotOwned,
		},
		"invalid host: clear event, no ingress": {
			objs:       []runtime.Object{service("web", exposed("Not_A_Host"))},
			want:       nil,
			wantEvents: []string{"Warning " + ReasonInvalid}, wantEventText: AnnotationExpose + `: host "Not_A_Host"`,
			wantResult: resultInvalid,
		},
		"invalid path: clear event, no ingress": {
			objs:       []runtime.Object{service("web", exposed("app.example.com"), annotated(AnnotationPath, "api"))},
			want:       nil,
			wantEvents: []string{"Warning " + ReasonInvalid}, wantEventText: AnnotationPath + `: path "api" must start with '/'`,
			wantResult: resultInvalid,
		},
		"ambiguous port: clear event, no ingress": {
			objs:       []runtime.Object{service("web", exposed("app.example.com"), ports(port("http", 80), port("metrics", 9090)))},
			want:       nil,
			wantEvents: []string{"Warning " + ReasonInvalid}, wantEventText: AnnotationPort + `: the Service has 2 TCP ports (its ports: 80 ("http"), 9090 ("metrics"))`,
			wantResult: resultInvalid,
		},
		"invalid secret name: clear event, no ingress": {
			objs:       []runtime.Object{service("web", exposed("app.example.com"), annotated(AnnotationTLSSecret, "TLS Secret"))},
			want:       nil,
			wantEvents: []string{"Warning " + ReasonInvalid}, wantEventText: AnnotationTLSSecret + `: "TLS Secret" is not a valid Secret name`,
			wantResult: resultInvalid,
		},
		"invalid edit keeps the last valid ingress": {
			objs:       []runtime.Object{service("web", exposed("app.example.com"), annotated(AnnotationPath, "nope")), generated("web", "app.example.com")},
			want:       generated("web", "app.example.com"),
			wantEvents: []string{"Warning " + ReasonInvalid}, wantEventText: "keeps its last valid configuration",
			wantResult: resultInvalid,
		},
		"deleted service: garbage collection's job": {
			objs:       []runtime.Object{generated("web", "app.example.com")},
			want:       generated("web", "app.example.com"),
			wantResult: resultUnchanged,
		},
		"service being deleted: garbage collection's job": {
			objs: []runtime.Object{
				service("web", gen.ServiceFunc(func(s *corev1.Service) { s.DeletionTimestamp = &deleting; s.Finalizers = []string{"example.com/hold"} })),
				generated("web", "app.example.com"),
			},
			want:       generated("web", "app.example.com"),
			wantResult: resultUnchanged,
		},
		"update conflict is returned for a quiet retry": {
			objs:       []runtime.Object{service("web", exposed("new.example.com")), generated("web", "old.example.com")},
			reactors:   []k8stesting.ReactionFunc{conflictOnPatch},
			want:       generated("web", "old.example.com"),
			wantWrites: []string{"patch"},
			wantResult: resultError,
			wantErr:    "retry",
		},
		"ingress rejected by the API server: event, no retry": {
			objs:       []runtime.Object{service("web", exposed("app.example.com"))},
			reactors:   []k8stesting.ReactionFunc{rejectCreate},
			want:       nil,
			wantWrites: []string{"create"},
			wantEvents: []string{"Warning " + ReasonRejected}, wantEventText: "admission says no",
			wantResult: resultInvalid,
			wantErr:    "terminal",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, Options{}, tc.objs, tc.reactors...)
			k := tc.key
			if k == "" {
				k = "web"
			}
			err := e.ctrl.sync(context.Background(), key(k))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("sync: %v", err)
			case tc.wantErr == "retry" && (err == nil || pipeline.IsTerminal(err)):
				t.Fatalf("sync error = %v, want a retryable error", err)
			case tc.wantErr == "terminal" && !pipeline.IsTerminal(err):
				t.Fatalf("sync error = %v, want a terminal error", err)
			}

			if got := e.writes(); !equalStrings(got, tc.wantWrites) {
				t.Errorf("ingress writes = %v, want %v", got, tc.wantWrites)
			}
			got := e.ingress(t, "web")
			switch {
			case tc.want == nil && got != nil:
				t.Errorf("ingress exists, want none: %+v", got.Spec)
			case tc.want != nil && got == nil:
				t.Errorf("ingress does not exist, want %+v", tc.want.Spec)
			case tc.want != nil:
				assertIngress(t, got, tc.want)
			}
			events := e.events()
			if len(events) != len(tc.wantEvents) {
				t.Fatalf("events = %q, want %d: %v", events, len(tc.wantEvents), tc.wantEvents)
			}
			for i, w := range tc.wantEvents {
				if !strings.HasPrefix(events[i], w+" ") {
					t.Errorf("event %d = %q, want %s", i, events[i], w)
				}
			}
			if tc.wantEventText != "" && !strings.Contains(events[0], tc.wantEventText) {
				t.Errorf("event %q does not say %q", events[0], tc.wantEventText)
			}
			if n := e.syncCount(tc.wantResult); n != 1 {
				t.Errorf("%s{result=%q} = %g, want 1", metricSyncs, tc.wantResult, n)
			}
			if errs := e.logs.FilterLevelExact(zapcore.ErrorLevel).All(); len(errs) > 0 {
				t.Errorf("logged at error level: %v", errs[0].Message)
			}
		})
	}
}

func assertIngress(t *testing.T, got, want *networkingv1.Ingress) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("spec =\n%+v\nwant\n%+v", got.Spec, want.Spec)
	}
	if !apiequality.Semantic.DeepEqual(got.Labels, want.Labels) {
		t.Errorf("labels = %v, want %v", got.Labels, want.Labels)
	}
	if !apiequality.Semantic.DeepEqual(got.Annotations, want.Annotations) {
		t.Errorf("annotations = %v, want %v", got.Annotations, want.Annotations)
	}
	if !apiequality.Semantic.DeepEqual(got.OwnerReferences, want.OwnerReferences) {
		t.Errorf("owner references = %+v, want %+v", got.OwnerReferences, want.OwnerReferences)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An unchanged problem produces one Event, not one per sync; a new problem, or the same one after it was
// fixed, produces a new one.
func TestWarningsAreNotRepeated(t *testing.T) {
	e := newTestEnv(t, Options{}, []runtime.Object{service("web", exposed("Bad"))})
	for range 3 {
		if err := e.ctrl.sync(context.Background(), key("web")); err != nil {
			t.Fatal(err)
		}
	}
	if ev := e.events(); len(ev) != 1 {
		t.Fatalf("three syncs of one invalid Service: events %q, want exactly one", ev)
	}
	// Fix it: the Ingress is created and the problem forgotten.
	setService(t, e, service("web", exposed("good.example")))
	if err := e.ctrl.sync(context.Background(), key("web")); err != nil {
		t.Fatal(err)
	}
	// Break it the same way again: warned again.
	setService(t, e, service("web", exposed("Bad")))
	if err := e.ctrl.sync(context.Background(), key("web")); err != nil {
		t.Fatal(err)
	}
	ev := e.events()
	if len(ev) != 2 || !strings.HasPrefix(ev[0], "Normal "+ReasonCreated) || !strings.HasPrefix(ev[1], "Warning "+ReasonInvalid) {
		t.Fatalf("after fix and re-break: events %q, want IngressCreated then InvalidExposeAnnotation", ev)
	}
}

// setService replaces the Service and waits until the informer cache has its annotations (the fake API
// does not advance resourceVersion).
func setService(t *testing.T, e *testEnv, svc *corev1.Service) {
	t.Helper()
	out, err := e.client.CoreV1().Services(testNS).Update(context.Background(), svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the service cache to catch up", func() bool {
		cur, ok := e.ctrl.services.Get(types.NamespacedName{Namespace: testNS, Name: svc.Name})
		return ok && apiequality.Semantic.DeepEqual(cur.Annotations, out.Annotations)
	})
}

// The running controller follows the lifecycle a user drives through the API: annotate, delete the Ingress,
// edit, remove the annotation.
func TestControllerFollowsServiceLifecycle(t *testing.T) {
	// A create that finds the Ingress already there (a sync that ran before the cache saw the previous
	// create; the controller retries it quietly) makes no second Ingress: only creates that make one count.
	client := fake.NewClientset()
	var made atomic.Int32
	client.PrependReactor("create", "ingresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(metav1.Object)
		if _, err := client.Tracker().Get(ingressesGVR, obj.GetNamespace(), obj.GetName()); err != nil {
			made.Add(1)
		}
		return false, nil, nil
	})
	e := newTestEnvOn(t, client, Options{})
	e.run(t)
	api := e.client.NetworkingV1().Ingresses(testNS)
	ctx := context.Background()

	if _, err := e.client.CoreV1().Services(testNS).Create(ctx, service("web", exposed("app.example.com")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIngress(t, e, "created for the annotated Service", func(ing *networkingv1.Ingress) bool {
		return ing != nil && ing.Spec.Rules[0].Host == "app.example.com"
	})

	if err := api.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIngress(t, e, "re-created after deletion", func(ing *networkingv1.Ingress) bool { return ing != nil })
	if n := made.Load(); n != 2 {
		t.Errorf("Ingresses created = %d, want 2 (initial and re-create)", n)
	}

	svc, err := e.client.CoreV1().Services(testNS).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Annotations[AnnotationPath] = "/app"
	if _, err := e.client.CoreV1().Services(testNS).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIngress(t, e, "updated to the new path", func(ing *networkingv1.Ingress) bool {
		return ing != nil && ing.Spec.Rules[0].HTTP.Paths[0].Path == "/app"
	})

	delete(svc.Annotations, AnnotationExpose)
	if _, err := e.client.CoreV1().Services(testNS).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIngress(t, e, "deleted after the annotation was removed", func(ing *networkingv1.Ingress) bool { return ing == nil })
}

// A foreign Ingress that goes away frees the name: the annotated Service gets its own.
func TestForeignIngressRemovedFreesTheName(t *testing.T) {
	e := newTestEnv(t, Options{}, []runtime.Object{service("web", exposed("app.example.com")), ingress("web", withClass("other"))})
	e.run(t)
	moduletest.Eventually(t, "the not-owned warning", func() bool {
		return e.syncCount(resultNotOwned) > 0
	})
	if err := e.client.NetworkingV1().Ingresses(testNS).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIngress(t, e, "our Ingress created once the foreign one is gone", func(ing *networkingv1.Ingress) bool {
		return ing != nil && ControlledBy(ing, service("web"))
	})
}

// Two controller instances with different --ingress-class in one cluster, and a Service that names no class:
// the instance that created the Ingress keeps it; the other does not patch the class back (before, each
// patched in its own class, which woke the other, for ever) and says so once.
func TestInstancesOfTwoClassesDoNotFight(t *testing.T) {
	client := fake.NewClientset(service("web", exposed("app.example.com")))
	a := newTestEnvOn(t, client, Options{IngressClass: "a"})
	b := newTestEnvOn(t, client, Options{IngressClass: "b"})
	ctx := context.Background()

	if err := a.ctrl.sync(ctx, key("web")); err != nil {
		t.Fatal(err)
	}
	if ing := a.ingress(t, "web"); ing == nil || ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "a" {
		t.Fatalf("instance a did not create the Ingress with its class: %+v", ing)
	}
	for round := range 3 {
		waitCachesSeeIngress(t, "web", a, b)
		client.ClearActions()
		if err := b.ctrl.sync(ctx, key("web")); err != nil {
			t.Fatalf("round %d: sync on b: %v", round, err)
		}
		waitCachesSeeIngress(t, "web", a, b)
		if err := a.ctrl.sync(ctx, key("web")); err != nil {
			t.Fatalf("round %d: sync on a: %v", round, err)
		}
		if w := a.writes(); len(w) > 0 {
			t.Fatalf("round %d: the instances wrote %v to an Ingress both consider theirs, want no writes", round, w)
		}
	}
	if ing := a.ingress(t, "web"); *ing.Spec.IngressClassName != "a" {
		t.Errorf("ingressClassName = %q, want a (the creator's)", *ing.Spec.IngressClassName)
	}
	ev := b.events()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+ReasonOtherClass+" ") || !strings.Contains(ev[0], `"a"`) {
		t.Errorf("instance b's events = %q, want exactly one %s warning naming class \"a\"", ev, ReasonOtherClass)
	}
	if ev := a.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal "+ReasonCreated+" ") {
		t.Errorf("instance a's events = %q, want only %s", ev, ReasonCreated)
	}
	if n := b.syncCount(resultOtherClass); n != 3 {
		t.Errorf("instance b: %s{result=%q} = %g, want 3", metricSyncs, resultOtherClass, n)
	}

	// Naming a class hands the Service to that instance, and only to it.
	setService(t, a, service("web", exposed("app.example.com"), annotated(AnnotationIngressClass, "b")))
	waitServiceCache(t, b, "web", "b")
	client.ClearActions()
	if err := a.ctrl.sync(ctx, key("web")); err != nil {
		t.Fatal(err)
	}
	if w := a.writes(); len(w) > 0 {
		t.Fatalf("instance a wrote %v for a Service that names class b", w)
	}
	if err := b.ctrl.sync(ctx, key("web")); err != nil {
		t.Fatal(err)
	}
	if ing := b.ingress(t, "web"); *ing.Spec.IngressClassName != "b" {
		t.Errorf("after naming class b: ingressClassName = %q, want b", *ing.Spec.IngressClassName)
	}
}

// waitCachesSeeIngress waits until every env's Ingress cache holds the API's current spec of Ingress name
// (the fake API does not advance resourceVersion, so the spec is compared).
func waitCachesSeeIngress(t *testing.T, name string, envs ...*testEnv) {
	t.Helper()
	want := envs[0].ingress(t, name)
	for _, e := range envs {
		moduletest.Eventually(t, "the ingress cache to catch up", func() bool {
			cur, err := e.ctrl.ingresses.Ingresses(testNS).Get(name)
			return err == nil && want != nil && apiequality.Semantic.DeepEqual(cur.Spec, want.Spec)
		})
	}
}

// waitServiceCache waits until e's Service cache sees the class annotation set to class.
func waitServiceCache(t *testing.T, e *testEnv, name, class string) {
	t.Helper()
	moduletest.Eventually(t, "the service cache to catch up", func() bool {
		cur, ok := e.ctrl.services.Get(types.NamespacedName{Namespace: testNS, Name: name})
		return ok && cur.Annotations[AnnotationIngressClass] == class
	})
}

// A conflict is retried without an error log, and the retry succeeds.
func TestConflictIsRetriedQuietly(t *testing.T) {
	conflicts := 0
	conflictOnce := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "patch" || conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, "web", errors.New("the object has been modified"))
	}
	e := newTestEnv(t, Options{}, []runtime.Object{service("web", exposed("new.example.com")), generated("web", "old.example.com")}, conflictOnce)
	e.run(t)
	waitIngress(t, e, "updated after a conflict", func(ing *networkingv1.Ingress) bool {
		return ing != nil && ing.Spec.Rules[0].Host == "new.example.com"
	})
	if errs := e.logs.FilterLevelExact(zapcore.ErrorLevel).All(); len(errs) > 0 {
		t.Errorf("a conflict was logged at error level: %q", errs[0].Message)
	}
	for _, ev := range e.events() {
		if strings.HasPrefix(ev, "Warning") {
			t.Errorf("a conflict produced a Warning event: %q", ev)
		}
	}
}

// A Service whose Ingress cannot be written gets a Warning Event once the retries are spent.
func TestGiveUpPutsWarningOnService(t *testing.T) {
	failCreate := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "create" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewInternalError(errors.New("etcd is on fire"))
	}
	e := newTestEnv(t, Options{MaxRetries: 2}, []runtime.Object{service("web", exposed("app.example.com"))}, failCreate)
	e.run(t)
	var got string
	moduletest.Eventually(t, "a give-up event", func() bool {
		for _, ev := range e.events() {
			if strings.HasPrefix(ev, "Warning "+ReasonGaveUp) {
				got = ev
				return true
			}
		}
		return false
	})
	if !strings.Contains(got, "etcd is on fire") {
		t.Errorf("give-up event %q does not carry the last error", got)
	}
	if n := countWrites(e, "create"); n != 3 {
		t.Errorf("create attempts = %d, want 3 (first try and MaxRetries=2 retries)", n)
	}
}

func countWrites(e *testEnv, verb string) int {
	n := 0
	for _, w := range e.writes() {
		if w == verb {
			n++
		}
	}
	return n
}

// waitIngress polls the fake API for Ingress "web" until cond holds.
func waitIngress(t *testing.T, e *testEnv, what string, cond func(*networkingv1.Ingress) bool) {
	t.Helper()
	var last *networkingv1.Ingress
	moduletest.Eventually(t, "ingress "+what, func() bool {
		last = e.ingress(t, "web")
		return cond(last)
	})
}
