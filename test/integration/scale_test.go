//go:build integration

package integration

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// Flags of TestDataPlaneAtScale, a measurement run on request only (make scale; docs/benchmarks.md,
// "Data plane at scale").
var (
	scaleIngresses = flag.Int("scale-ingresses", 0, "run TestDataPlaneAtScale with this many Ingresses (make scale)")
	scaleTLS       = flag.Bool("scale-tls", false, "TestDataPlaneAtScale: every Ingress has its own TLS Secret and spec.tls entry, and requests go over HTTPS")
	scaleChanges   = flag.Int("scale-changes", 30, "TestDataPlaneAtScale: Ingress changes timed one at a time (new, changed and deleted in turn)")
	scaleBurst     = flag.Int("scale-burst", 1000, "TestDataPlaneAtScale: Ingresses created at once at the end")
	scaleAnnotated = flag.Bool("scale-annotated", false, "TestDataPlaneAtScale: every other Ingress carries issue #14's routing annotations (regex, rewrite, headers, redirect settings, an alias, a default backend) that leave its paths served by its backend")
	scaleProfiles  = flag.String("scale-heap-profiles", "", "TestDataPlaneAtScale: start the controller with --profiling and save its heap profile into this directory each time memory is read")
	scaleIdle      = flag.Duration("scale-idle", time.Minute, "TestDataPlaneAtScale: after the last reading, wait this long with nothing changing and read the memory once more (0: not)")
	scaleMetrics   = flag.Bool("scale-request-metrics", false, "TestDataPlaneAtScale: keep the request metrics on (--enable-metrics): every host the run checks adds its series (docs/metrics.md, \"Cardinality\")")
)

// Fixed parameters of TestDataPlaneAtScale.
const (
	// scalePause comes before each timed change so that each is measured alone: the reloader holds back
	// a reload that follows the previous one within 2 s (churn) by a growing gap.
	scalePause = 3 * time.Second
	// scalePoll is how often a timed wait asks NGINX (a fresh connection each time): the resolution.
	scalePoll = 2 * time.Millisecond
	// scaleWait bounds each wait; at 10,000 Ingresses one reload took over a minute before issue #13.
	scaleWait = 10 * time.Minute
	// scaleSample hosts (evenly spread, the last one included) are timed when many Ingresses arrive at
	// once; every host is checked after them.
	scaleSample = 100
	// scaleChurn changes go out back to back, one per scaleChurnEvery, before NGINX's memory is read again.
	scaleChurn      = 100
	scaleChurnEvery = 20 * time.Millisecond
	// The throughput run: scaleLoadConns keep-alive connections for scaleLoadTime (at most
	// scaleLoadMax requests each), to random hosts among the first scaleLoadHosts.
	scaleLoadHosts = 1000
	scaleLoadConns = 4
	scaleLoadTime  = 10 * time.Second
	scaleLoadMax   = 1_000_000
	// scaleWorkers goroutines create objects concurrently.
	scaleWorkers = 8
)

