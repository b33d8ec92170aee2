package nginx

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ConflictKind says what two Ingresses disagree about.
type ConflictKind string

const (
	// ConflictPath: two Ingresses route the same host, path and path type.
	ConflictPath ConflictKind = "path"
	// ConflictTLS: two Ingresses name different Secrets for the same host (Host is the served host, also
	// when the entries are wildcards).
	ConflictTLS ConflictKind = "tls"
	// ConflictTLSNamespace: an Ingress lists a TLS host that only other namespaces route. A TLS entry
	// applies only to hosts its own namespace routes, so one tenant cannot put its certificate (and an
	// HTTPS redirect) in front of another tenant's host.
	ConflictTLSNamespace ConflictKind = "tls-namespace"
	// ConflictTLSHost: an Ingress lists a TLS host that Ingresses of several namespaces route, and another
	// namespace routes the host's oldest rule. Only that namespace's TLS entries set the host's certificate
	// (and the redirect of requests no path matches); the entry still redirects its own namespace's paths
	// when the host serves TLS. Winner is the Ingress with the oldest rule.
	ConflictTLSHost ConflictKind = "tls-host"
	// ConflictHostOwner: with HostsByNamespace, an Ingress routes a host that another namespace owns; its
	// rules for that host are left out. Winner is the owner's oldest Ingress on the host.
	ConflictHostOwner ConflictKind = "host-owner"
)

// Conflict records a part of an Ingress that lost to an older Ingress. The caller emits a Warning Event
// on Loser with Message.
type Conflict struct {
	Kind   ConflictKind
	Loser  types.NamespacedName
	Winner types.NamespacedName
	Host   Hostname
	// Path and PathType are empty for TLS conflicts.
	Path     string
	PathType PathType
}

// Message explains the conflict to the owner of the losing Ingress.
func (c Conflict) Message() string {
	if c.Kind == ConflictTLSNamespace {
		return fmt.Sprintf("TLS for host %s is ignored: only Ingresses in other namespaces route this host, and a TLS entry applies only to hosts its own namespace routes",
			hostForMessage(c.Host))
	}
	if c.Kind == ConflictHostOwner {
		return fmt.Sprintf("rules for host %s are not served: namespace %s owns the host (its Ingress %s is the oldest routing it) and hosts are owned by one namespace (--host-ownership=namespace)",
			hostForMessage(c.Host), c.Winner.Namespace, c.Winner)
	}
	if c.Kind == ConflictTLSHost {
		return fmt.Sprintf("TLS for host %s does not choose the host's certificate: namespaces share the host and Ingress %s, of another namespace, routes its oldest rule, so only that namespace's TLS entries do; this Ingress's paths are redirected to HTTPS only when the host serves TLS",
			hostForMessage(c.Host), c.Winner)
	}
	if c.Kind == ConflictTLS {
		return fmt.Sprintf("TLS for host %s is served with the secret of Ingress %s (an Ingress that routes the host comes first, then the oldest); this Ingress's TLS entry for the host is ignored",
			hostForMessage(c.Host), c.Winner)
	}
	return fmt.Sprintf("path %q (%s) on host %s is already served by Ingress %s, which is older; this Ingress's path is ignored",
		c.Path, c.PathType, hostForMessage(c.Host), c.Winner)
}

// Merge is MergeAll with shared hosts (ingress-nginx's behaviour), for callers that need only the model
// and the conflicts.
func Merge(translations []*IngressTranslation, defaultBackend *Upstream) (Model, []Conflict) {
	r := MergeAll(translations, MergeOptions{DefaultBackend: defaultBackend})
	return r.Model, r.Conflicts
}

// MergeOptions shape MergeAll.
type MergeOptions struct {
	// DefaultBackend (--default-backend-service) answers requests no route matches; nil means a built-in
	// 404.
	DefaultBackend *Upstream
	// Ownership is --host-ownership; empty means HostsShared.
	Ownership HostOwnership
}

// MergeResult is the model and what the caller reports about it.
type MergeResult struct {
	Model     Model
	Conflicts []Conflict
	// Takeovers are paths that take requests from another namespace's path on a shared host.
	Takeovers []Takeover
}

