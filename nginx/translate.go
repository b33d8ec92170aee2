package nginx

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ServiceLookup finds Services for translation, usually from an informer's lister.
type ServiceLookup interface {
	// Service returns the Service, or false when it does not exist.
	Service(key types.NamespacedName) (*corev1.Service, bool)
}

// ServiceLookupFunc adapts a function to ServiceLookup.
type ServiceLookupFunc func(key types.NamespacedName) (*corev1.Service, bool)

// Service calls f.
func (f ServiceLookupFunc) Service(key types.NamespacedName) (*corev1.Service, bool) { return f(key) }

// TranslateOptions are the controller-wide settings that shape a translation. It is comparable, so the
// TranslationCache can tell when a change of options invalidates its entries.
type TranslateOptions struct {
	// SSLRedirect redirects plain HTTP to HTTPS on hosts with TLS (ingress-nginx's ssl-redirect, on by default).
	SSLRedirect bool
	// ForceSSLRedirect is the default of the force-ssl-redirect annotation (the ConfigMap key of that name).
	ForceSSLRedirect bool
	// UpstreamHashBy and LoadBalance ("ewma" or "") are the ConfigMap's defaults of the annotations of
	// those names (balanceDefaults); UpstreamHashBy is a validated expression.
	UpstreamHashBy, LoadBalance string
	// AllowSourceRange and DenySourceRange are the defaults of the source range annotations (the
	// ConfigMap's whitelist-source-range and denylist-source-range): canonical ranges joined by commas.
	AllowSourceRange string
	DenySourceRange  string
	// DisableCatchAll rejects Ingresses with spec.defaultBackend (--disable-catch-all).
	DisableCatchAll bool
	// DisableExternalName rejects backends that are ExternalName Services (--disable-svc-external-name).
	DisableExternalName bool
	// GlobalAuth is the external authentication of Ingresses without an auth-url of their own (the
	// ConfigMap's global-auth-* keys); zero for none.
	GlobalAuth GlobalAuth
	// AllowedResponseHeaders are the lower-case header names custom-headers may set, one a line (the
	// ConfigMap's global-allowed-response-headers); "" allows every name.
	AllowedResponseHeaders string
	// CustomHTTPErrors is the custom-http-errors of Ingresses without the annotation ("404,503"; the
	// ConfigMap's key of that name).
	CustomHTTPErrors string
	// LimitRate and LimitRateAfter are the limit-rate and limit-rate-after of Ingresses without the
	// annotations, in bytes (the ConfigMap's keys of those names).
	LimitRate, LimitRateAfter int64

	// ServiceUpstream is the service-upstream of Ingresses without the annotation; ProxyRedirectFrom
	// and ProxyRedirectTo the proxy-redirect-from and -to of those without them ("" for off): the
	// ConfigMap's keys of those names (settings_routing.go).
	ServiceUpstream                    bool
	ProxyRedirectFrom, ProxyRedirectTo string
	// ProxyCookieDomain and ProxyCookiePath say whether the ConfigMap's proxy-cookie-domain and
	// proxy-cookie-path rewrite in the http block: an Ingress's "off" must then cancel them in its profile.
	ProxyCookieDomain, ProxyCookiePath bool
}

// DefaultTranslateOptions returns ingress-nginx's defaults.
func DefaultTranslateOptions() TranslateOptions {
	return TranslateOptions{SSLRedirect: true}
}

// IngressTranslation is what one Ingress contributes to the model. It is immutable once returned:
// the TranslationCache hands the same value to every caller.
type IngressTranslation struct {
	Ingress           types.NamespacedName
	UID               types.UID
	ResourceVersion   string
	CreationTimestamp time.Time
	// Routes in spec order, duplicates removed.
	Routes []Route
	// Upstreams that Routes refer to, sorted by name and unique.
	Upstreams []Upstream
	// TLS lists hosts this Ingress terminates TLS for.
	TLS []TLSHost
	// SSLRedirect says whether this Ingress's paths redirect plain HTTP on hosts with TLS.
	SSLRedirect bool
	// Access restricts the client addresses of every location of the Ingress (its source address
	// annotations); nil means no restriction.
	Access *SourceRanges
	// Options are the Ingress's route data from annotations (RouteOptions); nil when none is set.
	Options *RouteOptions
	// Profile are the Ingress's directive-only settings from annotations (ProfileSettings); nil when
	// none is set. The locations of the Ingress share it, so it must not be modified.
	Profile *ProfileSettings
	// Services are the Services the Ingress references, with the resourceVersion seen ("" when missing).
	Services []ServiceVersion
	// Canary, when set, makes the Ingress a canary (canary: "true"): its routes serve no request of their
	// own, each adds its upstream to the main Ingress's route with the same host, path and path type.
	Canary *CanaryRule
	// Warnings are problems that do not reject the Ingress (for example a Service that does not exist yet);
	// the caller may publish them as Warning Events.
	Warnings []string
	// rare is what few translations have, nil for none: 256 bytes a translation instead of 320, and the
	// renderer keeps one for every Ingress.
	rare *translationRare
}

