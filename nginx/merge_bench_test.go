package nginx

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkMergerApplyOneChange measures the Merger alone holding n Ingresses (benchWorld): each
// iteration applies one change, an Ingress switched between its own Service and a spare one, so that
// every change removes two upstreams and adds two. Both translations are made beforehand; what is
// measured is the merge, above all the garbage a change leaves (B/op), which at 10,000 Ingresses is
// what lifts the controller's heap after a burst of changes.
//
//	go test -run '^$' -bench MergerApplyOneChange -benchmem ./nginx/
func BenchmarkMergerApplyOneChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			ings, svcs := benchWorld(n)
			svcs[nn("bench", "spare")] = service("bench", "spare", port(80, "http"))
			ts := make([]*IngressTranslation, n)
			for i, ing := range ings {
				t, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
				if err != nil {
					b.Fatal(err)
				}
				ts[i] = t
			}
			changed := ings[n/2].DeepCopy()
			for i := range changed.Spec.Rules[0].HTTP.Paths {
				changed.Spec.Rules[0].HTTP.Paths[i].Backend.Service.Name = "spare"
			}
			switched, err := TranslateIngress(changed, svcs, DefaultTranslateOptions())
			if err != nil {
				b.Fatal(err)
			}
			variants := [2]*IngressTranslation{ts[n/2], switched}
			key := types.NamespacedName{Namespace: changed.Namespace, Name: changed.Name}
			m := new(Merger)
			before := m.Merge(ts, MergeOptions{}).Model
			upstreams := len(before.Upstreams)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				r := m.Apply(map[types.NamespacedName]TranslationChange{key: {Old: variants[(i+1)%2], New: variants[i%2]}}, MergeOptions{})
				if len(r.Model.Upstreams) != upstreams {
					b.Fatalf("the model has %d upstreams, want %d", len(r.Model.Upstreams), upstreams)
				}
				if _, ok := r.Model.Upstream(variants[i%2].Upstreams[0].Name); !ok {
					b.Fatalf("the model lacks the changed Ingress's upstream %s", variants[i%2].Upstreams[0].Name)
				}
			}
		})
	}
}

// BenchmarkMergerApplySharedHost measures a change on a host that n Ingresses share, each routing a
// path of its own to one Service (an API host that many teams add paths to): every change merges the
// host again, so what a merge of one host costs per location is multiplied by n there.
//
//	go test -run '^$' -bench MergerApplySharedHost -benchmem ./nginx/
func BenchmarkMergerApplySharedHost(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			svcs := servicesOf(service("bench", "web", port(80, "http")))
			ts := make([]*IngressTranslation, n)
			for i := range ts {
				ing := ingress("bench", fmt.Sprintf("team-%d", i), rule("api.bench.example.com", prefix(fmt.Sprintf("/team-%d", i), "web", 80)))
				t, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
				if err != nil {
					b.Fatal(err)
				}
				ts[i] = t
			}
			changed, err := TranslateIngress(ingress("bench", "team-7", rule("api.bench.example.com", prefix("/team-7-v2", "web", 80))), svcs, DefaultTranslateOptions())
			if err != nil {
				b.Fatal(err)
			}
			variants := [2]*IngressTranslation{ts[7], changed}
			key := nn("bench", "team-7")
			m := new(Merger)
			m.Merge(ts, MergeOptions{})
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				r := m.Apply(map[types.NamespacedName]TranslationChange{key: {Old: variants[(i+1)%2], New: variants[i%2]}}, MergeOptions{})
				if s := r.Model.Server("api.bench.example.com"); s == nil || len(s.Locations) != n {
					b.Fatalf("the shared host has not %d locations", n)
				}
			}
		})
	}
}
