package app

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/internal/localapi"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/autoingress"
	"github.com/ingress-reactor/ingress-reactor/modules/endpoints"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// TestCacheTransformKeepsOnlyTLSKeysOfSecrets: a Secret in the cache keeps tls.crt, tls.key, ca.crt and
// ca.crl (which auth-tls-secret refuses), and what basic authentication reads (the key auth, values that are password hashes other than DES),
// and loses every other key; other objects only lose managedFields and the last-applied annotation.
func TestCacheTransformKeepsOnlyTLSKeysOfSecrets(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			Labels:          map[string]string{"controller.cert-manager.io/fao": "true"},
			Annotations:     map[string]string{"cert-manager.io/issuer-name": "letsencrypt", "cert-manager.io/alt-names": "a.example.com"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Certificate", Name: "a"}}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"tls.crt": []byte("cert"), "tls.key": []byte("key"), "ca.crt": []byte("ca"), "ca.crl": []byte("crl"),
			"password": []byte("hunter2"), "release": []byte("a large Helm release"),
			"auth": []byte("alice:$apr1$saltsalt$64vPg1.FPS6FtcYJ7Ti1V.\n"), "bob": []byte("$2y$05$abcdefghijklmnopqrstuuLK7U1u6pVRmL7L1BBM2aS35PSZnDXlK\n"),
			"token13chars1": []byte("abhWCwoTZY2c6"), "api-key": []byte("$apr1$not-a-hash"),
		},
		StringData: map[string]string{"token": "t"},
	}
	out, err := cacheTransform(s)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*modules.SecretRecord).Secret()
	if keys := slices.Sorted(maps.Keys(got.Data)); !slices.Equal(keys, []string{"auth", "bob", "ca.crl", "ca.crt", "tls.crt", "tls.key"}) {
		t.Errorf("Secret keys after the transform: %v", keys)
	}
	if got.StringData != nil || got.ManagedFields != nil || got.Labels != nil || got.Annotations != nil || got.OwnerReferences != nil {
		t.Errorf("stringData %v, managedFields %v, labels %v, annotations %v, owner references %v: want all gone",
			got.StringData, got.ManagedFields, got.Labels, got.Annotations, got.OwnerReferences)
	}
	if got.Type != corev1.SecretTypeOpaque || got.Name != "s" {
		t.Errorf("type %q, name %q: want both kept", got.Type, got.Name)
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Annotations: map[string]string{
		pipeline.LastAppliedConfigAnnotation: "{}", "meta.helm.sh/release-name": "svc", autoingress.AnnotationExpose: "a.example.com",
	}}}
	out, err = cacheTransform(svc)
	if err != nil {
		t.Fatal(err)
	}
	if a := out.(*modules.ServiceRecord).Service().Annotations; len(a) != 1 || a[autoingress.AnnotationExpose] != "a.example.com" {
		t.Errorf("Service annotations after the transform: %v (want autoingress's alone)", a)
	}
}

