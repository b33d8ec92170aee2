package reloader

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// routesRemoved stands for a host that a push removes (a nil entry) in pushedRoutes's results.
const routesRemoved = "<removed>"

// pushedRoutes is what a batch carries, host by host, as text.
func pushedRoutes(b routeBatch) map[nginx.Hostname]string {
	out := make(map[nginx.Hostname]string, len(b.Hosts))
	for h, e := range b.Hosts {
		if e == nil {
			out[h] = routesRemoved
		} else {
			out[h] = string(e)
		}
	}
	return out
}

// encodedAs is the wire form of each server of m, as the router should get it.
func encodedAs(m *nginx.Model) map[nginx.Hostname]string {
	out := map[nginx.Hostname]string{}
	for i := range m.Servers {
		out[m.Servers[i].Host] = string(nginx.AppendRouteHostJSON(nil, &m.Servers[i]))
	}
	return out
}

// routesTo is one prefix route of / to up, with a profile unless it is zero.
func routesTo(up nginx.UpstreamName, p nginx.ProfileSettings) []nginx.Location {
	l := nginx.Location{Path: "/", PathType: nginx.PathPrefix, Upstream: up}
	if !p.IsZero() {
		l.Profile = &p
	}
	return []nginx.Location{l}
}

// TestPushesCarryTheRoutesNGINXShouldHave: the store encodes each push from the servers it holds. A full
// push carries every host's current routes, except that a held host (its routes name a profile that is
// not live) carries the routes NGINX had, and a held new host nothing; once the profile is live, a full
// push carries the held hosts' new routes; an incremental push carries the changed hosts and removes the
// hosts that are gone.
func TestPushesCarryTheRoutesNGINXShouldHave(t *testing.T) {
	p := nginx.ProfileSettings{CustomHTTPErrors: "404"}
	plain := nginx.Model{Servers: []nginx.Server{{Host: ""},
		{Host: "h.example", Locations: routesTo("web", nginx.ProfileSettings{})},
		{Host: "other.example", Locations: routesTo("web", nginx.ProfileSettings{})},
	}}
	profiled := nginx.Model{Servers: []nginx.Server{{Host: ""},
		{Host: "h.example", Locations: routesTo("web-v2", p)},
		{Host: "new.example", Locations: routesTo("web", p)},
		{Host: "other.example", Locations: routesTo("api", nginx.ProfileSettings{})},
	}, Profiles: []nginx.ProfileSettings{p}}
	before, after := encodedAs(&plain), encodedAs(&profiled)

	s := newRouteStore()
	s.useModel(&plain)
	if b, _ := s.take(true); !maps.Equal(pushedRoutes(b), before) {
		t.Errorf("first full push carries %v, want %v", pushedRoutes(b), before)
	}

	s.useModel(&profiled)
	want := map[nginx.Hostname]string{"": before[""], "h.example": before["h.example"], "other.example": after["other.example"]}
	if b, _ := s.take(true); !maps.Equal(pushedRoutes(b), want) {
		t.Errorf("full push while the profile is not live carries %v, want %v", pushedRoutes(b), want)
	}

	s.profilesLive(profiled.ProfileNames())
	if b, _ := s.take(true); !maps.Equal(pushedRoutes(b), after) {
		t.Errorf("full push once the profile is live carries %v, want %v", pushedRoutes(b), after)
	}

	s.useModel(&plain)
	want = map[nginx.Hostname]string{"h.example": before["h.example"], "other.example": before["other.example"], "new.example": routesRemoved}
	if b, _ := s.take(false); !maps.Equal(pushedRoutes(b), want) {
		t.Errorf("incremental push back to the first model carries %v, want %v", pushedRoutes(b), want)
	}
	if b, send := s.take(false); send || len(b.Hosts) > 0 {
		t.Errorf("a push without a change carries %v", pushedRoutes(b))
	}
}

