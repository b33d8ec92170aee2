// Package passthrough runs the SSL passthrough proxy (package tlsproxy) on the HTTPS port. It learns which
// hosts are passed through from accepted Ingresses annotated nginx.ingress.kubernetes.io/ssl-passthrough,
// and their endpoints from the endpoint lane (EndpointsChange), and swaps the proxy's routing table
// whenever either changes. Every other TLS connection goes to NGINX, which then listens on a loopback port
// with the PROXY protocol.
package passthrough

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	listersnetv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
	"github.com/ingress-reactor/ingress-reactor/tlsproxy"
)

// Module wires the SSL passthrough proxy into the application. It needs Options (the app supplies them
// when --enable-ssl-passthrough is set).
var Module = fx.Module("passthrough",
	fx.Provide(New),
	fx.Invoke(func(*Passthrough) {}),
)

// Event reasons on Ingresses, as they appear in `kubectl describe ingress`.
const (
	// ReasonInvalid (Warning): a passthrough annotation or rule cannot be used; the message says why.
	ReasonInvalid = "InvalidSSLPassthrough"
	// ReasonConflict (Warning): another, older Ingress already passes the host through.
	ReasonConflict = "SSLPassthroughConflict"
)

// Options configure the passthrough module.
type Options struct {
	// ListenAddress is where the proxy listens: the HTTPS port, for example ":443".
	ListenAddress string
	// NginxAddress is NGINX's TLS listener, which expects the PROXY protocol: "127.0.0.1:442".
	NginxAddress string
	// HelloTimeout, IdleTimeout and MaxConnections are tlsproxy.Options' fields of the same names.
	HelloTimeout   time.Duration
	IdleTimeout    time.Duration
	MaxConnections int
	// AcceptProxyProtocol expects a PROXY protocol header from a load balancer on every connection.
	AcceptProxyProtocol bool
	// DrainTimeout bounds how long a stop waits for open connections before closing them; default 10s.
	DrainTimeout time.Duration
}

// Params are the module's fx inputs.
type Params struct {
	fx.In
	Options        Options
	Factory        informers.SharedInformerFactory
	IngressChanges *pipeline.Topic[modules.IngressChange]
	Announced      *modules.IngressesAnnounced
	Endpoints      *pipeline.Topic[modules.EndpointsChange]
	Recorder       record.EventRecorder
	Registry       prometheus.Registerer
	Log            *zap.Logger
	Lifecycle      fx.Lifecycle `optional:"true"`
}

// Result is what the module provides: itself and its readiness check ("ssl-passthrough": the proxy
// accepts connections).
type Result struct {
	fx.Out
	Passthrough *Passthrough
	Ready       modules.ReadyCheck `group:"readyz"`
}

// Passthrough keeps the proxy's routing table equal to the passthrough Ingresses and their endpoints.
type Passthrough struct {
	opts      Options
	proxy     *tlsproxy.Proxy
	ingresses listersnetv1.IngressLister
	recorder  record.EventRecorder
	synced    []cache.InformerSynced
	log       *zap.Logger
	serving   atomic.Bool
	served    chan error
	addr      atomic.Pointer[net.TCPAddr]
	// announced fires once every Ingress that existed at start has been announced, so the table holds
	// every passthrough host.
	announced *modules.IngressesAnnounced

	mu sync.Mutex
	// byIngress holds the routes of each accepted Ingress that asks for passthrough.
	byIngress map[types.NamespacedName]ingressRoutes
	// endpoints holds every upstream's endpoints as the endpoint lane last published them; the lane only
	// publishes changes, and may do so before the Ingress that uses an upstream is seen here.
	endpoints map[nginx.UpstreamName][]netip.AddrPort
	// used are the upstreams the current table refers to.
	used map[nginx.UpstreamName]bool
	// reported remembers the last Event per Ingress and reason, so an unchanged problem is not repeated.
	reported map[types.NamespacedName]map[string]string
}

// ingressRoutes is one Ingress's contribution to the table.
type ingressRoutes struct {
	key     types.NamespacedName
	created time.Time
	routes  []HostRoute
}