// TestCacheTransformSecretRecord: a Secret is cached as its record, which keeps the kept entries' values
// (not copies) under the shared key constants, copies of its name and resource version (not the decoded
// strings), and its type; the informer keys it by namespace and name, a tombstone carrying it too; given
// to the transform again, it comes back as it is. A Secret without kept entries has no data.
func TestCacheTransformSecretRecord(t *testing.T) {
	crt, key := []byte("cert"), []byte("key")
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: string([]byte("tls")), Namespace: string([]byte("ns")), ResourceVersion: string([]byte("42"))},
		Type: corev1.SecretType([]byte("kubernetes.io/tls")),
		Data: map[string][]byte{string([]byte("tls.crt")): crt, string([]byte("tls.key")): key, "password": []byte("hunter2")}}
	decodedName, decodedVersion := s.Name, s.ResourceVersion
	out, err := cacheTransform(s)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := out.(*modules.SecretRecord)
	if !ok {
		t.Fatalf("the transform returned %T, want a record", out)
	}
	if rec.Len() != 2 {
		t.Errorf("the record keeps %d entries, want tls.crt and tls.key", rec.Len())
	}
	got := rec.Secret()
	if keys := slices.Sorted(maps.Keys(got.Data)); !slices.Equal(keys, []string{"tls.crt", "tls.key"}) {
		t.Errorf("data after the transform: %q", got.Data)
	}
	for k, constant := range map[string]string{corev1.TLSCertKey: corev1.TLSCertKey, corev1.TLSPrivateKeyKey: corev1.TLSPrivateKeyKey} {
		for gk := range got.Data {
			if gk == k && unsafe.StringData(gk) != unsafe.StringData(constant) {
				t.Errorf("key %q is the decoded copy, not the shared constant", k)
			}
		}
	}
	if &got.Data["tls.crt"][0] != &crt[0] || &got.Data["tls.key"][0] != &key[0] {
		t.Error("the record copied a value instead of keeping the decoded bytes")
	}
	if got.Name != "tls" || got.ResourceVersion != "42" || got.Type != corev1.SecretTypeTLS {
		t.Errorf("name %q, resource version %q, type %q", got.Name, got.ResourceVersion, got.Type)
	}
	if unsafe.StringData(rec.GetName()) == unsafe.StringData(decodedName) || unsafe.StringData(rec.GetResourceVersion()) == unsafe.StringData(decodedVersion) {
		t.Error("the record keeps a decoded string")
	}
	if unsafe.StringData(string(rec.Type())) != unsafe.StringData(string(corev1.SecretTypeTLS)) {
		t.Error("the record's type is not the shared constant")
	}
	if again, err := cacheTransform(rec); err != nil || again != any(rec) {
		t.Errorf("the transform given a record again returned %p (%v), want the record %p", again, err, rec)
	}
	for _, obj := range []any{rec, cache.DeletedFinalStateUnknown{Key: "ns/tls", Obj: rec}} {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err != nil || k != "ns/tls" {
			t.Errorf("key of %T: %q, %v; want ns/tls", obj, k, err)
		}
	}
	if m, err := meta.Accessor(rec); err != nil || m.GetResourceVersion() != "42" {
		t.Errorf("meta.Accessor of the record: %v, %v", m, err)
	}

	helm := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.app.v1", Namespace: "ns"}, Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte("H4sIAAAAAAAC")}}
	out, err = cacheTransform(helm)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(*modules.SecretRecord); r.Len() != 0 || r.Secret().Data != nil || r.Type() != "helm.sh/release.v1" {
		t.Errorf("a Secret without kept entries is cached with %d entries (data %q), type %q; want none", r.Len(), r.Secret().Data, r.Type())
	}
}

// TestCacheTransformSecretDataMatchesAFilter: for random data maps, small and large, the transform keeps
// exactly the entries keepSecretEntry accepts, as a plain filter into a new map would.
func TestCacheTransformSecretDataMatchesAFilter(t *testing.T) {
	keys := []string{"tls.crt", "tls.key", "ca.crt", "ca.crl", "auth", "release", "password", "token", "alice", "bob",
		"carol", "dave", "erin", "frank", "grace", "heidi"}
	values := [][]byte{[]byte("x"), []byte("$2y$05$abcdefghijklmnopqrstuuLK7U1u6pVRmL7L1BBM2aS35PSZnDXlK\n"), []byte("not a hash at all"), nil}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		data := map[string][]byte{}
		for range rng.IntN(len(keys) + 1) {
			data[keys[rng.IntN(len(keys))]] = values[rng.IntN(len(values))]
		}
		if rng.IntN(10) == 0 {
			data = nil
		}
		var want map[string][]byte
		for k, v := range data {
			if keepSecretEntry(k, v) {
				if want == nil {
					want = map[string][]byte{}
				}
				want[k] = v
			}
		}
		before := maps.Clone(data)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("s", i), Namespace: "ns"}, Data: data}
		out, err := cacheTransform(s)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*modules.SecretRecord).Secret().Data
		if (got == nil) != (want == nil) || !maps.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("data %q: transformed to %q, want %q", before, got, want)
		}
	}
}

// TestCacheTransformKeepsWhatTheEndpointLaneReads: an EndpointSlice is cached as its record (its key,
// resource version, Service, ports and each endpoint's first address and conditions), which the informer
// can key and which the transform, given it again, returns as it is.
func TestCacheTransformKeepsWhatTheEndpointLaneReads(t *testing.T) {
	ready, tcp, port, name := true, corev1.ProtocolTCP, int32(8080), "http"
	pod := "web-7d9f"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
				"app.kubernetes.io/name": "web", "helm.sh/chart": "web-1.2.3"},
			Annotations:     map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-26T03:30:00Z"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: "web"}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &tcp, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			Hostname:   &pod,
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: pod, UID: "0c5e"},
			NodeName:   &pod,
			Zone:       &pod,
			Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a"}}},
		}},
	}
	s.ResourceVersion = "42"
	want := endpoints.NewSliceRecord(s.DeepCopy())
	out, err := cacheTransform(s)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := out.(*endpoints.SliceRecord)
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("EndpointSlice after the transform: %#v, want the record %+v", out, want)
	}
	if key, err := cache.MetaNamespaceKeyFunc(got); err != nil || key != "ns/web-abc" {
		t.Errorf("informer key %q (%v), want ns/web-abc", key, err)
	}
	if m, err := meta.Accessor(got); err != nil || m.GetResourceVersion() != "42" {
		t.Errorf("resource version through meta.Accessor: %v", err)
	}
	if got.ServiceName() != "web" {
		t.Errorf("Service %q, want web", got.ServiceName())
	}
	if again, err := cacheTransform(got); err != nil || again != any(got) {
		t.Errorf("the transform given its own output returned %#v (%v), want it unchanged", again, err)
	}
}

