package app

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/autoingress"
	"github.com/ingress-reactor/ingress-reactor/modules/endpoints"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// cached returns what the informer cache holds for a copy of obj (obj itself is left as it is).
func cached[T runtime.Object](t *testing.T, obj T) T {
	t.Helper()
	out, err := cacheTransform(obj.DeepCopyObject())
	if err != nil {
		t.Fatal(err)
	}
	return out.(T)
}

// cachedSlice returns the record the informer cache holds for a copy of s (s itself is left as it is).
func cachedSlice(t *testing.T, s *discoveryv1.EndpointSlice) *endpoints.SliceRecord {
	t.Helper()
	out, err := cacheTransform(s.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return out.(*endpoints.SliceRecord)
}

// cachedService returns the Service that lookups in the informer cache return for a copy of s: the one
// its record builds.
func cachedService(t *testing.T, s *corev1.Service) *corev1.Service {
	t.Helper()
	out, err := cacheTransform(s.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return out.(*modules.ServiceRecord).Service()
}

// cachedSecret returns the Secret that lookups in the informer cache return for a copy of s: the one its
// record builds.
func cachedSecret(t *testing.T, s *corev1.Secret) *corev1.Secret {
	t.Helper()
	out, err := cacheTransform(s.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return out.(*modules.SecretRecord).Secret()
}

// readFixtures is a cluster as the API server returns it: an Ingress with TLS, basic authentication and
// custom headers, its Service (with labels, selector, Helm annotations, dual IP fields), EndpointSlice
// (pod references, nodes, zones, owner), TLS Secret (cert-manager's labels and annotations), basic-auth
// Secret and headers ConfigMap, a Service autoingress exposes and the Ingress it controls, and an
// ExternalName and a headless Service.
type readFixtures struct {
	ing                        *networkingv1.Ingress
	svc, exposed, extName, hdl *corev1.Service
	slice                      *discoveryv1.EndpointSlice
	tls, auth                  *corev1.Secret
	headers                    *corev1.ConfigMap
	owned                      *networkingv1.Ingress
}

func newReadFixtures(t *testing.T) readFixtures {
	certPEM, keyPEM := benchECDSACert(t)
	f := readFixtures{
		ing:   benchIngress(7),
		svc:   benchService(7),
		slice: benchEndpointSlice(7),
		tls:   benchTLSSecret(7, certPEM, keyPEM),
	}
	ns := f.ing.Namespace
	f.ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port = networkingv1.ServiceBackendPort{Number: 80}
	f.ing.Spec.Rules[1].HTTP.Paths[0].PathType = ptr.To(networkingv1.PathTypeExact)
	f.ing.Annotations[nginx.AnnotationAuthType] = "basic"
	f.ing.Annotations[nginx.AnnotationAuthSecret] = "basic-auth"
	f.ing.Annotations[nginx.AnnotationCustomHeaders] = "headers"
	f.ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.10"}}
	f.slice.Endpoints[1].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	f.slice.Endpoints[2].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false)}
	f.auth = &corev1.Secret{ObjectMeta: benchMeta(8, "basic-auth"), Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"auth": []byte("alice:$apr1$saltsalt$64vPg1.FPS6FtcYJ7Ti1V.\n"), "notes": []byte("rotated monthly")}}
	f.auth.Namespace = ns
	f.auth.Labels = map[string]string{"team": "web"}
	f.headers = &corev1.ConfigMap{ObjectMeta: benchMeta(9, "headers"), Data: map[string]string{"X-Frame-Options": "DENY"}}
	f.headers.Namespace = ns
	f.headers.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d1"}}

	f.exposed = benchService(11)
	f.exposed.Annotations[autoingress.AnnotationExpose] = "shop.example.com"
	f.exposed.Annotations[autoingress.AnnotationPort] = "http"
	f.exposed.Annotations[autoingress.AnnotationPath] = "/shop"
	f.exposed.Annotations[autoingress.AnnotationTLSSecret] = "shop-tls"
	f.exposed.Annotations[autoingress.AnnotationIngressClass] = "nginx"
	f.exposed.DeletionTimestamp = ptr.To(metav1.NewTime(f.exposed.CreationTimestamp.Add(3600e9)))
	f.exposed.Finalizers = []string{"example.com/cleanup"}
	e, err := autoingress.ParseExpose(f.exposed, "nginx")
	if err != nil {
		t.Fatal(err)
	}
	f.owned = autoingress.DesiredIngress(f.exposed, e)
	f.owned.UID, f.owned.ResourceVersion, f.owned.Generation = "owned-uid", "99", 1

	f.extName = benchService(12)
	f.extName.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.net",
		Ports: []corev1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}}}
	f.hdl = benchService(13)
	f.hdl.Spec.ClusterIP, f.hdl.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	return f
}

