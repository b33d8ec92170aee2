// Package streams serves ingress-nginx's TCP and UDP services: the ConfigMaps named by
// --tcp-services-configmap and --udp-services-configmap map a port of the controller to a Service port
// (`"9000": "default/db:5432"`). Each entry gets a listener of its own in the controller process, served
// by package tlsproxy (TCP: the SSL passthrough proxy's copy path; UDP: one flow per client). Endpoints
// come from the endpoint lane (EndpointsChange), so a change of a Service's endpoints never reloads NGINX:
// open connections and flows keep their endpoint, new ones use the new endpoints (a UDP flow ends when its
// endpoint leaves the Service). The ConfigMaps are
// watched; a bad entry gets a Warning Event on its ConfigMap and the others apply.
package streams

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
	"github.com/ingress-reactor/ingress-reactor/tlsproxy"
)

// Module wires the TCP and UDP services into the application. It needs Options (the app supplies them
// when --tcp-services-configmap or --udp-services-configmap is set).
var Module = fx.Module("streams",
	fx.Provide(New),
	fx.Invoke(func(*Streams) {}),
)

// Event reasons on the ConfigMaps, as they appear in `kubectl describe configmap`.
const (
	// ReasonInvalid (Warning): an entry is refused, or served without a part of it; the message says why.
	ReasonInvalid = "InvalidStreamService"
	// ReasonListenFailed (Warning): the port of an entry cannot be opened (another process has it); the
	// controller tries again every RetryInterval.
	ReasonListenFailed = "StreamPortUnavailable"
)

// RetryInterval is how often ports that could not be opened are tried again.
const RetryInterval = 10 * time.Second

// Options configure the TCP and UDP services.
type Options struct {
	// TCPConfigMap and UDPConfigMap are the ConfigMaps to read; an empty name disables that protocol.
	TCPConfigMap, UDPConfigMap types.NamespacedName
	// ListenHost is the address listeners bind to; empty means every address.
	ListenHost string
	// Reserved maps the ports the controller uses otherwise to the flag that sets them; entries for them
	// are refused.
	Reserved map[int]string
	// WatchNamespace, when set, is the only namespace whose Services the controller sees.
	WatchNamespace string
	// TCPIdleTimeout closes a TCP connection without traffic for that long (0: never).
	TCPIdleTimeout time.Duration
	// TCPMaxConnections bounds the TCP connections open at once over every TCP service (0: no limit).
	TCPMaxConnections int
	// UDPIdleTimeout ends a UDP flow without traffic for that long; UDPMaxFlows bounds each UDP port's
	// flows. Zero values take tlsproxy's defaults.
	UDPIdleTimeout time.Duration
	UDPMaxFlows    int
	// DrainTimeout bounds how long a stop waits for open TCP connections; default 10s.
	DrainTimeout time.Duration
}

// Params are the module's fx inputs.
type Params struct {
	fx.In
	Options   Options
	Client    kubernetes.Interface
	Endpoints *pipeline.Topic[modules.EndpointsChange]
	Streams   *pipeline.Topic[modules.StreamUpstreams]
	Recorder  record.EventRecorder
	Registry  prometheus.Registerer
	Log       *zap.Logger
	Lifecycle fx.Lifecycle `optional:"true"`
}

// listenerKey identifies a listener: a port of one protocol.
type listenerKey struct {
	udp  bool
	port int
}

func (k listenerKey) String() string {
	if k.udp {
		return "udp/" + strconv.Itoa(k.port)
	}
	return "tcp/" + strconv.Itoa(k.port)
}

// listener is one open port and the entry it serves.
type listener struct {
	entry    Entry
	counters *tlsproxy.StreamCounters
	tcp      net.Listener
	stream   *tlsproxy.Stream
	udp      *tlsproxy.UDPProxy
}

// Streams keeps one listener per valid entry of the TCP and UDP services ConfigMaps, each routed to its
// Service's current endpoints.
type Streams struct {
	opts     Options
	client   kubernetes.Interface
	log      *zap.Logger
	recorder record.EventRecorder
	metrics  *tlsproxy.StreamMetrics
	proxy    *tlsproxy.Proxy
	out      *pipeline.Topic[modules.StreamUpstreams]

	factories []informers.SharedInformerFactory
	lister    map[types.NamespacedName]listerscorev1.ConfigMapNamespaceLister
	synced    []cache.InformerSynced
	wake      chan struct{}
	done      chan struct{}
	wg        sync.WaitGroup

	mu        sync.Mutex
	listeners map[listenerKey]*listener
	// endpoints holds the endpoints of the upstreams in use, and of those used before until the endpoint
	// lane removes them, as the endpoint lane last published them.
	endpoints map[nginx.UpstreamName][]netip.AddrPort
	wanted    []*nginx.Upstream
	// reported remembers the Events sent per ConfigMap version, so a problem is reported once per version.
	reported map[types.NamespacedName]map[string]bool
	// failing says whether some port could not be opened at the last sync.
	failing bool
	// missing holds the ConfigMaps found missing, so that is logged once, and again once they come back.
	missing map[types.NamespacedName]bool
}

