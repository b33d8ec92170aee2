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
	// ConflictAliasRule: an Ingress has a host as an alias (server-alias, from-to-www-redirect) that
	// another Ingress's rules name; the alias is not served. Winner is the oldest such Ingress.
	ConflictAliasRule ConflictKind = "alias-rule"
	// ConflictAliasNamespace: Ingresses of several namespaces have a host as an alias and none names it
	// in its rules; only the namespace of the oldest (Winner) serves it.
	ConflictAliasNamespace ConflictKind = "alias-namespace"
	// ConflictClientCA: an Ingress verifies client certificates (auth-tls-secret) on a host whose
	// handshakes verify them with another CA or depth, chosen by an older Ingress (Winner); its rules for
	// the host are not served, since its routes would admit certificates of the other CA.
	ConflictClientCA ConflictKind = "client-ca"
	// ConflictClientCANamespace: an Ingress verifies client certificates on a host whose oldest Ingress
	// (Winner) is of another namespace; only that namespace's Ingresses make the host's handshakes ask
	// for certificates, so its rules for the host are not served.
	ConflictClientCANamespace ConflictKind = "client-ca-namespace"
	// ConflictCanary: a canary Ingress has a path for which an older canary (Winner) is the canary
	// already; a path has one canary.
	ConflictCanary ConflictKind = "canary"
	// ConflictCanaryNamespace: a canary Ingress has a path whose main Ingress (Winner) is of another
	// namespace; a canary splits only its own namespace's traffic.
	ConflictCanaryNamespace ConflictKind = "canary-namespace"
	// ConflictCanaryNoMain: a canary Ingress has a path that no main Ingress serves on the host; the
	// path is not served (a canary never serves a path by itself). Winner is empty.
	ConflictCanaryNoMain ConflictKind = "canary-no-main"
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
	switch c.Kind {
	case ConflictCanary:
		return fmt.Sprintf("canary path %q (%s) on host %s is not used: Ingress %s, which is older, is its canary already, and a path has one canary",
			c.Path, c.PathType, hostForMessage(c.Host), c.Winner)
	case ConflictCanaryNamespace:
		return fmt.Sprintf("canary path %q (%s) on host %s is not used: its main Ingress, %s, is of another namespace, and a canary splits only its own namespace's traffic",
			c.Path, c.PathType, hostForMessage(c.Host), c.Winner)
	case ConflictCanaryNoMain:
		return fmt.Sprintf("canary path %q (%s) on host %s is not served: no main (non-canary) Ingress serves it, and a canary only adds a backend to a main Ingress's path",
			c.Path, c.PathType, hostForMessage(c.Host))
	}
	if c.Kind == ConflictTLSNamespace {
		return fmt.Sprintf("TLS for host %s is ignored: only Ingresses in other namespaces route this host, and a TLS entry applies only to hosts its own namespace routes",
			hostForMessage(c.Host))
	}
	if c.Kind == ConflictAliasRule {
		return fmt.Sprintf("alias host %s (server-alias or from-to-www-redirect) is not served by this Ingress: Ingress %s names the host in its rules, and rules win over aliases",
			hostForMessage(c.Host), c.Winner)
	}
	if c.Kind == ConflictAliasNamespace {
		return fmt.Sprintf("alias host %s (server-alias or from-to-www-redirect) is not served by this Ingress: Ingress %s of namespace %s, which is older, has it as an alias, and an alias host is served for one namespace",
			hostForMessage(c.Host), c.Winner, c.Winner.Namespace)
	}
	if c.Kind == ConflictClientCA {
		return fmt.Sprintf("rules for host %s are not served: the host verifies client certificates with the CA of Ingress %s (auth-tls-secret and auth-tls-verify-depth), which is older, and a host's handshakes verify with one CA; use the same ca.crt and depth, or another host",
			hostForMessage(c.Host), c.Winner)
	}
	if c.Kind == ConflictClientCANamespace {
		return fmt.Sprintf("rules for host %s are not served: the host's oldest Ingress, %s, is of namespace %s, and only Ingresses of that namespace may make the host's TLS handshakes ask for client certificates (auth-tls-secret)",
			hostForMessage(c.Host), c.Winner, c.Winner.Namespace)
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
// The result does not depend on the order of translations. A Merger gives the same result and redoes
// only the hosts that changed since its previous merge.
func MergeAll(translations []*IngressTranslation, opts MergeOptions) MergeResult {
	return new(Merger).Merge(translations, opts)
}

// Merger merges translations into the model like MergeAll, and remembers enough of each merge to redo
// only the hosts a change touches the next time: at 10,000 Ingresses, a merge after one changed
// Ingress costs a few hosts' work plus a copy of the server list, not the whole merge again.
//
// Every host's server depends only on the translations that route the host and on those whose spec.tls
// names the host or the wildcard one label above it; the Merger indexes both, and marks a host dirty
// when one of them is added, removed or replaced. Those indexes are also all it keeps of the
// translations: no map of them by Ingress (at 10,000 Ingresses, 0.8 MB), so Apply is told the
// translation each change replaces, and Merge finds the merged translations in the indexes.
// Translations are compared by pointer: a
// TranslationCache returns the same pointer for an unchanged Ingress, and translations are never
// modified once merged. The models it returns share unchanged servers and their locations with each
// other and with the Merger, which keeps the latest model's server and upstream lists as its own state
// instead of a copy: a model's Servers and Upstreams, and the Upstreams those point to, must not be
// modified. A Merger is not safe for concurrent use.
type Merger struct {
	opts    MergeOptions
	started bool
	// routing lists, per host, the translations with a route on it, oldest first (olderFirst).
	routing map[Hostname][]*IngressTranslation
	// canaries lists, per host, the canary translations (canary: "true") with a route on it, oldest
	// first; they are not in routing, since they serve no route of their own.
	canaries map[Hostname][]*IngressTranslation
	// tlsFor lists, per TLS host of spec.tls (exact or wildcard), the translations naming it, oldest first.
	tlsFor map[Hostname][]*IngressTranslation
	// servers are the merged hosts, sorted by host ("" first): the Servers of the latest model.
	servers []Server
	// upstreamList is the latest model's Upstreams, sorted by name; upstreamUsers counts, at the same
	// index, the hosts whose locations use each (and the default backend). Counts in a slice beside the
	// list rather than in a map by name: 4 bytes an upstream instead of about 40 (at 10,000 Ingresses
	// of two upstreams each, 0.8 MB less). spareUsers is the other buffer that a change of the list
	// builds the counts in, so that the change allocates only the published list.
	upstreamList  []*Upstream
	upstreamUsers []int32
	spareUsers    []int32
	// profiles counts, per profile, the hosts whose locations use it; profileList is the latest
	// model's Profiles.
	profiles    map[ProfileSettings]int
	profileList []ProfileSettings
	// problems are the conflicts and takeovers of the hosts that have any; conflicts and takeovers are
	// all of them, sorted.
	problems  map[Hostname]hostProblems
	conflicts []Conflict
	takeovers []Takeover
}

// hostProblems are the conflicts and takeovers that arise on one host.
type hostProblems struct {
	conflicts []Conflict
	takeovers []Takeover
}

// hostMerge is the result of merging one host.
type hostMerge struct {
	server Server
	hostProblems
	// upstreams are the distinct upstreams the server's locations use, in the translations that name
	// them (IngressTranslation.upstreamRef).
	upstreams []*Upstream
}

// reset forgets every earlier merge: the next one starts from nothing, with opts.
func (m *Merger) reset(opts MergeOptions) {
	*m = Merger{
		opts:         opts,
		started:      true,
		routing:      map[Hostname][]*IngressTranslation{},
		canaries:     map[Hostname][]*IngressTranslation{},
		tlsFor:       map[Hostname][]*IngressTranslation{},
		profiles:     map[ProfileSettings]int{},
		problems:     map[Hostname]hostProblems{},
		upstreamList: []*Upstream{},
	}
	if db := opts.DefaultBackend; db != nil {
		own := *db // the caller's Upstream may change; the models' must not
		m.upstreamList, m.upstreamUsers = []*Upstream{&own}, []int32{1}
	}
}

// sameOptions reports whether a and b merge alike.
func sameOptions(a, b MergeOptions) bool {
	if a.Ownership != b.Ownership || (a.DefaultBackend == nil) != (b.DefaultBackend == nil) {
		return false
	}
	return a.DefaultBackend == nil || *a.DefaultBackend == *b.DefaultBackend
}

// Merge returns MergeAll(translations, opts), redoing only the hosts whose translations changed since
// the previous merge (everything when opts changed). Each Ingress appears at most once in translations;
// nil entries are skipped.
func (m *Merger) Merge(translations []*IngressTranslation, opts MergeOptions) MergeResult {
	next := make(map[types.NamespacedName]*IngressTranslation, len(translations))
	for _, t := range translations {
		if t != nil {
			next[t.Ingress] = t
		}
	}
	merged := m.merged()
	changes := map[types.NamespacedName]TranslationChange{}
	for k, old := range merged {
		if next[k] != old {
			changes[k] = TranslationChange{Old: old, New: next[k]}
		}
	}
	for k, t := range next {
		if merged[k] != t {
			changes[k] = TranslationChange{Old: merged[k], New: t}
		}
	}
	return m.Apply(changes, opts)
}

// merged returns the translations in the indexes, by Ingress: every merged translation that routes a
// host or names a TLS host (the others leave no trace in the model).
func (m *Merger) merged() map[types.NamespacedName]*IngressTranslation {
	out := map[types.NamespacedName]*IngressTranslation{}
	for _, index := range []map[Hostname][]*IngressTranslation{m.routing, m.canaries, m.tlsFor} {
		for _, list := range index {
			for _, t := range list {
				out[t.Ingress] = t
			}
		}
	}
	return out
}

// TranslationChange is a change of one Ingress's translation for Merger.Apply: Old is the one the
// previous merge was given (nil for none), New the one to merge now (nil when the Ingress left).
type TranslationChange struct {
	Old, New *IngressTranslation
}

// Apply is Merge for a caller that knows what changed since the previous merge: changes maps each
// Ingress whose translation is new, replaced or gone to the change; every other Ingress keeps the
// translation it had. Its cost grows with the hosts the changes touch, not with the number of
// Ingresses (except a copy of the server list). Apply may modify changes.
func (m *Merger) Apply(changes map[types.NamespacedName]TranslationChange, opts MergeOptions) MergeResult {
	if !m.started || !sameOptions(m.opts, opts) {
		kept := m.merged()
		m.reset(opts)
		for k, c := range changes {
			changes[k] = TranslationChange{New: c.New} // nothing is indexed any more
		}
		for k, t := range kept {
			if _, ok := changes[k]; !ok {
				changes[k] = TranslationChange{New: t}
			}
		}
	}
	dirty := map[Hostname]struct{}{"": {}}
	if len(m.servers) > 0 {
		delete(dirty, "") // the catch-all server exists from the first merge on
	}
	// TLS hosts whose entries changed: a translation replaced without a change to what its TLS entries
	// decide touches only the hosts it routes.
	var tlsChanged []Hostname
	for _, c := range changes {
		old, t := c.Old, c.New
		if old == t {
			continue
		}
		if old != nil {
			m.unindex(old, dirty)
		}
		if t != nil {
			m.index(t, dirty)
		}
		switch {
		case old != nil && t != nil && sameTLS(old, t):
		case old != nil && t != nil:
			tlsChanged = append(append(tlsChanged, tlsHostsOf(old)...), tlsHostsOf(t)...)
		case old != nil:
			tlsChanged = append(tlsChanged, tlsHostsOf(old)...)
		case t != nil:
			tlsChanged = append(tlsChanged, tlsHostsOf(t)...)
		}
	}
	// A TLS entry reaches the host it names and, as a wildcard "*.d", the routed hosts one label under d.
	// Those are found by one pass over the servers when a wildcard entry changed, rarely, instead of an
	// index of every routed host by its parent (at 10,000 Ingresses, 430 KB for hosts of one domain).
	// A host routed since the previous merge is not among the servers yet, but dirty already.
	var wildcardParents map[string]struct{}
	for _, h := range tlsChanged {
		dirty[h] = struct{}{}
		if h.IsWildcard() {
			if wildcardParents == nil {
				wildcardParents = map[string]struct{}{}
			}
			wildcardParents[string(h[len("*."):])] = struct{}{}
		}
	}
	if len(wildcardParents) > 0 {
		for i := range m.servers {
			h := m.servers[i].Host
			if h == "" || h.IsWildcard() {
				continue
			}
			if _, parent, ok := strings.Cut(string(h), "."); ok {
				if _, covered := wildcardParents[parent]; covered && len(m.routing[h]) > 0 {
					dirty[h] = struct{}{}
				}
			}
		}
	}

	// Each dirty host is merged again; the new server list is the old one with the dirty hosts replaced,
	// added or removed.
	dirtyHosts := make([]Hostname, 0, len(dirty))
	for h := range dirty {
		dirtyHosts = append(dirtyHosts, h)
	}
	slices.Sort(dirtyHosts)
	merged := make([]*Server, len(dirtyHosts)) // nil: the host is gone
	// fresh are the upstreams not in the list that came into use; unused counts the list's upstreams
	// whose users fell to none.
	var fresh map[UpstreamName]freshUpstream
	unused := 0
	added, removed := 0, 0
	problemsChanged, profilesChanged := false, false
	for i, h := range dirtyHosts {
		var old *Server
		if j, ok := slices.BinarySearchFunc(m.servers, h, func(s Server, h Hostname) int { return cmp.Compare(s.Host, h) }); ok {
			old = &m.servers[j]
		}
		var next *hostMerge
		if len(m.routing[h]) > 0 || h == "" {
			next = m.mergeHost(h)
		}
		_, hadProblems := m.problems[h]
		hasProblems := next != nil && (len(next.conflicts) > 0 || len(next.takeovers) > 0)
		var orphans []Conflict // canary paths of a host that no main Ingress routes
		if next == nil {
			orphans = m.orphanCanaries(h)
		}
		if hadProblems || hasProblems {
			problemsChanged = true
		}
		if old != nil {
			for _, name := range upstreamNamesOf(old) {
				if j, ok := m.upstreamIndex(name); ok {
					if m.upstreamUsers[j]--; m.upstreamUsers[j] == 0 {
						unused++
					}
				} else if f, ok := fresh[name]; ok {
					f.users--
					fresh[name] = f
				}
			}
		}
		if old != nil {
			for _, p := range profilesOf(old) {
				if m.profiles[p]--; m.profiles[p] == 0 {
					delete(m.profiles, p)
					profilesChanged = true
				}
			}
		}
		if next != nil {
			for _, p := range profilesOf(&next.server) {
				if m.profiles[p]++; m.profiles[p] == 1 {
					profilesChanged = true
				}
			}
		}
		if next != nil {
			for _, u := range next.upstreams {
				if j, ok := m.upstreamIndex(u.Name); ok {
					if m.upstreamUsers[j]++; m.upstreamUsers[j] == 1 {
						unused--
					}
					continue
				}
				if fresh == nil {
					fresh = map[UpstreamName]freshUpstream{}
				}
				f, ok := fresh[u.Name]
				if !ok {
					f.u = u
				}
				f.users++
				fresh[u.Name] = f
			}
			merged[i] = &next.server
		}
		switch {
		case next == nil && old != nil:
			removed++
		case next != nil && old == nil:
			added++
		}
		switch {
		case hasProblems:
			m.problems[h] = next.hostProblems
		case len(orphans) > 0:
			problemsChanged = true
			m.problems[h] = hostProblems{conflicts: orphans}
		default:
			delete(m.problems, h)
		}
	}
	servers := make([]Server, 0, len(m.servers)+added-removed)
	rest := m.servers
	for i, h := range dirtyHosts {
		for len(rest) > 0 && rest[0].Host < h {
			servers, rest = append(servers, rest[0]), rest[1:]
		}
		if len(rest) > 0 && rest[0].Host == h {
			rest = rest[1:]
		}
		if merged[i] != nil {
			servers = append(servers, *merged[i])
		}
	}
	m.servers = append(servers, rest...)

	if len(fresh) > 0 || unused > 0 {
		m.useUpstreams(fresh)
	}
	if profilesChanged {
		m.profileList = nil // as a merge from scratch without profiles
		for p := range m.profiles {
			m.profileList = append(m.profileList, p)
		}
		slices.SortFunc(m.profileList, func(a, b ProfileSettings) int { return strings.Compare(a.Name(), b.Name()) })
	}
	if problemsChanged {
		m.conflicts, m.takeovers = nil, nil
		for _, p := range m.problems {
			m.conflicts = append(m.conflicts, p.conflicts...)
			m.takeovers = append(m.takeovers, p.takeovers...)
		}
		sortConflicts(m.conflicts)
		slices.SortFunc(m.takeovers, func(a, b Takeover) int {
			return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
		})
	}

	model := Model{Servers: m.servers, Upstreams: m.upstreamList, Profiles: m.profileList}
	if db := m.opts.DefaultBackend; db != nil {
		model.DefaultBackend = db.Name
	}
	return MergeResult{Model: model, Conflicts: m.conflicts, Takeovers: m.takeovers}
}

// index adds t to the host and TLS indexes and marks the hosts it routes dirty.
func (m *Merger) index(t *IngressTranslation, dirty map[Hostname]struct{}) {
	if t.Canary != nil {
		for _, h := range routedHostsOf(t) {
			dirty[h] = struct{}{}
			m.aliasesOfHost(h, dirty)
			list := m.canaries[h]
			i, _ := slices.BinarySearchFunc(list, t, olderFirst)
			m.canaries[h] = slices.Insert(list, i, t)
		}
		return
	}
	for _, h := range routedHostsOf(t) {
		dirty[h] = struct{}{}
		list := m.routing[h]
		i, _ := slices.BinarySearchFunc(list, t, olderFirst)
		m.routing[h] = slices.Insert(list, i, t)
	}
	for _, h := range tlsHostsOf(t) {
		list := m.tlsFor[h]
		i, _ := slices.BinarySearchFunc(list, t, olderFirst)
		m.tlsFor[h] = slices.Insert(list, i, t)
	}
}

// unindex removes t from the host and TLS indexes and marks the hosts it routed dirty.
func (m *Merger) unindex(t *IngressTranslation, dirty map[Hostname]struct{}) {
	drop := func(index map[Hostname][]*IngressTranslation, h Hostname) {
		list := slices.DeleteFunc(index[h], func(x *IngressTranslation) bool { return x == t })
		if len(list) == 0 {
			delete(index, h)
		} else {
			index[h] = list
		}
	}
	if t.Canary != nil {
		for _, h := range routedHostsOf(t) {
			dirty[h] = struct{}{}
			m.aliasesOfHost(h, dirty)
			drop(m.canaries, h)
		}
		return
	}
	for _, h := range routedHostsOf(t) {
		dirty[h] = struct{}{}
		drop(m.routing, h)
	}
	for _, h := range tlsHostsOf(t) {
		drop(m.tlsFor, h)
	}
}

// upstreamNamesOf returns the distinct upstreams a server uses: its locations' (a redirect has none),
// the default-backend annotations of their Ingresses, and the server's fallback. It must name what
// mergeHost put into the host's upstreams.
func upstreamNamesOf(s *Server) []UpstreamName {
	var names []UpstreamName
	add := func(n UpstreamName) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for i := range s.Locations {
		l := &s.Locations[i]
		add(l.Upstream)
		if l.Canary != nil {
			add(l.Canary.Upstream)
		}
		if l.Options != nil {
			add(l.Options.DefaultBackend)
		}
	}
	add(s.DefaultBackend)
	return names
}

// routedHostsOf returns the distinct hosts t routes, "" for rules without a host.
func routedHostsOf(t *IngressTranslation) []Hostname {
	var hs []Hostname
	for i := range t.Routes {
		if h := t.Routes[i].Host; !slices.Contains(hs, h) {
			hs = append(hs, h)
		}
	}
	return hs
}

// tlsHostsOf returns the distinct hosts of t's TLS entries.
func tlsHostsOf(t *IngressTranslation) []Hostname {
	var hs []Hostname
	for _, e := range t.TLS {
		if !slices.Contains(hs, e.Host) {
			hs = append(hs, e.Host)
		}
	}
	return hs
}

// sameTLS reports whether two versions of an Ingress's translation decide the same for every host
// their TLS entries name: same entries, same redirect and the same age (a new object of the same name
// is younger).
func sameTLS(a, b *IngressTranslation) bool {
	return slices.Equal(a.TLS, b.TLS) && a.SSLRedirect == b.SSLRedirect && a.CreationTimestamp.Equal(b.CreationTimestamp)
}

// wildcardAbove returns the wildcard one label above host ("*.example.com" for "a.example.com").
func wildcardAbove(host Hostname) (Hostname, bool) {
	_, parent, ok := strings.Cut(string(host), ".")
	if !ok {
		return "", false
	}
	return Hostname("*." + parent), true
}

// freshUpstream is an upstream that came into use during a merge, with its users.
type freshUpstream struct {
	u     *Upstream
	users int32
}

// upstreamIndex finds the upstream named n in the list.
func (m *Merger) upstreamIndex(n UpstreamName) (int, bool) {
	return slices.BinarySearchFunc(m.upstreamList, n, func(u *Upstream, n UpstreamName) int { return strings.Compare(string(u.Name), string(n)) })
}

// useUpstreams makes the list anew after a merge: without the upstreams no host uses any more, with
// those of fresh that are still used (an upstream can come into use on one host and drop out on
// another within one merge, or the other way round: what counts is whether it is used now). A fresh
// upstream is the translation's own (translations never change once merged), not a copy; the upstreams
// kept are the pointers of the previous list. The list itself is made anew (published models must not
// change) in one pass, at its final size: at 10,000 Ingresses, 160 KB of pointers for a change that
// adds or removes an upstream.
func (m *Merger) useUpstreams(fresh map[UpstreamName]freshUpstream) {
	added := make([]freshUpstream, 0, len(fresh))
	for _, f := range fresh {
		if f.users > 0 {
			added = append(added, f)
		}
	}
	slices.SortFunc(added, func(a, b freshUpstream) int { return strings.Compare(string(a.u.Name), string(b.u.Name)) })
	size := len(added)
	for _, n := range m.upstreamUsers {
		if n > 0 {
			size++
		}
	}
	list := make([]*Upstream, 0, size)
	users := slices.Grow(m.spareUsers[:0], size)
	a, aUsers := m.upstreamList, m.upstreamUsers
	for len(a) > 0 || len(added) > 0 {
		switch {
		case len(a) > 0 && aUsers[0] <= 0:
			a, aUsers = a[1:], aUsers[1:]
		case len(a) == 0 || len(added) > 0 && added[0].u.Name < a[0].Name:
			list, users, added = append(list, added[0].u), append(users, added[0].users), added[1:]
		default:
			list, users, a, aUsers = append(list, a[0]), append(users, aUsers[0]), a[1:], aUsers[1:]
		}
	}
	m.upstreamList, m.upstreamUsers, m.spareUsers = list, users, m.upstreamUsers
}

// sortConflicts puts conflicts in the order the caller reports them: by loser, then kind, host, winner
// and path.
func sortConflicts(cs []Conflict) {
	slices.SortFunc(cs, func(a, b Conflict) int {
		return cmp.Or(
			strings.Compare(a.Loser.String(), b.Loser.String()),
			strings.Compare(string(a.Kind), string(b.Kind)),
			strings.Compare(string(a.Host), string(b.Host)),
			strings.Compare(a.Winner.String(), b.Winner.String()),
			strings.Compare(a.Path, b.Path),
			cmp.Compare(a.PathType, b.PathType),
		)
	})
}

// mergeHost builds one host's server from the translations that route it and the TLS entries that can
// cover it, with the conflicts and takeovers that arise there.
func (m *Merger) mergeHost(host Hostname) *hostMerge {
	out := &hostMerge{server: Server{Host: host}}
	cands := m.hostCandidates(host, out) // oldest first
	// With HostsByNamespace, the namespace of the oldest Ingress routing the host owns it; other
	// namespaces' rules for it are left out, each Ingress told once.
	if m.opts.Ownership == HostsByNamespace && host != "" && len(cands) > 0 {
		owner := cands[0]
		own := make([]*IngressTranslation, 0, len(cands))
		for _, t := range cands {
			if t.Ingress.Namespace == owner.Ingress.Namespace {
				own = append(own, t)
			} else {
				out.conflicts = append(out.conflicts, Conflict{Kind: ConflictHostOwner, Loser: t.Ingress, Winner: owner.Ingress, Host: host})
			}
		}
		cands = own
	}
	cands = hostClientCA(out, host, cands)

	// The oldest Ingress claiming a path and path type wins it; spec.defaultBackend's "/" yields to any
	// explicit path without a conflict.
	type winner struct {
		t *IngressTranslation
		r *Route
	}
	type pathKey struct {
		path     string
		pathType PathType
	}
	var winners []winner
	won := make(map[pathKey]int)
	for _, implicit := range []bool{false, true} {
		for _, t := range cands {
			for i := range t.Routes {
				r := &t.Routes[i]
				if r.Host != host || r.FromDefaultBackend != implicit {
					continue
				}
				k := pathKey{r.Path, r.PathType}
				wi, taken := won[k]
				if !taken {
					won[k] = len(winners)
					winners = append(winners, winner{t, r})
					continue
				}
				w := winners[wi]
				if w.t == t || (implicit && !w.r.FromDefaultBackend) {
					continue
				}
				out.conflicts = append(out.conflicts, Conflict{Kind: ConflictPath, Loser: t.Ingress, Winner: w.t.Ingress, Host: host, Path: r.Path, PathType: r.PathType})
			}
		}
	}

	var namespaces []string // the namespaces whose routes the host serves
	// oldest is the oldest Ingress with a route served here. Its namespace alone chooses the host's
	// certificate.
	var oldest *IngressTranslation
	s := &out.server
	if len(winners) > 0 {
		s.Locations = make([]Location, 0, len(winners))
	}
	for _, w := range winners {
		if ns := w.t.Ingress.Namespace; !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
		if oldest == nil || olderFirst(w.t, oldest) < 0 {
			oldest = w.t
		}
		s.Locations = append(s.Locations, Location{Path: w.r.Path, PathType: w.r.PathType, Upstream: w.r.Upstream, Ingress: w.t.Ingress, SSLRedirect: w.t.SSLRedirect, Access: w.t.Access, Options: w.t.Options,
			Regex: w.r.Regex, RedirectHost: w.r.RedirectHost, Profile: w.t.routeProfile(w.r)})
		if w.r.Upstream != "" {
			up := w.t.upstream(w.r.Upstream)
			s.Locations[len(s.Locations)-1].Service = up.Service.Name
			if w.t.Profile != nil && w.t.Profile.CustomHTTPErrors != "" {
				s.Locations[len(s.Locations)-1].Backend = &up
			}
		}
		if w.r.Upstream != "" && !slices.ContainsFunc(out.upstreams, func(u *Upstream) bool { return u.Name == w.r.Upstream }) {
			out.upstreams = append(out.upstreams, w.t.upstreamRef(w.r.Upstream))
		}
	}
	slices.SortFunc(s.Locations, func(a, b Location) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.PathType, b.PathType))
	})
	m.hostCanaries(out)
	m.aliasCanaries(out)
	m.hostDefaultBackend(out, winnerTranslations(winners, func(w winner) *IngressTranslation { return w.t }), oldest)
	if host == "" { // the catch-all server has no TLS of its own
		for i := range s.Locations {
			s.Locations[i].SSLRedirect = false
		}
		return out
	}
	if len(namespaces) > 1 {
		rs := make([]takeoverRoute, len(winners))
		for i, w := range winners {
			rs[i] = takeoverRoute{t: w.t, path: w.r.Path, pathType: w.r.PathType}
		}
		out.takeovers = hostTakeovers(host, rs)
	}
	m.hostTLS(out, namespaces, oldest)
	return out
}

