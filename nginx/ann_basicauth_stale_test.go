package nginx

import (
	"errors"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// servedAuthUsers returns the user lists the model's routes admit on host.
func servedAuthUsers(m *Model, host Hostname) []string {
	var out []string
	for _, s := range m.Servers {
		if s.Host != host {
			continue
		}
		for _, l := range s.Locations {
			if l.Options != nil && l.Options.AuthUsers != "" {
				out = append(out, l.Options.AuthUsers)
			}
		}
	}
	return out
}

// TestBasicAuthRemovedUserNotKeptByLastGood: an Ingress with basic authentication that is rejected for
// an unrelated reason keeps its last good version served; a user removed from the Secret afterwards
// must not keep its access through that version (docs: "a removed user's next request gets 401").
func TestBasicAuthRemovedUserNotKeptByLastGood(t *testing.T) {
	secrets := secretLookup{nn("default", "users"): authSecret("users", map[string]string{"auth": "alice:{PLAIN}a\nbob:{PLAIN}b\n"})}
	svcs := servicesOf(service("default", "app", port(80, "http")))
	ing := ingress("default", "site", annotate(AnnotationAuthType, "basic", AnnotationAuthSecret, "users"),
		rule("site.example.com", prefix("/", "app", 80)))
	ing.UID = "uid-1"
	b := NewModelBuilder()
	build := b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 {
		t.Fatalf("rejected %+v", build.Rejected)
	}
	if u := servedAuthUsers(&build.Model, "site.example.com"); len(u) != 1 || !strings.Contains(u[0], "bob:") {
		t.Fatalf("served users %q, want bob among them", u)
	}
	// An edit with an invalid, unrelated annotation: rejected, the last good version stays served.
	bad := ing.DeepCopy()
	bad.ResourceVersion = "2"
	bad.Annotations[IngressNginxPrefix+"proxy-body-size"] = "lots"
	get := func(types.NamespacedName) (*networkingv1.Ingress, bool) { return bad, true }
	build = b.Update(UpdateInput{Ingresses: []types.NamespacedName{nn("default", "site")}, Get: get, Lookup: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 1 {
		t.Fatalf("rejected %+v, want the edit rejected", build.Rejected)
	}
	// bob is removed from the Secret.
	updated := authSecret("users", map[string]string{"auth": "alice:{PLAIN}a\n"})
	updated.ResourceVersion = "2"
	secrets[nn("default", "users")] = updated
	build = b.Update(UpdateInput{Objects: []ObjectRef{{Kind: KindSecret, Key: nn("default", "users")}}, Get: get, Lookup: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 1 || !errors.Is(build.Rejected[0].Err, ErrWithdrawn) {
		t.Fatalf("rejected %+v, want the Ingress withdrawn", build.Rejected)
	}
	for _, u := range servedAuthUsers(&build.Model, "site.example.com") {
		if strings.Contains(u, "bob:") {
			t.Fatalf("bob was removed from the Secret but the served (last good) version still admits him: %q", u)
		}
	}
}
