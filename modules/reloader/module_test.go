package reloader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// endpointPush is one SetEndpoints call that returned.
type endpointPush struct {
	full bool
	ups  map[nginx.UpstreamName][]nginx.Endpoint
	ok   bool
}

// laneApplier is a data plane that records what the reloader asks of it. Apply and SetEndpoints can be
// held (they wait until released) or made to fail. Like NGINX, it is ready once an Apply succeeded.
type laneApplier struct {
	mu sync.Mutex
	// applies are the hashes of every Apply call, in order, including calls still held or failed.
	applies []string
	configs map[string][]byte
	live    string
	// pushesStarted counts SetEndpoints calls, including held ones; pushes are those that returned.
	pushesStarted int
	pushes        []endpointPush

	failing    map[string]bool // Apply of these hashes fails
	applyGate  chan struct{}   // when set, Apply waits until it is closed
	pushGate   chan struct{}   // when set, SetEndpoints waits until it is closed
	pushErrors int             // the next pushErrors SetEndpoints calls fail

	// certPushesStarted counts SetCertificates calls, including held ones; certPushes are those that
	// returned, and hosts is the SNI host table they built up.
	certPushesStarted int
	certPushes        []certPush
	hosts             map[nginx.Hostname]string
	certGate          chan struct{} // when set, SetCertificates waits until it is closed

	// routes is the route table the route pushes built up (host -> encoded routes), and routePushes
	// how many there were.
	routes      map[nginx.Hostname]string
	routePushes int
	// emptyFullRoutes counts full route pushes without a single host: they would empty the router.
	emptyFullRoutes int
	// Like NGINX's shared dicts, the stores of endpoints, certificates and routes are filled by full
	// pushes and may be emptied by a configuration (emptiedBy); Filled reports them.
	endpointsFilled, certsFilled, routesFilled bool
	emptiedBy                                  map[string]nginx.Filled // hash -> the stores its Apply empties (true: emptied)
	// onApply, when set, runs inside Apply, before it succeeds (as NGINX reports a first start from
	// inside Apply).
	onApply func(hash string)
	// Pushes answer these partial successes, after recording the push.
	endpointsFull, certsFull *nginx.DictFullError
	// starts is where the test reports starts of the data plane, as NGINX does.
	starts *Starts
	// dead, when set, is what Alive answers.
	dead error
}

// certPush is one SetCertificates call that returned.
type certPush struct {
	full bool
	push push
}

func newLaneApplier() *laneApplier {
	return &laneApplier{configs: map[string][]byte{}, failing: map[string]bool{}, hosts: map[nginx.Hostname]string{}, routes: map[nginx.Hostname]string{},
		emptiedBy: map[string]nginx.Filled{}, starts: NewStarts()}
}

func (a *laneApplier) Starts() *Starts { return a.starts }

func (a *laneApplier) Alive() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dead
}

func (a *laneApplier) Filled(context.Context) (nginx.Filled, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return nginx.Filled{Endpoints: a.endpointsFilled, Certificates: a.certsFilled, Routes: a.routesFilled}, nil
}

// empties makes the Apply of hash empty the stores set in which.
func (a *laneApplier) empties(hash string, which nginx.Filled) {
	a.mu.Lock()
	a.emptiedBy[hash] = which
	a.mu.Unlock()
}

// answerDictFull makes the following endpoint and certificate pushes answer these partial successes
// (nil: success).
func (a *laneApplier) answerDictFull(endpoints, certificates *nginx.DictFullError) {
	a.mu.Lock()
	a.endpointsFull, a.certsFull = endpoints, certificates
	a.mu.Unlock()
}

// plainApplier is a data plane that cannot tell what a reload emptied: it reports no store filled.
type plainApplier struct{ *laneApplier }

func (plainApplier) Filled(context.Context) (nginx.Filled, error) { return nginx.Filled{}, nil }

func (a *laneApplier) Apply(ctx context.Context, conf []byte, hash string) error {
	a.mu.Lock()
	a.applies = append(a.applies, hash)
	a.configs[hash] = conf
	gate, fail, onApply := a.applyGate, a.failing[hash], a.onApply
	a.mu.Unlock()
	if err := pass(ctx, gate); err != nil {
		return err
	}
	if fail {
		return errors.New("nginx -t: unknown directive")
	}
	if onApply != nil {
		onApply(hash)
	}
	a.mu.Lock()
	a.live = hash
	if a.emptiedBy[hash].Endpoints {
		a.endpointsFilled = false
	}
	if a.emptiedBy[hash].Certificates {
		a.certsFilled = false
		clear(a.hosts)
	}
	if a.emptiedBy[hash].Routes {
		a.routesFilled = false
		clear(a.routes)
	}
	a.mu.Unlock()
	return nil
}

func (a *laneApplier) SetEndpoints(ctx context.Context, ups map[nginx.UpstreamName][]nginx.Endpoint, full bool) error {
	a.mu.Lock()
	a.pushesStarted++
	gate := a.pushGate
	a.mu.Unlock()
	if err := pass(ctx, gate); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := endpointPush{full: full, ups: maps.Clone(ups), ok: a.pushErrors == 0}
	a.pushes = append(a.pushes, p)
	if !p.ok {
		a.pushErrors--
		return errors.New("status server: connection refused")
	}
	a.endpointsFilled = a.endpointsFilled || full
	if a.endpointsFull != nil {
		return fmt.Errorf("push endpoints: %w", a.endpointsFull)
	}
	return nil
}

func (a *laneApplier) SetRoutes(_ context.Context, u nginx.RouteUpdate, full bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.routePushes++
	if full {
		clear(a.routes)
		if len(u.Hosts) == 0 {
			a.emptyFullRoutes++
		}
	}
	for h, e := range u.Hosts {
		if e == nil {
			delete(a.routes, h)
		} else {
			a.routes[h] = string(e)
		}
	}
	a.routesFilled = a.routesFilled || full
	return nil
}

// routeTable returns a copy of the route table the pushes built up.
func (a *laneApplier) routeTable() map[nginx.Hostname]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.routes)
}