// TestCacheTransformBoundsConfigMaps: a ConfigMap in the cache keeps its data up to
// nginx.MaxConfigMapData bytes (what custom-headers reads) and loses its labels, owner references and
// binaryData; a larger one loses its data and is marked with its size, so that the translation says why.
func TestCacheTransformBoundsConfigMaps(t *testing.T) {
	small := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "headers", Labels: map[string]string{"app": "x"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "x"}}},
		Data: map[string]string{"X-Frame-Options": "DENY"}, BinaryData: map[string][]byte{"blob": make([]byte, 1<<20)}}
	out, err := cacheTransform(small)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.ConfigMap)
	if got.Data["X-Frame-Options"] != "DENY" || got.Labels != nil || got.OwnerReferences != nil || got.BinaryData != nil ||
		got.Annotations[nginx.ConfigMapDataDroppedAnnotation] != "" {
		t.Errorf("small ConfigMap after the transform: %+v", got)
	}
	large := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dashboards"},
		Data: map[string]string{"dashboard.json": strings.Repeat("x", nginx.MaxConfigMapData)}}
	out, err = cacheTransform(large)
	if err != nil {
		t.Fatal(err)
	}
	got = out.(*corev1.ConfigMap)
	if got.Data != nil || got.Annotations[nginx.ConfigMapDataDroppedAnnotation] != strconv.Itoa(nginx.MaxConfigMapData+len("dashboard.json")) {
		t.Errorf("large ConfigMap after the transform: data of %d keys, annotations %v", len(got.Data), got.Annotations)
	}
}

// TestForgetActions: the fake clientset's record of API calls is cleared periodically in local mode, so
// it does not grow for as long as the controller runs.
func TestForgetActions(t *testing.T) {
	cs := localapi.NewClientset()
	for i := range 50 {
		_, _ = cs.CoreV1().Services("default").Get(context.Background(), fmt.Sprintf("s%d", i), metav1.GetOptions{})
	}
	if n := len(cs.Actions()); n != 50 {
		t.Fatalf("recorded %d actions, want 50", n)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { forgetActions(cs, time.Millisecond, stop); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(cs.Actions()) != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	<-done
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("%d actions still recorded", n)
	}
}

// TestCacheTransformMakesServiceRecords: a Service is cached as its record, which the informer keys as
// the Service, which the transform given it again returns as it is, and whose namespace, port names and
// target port names are shared with every other record's.
func TestCacheTransformMakesServiceRecords(t *testing.T) {
	// Each string its own copy, as the decoder makes them.
	own := strings.Clone
	service := func(name string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: own("team-shared-svc"), UID: "u-" + types.UID(name), ResourceVersion: "42",
				Labels: map[string]string{"app": name}, Annotations: map[string]string{"meta.helm.sh/release-name": name},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "helm"}}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Name: own("web-port"), Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString(own("web-port")), NodePort: 30080}}},
		}
	}
	a, b := service("a"), service("b")
	want := modules.NewServiceRecord(a.DeepCopy()).Service()
	want.Annotations = nil // not autoingress's
	outA, err := cacheTransform(a)
	if err != nil {
		t.Fatal(err)
	}
	outB, _ := cacheTransform(b)
	ra, ok := outA.(*modules.ServiceRecord)
	rb, okB := outB.(*modules.ServiceRecord)
	if !ok || !okB {
		t.Fatalf("the transform returned %T, %T; want records", outA, outB)
	}
	if got := ra.Service(); !reflect.DeepEqual(got, want) {
		t.Errorf("cached Service %+v, want %+v", got, want)
	}
	sa, sb := ra.Service(), rb.Service()
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	if !same(sa.Namespace, sb.Namespace) || !same(sa.Spec.Ports[0].Name, sb.Spec.Ports[0].Name) ||
		!same(sa.Spec.Ports[0].TargetPort.StrVal, sb.Spec.Ports[0].TargetPort.StrVal) {
		t.Error("the namespace, port name or target port name of two records are not one shared copy")
	}
	if key, err := cache.MetaNamespaceKeyFunc(ra); err != nil || key != "team-shared-svc/a" {
		t.Errorf("informer key %q (%v), want team-shared-svc/a", key, err)
	}
	if again, err := cacheTransform(ra); err != nil || again != any(ra) {
		t.Errorf("the transform given its own output returned %#v (%v), want it unchanged", again, err)
	}
}
