package nginx

import (
	"fmt"
	"strconv"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// benchWorld is n Ingresses, each with its own host and two Prefix paths to its own Service.
func benchWorld(n int) ([]*networkingv1.Ingress, services) {
	svcs := services{}
	ings := make([]*networkingv1.Ingress, n)
	for i := range n {
		name := "app-" + strconv.Itoa(i)
		svcs[nn("bench", name)] = service("bench", name, port(80, "http"))
		ings[i] = ingress("bench", name, rule(fmt.Sprintf("%s.bench.example.com", name), prefix("/", name, 80), prefix("/api", name, "http")))
	}
	return ings, svcs
}

func benchTranslations(n int) []*IngressTranslation {
	ings, svcs := benchWorld(n)
	ts := make([]*IngressTranslation, n)
	for i, ing := range ings {
		t, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
		if err != nil {
			panic(err)
		}
		ts[i] = t
	}
	return ts
}

// BenchmarkTranslateRender measures the full structure lane from Ingress objects to nginx.conf bytes
// without cache: translate every Ingress, merge, render, hash.
func BenchmarkTranslateRender(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			ings, svcs := benchWorld(n)
			cfg := baseRenderConfig()
			var size int
			b.ReportAllocs()
			for b.Loop() {
				ts := make([]*IngressTranslation, 0, n)
				for _, ing := range ings {
					t, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
					if err != nil {
						b.Fatal(err)
					}
					ts = append(ts, t)
				}
				m, _ := Merge(ts, nil)
				conf, _, err := Render(m, cfg)
				if err != nil {
					b.Fatal(err)
				}
				size = len(conf)
			}
			b.ReportMetric(float64(size)/float64(2*n), "bytes/path")
			b.ReportMetric(float64(size), "conf-bytes")
		})
	}
}

// BenchmarkRerenderOneChanged measures the renderer's steady state: one Ingress among n changed, every
// Ingress goes through the TranslationCache (n-1 hits), then merge, render, hash and the comparison of
// the routes with the previous model. merge=incremental is the renderer's ModelBuilder (its Merger redoes
// only the changed Ingress's hosts); merge=full merges every Ingress again, as before issue #13's last
// step.
func BenchmarkRerenderOneChanged(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, mode := range []string{"incremental", "full"} {
			b.Run(fmt.Sprintf("ingresses=%d/merge=%s", n, mode), func(b *testing.B) {
				ings, svcs := benchWorld(n)
				builder := NewModelBuilder()
				cache := NewTranslationCache()
				in := BuildInput{Ingresses: ings, Services: svcs, Options: DefaultTranslateOptions()}
				last := builder.Build(in).Model
				cfg := baseRenderConfig()
				changed := ings[n/2]
				backend := &changed.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name
				names := [2]string{*backend, ings[0].Name} // switched between two Services, starting with the other
				rv := 2
				b.ReportAllocs()
				for b.Loop() {
					rv++
					changed.ResourceVersion = strconv.Itoa(rv)
					*backend = names[rv%2]
					var m Model
					if mode == "incremental" {
						m = builder.Build(in).Model
					} else {
						ts := make([]*IngressTranslation, 0, n)
						for _, ing := range ings {
							t, err := cache.Translate(ing, svcs, DefaultTranslateOptions())
							if err != nil {
								b.Fatal(err)
							}
							ts = append(ts, t)
						}
						m, _ = Merge(ts, nil)
					}
					if _, _, err := Render(m, cfg); err != nil {
						b.Fatal(err)
					}
					if m.SameRoutes(&last) {
						b.Fatal("a changed Ingress left the routes as they were")
					}
					last = m
				}
			})
		}
	}
}

// BenchmarkPhases splits 1,000 Ingresses into the lane's phases.
func BenchmarkPhases(b *testing.B) {
	const n = 1000
	ings, svcs := benchWorld(n)
	ts := benchTranslations(n)
	m, _ := Merge(ts, nil)
	cfg := baseRenderConfig()
	b.Run("translate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, ing := range ings {
				if _, err := TranslateIngress(ing, svcs, DefaultTranslateOptions()); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("merge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Merge(ts, nil)
		}
	})
	b.Run("render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := Render(m, cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