// MergeAll builds the model from the translations of all accepted Ingresses (rejected Ingresses are
// simply left out). When Ingresses claim the same host, path and path type, the oldest (OlderFirst) wins
// and every loser is reported as a Conflict. Routes added by spec.defaultBackend yield silently to
// explicit paths. With HostsByNamespace, rules for a host owned by another namespace are left out first.
// The result does not depend on the order of translations.
func MergeAll(translations []*IngressTranslation, opts MergeOptions) MergeResult {
	defaultBackend := opts.DefaultBackend
	ts := make([]*IngressTranslation, 0, len(translations))
	for _, t := range translations {
		if t != nil {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, olderFirst)
	var conflicts []Conflict
	if opts.Ownership == HostsByNamespace {
		ts, conflicts = ownedRoutes(ts)
	}

	type owner struct {
		t *IngressTranslation
		r *Route
	}
	winners := make(map[routeKey]owner, len(ts)*2)
	for _, implicit := range []bool{false, true} {
		for _, t := range ts {
			for i := range t.Routes {
				r := &t.Routes[i]
				if r.FromDefaultBackend != implicit {
					continue
				}
				k := routeKey{r.Host, r.Path, r.PathType}
				w, taken := winners[k]
				if !taken {
					winners[k] = owner{t, r}
					continue
				}
				if w.t == t || (implicit && !w.r.FromDefaultBackend) {
					continue
				}
				conflicts = append(conflicts, Conflict{Kind: ConflictPath, Loser: t.Ingress, Winner: w.t.Ingress, Host: r.Host, Path: r.Path, PathType: r.PathType})
			}
		}
	}

	type tlsOwner struct {
		t *IngressTranslation
		h TLSHost
	}
	tlsByHost := make(map[Hostname][]tlsOwner) // oldest Ingress first
	for _, t := range ts {
		for _, h := range t.TLS {
			tlsByHost[h.Host] = append(tlsByHost[h.Host], tlsOwner{t, h})
		}
	}

	servers := map[Hostname]*Server{"": {Host: ""}}
	routedBy := make(map[Hostname][]string) // the namespaces whose routes a host serves
	// oldest is, per host, the oldest Ingress with a route served there. Its namespace alone chooses the
	// host's certificate (hostTLSNamespace).
	oldest := make(map[Hostname]*IngressTranslation)
	used := make(map[UpstreamName]Upstream, len(winners))
	for k, w := range winners {
		s := servers[k.host]
		if s == nil {
			s = &Server{Host: k.host}
			servers[k.host] = s
		}
		if ns := w.t.Ingress.Namespace; !slices.Contains(routedBy[k.host], ns) {
			routedBy[k.host] = append(routedBy[k.host], ns)
		}
		if o := oldest[k.host]; o == nil || olderFirst(w.t, o) < 0 {
			oldest[k.host] = w.t
		}
		s.Locations = append(s.Locations, Location{Path: k.path, PathType: k.pathType, Upstream: w.r.Upstream, Ingress: w.t.Ingress, SSLRedirect: w.t.SSLRedirect, Access: w.t.Access})
		if _, ok := used[w.r.Upstream]; !ok {
			used[w.r.Upstream] = w.t.upstream(w.r.Upstream)
		}
	}

	// Takeovers happen only on hosts that several namespaces route: only their routes are gathered.
	byHost := make(map[Hostname][]takeoverRoute)
	for k, w := range winners {
		if len(routedBy[k.host]) > 1 {
			byHost[k.host] = append(byHost[k.host], takeoverRoute{t: w.t, path: k.path, pathType: k.pathType})
		}
	}

	// TLS per server, by one rule (documented in docs/migration.md, "Hosts shared by namespaces"):
	//   - An entry counts for a host when it names the host, or else the wildcard one label up, and its
	//     namespace routes the host: a namespace never puts its certificate in front of another's host.
	//   - The host's certificate, and the redirect of requests no path matches, come from entries of the
	//     namespace of the host's oldest rule; when one namespace routes the host, that is simply it.
	//     Among those an Ingress that routes the host comes first (ingress-nginx took TLS only from such
	//     Ingresses), then the oldest.
	//   - A path redirects to HTTPS only when the host serves TLS and its own namespace lists the host.
	reported := make(map[Conflict]bool)
	report := func(c Conflict) {
		if !reported[c] {
			reported[c] = true
			conflicts = append(conflicts, c)
		}
	}
	for host, s := range servers {
		if host == "" { // the catch-all server has no TLS of its own
			for i := range s.Locations {
				s.Locations[i].SSLRedirect = false
			}
			continue
		}
		namespaces := routedBy[host]
		owner := oldest[host]
		listed := make(map[string]bool, len(namespaces)) // routing namespaces whose entries cover the host
		for _, key := range tlsKeys(host) {
			cands := tlsByHost[key]
			var first *tlsOwner
			firstRoutes := false
			for i := range cands {
				c := &cands[i]
				ns := c.t.Ingress.Namespace
				if !slices.Contains(namespaces, ns) {
					if key == host { // a wildcard entry simply does not reach other namespaces' hosts
						report(Conflict{Kind: ConflictTLSNamespace, Loser: c.t.Ingress, Host: host})
					}
					continue
				}
				if listed[ns] {
					continue // an exact entry of this namespace already covers the host
				}
				if ns != owner.Ingress.Namespace {
					if key == host {
						report(Conflict{Kind: ConflictTLSHost, Loser: c.t.Ingress, Winner: owner.Ingress, Host: host})
					}
					continue
				}
				if r := c.t.routesHost(host); first == nil || (r && !firstRoutes) {
					first, firstRoutes = c, r
				}
			}
			for i := range cands {
				if ns := cands[i].t.Ingress.Namespace; slices.Contains(namespaces, ns) {
					listed[ns] = true
				}
			}
			if first == nil || s.TLS != nil {
				continue
			}
			for i := range cands {
				c := &cands[i]
				if c != first && c.t != first.t && c.h.Secret != first.h.Secret && c.t.Ingress.Namespace == owner.Ingress.Namespace {
					report(Conflict{Kind: ConflictTLS, Loser: c.t.Ingress, Winner: first.t.Ingress, Host: host})
				}
			}
			s.TLS = &ServerTLS{Secret: first.h.Secret, SSLRedirect: first.t.SSLRedirect}
		}
		for i := range s.Locations {
			l := &s.Locations[i]
			l.SSLRedirect = l.SSLRedirect && s.TLS != nil && listed[l.Ingress.Namespace]
		}
	}

	// Sort names, then copy the values once: sorting the structs themselves moves far more memory.
	hosts := make([]Hostname, 0, len(servers))
	for h := range servers {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	m := Model{Servers: make([]Server, 0, len(servers))}
	for _, h := range hosts {
		s := servers[h]
		slices.SortFunc(s.Locations, func(a, b Location) int {
			return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(string(a.PathType), string(b.PathType)))
		})
		m.Servers = append(m.Servers, *s)
	}

	if defaultBackend != nil {
		m.DefaultBackend = defaultBackend.Name
		used[defaultBackend.Name] = *defaultBackend
	}
	names := make([]UpstreamName, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	slices.Sort(names)
	m.Upstreams = make([]Upstream, 0, len(used))
	for _, n := range names {
		m.Upstreams = append(m.Upstreams, used[n])
	}

	slices.SortFunc(conflicts, func(a, b Conflict) int {
		return cmp.Or(
			strings.Compare(a.Loser.String(), b.Loser.String()),
			strings.Compare(string(a.Kind), string(b.Kind)),
			strings.Compare(string(a.Host), string(b.Host)),
			strings.Compare(a.Winner.String(), b.Winner.String()),
			strings.Compare(a.Path, b.Path),
			strings.Compare(string(a.PathType), string(b.PathType)),
		)
	})
	return MergeResult{Model: m, Conflicts: conflicts, Takeovers: takeovers(byHost)}
}

// routesHost reports whether the translation has a route on host.
func (t *IngressTranslation) routesHost(host Hostname) bool {
	for i := range t.Routes {
		if t.Routes[i].Host == host {
			return true
		}
	}
	return false
}

// upstream returns the translation's upstream named n. TranslateIngress sorts Upstreams; a translation
// built by hand may not be sorted, or lack the upstream.
func (t *IngressTranslation) upstream(n UpstreamName) Upstream {
	if i, ok := slices.BinarySearchFunc(t.Upstreams, n, func(u Upstream, n UpstreamName) int { return strings.Compare(string(u.Name), string(n)) }); ok {
		return t.Upstreams[i]
	}
	for _, u := range t.Upstreams {
		if u.Name == n {
			return u
		}
	}
	return Upstream{Name: n}
}

// olderFirst orders translations as OlderFirst orders their Ingresses.
func olderFirst(a, b *IngressTranslation) int {
	return OlderFirst(a.CreationTimestamp, a.Ingress, b.CreationTimestamp, b.Ingress)
}

// OlderFirst orders two Ingresses that claim the same thing (a host, a path, a TLS host): the older
// creationTimestamp first, then namespace, then name. The first one wins the claim. NGINX's merge and
// the passthrough table both use it, so a contested host goes to the same Ingress in both.
func OlderFirst(aCreated time.Time, a types.NamespacedName, bCreated time.Time, b types.NamespacedName) int {
	return cmp.Or(
		aCreated.Compare(bCreated),
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name),
	)
}

// tlsKeys returns the TLS hosts that can cover host, in order of preference: the host itself, then the
// wildcard one label up, as the Ingress API defines wildcards ("*.example.com" covers "a.example.com" but
// not "a.b.example.com" or "example.com"). A wildcard host is covered only by the same wildcard.
func tlsKeys(host Hostname) []Hostname {
	if host.IsWildcard() {
		return []Hostname{host}
	}
	_, parent, ok := strings.Cut(string(host), ".")
	if !ok {
		return []Hostname{host}
	}
	return []Hostname{host, Hostname("*." + parent)}
}