func (f readFixtures) lookups(svcs []*corev1.Service, secrets []*corev1.Secret, cms []*corev1.ConfigMap) nginx.Lookups {
	return nginx.Lookups{
		Services: nginx.ServiceLookupFunc(func(k types.NamespacedName) (*corev1.Service, bool) {
			for _, s := range svcs {
				if s.Namespace == k.Namespace && s.Name == k.Name {
					return s, true
				}
			}
			return nil, false
		}),
		Secrets: nginx.SecretLookupFunc(func(k types.NamespacedName) (*corev1.Secret, bool) {
			for _, s := range secrets {
				if s.Namespace == k.Namespace && s.Name == k.Name {
					return s, true
				}
			}
			return nil, false
		}),
		ConfigMaps: nginx.ConfigMapLookupFunc(func(k types.NamespacedName) (*corev1.ConfigMap, bool) {
			for _, c := range cms {
				if c.Namespace == k.Namespace && c.Name == k.Name {
					return c, true
				}
			}
			return nil, false
		}),
	}
}

// TestCacheTransformKeepsWhatModulesRead: every answer the modules compute from cached objects (the
// translation of an Ingress, the endpoints of its backends, autoingress's decisions, the parsed
// certificate) is the same from the transformed objects as from the objects the API server sent, and the
// fields modules read directly are kept.
func TestCacheTransformKeepsWhatModulesRead(t *testing.T) {
	f := newReadFixtures(t)
	ing, svc, exposed := cached(t, f.ing), cachedService(t, f.svc), cachedService(t, f.exposed)
	extName, hdl := cachedService(t, f.extName), cachedService(t, f.hdl)
	slice, tls, auth, headers, owned := cachedSlice(t, f.slice), cachedSecret(t, f.tls), cachedSecret(t, f.auth), cached(t, f.headers), cached(t, f.owned)

	t.Run("translation", func(t *testing.T) {
		opts := nginx.DefaultTranslateOptions()
		want, err := nginx.TranslateIngressWith(f.ing, f.lookups([]*corev1.Service{f.svc}, []*corev1.Secret{f.tls, f.auth}, []*corev1.ConfigMap{f.headers}), opts)
		if err != nil {
			t.Fatalf("translation of the original objects: %v", err)
		}
		if len(want.Routes) != 2 || len(want.TLS) != 1 || len(want.Objects()) != 2 {
			t.Fatalf("fixture translates to %d routes, %d TLS hosts, %d objects; want 2, 1, 2", len(want.Routes), len(want.TLS), len(want.Objects()))
		}
		got, err := nginx.TranslateIngressWith(ing, f.lookups([]*corev1.Service{svc}, []*corev1.Secret{tls, auth}, []*corev1.ConfigMap{headers}), opts)
		if err != nil {
			t.Fatalf("translation of the cached objects: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("translation from the cache:\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("endpoints", func(t *testing.T) {
		for _, port := range []intstr.IntOrString{intstr.FromString("http"), intstr.FromInt32(80), intstr.FromString("metrics"), intstr.FromInt32(81)} {
			want := endpoints.Resolve(f.svc, port, []*endpoints.SliceRecord{endpoints.NewSliceRecord(f.slice)})
			got := endpoints.Resolve(svc, port, []*endpoints.SliceRecord{slice})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("endpoints of port %s: %v, want %v", port.String(), got, want)
			}
			if want, got := endpoints.ServiceIPEndpoints(f.svc, port), endpoints.ServiceIPEndpoints(svc, port); !reflect.DeepEqual(got, want) {
				t.Errorf("service-upstream endpoints of port %s: %v, want %v", port.String(), got, want)
			}
		}
		// Ready, and serving while terminating (used only when nothing is ready).
		if got := endpoints.Resolve(svc, intstr.FromString("http"), []*endpoints.SliceRecord{slice}); len(got) != 1 {
			t.Errorf("ready endpoints from the cache: %v, want the first endpoint alone", got)
		}
		if got := slice.ServiceName(); got != f.svc.Name {
			t.Errorf("slice of Service %q, want %q", got, f.svc.Name)
		}
		if want := endpoints.NewSliceRecord(f.slice); !reflect.DeepEqual(slice, want) {
			t.Errorf("cached record %+v, want the record of the slice as sent, %+v", slice, want)
		}
		for _, s := range []struct{ got, want *corev1.Service }{{extName, f.extName}, {hdl, f.hdl}} {
			if s.got.Spec.Type != s.want.Spec.Type || s.got.Spec.ExternalName != s.want.Spec.ExternalName ||
				s.got.Spec.ClusterIP != s.want.Spec.ClusterIP || !reflect.DeepEqual(s.got.Spec.Ports, s.want.Spec.Ports) {
				t.Errorf("service %s spec %+v, want type, externalName, clusterIP and ports of %+v", s.want.Name, s.got.Spec, s.want.Spec)
			}
		}
	})

	t.Run("autoingress", func(t *testing.T) {
		if !autoingress.Requested(exposed) || autoingress.Requested(svc) {
			t.Errorf("Requested: exposed %v, plain %v", autoingress.Requested(exposed), autoingress.Requested(svc))
		}
		e, err := autoingress.ParseExpose(exposed, "nginx")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := autoingress.ParseExpose(f.exposed, "nginx")
		if e != want {
			t.Errorf("ParseExpose from the cache %+v, want %+v", e, want)
		}
		if got := autoingress.DesiredIngress(exposed, e); !equality.Semantic.DeepEqual(got, autoingress.DesiredIngress(f.exposed, want)) {
			t.Errorf("DesiredIngress from the cache differs: %+v", got)
		}
		if !autoingress.ControlledBy(owned, exposed) {
			t.Error("the cached Ingress is no longer controlled by the cached Service")
		}
		if exposed.UID != f.exposed.UID || !exposed.DeletionTimestamp.Equal(f.exposed.DeletionTimestamp) {
			t.Errorf("service UID %q, deletion %v; want %q, %v", exposed.UID, exposed.DeletionTimestamp, f.exposed.UID, f.exposed.DeletionTimestamp)
		}
		// The owned Ingress keeps what autoingress compares: labels, owner references, generation, UID.
		wantOwned := f.owned.DeepCopy()
		wantOwned.ManagedFields = nil
		if !equality.Semantic.DeepEqual(owned, wantOwned) {
			t.Errorf("owned Ingress from the cache:\n%+v\nwant\n%+v", owned, wantOwned)
		}
	})

	t.Run("secrets", func(t *testing.T) {
		want, err := certs.ParseSecret(f.tls)
		if err != nil {
			t.Fatal(err)
		}
		got, err := certs.ParseSecret(tls)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("certificate parsed from the cache differs")
		}
		if tls.Type != corev1.SecretTypeTLS || auth.Type != corev1.SecretTypeOpaque {
			t.Errorf("secret types %q, %q", tls.Type, auth.Type)
		}
		if len(auth.Data) != 1 || string(auth.Data["auth"]) != string(f.auth.Data["auth"]) {
			t.Errorf("basic-auth data from the cache: %q", auth.Data)
		}
		if len(tls.Data) != 2 {
			t.Errorf("TLS secret keeps %d keys, want 2", len(tls.Data))
		}
	})

	t.Run("ingress", func(t *testing.T) {
		want := f.ing.DeepCopy()
		want.ManagedFields = nil
		if !equality.Semantic.DeepEqual(ing, want) {
			t.Errorf("Ingress from the cache:\n%+v\nwant\n%+v", ing, want)
		}
	})

	t.Run("metadata", func(t *testing.T) {
		type meta struct {
			got, want metav1.Object
			uid       bool
			created   bool // kept: nothing reads a Service's or a Secret's creation time, which their records drop
		}
		for _, m := range []meta{{ing, f.ing, true, true}, {svc, f.svc, true, false}, {exposed, f.exposed, true, false},
			{tls, f.tls, false, false}, {auth, f.auth, false, false}, {headers, f.headers, false, true}, {owned, f.owned, true, true}} {
			g, w := m.got, m.want
			if g.GetName() != w.GetName() || g.GetNamespace() != w.GetNamespace() || g.GetResourceVersion() != w.GetResourceVersion() ||
				!g.GetDeletionTimestamp().Equal(w.GetDeletionTimestamp()) {
				t.Errorf("%s: name, namespace, resourceVersion or deletion time changed", w.GetName())
			}
			if m.created && !ptr.To(g.GetCreationTimestamp()).Equal(ptr.To(w.GetCreationTimestamp())) {
				t.Errorf("%s: creation time changed", w.GetName())
			}
			if m.uid && g.GetUID() != w.GetUID() {
				t.Errorf("%s: UID %q, want %q", w.GetName(), g.GetUID(), w.GetUID())
			}
		}
		// A slice's record keeps the key and resource version alone: nothing reads its other metadata.
		if g := slice.GetObjectMeta(); g.GetName() != f.slice.Name || g.GetNamespace() != f.slice.Namespace || g.GetResourceVersion() != f.slice.ResourceVersion {
			t.Errorf("%s: name, namespace or resourceVersion changed", f.slice.Name)
		}
		if svc.Labels != nil || svc.Spec.Selector != nil || svc.Spec.ClusterIPs != nil || svc.Status.LoadBalancer.Ingress != nil ||
			tls.Labels != nil || tls.Annotations != nil || headers.OwnerReferences != nil {
			t.Error("fields nothing reads are still cached")
		}
	})
}

// TestInterningKeepsValues: sharing never changes a value, equal values end up as one copy, and a table
// stops growing at its bound.
func TestInterningKeepsValues(t *testing.T) {
	for _, s := range []string{"", "TCP", "UDP", "tls.crt", "kubernetes.io/tls", "Opaque", "team-a", "x", "http",
		strings.Repeat("n", maxSharedLen), strings.Repeat("n", maxSharedLen+1), "héllo"} {
		if got := sharedNamespaces.intern(s); got != s {
			t.Errorf("intern(%q) = %q", s, got)
		}
		if got := sharedStringPtrs.intern(&s); *got != s {
			t.Errorf("shared pointer to %q points at %q", s, *got)
		}
	}
	a, b := strings.Clone("team-shared"), strings.Clone("team-shared")
	if unsafe.StringData(sharedNamespaces.intern(a)) != unsafe.StringData(sharedNamespaces.intern(b)) {
		t.Error("two equal namespaces are not shared")
	}
	for _, p := range []*networkingv1.PathType{nil, ptr.To(networkingv1.PathTypePrefix), ptr.To(networkingv1.PathTypeExact),
		ptr.To(networkingv1.PathTypeImplementationSpecific), ptr.To(networkingv1.PathType("Regex"))} {
		if got := sharedPathType(p); !reflect.DeepEqual(got, p) {
			t.Errorf("sharedPathType(%v) = %v", p, got)
		}
	}

	var table stringTable
	for i := range maxShared + 100 {
		s := fmt.Sprintf("ns-%d", i)
		if got := table.intern(s); got != s {
			t.Fatalf("intern(%q) = %q", s, got)
		}
	}
	if n := len(table.t.m); n != maxShared {
		t.Errorf("table holds %d strings, want the bound %d", n, maxShared)
	}
	if got := table.intern("ns-5"); got != "ns-5" {
		t.Errorf("intern after the bound: %q", got)
	}
}

// TestCacheTransformConcurrent: informers transform on goroutines of their own; the shared tables give
// each object its own values back (run with -race to check the locking too).
func TestCacheTransformConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				n := g*1000 + i
				want := benchEndpointSlice(n)
				got := cachedSlice(t, want)
				if !reflect.DeepEqual(got, endpoints.NewSliceRecord(want)) {
					t.Errorf("slice %d changed: %+v", n, got)
					return
				}
				svc := cachedService(t, benchService(n))
				if svc.Namespace != benchNamespace(n) || svc.Spec.Ports[1].Name != "metrics" {
					t.Errorf("service %d changed: %+v", n, svc)
					return
				}
				sec := cachedSecret(t, benchTLSSecret(n, []byte("cert"), []byte("key")))
				if sec.Namespace != benchNamespace(n) || sec.Name != fmt.Sprintf("app-%05d-tls", n) || string(sec.Data[corev1.TLSCertKey]) != "cert" {
					t.Errorf("secret %d changed: %+v", n, sec)
					return
				}
			}
		})
	}
	wg.Wait()
}
