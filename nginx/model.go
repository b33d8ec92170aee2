package nginx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Model is the data plane's structure: what nginx.conf says, built only from validated values. Endpoint
// lists are not part of it; they travel through the endpoint lane (Client.PushEndpoints) without reloads.
// Slices are sorted so that equal inputs give byte-identical configurations.
type Model struct {
	// Servers are sorted by host; the catch-all server (Host "") is always first.
	Servers []Server
	// Upstreams lists every upstream a location or the default backend refers to, sorted by name.
	// The endpoint lane fills exactly these names. An Upstream is the one in the translation that first
	// used it (IngressTranslation.Upstreams; the default backend's is the Merger's copy), and every later
	// model shares it: a change that adds or removes an upstream copies a pointer per upstream, not the
	// Upstream (at 10,000 Ingresses, 160 KB instead of 1.76 MB). Neither the list nor the Upstreams it
	// points to are ever modified once published.
	Upstreams []*Upstream
	// DefaultBackend answers requests that no rule matches. Empty means a built-in 404.
	DefaultBackend UpstreamName
	// Profiles are the distinct profiles the locations use, sorted by name; nginx.conf renders one named
	// location for each.
	Profiles []ProfileSettings
}

// ClientCertificates reports whether some host verifies client certificates (auth-tls-secret). NGINX's
// TLS session cache must then be off: there is one TLS server for every host, so a session, and the
// client certificate verified in its handshake, could be resumed under another host's name without
// ssl_certificate_by_lua, which asks for and verifies certificates per name, running again
// (TestVerifyClientSessionCrossesSNINames).
func (m *Model) ClientCertificates() bool {
	for i := range m.Servers {
		if m.Servers[i].ClientCA() != nil {
			return true
		}
	}
	return false
}

// ClientCADigest names which CA each host's handshakes verify client certificates with (its SNI name
// and ClientCAID), "" when none does. nginx.conf carries it, so that a change reloads NGINX: a
// connection keeps the verdict of its handshake, and the router can only compare a route's CA with the
// CA the SNI name has now, so a host whose CA changed (a Secret rotated, a host passing to another
// Ingress or namespace, an exact host appearing over a wildcard or the catch-all) would otherwise go on
// admitting, on connections opened before, certificates of the CA it had then. The reload drains them
// (worker_shutdown_timeout), as ingress-nginx's reload on a CA change did.
func (m *Model) ClientCADigest() string {
	var pairs []string
	for i := range m.Servers {
		if o := m.Servers[i].ClientCA(); o != nil {
			pairs = append(pairs, string(m.Servers[i].Host)+"\x00"+o.ClientCAID)
		}
	}
	if len(pairs) == 0 {
		return ""
	}
	slices.Sort(pairs)
	sum := sha256.Sum256([]byte(strings.Join(pairs, "\n")))
	return hex.EncodeToString(sum[:16])
}

// Server is one virtual host.
type Server struct {
	// Host is an exact hostname, a "*."-wildcard, or "" for the catch-all (default) server.
	Host Hostname
	// Locations are sorted by path, then path type (Exact before Prefix).
	Locations []Location
	// TLS is set when an Ingress lists this host (or a wildcard covering it) in spec.tls.
	TLS *ServerTLS
	// DefaultBackend answers requests that no location matches instead of the model's (an Ingress's
	// default-backend annotation); empty means the model's.
	DefaultBackend UpstreamName
	// DefaultBackendOptions are the route options of the Ingress whose default-backend is DefaultBackend,
	// when they check client certificates (auth-tls-secret): its fallback is checked as its paths are.
	DefaultBackendOptions *RouteOptions
}

// ServerTLS says how a host is served over HTTPS.
type ServerTLS struct {
	// Secret is the kubernetes.io/tls Secret whose certificate the host presents. The zero value means
	// the default certificate.
	Secret types.NamespacedName
	// SSLRedirect redirects plain-HTTP requests that no location of the server matches (the fallback
	// location) to HTTPS. Locations carry their own flag.
	SSLRedirect bool
}