// translationRare is the part of an IngressTranslation that few Ingresses need.
type translationRare struct {
	// objects are the other objects its annotations read (a proxy-ssl-secret's Secret), with the
	// resourceVersion seen ("" when missing).
	objects []ObjectVersion
	// backendTLS is the material of the backend TLS files its profile names (proxy-ssl-secret), or nil.
	backendTLS *BackendTLSFiles
	// globalAuth is set when Profile's external auth is the ConfigMap's (global-auth-url), which the
	// routes with NoGlobalAuth skip.
	globalAuth bool
	// noAuthProfile is Profile without the global auth, for the routes with NoGlobalAuth; nil when
	// that leaves nothing or no route has NoGlobalAuth. Computed once so that those locations share it.
	noAuthProfile *ProfileSettings
	// authSource is the Secret that Options.AuthUsers were read from (basic authentication), nil without:
	// a version kept serving after a rejection is checked against that Secret as it is now.
	authSource *basicAuthSource
}

// setRare returns t's rare part, made when t has none yet; only a translator calls it.
func (t *IngressTranslation) setRare() *translationRare {
	if t.rare == nil {
		t.rare = &translationRare{}
	}
	return t.rare
}

// rareOf returns t's rare part, the zero one when t has none.
func (t *IngressTranslation) rareOf() *translationRare {
	if t.rare == nil {
		return &noRare
	}
	return t.rare
}

// noRare is the rare part of the translations without one; never modified.
var noRare translationRare

// Objects returns the other objects the translation's annotations read (a proxy-ssl-secret's Secret),
// with the resourceVersion seen ("" when missing).
func (t *IngressTranslation) Objects() []ObjectVersion { return t.rareOf().objects }

// BackendTLS returns the material of the backend TLS files the translation's profile names
// (proxy-ssl-secret), or nil.
func (t *IngressTranslation) BackendTLS() *BackendTLSFiles { return t.rareOf().backendTLS }

// Route is one (host, path) of an Ingress. Its path type and flags come last, packed into one word (80
// bytes where a string path type and interleaved flags took 112; an Ingress usually has a few routes,
// and 10,000 Ingresses keep theirs).
type Route struct {
	// Host is "" for rules without host: they are served by the catch-all server.
	Host     Hostname
	Path     string
	Upstream UpstreamName
	// RedirectHost, when set, answers the route's requests with a 308 to the same URL on this host
	// (from-to-www-redirect); Upstream is then empty.
	RedirectHost Hostname
	// Regex is set when the path is matched as a regular expression (use-regex or rewrite-target).
	Regex *PathRegex
	// PathType is how Path matches.
	PathType PathType
	// FromDefaultBackend marks the "/" route that spec.defaultBackend adds to each of the Ingress's hosts.
	// It yields, without a conflict, to any path an Ingress states explicitly.
	FromDefaultBackend bool
	// Alias marks a route on a host of server-alias or from-to-www-redirect (ann_hosts.go): it yields to
	// every Ingress whose rules name the host.
	Alias bool
	// NoGlobalAuth marks a route of an Ingress with the global auth whose path no-auth-locations lists:
	// its location gets the Ingress's profile without the external auth.
	NoGlobalAuth bool
}

// TLSHost is one host of spec.tls.
//
// Its ServerTLS is what the host's server presents when the entry chooses the host's certificate:
// Secret is the certificate Secret (the zero value means the default certificate), and
// TranslateIngress sets SSLRedirect to the Ingress's. The Merger points the server at it instead of
// allocating a ServerTLS for every TLS host of the model (at 10,000 Ingresses, 0.5 MB).
type TLSHost struct {
	Host Hostname
	ServerTLS
}