// New builds the module: the proxy (not yet listening), its metrics, and the subscriptions that keep its
// table current. Without fx, pass a nil Lifecycle and call Start and Stop.
func New(p Params) (Result, error) {
	if p.Options.DrainTimeout <= 0 {
		p.Options.DrainTimeout = 10 * time.Second
	}
	log := p.Log.Named("passthrough")
	metrics := tlsproxy.NewMetrics()
	for _, c := range metrics.Collectors() {
		if err := p.Registry.Register(c); err != nil {
			return Result{}, fmt.Errorf("passthrough: register metrics: %w", err)
		}
	}
	ingInf := p.Factory.Networking().V1().Ingresses()
	m := &Passthrough{
		opts: p.Options,
		proxy: tlsproxy.New(tlsproxy.Options{
			NginxAddress:        p.Options.NginxAddress,
			NginxProxyProtocol:  tlsproxy.ProxyProtocolV2,
			AcceptProxyProtocol: p.Options.AcceptProxyProtocol,
			HelloTimeout:        p.Options.HelloTimeout,
			IdleTimeout:         p.Options.IdleTimeout,
			MaxConnections:      p.Options.MaxConnections,
			Log:                 log,
			Metrics:             metrics,
		}),
		ingresses: ingInf.Lister(),
		recorder:  p.Recorder,
		log:       log,
		synced: []cache.InformerSynced{
			ingInf.Informer().HasSynced,
			p.Factory.Discovery().V1().EndpointSlices().Informer().HasSynced,
		},
		announced: p.Announced,
		byIngress: map[types.NamespacedName]ingressRoutes{},
		endpoints: map[nginx.UpstreamName][]netip.AddrPort{},
		used:      map[nginx.UpstreamName]bool{},
		reported:  map[types.NamespacedName]map[string]string{},
	}
	p.IngressChanges.Subscribe(m.ingressChanged)
	p.Endpoints.Subscribe(m.endpointsChanged)
	if p.Lifecycle != nil {
		ctx, cancel := context.WithCancel(context.Background())
		p.Lifecycle.Append(fx.Hook{
			OnStart: func(context.Context) error { return m.Start(ctx) },
			OnStop: func(stopCtx context.Context) error {
				cancel()
				return m.Stop(stopCtx)
			},
		})
	}
	ready := modules.ReadyCheck{Name: "ssl-passthrough", Check: func() error {
		if !m.serving.Load() {
			return errors.New("SSL passthrough proxy not accepting connections yet")
		}
		return nil
	}}
	return Result{Passthrough: m, Ready: ready}, nil
}

// Proxy returns the proxy, for tests and for a team that wants to inspect it.
func (m *Passthrough) Proxy() *tlsproxy.Proxy { return m.proxy }

// Addr returns the address the proxy listens on, nil before Start.
func (m *Passthrough) Addr() *net.TCPAddr { return m.addr.Load() }

// Start binds the listen address now, so that a port in use fails the start, and begins accepting once
// the Ingress and EndpointSlice caches have synced and the class filter has announced every existing
// Ingress (modules.IngressesAnnounced): a passthrough host is never handed to NGINX just because the proxy started
// before it knew the host. Until then the kernel queues connections.
func (m *Passthrough) Start(ctx context.Context) error {
	l, err := net.Listen("tcp", m.opts.ListenAddress)
	if err != nil {
		return fmt.Errorf("passthrough: listen on %s: %w", m.opts.ListenAddress, err)
	}
	m.served = make(chan error, 1)
	if a, ok := l.Addr().(*net.TCPAddr); ok {
		m.addr.Store(a)
	}
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), m.synced...) {
			_ = l.Close()
			m.served <- nil
			return
		}
		select {
		case <-m.announced.Done():
		case <-ctx.Done():
			_ = l.Close()
			m.served <- nil
			return
		}
		m.log.Info("SSL passthrough proxy accepting connections", zap.String("address", l.Addr().String()),
			zap.String("nginx", m.opts.NginxAddress), zap.Int("hosts", m.proxy.Table().Len()))
		m.serving.Store(true)
		err := m.proxy.Serve(l)
		m.serving.Store(false)
		if errors.Is(err, tlsproxy.ErrProxyClosed) {
			err = nil
		} else if err != nil {
			m.log.Error("SSL passthrough proxy stopped accepting connections", zap.Error(err))
		}
		m.served <- err
	}()
	return nil
}

// Stop stops accepting, gives open connections until DrainTimeout (or ctx's end, if sooner) to finish,
// then closes the rest.
func (m *Passthrough) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.DrainTimeout)
	defer cancel()
	if err := m.proxy.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("passthrough: stop: %w", err)
	}
	if m.served != nil {
		select {
		case <-m.served:
		case <-ctx.Done():
		}
	}
	return nil
}