// hostCanaries gives each location of a host's server (out) its canary: the route with the same path and
// path type of the oldest canary Ingress of the location's namespace that has one. Later canaries of the
// path, canaries of other namespaces and canary paths without a location are reported.
func (m *Merger) hostCanaries(out *hostMerge) {
	host := out.server.Host
	s := &out.server
	for _, c := range m.canaries[host] {
		for i := range c.Routes {
			r := &c.Routes[i]
			if r.Host != host || r.Upstream == "" {
				continue
			}
			li, found := slices.BinarySearchFunc(s.Locations, r, func(l Location, r *Route) int {
				return cmp.Or(strings.Compare(l.Path, r.Path), cmp.Compare(l.PathType, r.PathType))
			})
			var l *Location
			if found {
				l = &s.Locations[li]
			}
			switch {
			case l == nil || l.Upstream == "" || l.RedirectHost != "":
				if !r.FromDefaultBackend {
					out.conflicts = append(out.conflicts, Conflict{Kind: ConflictCanaryNoMain, Loser: c.Ingress, Host: host, Path: r.Path, PathType: r.PathType})
				}
			case l.Ingress.Namespace != c.Ingress.Namespace:
				out.conflicts = append(out.conflicts, Conflict{Kind: ConflictCanaryNamespace, Loser: c.Ingress, Winner: l.Ingress, Host: host, Path: r.Path, PathType: r.PathType})
			case l.Canary != nil:
				if l.Canary.Ingress != c.Ingress {
					out.conflicts = append(out.conflicts, Conflict{Kind: ConflictCanary, Loser: c.Ingress, Winner: l.Canary.Ingress, Host: host, Path: r.Path, PathType: r.PathType})
				}
			default:
				l.Canary = &LocationCanary{Upstream: r.Upstream, Ingress: c.Ingress, Rule: c.Canary, Balance: canaryBalance(c.Canary, l.Options)}
				if !slices.ContainsFunc(out.upstreams, func(u *Upstream) bool { return u.Name == r.Upstream }) {
					out.upstreams = append(out.upstreams, c.upstreamRef(r.Upstream))
				}
			}
		}
	}
}