// TestDataPlaneAtScale measures the data plane through a real API server, the real binary and real
// NGINX at -scale-ingresses Ingresses (one host, paths / and /api, each with its own Service and
// EndpointSlice; with -scale-tls its own Secret and spec.tls entry): controller start to every host
// served, NGINX's and the controller's memory, throughput at 1,000 hosts, the latency of single
// new, changed and deleted Ingresses and the reloads they cost, 100 changes back to back, and
// -scale-burst Ingresses created at once. It asserts no time: it fails when a change is not served,
// a request of the throughput run fails or a configuration apply fails. Run it with
// `make scale SCALE_INGRESSES=N` (docs/benchmarks.md).
func TestDataPlaneAtScale(t *testing.T) {
	n, k := *scaleIngresses, *scaleChanges
	if n <= 0 {
		t.Skip("a measurement run on request: make scale SCALE_INGRESSES=1000 (or -args -scale-ingresses=N); see docs/benchmarks.md")
	}
	if n < 2*(k+scaleChurn) {
		t.Fatalf("-scale-ingresses=%d is too few for %d timed changes and %d churned ones: need at least %d", n, k, scaleChurn, 2*(k+scaleChurn))
	}
	f := harness.New(t)
	b := &scaleBench{f: f, tls: *scaleTLS, annotated: *scaleAnnotated, blue: f.StartBackend("blue", false), green: f.StartBackend("green", false)}
	routingService(f, "green", b.green)
	t.Logf("%d Ingresses, TLS %v, routing annotations on every other one %v, request metrics %v, %d timed changes; %s", n, b.tls, b.annotated, *scaleMetrics, k, loadAverage())

	names := scaleNames("ing", n)
	began := time.Now()
	f.CreateObjects(scaleWorkers, b.prepare(t, names)...)
	t.Logf("created %d Ingresses and what they need in %s", n, since(began))

	began = time.Now()
	args := []string{"--log-level=info"}
	if !*scaleMetrics {
		// The run checks every host, so with request metrics each Ingress gets its series: about a hundred
		// (its histograms' buckets), a million at 10,000, which the metrics dict cannot hold and a scrape
		// does not finish in 10 s. That is the metrics' cost, measured apart with -scale-request-metrics.
		args = append(args, "--enable-metrics=false")
	}
	if *scaleProfiles != "" {
		args = append(args, "--profiling")
	}
	b.r = f.StartReactor(args...)
	ready := b.r.Measure(began, scaleWait, 10*time.Millisecond, "/readyz to return 200", b.r.Ready)
	sample, all := b.waitServed(began, names)
	reloads := b.settle(t)
	conf, err := os.Stat(b.r.NginxDir + "/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start: ready after %s, %d sampled hosts served after %s, all %d hosts after %s; %s; nginx.conf %d KB; %s",
		round(ready), min(n, scaleSample), round(sample), n, round(all), reloads.since(reloadCount{}), conf.Size()>>10, loadAverage())
	b.logMemory(t, "settled")

	hosts := names[:min(n, scaleLoadHosts)]
	ok, failed := b.throughput(hosts)
	t.Logf("throughput: %.0f requests/s answered 200 (%d in %s over %d keep-alive connections, random hosts of %d), %d failed; %s",
		float64(ok)/scaleLoadTime.Seconds(), ok, scaleLoadTime, scaleLoadConns, len(hosts), failed, loadAverage())
	if failed > 0 {
		t.Errorf("%d requests of the throughput run failed; every host is served", failed)
	}

	latency := map[string][]time.Duration{}
	before := reloads
	for i := range k {
		switch i % 3 {
		case 0:
			name := fmt.Sprintf("new-%d", i)
			needs, ing := b.objects(t, name)
			f.CreateObjects(1, needs...)
			latency["new"] = append(latency["new"], b.timed(name+" served", func() { f.CreateObjects(1, ing) }, b.servedBy(name, "/", b.blue)))
		case 1:
			name := names[i]
			latency["changed"] = append(latency["changed"], b.timed(name+"'s / served by green", func() { f.UpdateIngress(name, toGreen) }, b.servedBy(name, "/", b.green)))
		case 2:
			name := names[n-1-i]
			latency["deleted"] = append(latency["deleted"], b.timed(name+" no longer routed", func() { f.DeleteIngress(name) }, b.notRouted(name)))
		}
	}
	reloads = b.settle(t)
	var every []time.Duration
	for _, kind := range []string{"new", "changed", "deleted"} {
		t.Logf("%s Ingress to served: %s", kind, percentiles(latency[kind]))
		every = append(every, latency[kind]...)
	}
	t.Logf("all %d timed changes: %s; %s during them; %s", k, percentiles(every), reloads.since(before), loadAverage())
	b.logMemory(t, fmt.Sprintf("after %d changes", k))

	churned := names[k : k+scaleChurn]
	before = reloads
	began = time.Now()
	tick := time.NewTicker(scaleChurnEvery)
	for _, name := range churned {
		<-tick.C
		f.UpdateIngress(name, toGreen)
	}
	tick.Stop()
	sent := time.Since(began)
	var last time.Duration
	for _, name := range churned {
		last = b.r.Measure(began, scaleWait, scalePoll, name+"'s / served by green", b.servedBy(name, "/", b.green))
	}
	reloads = b.settle(t)
	t.Logf("%d changes sent in %s, all served %s after the first; %s; %s", scaleChurn, round(sent), round(last), reloads.since(before), loadAverage())
	b.logMemory(t, fmt.Sprintf("after %d more changes", scaleChurn))

	if m := *scaleBurst; m > 0 {
		burst := scaleNames("burst", m)
		ings := b.prepare(t, burst)
		before = reloads
		time.Sleep(scalePause)
		began = time.Now()
		f.CreateObjects(scaleWorkers, ings...)
		created := time.Since(began)
		sample, all = b.waitServed(began, burst)
		reloads = b.settle(t)
		t.Logf("%d Ingresses created at once (in %s): %d sampled hosts served after %s, all after %s; %s; %s",
			m, round(created), min(m, scaleSample), round(sample), round(all), reloads.since(before), loadAverage())
		b.logMemory(t, "end")
	}
	if *scaleIdle > 0 {
		// What an idle controller keeps after the bursts (--release-idle-memory gives back what it does not use).
		time.Sleep(*scaleIdle)
		b.logMemory(t, fmt.Sprintf("after %s idle", *scaleIdle))
	}
	if reloads.failed > 0 {
		t.Errorf("%g of %g configuration applies failed (the controller's log, below, says why)", reloads.failed, reloads.all)
	}
}

