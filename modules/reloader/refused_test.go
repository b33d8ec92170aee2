package reloader

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// TestRefusalNamesTheRouteThatWasPushed: the lane sends a batch without its lock, so a newer model can
// replace the store's servers before NGINX answers; the refused route's index is read against the
// servers of the batch, so the Ingress that wrote it is named, not one whose route moved into its place.
func TestRefusalNamesTheRouteThatWasPushed(t *testing.T) {
	guilty := types.NamespacedName{Namespace: "a", Name: "guilty"}
	innocent := types.NamespacedName{Namespace: "b", Name: "innocent"}
	m1 := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: []nginx.Location{
		{Path: "/looooong", PathType: nginx.PathPrefix, Ingress: guilty},
	}}}}
	m2 := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: []nginx.Location{
		{Path: "/", PathType: nginx.PathPrefix, Ingress: innocent},
		{Path: "/looooong", PathType: nginx.PathPrefix, Ingress: guilty},
	}}}}
	s := newRouteStore()
	var got []modules.RoutesRefused
	var unattributed int
	s.onRefused = func(q modules.RoutesRefused, ok bool) {
		if ok {
			got = append(got, q)
		} else {
			unattributed++
		}
	}
	s.useModel(&m1)
	s.take(false)
	s.useModel(&m2) // while the push of m1 is in flight
	s.refused(map[nginx.Hostname]nginx.RouteRefusal{
		"h.example":     {Route: 1, Error: "path too long"},
		"gone.example":  {Route: 1, Error: "not pushed"},
		"h.example.org": {Route: 0, Error: "the entry"},
	})
	if len(got) != 1 || got[0].Ingress != guilty || got[0].Location.Path != "/looooong" || got[0].Host != "h.example" {
		t.Errorf("refusal of the pushed route 1 attributed to %+v, want %s's /looooong", got, guilty)
	}
	if unattributed != 2 {
		t.Errorf("%d refusals reported as naming no route, want 2 (a host not in the batch, the entry itself)", unattributed)
	}
}

// TestRoutesWaitForTheirProfile: a host whose routes name a profile (a named location in nginx.conf)
// is held until a configuration with the profile is live; a full push meanwhile carries what NGINX had.
func TestRoutesWaitForTheirProfile(t *testing.T) {
	p := nginx.ProfileSettings{CustomHTTPErrors: "404"}
	plain := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: []nginx.Location{
		{Path: "/", PathType: nginx.PathPrefix, Upstream: "web"},
	}}}}
	profiled := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: []nginx.Location{
		{Path: "/", PathType: nginx.PathPrefix, Upstream: "web", Profile: &p},
	}}, {Host: "new.example", Locations: []nginx.Location{
		{Path: "/", PathType: nginx.PathPrefix, Upstream: "web", Profile: &p},
	}}}, Profiles: []nginx.ProfileSettings{p}}
	s := newRouteStore()
	s.useModel(&plain)
	if b, _ := s.take(false); len(b.Hosts) != 2 {
		t.Fatalf("first push carries %d hosts, want 2", len(b.Hosts))
	}
	s.useModel(&profiled)
	if b, send := s.take(false); send && len(b.Hosts) > 0 {
		t.Fatalf("hosts naming a profile that is not live were pushed: %v", slices.Collect(maps.Keys(b.Hosts)))
	}
	full, _ := s.take(true)
	if got := string(full.Hosts["h.example"]); strings.Contains(got, "profile") {
		t.Errorf("a full push while the profile is not live carries %s, want the routes NGINX had", got)
	}
	if _, ok := full.Hosts["new.example"]; ok {
		t.Error("a full push while the profile is not live carries a host that had no routes before")
	}
	s.profilesLive(profiled.ProfileNames())
	b, _ := s.take(false)
	if got := string(b.Hosts["h.example"]); !strings.Contains(got, p.Name()) || b.Hosts["new.example"] == nil {
		t.Errorf("once the profile is live the push carries %v, want both hosts with the profile", slices.Collect(maps.Keys(b.Hosts)))
	}
}

// TestHeldHostStaysHeldAfterAFailedPush: a push that fails marks its hosts changed again; a host held
// meanwhile (its routes now name a profile that is not live) gets the routes that did not arrive, not
// the ones that wait.
func TestHeldHostStaysHeldAfterAFailedPush(t *testing.T) {
	p := nginx.ProfileSettings{CustomHTTPErrors: "404"}
	plain := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: []nginx.Location{
		{Path: "/", PathType: nginx.PathPrefix, Upstream: "web"},
	}}}}
	profiled := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: []nginx.Location{
		{Path: "/", PathType: nginx.PathPrefix, Upstream: "web", Profile: &p},
	}}}, Profiles: []nginx.ProfileSettings{p}}
	s := newRouteStore()
	s.useModel(&plain)
	b, _ := s.take(false)
	s.useModel(&profiled) // while the push is in flight
	s.failed(b)
	next, _ := s.take(false)
	if got := string(next.Hosts["h.example"]); strings.Contains(got, p.Name()) || !strings.Contains(got, `"upstream":"web"`) {
		t.Errorf("the retry after a failed push carries %s for the held host, want the routes that did not arrive (without the profile)", got)
	}
}

// TestCanaryRefusalQuarantinesTheCanary: when the data plane refuses a route because of its canary
// object (the canary Ingress's rule), the canary Ingress is named, so that it is quarantined and the main
// Ingress keeps serving its path; any other refusal of the route names the main Ingress.
func TestCanaryRefusalQuarantinesTheCanary(t *testing.T) {
	main := types.NamespacedName{Namespace: "a", Name: "main"}
	canary := types.NamespacedName{Namespace: "a", Name: "canary"}
	m := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: []nginx.Location{
		{Path: "/", PathType: nginx.PathPrefix, Ingress: main, Upstream: "a-web-80",
			Canary: &nginx.LocationCanary{Upstream: "a-web-v2-80", Ingress: canary, Rule: &nginx.CanaryRule{Header: "X", HeaderPattern: "(a)", WeightTotal: 100}}},
	}}}}
	for reason, want := range map[string]types.NamespacedName{
		`host h.example, route 1: "canary" "header_pattern" does not compile: pcre_compile() failed: regular expression is too large`: canary,
		`host h.example, route 1: "limit" must be ...`: main,
	} {
		s := newRouteStore()
		var got []modules.RoutesRefused
		s.onRefused = func(q modules.RoutesRefused, ok bool) {
			if ok {
				got = append(got, q)
			}
		}
		s.useModel(&m)
		s.take(false)
		s.refused(map[nginx.Hostname]nginx.RouteRefusal{"h.example": {Route: 1, Error: reason}})
		if len(got) != 1 || got[0].Ingress != want || got[0].Location.Path != "/" {
			t.Errorf("%s: attributed to %+v, want %s", reason, got, want)
		}
	}
}