// aliasCanaries gives the locations of a host's server (out) that copy a main Ingress's routes as a
// server-alias (ann_hosts.go copies the routes of its first host) the canary of that host's route: an
// alias was another name of the same server in ingress-nginx. Conflicts are reported on that host.
func (m *Merger) aliasCanaries(out *hostMerge) {
	host := out.server.Host
	s := &out.server
	// A location's translation routes the host, as a rule or an alias. Only those whose first host is
	// another one with canaries can give it a canary: found in one pass over the host's translations
	// (usually none), not by a search of that list for every location, which made a merge of a host
	// that thousands of Ingresses share quadratic.
	var copying map[types.NamespacedName]*IngressTranslation
	for _, t := range m.routing[host] {
		if t.Canary != nil || len(t.Routes) == 0 || t.Routes[0].Alias {
			continue
		}
		if src := t.Routes[0].Host; src != host && len(m.canaries[src]) > 0 {
			if copying == nil {
				copying = map[types.NamespacedName]*IngressTranslation{}
			}
			copying[t.Ingress] = t
		}
	}
	if copying == nil {
		return // the common case: no canary where an alias copies from
	}
	var aliased map[*IngressTranslation]bool // whether a main Ingress routes host as an alias
	for i := range s.Locations {
		l := &s.Locations[i]
		if l.Canary != nil || l.Upstream == "" || l.RedirectHost != "" {
			continue
		}
		t := copying[l.Ingress]
		if t == nil {
			continue
		}
		src := t.Routes[0].Host
		alias, ok := aliased[t]
		if !ok {
			if aliased == nil {
				aliased = map[*IngressTranslation]bool{}
			}
			alias = t.aliases(host) // an alias host has copies of all of src's routes, or none
			aliased[t] = alias
		}
		if !alias {
			continue
		}
		for _, c := range m.canaries[src] {
			if c.Ingress.Namespace != l.Ingress.Namespace {
				continue
			}
			ri := slices.IndexFunc(c.Routes, func(r Route) bool {
				return r.Host == src && r.Upstream != "" && r.Path == l.Path && r.PathType == l.PathType
			})
			if ri < 0 {
				continue
			}
			up := c.Routes[ri].Upstream
			l.Canary = &LocationCanary{Upstream: up, Ingress: c.Ingress, Rule: c.Canary}
			if !slices.ContainsFunc(out.upstreams, func(u *Upstream) bool { return u.Name == up }) {
				out.upstreams = append(out.upstreams, c.upstreamRef(up))
			}
			break
		}
	}
}

