package nginx

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
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
	for _, svc := range []types.NamespacedName{nn("ns", "missing"), nn("ns", "web")} {
		if !b.DependsOn(svc) {
			t.Errorf("the build does not say it depends on Service %s", svc)
		}
	}
	if b.DependsOn(nn("ns", "other")) {
		t.Error("the build says it depends on a Service no Ingress names")
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

// TestUpdateMatchesBuild drives one builder with Update (told only what changed) and checks after every
// step that it reports exactly what a fresh builder's Build of every Ingress reports: Ingresses created,
// updated (also into and out of a rejection, which serves the last good version), recreated and
// deleted, and Services that appear, change ports and disappear under them.
func TestUpdateMatchesBuild(t *testing.T) {
	hosts := []string{"a.example.com", "b.example.com", "*.example.com", "c.other.org"}
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 11))
		svcs := services{}
		ings := map[types.NamespacedName]*networkingv1.Ingress{}
		gen := 0
		randomService := func(key types.NamespacedName) {
			gen++
			s := service(key.Namespace, key.Name, port(80, "http"))
			if r.IntN(3) == 0 {
				s = service(key.Namespace, key.Name, port(8080, "web"))
			}
			s.ResourceVersion = strconv.Itoa(gen)
			svcs[key] = s
		}
		randomIngress := func(key types.NamespacedName, uid string) *networkingv1.Ingress {
			gen++
			var opts []ingressOption
			for range 1 + r.IntN(2) {
				p := prefix([]string{"/", "/api"}[r.IntN(2)], []string{"web", "api"}[r.IntN(2)], []any{80, "http"}[r.IntN(2)])
				opts = append(opts, rule(hosts[r.IntN(len(hosts))], p))
			}
			if r.IntN(4) == 0 {
				opts = append(opts, withTLS("cert", hosts[r.IntN(len(hosts))]))
			}
			if r.IntN(5) == 0 {
				opts = append(opts, annotate(AnnotationSSLRedirect, "flase")) // rejected
			}
			opts = append(opts, age(time.Duration(r.IntN(3))*time.Minute))
			ing := ingress(key.Namespace, key.Name, opts...)
			ing.UID = types.UID(uid)
			ing.ResourceVersion = strconv.Itoa(gen)
			return ing
		}
		inc, replay := NewModelBuilder(), NewModelBuilder()
		for step := range 80 {
			var changedIngs, changedSvcs []types.NamespacedName
			for range 1 + r.IntN(3) {
				ns := []string{"a", "b"}[r.IntN(2)]
				if r.IntN(3) == 0 {
					key := nn(ns, []string{"web", "api"}[r.IntN(2)])
					if r.IntN(4) == 0 {
						delete(svcs, key)
					} else {
						randomService(key)
					}
					changedSvcs = append(changedSvcs, key)
					continue
				}
				key := nn(ns, fmt.Sprintf("i%d", r.IntN(5)))
				switch old := ings[key]; {
				case old != nil && r.IntN(5) == 0:
					delete(ings, key)
				case old != nil && r.IntN(5) == 0: // recreated: a new object of the same name
					ings[key] = randomIngress(key, fmt.Sprintf("%s-%d", key, gen))
				case old != nil:
					ings[key] = randomIngress(key, string(old.UID))
				default:
					ings[key] = randomIngress(key, fmt.Sprintf("%s-%d", key, gen))
				}
				changedIngs = append(changedIngs, key)
			}
			all := make([]*networkingv1.Ingress, 0, len(ings))
			for _, ing := range ings {
				all = append(all, ing)
			}
			slices.SortFunc(all, func(a, b *networkingv1.Ingress) int {
				return compareKeys(nn(a.Namespace, a.Name), nn(b.Namespace, b.Name))
			})
			var got Build
			if step == 0 {
				got = inc.Build(BuildInput{Ingresses: all, Services: svcs, Options: DefaultTranslateOptions()})
			} else {
				got = inc.Update(UpdateInput{Ingresses: changedIngs, Services: changedSvcs, Lookup: svcs, Options: DefaultTranslateOptions(),
					Get: func(k types.NamespacedName) (*networkingv1.Ingress, bool) { ing, ok := ings[k]; return ing, ok }})
			}
			// A fresh builder knows no last good versions: replay the same history through Build.
			want := replay.Build(BuildInput{Ingresses: all, Services: svcs, Options: DefaultTranslateOptions()})
			if d := describeBuild(got); d != describeBuild(want) {
				t.Fatalf("seed %d, step %d: Update differs from Build\n got: %s\nwant: %s", seed, step, d, describeBuild(want))
			}
		}
	}
}