// scaleBench is one run of TestDataPlaneAtScale. Every Ingress's own Service sends to the backend
// blue; a changed Ingress sends its / to the Service green instead.
type scaleBench struct {
	f           *harness.Fixture
	r           *harness.Reactor
	tls         bool
	annotated   bool
	blue, green *harness.Backend
	// made counts the Ingresses objects made, for -scale-annotated's every other one.
	made int
}

// reloadCount is the reload counter: every configuration apply, and those that failed.
type reloadCount struct{ all, failed float64 }

// since describes the reloads after before.
func (c reloadCount) since(before reloadCount) string {
	return fmt.Sprintf("%g reloads (%g failed)", c.all-before.all, c.failed-before.failed)
}

// settle waits until NGINX runs the configuration the controller last recorded and returns the
// reload counter then.
func (b *scaleBench) settle(t *testing.T) reloadCount {
	t.Helper()
	all := b.r.WaitConfigSettledWithin(scaleWait)
	m, err := b.r.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	failed, _ := m.Value(harness.ReloadsMetric, map[string]string{"result": "failure"})
	return reloadCount{all: all, failed: failed}
}

// scaleNames returns n names: prefix-0, prefix-1, ...
func scaleNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return names
}

// scaleHost is the host of the Ingress name.
func scaleHost(name string) string { return name + ".scale.example" }

// objects returns the objects Ingress name needs, all called name (its Service, sending to blue, the
// Service's EndpointSlice and, with TLS, its Secret), and the Ingress, which routes / and /api of its
// host to the Service, by port number and by port name.
func (b *scaleBench) objects(t *testing.T, name string) (needs []metav1.Object, ing *networkingv1.Ingress) {
	ns, host, port := b.f.Namespace, scaleHost(name), int32(b.blue.Port)
	needs = []metav1.Object{
		gen.Service(ns, name, gen.TargetPort("http", 80, intstr.FromInt32(port))),
		gen.EndpointSlice(ns, name, name, gen.SlicePort("http", port), gen.Endpoint(b.blue.IP)),
	}
	opts := []gen.IngressOption{gen.Class(b.f.IngressClass), gen.Rule(host, "/", gen.Backend(name, 80)), gen.Rule(host, "/api", gen.Backend(name, "http"))}
	if b.tls {
		c := newTestCert(t, host, host)
		needs = append(needs, gen.Secret(ns, name, gen.TLSData(c.CertPEM, c.KeyPEM)))
		opts = append(opts, gen.TLS(name, host))
	}
	if b.made++; b.annotated && b.made%2 == 0 {
		// Route data that leaves / and /api served by the Service: the host becomes a regex host (a
		// rewrite of every path to /), the backend gets other headers, and an alias host is added.
		const p = "nginx.ingress.kubernetes.io/"
		opts = append(opts, gen.Annotations(
			p+"rewrite-target", "/",
			p+"x-forwarded-prefix", "/"+name,
			p+"upstream-vhost", name+".internal",
			p+"preserve-trailing-slash", "true",
			p+"use-port-in-redirects", "true",
			p+"force-ssl-redirect", "false",
			p+"server-alias", name+".alias.scale.example",
			p+"default-backend", name,
		))
	}
	return needs, gen.Ingress(ns, name, opts...)
}