func (a *laneApplier) SetCertificates(ctx context.Context, u nginx.CertificateUpdate, full bool) error {
	a.mu.Lock()
	a.certPushesStarted++
	gate := a.certGate
	a.mu.Unlock()
	if err := pass(ctx, gate); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.certPushes = append(a.certPushes, certPush{full: full, push: asPush(u)})
	if full {
		a.hosts = map[nginx.Hostname]string{}
	}
	for h, id := range u.Hosts {
		if id == "" {
			delete(a.hosts, h)
		} else {
			a.hosts[h] = id
		}
	}
	a.certsFilled = a.certsFilled || full
	if a.certsFull != nil {
		return fmt.Errorf("push certificates: %w", a.certsFull)
	}
	return nil
}

// holdCertPushes makes SetCertificates wait until the returned function is called.
func (a *laneApplier) holdCertPushes() (release func()) { return a.hold(&a.certGate) }

func (a *laneApplier) certsStarted() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.certPushesStarted
}

func (a *laneApplier) certsReturned() []certPush {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.certPushes)
}

// certHosts is the SNI host table the data plane holds.
func (a *laneApplier) certHosts() map[nginx.Hostname]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.hosts)
}

func (a *laneApplier) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.live == "" {
		return errors.New("no configuration live")
	}
	return nil
}

// pass waits until gate (when set) is closed or ctx ends.
func pass(ctx context.Context, gate chan struct{}) error {
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hold sets *gate (one of the laneApplier's gates) until the returned function is called.
func (a *laneApplier) hold(gate *chan struct{}) (release func()) {
	g := make(chan struct{})
	a.mu.Lock()
	*gate = g
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		*gate = nil
		a.mu.Unlock()
		close(g)
	}
}

// holdApplies makes Apply wait until the returned function is called.
func (a *laneApplier) holdApplies() (release func()) { return a.hold(&a.applyGate) }

// holdPushes makes SetEndpoints wait until the returned function is called.
func (a *laneApplier) holdPushes() (release func()) { return a.hold(&a.pushGate) }

func (a *laneApplier) failApplyOf(hash string) {
	a.mu.Lock()
	a.failing[hash] = true
	a.mu.Unlock()
}

func (a *laneApplier) failNextPushes(n int) {
	a.mu.Lock()
	a.pushErrors = n
	a.mu.Unlock()
}

func (a *laneApplier) appliesOf() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.applies)
}

func (a *laneApplier) liveHash() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.live
}

func (a *laneApplier) started() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pushesStarted
}

func (a *laneApplier) returned() []endpointPush {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.pushes)
}

// env is a started Reloader driving a laneApplier.
type env struct {
	t         *testing.T
	a         *laneApplier
	r         *Reloader
	ready     modules.ReadyCheck
	live      modules.ReadyCheck
	restarts  *Starts
	rendered  *pipeline.Topic[modules.Rendered]
	endpoints *pipeline.Topic[modules.EndpointsChange]
	certs     *pipeline.Topic[modules.CertChange]
	rec       *moduletest.Recorder
	reg       *prometheus.Registry
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	return newEnvWith(t, opts, func(a *laneApplier) Applier { return a })
}

// newEnvWith is newEnv with the Applier that applier makes of the env's laneApplier.
func newEnvWith(t *testing.T, opts Options, applier func(*laneApplier) Applier) *env {
	t.Helper()
	e := &env{
		t:         t,
		a:         newLaneApplier(),
		rendered:  pipeline.NewTopic[modules.Rendered]("rendered"),
		endpoints: pipeline.NewTopic[modules.EndpointsChange]("endpoints"),
		certs:     pipeline.NewTopic[modules.CertChange]("certs"),
		rec:       &moduletest.Recorder{},
		reg:       prometheus.NewRegistry(),
	}
	e.restarts = e.a.starts
	certTopic := e.certs
	res, err := New(Params{
		Options: opts, Applier: applier(e.a),
		Rendered: e.rendered, Endpoints: e.endpoints, Certs: certTopic,
		Recorder: e.rec, Metrics: pipeline.NewMetrics(e.reg), Registry: e.reg, Log: zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.r, e.ready, e.live = res.Reloader, res.Ready, res.Live
	ctx, cancel := context.WithCancel(context.Background())
	e.r.Start(ctx)
	t.Cleanup(func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), moduletest.WaitLimit)
		defer stopCancel()
		cancel() // releases held Apply and SetEndpoints calls
		if err := e.r.Stop(stopCtx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		e.rendered.Close()
		e.endpoints.Close()
		certTopic.Close()
	})
	return e
}

// metric reads one series from the registry: a counter's or gauge's value, or a histogram's sample
// count. labels are name/value pairs the series must carry; a missing series reads as 0.
func (e *env) metric(name string, labels ...string) float64 {
	e.t.Helper()
	return moduletest.MetricValue(e.t, e.reg, name, labels...)
}

// syncsDone is how many times a lane's worker finished a sync ("reloader-structure", "reloader-endpoints").
func (e *env) syncsDone(queue string) float64 {
	return e.metric("workqueue_work_duration_seconds", "name", queue)
}

func (e *env) reloads(result string) float64 {
	return e.metric("ingress_reactor_reloads_total", "result", result)
}

func (e *env) render(hash string) {
	e.rendered.Publish(modules.Rendered{Config: []byte("# nginx.conf " + hash), Hash: hash})
}

// renderTLS publishes a configuration whose model serves hosts over TLS, each with the named Secret.
func (e *env) renderTLS(hash string, hosts map[nginx.Hostname]string) {
	var m nginx.Model
	for h, name := range hosts {
		m.Servers = append(m.Servers, nginx.Server{Host: h, TLS: &nginx.ServerTLS{Secret: secret(name)}})
	}
	// As in a rendered model, the servers are sorted by host.
	slices.SortFunc(m.Servers, func(a, b nginx.Server) int { return strings.Compare(string(a.Host), string(b.Host)) })
	e.rendered.Publish(modules.Rendered{Model: m, Config: []byte("# nginx.conf " + hash), Hash: hash})
}