// Location routes one path of one host to an upstream. Its path type and flag come last, packed into
// one word: 152 bytes, two locations in 320 (an Ingress's two paths took 352 with a string path type).
type Location struct {
	Path     string
	Upstream UpstreamName
	// Ingress is the Ingress the location comes from; several Ingresses may share a server.
	Ingress types.NamespacedName
	// Access restricts which client addresses may use the location; nil means everyone. Locations of
	// one Ingress share the value, which must not be modified.
	Access *SourceRanges
	// Options are the route data of the location's Ingress (RouteOptions), shared like Access; nil
	// when none is set.
	Options *RouteOptions
	// Regex is set when the path is matched as a regular expression (its Ingress's use-regex or
	// rewrite-target); such a location puts its whole server in regex mode (Server.RegexMode).
	Regex *PathRegex
	// RedirectHost, when set, answers requests with a 308 to the same URL on this host
	// (from-to-www-redirect); Upstream is then empty.
	RedirectHost Hostname
	// Profile are the location's directive-only settings (see ProfileSettings); nil for none, never a
	// zero ProfileSettings. Locations of one Ingress share the value, which must not be modified.
	Profile *ProfileSettings
	// Canary, when set, is the location's canary (a canary Ingress's route for the same path): the
	// router sends the requests its rule picks to its upstream.
	Canary *LocationCanary
	// Backend is the Service and port of Upstream, for the headers of a custom error page
	// (custom-http-errors); set only when Profile has custom errors.
	Backend *Upstream
	// Service is the name of Upstream's Service (the service label of the request metrics), "" without one.
	Service string
	// PathType is how Path matches.
	PathType PathType
	// SSLRedirect answers plain-HTTP requests with a 308 to HTTPS. Only set on servers with TLS.
	SSLRedirect bool
}

// SourceRanges restricts clients by address, as ingress-nginx's denylist-source-range and
// allowlist-source-range (formerly whitelist-source-range) annotations did. NGINX checks the address
// the connection comes from ($remote_addr): behind a load balancer that does not preserve client
// addresses, that is the balancer's. Refused requests get 403.
//
// Prefixes are canonical (masked; IPv4-mapped IPv6 written as IPv4), unique and sorted, so equal
// annotations render equal configurations.
type SourceRanges struct {
	// Deny lists the addresses refused whatever Allow says; checked first.
	Deny []netip.Prefix
	// Allow, when not empty, lists the only addresses admitted.
	Allow []netip.Prefix
}

// PathType is the matching mode of a location, after ImplementationSpecific has been mapped to Prefix.
// It is one byte, not a string: every route and location carries one (at 10,000 Ingresses, 30 bytes an
// Ingress fewer). It prints, and encodes as JSON text, as the Ingress API names it ("Exact",
// "Prefix"), and orders as those names do; the zero value prints as "".
type PathType uint8

const (
	// PathExact matches the path exactly, case-sensitively.
	PathExact PathType = iota + 1
	// PathPrefix matches element-wise: "/foo" matches "/foo" and "/foo/bar", not "/foobar".
	PathPrefix
)

// String returns the Ingress API's name of the path type.
func (p PathType) String() string {
	switch p {
	case PathExact:
		return "Exact"
	case PathPrefix:
		return "Prefix"
	}
	return ""
}

// MarshalText encodes the path type as its name.
func (p PathType) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText decodes a name that MarshalText wrote.
func (p *PathType) UnmarshalText(b []byte) error {
	switch string(b) {
	case "Exact":
		*p = PathExact
	case "Prefix":
		*p = PathPrefix
	case "":
		*p = 0
	default:
		return fmt.Errorf("path type %q is neither Exact nor Prefix", b)
	}
	return nil
}

// Hostname is a validated host: a lowercase RFC 1123 name, a "*."-wildcard of one, or "" for the catch-all.
type Hostname string

// IsWildcard says whether h is a "*." wildcard.
func (h Hostname) IsWildcard() bool { return strings.HasPrefix(string(h), "*.") }

// UpstreamName names an upstream in nginx.conf and in the endpoint lane. It only ever holds lowercase
// letters, digits and '-', so it is safe in configuration, Lua tables, metrics labels and URLs alike.
type UpstreamName string

// Upstream is a Service port that locations send traffic to.
type Upstream struct {
	Name UpstreamName
	// Service is the backend Service.
	Service types.NamespacedName
	// Port is the Service port as the Ingress names it: a number (spec.ports[].port) or a name
	// (spec.ports[].name). The endpoint lane resolves it against the Service and its EndpointSlices.
	Port intstr.IntOrString
	// ServiceIP (service-upstream) makes the Service's cluster IP and port the upstream's one endpoint,
	// instead of its Pods' addresses. Such an upstream has a name of its own, so other Ingresses that
	// route to the same Service port keep its Pods.
	ServiceIP bool
	// UDP makes the endpoint lane resolve the Service's UDP port of that number or name (a UDP service of
	// --udp-services-configmap); other upstreams use TCP ports.
	UDP bool
}

// Endpoint is one address that backs an upstream.
type Endpoint struct {
	// Address is an IPv4 or IPv6 literal. DNS names (ExternalName Services) must be resolved by the
	// caller: nginx's Lua balancer can only connect to addresses.
	Address string `json:"address"`
	Port    int32  `json:"port"`
}

// Validate checks that e can be handed to the balancer.
func (e Endpoint) Validate() error {
	a, err := netip.ParseAddr(e.Address)
	if err != nil || a.Zone() != "" {
		return fmt.Errorf("endpoint address %q is not an IP address", e.Address)
	}
	if e.Port < 1 || e.Port > 65535 {
		return fmt.Errorf("endpoint %s: port %d out of range", e.Address, e.Port)
	}
	return nil
}