// ingressChanged re-reads one Ingress and updates the table if its routes changed.
func (m *Passthrough) ingressChanged(c modules.IngressChange) {
	var ir *ingressRoutes
	var ing *networkingv1.Ingress
	if c.Accepted {
		if got, err := m.ingresses.Ingresses(c.Key.Namespace).Get(c.Key.Name); err == nil {
			ing = got
			routes, enabled, problems := RoutesOf(ing)
			m.report(ing, ReasonInvalid, strings.Join(problems, "; "))
			if enabled && len(routes) > 0 {
				ir = &ingressRoutes{key: c.Key, created: ing.CreationTimestamp.Time, routes: routes}
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	before, had := m.byIngress[c.Key]
	switch {
	case ir == nil && !had:
		if ing == nil {
			delete(m.reported, c.Key)
		}
		return
	case ir == nil:
		delete(m.byIngress, c.Key)
	case had && slices.Equal(before.routes, ir.routes) && before.created.Equal(ir.created):
		return
	default:
		m.byIngress[c.Key] = *ir
	}
	if ing == nil {
		delete(m.reported, c.Key)
	}
	m.rebuildLocked()
}

// endpointsChanged records an upstream's endpoints and updates the table when a route uses it.
func (m *Passthrough) endpointsChanged(c modules.EndpointsChange) {
	var eps []netip.AddrPort
	if !c.Removed {
		eps = make([]netip.AddrPort, 0, len(c.Endpoints))
		for _, e := range c.Endpoints {
			a, err := netip.ParseAddr(e.Address)
			if err != nil || e.Port < 1 || e.Port > 65535 {
				continue // the endpoint lane validates; never route to something that is not an address
			}
			eps = append(eps, netip.AddrPortFrom(a.Unmap(), uint16(e.Port)))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.Removed {
		delete(m.endpoints, c.Upstream.Name)
	} else {
		m.endpoints[c.Upstream.Name] = eps
	}
	if m.used[c.Upstream.Name] {
		m.rebuildLocked()
	}
}

// rebuildLocked builds a new table from all passthrough Ingresses in NGINX's order (nginx.OlderFirst), so
// that a contested host goes to the Ingress NGINX would give it to, and swaps it in. m.mu must be held.
func (m *Passthrough) rebuildLocked() {
	all := make([]ingressRoutes, 0, len(m.byIngress))
	for _, ir := range m.byIngress {
		all = append(all, ir)
	}
	slices.SortFunc(all, func(a, b ingressRoutes) int { return nginx.OlderFirst(a.created, a.key, b.created, b.key) })
	owner := map[string]types.NamespacedName{}
	used := map[nginx.UpstreamName]bool{}
	var routes []tlsproxy.Route
	conflicts := map[types.NamespacedName][]string{}
	for _, ir := range all {
		for _, r := range ir.routes {
			if first, taken := owner[r.Host]; taken {
				conflicts[ir.key] = append(conflicts[ir.key], fmt.Sprintf("host %s is already passed through by Ingress %s", r.Host, first))
				continue
			}
			owner[r.Host] = ir.key
			used[r.Upstream.Name] = true
			routes = append(routes, tlsproxy.Route{
				Host:          r.Host,
				Backend:       string(r.Upstream.Name),
				Endpoints:     m.endpoints[r.Upstream.Name],
				ProxyProtocol: r.ProxyProtocol,
			})
		}
	}
	m.used = used
	m.proxy.SetTable(tlsproxy.NewTable(routes))
	for _, ir := range all {
		msg := strings.Join(conflicts[ir.key], "; ")
		if ing, err := m.ingresses.Ingresses(ir.key.Namespace).Get(ir.key.Name); err == nil {
			m.reportLocked(ing, ReasonConflict, msg)
		}
	}
	if ce := m.log.Check(zap.DebugLevel, "SSL passthrough table updated"); ce != nil {
		ce.Write(zap.Int("hosts", len(routes)), zap.Int("ingresses", len(all)))
	}
}

// report sends a Warning Event for a non-empty msg unless the same one was sent for this version of the
// Ingress; an empty msg clears the memory so the problem is reported again if it comes back.
func (m *Passthrough) report(ing *networkingv1.Ingress, reason, msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reportLocked(ing, reason, msg)
}

func (m *Passthrough) reportLocked(ing *networkingv1.Ingress, reason, msg string) {
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	seen := m.reported[key]
	if msg == "" {
		delete(seen, reason)
		if len(seen) == 0 {
			delete(m.reported, key)
		}
		return
	}
	id := ing.ResourceVersion + "\x00" + msg
	if seen[reason] == id {
		return
	}
	if seen == nil {
		seen = map[string]string{}
		m.reported[key] = seen
	}
	seen[reason] = id
	m.recorder.Event(ing, corev1.EventTypeWarning, reason, msg)
	m.log.Warn("SSL passthrough problem", zap.Stringer("ingress", key), zap.String("reason", reason), zap.String("message", msg))
}