func (e *env) waitLive(hash string) {
	e.t.Helper()
	moduletest.Eventually(e.t, "configuration "+hash+" to go live", func() bool { return e.a.liveHash() == hash })
}

// waitPushes waits until n SetEndpoints calls have returned and returns them.
func (e *env) waitPushes(n int) []endpointPush {
	e.t.Helper()
	moduletest.Eventually(e.t, fmt.Sprintf("%d endpoint pushes", n), func() bool { return len(e.a.returned()) >= n })
	return e.a.returned()
}

func upstream(service string) nginx.Upstream {
	return nginx.NewUpstream(types.NamespacedName{Namespace: "apps", Name: service}, intstr.FromInt32(80))
}

func endpoints(addrs ...string) []nginx.Endpoint {
	out := make([]nginx.Endpoint, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, nginx.Endpoint{Address: a, Port: 8080})
	}
	return out
}

func (e *env) setEndpoints(service string, addrs ...string) {
	e.endpoints.Publish(modules.EndpointsChange{Upstream: upstream(service), Endpoints: endpoints(addrs...)})
}

func (e *env) removeUpstream(service string) {
	e.endpoints.Publish(modules.EndpointsChange{Upstream: upstream(service), Removed: true})
}

// dirty is the set of upstreams waiting for the next incremental push.
func (e *env) dirty() int {
	e.r.endpoints.mu.Lock()
	defer e.r.endpoints.mu.Unlock()
	return len(e.r.epStore.dirty)
}

// pushed describes a push as upstream service -> addresses, for comparisons.
func pushed(p endpointPush) map[string]string {
	out := map[string]string{}
	for name, eps := range p.ups {
		addrs := make([]string, 0, len(eps))
		for _, ep := range eps {
			addrs = append(addrs, ep.Address)
		}
		for _, svc := range []string{"a", "b", "c", "d"} {
			if upstream(svc).Name == name {
				out[svc] = strings.Join(addrs, ",")
			}
		}
	}
	return out
}

func TestAppliesEachConfigurationOnce(t *testing.T) {
	e := newEnv(t, Options{})
	e.render("aaaa0001")
	e.waitLive("aaaa0001")
	moduletest.Eventually(t, "the apply to finish", func() bool { return e.syncsDone("reloader-structure") == 1 })

	// The same configuration again (the renderer republishes it when only routes or the SNI table
	// changed): not applied again; the Apply calls below show it.
	e.render("aaaa0001")

	e.render("bbbb0002")
	e.waitLive("bbbb0002")
	if got := e.a.appliesOf(); !slices.Equal(got, []string{"aaaa0001", "bbbb0002"}) {
		t.Errorf("Apply calls %v, want each configuration once", got)
	}
	if got := string(e.a.configs["bbbb0002"]); got != "# nginx.conf bbbb0002" {
		t.Errorf("Apply got config %q, want the published one", got)
	}
	moduletest.Eventually(t, "the reload to be counted", func() bool { return e.reloads("success") == 2 })
	if got := e.reloads("failure"); got != 0 {
		t.Errorf("reloads_total{result=failure} = %g, want 0", got)
	}
	if got := e.metric("ingress_reactor_last_reload_success"); got != 1 {
		t.Errorf("last_reload_success = %g, want 1", got)
	}
}

func TestFailingConfigurationIsRetriedThenGivenUp(t *testing.T) {
	pod := types.NamespacedName{Namespace: "ingress", Name: "controller-0"}
	tests := map[string]struct {
		opts     Options
		attempts int
		// events is whether each failure is reported to the controller's Pod.
		events bool
	}{
		"retried up to the limit, each failure an Event on the pod": {
			opts: Options{MaxRetries: 2, Pod: pod}, attempts: 3, events: true,
		},
		"no retries, no pod to report to": {
			opts: Options{}, attempts: 1, events: false,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			e.a.failApplyOf("bad00001")
			e.render("bad00001")
			moduletest.Eventually(t, "the reloader to give up", func() bool {
				return e.metric("ingress_reactor_pipeline_dropped_total", "name", "reloader-structure") == 1
			})
			if got := e.a.appliesOf(); len(got) != tc.attempts {
				t.Fatalf("Apply called %d times (%v), want %d", len(got), got, tc.attempts)
			}
			if got := e.reloads("failure"); got != float64(tc.attempts) {
				t.Errorf("reloads_total{result=failure} = %g, want %d", got, tc.attempts)
			}
			if got := e.metric("ingress_reactor_last_reload_success"); got != 0 {
				t.Errorf("last_reload_success = %g, want 0", got)
			}
			evs := e.rec.All()
			if !tc.events && len(evs) != 0 {
				t.Errorf("Events %v, want none without a pod", evs)
			}
			if tc.events {
				if len(evs) != tc.attempts {
					t.Errorf("Events %v, want one per failed attempt (%d)", evs, tc.attempts)
				}
				for _, ev := range evs {
					if ev.Object != "Pod "+pod.String() || ev.Kind != corev1.EventTypeWarning || ev.Reason != ReasonReloadFailed ||
						!strings.Contains(ev.Message, "bad00001") || !strings.Contains(ev.Message, "unknown directive") {
						t.Errorf("Event %+v, want a Warning %s on Pod %s naming the configuration and the error", ev, ReasonReloadFailed, pod)
					}
				}
			}

			// A newer configuration is still applied, and the failed one is not tried again.
			e.render("good0002")
			e.waitLive("good0002")
			if got := e.a.appliesOf(); len(got) != tc.attempts+1 {
				t.Errorf("Apply calls %v, want %d failed attempts and the new configuration", got, tc.attempts)
			}
			if err := e.ready.Check(); err == nil {
				t.Errorf("ready before any endpoint push")
			}
		})
	}
}

