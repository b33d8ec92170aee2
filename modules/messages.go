package modules

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// IngressChange says that an Ingress became ours, changed while ours, or stopped being ours (deleted or
// moved to another class). Consumers read the Ingress itself from the informer cache, so a change never
// carries a stale copy.
type IngressChange struct {
	Key types.NamespacedName
	// Accepted is true while the Ingress is served by this controller, false once it is not.
	Accepted bool
}

// IngressesAnnounced is a one-shot signal beside the IngressChange topic. The class filter fires it once
// after start, when every Ingress that existed as the caches synced has been announced on IngressChange and
// every subscriber of that topic has taken those announcements in. Consumers that must not act on a
// partial view wait for it: the renderer before its first render (NGINX never goes live, and ready, with
// a configuration that lacks existing Ingresses), the passthrough proxy before it accepts connections.
type IngressesAnnounced struct{ oneShot }

// NewIngressesAnnounced returns a signal that has not fired.
func NewIngressesAnnounced() *IngressesAnnounced {
	return &IngressesAnnounced{newOneShot()}
}

// Announce fires the signal; later calls do nothing.
func (a *IngressesAnnounced) Announce() { a.fire() }

// oneShot is a signal that fires once.
type oneShot struct {
	once *sync.Once
	done chan struct{}
}

func newOneShot() oneShot { return oneShot{once: new(sync.Once), done: make(chan struct{})} }

func (o oneShot) fire() { o.once.Do(func() { close(o.done) }) }

// Done is closed once the signal has fired.
func (o oneShot) Done() <-chan struct{} { return o.done }

// SettingsChange carries the complete controller-wide settings of ingress-nginx's ConfigMap (--configmap)
// each time they change: the settings module publishes the first one (ingress-nginx's defaults when no
// ConfigMap is configured or it does not exist) before SettingsLoaded fires.
type SettingsChange struct {
	Settings nginx.Settings
}

// SettingsLoaded fires once the first SettingsChange was delivered to every subscriber. The renderer
// waits for it before its first render, so NGINX never goes live with defaults the ConfigMap overrides.
type SettingsLoaded struct{ oneShot }

// NewSettingsLoaded returns a signal that has not fired.
func NewSettingsLoaded() *SettingsLoaded { return &SettingsLoaded{newOneShot()} }

// Load fires the signal; later calls do nothing.
func (l *SettingsLoaded) Load() { l.fire() }

// EndpointsChange carries the complete, current endpoint list of one upstream. It is the endpoint lane's
// message: consumers apply it without touching NGINX's structure (no reload).
type EndpointsChange struct {
	// Upstream names the Service port, exactly as the renderer names it in the model.
	Upstream nginx.Upstream
	// Endpoints are sorted and de-duplicated; empty means the upstream has no usable endpoint (503).
	Endpoints []nginx.Endpoint
	// Removed is set when no accepted Ingress refers to the upstream any more; consumers forget it.
	Removed bool
}

// StreamUpstreams is the complete list of the upstreams that the TCP and UDP services
// (--tcp-services-configmap, --udp-services-configmap) use, each named by nginx.NewStreamUpstream. The
// endpoint watcher keeps their endpoints current on the endpoint lane (EndpointsChange), as for Ingresses.
type StreamUpstreams struct {
	// Upstreams are sorted by name and unique. They are pointers, as in nginx.Model, so that the
	// endpoint watcher diffs both kinds of list the same way; neither the list nor its Upstreams are
	// modified once published.
	Upstreams []*nginx.Upstream
}

// Rendered is a complete NGINX configuration built from the model. The structure lane's message:
// applying it may reload NGINX.
type Rendered struct {
	Model  nginx.Model
	Config []byte
	// Hash identifies Config; NGINX reports it once the configuration is live.
	Hash string
}

// CertChange says that the certificate of a referenced TLS Secret changed, became unusable, or is no
// longer referenced. Hosts whose Secret has no usable certificate are served the default certificate.
type CertChange struct {
	Secret types.NamespacedName
	// Certificate is the parsed, validated certificate; nil when the Secret is missing, invalid or no
	// longer referenced by any accepted Ingress.
	Certificate *certs.Certificate
	// Default marks the --default-ssl-certificate Secret.
	Default bool
}

// OCSPChange says that the OCSP response to staple with a TLS Secret's certificate changed (the
// ConfigMap's enable-ocsp). The certificate lane pushes it with the certificate it was fetched for
// (Staple.ContentHash), never with another one.
type OCSPChange struct {
	Secret types.NamespacedName
	// Staple is the checked response; nil when there is none to staple any more.
	Staple *certs.Staple
}

// RoutesRefused says that the data plane refused a route that an Ingress wrote (Location, on Host): a
// limit or a bug that validation did not catch. The renderer quarantines the Ingress (leaves it out of
// the model, with a Warning Event) until the Ingress changes, so that the host's other routes go live.
type RoutesRefused struct {
	Ingress  types.NamespacedName
	Host     nginx.Hostname
	Location nginx.Location
	// Reason is the data plane's.
	Reason string
	// Profile, when set, is what NGINX refused: the configuration holding the profile's location failed
	// "nginx -t" there (Location is then one of the Ingress's locations that use it).
	Profile nginx.ProfileSettings
}
