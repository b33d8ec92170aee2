package reloader

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

func secret(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "apps", Name: name}
}

// cert is a certificate whose content is identified by version: the chain the data plane receives is
// "<name>@<version>", and the content hash changes with it.
func cert(name, version string) *certs.Certificate {
	return &certs.Certificate{SecretKey: secret(name), ContentHash: name + "@" + version, ChainPEM: []byte(name + "@" + version)}
}

func set(name, version string) modules.CertChange {
	return modules.CertChange{Secret: secret(name), Certificate: cert(name, version)}
}

func unusable(name string) modules.CertChange { return modules.CertChange{Secret: secret(name)} }

func setDefault(name, version string) modules.CertChange {
	c := set(name, version)
	c.Default = true
	return c
}

// removed stands for a nil certificate in a push (the data plane forgets it).
const removed = "<removed>"

// certInput is one change to the certificate lane's inputs.
type certInput struct {
	// hosts, when not nil, is the TLS host table of a new Rendered model (host -> Secret name).
	hosts map[nginx.Hostname]string
	// certs are CertChanges, applied in order.
	certs []modules.CertChange
	// full is set when the data plane restarted: the next push replaces everything.
	full bool
}

// push is what the lane sends: certificates by ID ("<name>@<version>", or removed), and hosts by name
// (certificate ID, or "" for a removed host).
type push struct {
	certs map[string]string
	hosts map[nginx.Hostname]string
}

func id(name string) string { return nginx.CertificateID(secret(name)) }

func (s *certState) feed(in certInput) {
	if in.hosts != nil {
		hosts := map[nginx.Hostname]types.NamespacedName{}
		for h, name := range in.hosts {
			hosts[h] = secret(name)
		}
		s.useModel(tlsModel(hosts))
	}
	for _, c := range in.certs {
		s.apply(c)
	}
}

// tlsModel is a model whose servers present the Secrets hosts names; a catch-all server and a host
// without TLS come with it, as in a rendered model.
func tlsModel(hosts map[nginx.Hostname]types.NamespacedName) *nginx.Model {
	m := &nginx.Model{Servers: []nginx.Server{{Host: ""}, {Host: "plain.example"}}}
	for h, secret := range hosts {
		m.Servers = append(m.Servers, nginx.Server{Host: h, TLS: &nginx.ServerTLS{Secret: secret}})
	}
	slices.SortFunc(m.Servers, func(a, b nginx.Server) int { return strings.Compare(string(a.Host), string(b.Host)) })
	return m
}

func asPush(u nginx.CertificateUpdate) push {
	p := push{certs: map[string]string{}, hosts: map[nginx.Hostname]string{}}
	for k, v := range u.Certificates {
		if v == nil {
			p.certs[k] = removed
		} else {
			p.certs[k] = string(v.Cert)
		}
	}
	maps.Copy(p.hosts, u.Hosts)
	return p
}

