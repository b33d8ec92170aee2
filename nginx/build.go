package nginx

import (
	"errors"
	"slices"
	"strings"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ModelBuilder builds the model from the accepted Ingresses: each is translated (with a cache entry of
// the kind a TranslationCache holds, kept in the Ingress's own entry, so unchanged Ingresses cost a
// lookup), the translations are merged (by a Merger, so
// only the hosts of changed Ingresses are merged again), and the Ingresses rejected, warned about or
// losing a conflict are listed for the caller to report. Build looks at every Ingress; Update, for a
// caller that knows which Ingresses and Services changed, looks only at those, so that a change
// translates and merges only what it touches. Builds run one at a time; the builder is not safe for
// concurrent use, except DependsOn.
//
// An Ingress whose update is rejected keeps being served as its last good translation (Rejection.Stale),
// so that a typo never hands its host or paths to another Ingress; only a valid update, its deletion or
// its leaving our class replaces it.
type ModelBuilder struct {
	merger Merger
	// opts are the options of the latest translation, shared by the cache entries made with them.
	opts *TranslateOptions
	// entries are the Ingresses of the latest build, by key, each with its translation cache entry:
	// one map of the Ingresses rather than two (at 10,000 Ingresses, a map of cache entries took 1 MB).
	entries map[types.NamespacedName]*builtIngress
	// users indexes, per Service, the Ingresses whose translation depends on it. mu guards it alone:
	// DependsOn may be asked while a build runs.
	mu    sync.RWMutex
	users map[types.NamespacedName]userSet
	// objectUsers indexes the same way the other objects that annotations read (Secrets); mu guards it.
	objectUsers map[ObjectRef]userSet
	// backendTLS counts, per file stem, the served translations whose profile names those files.
	backendTLS map[string]backendTLSCount
	// problems are the Ingresses with a rejection or warnings.
	problems map[types.NamespacedName]struct{}
	served   int
	stale    int
	// hits and misses count the translations answered by an entry and made again (TranslationCache.Stats).
	hits, misses uint64
}

// builtIngress is what the latest build made of one Ingress, in 40 bytes: what most Ingresses lack (a
// rejection, objects other than Services, a translation that is not the one served) is behind one
// pointer, and the Services it depends on are derived again when needed (serviceKeys) rather than
// kept.
type builtIngress struct {
	ing *networkingv1.Ingress
	// served is the translation in the model: the current one, or the last good one when the current
	// version is rejected; nil when the Ingress is not served. It is also the last good translation
	// that a rejected update keeps serving: a version that is not served is no good one to keep.
	served *IngressTranslation
	// previousGood is the good translation that served replaced, kept for a quarantine: when the data
	// plane refuses what served wrote, previousGood is what it last took.
	previousGood *IngressTranslation
	// opts are the options ing was translated with (the cache entry's, see translated).
	opts *TranslateOptions
	// rare is nil unless the Ingress is rejected, depends on objects other than Services, or has a
	// translation that is not served.
	rare *builtRare
}

// builtRare is the part of a builtIngress that most Ingresses lack.
type builtRare struct {
	// err rejects the current version.
	err error
	// objects are the other objects it depended on (ObjectsOf and what the served translation read),
	// sorted and unique.
	objects []ObjectRef
	// translated and rejected are the cache entry's translation and rejection of ing when it is not
	// the translation served (a rejection, or a version the data plane refused).
	translated *IngressTranslation
	rejected   *cachedRejection
}

// translated returns the translation cache entry of the entry's Ingress version: usually its served
// translation, which the entry does not keep twice.
func (e *builtIngress) translated() cacheEntry {
	if r := e.rare; r != nil && (r.translated != nil || r.rejected != nil) {
		return cacheEntry{opts: e.opts, t: r.translated, rejected: r.rejected}
	}
	if e.opts == nil {
		return cacheEntry{}
	}
	return cacheEntry{opts: e.opts, t: e.served}
}

// serviceKeys returns the Services the entry depends on, sorted and unique: those its Ingress names and
// those its served translation looked at. The informer's objects are never modified, so this gives the
// same keys every time.
func (e *builtIngress) serviceKeys() []types.NamespacedName {
	return serviceKeys(ServicesOf(e.ing), e.served)
}

// err returns the rejection of the entry's current version, or nil.
func (e *builtIngress) err() error {
	if e.rare == nil {
		return nil
	}
	return e.rare.err
}

// objects returns the objects other than Services that the entry depends on.
func (e *builtIngress) objects() []ObjectRef {
	if e.rare == nil {
		return nil
	}
	return e.rare.objects
}

// backendTLSCount is the material of one set of backend TLS files and how many served translations
// name it.
type backendTLSCount struct {
	files *BackendTLSFiles
	users int
}

// NewModelBuilder returns a builder with an empty cache.
func NewModelBuilder() *ModelBuilder {
	return &ModelBuilder{
		entries:     map[types.NamespacedName]*builtIngress{},
		users:       map[types.NamespacedName]userSet{},
		objectUsers: map[ObjectRef]userSet{},
		backendTLS:  map[string]backendTLSCount{},
		problems:    map[types.NamespacedName]struct{}{},
	}
}

// BuildInput is everything a build reads.
type BuildInput struct {
	// Ingresses are the accepted Ingresses, in a stable order (the order of Rejected and Warnings).
	Ingresses []*networkingv1.Ingress
	// Services finds the Services the Ingresses reference.
	Services ServiceLookup
	// Secrets finds the Secrets that annotations name (proxy-ssl-secret); nil finds none.
	Secrets SecretLookup
	// ConfigMaps finds the ConfigMaps that annotations name (custom-headers, auth-proxy-set-headers); nil finds none.
	ConfigMaps ConfigMapLookup
	// Options shape every translation.
	Options TranslateOptions
	// DefaultBackend is --default-backend-service; the zero value means none.
	DefaultBackend types.NamespacedName
	// Ownership is --host-ownership; empty means HostsShared.
	Ownership HostOwnership
	// Quarantine, when set, returns the refusal of an Ingress version whose route the data plane refused,
	// or nil. That version is rejected with the refusal's error; its newest earlier good version that
	// does not write the refused route is served instead (stale), else nothing of it.
	Quarantine func(*networkingv1.Ingress) *Refusal
}

// Refusal is a route of an Ingress that the data plane refused, with the error to report.
type Refusal struct {
	Err      error
	Host     Hostname
	Location Location
	// Profile, when set, is what NGINX refused: the configuration with the profile's location (nginx
	// -t); every version of the Ingress that uses it would be refused again.
	Profile ProfileSettings
}

// writes reports whether t has the refused route: the same host, path and path type, with the same
// upstream and settings, so that serving t would write it again.
func (q *Refusal) writes(t *IngressTranslation) bool {
	if !q.Profile.IsZero() {
		return valueOf(t.Profile) == q.Profile || (t.rareOf().globalAuth && slices.ContainsFunc(t.Routes, func(r Route) bool { return r.NoGlobalAuth }) &&
			valueOf(t.Profile).withoutAuth() == q.Profile)
	}
	l := &q.Location
	if !t.Options.Equal(l.Options) || !sameRanges(t.Access, l.Access) {
		return false
	}
	return slices.ContainsFunc(t.Routes, func(r Route) bool {
		return r.Host == q.Host && r.Path == l.Path && r.PathType == l.PathType && r.Upstream == l.Upstream && r.RedirectHost == l.RedirectHost
	})
}

// Rejection is an Ingress whose current version cannot be served, with the reason for its owner.
type Rejection struct {
	Ingress *networkingv1.Ingress
	Err     error
	// Stale is set when the Ingress's last good version (an earlier resourceVersion of the same object)
	// is served instead; otherwise the Ingress is left out of the model.
	Stale bool
}

// IngressWarnings are the problems of an Ingress that is served anyway.
type IngressWarnings struct {
	Ingress  *networkingv1.Ingress
	Warnings []string
}

// Build is the result of one build.
type Build struct {
	Model Model
	// Translated counts the Ingresses in the model, those served from a stale version included.
	Translated int
	// Stale counts the Ingresses served from their last good version.
	Stale int
	// Rejected and Warnings are sorted by namespace and name.
	Rejected  []Rejection
	Warnings  []IngressWarnings
	Conflicts []Conflict
	// Takeovers are paths that take requests from another namespace's path on a shared host.
	Takeovers []Takeover
	// DefaultBackendMissing is set when DefaultBackend is set but not found or has no TCP port: the
	// built-in 404 answers unmatched requests.
	DefaultBackendMissing bool
	// BackendTLS are the backend TLS files that the model's profiles name, sorted by stem: the caller
	// writes them (WriteBackendTLSFiles) before NGINX loads the configuration.
	BackendTLS []*BackendTLSFiles
}

// Build translates in.Ingresses and merges them into the model. An Ingress that left since the previous
// build (deleted, or no longer ours) is forgotten, whenever it left.
func (b *ModelBuilder) Build(in BuildInput) Build {
	changes := map[types.NamespacedName]TranslationChange{}
	seen := make(map[types.NamespacedName]struct{}, len(in.Ingresses))
	for _, ing := range in.Ingresses {
		key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		seen[key] = struct{}{}
		b.set(key, ing, &in, changes)
	}
	for key := range b.entries {
		if _, ok := seen[key]; !ok {
			b.set(key, nil, &in, changes)
		}
	}
	// The Merger gets every served translation compared with what it holds, not only the changes: a full
	// build also brings it back in step should an earlier build have stopped half way (translations
	// compare by pointer, so this costs a map of the Ingresses).
	clear(changes)
	merged := b.merger.merged()
	for key, e := range b.entries {
		if merged[key] != e.served {
			changes[key] = TranslationChange{Old: merged[key], New: e.served}
		}
	}
	for key, t := range merged {
		if e := b.entries[key]; e == nil || e.served == nil {
			changes[key] = TranslationChange{Old: t}
		}
	}
	return b.finish(&in, changes)
}

// UpdateInput is what an Update reads: the changes since the previous build, and how to look up the
// current objects.
type UpdateInput struct {
	// Ingresses are the Ingresses that changed, appeared or left since the previous build.
	Ingresses []types.NamespacedName
	// Services are the Services that changed, appeared or left; the Ingresses that depend on them are
	// translated again.
	Services []types.NamespacedName
	// Objects are the other objects (Secrets, ConfigMaps) that changed, appeared or left; the Ingresses that
	// depend on them are translated again.
	Objects []ObjectRef
	// Get returns an accepted Ingress, or false when it does not exist or is not ours.
	Get func(types.NamespacedName) (*networkingv1.Ingress, bool)
	// Lookup, Options, DefaultBackend and Ownership are as in BuildInput; Options must be the previous
	// build's (a change of options needs a Build).
	Lookup         ServiceLookup
	Secrets        SecretLookup
	ConfigMaps     ConfigMapLookup
	Options        TranslateOptions
	DefaultBackend types.NamespacedName
	Ownership      HostOwnership
	Quarantine     func(*networkingv1.Ingress) *Refusal
}

// Update is Build after the given Ingresses and Services changed: every other Ingress keeps what the
// previous build made of it, without being looked at. The result is what Build with every accepted
// Ingress would return.
func (b *ModelBuilder) Update(in UpdateInput) Build {
	bin := BuildInput{Services: in.Lookup, Secrets: in.Secrets, ConfigMaps: in.ConfigMaps, Options: in.Options, DefaultBackend: in.DefaultBackend, Ownership: in.Ownership, Quarantine: in.Quarantine}
	keys := map[types.NamespacedName]struct{}{}
	for _, k := range in.Ingresses {
		keys[k] = struct{}{}
	}
	changes := map[types.NamespacedName]TranslationChange{}
	b.mu.RLock()
	for _, s := range in.Services {
		b.users[s].each(func(k types.NamespacedName) { keys[k] = struct{}{} })
	}
	for _, o := range in.Objects {
		b.objectUsers[o].each(func(k types.NamespacedName) { keys[k] = struct{}{} })
	}
	b.mu.RUnlock()
	for key := range keys {
		ing, ok := in.Get(key)
		if !ok {
			ing = nil
		}
		b.set(key, ing, &bin, changes)
	}
	return b.finish(&bin, changes)
}

// set builds one Ingress again (ing nil: it left) and records a change of its served translation.
func (b *ModelBuilder) set(key types.NamespacedName, ing *networkingv1.Ingress, in *BuildInput, changes map[types.NamespacedName]TranslationChange) {
	old := b.entries[key]
	var e *builtIngress
	var linked []types.NamespacedName // the Services key is listed as a user of
	var linkedObjects []ObjectRef
	var oldServices, services []types.NamespacedName // the Services the old and the new entry depend on
	if old != nil {
		oldServices = old.serviceKeys()
		linked, linkedObjects = oldServices, old.objects()
	}
	if ing != nil {
		// The Ingress becomes a user of the Services it names before they are read, so that a change to
		// one that the translation might miss is never taken for a change nobody depends on.
		named := ServicesOf(ing)
		namedObjects := ObjectsOf(ing)
		b.link(key, named, nil)
		b.linkObjects(key, namedObjects, nil)
		linked = append(slices.Clip(linked), named...)
		linkedObjects = append(slices.Clip(linkedObjects), namedObjects...)
		e = &builtIngress{ing: ing}
		var lastGood, previousGood *IngressTranslation // the old entry's
		var cached cacheEntry
		if old != nil {
			cached = old.translated()
			lastGood, previousGood = old.served, old.previousGood
		}
		var refused *Refusal
		if in.Quarantine != nil {
			refused = in.Quarantine(ing)
		}
		lk := Lookups{Services: in.Services, Secrets: in.Secrets, ConfigMaps: in.ConfigMaps}
		tr, err, hit := cached.translate(ing, &lk, &in.Options, b.sharedOptions(in.Options))
		if hit {
			b.hits++
		} else {
			b.misses++
		}
		if refused != nil && tr != nil && !refused.writes(tr) {
			// The same object translated with other options (the ConfigMap changed, such as a fixed
			// global-auth-url) no longer has what the data plane refused.
			refused = nil
		}
		var rejected error
		switch {
		case refused != nil:
			// Quarantined: the newest good version of this object that the data plane did not refuse
			// stays served, so that the Ingress's host and paths go to nobody else.
			rejected = refused.Err
			for _, good := range []*IngressTranslation{lastGood, previousGood} {
				// A version whose users the Secret no longer lists is not served (basic authentication), nor
				// one without the external auth that the refused version has (its own auth-url, or the
				// ConfigMap's global auth): that would open what the configuration closes.
				if good != nil && good.UID == ing.UID && !refused.writes(good) && !good.staleAuthUsers(&lk) &&
					(tr == nil || !tr.Profile.restrictsAccess() || good.Profile.restrictsAccess()) {
					e.served = good
					break
				}
			}
		case err == nil:
			e.served = tr
			if lastGood != tr {
				e.previousGood = lastGood
			} else {
				e.previousGood = previousGood
			}
		case lastGood != nil && lastGood.UID == ing.UID && !errors.Is(err, ErrWithdrawn) && errors.Is(err, errGlobalAuthInvalid) &&
			!lastGood.Profile.restrictsAccess():
			// The ConfigMap turns a global auth on that is invalid: a last good version without external
			// auth would keep the Ingress open, which the rejection is there to prevent.
			rejected = errors.Join(err, ErrWithdrawn)
		case lastGood != nil && lastGood.UID == ing.UID && !errors.Is(err, ErrWithdrawn) && lastGood.staleAuthUsers(&lk):
			// The last good version admits users (basic authentication) that its Secret no longer lists:
			// withdrawn, not served, so that a removed user or an old password never keeps its access.
			rejected = errors.Join(err, ErrWithdrawn)
		case lastGood != nil && lastGood.UID == ing.UID && !errors.Is(err, ErrWithdrawn):
			// The update is rejected: the last good version stays served (a new object of the same name
			// starts without a past).
			rejected, e.served, e.previousGood = err, lastGood, previousGood
		default:
			rejected = err
		}
		services = serviceKeys(named, e.served)
		objects := namedObjects
		if e.served != nil {
			for _, o := range e.served.Objects() {
				objects = append(objects, o.ObjectRef)
			}
		}
		slices.SortFunc(objects, compareObjectRefs)
		objects = slices.Compact(objects)
		e.opts = cached.opts
		if cached.t != e.served || cached.rejected != nil || rejected != nil || len(objects) > 0 {
			e.rare = &builtRare{err: rejected, objects: objects}
			if cached.t != e.served || cached.rejected != nil {
				e.rare.translated, e.rare.rejected = cached.t, cached.rejected
			}
		}
		if old != nil && old.served == e.served && old.previousGood == e.previousGood && old.err() == e.err() &&
			slices.Equal(oldServices, services) && slices.Equal(old.objects(), e.objects()) {
			// Nothing changed but the object reported in Events and the translation cache entry.
			old.ing, old.opts, old.rare = ing, e.opts, e.rare
			return
		}
	}

	if old != nil {
		b.count(key, old, -1)
	}
	if e != nil {
		b.entries[key] = e
		b.count(key, e, 1)
		b.link(key, services, linked)
		b.linkObjects(key, e.objects(), linkedObjects)
	} else {
		delete(b.entries, key)
		b.link(key, nil, linked)
		b.linkObjects(key, nil, linkedObjects)
	}
	var before, after *IngressTranslation
	if old != nil {
		before = old.served
	}
	if e != nil {
		after = e.served
	}
	if before != after {
		changes[key] = TranslationChange{Old: before, New: after}
	}
}

// sharedOptions returns a pointer to opts that the entries translated with them share (only a change
// of options allocates).
func (b *ModelBuilder) sharedOptions(opts TranslateOptions) *TranslateOptions {
	if b.opts == nil || *b.opts != opts {
		b.opts = &opts
	}
	return b.opts
}

// serviceKeys returns the Services an entry depends on: those its Ingress names (sorted and unique) and
// those its served translation (nil for none) looked at, sorted and unique. A translation usually looks
// only at the Services its Ingress names, which are then the result.
func serviceKeys(named []types.NamespacedName, served *IngressTranslation) []types.NamespacedName {
	var out []types.NamespacedName
	if served != nil {
		for _, s := range served.Services {
			if _, found := slices.BinarySearchFunc(named, s.Key, compareKeys); !found {
				out = append(out, s.Key)
			}
		}
	}
	if len(out) == 0 {
		return named
	}
	out = append(out, named...)
	slices.SortFunc(out, compareKeys)
	return slices.Clip(slices.Compact(out))
}

// link lists key as a user of the Services in add, then as no longer a user of those in drop that add
// lacks, in one step for DependsOn.
func (b *ModelBuilder) link(key types.NamespacedName, add, drop []types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	linkUsers(b.users, key, add, drop)
}

// linkObjects is link for the other objects that annotations read.
func (b *ModelBuilder) linkObjects(key types.NamespacedName, add, drop []ObjectRef) {
	if len(add) == 0 && len(drop) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	linkUsers(b.objectUsers, key, add, drop)
}

// linkUsers lists key in index as a user of the objects in add, then as no longer a user of those in
// drop that add lacks; an object without users leaves the index. The caller holds b.mu.
func linkUsers[K comparable](index map[K]userSet, key types.NamespacedName, add, drop []K) {
	for _, o := range add {
		users := index[o]
		users.add(key)
		index[o] = users
	}
	for _, o := range drop {
		if slices.Contains(add, o) {
			continue
		}
		users, ok := index[o]
		switch {
		case !ok:
		case users.remove(key):
			delete(index, o)
		default:
			index[o] = users
		}
	}
}

// userSet is the set of Ingresses that use one Service (or other object). Most Services have one user:
// it is held inline, so that an index entry takes no allocation of its own (a one-user slice took 32
// bytes more at every Service); the others are in more. Ingress keys are never the zero
// NamespacedName, which marks an empty first place.
type userSet struct {
	first types.NamespacedName
	more  *moreUsers
}

// moreUsers are a userSet's users beyond its first. A few are held in a short slice, a fraction of a
// map's memory (at 10,000 Services, a map each took 4.5 MB); a Service that many Ingresses share moves
// them to a map, so that adding a user stays cheap.
type moreUsers struct {
	few  []types.NamespacedName
	many map[types.NamespacedName]struct{}
}

// maxFewUsers is how many users a userSet keeps in its slice before it moves them to a map.
const maxFewUsers = 16

func (u *userSet) add(k types.NamespacedName) {
	switch {
	case k == u.first && k != types.NamespacedName{}:
	case u.first == types.NamespacedName{} && k != types.NamespacedName{} && !u.more.has(k):
		u.first = k
	default:
		if u.more == nil {
			u.more = &moreUsers{}
		}
		u.more.add(k)
	}
}

// remove drops k and reports whether the set is empty.
func (u *userSet) remove(k types.NamespacedName) (empty bool) {
	if k == u.first && k != (types.NamespacedName{}) {
		u.first = types.NamespacedName{}
	} else if u.more != nil {
		u.more.remove(k)
	}
	if u.first == (types.NamespacedName{}) && u.more != nil {
		u.first = u.more.take() // the zero key, when it is a user, stays in more
	}
	if u.more != nil && u.more.empty() {
		u.more = nil
	}
	return u.first == (types.NamespacedName{}) && u.more == nil
}

// each calls f with every user.
func (u userSet) each(f func(types.NamespacedName)) {
	if u.first != (types.NamespacedName{}) {
		f(u.first)
	}
	if u.more == nil {
		return
	}
	for _, k := range u.more.few {
		f(k)
	}
	for k := range u.more.many {
		f(k)
	}
}

func (m *moreUsers) has(k types.NamespacedName) bool {
	if m == nil {
		return false
	}
	if m.many != nil {
		_, ok := m.many[k]
		return ok
	}
	return slices.Contains(m.few, k)
}

func (m *moreUsers) add(k types.NamespacedName) {
	switch {
	case m.many != nil:
		m.many[k] = struct{}{}
	case slices.Contains(m.few, k):
	case len(m.few) < maxFewUsers:
		m.few = append(m.few, k)
	default:
		m.many = make(map[types.NamespacedName]struct{}, 2*maxFewUsers)
		for _, f := range m.few {
			m.many[f] = struct{}{}
		}
		m.many[k] = struct{}{}
		m.few = nil
	}
}

func (m *moreUsers) remove(k types.NamespacedName) {
	if m.many != nil {
		delete(m.many, k)
		return
	}
	m.few = slices.DeleteFunc(m.few, func(f types.NamespacedName) bool { return f == k })
}

func (m *moreUsers) empty() bool { return len(m.few) == 0 && len(m.many) == 0 }

// take removes and returns a user other than the zero key, or returns the zero key when there is none.
func (m *moreUsers) take() types.NamespacedName {
	for i, k := range m.few {
		if k != (types.NamespacedName{}) {
			m.few = slices.Delete(m.few, i, i+1)
			return k
		}
	}
	for k := range m.many {
		if k != (types.NamespacedName{}) {
			delete(m.many, k)
			return k
		}
	}
	return types.NamespacedName{}
}

// count adds (sign 1) or removes (-1) an entry's share of the builder's counters and problems.
func (b *ModelBuilder) count(key types.NamespacedName, e *builtIngress, sign int) {
	if e.served != nil {
		b.served += sign
		if f := e.served.BackendTLS(); f != nil {
			c := b.backendTLS[f.Stem]
			c.files, c.users = f, c.users+sign
			if c.users <= 0 {
				delete(b.backendTLS, f.Stem)
			} else {
				b.backendTLS[f.Stem] = c
			}
		}
	}
	if e.err() != nil && e.served != nil {
		b.stale += sign
	}
	if sign > 0 && (e.err() != nil || len(e.served.Warnings) > 0) {
		b.problems[key] = struct{}{}
	} else if sign < 0 {
		delete(b.problems, key)
	}
}

// finish merges the changes and reports the build.
func (b *ModelBuilder) finish(in *BuildInput, changes map[types.NamespacedName]TranslationChange) Build {
	out := Build{Translated: b.served, Stale: b.stale}
	keys := make([]types.NamespacedName, 0, len(b.problems))
	for k := range b.problems {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		e := b.entries[k]
		if err := e.err(); err != nil {
			out.Rejected = append(out.Rejected, Rejection{Ingress: e.ing, Err: err, Stale: e.served != nil})
		} else {
			out.Warnings = append(out.Warnings, IngressWarnings{Ingress: e.ing, Warnings: e.served.Warnings})
		}
	}

	var defaultBackend *Upstream
	if db := in.DefaultBackend; db.Name != "" {
		var up Upstream
		svc, ok := in.Services.Service(db)
		if ok {
			up, ok = DefaultBackendUpstream(db, svc)
		}
		if ok {
			defaultBackend = &up
		} else {
			out.DefaultBackendMissing = true
		}
	}
	merged := b.merger.Apply(changes, MergeOptions{DefaultBackend: defaultBackend, Ownership: in.Ownership})
	out.Model, out.Conflicts, out.Takeovers = merged.Model, merged.Conflicts, merged.Takeovers
	for _, p := range out.Model.Profiles {
		if p.ProxySSLFiles == "" {
			continue
		}
		if c, ok := b.backendTLS[p.ProxySSLFiles]; ok && !slices.Contains(out.BackendTLS, c.files) {
			out.BackendTLS = append(out.BackendTLS, c.files)
		}
	}
	slices.SortFunc(out.BackendTLS, func(a, b *BackendTLSFiles) int { return strings.Compare(a.Stem, b.Stem) })
	return out
}

// Ingress returns the version of an Ingress that the latest build looked at, or nil.
func (b *ModelBuilder) Ingress(key types.NamespacedName) *networkingv1.Ingress {
	if e := b.entries[key]; e != nil {
		return e.ing
	}
	return nil
}

// DependsOn reports whether a Service matters to the build: an Ingress of the latest build, or one being
// built now, names it or depended on it. A change to any other Service cannot change the build. It is
// safe to call while a build runs.
func (b *ModelBuilder) DependsOn(svc types.NamespacedName) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.users[svc]
	return ok
}

// DependsOnObject is DependsOn for the other objects that annotations read (Secrets). It is safe to
// call while a build runs.
func (b *ModelBuilder) DependsOnObject(ref ObjectRef) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.objectUsers[ref]
	return ok
}

// cacheStats returns how many translations an entry answered and how many were made again.
func (b *ModelBuilder) cacheStats() (hits, misses uint64) { return b.hits, b.misses }

// Cached returns how many Ingresses the builder's cache holds: every Ingress of the latest build has
// its entry, and one that left has none.
func (b *ModelBuilder) Cached() int { return len(b.entries) }