// New builds the module: its metrics, its ConfigMap informers and its endpoint subscription. Without fx,
// pass a nil Lifecycle and call Start and Stop.
func New(p Params) (*Streams, error) {
	if p.Options.DrainTimeout <= 0 {
		p.Options.DrainTimeout = 10 * time.Second
	}
	log := p.Log.Named("streams")
	s := &Streams{
		opts:     p.Options,
		client:   p.Client,
		log:      log,
		recorder: p.Recorder,
		metrics:  tlsproxy.NewStreamMetrics(),
		out:      p.Streams,
		proxy: tlsproxy.New(tlsproxy.Options{
			Name:           "TCP services",
			IdleTimeout:    p.Options.TCPIdleTimeout,
			MaxConnections: p.Options.TCPMaxConnections,
			Log:            log,
		}),
		lister:    map[types.NamespacedName]listerscorev1.ConfigMapNamespaceLister{},
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		listeners: map[listenerKey]*listener{},
		endpoints: map[nginx.UpstreamName][]netip.AddrPort{},
		reported:  map[types.NamespacedName]map[string]bool{},
		missing:   map[types.NamespacedName]bool{},
	}
	for _, c := range s.metrics.Collectors() {
		if err := p.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("streams: register metrics: %w", err)
		}
	}
	for _, cm := range []types.NamespacedName{p.Options.TCPConfigMap, p.Options.UDPConfigMap} {
		if cm.Name == "" || s.lister[cm] != nil {
			continue
		}
		// One ConfigMap, wherever it lives: not the shared factory, which may watch another namespace
		// and trims ConfigMaps' data.
		f := informers.NewSharedInformerFactoryWithOptions(p.Client, 0, informers.WithNamespace(cm.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cm.Name).String()
			}))
		inf := f.Core().V1().ConfigMaps()
		if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.poke() },
			UpdateFunc: func(any, any) { s.poke() },
			DeleteFunc: func(any) { s.poke() },
		}); err != nil {
			return nil, fmt.Errorf("streams: ConfigMap handler: %w", err)
		}
		s.lister[cm] = inf.Lister().ConfigMaps(cm.Namespace)
		s.synced = append(s.synced, inf.Informer().HasSynced)
		s.factories = append(s.factories, f)
	}
	p.Endpoints.Subscribe(s.endpointsChanged)
	modules.Bind(p.Lifecycle, s)
	return s, nil
}

// poke asks the sync loop for a sync.
func (s *Streams) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start starts the ConfigMap informers and, once they have synced, the sync loop.
func (s *Streams) Start(ctx context.Context) {
	for _, f := range s.factories {
		f.Start(s.done)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if !cache.WaitForCacheSync(s.done, s.synced...) {
			return
		}
		s.poke()
		retry := time.NewTicker(RetryInterval)
		defer retry.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.done:
				return
			case <-s.wake:
				s.sync()
			case <-retry.C:
				s.mu.Lock()
				failing := s.failing
				s.mu.Unlock()
				if failing {
					s.sync()
				}
			}
		}
	}()
}

// Stop closes every listener, gives open TCP connections until DrainTimeout (or ctx's end) to finish, and
// ends every UDP flow.
func (s *Streams) Stop(ctx context.Context) error {
	close(s.done)
	for _, f := range s.factories {
		f.Shutdown()
	}
	s.wg.Wait()
	s.mu.Lock()
	ls := s.listeners
	s.listeners = map[listenerKey]*listener{}
	s.mu.Unlock()
	for _, l := range ls {
		if l.udp != nil {
			_ = l.udp.Close()
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.DrainTimeout)
	defer cancel()
	if err := s.proxy.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("streams: stop: %w", err)
	}
	return nil
}

