package app

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/autoingress"
	"github.com/ingress-reactor/ingress-reactor/modules/endpoints"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/modules/renderer"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// newServiceWatch is a lossyWatch of every Service.
func newServiceWatch(client kubernetes.Interface) *lossyWatch {
	return newLossyWatch(client, client.CoreV1().Services("").List, client.CoreV1().Services("").Watch)
}

// staticResolver answers every name with one address.
type staticResolver string

func (r staticResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.ParseIP(string(r))}}, nil
}

// TestServiceCacheOfRecords: through a real informer with the cache transform, the Service cache holds
// records, keyed by namespace and name, and the modules that read it follow Services as they are added,
// updated (a port renamed, a port removed, a type changed to ExternalName) and deleted, a deletion learnt
// from a new list (a tombstone) too: the endpoints module publishes the endpoints the Service's port
// leads to, the renderer rejects and accepts the Ingress and warns of the missing Service, and
// autoingress writes the Service's UID into the Ingress it creates and puts its Events on the Service.
func TestServiceCacheOfRecords(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset(
		gen.Service("ns", "web", gen.Port("http", 80), gen.ResourceVersion("1")),
		gen.Ingress("ns", "to-web", gen.DefaultBackend(gen.Backend("web", 80))),
		gen.EndpointSlice("ns", "web-1", "web", gen.SlicePort("http", 8080), gen.SlicePort("admin", 9090), gen.Endpoint("192.0.2.1")),
	)
	sw := newServiceWatch(client)
	svcInf := newRecordInformer(t, client, sw, &corev1.Service{})
	factory := svcInf.factory

	h := moduletest.New(t)
	eps := pipeline.NewTopic[modules.EndpointsChange]("endpoints")
	t.Cleanup(eps.Close)
	gotEps := moduletest.Collect(eps)
	w, err := endpoints.New(endpoints.Params{Options: endpoints.Options{Resolver: staticResolver("198.51.100.7")},
		Factory: factory, IngressChanges: h.IngressChanges, Endpoints: eps, Metrics: h.Metrics, Registry: h.Registry, Log: h.Log})
	if err != nil {
		t.Fatal(err)
	}
	r, renders := newRecordRenderer(t, h, factory)
	ai, err := autoingress.New(autoingress.Params{Options: autoingress.Options{IngressClass: "nginx"}, Client: client, Factory: factory,
		Recorder: h.Recorder, Metrics: h.Metrics, Registry: h.Registry, Log: h.Log})
	if err != nil {
		t.Fatal(err)
	}
	svcInf.start(t)
	h.Run(w)
	h.Run(r)
	h.Run(ai)
	announceIngress(t, h, "ns", "to-web")

	waitEps := func(what string, want ...nginx.Endpoint) {
		t.Helper()
		gotEps.WaitFor(t, what, func(c modules.EndpointsChange) bool { return !c.Removed && slices.Equal(c.Endpoints, want) })
	}
	ep := func(addr string, port int32) nginx.Endpoint { return nginx.Endpoint{Address: addr, Port: port} }
	// rejected waits until the renderer's last render rejected n Ingresses.
	rejected := func(what string, n float64) {
		t.Helper()
		moduletest.Eventually(t, what, func() bool {
			v, ok := moduletest.LookupMetric(t, h.Registry, "ingress_reactor_ingresses_rejected")
			return ok && v == n && len(renders.All()) > 0
		})
	}
	missing := func() int {
		n := 0
		for _, e := range h.Recorder.WithReason(renderer.ReasonWarning) {
			if strings.Contains(e.Message, "service ns/web does not exist") {
				n++
			}
		}
		return n
	}

	waitEps("port 80 (http) leads to the slice's port http", ep("192.0.2.1", 8080))
	rejected("the Ingress served", 0)
	o, exists, err := svcInf.GetIndexer().GetByKey("ns/web")
	if rec, ok := o.(*modules.ServiceRecord); err != nil || !exists || !ok || rec.GetResourceVersion() != "1" {
		t.Fatalf("the cache holds %#v under ns/web (exists %v, %v), want the Service's record", o, exists, err)
	}

	services := client.CoreV1().Services("ns")
	update := func(svc *corev1.Service) {
		t.Helper()
		if _, err := services.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The fake API sets no resource versions: each update sets its own, or the informer takes it for a
	// resync, as it would an unchanged object.
	update(gen.Service("ns", "web", gen.Port("admin", 80), gen.ResourceVersion("2")))
	waitEps("port 80 renamed admin leads to the slice's port admin", ep("192.0.2.1", 9090))

	update(gen.Service("ns", "web", gen.Port("http", 81), gen.ResourceVersion("3")))
	waitEps("no endpoints once the Service has no port 80")
	rejected("the Ingress rejected: its Service has no port 80", 1)

	update(gen.Service("ns", "web", gen.ExternalName("db.example.net"), gen.ResourceVersion("4")))
	waitEps("the ExternalName's address at the Ingress's port", ep("198.51.100.7", 80))
	rejected("the Ingress served by the ExternalName Service", 0)

	if err := services.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEps("no endpoints once the Service is deleted")
	moduletest.Eventually(t, "a warning that the Service does not exist", func() bool { return missing() == 1 })

	if _, err := services.Create(ctx, gen.Service("ns", "web", gen.Port("http", 81), gen.ResourceVersion("5")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rejected("the Ingress rejected by the recreated Service without port 80", 1)

	// The informer misses the deletion and learns of it from the next list.
	sw.lose()
	if err := services.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sw.expire <- struct{}{}
	rejected("the Ingress served (without a Service) once the tombstone arrives", 0)
	moduletest.Eventually(t, "a second warning that the Service does not exist", func() bool { return missing() == 2 })
	if _, exists, _ := svcInf.GetIndexer().GetByKey("ns/web"); exists {
		t.Error("the Service deleted while the watch was losing events is still cached")
	}
	tomb := svcInf.tombstone(t, "the tombstone of web")
	if rec, ok := tomb.(*modules.ServiceRecord); !ok || rec.GetName() != "web" || rec.GetResourceVersion() != "5" {
		t.Errorf("the tombstone carries %#v, want web's record", tomb)
	}

	// autoingress: the Ingress it creates is owned by the Service's UID, its Events name the Service.
	shop := gen.Service("ns", "shop", gen.Port("http", 80), gen.ResourceVersion("10"),
		gen.Annotations(autoingress.AnnotationExpose, "shop.example.com", "unrelated.example.com/note", "dropped"))
	shop.UID = "0c5e-shop-uid"
	if _, err := services.Create(ctx, shop, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "autoingress's Ingress for shop", func() bool {
		ing, err := client.NetworkingV1().Ingresses("ns").Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return false
		}
		refs := ing.OwnerReferences
		return len(refs) == 1 && refs[0].Kind == "Service" && refs[0].Name == "shop" && refs[0].UID == shop.UID &&
			len(ing.Spec.Rules) == 1 && ing.Spec.Rules[0].Host == "shop.example.com"
	})
	moduletest.Eventually(t, "autoingress's Event on the Service", func() bool {
		for _, e := range h.Recorder.WithReason(autoingress.ReasonCreated) {
			if e.Object == "ns/shop" {
				return true
			}
		}
		return false
	})
	if rec, ok := func() (*modules.ServiceRecord, bool) {
		o, _, _ := svcInf.GetIndexer().GetByKey("ns/shop")
		rec, ok := o.(*modules.ServiceRecord)
		return rec, ok
	}(); !ok || len(rec.Service().Annotations) != 1 {
		t.Errorf("the cached shop Service: %#v, want a record with autoingress's annotation alone", rec)
	}
	bad := gen.Service("ns", "bad", gen.Port("http", 80), gen.ResourceVersion("11"),
		gen.Annotations(autoingress.AnnotationExpose, "bad.example.com", autoingress.AnnotationPort, "nope"))
	if _, err := services.Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "autoingress's Warning on the Service with a bad annotation", func() bool {
		for _, e := range h.Recorder.WithReason(autoingress.ReasonInvalid) {
			if e.Object == "ns/bad" && e.Kind == corev1.EventTypeWarning {
				return true
			}
		}
		return false
	})
}