// ServiceVersion records which version of a Service a translation used.
type ServiceVersion struct {
	Key             types.NamespacedName
	ResourceVersion string
}

// maxReportedErrors bounds the errors joined into one rejection, so the Event message stays readable.
const maxReportedErrors = 5

// TranslateIngress translates one Ingress. It is pure: the result depends only on the Ingress, the
// Services svc returns and opts. An error rejects the whole Ingress; its message names the fields at
// fault (for example `spec.rules[0].http.paths[1].path "/a;b": character ";" is not allowed ...`) and is
// meant to be shown to the Ingress's owner as a Warning Event.
func TranslateIngress(ing *networkingv1.Ingress, svc ServiceLookup, opts TranslateOptions) (*IngressTranslation, error) {
	t, _, _, err := translate(ing, Lookups{Services: svc}, opts)
	return t, err
}

// TranslateIngressWith is TranslateIngress with the Secrets that annotations may name.
func TranslateIngressWith(ing *networkingv1.Ingress, lk Lookups, opts TranslateOptions) (*IngressTranslation, error) {
	t, _, _, err := translate(ing, lk, opts)
	return t, err
}

// translate also returns the Services and other objects looked at, which a rejection depends on too.
func translate(ing *networkingv1.Ingress, lk Lookups, opts TranslateOptions) (*IngressTranslation, []ServiceVersion, []ObjectVersion, error) {
	tr := &translator{
		ing:  ing,
		svc:  lk.Services,
		lk:   lk,
		opts: opts,
		out: &IngressTranslation{
			Ingress:           types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name},
			UID:               ing.UID,
			ResourceVersion:   ing.ResourceVersion,
			CreationTimestamp: ing.CreationTimestamp.Time,
			SSLRedirect:       opts.SSLRedirect,
		},
	}
	tr.annotations()
	tr.settingsDefaults()
	tr.rules()
	tr.defaultBackend()
	tr.tls()
	tr.canaryOnly()
	tr.hostAliases()
	tr.noAuthLocations()
	tr.routeDataBudget()
	tr.authUsersBudget()
	tr.clientCABudget()
	if len(tr.errs) > 0 {
		errs := tr.errs
		if len(errs) > maxReportedErrors {
			errs = append(errs[:maxReportedErrors:maxReportedErrors], fmt.Errorf("and %d more errors", len(tr.errs)-maxReportedErrors))
		}
		if tr.withdraw {
			errs = append(errs, ErrWithdrawn)
		}
		if tr.globalAuthInvalid {
			errs = append(errs, errGlobalAuthInvalid)
		}
		err := fmt.Errorf("ingress %s rejected: %w", tr.out.Ingress, errors.Join(errs...))
		if len(tr.errs) == tr.missingObjects {
			err = onlyMissingError{err}
		}
		return nil, tr.out.Services, tr.out.Objects(), err
	}
	tr.out.Upstreams = fit(sortUpstreams(tr.out.Upstreams))
	tr.out.Routes = fit(tr.out.Routes)
	for i := range tr.out.TLS {
		tr.out.TLS[i].SSLRedirect = tr.out.SSLRedirect
	}
	tr.finishProfile()
	return tr.out, tr.out.Services, tr.out.Objects(), nil
}

// fit returns s in an array of its own length when appends left it room: a translation lives as long
// as its Ingress, and the two paths of an Ingress to one Service port leave room for a second
// upstream that deduplication dropped.
func fit[S ~[]E, E any](s S) S {
	if len(s) == cap(s) {
		return s
	}
	return append(S(nil), s...)
}

type routeKey struct {
	host     Hostname
	path     string
	pathType PathType
}