func TestCertStateDiff(t *testing.T) {
	none := push{certs: map[string]string{}, hosts: map[nginx.Hostname]string{}}
	tests := map[string][]struct {
		in   certInput
		want push
	}{
		"host with a usable certificate, then nothing changes": {
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "a"}, certs: []modules.CertChange{set("a", "1")}},
				want: push{certs: map[string]string{id("a"): "a@1"}, hosts: map[nginx.Hostname]string{"a.example": id("a")}}},
			{in: certInput{}, want: none},
			{in: certInput{certs: []modules.CertChange{set("a", "1")}}, want: none},
		},
		"certificate before its host; a certificate no host uses is not pushed": {
			{in: certInput{certs: []modules.CertChange{set("a", "1"), set("b", "1")}}, want: none},
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "a"}},
				want: push{certs: map[string]string{id("a"): "a@1"}, hosts: map[nginx.Hostname]string{"a.example": id("a")}}},
		},
		"rotation sends the certificate only": {
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "a", "www.a.example": "a"}, certs: []modules.CertChange{set("a", "1")}},
				want: push{certs: map[string]string{id("a"): "a@1"}, hosts: map[nginx.Hostname]string{"a.example": id("a"), "www.a.example": id("a")}}},
			{in: certInput{certs: []modules.CertChange{set("a", "2")}},
				want: push{certs: map[string]string{id("a"): "a@2"}, hosts: map[nginx.Hostname]string{}}},
		},
		"unusable secret removes its hosts and certificate, fixed restores them": {
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "a", "b.example": "b"}, certs: []modules.CertChange{set("a", "1"), set("b", "1")}},
				want: push{certs: map[string]string{id("a"): "a@1", id("b"): "b@1"}, hosts: map[nginx.Hostname]string{"a.example": id("a"), "b.example": id("b")}}},
			{in: certInput{certs: []modules.CertChange{unusable("a")}},
				want: push{certs: map[string]string{id("a"): removed}, hosts: map[nginx.Hostname]string{"a.example": ""}}},
			{in: certInput{certs: []modules.CertChange{set("a", "2")}},
				want: push{certs: map[string]string{id("a"): "a@2"}, hosts: map[nginx.Hostname]string{"a.example": id("a")}}},
		},
		"host leaves the model; its certificate goes when no host uses it": {
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "a", "www.a.example": "a"}, certs: []modules.CertChange{set("a", "1")}},
				want: push{certs: map[string]string{id("a"): "a@1"}, hosts: map[nginx.Hostname]string{"a.example": id("a"), "www.a.example": id("a")}}},
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "a"}},
				want: push{certs: map[string]string{}, hosts: map[nginx.Hostname]string{"www.a.example": ""}}},
			{in: certInput{hosts: map[nginx.Hostname]string{}},
				want: push{certs: map[string]string{id("a"): removed}, hosts: map[nginx.Hostname]string{"a.example": ""}}},
		},
		"host switches to another secret": {
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "old"}, certs: []modules.CertChange{set("old", "1"), set("new", "1")}},
				want: push{certs: map[string]string{id("old"): "old@1"}, hosts: map[nginx.Hostname]string{"a.example": id("old")}}},
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "new"}, certs: []modules.CertChange{unusable("old")}},
				want: push{certs: map[string]string{id("old"): removed, id("new"): "new@1"}, hosts: map[nginx.Hostname]string{"a.example": id("new")}}},
		},
		"default certificate is host *, also without TLS hosts, and falls back when unusable": {
			{in: certInput{certs: []modules.CertChange{setDefault("def", "1")}},
				want: push{certs: map[string]string{id("def"): "def@1"}, hosts: map[nginx.Hostname]string{"*": id("def")}}},
			{in: certInput{hosts: map[nginx.Hostname]string{"d.example": "def"}},
				want: push{certs: map[string]string{}, hosts: map[nginx.Hostname]string{"d.example": id("def")}}},
			{in: certInput{certs: []modules.CertChange{{Secret: secret("def"), Default: true}}},
				want: push{certs: map[string]string{id("def"): removed}, hosts: map[nginx.Hostname]string{"*": "", "d.example": ""}}},
		},
		"restart sends everything and no removals": {
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "a", "b.example": "b"}, certs: []modules.CertChange{set("a", "1"), set("b", "1")}},
				want: push{certs: map[string]string{id("a"): "a@1", id("b"): "b@1"}, hosts: map[nginx.Hostname]string{"a.example": id("a"), "b.example": id("b")}}},
			{in: certInput{hosts: map[nginx.Hostname]string{"a.example": "a"}, full: true},
				want: push{certs: map[string]string{id("a"): "a@1"}, hosts: map[nginx.Hostname]string{"a.example": id("a")}}},
			{in: certInput{}, want: none},
		},
		"wildcard hosts are passed as they are": {
			{in: certInput{hosts: map[nginx.Hostname]string{"*.a.example": "a"}, certs: []modules.CertChange{set("a", "1")}},
				want: push{certs: map[string]string{id("a"): "a@1"}, hosts: map[nginx.Hostname]string{"*.a.example": id("a")}}},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			s := newCertState()
			for i, st := range steps {
				s.feed(st.in)
				u, nextCerts, nextHosts := s.diff(st.in.full)
				got := asPush(u)
				if !maps.Equal(got.certs, st.want.certs) || !maps.Equal(got.hosts, st.want.hosts) {
					t.Fatalf("step %d: pushed certs %v hosts %v, want certs %v hosts %v", i, got.certs, got.hosts, st.want.certs, st.want.hosts)
				}
				s.pushedCerts, s.pushedHosts = nextCerts, nextHosts
			}
		})
	}
}

// fakeApplier records certificate pushes and fails them while failing is set.
type fakeApplier struct {
	failing bool
	pushes  []push
	fulls   []bool
}

func (f *fakeApplier) Apply(context.Context, []byte, string) error { return nil }
func (f *fakeApplier) SetEndpoints(context.Context, map[nginx.UpstreamName][]nginx.Endpoint, bool) error {
	return nil
}
func (f *fakeApplier) SetRoutes(context.Context, nginx.RouteUpdate, bool) error { return nil }
func (f *fakeApplier) Ready() error                                             { return nil }
func (f *fakeApplier) Alive() error                                             { return nil }
func (f *fakeApplier) Starts() *Starts                                          { return NewStarts() }
func (f *fakeApplier) Filled(context.Context) (nginx.Filled, error)             { return nginx.Filled{}, nil }
func (f *fakeApplier) SetCertificates(_ context.Context, u nginx.CertificateUpdate, full bool) error {
	if f.failing {
		return errors.New("data plane unavailable")
	}
	f.pushes = append(f.pushes, asPush(u))
	f.fulls = append(f.fulls, full)
	return nil
}