// aliasesOfHost marks dirty the server-alias hosts of the main Ingresses whose first host is h: their
// locations take the canaries of h (aliasCanaries).
func (m *Merger) aliasesOfHost(h Hostname, dirty map[Hostname]struct{}) {
	for _, t := range m.routing[h] {
		if len(t.Routes) == 0 || t.Routes[0].Host != h {
			continue
		}
		for i := range t.Routes {
			if r := &t.Routes[i]; r.Alias && r.RedirectHost == "" {
				dirty[r.Host] = struct{}{}
			}
		}
	}
}

// orphanCanaries reports the canary paths of a host that no main Ingress routes: none of them is served.
func (m *Merger) orphanCanaries(host Hostname) []Conflict {
	var out []Conflict
	for _, c := range m.canaries[host] {
		for i := range c.Routes {
			if r := &c.Routes[i]; r.Host == host && r.Upstream != "" && !r.FromDefaultBackend {
				out = append(out, Conflict{Kind: ConflictCanaryNoMain, Loser: c.Ingress, Host: host, Path: r.Path, PathType: r.PathType})
			}
		}
	}
	return out
}

// hostClientCA leaves out of a host's candidates (oldest first) those that verify client certificates
// (auth-tls-secret) from another namespace than the oldest candidate's (a namespace never makes another
// namespace's host ask its clients for certificates), and those that verify with another CA or depth
// than the oldest that verifies any: the TLS handshake of a host verifies with one CA, and their routes
// would take its verdict for their own.
func hostClientCA(out *hostMerge, host Hostname, cands []*IngressTranslation) []*IngressTranslation {
	caOf := func(t *IngressTranslation) string {
		if t.Options == nil {
			return ""
		}
		return t.Options.ClientCAID
	}
	if !slices.ContainsFunc(cands, func(t *IngressTranslation) bool { return caOf(t) != "" }) {
		return cands
	}
	owner := cands[0]
	var chosen *IngressTranslation // the oldest of the owner's namespace that verifies
	kept := make([]*IngressTranslation, 0, len(cands))
	for _, t := range cands {
		id := caOf(t)
		switch {
		case id == "":
		case t.Ingress.Namespace != owner.Ingress.Namespace:
			out.conflicts = append(out.conflicts, Conflict{Kind: ConflictClientCANamespace, Loser: t.Ingress, Winner: owner.Ingress, Host: host})
			continue
		case chosen == nil:
			chosen = t
		case id != caOf(chosen):
			out.conflicts = append(out.conflicts, Conflict{Kind: ConflictClientCA, Loser: t.Ingress, Winner: chosen.Ingress, Host: host})
			continue
		}
		kept = append(kept, t)
	}
	return kept
}