type translator struct {
	ing  *networkingv1.Ingress
	svc  ServiceLookup
	lk   Lookups
	opts TranslateOptions
	out  *IngressTranslation
	// profile collects the Ingress's profile settings while the annotations are read; finish stores it
	// in out.Profile, nil when it stays zero, so that most translations carry no copy of it.
	profile ProfileSettings
	errs    []error
	// seen maps a route to its index in out.Routes, to drop duplicates within the Ingress. It is built
	// only for Ingresses with many paths; a linear scan is cheaper for the usual few.
	seen map[routeKey]int
	// hosts in rule order, without duplicates; "" for host-less rules.
	hosts []Hostname
	// aliases (server-alias) and wwwRedirect (from-to-www-redirect) are read by applyHostAliases and
	// applied by hostAliases once the rules are known.
	aliases     []Hostname
	wwwRedirect bool
	// canaryLegacyAffinity: a canary Ingress with affinity-canary-behavior legacy (applyBalancing).
	canaryLegacyAffinity bool
	// withdraw is set when a rejection must not leave the last good version served (ErrWithdrawn).
	withdraw bool
	// globalAuthOff is set by enable-global-auth "false" (ann_globalauth.go).
	globalAuthOff bool
	// globalAuthInvalid is set when the Ingress would use the global auth and the ConfigMap's is invalid
	// (errGlobalAuthInvalid).
	globalAuthInvalid bool
	// missingObjects counts the errors caused by a Secret or ConfigMap that does not exist (recordMissing).
	missingObjects int
}

// ErrOnlyMissingObjects marks (errors.Is) the rejection of an Ingress whose only faults are Secrets or
// ConfigMaps its annotations name that do not exist yet: it is served as soon as they do. The message is
// the rejection's own.
var ErrOnlyMissingObjects = errors.New("only objects that do not exist yet")

type onlyMissingError struct{ error }

func (e onlyMissingError) Unwrap() error        { return e.error }
func (e onlyMissingError) Is(target error) bool { return target == ErrOnlyMissingObjects }

// ErrWithdrawn marks the rejection of an Ingress whose last good version must not stay served either:
// it used credentials (a proxy-ssl-secret) that are gone or no longer valid.
var ErrWithdrawn = errors.New("its last good version is not served either: it used credentials that are gone or invalid")

func (t *translator) fail(format string, args ...any) {
	t.errs = append(t.errs, fmt.Errorf(format, args...))
}

func (t *translator) addHost(h Hostname) {
	if !slices.Contains(t.hosts, h) {
		t.hosts = append(t.hosts, h)
	}
}

func (t *translator) rules() {
	for i := range t.ing.Spec.Rules {
		rule := &t.ing.Spec.Rules[i]
		host := Hostname(rule.Host)
		if rule.Host != "" {
			if err := ValidateHost(rule.Host); err != nil {
				t.fail("spec.rules[%d].host: %w", i, err)
				continue
			}
		}
		t.addHost(host)
		if rule.HTTP == nil {
			continue
		}
		for j := range rule.HTTP.Paths {
			t.path(fieldRef{rule: i, path: j}, host, &rule.HTTP.Paths[j])
		}
	}
}

func (t *translator) path(field fieldRef, host Hostname, p *networkingv1.HTTPIngressPath) {
	pathType := PathPrefix
	if p.PathType != nil {
		switch *p.PathType {
		case networkingv1.PathTypeExact:
			pathType = PathExact
		case networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
		default:
			t.fail("%s.pathType %q is not supported (want Exact, Prefix or ImplementationSpecific)", field, *p.PathType)
			return
		}
	}
	path := p.Path
	if path == "" {
		// The API server allows an empty path only for ImplementationSpecific; it means "everything".
		path = "/"
	}
	var regex *PathRegex
	if t.out.Options.regexPath(path) {
		// As in ingress-nginx (with its strict path validation), only ImplementationSpecific paths may
		// use regex syntax; Exact and Prefix paths are plain paths, matched as regexes all the same.
		var err error
		if p.PathType == nil || *p.PathType != networkingv1.PathTypeImplementationSpecific {
			err = ValidatePath(path)
		}
		if err == nil {
			regex, err = CompilePathRegex(path)
		}
		if err != nil {
			t.fail("%s.path: %w", field, err)
			return
		}
	} else if err := ValidatePath(path); err != nil {
		t.fail("%s.path: %w", field, err)
		return
	}
	if pathType == PathPrefix && len(path) > 1 && regex == nil {
		// The Ingress API ignores a trailing slash on Prefix paths: "/foo/" matches "/foo" too.
		path = strings.TrimRight(path, "/")
	}
	up, ok := t.backend(field.backend(), &p.Backend)
	if !ok {
		return
	}
	t.addRoute(field, Route{Host: host, Path: path, PathType: pathType, Upstream: up.Name, Regex: regex})
}

