package reloader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/internal/heapstat"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// benchHosts is the scale of the memory benchmark: Ingresses, each with one TLS host and its own Secret,
// and two upstreams (its Service by port number and by port name).
const benchHosts = 10_000

// discardApplier is a data plane that keeps nothing of what it is sent: the benchmark measures the
// reloader's own memory. Like NGINX, it reports its first start from inside the first Apply, and a store
// filled once a full push reached it.
type discardApplier struct {
	starts                                  *Starts
	applied                                 atomic.Bool
	endpoints, certificates, routes         atomic.Bool
	endpointPushes, certPushes, routePushes atomic.Int64
}

func (a *discardApplier) Apply(context.Context, []byte, string) error {
	if !a.applied.Swap(true) {
		a.starts.Set(1)
	}
	return nil
}

func (a *discardApplier) SetEndpoints(_ context.Context, _ map[nginx.UpstreamName][]nginx.Endpoint, full bool) error {
	a.endpointPushes.Add(1)
	if full {
		a.endpoints.Store(true)
	}
	return nil
}

func (a *discardApplier) SetCertificates(_ context.Context, _ nginx.CertificateUpdate, full bool) error {
	a.certPushes.Add(1)
	if full {
		a.certificates.Store(true)
	}
	return nil
}

func (a *discardApplier) SetRoutes(_ context.Context, _ nginx.RouteUpdate, full bool) error {
	a.routePushes.Add(1)
	if full {
		a.routes.Store(true)
	}
	return nil
}

func (a *discardApplier) Filled(context.Context) (nginx.Filled, error) {
	return nginx.Filled{Endpoints: a.endpoints.Load(), Certificates: a.certificates.Load(), Routes: a.routes.Load()}, nil
}

func (a *discardApplier) Starts() *Starts { return a.starts }

func (a *discardApplier) Ready() error {
	if !a.applied.Load() {
		return fmt.Errorf("no configuration applied")
	}
	return nil
}

func (a *discardApplier) Alive() error { return nil }

// storesAtScale are the reloader's inputs at benchHosts Ingresses, built before the first reading: the
// endpoint lists are the endpoint watcher's memory, the certificates the Secret syncer's and the model
// the renderer's.
type storesAtScale struct {
	endpoints []modules.EndpointsChange
	certs     []modules.CertChange
	model     nginx.Model
}

func newStoresAtScale() *storesAtScale {
	s := &storesAtScale{model: nginx.Model{Servers: make([]nginx.Server, 0, benchHosts+1)}}
	s.model.Servers = append(s.model.Servers, nginx.Server{Host: ""})
	for i := range benchHosts {
		svc := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%05d", i)}
		byNumber, byName := nginx.NewUpstream(svc, intstr.FromInt32(80)), nginx.NewUpstream(svc, intstr.FromString("http"))
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		for _, up := range []nginx.Upstream{byNumber, byName} {
			s.endpoints = append(s.endpoints, modules.EndpointsChange{Upstream: up, Endpoints: []nginx.Endpoint{{Address: ip, Port: 8080}}})
		}
		sec := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("tls-%05d", i)}
		sum := sha256.Sum256([]byte(sec.Name))
		c := &certs.Certificate{SecretKey: sec, ChainPEM: []byte("chain of " + sec.Name), ContentHash: hex.EncodeToString(sum[:])}
		s.certs = append(s.certs, modules.CertChange{Secret: sec, Certificate: c})
		ing := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("ing-%05d", i)}
		s.model.Servers = append(s.model.Servers, nginx.Server{
			Host: nginx.Hostname(fmt.Sprintf("h%05d.example.com", i)),
			Locations: []nginx.Location{
				{Path: "/", PathType: nginx.PathPrefix, Upstream: byNumber.Name, Ingress: ing},
				{Path: "/api", PathType: nginx.PathPrefix, Upstream: byName.Name, Ingress: ing},
			},
			TLS: &nginx.ServerTLS{Secret: sec},
		})
	}
	return s
}

// run builds and starts a reloader, hands it every input as at a start of the controller (the first
// configuration starts NGINX, whose start asks for full pushes), waits until the data plane holds
// everything and every lane is idle, and stops it. It returns the stopped reloader, whose stores are
// what the benchmark measures.
func (s *storesAtScale) run(b *testing.B) *Reloader {
	b.Helper()
	reg := prometheus.NewRegistry()
	a := &discardApplier{starts: NewStarts()}
	rendered := pipeline.NewTopic[modules.Rendered]("rendered")
	endpoints := pipeline.NewTopic[modules.EndpointsChange]("endpoints")
	certTopic := pipeline.NewTopic[modules.CertChange]("certs")
	defer func() { rendered.Close(); endpoints.Close(); certTopic.Close() }()
	res, err := New(Params{
		Applier: a, Rendered: rendered, Endpoints: endpoints, Certs: certTopic,
		Recorder: &moduletest.Recorder{}, Metrics: pipeline.NewMetrics(reg), Registry: reg, Log: zap.NewNop(),
	})
	if err != nil {
		b.Fatal(err)
	}
	r := res.Reloader
	ctx := context.Background()
	r.Start(ctx)
	for _, c := range s.endpoints {
		endpoints.Publish(c)
	}
	for _, c := range s.certs {
		certTopic.Publish(c)
	}
	rendered.Publish(modules.Rendered{Model: s.model, Config: []byte("# nginx.conf"), Hash: "h1"})
	for _, t := range []interface{ Flush(context.Context) error }{endpoints, certTopic, rendered} {
		if err := t.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	idle := func() bool {
		return r.Ready() == nil && r.routes.ctrl.Queue().Len() == 0 && r.endpoints.ctrl.Queue().Len() == 0 &&
			r.certs.ctrl.Queue().Len() == 0 && r.structure.ctrl.Queue().Len() == 0
	}
	for !idle() {
		if time.Now().After(deadline) {
			b.Fatalf("reloader not idle after a minute: %v", r.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if a.endpointPushes.Load() == 0 || a.certPushes.Load() == 0 || a.routePushes.Load() == 0 {
		b.Fatal("a lane pushed nothing")
	}
	return r
}

// BenchmarkStoresMemory reports the heap the reloader keeps per Ingress once benchHosts Ingresses (one TLS
// host, its own Secret, two upstreams each) went live: the endpoint, certificate and route stores, what
// they hold of the last pushes, and the lanes. Its inputs (endpoint lists, certificates, the model) are
// there before the first reading: they are the other modules' memory.
//
//	go test -run '^$' -bench BenchmarkStoresMemory -benchtime 1x ./modules/reloader/
func BenchmarkStoresMemory(b *testing.B) {
	for range b.N {
		b.StopTimer()
		s := newStoresAtScale()
		before := heapstat.Live()
		b.StartTimer()
		r := s.run(b)
		b.StopTimer()
		after := heapstat.Live()
		runtime.KeepAlive(s)
		runtime.KeepAlive(r)
		b.ReportMetric(float64(after-before)/benchHosts, "retained-B/ingress")
	}
}
