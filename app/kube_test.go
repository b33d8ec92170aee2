package app

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/modules"
)

// The shared informers come without the namespace index, watch only --watch-namespace when it is set,
// and still answer lookups by key and lists by namespace.
func TestUnindexedInformers(t *testing.T) {
	meta := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	cs := fake.NewClientset(
		&corev1.Secret{ObjectMeta: meta("a", "s")}, &corev1.Secret{ObjectMeta: meta("b", "s")},
		&corev1.Service{ObjectMeta: meta("a", "svc")}, &corev1.Service{ObjectMeta: meta("b", "svc")},
		&discoveryv1.EndpointSlice{ObjectMeta: meta("a", "es")},
		&corev1.ConfigMap{ObjectMeta: meta("a", "cm")},
		&networkingv1.Ingress{ObjectMeta: meta("a", "ing")}, &networkingv1.Ingress{ObjectMeta: meta("b", "ing")},
	)
	for _, tc := range []struct {
		namespace string
		secrets   int // Secrets listed in namespace "a" and in all
	}{{namespace: "", secrets: 2}, {namespace: "a", secrets: 1}} {
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(tc.namespace))
		registerUnindexedInformers(f, tc.namespace)
		infs := []cache.SharedIndexInformer{
			f.Core().V1().Secrets().Informer(), f.Core().V1().Services().Informer(),
			f.Discovery().V1().EndpointSlices().Informer(), f.Core().V1().ConfigMaps().Informer(),
			f.Networking().V1().Ingresses().Informer(),
		}
		for _, inf := range infs {
			if ix := inf.GetIndexer().GetIndexers(); len(ix) != 0 {
				t.Errorf("namespace %q: %T informer has indexers %v", tc.namespace, inf, ix)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		f.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				t.Fatalf("%v did not sync", typ)
			}
		}
		if _, err := f.Core().V1().Secrets().Lister().Secrets("a").Get("s"); err != nil {
			t.Errorf("namespace %q: get a/s: %v", tc.namespace, err)
		}
		inA, err := f.Networking().V1().Ingresses().Lister().Ingresses("a").List(labels.Everything())
		if err != nil || len(inA) != 1 || inA[0].Namespace != "a" {
			t.Errorf("namespace %q: Ingresses of a = %v, %v; want a/ing", tc.namespace, inA, err)
		}
		all, err := f.Core().V1().Secrets().Lister().List(labels.Everything())
		if err != nil || len(all) != tc.secrets {
			t.Errorf("namespace %q: %d Secrets cached (%v), want %d", tc.namespace, len(all), err, tc.secrets)
		}
		cancel()
		f.Shutdown()
	}
}

// An update that leaves a Secret's values as they were (here a label) is cached with the values the cache
// held already, so a certificate parsed from them before keeps sharing them; a changed value is the new one.
func TestSecretUpdateSharesUnchangedData(t *testing.T) {
	crt, key := []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), []byte("key one")
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "tls"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}})
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(cacheTransform))
	registerUnindexedInformers(f, "")
	inf := f.Core().V1().Secrets().Informer()
	if err := shareUnchangedSecretData(inf); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	f.Start(ctx.Done())
	defer func() {
		cancel()
		f.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("Secrets did not sync")
	}
	cached := func() *corev1.Secret {
		o, ok, err := inf.GetStore().GetByKey("a/tls")
		if !ok || err != nil {
			t.Fatalf("a/tls not cached: %v", err)
		}
		s, ok := modules.SecretOf(o)
		if !ok {
			t.Fatalf("a/tls is cached as %T", o)
		}
		return s
	}
	// waitFor polls the cache until the cached Secret's resourceVersion differs from rv.
	waitFor := func(rv string) *corev1.Secret {
		for ctx.Err() == nil {
			if s := cached(); s.ResourceVersion != rv {
				return s
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("the update never reached the cache")
		return nil
	}
	first := cached()
	sameBacking := func(a, b []byte) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

	s := first.DeepCopy()
	s.Labels = map[string]string{"renewed": "no"}
	s.ResourceVersion = "2" // the fake clientset keeps what it is given
	if _, err := cs.CoreV1().Secrets("a").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitFor(first.ResourceVersion)
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if !sameBacking(second.Data[k], first.Data[k]) {
			t.Errorf("%s: an unchanged value was not shared with the cached one", k)
		}
	}

	s = second.DeepCopy()
	s.Data[corev1.TLSPrivateKeyKey] = []byte("key two")
	s.ResourceVersion = "3"
	if _, err := cs.CoreV1().Secrets("a").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	third := waitFor(second.ResourceVersion)
	if !sameBacking(third.Data[corev1.TLSCertKey], first.Data[corev1.TLSCertKey]) {
		t.Error("the unchanged certificate was not shared after the key changed")
	}
	if string(third.Data[corev1.TLSPrivateKeyKey]) != "key two" {
		t.Errorf("changed key cached as %q, want %q", third.Data[corev1.TLSPrivateKeyKey], "key two")
	}
	if sameBacking(third.Data[corev1.TLSPrivateKeyKey], first.Data[corev1.TLSPrivateKeyKey]) {
		t.Error("a changed value shares the old one's bytes")
	}
}