// describeBuild prints what a build reports, with Ingresses by key and errors by message.
func describeBuild(b Build) string {
	var s strings.Builder
	model, _ := json.Marshal(b.Model)
	fmt.Fprintf(&s, "model %s\ntranslated %d stale %d missing-default %v\n", model, b.Translated, b.Stale, b.DefaultBackendMissing)
	for _, r := range b.Rejected {
		fmt.Fprintf(&s, "rejected %s/%s rv %s stale %v: %v\n", r.Ingress.Namespace, r.Ingress.Name, r.Ingress.ResourceVersion, r.Stale, r.Err)
	}
	for _, w := range b.Warnings {
		fmt.Fprintf(&s, "warned %s/%s rv %s: %v\n", w.Ingress.Namespace, w.Ingress.Name, w.Ingress.ResourceVersion, w.Warnings)
	}
	fmt.Fprintf(&s, "conflicts %+v\ntakeovers %+v", b.Conflicts, b.Takeovers)
	return s.String()
}

// TestModelBuilderManyUsersOfOneService: when many Ingresses share a Service, a change to it translates
// every one of them again, and the build depends on the Service until the last of them leaves.
func TestModelBuilderManyUsersOfOneService(t *testing.T) {
	const n = 3 * maxFewUsers
	ings := map[types.NamespacedName]*networkingv1.Ingress{}
	var list []*networkingv1.Ingress
	for i := range n {
		ing := ingress("ns", fmt.Sprintf("app-%d", i), rule(fmt.Sprintf("h%d.example", i), prefix("/", "web", "http")))
		ings[nn(ing.Namespace, ing.Name)] = ing
		list = append(list, ing)
	}
	svcs := servicesOf(service("ns", "web", port(80, "other")))
	b := NewModelBuilder()
	build := b.Build(BuildInput{Ingresses: list, Services: svcs, Options: DefaultTranslateOptions()})
	if len(build.Warnings)+len(build.Rejected) != n {
		t.Fatalf("%d warnings and %d rejections with a Service that lacks the named port, want %d in all", len(build.Warnings), len(build.Rejected), n)
	}

	fixed := service("ns", "web", port(80, "http"))
	fixed.ResourceVersion = "2"
	svcs = servicesOf(fixed)
	get := func(k types.NamespacedName) (*networkingv1.Ingress, bool) { ing, ok := ings[k]; return ing, ok }
	update := func(ingresses ...types.NamespacedName) Build {
		return b.Update(UpdateInput{Ingresses: ingresses, Services: []types.NamespacedName{nn("ns", "web")}, Get: get, Lookup: svcs, Options: DefaultTranslateOptions()})
	}
	build = update()
	if len(build.Warnings) != 0 || len(build.Rejected) != 0 || len(build.Model.Servers) != n+1 {
		t.Fatalf("after the Service gained the port: %d warnings, %d rejections, %d servers; want none, none and %d", len(build.Warnings), len(build.Rejected), len(build.Model.Servers), n+1)
	}

	for i := range n {
		key := nn("ns", fmt.Sprintf("app-%d", i))
		if !b.DependsOn(nn("ns", "web")) {
			t.Fatalf("with %d of %d Ingresses left, the build does not depend on their Service", n-i, n)
		}
		delete(ings, key)
		update(key)
	}
	if b.DependsOn(nn("ns", "web")) {
		t.Error("the build depends on a Service that no Ingress uses any more")
	}
}