func TestNewerConfigurationGetsItsOwnRetries(t *testing.T) {
	e := newEnv(t, Options{MaxRetries: 2})
	e.a.failApplyOf("bad00001")
	e.a.failApplyOf("bad00002")
	e.render("bad00001")
	moduletest.Eventually(t, "the first configuration's retry", func() bool { return len(e.a.appliesOf()) == 2 })

	// A newer configuration replaces the one being retried; it is broken too.
	e.render("bad00002")
	moduletest.Eventually(t, "the reloader to give up", func() bool {
		return e.metric("ingress_reactor_pipeline_dropped_total", "name", "reloader-structure") >= 1
	})
	got := e.a.appliesOf()
	if n := len(got) - slices.Index(got, "bad00002"); n != 3 {
		t.Errorf("Apply calls %v: the newer configuration was tried %d times before giving up, want 1+MaxRetries = 3", got, n)
	}
	if slices.Index(got, "bad00002") != 2 {
		t.Errorf("Apply calls %v, want two attempts at the first configuration before the newer one", got)
	}
}

func TestEndpointLane(t *testing.T) {
	e := newEnv(t, Options{})
	e.setEndpoints("a", "10.0.0.1")
	e.setEndpoints("b", "10.0.0.2")
	moduletest.Eventually(t, "the endpoint lane to handle the changes", func() bool { return e.syncsDone("reloader-endpoints") >= 1 })
	if got := e.a.started(); got != 0 {
		t.Fatalf("%d endpoint pushes before the data plane started, want none", got)
	}

	// The first start gets everything, in one full push.
	e.restarts.Set(1)
	ps := e.waitPushes(1)
	if p := ps[0]; !p.full || !maps.Equal(pushed(p), map[string]string{"a": "10.0.0.1", "b": "10.0.0.2"}) {
		t.Fatalf("first push full=%v %v, want a full push of a and b", p.full, pushed(p))
	}

	// Later changes are pushed alone.
	e.setEndpoints("a", "10.0.0.1", "10.0.0.3")
	ps = e.waitPushes(2)
	if p := ps[1]; p.full || !maps.Equal(pushed(p), map[string]string{"a": "10.0.0.1,10.0.0.3"}) {
		t.Fatalf("push after a change full=%v %v, want an incremental push of a", p.full, pushed(p))
	}

	// Changes that arrive while a push is in flight go out together in the next one; a removed
	// upstream is pushed as an empty list.
	release := e.a.holdPushes()
	e.setEndpoints("c", "10.0.0.4")
	moduletest.Eventually(t, "the push of c to start", func() bool { return e.a.started() == 3 })
	e.setEndpoints("a", "10.0.0.5")
	e.removeUpstream("b")
	moduletest.Eventually(t, "both changes to wait for the next push", func() bool { return e.dirty() == 2 })
	release()
	ps = e.waitPushes(4)
	if p := ps[2]; p.full || !maps.Equal(pushed(p), map[string]string{"c": "10.0.0.4"}) {
		t.Errorf("held push full=%v %v, want c alone", p.full, pushed(p))
	}
	p := ps[3]
	if p.full || !maps.Equal(pushed(p), map[string]string{"a": "10.0.0.5", "b": ""}) {
		t.Errorf("batched push full=%v %v, want a and the removed b in one push", p.full, pushed(p))
	}
	if eps, ok := p.ups[upstream("b").Name]; !ok || len(eps) != 0 {
		t.Errorf("removed upstream pushed as %v (present %v), want an empty list", eps, ok)
	}
	if len(e.a.returned()) != 4 {
		t.Errorf("%d pushes, want 4", len(e.a.returned()))
	}

	// A failed push is retried with its upstreams.
	e.a.failNextPushes(1)
	e.setEndpoints("d", "10.0.0.6")
	ps = e.waitPushes(6)
	if ps[4].ok || !ps[5].ok {
		t.Fatalf("pushes ok=%v then %v, want a failure then a success", ps[4].ok, ps[5].ok)
	}
	if got := pushed(ps[5]); got["d"] != "10.0.0.6" {
		t.Errorf("retry pushed %v, want d's endpoints", got)
	}
	if got := e.metric("ingress_reactor_endpoint_updates_total", "result", "failure"); got != 1 {
		t.Errorf("endpoint_updates_total{result=failure} = %g, want 1", got)
	}

	// A restart replaces everything with the current state: removed upstreams are not sent again.
	e.restarts.Set(2)
	ps = e.waitPushes(7)
	want := map[string]string{"a": "10.0.0.5", "c": "10.0.0.4", "d": "10.0.0.6"}
	if p := ps[6]; !p.full || !maps.Equal(pushed(p), want) {
		t.Errorf("push after a restart full=%v %v, want a full push of %v", p.full, pushed(p), want)
	}
	if got := e.metric("ingress_reactor_endpoint_updates_total", "result", "success"); got != 6 {
		t.Errorf("endpoint_updates_total{result=success} = %g, want 6", got)
	}
}

func TestReadiness(t *testing.T) {
	e := newEnv(t, Options{})
	e.setEndpoints("a", "10.0.0.1")
	if err := e.ready.Check(); err == nil {
		t.Fatal("ready before any configuration was applied")
	}
	if e.ready.Name == "" {
		t.Error("the readiness check has no name for /readyz")
	}

	e.render("aaaa0001")
	e.waitLive("aaaa0001")
	if err := e.ready.Check(); err == nil {
		t.Fatal("ready before the data plane reported a start and got its endpoints")
	}

	release := e.a.holdPushes()
	e.restarts.Set(1)
	moduletest.Eventually(t, "the full push to start", func() bool { return e.a.started() == 1 })
	if err := e.ready.Check(); err == nil {
		t.Fatal("ready while the full endpoint push is still in flight")
	}
	release()
	moduletest.Eventually(t, "ready after the full push", func() bool { return e.ready.Check() == nil })

	// A new data-plane instance holds no endpoints: not ready until it got them all, also across failed
	// pushes. The pushes fail until the test lets them succeed, so that a retry cannot make it ready
	// before the test looked.
	e.a.failNextPushes(1 << 30)
	e.restarts.Set(2)
	if err := e.ready.Check(); err == nil {
		t.Fatal("ready right after a restart, before its full push")
	}
	ps := e.waitPushes(3) // the first push and a retry
	for _, p := range ps[1:] {
		if p.ok || !p.full {
			t.Fatalf("push after the restart ok=%v full=%v, want failed full pushes", p.ok, p.full)
		}
	}
	if err := e.ready.Check(); err == nil {
		t.Fatal("ready although the full pushes after the restart failed")
	}
	e.a.failNextPushes(0)
	moduletest.Eventually(t, "ready after the retried full push", func() bool { return e.ready.Check() == nil })
	ps = e.a.returned()
	if p := ps[len(ps)-1]; !p.ok || !p.full || !maps.Equal(pushed(p), map[string]string{"a": "10.0.0.1"}) {
		t.Errorf("retry ok=%v full=%v %v, want a successful full push of a", p.ok, p.full, pushed(p))
	}
}