func (t *translator) addRoute(field fieldRef, r Route) {
	k := routeKey{r.Host, r.Path, r.PathType}
	if i, dup := t.find(k); dup {
		if prev := t.out.Routes[i]; prev.Upstream != r.Upstream {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("%s: path %q (%s) on host %s is listed twice with different backends; the first one is used",
				field, r.Path, r.PathType, hostForMessage(r.Host)))
		}
		return
	}
	if t.seen != nil {
		t.seen[k] = len(t.out.Routes)
	}
	t.out.Routes = append(t.out.Routes, r)
}

// manyRoutes is where find switches from a linear scan to a map.
const manyRoutes = 16

// find returns the index of the route with key k.
func (t *translator) find(k routeKey) (int, bool) {
	if t.seen == nil && len(t.out.Routes) >= manyRoutes {
		t.seen = make(map[routeKey]int, 2*len(t.out.Routes))
		for i, r := range t.out.Routes {
			t.seen[routeKey{r.Host, r.Path, r.PathType}] = i
		}
	}
	if t.seen != nil {
		i, ok := t.seen[k]
		return i, ok
	}
	for i := range t.out.Routes {
		if r := &t.out.Routes[i]; r.Host == k.host && r.Path == k.path && r.PathType == k.pathType {
			return i, true
		}
	}
	return 0, false
}

// backend resolves an Ingress backend to an upstream. A Service that does not exist is not an error: the
// path answers 503 until the Service appears (as with ingress-nginx), and the translation carries a warning.
// A port the existing Service does not have is an error.
func (t *translator) backend(field fieldRef, b *networkingv1.IngressBackend) (Upstream, bool) {
	up, err := ingressUpstream(t.ing, b, t.opts.ServiceUpstream)
	if err != nil {
		if be := (*BackendError)(nil); errors.As(err, &be) && be.Field != "" {
			t.fail("%s.%s: %s", field, be.Field, be.Reason)
		} else {
			t.fail("%s: %w", field, err)
		}
		return Upstream{}, false
	}
	key, port := up.Service, up.Port
	svc, found := t.svc.Service(key)
	t.recordService(key, svc, found)
	switch {
	case !found:
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("%s: service %s does not exist; requests get 503 until it does", field, key))
	case svc.Spec.Type == corev1.ServiceTypeExternalName && t.opts.DisableExternalName:
		t.fail("%s: service %s is of type ExternalName, which --disable-svc-external-name refuses", field, key)
		return Upstream{}, false
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		// ExternalName Services may list no ports; the Ingress's port is the one to connect to.
	case !hasServicePort(svc, port):
		t.fail("%s: service %s has no TCP port %s (its ports: %s)", field, key, describePort(port), DescribePorts(svc.Spec.Ports))
		return Upstream{}, false
	}
	t.out.Upstreams = append(t.out.Upstreams, up)
	return up, true
}

func (t *translator) recordService(key types.NamespacedName, svc *corev1.Service, found bool) {
	for _, s := range t.out.Services {
		if s.Key == key {
			return
		}
	}
	v := ServiceVersion{Key: key}
	if found {
		v.ResourceVersion = svc.ResourceVersion
	}
	t.out.Services = append(t.out.Services, v)
}

// ServicePort finds the TCP port of svc that an Ingress backend's port (number or name) refers to. A
// Service may list one number for several protocols (443 TCP and 443 UDP for HTTP/3, 53 for DNS); only the
// TCP one can carry HTTP or TLS.
func ServicePort(svc *corev1.Service, port intstr.IntOrString) (corev1.ServicePort, bool) {
	for _, p := range svc.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if port.Type == intstr.String && p.Name == port.StrVal || port.Type == intstr.Int && p.Port == port.IntVal {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

// FirstTCPPort returns the number of svc's first TCP port (the port a Service given without one, such as
// --default-backend-service, is reached on).
func FirstTCPPort(svc *corev1.Service) (int32, bool) {
	for _, p := range svc.Spec.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			return p.Port, true
		}
	}
	return 0, false
}

func hasServicePort(svc *corev1.Service, port intstr.IntOrString) bool {
	_, ok := ServicePort(svc, port)
	return ok
}

func describePort(p intstr.IntOrString) string {
	if p.Type == intstr.String {
		return fmt.Sprintf("named %q", p.StrVal)
	}
	return fmt.Sprintf("%d", p.IntVal)
}