// NewUpstream returns the upstream for a Service port, with its derived name.
func NewUpstream(service types.NamespacedName, port intstr.IntOrString) Upstream {
	return Upstream{Name: upstreamName(service, port), Service: service, Port: port}
}

// NewServiceIPUpstream returns the upstream whose endpoint is the Service's cluster IP and port
// (service-upstream). Its name is "<namespace>-<service>-<port>-vip-<hash>", never that of NewUpstream.
func NewServiceIPUpstream(service types.NamespacedName, port intstr.IntOrString) Upstream {
	name := upstreamName(service, port)
	// The hash covers the tuple; "vip" before it, and a hash of its own, keep the names apart.
	h := fnv.New32a()
	_, _ = h.Write([]byte("vip:"))
	_, _ = h.Write([]byte(name))
	sum := strconv.FormatUint(uint64(h.Sum32()), 16)
	base := string(name[:strings.LastIndexByte(string(name), '-')])
	return Upstream{Name: UpstreamName(base + "-vip-" + strings.Repeat("0", 8-len(sum)) + sum), Service: service, Port: port, ServiceIP: true}
}

// NewStreamUpstream returns the upstream of a TCP or UDP service (--tcp-services-configmap,
// --udp-services-configmap). Its name is "tcp-" or "udp-" followed by "<namespace>-<service>-<port>-<hash>",
// never that of an Ingress's upstream, so the endpoint lane publishes it on its own.
func NewStreamUpstream(service types.NamespacedName, port intstr.IntOrString, udp bool) Upstream {
	proto := "tcp"
	if udp {
		proto = "udp"
	}
	return Upstream{Name: UpstreamName(proto + "-" + string(upstreamName(service, port))), Service: service, Port: port, UDP: udp}
}

// upstreamName derives "<namespace>-<service>-<port>-<hash>". Namespace and Service names are DNS labels
// and port names IANA service names, so the readable part is already in [a-z0-9-]; the FNV-1a hash of
// the unambiguous tuple keeps "a-b"/"c" and "a"/"b-c" apart.
func upstreamName(service types.NamespacedName, port intstr.IntOrString) UpstreamName {
	p := port.String()
	h := fnv.New32a()
	_, _ = h.Write([]byte(service.Namespace))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(service.Name))
	_, _ = h.Write([]byte{':'})
	if port.Type == intstr.String {
		_, _ = h.Write([]byte{'s'})
	}
	_, _ = h.Write([]byte(p))
	var b strings.Builder
	b.Grow(len(service.Namespace) + len(service.Name) + len(p) + 12)
	b.WriteString(sanitizeLabel(service.Namespace))
	b.WriteByte('-')
	b.WriteString(sanitizeLabel(service.Name))
	b.WriteByte('-')
	b.WriteString(sanitizeLabel(p))
	b.WriteByte('-')
	sum := strconv.FormatUint(uint64(h.Sum32()), 16)
	for i := len(sum); i < 8; i++ {
		b.WriteByte('0')
	}
	b.WriteString(sum)
	return UpstreamName(b.String())
}

// sanitizeLabel maps anything outside [a-z0-9-] to 'x'. Names from a validating API server never need
// it; it guarantees the charset even for objects built by hand.
func sanitizeLabel(s string) string {
	for i := 0; i < len(s); i++ {
		if !isLabelByte(s[i]) {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if !isLabelByte(b[j]) {
					b[j] = 'x'
				}
			}
			return string(b)
		}
	}
	return s
}

func isLabelByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
}

// ValidUpstreamName says whether s has the shape of an UpstreamName.
func ValidUpstreamName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLabelByte(s[i]) {
			return false
		}
	}
	return true
}

// TLSHosts returns, for every server with TLS and a Secret, the Secret it presents; hosts that are missing
// use the default certificate. It builds a map over every host: the reloader, which follows each model,
// updates its own table in place instead.
func (m *Model) TLSHosts() map[Hostname]types.NamespacedName {
	out := make(map[Hostname]types.NamespacedName)
	for i := range m.Servers {
		s := &m.Servers[i]
		if s.TLS != nil && s.TLS.Secret.Name != "" {
			out[s.Host] = s.TLS.Secret
		}
	}
	return out
}

// Upstream returns a copy of the upstream named n.
func (m *Model) Upstream(n UpstreamName) (Upstream, bool) {
	lo, hi := 0, len(m.Upstreams)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.Upstreams[mid].Name < n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(m.Upstreams) && m.Upstreams[lo].Name == n {
		return *m.Upstreams[lo], true
	}
	return Upstream{}, false
}