// winnerTranslations lists the distinct translations of a host's winning routes.
func winnerTranslations[W any](winners []W, of func(W) *IngressTranslation) []*IngressTranslation {
	var ts []*IngressTranslation
	for _, w := range winners {
		if t := of(w); !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// hostDefaultBackend adds the default-backend annotations of the translations serving a host: each one's
// upstream to the host's upstreams (its paths fall back to it), and, as the server's fallback, the one of
// the oldest translation of the namespace of the host's oldest rule (oldest), so that a namespace never
// chooses the fallback of a host another namespace came to first.
func (m *Merger) hostDefaultBackend(out *hostMerge, ts []*IngressTranslation, oldest *IngressTranslation) {
	var chosen *IngressTranslation
	for _, t := range ts {
		if t.Options == nil || t.Options.DefaultBackend == "" {
			continue
		}
		name := t.Options.DefaultBackend
		if !slices.ContainsFunc(out.upstreams, func(u *Upstream) bool { return u.Name == name }) {
			out.upstreams = append(out.upstreams, t.upstreamRef(name))
		}
		if t.Ingress.Namespace == oldest.Ingress.Namespace && (chosen == nil || olderFirst(t, chosen) < 0) {
			chosen = t
		}
	}
	if chosen != nil && out.server.Host != "" {
		out.server.DefaultBackend = chosen.Options.DefaultBackend
		if chosen.Options.ClientCertMode != "" {
			out.server.DefaultBackendOptions = chosen.Options
		}
	}
}

// hostCandidates returns the translations whose routes a host's server may serve, oldest first: those
// whose rules name the host; when there are none, those that have the host as an alias (server-alias,
// from-to-www-redirect), of the oldest one's namespace only. The aliases left out are reported in out.
func (m *Merger) hostCandidates(host Hostname, out *hostMerge) []*IngressTranslation {
	all := m.routing[host]
	var rules, aliases []*IngressTranslation
	for _, t := range all {
		if t.aliases(host) {
			aliases = append(aliases, t)
		} else {
			rules = append(rules, t)
		}
	}
	if len(aliases) == 0 {
		return all
	}
	if len(rules) > 0 {
		for _, a := range aliases {
			out.conflicts = append(out.conflicts, Conflict{Kind: ConflictAliasRule, Loser: a.Ingress, Winner: rules[0].Ingress, Host: host})
		}
		return rules
	}
	owner := aliases[0]
	kept := aliases[:0:0]
	for _, a := range aliases {
		if a.Ingress.Namespace == owner.Ingress.Namespace {
			kept = append(kept, a)
		} else {
			out.conflicts = append(out.conflicts, Conflict{Kind: ConflictAliasNamespace, Loser: a.Ingress, Winner: owner.Ingress, Host: host})
		}
	}
	return kept
}

// aliases reports whether t's routes on host come from an alias annotation; a translation has either
// alias routes or rule routes on a host, never both.
func (t *IngressTranslation) aliases(host Hostname) bool {
	for i := range t.Routes {
		if r := &t.Routes[i]; r.Host == host {
			return r.Alias
		}
	}
	return false
}

// hostTLS sets the TLS of a host's server (out.server, with its locations) from the TLS entries that can
// cover the host, by one rule (documented in docs/migration.md, "Hosts shared by namespaces"):
//   - An entry counts for a host when it names the host, or else the wildcard one label up, and its
//     namespace routes the host: a namespace never puts its certificate in front of another's host.
//   - The host's certificate, and the redirect of requests no path matches, come from entries of the
//     namespace of the host's oldest rule (oldest); when one namespace routes the host, that is simply
//     it. Among those an Ingress that routes the host comes first (ingress-nginx took TLS only from such
//     Ingresses), then the oldest.
//   - A path redirects to HTTPS only when the host serves TLS and its own namespace lists the host.
func (m *Merger) hostTLS(out *hostMerge, namespaces []string, oldest *IngressTranslation) {
	s := &out.server
	host := s.Host
	report := func(c Conflict) {
		if !slices.Contains(out.conflicts, c) {
			out.conflicts = append(out.conflicts, c)
		}
	}
	type tlsOwner struct {
		t *IngressTranslation
		h *TLSHost // in t.TLS
	}
	listed := make(map[string]bool, len(namespaces)) // routing namespaces whose entries cover the host
	for _, key := range tlsKeys(host) {
		var cands []tlsOwner // oldest Ingress first
		for _, t := range m.tlsFor[key] {
			for i := range t.TLS {
				if h := &t.TLS[i]; h.Host == key {
					cands = append(cands, tlsOwner{t, h})
				}
			}
		}
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
			if ns != oldest.Ingress.Namespace {
				if key == host {
					report(Conflict{Kind: ConflictTLSHost, Loser: c.t.Ingress, Winner: oldest.Ingress, Host: host})
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
			if c != first && c.t != first.t && c.h.Secret != first.h.Secret && c.t.Ingress.Namespace == oldest.Ingress.Namespace {
				report(Conflict{Kind: ConflictTLS, Loser: c.t.Ingress, Winner: first.t.Ingress, Host: host})
			}
		}
		if first.h.SSLRedirect == first.t.SSLRedirect {
			s.TLS = &first.h.ServerTLS // what TranslateIngress makes: the translation's own
		} else {
			s.TLS = &ServerTLS{Secret: first.h.Secret, SSLRedirect: first.t.SSLRedirect}
		}
	}
	for i := range s.Locations {
		l := &s.Locations[i]
		l.SSLRedirect = l.SSLRedirect && s.TLS != nil && listed[l.Ingress.Namespace]
	}
}

// routesHost reports whether the translation's rules route host (alias routes do not count).
func (t *IngressTranslation) routesHost(host Hostname) bool {
	for i := range t.Routes {
		if t.Routes[i].Host == host && !t.Routes[i].Alias {
			return true
		}
	}
	return false
}

// upstream returns the translation's upstream named n. TranslateIngress sorts Upstreams; a translation
// built by hand may not be sorted, or lack the upstream.
func (t *IngressTranslation) upstream(n UpstreamName) Upstream {
	return *t.upstreamRef(n)
}

// upstreamRef is upstream as a pointer into t.Upstreams, which the models share (translations never
// change once merged); an upstream that t lacks is allocated.
func (t *IngressTranslation) upstreamRef(n UpstreamName) *Upstream {
	if i, ok := slices.BinarySearchFunc(t.Upstreams, n, func(u Upstream, n UpstreamName) int { return strings.Compare(string(u.Name), string(n)) }); ok {
		return &t.Upstreams[i]
	}
	for i := range t.Upstreams {
		if t.Upstreams[i].Name == n {
			return &t.Upstreams[i]
		}
	}
	return &Upstream{Name: n}
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
