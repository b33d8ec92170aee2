package app

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/modules/reloader"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// syncHeapProfiles, when set, is a directory where BenchmarkSyncAtScale writes the controller's heap
// profile (after a collection, what the recording Applier kept dropped) for each size, as
// heap-<n>.pb.gz.
var syncHeapProfiles = flag.String("sync-heap-profiles", "", "directory for BenchmarkSyncAtScale's heap profiles")

// BenchmarkSyncAtScale starts the whole controller (every module, the data plane swapped for a recording
// Applier so NGINX's own reload time is left out) on a cluster of n Ingresses, each with its Service and
// EndpointSlice, and measures the time from start to the routes of all of them pushed, and the
// heap the controller holds afterwards (informer caches, translation cache, module state) per Ingress.
//
//	go test -run '^$' -bench SyncAtScale -benchtime 1x ./app/
//	go test -run '^$' -bench SyncAtScale/ingresses=10000 -benchtime 1x ./app/ -args -sync-heap-profiles=/tmp/heap
func BenchmarkSyncAtScale(b *testing.B) {
	for _, n := range []int{1000, 3000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				syncAtScale(b, n)
			}
		})
	}
}

// scaleApp builds the whole controller (not started), with a recording Applier as its data plane, on a
// local cluster of n Ingresses, each with its Service and EndpointSlice.
func scaleApp(b *testing.B, n int) (*fx.App, *KubeSource, *recordingApplier) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "class.yaml"), []byte(
		"apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: ingress-reactor}\nspec: {controller: k8s.io/ingress-reactor}\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.LocalManifests = dir
	cfg.HealthzHost = "127.0.0.1"
	cfg.HealthzPort = freePort(b)
	cfg.NginxDir = filepath.Join(dir, "nginx")
	cfg.SSLDir = filepath.Join(dir, "ssl")
	cfg.UpdateStatus = false

	rec := newRecordingApplier()
	var src *KubeSource
	a := New(cfg, zap.NewNop(), fx.Replace(fx.Annotate(rec, fx.As(new(reloader.Applier)))), fx.Populate(&src))
	if err := a.Err(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: name + "-1", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{fmt.Sprintf("10.%d.%d.1", i/250, i%250)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
				{Addresses: []string{fmt.Sprintf("10.%d.%d.2", i/250, i%250)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			},
		}
		prefix := networkingv1.PathTypePrefix
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, ResourceVersion: "1", UID: types.UID("uid-bench-" + name),
				CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0)),
				Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(bytes.Repeat([]byte("x"), 1500))}},
			Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To("ingress-reactor"),
				Rules: []networkingv1.IngressRule{{Host: name + ".bench.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{
						{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}},
						{Path: "/api", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}},
					},
				}}}},
			},
		}
		if _, err := src.Client.CoreV1().Services("bench").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := src.Client.DiscoveryV1().EndpointSlices("bench").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := src.Client.NetworkingV1().Ingresses("bench").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return a, src, rec
}

func syncAtScale(b *testing.B, n int) {
	b.StopTimer()
	a, _, rec := scaleApp(b, n)
	ctx := context.Background()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	b.StartTimer()
	began := time.Now()
	if err := a.Start(ctx); err != nil {
		b.Fatal(err)
	}
	last := nginx.Hostname(fmt.Sprintf("app-%d.bench.example.com", n-1))
	deadline := time.Now().Add(5 * time.Minute)
	for {
		rec.mu.Lock()
		ok := len(rec.confs) > 0 && rec.routes[last] != nil && len(rec.endpoints) >= 2*n
		rec.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no routes for all %d Ingresses and their endpoints", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(began)
	b.StopTimer()
	// Drop what the recording Applier keeps, so only the controller's own state is measured.
	rec.mu.Lock()
	rec.confs = rec.confs[len(rec.confs)-1:]
	rec.routes, rec.endpoints = nil, nil
	rec.mu.Unlock()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if *syncHeapProfiles != "" {
		writeHeapProfile(b, filepath.Join(*syncHeapProfiles, fmt.Sprintf("heap-%d.pb.gz", n)))
	}
	b.ReportMetric(took.Seconds(), "sync-s")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "heap-bytes/ingress")
	if err := a.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkChangeAtScale measures the controller's part of one Ingress change at scale: the time from
// the update of one Ingress (its "/" path switched to another Service) to the routes push that carries
// it, with every module running and the data plane swapped for a recording Applier. NGINX serves a
// pushed route within about 1 ms (BenchmarkRouteChange in ./nginx); the rest of a change's latency is
// here. With -cpuprofile it shows where a change's time goes.
//
//	go test -run '^$' -bench ChangeAtScale -benchtime 50x ./app/
func BenchmarkChangeAtScale(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			a, src, rec := scaleApp(b, n)
			ctx := context.Background()
			if err := a.Start(ctx); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = a.Stop(ctx) })
			first := nginx.Hostname(fmt.Sprintf("app-%d.bench.example.com", n-1))
			waitRoutes(b, rec, func(routes map[nginx.Hostname][]byte) bool { return routes[first] != nil })

			ings := src.Client.NetworkingV1().Ingresses("bench")
			name := fmt.Sprintf("app-%d", n/2)
			host := nginx.Hostname(name + ".bench.example.com")
			backends := [2]string{"app-0", name}
			var inAPI, inController time.Duration
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := range b.N {
				began := time.Now()
				ing, err := ings.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					b.Fatal(err)
				}
				ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = backends[i%2]
				if _, err := ings.Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
					b.Fatal(err)
				}
				updated := time.Now()
				want := []byte(`"bench-` + backends[i%2] + `-80-`)
				waitRoutes(b, rec, func(routes map[nginx.Hostname][]byte) bool { return bytes.Contains(routes[host], want) })
				inAPI += updated.Sub(began)
				inController += time.Since(updated)
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			// What the changes left behind, after a collection: a leak shows as a steady amount per change.
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "retained-B/op")
			// The local API's Get and Update (managed fields included) are not the controller's.
			b.ReportMetric(float64(inAPI.Microseconds())/1000/float64(b.N), "api-ms/op")
			b.ReportMetric(float64(inController.Microseconds())/1000/float64(b.N), "controller-ms/op")
		})
	}
}

// waitRoutes waits, at most a minute, until ok holds for the routes the recording Applier has.
func waitRoutes(b *testing.B, rec *recordingApplier, ok func(map[nginx.Hostname][]byte) bool) {
	b.Helper()
	deadline := time.After(time.Minute)
	for {
		rec.mu.Lock()
		done := ok(rec.routes)
		rec.mu.Unlock()
		if done {
			return
		}
		select {
		case <-rec.routesPushed:
		case <-deadline:
			b.Fatal("the routes did not change within a minute")
		}
	}
}

// writeHeapProfile writes the heap profile of the live heap (as of the last collection) to path.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