// TestHeldHostThatDidNotFitGetsWhatNGINXShouldKeep: a host that did not fit into the routes dict goes out
// again with the next push; when it is held meanwhile, that push carries the routes that did not fit
// (what NGINX should keep until the profile is live), not the ones that wait.
func TestHeldHostThatDidNotFitGetsWhatNGINXShouldKeep(t *testing.T) {
	p := nginx.ProfileSettings{CustomHTTPErrors: "404"}
	plain := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: routesTo("web", nginx.ProfileSettings{})}}}
	profiled := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: routesTo("web", p)}},
		Profiles: []nginx.ProfileSettings{p}}
	s := newRouteStore()
	s.useModel(&plain)
	b, _ := s.take(false)
	s.useModel(&profiled) // while the push is in flight
	s.stored(b, &nginx.DictFullError{Dict: "routes", NotStored: []string{"h.example"}})
	want := map[nginx.Hostname]string{"h.example": encodedAs(&plain)["h.example"]}
	if next, _ := s.take(false); !maps.Equal(pushedRoutes(next), want) {
		t.Errorf("the push after a partial one carries %v, want %v", pushedRoutes(next), want)
	}
}

// refusingApplier is a data plane that takes every route push and refuses route 1 of one host.
type refusingApplier struct {
	*laneApplier
	host nginx.Hostname
}

func (a refusingApplier) SetRoutes(ctx context.Context, u nginx.RouteUpdate, full bool) error {
	if err := a.laneApplier.SetRoutes(ctx, u, full); err != nil {
		return err
	}
	if _, ok := u.Hosts[a.host]; !ok {
		return nil
	}
	return &nginx.RoutesRefusedError{Refused: map[nginx.Hostname]nginx.RouteRefusal{a.host: {Route: 1, Error: `"limit" must be ...`}}}
}

// TestRefusalThroughTheLaneNamesTheIngress: a route the data plane refuses is published, through the
// lane, naming the Ingress that wrote it, so that the Ingress is quarantined.
func TestRefusalThroughTheLaneNamesTheIngress(t *testing.T) {
	bad := types.NamespacedName{Namespace: "a", Name: "bad"}
	a := refusingApplier{laneApplier: newLaneApplier(), host: "h.example"}
	rendered := pipeline.NewTopic[modules.Rendered]("rendered")
	refusedTopic := pipeline.NewTopic[modules.RoutesRefused]("refused")
	got := make(chan modules.RoutesRefused, 10)
	refusedTopic.Subscribe(func(q modules.RoutesRefused) { got <- q })
	reg := prometheus.NewRegistry()
	res, err := New(Params{
		Applier: a, Rendered: rendered, Refused: refusedTopic,
		Endpoints: pipeline.NewTopic[modules.EndpointsChange]("endpoints"), Certs: pipeline.NewTopic[modules.CertChange]("certs"),
		Recorder: &moduletest.Recorder{}, Metrics: pipeline.NewMetrics(reg), Registry: reg, Log: zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res.Reloader.Start(ctx)
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), moduletest.WaitLimit)
		defer stopCancel()
		cancel()
		if err := res.Reloader.Stop(stopCtx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		rendered.Close()
		refusedTopic.Close()
	})

	m := nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "h.example", Locations: []nginx.Location{
		{Path: "/api", PathType: nginx.PathPrefix, Upstream: "api", Ingress: bad},
	}}}}
	rendered.Publish(modules.Rendered{Model: m, Config: []byte("# nginx.conf aaaa0001"), Hash: "aaaa0001"})
	a.starts.Set(1)
	select {
	case q := <-got:
		if q.Ingress != bad || q.Host != "h.example" || q.Location.Path != "/api" {
			t.Errorf("refusal published as %+v, want %s's /api on h.example", q, bad)
		}
	case <-time.After(moduletest.WaitLimit):
		t.Fatal("no refusal published")
	}
}
