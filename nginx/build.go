package nginx

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ModelBuilder builds the model from the accepted Ingresses: each is translated (through a
// TranslationCache, so unchanged Ingresses cost a lookup), the translations are merged (by a Merger, so
// only the hosts of changed Ingresses are merged again), and the Ingresses rejected, warned about or
// losing a conflict are listed for the caller to report. Builds run one at a
// time; the builder is not safe for concurrent use.
//
// An Ingress whose update is rejected keeps being served as its last good translation (Rejection.Stale),
// so that a typo never hands its host or paths to another Ingress; only a valid update, its deletion or
// its leaving our class replaces it.
type ModelBuilder struct {
	cache  *TranslationCache
	merger Merger
	// lastGood is each Ingress's last translation that was accepted.
	lastGood map[types.NamespacedName]*IngressTranslation
}

// NewModelBuilder returns a builder with an empty cache.
func NewModelBuilder() *ModelBuilder {
	return &ModelBuilder{cache: NewTranslationCache(), lastGood: map[types.NamespacedName]*IngressTranslation{}}
}

// BuildInput is everything a build reads.
type BuildInput struct {
	// Ingresses are the accepted Ingresses, in a stable order (the order of Rejected and Warnings).
	Ingresses []*networkingv1.Ingress
	// Services finds the Services the Ingresses reference.
	Services ServiceLookup
	// Options shape every translation.
	Options TranslateOptions
	// DefaultBackend is --default-backend-service; the zero value means none.
	DefaultBackend types.NamespacedName
	// Ownership is --host-ownership; empty means HostsShared.
	Ownership HostOwnership
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
	Stale     int
	Rejected  []Rejection
	Warnings  []IngressWarnings
	Conflicts []Conflict
	// Takeovers are paths that take requests from another namespace's path on a shared host.
	Takeovers []Takeover
	// Services are the Services the build depended on, a rejection's included (a port it lacks): a
	// change to one must rebuild.
	Services map[types.NamespacedName]struct{}
	// DefaultBackendMissing is set when DefaultBackend is set but not found or has no TCP port: the
	// built-in 404 answers unmatched requests.
	DefaultBackendMissing bool
}

// Build translates in.Ingresses and merges them into the model. The cache keeps exactly the Ingresses
// of this build, so an Ingress that left (deleted, or no longer ours) is forgotten by the next build
// whenever it left.
func (b *ModelBuilder) Build(in BuildInput) Build {
	out := Build{Services: map[types.NamespacedName]struct{}{}}
	translations := make([]*IngressTranslation, 0, len(in.Ingresses))
	keep := make(map[types.NamespacedName]struct{}, len(in.Ingresses))
	for _, ing := range in.Ingresses {
		key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		keep[key] = struct{}{}
		tr, err := b.cache.Translate(ing, in.Services, in.Options)
		if err != nil {
			for _, s := range ServicesOf(ing) {
				out.Services[s] = struct{}{}
			}
			good := b.lastGood[key]
			if good == nil || good.UID != ing.UID {
				delete(b.lastGood, key) // a new object of the same name starts without a past
				out.Rejected = append(out.Rejected, Rejection{Ingress: ing, Err: err})
				continue
			}
			out.Rejected = append(out.Rejected, Rejection{Ingress: ing, Err: err, Stale: true})
			out.Stale++
			for _, s := range good.Services {
				out.Services[s.Key] = struct{}{}
			}
			translations = append(translations, good)
			continue
		}
		b.lastGood[key] = tr
		for _, s := range tr.Services {
			out.Services[s.Key] = struct{}{}
		}
		if len(tr.Warnings) > 0 {
			out.Warnings = append(out.Warnings, IngressWarnings{Ingress: ing, Warnings: tr.Warnings})
		}
		translations = append(translations, tr)
	}
	b.cache.retain(keep)
	for key := range b.lastGood {
		if _, ok := keep[key]; !ok {
			delete(b.lastGood, key)
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
	merged := b.merger.Merge(translations, MergeOptions{DefaultBackend: defaultBackend, Ownership: in.Ownership})
	out.Model, out.Conflicts, out.Takeovers = merged.Model, merged.Conflicts, merged.Takeovers
	out.Translated = len(translations)
	return out
}

// Cached returns how many Ingresses the builder's cache holds.
func (b *ModelBuilder) Cached() int { return b.cache.Len() }
