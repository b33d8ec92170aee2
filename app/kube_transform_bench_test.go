package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"github.com/ingress-reactor/ingress-reactor/internal/heapstat"
	"math/big"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// protoObject is a Kubernetes API type with its generated protobuf codec, as the API client decodes it.
type protoObject interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// BenchmarkCacheTransformRetained measures what one cached object of each kind keeps on the heap after
// cacheTransform: 10,000 objects shaped like a real cluster's are encoded in protobuf, decoded one by one
// into fresh objects (as the API client does for a watch), transformed and kept alive; the heap grown by
// them, after a collection, divided by their number is reported per kind in bytes (B/kind), and the heap
// spans they occupy (spanB/kind: the live bytes plus the free slots that garbage of their decoding and
// transform left between them).
//
//	go test -run '^$' -bench CacheTransformRetained -benchtime 1x ./app/
func BenchmarkCacheTransformRetained(b *testing.B) {
	const n = 10000
	certPEM, keyPEM := benchECDSACert(b)
	kinds := []struct {
		metric string
		build  func(i int) protoObject
		fresh  func() protoObject
	}{
		{"B/service", func(i int) protoObject { return benchService(i) }, func() protoObject { return &corev1.Service{} }},
		{"B/endpointslice", func(i int) protoObject { return benchEndpointSlice(i) }, func() protoObject { return &discoveryv1.EndpointSlice{} }},
		{"B/tls-secret", func(i int) protoObject { return benchTLSSecret(i, certPEM, keyPEM) }, func() protoObject { return &corev1.Secret{} }},
		{"B/helm-secret", func(i int) protoObject { return benchHelmSecret(i) }, func() protoObject { return &corev1.Secret{} }},
		{"B/ingress", func(i int) protoObject { return benchIngress(i) }, func() protoObject { return &networkingv1.Ingress{} }},
	}
	for range b.N {
		for _, k := range kinds {
			raw := make([][]byte, n)
			for i := range raw {
				data, err := k.build(i).Marshal()
				if err != nil {
					b.Fatal(err)
				}
				raw[i] = data
			}
			kept := make([]any, n)
			before, beforeSpans := heapstat.Live(), heapstat.InUse()
			for i, data := range raw {
				obj := k.fresh()
				if err := obj.Unmarshal(data); err != nil {
					b.Fatal(err)
				}
				out, err := cacheTransform(obj)
				if err != nil {
					b.Fatal(err)
				}
				kept[i] = out
			}
			after, afterSpans := heapstat.Live(), heapstat.InUse()
			b.ReportMetric(float64(int64(after)-int64(before))/n, k.metric)
			b.ReportMetric(float64(afterSpans-beforeSpans)/n, "span"+k.metric)
			runtime.KeepAlive(kept)
			runtime.KeepAlive(raw)
		}
	}
}

// benchNamespace spreads the objects over 50 namespaces, as tenants of a shared cluster.
func benchNamespace(i int) string { return fmt.Sprintf("team-%02d", i%50) }

func benchMeta(i int, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              name,
		Namespace:         benchNamespace(i),
		UID:               types.UID(fmt.Sprintf("3f2a9c1e-%04x-4b7d-9e21-%012x", i%65536, i)),
		ResourceVersion:   fmt.Sprintf("%d", 18400000+i),
		Generation:        1,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)),
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)}},
	}
}

func benchLabels(app string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       app,
		"app.kubernetes.io/instance":   app,
		"app.kubernetes.io/managed-by": "Helm",
		"helm.sh/chart":                "web-1.4.2",
	}
}

func benchService(i int) *corev1.Service {
	app := fmt.Sprintf("app-%05d", i)
	m := benchMeta(i, app)
	m.Labels = benchLabels(app)
	m.Annotations = map[string]string{"meta.helm.sh/release-name": app, "meta.helm.sh/release-namespace": m.Namespace}
	ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
	return &corev1.Service{
		ObjectMeta: m,
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/instance": app},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromInt32(9090)},
			},
			ClusterIP:             ip,
			ClusterIPs:            []string{ip},
			SessionAffinity:       corev1.ServiceAffinityNone,
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicySingleStack),
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

func benchEndpointSlice(i int) *discoveryv1.EndpointSlice {
	app := fmt.Sprintf("app-%05d", i)
	m := benchMeta(i, app+"-x7k2p")
	m.GenerateName = app + "-"
	m.Labels = benchLabels(app)
	m.Labels[discoveryv1.LabelServiceName] = app
	m.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	m.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-20T08:00:00Z"}
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: app,
		UID: types.UID(fmt.Sprintf("3f2a9c1e-%04x-4b7d-9e21-%012x", i%65536, i)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  m,
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8080))},
			{Name: ptr.To("metrics"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(9090))},
		},
	}
	for j := range 3 {
		pod := fmt.Sprintf("%s-7d9f8c6b5-%05d", app, j)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.%d.%d", (i*3+j)/250%250, (i*3+j)%250+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: m.Namespace, Name: pod, UID: types.UID(fmt.Sprintf("8e1b-%d-%d", i, j))},
			NodeName:   ptr.To(fmt.Sprintf("node-%02d", (i+j)%20)),
			Zone:       ptr.To(fmt.Sprintf("eu-west-1%c", 'a'+rune(j))),
		})
	}
	return s
}

func benchTLSSecret(i int, certPEM, keyPEM []byte) *corev1.Secret {
	m := benchMeta(i, fmt.Sprintf("app-%05d-tls", i))
	m.Labels = map[string]string{"controller.cert-manager.io/fao": "true"}
	m.Annotations = map[string]string{
		"cert-manager.io/alt-names":        fmt.Sprintf("app-%05d.example.com", i),
		"cert-manager.io/certificate-name": fmt.Sprintf("app-%05d-tls", i),
		"cert-manager.io/common-name":      fmt.Sprintf("app-%05d.example.com", i),
		"cert-manager.io/issuer-kind":      "ClusterIssuer",
		"cert-manager.io/issuer-name":      "letsencrypt",
	}
	return &corev1.Secret{ObjectMeta: m, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
}

func benchHelmSecret(i int) *corev1.Secret {
	app := fmt.Sprintf("app-%05d", i)
	m := benchMeta(i, "sh.helm.release.v1."+app+".v3")
	m.Labels = map[string]string{"name": app, "owner": "helm", "status": "deployed", "version": "3"}
	return &corev1.Secret{ObjectMeta: m, Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(strings.Repeat("H4sIAAAAAAAC/+y9", 256))}}
}

func benchIngress(i int) *networkingv1.Ingress {
	app := fmt.Sprintf("app-%05d", i)
	m := benchMeta(i, app)
	m.Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}
	host := app + ".example.com"
	backend := func(port string) networkingv1.IngressBackend {
		return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: app, Port: networkingv1.ServiceBackendPort{Name: port}}}
	}
	rule := func(h, path, port string) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: path, PathType: ptr.To(networkingv1.PathTypePrefix), Backend: backend(port)}}}}}
	}
	return &networkingv1.Ingress{ObjectMeta: m, Spec: networkingv1.IngressSpec{
		IngressClassName: ptr.To("nginx"),
		TLS:              []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: app + "-tls"}},
		Rules:            []networkingv1.IngressRule{rule(host, "/", "http"), rule("api."+host, "/v1", "http")},
	}, Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
		Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.10"}}}}}
}

// benchECDSACert returns a self-signed P-256 certificate and its key in PEM, the shape of a cert-manager
// certificate.
func benchECDSACert(tb testing.TB) (certPEM, keyPEM []byte) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "app.example.com"},
		DNSNames: []string{"app.example.com"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
