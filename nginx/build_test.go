package nginx

import (
	"slices"
	"testing"
	"time"

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

// TestModelBuilderServesTheLastGoodVersion: an update that cannot be translated leaves the Ingress's last
// good version in the model (so a younger Ingress of another namespace does not take its path), reported
// as a stale rejection; a valid update replaces it, and a new object of the same name has no past.
func TestModelBuilderServesTheLastGoodVersion(t *testing.T) {
	svcs := servicesOf(service("a", "web", port(80, "http")), service("b", "web", port(80, "http")))
	good := ingress("a", "site", rule("shop.example", prefix("/", "web", 80)))
	typo := ingress("a", "site", annotate(AnnotationSSLRedirect, "flase"), rule("shop.example", prefix("/", "web", 80)))
	typo.ResourceVersion = "2"
	rival := ingress("b", "rival", age(time.Minute), rule("shop.example", prefix("/", "web", 80)))
	b := NewModelBuilder()
	build := func(ings ...*networkingv1.Ingress) Build {
		return b.Build(BuildInput{Ingresses: ings, Services: svcs, Options: DefaultTranslateOptions()})
	}
	servedBy := func(m Model) string {
		s, ok := server(m, "shop.example")
		if !ok || len(s.Locations) != 1 {
			return "nobody"
		}
		return s.Locations[0].Ingress.String()
	}

	build(good, rival)
	got := build(typo, rival)
	if servedBy(got.Model) != "a/site" || got.Stale != 1 || len(got.Rejected) != 1 || !got.Rejected[0].Stale || got.Rejected[0].Ingress != typo {
		t.Fatalf("after a rejected update: served by %s, stale %d, rejected %+v; want a/site's last good version, reported stale", servedBy(got.Model), got.Stale, got.Rejected)
	}
	if len(got.Conflicts) != 1 || got.Conflicts[0].Loser != nn("b", "rival") {
		t.Errorf("conflicts = %+v, want b/rival still losing", got.Conflicts)
	}

	fixed := ingress("a", "site", rule("shop.example", prefix("/", "web", 80)), rule("more.example", prefix("/", "web", 80)))
	fixed.ResourceVersion = "3"
	if got := build(fixed, rival); got.Stale != 0 || len(got.Rejected) != 0 || len(got.Model.Servers) != 3 {
		t.Errorf("after a valid update: stale %d, rejected %d, %d servers; want the update served", got.Stale, len(got.Rejected), len(got.Model.Servers))
	}

	// Deleted and created again, broken: the old object's last good version does not come back.
	reborn := ingress("a", "site", annotate(AnnotationSSLRedirect, "flase"), rule("shop.example", prefix("/", "web", 80)))
	reborn.UID = "a/site-2"
	if got := build(reborn, rival); got.Stale != 0 || servedBy(got.Model) != "b/rival" {
		t.Errorf("a new object of the same name: stale %d, served by %s; want it rejected and b/rival served", got.Stale, servedBy(got.Model))
	}
	// Left the build (deleted, or no longer ours), then back broken: nothing is remembered either.
	build(rival)
	if got := build(typo, rival); got.Stale != 0 || servedBy(got.Model) != "b/rival" {
		t.Errorf("after leaving: stale %d, served by %s; want nothing remembered", got.Stale, servedBy(got.Model))
	}
}