// TestQuarantineServesTheLastVersionNGINXTook: when NGINX refuses a route of an update, the Ingress's
// earlier version, which NGINX took, stays served (its host goes to nobody else); when every version
// the builder knows writes the refused route, nothing of the Ingress is served.
func TestQuarantineServesTheLastVersionNGINXTook(t *testing.T) {
	svcs := servicesOf(service("a", "web", port(80, "http")), service("b", "web", port(80, "http")))
	v1 := ingress("a", "site", rule("shop.example", prefix("/", "web", 80)))
	v2 := ingress("a", "site", rule("shop.example", prefix("/", "web", 80), prefix("/very/long/path", "web", 80)))
	v2.ResourceVersion = "2"
	rival := ingress("b", "rival", age(time.Minute), rule("shop.example", prefix("/", "web", 80)))
	b := NewModelBuilder()
	in := BuildInput{Services: svcs, Options: DefaultTranslateOptions(), Ownership: HostsByNamespace}
	in.Ingresses = []*networkingv1.Ingress{v1, rival}
	b.Build(in)
	in.Ingresses = []*networkingv1.Ingress{v2, rival}
	before := b.Build(in)
	s, _ := server(before.Model, "shop.example")
	var refusedLoc Location
	for _, l := range s.Locations {
		if l.Path == "/very/long/path" {
			refusedLoc = l
		}
	}
	if refusedLoc.Path == "" {
		t.Fatalf("v2's route is not in the model: %+v", s.Locations)
	}
	refusal := &Refusal{Err: errors.New("quarantined"), Host: "shop.example", Location: refusedLoc}
	in.Quarantine = func(ing *networkingv1.Ingress) *Refusal {
		if ing.Name == "site" && ing.ResourceVersion == "2" {
			return refusal
		}
		return nil
	}
	got := b.Build(in)
	s, _ = server(got.Model, "shop.example")
	if len(s.Locations) != 1 || s.Locations[0].Ingress != nn("a", "site") || s.Locations[0].Path != "/" {
		t.Errorf("after the quarantine shop.example serves %+v, want a/site's v1 (/ only)", s.Locations)
	}
	if got.Stale != 1 || len(got.Rejected) != 1 || !got.Rejected[0].Stale || got.Rejected[0].Err != refusal.Err {
		t.Errorf("stale %d, rejected %+v; want a/site rejected with the refusal and served stale", got.Stale, got.Rejected)
	}

	// A new object of the same name that writes the refused route has no version to fall back on.
	reborn := v2.DeepCopy()
	reborn.UID, reborn.ResourceVersion = "a/site-2", "2"
	in.Ingresses = []*networkingv1.Ingress{reborn, rival}
	got = b.Build(in)
	s, _ = server(got.Model, "shop.example")
	if len(s.Locations) != 1 || s.Locations[0].Ingress != nn("b", "rival") {
		t.Errorf("a quarantined new object: shop.example serves %+v, want b/rival", s.Locations)
	}
}

// TestUserSetMatchesMap drives a userSet (its first user inline, then a slice, then a map) through
// random adds and removes, the zero key among them, and checks after every step that it holds what a
// plain set holds, and says it is empty exactly when that is.
func TestUserSetMatchesMap(t *testing.T) {
	keys := []types.NamespacedName{{}}
	for i := range 2*maxFewUsers + 4 {
		keys = append(keys, nn([]string{"a", "b"}[i%2], fmt.Sprintf("i%d", i)))
	}
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 13))
		var u userSet
		want := map[types.NamespacedName]struct{}{}
		// Small seeds stay among few keys, where the inline user and the slice take turns.
		n := 2 + int(seed)%(len(keys)-1)
		for step := range 400 {
			k := keys[r.IntN(n)]
			if r.IntN(2) == 0 {
				u.add(k)
				want[k] = struct{}{}
			} else {
				delete(want, k)
				if empty := u.remove(k); empty != (len(want) == 0) {
					t.Fatalf("seed %d, step %d: remove(%v) says empty %v with %d users left", seed, step, k, empty, len(want))
				}
			}
			got := map[types.NamespacedName]struct{}{}
			u.each(func(k types.NamespacedName) {
				if _, dup := got[k]; dup {
					t.Fatalf("seed %d, step %d: %v listed twice", seed, step, k)
				}
				got[k] = struct{}{}
			})
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, step %d: users %v, want %v", seed, step, got, want)
			}
		}
	}
}