// DescribePorts lists ports for an error message: `80 ("http"), 53/UDP ("dns")`, or "none".
func DescribePorts(ports []corev1.ServicePort) string {
	if len(ports) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		desc := strconv.Itoa(int(p.Port))
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			desc += "/" + string(p.Protocol)
		}
		if p.Name != "" {
			desc += fmt.Sprintf(" (%q)", p.Name)
		}
		parts = append(parts, desc)
	}
	return strings.Join(parts, ", ")
}

// defaultBackend adds spec.defaultBackend as the "/" route of every host of the Ingress, or of the
// catch-all server when the Ingress has no rules, as ingress-nginx does.
func (t *translator) defaultBackend() {
	b := t.ing.Spec.DefaultBackend
	if b == nil {
		return
	}
	if t.opts.DisableCatchAll {
		t.fail("spec.defaultBackend: catch-all Ingresses are refused by --disable-catch-all")
		return
	}
	up, ok := t.backend(fieldRef{rule: -1}, b)
	if !ok {
		return
	}
	hosts := t.hosts
	if len(t.ing.Spec.Rules) == 0 {
		hosts = []Hostname{""}
	}
	for _, h := range hosts {
		if _, explicit := t.find(routeKey{h, "/", PathPrefix}); explicit {
			continue
		}
		r := Route{Host: h, Path: "/", PathType: PathPrefix, Upstream: up.Name, FromDefaultBackend: true}
		if t.out.Options.regexPath(r.Path) {
			r.Regex, _ = CompilePathRegex(r.Path) // "/" compiles
		}
		t.addRoute(fieldRef{rule: -1}, r)
	}
}

// tls records spec.tls. An entry without hosts applies to every host of the Ingress's rules; an entry
// without secretName uses the default certificate.
func (t *translator) tls() {
	for i := range t.ing.Spec.TLS {
		entry := &t.ing.Spec.TLS[i]
		var secret types.NamespacedName
		if entry.SecretName != "" {
			if err := validateObjectName(entry.SecretName); err != nil {
				t.fail("spec.tls[%d].secretName %q: %w", i, entry.SecretName, err)
				continue
			}
			secret = types.NamespacedName{Namespace: t.ing.Namespace, Name: entry.SecretName}
		}
		if len(entry.Hosts) == 0 {
			for _, h := range t.hosts {
				if h != "" {
					t.addTLS(TLSHost{Host: h, ServerTLS: ServerTLS{Secret: secret}})
				}
			}
			continue
		}
		for j, h := range entry.Hosts {
			if err := ValidateHost(h); err != nil {
				t.fail("spec.tls[%d].hosts[%d]: %w", i, j, err)
				continue
			}
			t.addTLS(TLSHost{Host: Hostname(h), ServerTLS: ServerTLS{Secret: secret}})
		}
	}
}

func (t *translator) addTLS(h TLSHost) {
	for _, prev := range t.out.TLS {
		if prev.Host == h.Host {
			if prev.Secret != h.Secret {
				t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("spec.tls: host %s is listed with secrets %q and %q; the first one is used",
					h.Host, prev.Secret.Name, h.Secret.Name))
			}
			return
		}
	}
	t.out.TLS = append(t.out.TLS, h)
}

// validateObjectName checks a Kubernetes object name (RFC 1123 subdomain).
// fieldRef names an Ingress field in messages. It is formatted only when a message is, so accepted
// Ingresses pay nothing for it.
type fieldRef struct {
	// rule and path index spec.rules[rule].http.paths[path]; rule -1 is spec.defaultBackend.
	rule, path int
	// inBackend appends ".backend" for a path.
	inBackend bool
}

func (f fieldRef) backend() fieldRef { f.inBackend = true; return f }

func (f fieldRef) String() string {
	if f.rule < 0 {
		return "spec.defaultBackend"
	}
	s := fmt.Sprintf("spec.rules[%d].http.paths[%d]", f.rule, f.path)
	if f.inBackend {
		s += ".backend"
	}
	return s
}

func validateObjectName(n string) error {
	if len(n) > 253 {
		return fmt.Errorf("longer than 253 bytes")
	}
	for _, label := range strings.Split(n, ".") {
		if err := validateLabel(label); err != nil {
			return err
		}
	}
	return nil
}

func hostForMessage(h Hostname) string {
	if h == "" {
		return "(any)"
	}
	return string(h)
}