// prepare creates what the Ingresses names need and returns the Ingresses, not yet created.
func (b *scaleBench) prepare(t *testing.T, names []string) []metav1.Object {
	var needs, ings []metav1.Object
	for _, name := range names {
		n, ing := b.objects(t, name)
		needs = append(needs, n...)
		ings = append(ings, ing)
	}
	b.f.CreateObjects(scaleWorkers, needs...)
	return ings
}

// toGreen sends the Ingress's / (its first path) to the Service green.
func toGreen(ing *networkingv1.Ingress) {
	ing.Spec.Rules[0].HTTP.Paths[0].Backend = gen.Backend("green", 80)
}

// get sends GET path for the host to NGINX, over HTTPS with the host as SNI when the run has TLS.
func (b *scaleBench) get(host, path string) (*harness.Response, error) {
	return b.r.Do(harness.Request{HTTPS: b.tls, Host: host, Path: path})
}

// servedBy is a condition: path of the Ingress name's host is answered 200 by backend, with TLS under
// the host's own certificate.
func (b *scaleBench) servedBy(name, path string, backend *harness.Backend) func() (bool, string) {
	host := scaleHost(name)
	return func() (bool, string) {
		resp, err := b.get(host, path)
		if err != nil {
			return false, err.Error()
		}
		ok := resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Name == backend.Name
		if b.tls {
			ok = ok && len(resp.PeerCertificates) > 0 && resp.PeerCertificates[0].Subject.CommonName == host
		}
		return ok, resp.String()
	}
}

// notRouted is a condition: NGINX itself answers 404 for the Ingress name's host.
func (b *scaleBench) notRouted(name string) func() (bool, string) {
	host := scaleHost(name)
	return func() (bool, string) {
		resp, err := b.get(host, "/")
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == http.StatusNotFound && resp.Echo == nil, resp.String()
	}
}

// timed waits scalePause, makes the change and returns how long until cond holds.
func (b *scaleBench) timed(what string, change func(), cond func() (bool, string)) time.Duration {
	time.Sleep(scalePause)
	began := time.Now()
	change()
	return b.r.Measure(began, scaleWait, scalePoll, what, cond)
}

// waitServed waits until the Ingresses names are served by blue and returns how long after began a
// sample of them (both paths) was, and then how long until every host's / was checked.
func (b *scaleBench) waitServed(began time.Time, names []string) (sample, all time.Duration) {
	m := min(len(names), scaleSample)
	for i := range m {
		name := names[(i+1)*len(names)/m-1]
		for _, path := range []string{"/", "/api"} {
			sample = b.r.Measure(began, scaleWait, scalePoll, name+path+" served", b.servedBy(name, path, b.blue))
		}
	}
	for _, name := range names {
		all = b.r.Measure(began, scaleWait, scalePoll, name+" served", b.servedBy(name, "/", b.blue))
	}
	return sample, all
}