// Ports returns the ports listening now, as "tcp/9000" and "udp/5353", sorted.
func (s *Streams) Ports() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.listeners))
	for k := range s.listeners {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

// configMap returns one of the ConfigMaps, nil when it does not exist.
func (s *Streams) configMap(key types.NamespacedName) *corev1.ConfigMap {
	l := s.lister[key]
	if l == nil {
		return nil
	}
	cm, err := l.Get(key.Name)
	if err != nil {
		return nil
	}
	return cm
}

// sync makes the listeners equal to the ConfigMaps' valid entries.
func (s *Streams) sync() {
	desired := map[listenerKey]Entry{}
	problems := map[types.NamespacedName][]string{}
	sources := map[listenerKey]*corev1.ConfigMap{}
	cms := map[types.NamespacedName]*corev1.ConfigMap{}
	for _, src := range []struct {
		key types.NamespacedName
		udp bool
	}{{s.opts.TCPConfigMap, false}, {s.opts.UDPConfigMap, true}} {
		if src.key.Name == "" {
			continue
		}
		cm := s.configMap(src.key)
		s.noteMissing(src.key, cm == nil)
		if cm == nil {
			continue
		}
		cms[src.key] = cm
		entries, probs := ParseEntries(cm.Data, src.udp, s.opts.Reserved, s.opts.WatchNamespace)
		for _, e := range entries {
			k := listenerKey{udp: e.UDP, port: e.Port}
			desired[k] = e
			sources[k] = cm
		}
		for _, p := range probs {
			problems[src.key] = append(problems[src.key], p.Message)
		}
	}

	s.mu.Lock()
	for k, l := range s.listeners {
		if _, keep := desired[k]; !keep {
			s.closeLocked(k, l)
		}
	}
	var wanted []*nginx.Upstream
	failing := false
	listenErrors := map[types.NamespacedName][]string{}
	for k, e := range desired {
		up := e.Upstream()
		wanted = append(wanted, &up)
		l, ok := s.listeners[k]
		switch {
		case ok && l.entry == e:
		case ok:
			if l.entry.Backend() != e.Backend() {
				s.metrics.Forget(e.Protocol(), e.Port, l.entry.Backend())
				l.counters = s.metrics.For(e.Protocol(), e.Port, e.Backend())
			}
			l.entry = e
			s.routeLocked(l)
			s.log.Info("stream service changed", zap.Stringer("listener", k), zap.String("service", e.Backend()))
		default:
			if err := s.openLocked(k, e); err != nil {
				failing = true
				key := types.NamespacedName{Namespace: sources[k].Namespace, Name: sources[k].Name}
				listenErrors[key] = append(listenErrors[key], err.Error())
			}
		}
	}
	s.failing = failing
	slices.SortFunc(wanted, func(a, b *nginx.Upstream) int { return strings.Compare(string(a.Name), string(b.Name)) })
	wanted = slices.CompactFunc(wanted, func(a, b *nginx.Upstream) bool { return a.Name == b.Name })
	changed := !slices.EqualFunc(wanted, s.wanted, func(a, b *nginx.Upstream) bool { return *a == *b })
	if changed {
		// The endpoints of upstreams no longer wanted stay until the endpoint lane says Removed: when an
		// entry comes back before the lane noticed it had gone (a ConfigMap replaced by delete and
		// create), the lane publishes nothing new for it.
		s.wanted = wanted
	}
	s.mu.Unlock()
	if changed {
		s.out.Publish(modules.StreamUpstreams{Upstreams: wanted})
	}
	for key, cm := range cms {
		s.report(cm, problems[key], listenErrors[key])
	}
}

// noteMissing logs when a ConfigMap turns out to be missing, and when it appears again.
func (s *Streams) noteMissing(key types.NamespacedName, missing bool) {
	s.mu.Lock()
	was := s.missing[key]
	s.missing[key] = missing
	s.mu.Unlock()
	switch {
	case missing && !was:
		s.log.Warn("TCP/UDP services ConfigMap not found; its services are served once it exists", zap.Stringer("configMap", key))
	case !missing && was:
		s.log.Info("TCP/UDP services ConfigMap found", zap.Stringer("configMap", key))
	}
}

// openLocked opens the listener of a new entry. s.mu must be held.
func (s *Streams) openLocked(k listenerKey, e Entry) error {
	addr := net.JoinHostPort(s.opts.ListenHost, strconv.Itoa(e.Port))
	l := &listener{entry: e, counters: s.metrics.For(e.Protocol(), e.Port, e.Backend())}
	route := e.Route(s.endpoints[e.Upstream().Name])
	if e.UDP {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return fmt.Errorf("UDP service %d (%s): cannot listen: %w; trying again every %s", e.Port, e.Backend(), err, RetryInterval)
		}
		l.udp = tlsproxy.NewUDP(tlsproxy.UDPOptions{IdleTimeout: s.opts.UDPIdleTimeout, MaxFlows: s.opts.UDPMaxFlows, Log: s.log}, route, l.counters)
		go func() {
			if err := l.udp.Serve(pc.(*net.UDPConn)); err != nil && !errors.Is(err, tlsproxy.ErrProxyClosed) {
				s.log.Error("UDP service stopped receiving", zap.Stringer("listener", k), zap.Error(err))
			}
		}()
	} else {
		tl, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("TCP service %d (%s): cannot listen: %w; trying again every %s", e.Port, e.Backend(), err, RetryInterval)
		}
		l.tcp = tl
		l.stream = tlsproxy.NewStream(route, l.counters)
		go func() {
			// Closing the listener (the entry was removed) ends this with an error; connections stay open.
			_ = s.proxy.ServeStream(tl, l.stream)
		}()
	}
	s.listeners[k] = l
	s.log.Info("stream service listening", zap.Stringer("listener", k), zap.String("service", e.Backend()),
		zap.Bool("decodeProxyProtocol", e.DecodeProxy), zap.Bool("encodeProxyProtocol", e.EncodeProxy))
	return nil
}

