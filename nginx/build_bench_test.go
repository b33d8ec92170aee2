package nginx

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/internal/heapstat"
)

// scaleWorld is the scale run's Ingresses (test/integration/scale_test.go): n Ingresses, each with
// its own host whose / and /api go to its own Service, by port number and by port name, in two rules;
// with tls, each lists its host in spec.tls with a Secret of its own.
func scaleWorld(n int, tls bool) ([]*networkingv1.Ingress, services) {
	svcs := services{}
	ings := make([]*networkingv1.Ingress, n)
	for i := range n {
		name := "app-" + strconv.Itoa(i)
		host := name + ".scale.example"
		svcs[nn("bench", name)] = service("bench", name, port(80, "http"))
		opts := []ingressOption{rule(host, prefix("/", name, 80)), rule(host, prefix("/api", name, "http"))}
		if tls {
			opts = append(opts, withTLS(name, host))
		}
		ings[i] = ingress("bench", name, opts...)
	}
	return ings, svcs
}

// builderHeapProfile, when set, is a file where BenchmarkModelBuilderRetained writes the heap profile
// (after a collection) of its last run, with the builder alive.
var builderHeapProfile = flag.String("builder-heap-profile", "", "file for BenchmarkModelBuilderRetained's heap profile")

// BenchmarkModelBuilderRetained measures what the renderer keeps per Ingress: a ModelBuilder (its
// translation cache, the Merger's indexes and the merged model) built from n Ingresses at once, then
// given n/10 more one at a time (Update), as the scale run creates 1,000 more at its end. The Ingress
// and Service objects exist before the first measurement, so retained-B/ingress is the builder's own
// state and the latest model, after a collection.
//
//	go test -run '^$' -bench ModelBuilderRetained -benchtime 1x ./nginx/
//	go test -run '^$' -bench ModelBuilderRetained//tls=true -benchtime 1x -memprofilerate 1 ./nginx/ -args -builder-heap-profile=/tmp/builder.pb.gz
func BenchmarkModelBuilderRetained(b *testing.B) {
	for _, tls := range []bool{false, true} {
		n := 10000
		b.Run(fmt.Sprintf("ingresses=%d/tls=%v", n, tls), func(b *testing.B) {
			for b.Loop() {
				builderRetained(b, n, tls)
			}
		})
	}
}

func builderRetained(b *testing.B, n int, tls bool) {
	b.StopTimer()
	extra := n / 10
	ings, svcs := scaleWorld(n+extra, tls)
	byKey := make(map[types.NamespacedName]*networkingv1.Ingress, len(ings))
	for _, ing := range ings {
		byKey[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = ing
	}
	live := map[types.NamespacedName]bool{}
	before := heapstat.Live()
	b.StartTimer()

	builder := NewModelBuilder()
	build := builder.Build(BuildInput{Ingresses: ings[:n], Services: svcs, Options: DefaultTranslateOptions()})
	for _, ing := range ings[:n] {
		live[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = true
	}
	for _, ing := range ings[n:] {
		key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		live[key] = true
		build = builder.Update(UpdateInput{
			Ingresses: []types.NamespacedName{key},
			Get: func(k types.NamespacedName) (*networkingv1.Ingress, bool) {
				if !live[k] {
					return nil, false
				}
				return byKey[k], true
			},
			Lookup:  svcs,
			Options: DefaultTranslateOptions(),
		})
	}

	b.StopTimer()
	if got := len(build.Model.Servers); got != n+extra+1 {
		b.Fatalf("the model has %d servers, want %d", got, n+extra+1)
	}
	live = nil
	after := heapstat.Live()
	if *builderHeapProfile != "" {
		f, err := os.Create(*builderHeapProfile)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	runtime.KeepAlive(builder)
	runtime.KeepAlive(build)
	runtime.KeepAlive(ings)
	runtime.KeepAlive(svcs)
	runtime.KeepAlive(byKey)
	b.ReportMetric(float64(after-before)/float64(n+extra), "retained-B/ingress")
	b.StartTimer()
}