// On the first start, NGINX reports its start from inside Apply. The SNI host table came with the
// Rendered, before Apply; ready waits until a push carried it, or TLS hosts would get the default
// certificate from a ready Pod.
func TestFirstStartReadyOnlyWithTheHostTable(t *testing.T) {
	e := newEnv(t, Options{})
	e.certs.Publish(set("a", "1"))
	e.setEndpoints("a", "10.0.0.1")
	var release func()
	e.a.onApply = func(string) {
		release = e.a.holdCertPushes()
		e.restarts.Set(1)
	}
	e.renderTLS("aaaa0001", map[nginx.Hostname]string{"a.example": "a"})
	e.waitLive("aaaa0001")
	moduletest.Eventually(t, "the start's certificate push to start", func() bool { return e.a.certsStarted() >= 1 })
	e.waitPushes(1)
	if err := e.ready.Check(); err == nil {
		t.Errorf("ready before the host table was pushed; the data plane holds hosts %v", e.a.certHosts())
	}
	release()
	moduletest.Eventually(t, "ready after the host table's push", func() bool { return e.ready.Check() == nil })
	if got := e.a.certHosts(); !maps.Equal(got, map[nginx.Hostname]string{"a.example": id("a")}) {
		t.Errorf("hosts %v when ready, want a.example", got)
	}
}

func TestDictFullIsAPartialSuccess(t *testing.T) {
	e := newEnv(t, Options{})
	e.certs.Publish(set("a", "1"))
	e.certs.Publish(set("b", "1"))
	e.setEndpoints("a", "10.0.0.1")
	e.setEndpoints("b", "10.0.0.2")
	e.renderTLS("aaaa0001", map[nginx.Hostname]string{"a.example": "a", "b.example": "b"})
	e.waitLive("aaaa0001")
	moduletest.Eventually(t, "the host table to come from the applied model", func() bool { return e.syncsDone("reloader-structure") == 1 })
	e.a.answerDictFull(
		&nginx.DictFullError{Dict: "endpoints", NotStored: []string{string(upstream("b").Name)}, Message: "endpoints dict full: raise --endpoints-dict-size (now 1 MB)"},
		&nginx.DictFullError{Dict: "certificates", NotStored: []string{id("b")}, HostsNotStored: []nginx.Hostname{"b.example"}, Message: "certificates dict full: raise --certificates-dict-size (now 1 MB)"})
	e.restarts.Set(1)
	moduletest.Eventually(t, "ready although the dicts are full", func() bool { return e.ready.Check() == nil })
	for _, tc := range []struct {
		dict, updates string
		want          float64
	}{{"endpoints", "ingress_reactor_endpoint_updates_total", 1}, {"certificates", "ingress_reactor_certificate_updates_total", 2}} {
		if got := e.metric("ingress_reactor_shared_dict_not_stored", "dict", tc.dict); got != tc.want {
			t.Errorf("shared_dict_not_stored{dict=%s} = %g, want %g", tc.dict, got, tc.want)
		}
		// Readiness may come a moment before the push that made it is counted.
		moduletest.Eventually(t, tc.updates+"{result=dict_full} to count the partial push", func() bool {
			return e.metric(tc.updates, "result", "dict_full") >= 1
		})
		if got := e.metric(tc.updates, "result", "failure"); got != 0 {
			t.Errorf("%s{result=failure} = %g, want 0", tc.updates, got)
		}
	}

	// The next change goes out alone (no full push again); the endpoint list that did not fit goes with
	// it, as a removal may have made room, and now fits.
	e.a.answerDictFull(nil, nil)
	e.setEndpoints("c", "10.0.0.3")
	e.certs.Publish(set("a", "2"))
	moduletest.Eventually(t, "the change's pushes", func() bool {
		return len(e.a.returned()) >= 2 && len(e.a.certsReturned()) >= 2
	})
	// Under load the change may go out in more than one push (seen in CI: three pushes, the last with b
	// and c); none may be a full push, and together they carry b and c.
	moduletest.Eventually(t, "b and c pushed", func() bool {
		union := map[string]string{}
		for _, p := range e.a.returned()[1:] {
			maps.Copy(union, pushed(p))
		}
		return maps.Equal(union, map[string]string{"b": "10.0.0.2", "c": "10.0.0.3"})
	})
	for i, p := range e.a.returned()[1:] {
		if p.full {
			t.Errorf("endpoint push %d is a full push (%v); want incremental pushes of b and c", i+2, pushed(p))
		}
	}
	if cs := e.a.certsReturned(); len(cs) != 2 || cs[1].full || !maps.Equal(cs[1].push.certs, map[string]string{id("a"): "a@2"}) {
		t.Errorf("certificate pushes %+v; want the full push, then the rotation of a alone", cs)
	}
	moduletest.Eventually(t, "the endpoints dict to have room again", func() bool {
		return e.metric("ingress_reactor_shared_dict_not_stored", "dict", "endpoints") == 0
	})
	// The certificate that did not fit is not sent again before it changes or a full push: the metric
	// keeps counting it.
	if got := e.metric("ingress_reactor_shared_dict_not_stored", "dict", "certificates"); got != 2 {
		t.Errorf("shared_dict_not_stored{dict=certificates} = %g after an unrelated push, want 2", got)
	}
	if got := e.metric("workqueue_retries_total", "name", "reloader-certificates") + e.metric("workqueue_retries_total", "name", "reloader-endpoints"); got != 0 {
		t.Errorf("%g retries of partial pushes, want none", got)
	}
}

