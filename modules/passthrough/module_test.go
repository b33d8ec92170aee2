package passthrough

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// fixture is the module in a moduletest.Harness, with the topics it listens to.
type fixture struct {
	t         *testing.T
	h         *moduletest.Harness
	ingresses *pipeline.Topic[modules.IngressChange]
	endpoints *pipeline.Topic[modules.EndpointsChange]
	m         *Passthrough
	ready     modules.ReadyCheck
}

func newFixture(t *testing.T, opts Options, objs ...runtime.Object) *fixture {
	t.Helper()
	h := moduletest.New(t, objs...)
	endpoints := pipeline.NewTopic[modules.EndpointsChange]("endpoints-changes")
	t.Cleanup(endpoints.Close)
	f := &fixture{t: t, h: h, ingresses: h.IngressChanges, endpoints: endpoints}
	if opts.ListenAddress == "" {
		opts.ListenAddress = "127.0.0.1:0"
	}
	res, err := New(Params{
		Options:        opts,
		Factory:        h.Factory,
		IngressChanges: h.IngressChanges,
		Announced:      h.Announced,
		Endpoints:      endpoints,
		Recorder:       h.Recorder,
		Registry:       h.Registry,
		Log:            h.Log,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.m, f.ready = res.Passthrough, res.Ready
	// Not h.Run: the module's Start returns an error that the tests check, and most never start it.
	h.Start()
	return f
}

// apply stores ing (create or update) and publishes IngressChange for it, as the class filter would.
func (f *fixture) apply(ing *networkingv1.Ingress) {
	f.t.Helper()
	api := f.h.Client.NetworkingV1().Ingresses(ing.Namespace)
	if _, err := api.Update(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
		if _, err := api.Create(context.Background(), ing, metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
	// The lister must see this version before the module reads it, as it does behind the class filter.
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	moduletest.Eventually(f.t, "the informer to see "+key.String(), func() bool {
		got, err := f.m.ingresses.Ingresses(ing.Namespace).Get(ing.Name)
		return err == nil && equalAnnotations(got, ing)
	})
	f.ingresses.Publish(modules.IngressChange{Key: key, Accepted: true})
}

func equalAnnotations(a, b *networkingv1.Ingress) bool {
	if len(a.Annotations) != len(b.Annotations) {
		return false
	}
	for k, v := range a.Annotations {
		if b.Annotations[k] != v {
			return false
		}
	}
	return len(a.Spec.Rules) == len(b.Spec.Rules)
}

func (f *fixture) publishEndpoints(svc string, port int32, eps ...string) {
	up := nginx.NewUpstream(types.NamespacedName{Namespace: "ns", Name: svc}, intstr.FromInt32(port))
	c := modules.EndpointsChange{Upstream: up}
	for _, e := range eps {
		ap := netip.MustParseAddrPort(e)
		c.Endpoints = append(c.Endpoints, nginx.Endpoint{Address: ap.Addr().String(), Port: int32(ap.Port())})
	}
	f.endpoints.Publish(c)
}

// route returns the backend and endpoints the table has for host ("" when none).
func (f *fixture) route(host string) (string, []string) {
	r, ok := f.m.Proxy().Table().Lookup(host)
	if !ok {
		return "", nil
	}
	var eps []string
	for _, e := range r.Endpoints {
		eps = append(eps, e.String())
	}
	return r.Backend, eps
}

func (f *fixture) waitRoute(host, svc string, eps ...string) {
	f.t.Helper()
	want := ""
	if svc != "" {
		want = string(nginx.NewUpstream(types.NamespacedName{Namespace: "ns", Name: svc}, intstr.FromInt32(443)).Name)
	}
	moduletest.Eventually(f.t, fmt.Sprintf("%s -> %s %v", host, svc, eps), func() bool {
		backend, got := f.route(host)
		return backend == want && slices.Equal(got, eps)
	})
}

// events takes the Events recorded since the last call, each as "type reason message".
func (f *fixture) events() []string {
	var out []string
	for _, e := range f.h.Recorder.Take() {
		out = append(out, e.Kind+" "+e.Reason+" "+e.Message)
	}
	return out
}

// TestTableFollowsIngressesAndEndpoints: the table gains a host when a passthrough Ingress is accepted,
// follows its endpoints (whichever arrives first), and loses it when the Ingress stops being ours or
// drops the annotation.
func TestTableFollowsIngressesAndEndpoints(t *testing.T) {
	f := newFixture(t, Options{})
	// Endpoints can arrive before the Ingress: they are kept.
	f.publishEndpoints("web", 443, "192.0.2.1:8443")
	f.apply(gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/=web:443")))
	f.waitRoute("a.example.com", "web", "192.0.2.1:8443")

	f.publishEndpoints("web", 443, "192.0.2.1:8443", "192.0.2.2:8443")
	f.waitRoute("a.example.com", "web", "192.0.2.1:8443", "192.0.2.2:8443")

	f.endpoints.Publish(modules.EndpointsChange{Upstream: nginx.NewUpstream(types.NamespacedName{Namespace: "ns", Name: "web"}, intstr.FromInt32(443)), Removed: true})
	f.waitRoute("a.example.com", "web")

	f.ingresses.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: "a"}, Accepted: false})
	f.waitRoute("a.example.com", "")

	f.apply(gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/=web:443")))
	f.waitRoute("a.example.com", "web")
	f.apply(gen.Ingress("ns", "a", rule("a.example.com", "/=web:443"))) // annotation removed
	f.waitRoute("a.example.com", "")
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events for valid Ingresses: %q", ev)
	}
}

// TestConflictsAndInvalidAnnotations: the oldest Ingress keeps a contested host and the newer one gets a
// Warning; an invalid annotation gets a Warning (once per version) and no route.
func TestConflictsAndInvalidAnnotations(t *testing.T) {
	f := newFixture(t, Options{})
	old := gen.Ingress("ns", "old", passthrough(), rule("shared.example.com", "/=web:443"))
	f.apply(old)
	f.waitRoute("shared.example.com", "web")
	newer := gen.Ingress("ns", "new", passthrough(), rule("shared.example.com", "/=other:443"), rule("own.example.com", "/=other:443"), gen.CreatedAt(time.Hour))
	f.apply(newer)
	moduletest.Eventually(f.t, "the newer Ingress's own host", func() bool { b, _ := f.route("own.example.com"); return b != "" })
	f.waitRoute("shared.example.com", "web")
	moduletest.Eventually(f.t, "a conflict Event", func() bool {
		for _, e := range f.events() {
			if strings.Contains(e, ReasonConflict) && strings.Contains(e, "shared.example.com is already passed through by Ingress ns/old") {
				return true
			}
		}
		return false
	})

	bad := gen.Ingress("ns", "bad", gen.Annotations(AnnotationSSLPassthrough, "yes"), rule("bad.example.com", "/=web:443"))
	f.apply(bad)
	moduletest.Eventually(f.t, "an invalid-annotation Event", func() bool {
		for _, e := range f.events() {
			if strings.HasPrefix(e, "Warning "+ReasonInvalid) && strings.Contains(e, `"yes"`) {
				return true
			}
		}
		return false
	})
	f.ingresses.Publish(modules.IngressChange{Key: types.NamespacedName{Namespace: "ns", Name: "bad"}, Accepted: true})
	f.apply(gen.Ingress("ns", "probe", passthrough(), rule("probe.example.com", "/=web:443")))
	f.waitRoute("probe.example.com", "web") // both changes above were processed, in order
	if b, _ := f.route("bad.example.com"); b != "" {
		t.Errorf("an Ingress with an invalid annotation is passed through to %s", b)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("an unchanged problem was reported again: %q", ev)
	}
}

// TestModuleProxiesTLS: started, the module accepts on its address and passes a TLS connection for a
// passthrough host to the backend, which presents its own certificate; the ready check turns true.
func TestModuleProxiesTLS(t *testing.T) {
	backend, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{selfSigned(t, "backend")}})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	f := newFixture(t, Options{NginxAddress: "127.0.0.1:1"})
	if f.ready.Check() == nil {
		t.Error("ready before Start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), moduletest.WaitLimit)
		defer cancel()
		if err := f.m.Stop(stopCtx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	f.publishEndpoints("web", 443, backend.Addr().String())
	f.apply(gen.Ingress("ns", "a", passthrough(), rule("a.example.com", "/=web:443")))
	if f.ready.Check() == nil {
		t.Error("ready before the class filter announced every Ingress")
	}
	f.h.Announced.Announce()
	moduletest.Eventually(f.t, "ready", func() bool { return f.ready.Check() == nil })
	f.waitRoute("a.example.com", "web", backend.Addr().String())

	c, err := tls.Dial("tcp", f.m.Addr().String(), &tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true}) //nolint:gosec // the test checks the certificate itself
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "backend" {
		t.Errorf("certificate %q, want the backend's own", cn)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, []byte("ping")) {
		t.Errorf("echo = %q, %v", got, err)
	}
}

// TestStartFailsOnAPortInUse: a bound port is an error at start, not a silent non-listener.
func TestStartFailsOnAPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := newFixture(t, Options{ListenAddress: l.Addr().String()})
	if err := f.m.Start(context.Background()); err == nil {
		t.Fatal("Start on a port in use succeeded")
	}
}

func selfSigned(t testing.TB, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestContestedHostGoesWhereNGINXSendsIt: two Ingresses created in one apply (same creationTimestamp), in
// namespaces "team" and "team-b", claim one host. The passthrough table gives it to the Ingress NGINX's
// merge gives it to (creation time, then namespace, then name), not to whichever "ns/name" string sorts
// first ("team-b/app" < "team/app").
func TestContestedHostGoesWhereNGINXSendsIt(t *testing.T) {
	f := newFixture(t, Options{})
	var ings []*networkingv1.Ingress
	for _, ns := range []string{"team-b", "team"} {
		ing := gen.Ingress(ns, "app", passthrough(), rule("shared.example.com", "/=web:443")) // both created at gen.Epoch
		ings = append(ings, ing)
		f.apply(ing)
	}
	f.apply(gen.Ingress("ns", "probe", passthrough(), rule("probe.example.com", "/=web:443")))
	f.waitRoute("probe.example.com", "web") // the changes above were processed, in order

	var translations []*nginx.IngressTranslation
	for _, ing := range ings {
		tr, err := nginx.TranslateIngress(ing, nginx.ServiceLookupFunc(func(types.NamespacedName) (*corev1.Service, bool) { return nil, false }), nginx.DefaultTranslateOptions())
		if err != nil {
			t.Fatal(err)
		}
		translations = append(translations, tr)
	}
	_, conflicts := nginx.Merge(translations, nil)
	if len(conflicts) != 1 {
		t.Fatalf("NGINX's merge reports %d conflicts, want 1", len(conflicts))
	}
	winner := conflicts[0].Winner.Namespace
	want := nginx.NewUpstream(types.NamespacedName{Namespace: winner, Name: "web"}, intstr.FromInt32(443)).Name
	if got, _ := f.route("shared.example.com"); got != string(want) {
		t.Errorf("passthrough sends shared.example.com to %s; NGINX gives the host to namespace %s (%s)", got, winner, want)
	}
}