// closeLocked closes the listener of a removed entry: open TCP connections go on until they end, UDP flows
// end now. s.mu must be held.
func (s *Streams) closeLocked(k listenerKey, l *listener) {
	if l.tcp != nil {
		_ = l.tcp.Close()
	}
	if l.udp != nil {
		_ = l.udp.Close()
	}
	delete(s.listeners, k)
	s.metrics.Forget(l.entry.Protocol(), l.entry.Port, l.entry.Backend())
	s.log.Info("stream service closed", zap.Stringer("listener", k), zap.String("service", l.entry.Backend()))
}

// routeLocked gives a listener the current endpoints of its entry. s.mu must be held.
func (s *Streams) routeLocked(l *listener) {
	route := l.entry.Route(s.endpoints[l.entry.Upstream().Name])
	if l.stream != nil {
		l.stream.SetRoute(route, l.counters)
	}
	if l.udp != nil {
		l.udp.SetRoute(route, l.counters)
	}
}

// endpointsChanged records the endpoints of an upstream in use, or still known from an earlier use until
// the endpoint lane removes it, and re-routes its listeners.
func (s *Streams) endpointsChanged(c modules.EndpointsChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, known := s.endpoints[c.Upstream.Name]
	if !known && !slices.ContainsFunc(s.wanted, func(u *nginx.Upstream) bool { return u.Name == c.Upstream.Name }) {
		return
	}
	if c.Removed {
		delete(s.endpoints, c.Upstream.Name)
	} else {
		eps := make([]netip.AddrPort, 0, len(c.Endpoints))
		for _, e := range c.Endpoints {
			a, err := netip.ParseAddr(e.Address)
			if err != nil || e.Port < 1 || e.Port > 65535 {
				continue
			}
			eps = append(eps, netip.AddrPortFrom(a.Unmap(), uint16(e.Port)))
		}
		s.endpoints[c.Upstream.Name] = eps
	}
	for _, l := range s.listeners {
		if l.entry.Upstream().Name == c.Upstream.Name {
			s.routeLocked(l)
		}
	}
}

// report sends a Warning Event and logs each problem of a ConfigMap, once per version of it.
func (s *Streams) report(cm *corev1.ConfigMap, invalid, listenErrs []string) {
	key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
	s.mu.Lock()
	seen := s.reported[key]
	if seen == nil || !seen["\x00"+cm.ResourceVersion] {
		seen = map[string]bool{"\x00" + cm.ResourceVersion: true}
		s.reported[key] = seen
	}
	var send [][2]string
	for _, m := range invalid {
		if !seen[m] {
			seen[m] = true
			send = append(send, [2]string{ReasonInvalid, m})
		}
	}
	for _, m := range listenErrs {
		if !seen[m] {
			seen[m] = true
			send = append(send, [2]string{ReasonListenFailed, m})
		}
	}
	s.mu.Unlock()
	for _, e := range send {
		s.recorder.Event(cm, corev1.EventTypeWarning, e[0], e[1])
		s.log.Warn("stream service problem", zap.Stringer("configMap", key), zap.String("reason", e[0]), zap.String("message", e[1]))
	}
}
