package nginx

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestModelBuilder: a build reports rejections, warnings, conflicts and the Services it depends on, and
// its cache keeps only the Ingresses of the latest build.
func TestModelBuilder(t *testing.T) {
	svcs := servicesOf(service("ns", "web", port(80, "http")))
	good := ingress("ns", "good", rule("a.example", prefix("/", "web", 80)))
	newer := ingress("ns", "newer", age(1), rule("a.example", prefix("/", "web", "http")), rule("b.example", prefix("/", "missing", 80)))
	bad := ingress("ns", "bad", rule("c.example", prefix("/", "web", 8080)))
	b := NewModelBuilder()

	build := b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{bad, good, newer}, Services: svcs, Options: DefaultTranslateOptions(),
		DefaultBackend: nn("ns", "default-backend")})
	if build.Translated != 2 || len(build.Rejected) != 1 || build.Rejected[0].Ingress != bad {
		t.Errorf("translated %d, rejected %+v; want 2 translated and ns/bad rejected", build.Translated, build.Rejected)
	}
	if len(build.Warnings) != 1 || build.Warnings[0].Ingress != newer {
		t.Errorf("warnings = %+v, want one for ns/newer (its missing Service)", build.Warnings)
	}
	if len(build.Conflicts) != 1 || build.Conflicts[0].Loser != nn("ns", "newer") {
		t.Errorf("conflicts = %+v, want ns/newer losing a.example/", build.Conflicts)
	}
	if !build.DefaultBackendMissing {
		t.Error("a default backend Service that does not exist is not reported")
	}
	var used []types.NamespacedName
	for k := range build.Services {
		used = append(used, k)
	}
	slices.SortFunc(used, compareKeys)
	if want := []types.NamespacedName{nn("ns", "missing"), nn("ns", "web")}; !slices.Equal(used, want) {
		t.Errorf("services = %v, want %v", used, want)
	}
	if got := b.Cached(); got != 3 {
		t.Errorf("cache holds %d Ingresses, want 3", got)
	}

	b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{good}, Services: svcs, Options: DefaultTranslateOptions()})
	if got := b.Cached(); got != 1 {
		t.Errorf("after a build of one Ingress the cache holds %d, want 1", got)
	}
}