func TestEndpointsAreNotBlockedBySlowApply(t *testing.T) {
	e := newEnv(t, Options{})
	release := e.a.holdApplies()
	e.render("aaaa0001")
	moduletest.Eventually(t, "Apply to start", func() bool { return len(e.a.appliesOf()) == 1 })

	// While the reload hangs, the data plane reports a start and endpoints change: both go out.
	e.setEndpoints("a", "10.0.0.1")
	moduletest.Eventually(t, "the endpoint lane to take the change", func() bool { return e.syncsDone("reloader-endpoints") >= 1 })
	e.restarts.Set(1)
	ps := e.waitPushes(1)
	if p := ps[0]; !p.full || !maps.Equal(pushed(p), map[string]string{"a": "10.0.0.1"}) {
		t.Fatalf("push during a slow reload full=%v %v, want a full push of a", p.full, pushed(p))
	}
	e.setEndpoints("a", "10.0.0.2")
	ps = e.waitPushes(2)
	if p := ps[1]; p.full || !maps.Equal(pushed(p), map[string]string{"a": "10.0.0.2"}) {
		t.Fatalf("second push during a slow reload full=%v %v, want an incremental push of a", p.full, pushed(p))
	}
	if got := e.a.liveHash(); got != "" {
		t.Fatalf("configuration %q live while Apply is held", got)
	}
	if err := e.ready.Check(); err == nil {
		t.Fatal("ready while the first configuration is not live yet")
	}

	release()
	e.waitLive("aaaa0001")
	moduletest.Eventually(t, "ready once the configuration is live", func() bool { return e.ready.Check() == nil })
}

func TestReadinessNeedsTheCertificatePush(t *testing.T) {
	e := newEnv(t, Options{})
	e.render("aaaa0001")
	e.waitLive("aaaa0001")

	// Each start of the data plane holds no certificates: TLS hosts get the fake default certificate
	// until the full certificate push arrives.
	for starts := uint64(1); starts <= 2; starts++ {
		release := e.a.holdCertPushes()
		e.restarts.Set(starts)
		e.waitPushes(int(starts))
		moduletest.Eventually(t, "the full certificate push to start", func() bool { return e.a.certsStarted() == int(starts) })
		if err := e.ready.Check(); err == nil {
			t.Fatalf("start %d: ready while its full certificate push is in flight", starts)
		}
		release()
		moduletest.Eventually(t, "ready after the certificate push", func() bool { return e.ready.Check() == nil })
		if ps := e.a.certsReturned(); !ps[len(ps)-1].full {
			t.Errorf("start %d: certificate push full=false, want a full push", starts)
		}
	}
}

// A reload can replace a shared dict with an empty one (a lua_shared_dict whose size changed). After a
// configuration goes live, the stores it emptied get everything again in full pushes, and only those:
// a full certificate push makes NGINX check every certificate again.
func TestFullPushesOnlyForStoresAReloadEmptied(t *testing.T) {
	e := newEnv(t, Options{})
	e.setEndpoints("a", "10.0.0.1")
	e.certs.Publish(set("a", "1"))
	e.renderTLS("aaaa0001", map[nginx.Hostname]string{"a.example": "a"})
	e.waitLive("aaaa0001")
	e.restarts.Set(1)
	e.waitPushes(1)
	moduletest.Eventually(t, "ready after the start's pushes", func() bool { return e.ready.Check() == nil })
	endpointPushes, certPushes := len(e.a.returned()), len(e.a.certsReturned())

	// next changes one endpoint list and one certificate after a configuration went live, and returns
	// the pushes they caused (and any full push the reload caused before them).
	step := 0
	next := func(hash string) (endpointPush, certPush) {
		t.Helper()
		step++
		done := e.syncsDone("reloader-structure")
		e.renderTLS(hash, map[nginx.Hostname]string{"a.example": "a"})
		e.waitLive(hash)
		moduletest.Eventually(t, "the reload to be handled", func() bool { return e.syncsDone("reloader-structure") > done })
		e.setEndpoints("a", fmt.Sprintf("10.0.1.%d", step))
		e.certs.Publish(set("a", strconv.Itoa(step+1)))
		moduletest.Eventually(t, "the change's pushes", func() bool {
			ps, cs := e.a.returned(), e.a.certsReturned()
			return len(ps) > endpointPushes && pushed(ps[len(ps)-1])["a"] == fmt.Sprintf("10.0.1.%d", step) &&
				len(cs) > certPushes && cs[len(cs)-1].push.certs[id("a")] == fmt.Sprintf("a@%d", step+1)
		})
		ps, cs := e.a.returned(), e.a.certsReturned()
		p, c := ps[endpointPushes], cs[certPushes]
		endpointPushes, certPushes = len(ps), len(cs)
		return p, c
	}

	// A reload that kept both stores: the next pushes carry the changes alone.
	if p, c := next("bbbb0002"); p.full || c.full {
		t.Errorf("after a reload that emptied nothing: endpoint push full=%v, certificate push full=%v; want both incremental", p.full, c.full)
	}
	// A reload that emptied the endpoints: a full endpoint push, and no full certificate push.
	e.a.empties("cccc0003", nginx.Filled{Endpoints: true})
	if p, c := next("cccc0003"); !p.full || c.full {
		t.Errorf("after a reload that emptied the endpoints: endpoint push full=%v, certificate push full=%v; want only the endpoints in full", p.full, c.full)
	}
	// A reload that emptied the certificates: a full certificate push that restores the host table.
	e.a.empties("dddd0004", nginx.Filled{Certificates: true})
	if p, c := next("dddd0004"); p.full || !c.full {
		t.Errorf("after a reload that emptied the certificates: endpoint push full=%v, certificate push full=%v; want only the certificates in full", p.full, c.full)
	}
	if got := e.a.certHosts(); !maps.Equal(got, map[nginx.Hostname]string{"a.example": id("a")}) {
		t.Errorf("hosts after the certificates store was emptied: %v", got)
	}

	// The same configuration again (an SNI change only) and a configuration that fails change nothing in
	// NGINX: the next push carries the next change only.
	e.render("dddd0004")
	e.a.failApplyOf("eeee0005")
	e.a.empties("eeee0005", nginx.Filled{Endpoints: true, Certificates: true})
	e.render("eeee0005")
	moduletest.Eventually(t, "the failed configuration to be given up", func() bool {
		return e.metric("ingress_reactor_pipeline_dropped_total", "name", "reloader-structure") == 1
	})
	e.setEndpoints("c", "10.0.0.3")
	moduletest.Eventually(t, "the push of c", func() bool { return pushed(e.a.returned()[len(e.a.returned())-1])["c"] == "10.0.0.3" })
	if p := e.a.returned()[endpointPushes]; p.full || !maps.Equal(pushed(p), map[string]string{"c": "10.0.0.3"}) {
		t.Errorf("push after a republished and a failed configuration full=%v %v, want c alone", p.full, pushed(p))
	}
}

