package secretsync

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	listersnetv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/internal/heapstat"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// BenchmarkSyncerMemory reports the heap the syncer keeps per referenced Secret (B/secret) once
// 10,000 Ingresses, each with a TLS Secret of its own, are synced: "valid" with every Secret present and
// usable, "missing" with none present (each Ingress gets a Warning Event). The informer caches are filled
// before the first measurement, so only what the syncer adds (reference index, state, expiry series) and
// the certificates it publishes count: a subscriber keeps the last certificate of each Secret, as the
// reloader's certificate lane does, so a certificate counts once whether or not the syncer shares it.
//
//	go test -run '^$' -bench BenchmarkSyncerMemory -benchtime 3x ./modules/secretsync/
func BenchmarkSyncerMemory(b *testing.B) {
	const n = 10_000
	p := newPair(b, "bench.example")
	for _, bc := range []struct {
		name    string
		present bool
	}{{"valid", true}, {"missing", false}} {
		b.Run(bc.name, func(b *testing.B) {
			indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
			secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
			ingresses := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
			keys := make([]types.NamespacedName, 0, n)
			for i := range n {
				name := fmt.Sprintf("app-%05d", i)
				ing := gen.Ingress(ns, name, gen.TLS(name+"-tls", name+".example"))
				if err := ingresses.Add(ing); err != nil {
					b.Fatal(err)
				}
				keys = append(keys, types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name})
				if bc.present {
					// As the shared cache holds them: records, read through SecretsIn.
					if err := secrets.Add(modules.NewSecretRecord(gen.Secret(ns, name+"-tls", gen.TLSData(p.cert, p.key)))); err != nil {
						b.Fatal(err)
					}
				}
			}
			store, err := certs.NewStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			var kept int64
			for range b.N {
				reg := prometheus.NewRegistry()
				s, err := New(Params{
					Options:        Options{Store: store},
					Factory:        informers.NewSharedInformerFactory(fake.NewClientset(), 0),
					IngressChanges: pipeline.NewTopic[modules.IngressChange]("ingress-changes"),
					CertChanges:    pipeline.NewTopic[modules.CertChange]("cert-changes"),
					Recorder:       &record.FakeRecorder{},
					Metrics:        pipeline.NewMetrics(reg),
					Registry:       reg,
					Log:            zap.NewNop(),
				})
				if err != nil {
					b.Fatal(err)
				}
				s.secrets = modules.SecretsIn(secrets)
				s.ingresses = listersnetv1.NewIngressLister(ingresses)
				// The subscriber's table is allocated before the measurement: only the certificates count.
				held := make(map[types.NamespacedName]*certs.Certificate, n)
				for _, k := range keys {
					held[types.NamespacedName{Namespace: k.Namespace, Name: k.Name + "-tls"}] = nil
				}
				var heldMu sync.Mutex
				s.out.Subscribe(func(c modules.CertChange) {
					heldMu.Lock()
					held[c.Secret] = c.Certificate
					heldMu.Unlock()
				})
				before := heapstat.Live()
				for _, k := range keys {
					for _, sk := range s.ingressChanged(modules.IngressChange{Key: k, Accepted: true}) {
						if err := s.sync(context.Background(), sk); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := s.out.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
				after := heapstat.Live()
				runtime.KeepAlive(s)
				heldMu.Lock()
				runtime.KeepAlive(held)
				heldMu.Unlock()
				if after > before {
					kept += after - before
				}
			}
			b.ReportMetric(float64(kept)/float64(b.N)/n, "B/secret")
		})
	}
}