// newCertLane is a certificate lane over a, not started: the test calls its push.
func newCertLane(a Applier) (*pushLane[certBatch], *certState) {
	s := newCertState()
	l := newPushLane(laneOptions{
		name: "reloader-certificates", what: "certificate",
		room:      newDictRoom("certificates", "--certificates-dict-size"),
		updates:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingress_reactor_certificate_updates_total"}, []string{"result"}),
		notStored: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingress_reactor_shared_dict_not_stored"}, []string{"dict"}),
	}, store[certBatch](s), a, nil, zap.NewNop())
	return l, s
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestPushCertificates(t *testing.T) {
	a := &fakeApplier{}
	l, s := newCertLane(a)
	ctx := context.Background()
	s.feed(certInput{hosts: map[nginx.Hostname]string{"a.example": "a"}, certs: []modules.CertChange{set("a", "1")}})

	// Before the data plane reported a start, nothing is pushed: the start pushes everything.
	if err := l.push(ctx, laneKey{}); err != nil || len(a.pushes) != 0 {
		t.Fatalf("push before start: err %v, pushes %v; want nothing", err, a.pushes)
	}

	// The start's full push fails: it stays a full push.
	l.fresh, l.full = true, true
	a.failing = true
	if err := l.push(ctx, laneKey{}); err == nil {
		t.Fatal("a failed push must return its error so the lane retries")
	}
	if got := counter(t, l.updates.WithLabelValues("failure")); got != 1 {
		t.Errorf("failures counted %g, want 1", got)
	}
	a.failing = false
	s.feed(certInput{certs: []modules.CertChange{set("a", "2")}})
	if err := l.push(ctx, laneKey{}); err != nil {
		t.Fatal(err)
	}
	if len(a.pushes) != 1 || !a.fulls[0] || a.pushes[0].certs[id("a")] != "a@2" {
		t.Fatalf("retry after a failed full push sent %v (full %v), want one full push with a@2", a.pushes, a.fulls)
	}

	// Nothing changed: nothing is sent.
	if err := l.push(ctx, laneKey{}); err != nil || len(a.pushes) != 1 {
		t.Fatalf("push without changes: err %v, pushes %d; want none", err, len(a.pushes)-1)
	}

	// A failed incremental push is sent again, merged with what changed since.
	s.feed(certInput{certs: []modules.CertChange{set("a", "3")}})
	a.failing = true
	if err := l.push(ctx, laneKey{}); err == nil {
		t.Fatal("a failed push must return its error")
	}
	a.failing = false
	s.feed(certInput{hosts: map[nginx.Hostname]string{"a.example": "a", "b.example": "a"}})
	if err := l.push(ctx, laneKey{}); err != nil {
		t.Fatal(err)
	}
	want := push{certs: map[string]string{id("a"): "a@3"}, hosts: map[nginx.Hostname]string{"b.example": id("a")}}
	last := a.pushes[len(a.pushes)-1]
	if a.fulls[len(a.fulls)-1] || !maps.Equal(last.certs, want.certs) || !maps.Equal(last.hosts, want.hosts) {
		t.Fatalf("push after a failed one sent %v (full %v), want incremental %v", last, a.fulls[len(a.fulls)-1], want)
	}
	if got := counter(t, l.updates.WithLabelValues("success")); got != 2 {
		t.Errorf("successes counted %g, want 2", got)
	}
}

// TestCertPushesFollowTheInputsAlone: a model whose TLS host table is the same as before (a change of
// routes only) sends nothing; a failed push is sent again although nothing changed since; a change made
// while a push is in flight goes out with the next one.
func TestCertPushesFollowTheInputsAlone(t *testing.T) {
	a := &fakeApplier{}
	l, s := newCertLane(a)
	ctx := context.Background()
	l.fresh = true
	s.feed(certInput{hosts: map[nginx.Hostname]string{"a.example": "a"}, certs: []modules.CertChange{set("a", "1")}})
	if err := l.push(ctx, laneKey{}); err != nil || len(a.pushes) != 1 {
		t.Fatalf("first push: err %v, %d pushes; want 1", err, len(a.pushes))
	}

	s.feed(certInput{hosts: map[nginx.Hostname]string{"a.example": "a"}})
	if err := l.push(ctx, laneKey{}); err != nil || len(a.pushes) != 1 {
		t.Fatalf("the same host table again: err %v, %d more pushes; want none", err, len(a.pushes)-1)
	}

	s.feed(certInput{hosts: map[nginx.Hostname]string{"a.example": "a", "b.example": "a"}})
	a.failing = true
	if err := l.push(ctx, laneKey{}); err == nil {
		t.Fatal("a failed push must return its error")
	}
	a.failing = false
	if err := l.push(ctx, laneKey{}); err != nil {
		t.Fatal(err)
	}
	want := push{certs: map[string]string{}, hosts: map[nginx.Hostname]string{"b.example": id("a")}}
	if last := a.pushes[len(a.pushes)-1]; len(a.pushes) != 2 || !maps.Equal(last.certs, want.certs) || !maps.Equal(last.hosts, want.hosts) {
		t.Fatalf("the retry of a failed push sent %v (%d pushes), want %v", last, len(a.pushes), want)
	}

	// A certificate that changes while a push is in flight: take, change, then the push is stored.
	s.feed(certInput{hosts: map[nginx.Hostname]string{"a.example": "a"}})
	b, _ := s.take(false)
	s.feed(certInput{certs: []modules.CertChange{set("a", "2")}})
	s.stored(b, nil)
	next, send := s.take(false)
	if got := asPush(next.update); !send || got.certs[id("a")] != "a@2" {
		t.Fatalf("the push after one in flight sent %v (send %v), want a@2", got, send)
	}
}