// A data plane that cannot tell what a reload emptied gets everything pushed in full after each
// configuration that goes live.
func TestFullPushesAfterEachConfigurationWithoutFillReports(t *testing.T) {
	e := newEnvWith(t, Options{}, func(a *laneApplier) Applier { return plainApplier{a} })
	e.setEndpoints("a", "10.0.0.1")
	e.render("aaaa0001")
	e.waitLive("aaaa0001")
	e.restarts.Set(1)
	e.waitPushes(1)
	moduletest.Eventually(t, "the start's certificate push", func() bool { return len(e.a.certsReturned()) == 1 })
	e.setEndpoints("b", "10.0.0.2")
	if p := e.waitPushes(2)[1]; p.full {
		t.Fatalf("push of a change is full, want incremental")
	}

	e.render("bbbb0002")
	e.waitLive("bbbb0002")
	want := map[string]string{"a": "10.0.0.1", "b": "10.0.0.2"}
	if p := e.waitPushes(3)[2]; !p.full || !maps.Equal(pushed(p), want) {
		t.Errorf("endpoint push after a reload full=%v %v, want a full push of %v", p.full, pushed(p), want)
	}
	moduletest.Eventually(t, "a certificate push after the reload", func() bool { return len(e.a.certsReturned()) == 2 })
	if p := e.a.certsReturned()[1]; !p.full {
		t.Errorf("certificate push after a reload is incremental, want full")
	}
}

// NGINX serves the hosts of the configuration it runs: one that never went live must not take their
// certificates away.
// The SNI host table follows each model at once: nginx.conf does not hold it, so neither a reload nor a
// configuration NGINX refuses stands in its way.
func TestCertificateHostsFollowTheModel(t *testing.T) {
	e := newEnv(t, Options{})
	e.certs.Publish(set("a", "1"))
	e.certs.Publish(set("c", "1"))
	e.renderTLS("aaaa0001", map[nginx.Hostname]string{"a.example": "a", "b.example": "a"})
	e.waitLive("aaaa0001")
	e.restarts.Set(1)
	both := map[nginx.Hostname]string{"a.example": id("a"), "b.example": id("a")}
	moduletest.Eventually(t, "both hosts pushed", func() bool { return maps.Equal(e.a.certHosts(), both) })

	// A configuration NGINX refuses: its host table is live all the same.
	e.a.failApplyOf("bbbb0002")
	e.renderTLS("bbbb0002", map[nginx.Hostname]string{"a.example": "a"})
	moduletest.Eventually(t, "b.example to be removed", func() bool {
		return maps.Equal(e.a.certHosts(), map[nginx.Hostname]string{"a.example": id("a")})
	})
	moduletest.Eventually(t, "the failed configuration to be given up", func() bool {
		return e.metric("ingress_reactor_pipeline_dropped_total", "name", "reloader-structure") == 1
	})
	e.certs.Publish(set("a", "2"))
	moduletest.Eventually(t, "the rotation to be pushed", func() bool {
		ps := e.a.certsReturned()
		return ps[len(ps)-1].push.certs[id("a")] == "a@2"
	})

	// The same configuration with another Secret for a host (only the SNI table changed).
	e.renderTLS("bbbb0002", map[nginx.Hostname]string{"a.example": "c"})
	moduletest.Eventually(t, "a.example to switch Secret", func() bool {
		return maps.Equal(e.a.certHosts(), map[nginx.Hostname]string{"a.example": id("c")})
	})
	if got := len(e.a.appliesOf()); got < 2 {
		t.Errorf("%d Apply calls, want the refused configuration tried", got)
	}
}

// auditingApplier is what a team would put in front of the data plane with fx.Decorate: it records each
// Apply, then delegates. It overrides nothing else.
type auditingApplier struct {
	Applier
	mu      sync.Mutex
	audited []string
}

func (a *auditingApplier) Apply(ctx context.Context, conf []byte, hash string) error {
	a.mu.Lock()
	a.audited = append(a.audited, hash)
	a.mu.Unlock()
	return a.Applier.Apply(ctx, conf, hash)
}