// throughput sends GETs of / for random hosts among names over scaleLoadConns keep-alive connections
// for scaleLoadTime, and returns the requests answered 200 and the others.
func (b *scaleBench) throughput(names []string) (ok, failed int64) {
	scheme, port := "http", b.r.HTTPPort
	if b.tls {
		scheme, port = "https", b.r.HTTPSPort
	}
	url := fmt.Sprintf("%s://127.0.0.1:%d/", scheme, port)
	random := func() string { return scaleHost(names[rand.IntN(len(names))]) }
	var okN, failedN atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(scaleLoadTime)
	for range scaleLoadConns {
		// A connection keeps the SNI of its first host; NGINX routes each request by its Host header.
		transport := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
			TLSClientConfig: &tls.Config{ServerName: random(), InsecureSkipVerify: true}} //nolint:gosec // load, not a certificate check
		client := &http.Client{Timeout: 10 * time.Second, Transport: transport}
		wg.Go(func() {
			defer transport.CloseIdleConnections()
			for i := 0; i < scaleLoadMax && time.Now().Before(deadline); i++ {
				req, err := http.NewRequest(http.MethodGet, url, nil)
				if err != nil {
					failedN.Add(1)
					return
				}
				req.Host = random()
				resp, err := client.Do(req)
				if err != nil {
					failedN.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					okN.Add(1)
				} else {
					failedN.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return okN.Load(), failedN.Load()
}

// logMemory logs NGINX's memory, once the workers of previous configurations have exited, and the
// controller's.
func (b *scaleBench) logMemory(t *testing.T, when string) {
	t.Helper()
	b.r.WaitNginxDrained(scaleWait)
	nginx, err := b.r.NginxMemory()
	if err != nil {
		t.Fatal(err)
	}
	controller, err := b.r.Memory()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("memory %s: NGINX %s; controller %s, %s; %s", when, nginx, controller, b.goHeap(t), loadAverage())
	if dir := *scaleProfiles; dir != "" {
		// After the RSS is read: the profile's forced collection returns memory to the system.
		file := fmt.Sprintf("%s/heap-%d-%s.pb.gz", dir, *scaleIngresses, strings.ReplaceAll(when, " ", "-"))
		if err := b.r.SaveHeapProfile(file); err != nil {
			t.Fatal(err)
		}
		t.Logf("controller heap profile %s saved to %s", when, file)
	}
}

// goHeap describes the controller's Go heap from its Go runtime metrics: the heap's spans in use
// (live objects and the garbage not yet collected), the free heap still held, the heap size that triggers
// the next collection, the heap memory returned to the system, goroutine stacks and the runtime's own
// bookkeeping: together about the controller's anonymous RSS.
func (b *scaleBench) goHeap(t *testing.T) string {
	t.Helper()
	m, err := b.r.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	inuse, _ := m.Value("go_memstats_heap_inuse_bytes", nil)
	next, _ := m.Value("go_memstats_next_gc_bytes", nil)
	released, _ := m.Value("go_memstats_heap_released_bytes", nil)
	sys, _ := m.Value("go_memstats_sys_bytes", nil)
	heapIdle, _ := m.Value("go_memstats_heap_idle_bytes", nil)
	stacks, _ := m.Value("go_memstats_stack_inuse_bytes", nil)
	// The runtime's own bookkeeping: span structures, per-P caches, GC metadata, profiling buckets, other.
	var meta float64
	var parts []string
	for _, name := range []string{"mspan_inuse", "mcache_inuse", "gc_sys", "buck_hash_sys", "other_sys"} {
		v, _ := m.Value("go_memstats_"+name+"_bytes", nil)
		meta += v
		parts = append(parts, fmt.Sprintf("%s %.1f", strings.TrimSuffix(strings.TrimSuffix(name, "_inuse"), "_sys"), v/mib))
	}
	goroutines, _ := m.Value("go_goroutines", nil)
	idle, _ := m.Value("ingress_reactor_idle_memory_releases_total", nil)
	return fmt.Sprintf("Go heap in use %.0f MiB, free not released %.0f MiB, next GC at %.0f MiB, released %.0f MiB, "+
		"stacks %.1f MiB (%.0f goroutines), runtime metadata %.1f MiB (%s), runtime total %.0f MiB, %.0f idle releases so far",
		inuse/mib, (heapIdle-released)/mib, next/mib, released/mib, stacks/mib, goroutines, meta/mib, strings.Join(parts, ", "), sys/mib, idle)
}

// percentiles formats the 50th and 99th percentiles (nearest rank) and the maximum of ds.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := slices.Sorted(slices.Values(ds))
	at := func(p float64) time.Duration { return s[int(math.Ceil(p*float64(len(s))))-1] }
	return fmt.Sprintf("p50 %s, p99 %s, max %s (%d samples)", round(at(0.5)), round(at(0.99)), round(s[len(s)-1]), len(s))
}

// round rounds d for reading: to 0.1 ms under a second, to 10 ms above.
func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(10 * time.Millisecond)
}

// since is round(time.Since(t)).
func since(t time.Time) time.Duration { return round(time.Since(t)) }

// loadAverage reads the 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown: " + err.Error()
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load average unknown"
	}
	return "load average " + strings.Join(f[:3], " ")
}