// A wrapping Applier passes on what the data plane reports besides Apply's answer: its starts (full
// pushes to a fresh instance), its fill reports (no full push after a reload that emptied nothing) and
// its liveness (/healthz).
func TestWrappingApplierKeepsStartsFillReportsAndLiveness(t *testing.T) {
	var audit *auditingApplier
	e := newEnvWith(t, Options{}, func(a *laneApplier) Applier {
		audit = &auditingApplier{Applier: a}
		return audit
	})
	e.setEndpoints("a", "10.0.0.1")
	e.render("aaaa0001")
	e.waitLive("aaaa0001")
	e.restarts.Set(1)
	if p := e.waitPushes(1)[0]; !p.full {
		t.Fatalf("push after the start reported through the wrapper: full=%v, want a full push", p.full)
	}
	moduletest.Eventually(t, "ready after the start's pushes", func() bool { return e.ready.Check() == nil })

	done := e.syncsDone("reloader-structure")
	e.render("bbbb0002")
	e.waitLive("bbbb0002")
	moduletest.Eventually(t, "the reload to be handled", func() bool { return e.syncsDone("reloader-structure") > done })
	e.setEndpoints("a", "10.0.0.2")
	moduletest.Eventually(t, "the change's push", func() bool { return pushed(e.a.returned()[len(e.a.returned())-1])["a"] == "10.0.0.2" })
	if ps := e.a.returned(); len(ps) != 2 || ps[1].full {
		t.Errorf("endpoint pushes %d, the last full=%v; want one incremental push after a reload that emptied nothing", len(ps), ps[len(ps)-1].full)
	}
	audit.mu.Lock()
	audited := slices.Clone(audit.audited)
	audit.mu.Unlock()
	if !slices.Equal(audited, []string{"aaaa0001", "bbbb0002"}) {
		t.Errorf("audited %v, want both configurations", audited)
	}

	if err := e.live.Check(); err != nil {
		t.Fatalf("live check failed while the data plane is alive: %v", err)
	}
	e.a.mu.Lock()
	e.a.dead = errors.New("nginx kept dying")
	e.a.mu.Unlock()
	if err := e.live.Check(); err == nil {
		t.Error("live check passes while the wrapped data plane is dead")
	}
}

// Stop may be called more than once (fx's stop after a test's own, a failed start): the calls after the
// first return at once with its result.
func TestStopIsIdempotent(t *testing.T) {
	e := newEnv(t, Options{})
	e.render("aaaa0001")
	e.waitLive("aaaa0001")
	for i := range 3 {
		if err := e.r.Stop(context.Background()); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
	}
}

// renderRoutes publishes configuration hash whose model routes each host's "/" to the named Service.
func (e *env) renderRoutes(hash string, hosts map[nginx.Hostname]string) {
	m := nginx.Model{Servers: []nginx.Server{{Host: ""}}}
	for _, h := range slices.Sorted(maps.Keys(hosts)) {
		m.Servers = append(m.Servers, nginx.Server{Host: h, Locations: []nginx.Location{
			{Path: "/", PathType: nginx.PathPrefix, Upstream: upstream(hosts[h]).Name}}})
	}
	e.rendered.Publish(modules.Rendered{Model: m, Config: []byte("# nginx.conf " + hash), Hash: hash})
}

// routedHosts lists the hosts of the route table the data plane holds, with the upstream each routes to.
func (e *env) routedHosts() map[nginx.Hostname]string {
	out := map[nginx.Hostname]string{}
	for h, raw := range e.a.routeTable() {
		var rh nginx.RouteHost
		if err := json.Unmarshal([]byte(raw), &rh); err != nil {
			e.t.Fatalf("host %q: routes %s: %v", h, raw, err)
		}
		up := ""
		for _, r := range rh.Routes {
			up = string(r.Upstream)
		}
		out[h] = up
	}
	return out
}

// Routes change without a reload: a model with the live configuration's hash goes to the routes lane at
// once, as an incremental push of the hosts that changed; a fresh data plane gets everything.
func TestRoutesChangeWithoutReload(t *testing.T) {
	e := newEnv(t, Options{})
	e.renderRoutes("aaaa0001", map[nginx.Hostname]string{"a.example": "a", "b.example": "b"})
	e.waitLive("aaaa0001")
	if err := e.r.Ready(); err == nil {
		t.Fatal("ready before the data plane reported a start and got its routes")
	}
	e.restarts.Set(1)
	want := map[nginx.Hostname]string{"": "", "a.example": string(upstream("a").Name), "b.example": string(upstream("b").Name)}
	moduletest.Eventually(t, "the full route push", func() bool { return maps.Equal(e.routedHosts(), want) })
	moduletest.Eventually(t, "ready", func() bool { return e.r.Ready() == nil })

	pushes := e.metric("ingress_reactor_route_updates_total", "result", "success")
	e.renderRoutes("aaaa0001", map[nginx.Hostname]string{"a.example": "c", "c.example": "a"})
	want = map[nginx.Hostname]string{"": "", "a.example": string(upstream("c").Name), "c.example": string(upstream("a").Name)}
	moduletest.Eventually(t, "the changed routes", func() bool { return maps.Equal(e.routedHosts(), want) })
	if got := len(e.a.appliesOf()); got != 1 {
		t.Errorf("%d Apply calls, want 1: a change of routes alone must not reload", got)
	}
	if got := e.metric("ingress_reactor_route_updates_total", "result", "success") - pushes; got != 1 {
		t.Errorf("%v route pushes for one change, want 1", got)
	}
	if got := e.reloads("success"); got != 1 {
		t.Errorf("reloads_total{success} = %v, want 1", got)
	}
}

// A data plane that starts before the first model arrived (NGINX reports its first start from inside
// Apply) gets no full push of an empty route table: requests wait for the first real one instead of
// finding no routes.
func TestNoEmptyRoutePushBeforeTheFirstModel(t *testing.T) {
	e := newEnv(t, Options{})
	e.restarts.Set(1)
	moduletest.Eventually(t, "the route lane to see the start", func() bool { return e.syncsDone("reloader-routes") >= 1 })
	e.renderRoutes("aaaa0001", map[nginx.Hostname]string{"a.example": "a"})
	moduletest.Eventually(t, "the routes pushed", func() bool { _, ok := e.routedHosts()["a.example"]; return ok })
	e.a.mu.Lock()
	empty := e.a.emptyFullRoutes
	e.a.mu.Unlock()
	if empty != 0 {
		t.Errorf("%d full route pushes without hosts", empty)
	}
}
