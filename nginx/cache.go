package nginx

import (
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TranslationCache remembers the translation (or the rejection) of each Ingress, keyed by the Ingress's
// UID and resourceVersion, the resourceVersions of the Services it references and the options. Asking
// again for an unchanged Ingress costs a map lookup and one Service lookup per referenced Service, so the
// renderer can re-translate every Ingress after one changed. It is safe for concurrent use.
type TranslationCache struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]cacheEntry
	// opts is the options of the latest translation, shared by the entries made with them: they are the
	// same for every Ingress between two changes of the controller's settings, and 336 bytes each.
	opts   *TranslateOptions
	hits   uint64
	misses uint64
}

// cacheEntry is the translation of one Ingress, or its rejection. It is held in the map as a value of
// three words: a translation already carries what the entry is checked against (the Ingress's UID and
// resourceVersion, the versions of the objects it read), so only a rejection needs a record of its own.
type cacheEntry struct {
	opts *TranslateOptions
	t    *IngressTranslation
	// rejected is set instead of t when the translation failed.
	rejected *cachedRejection
}

// cachedRejection is a failed translation: what it depended on and its error.
type cachedRejection struct {
	uid types.UID
	rv  string
	// services are the Services the translation looked at, with their versions then.
	services []ServiceVersion
	objects  []ObjectVersion
	err      error
}

// fresh reports whether the entry still answers for ing translated with opts (shared is the cache's
// pointer to opts), the Services and objects lk finds now.
func (e *cacheEntry) fresh(ing *networkingv1.Ingress, lk *Lookups, opts *TranslateOptions, shared *TranslateOptions) bool {
	if e.opts == nil || (e.opts != shared && *e.opts != *opts) {
		return false
	}
	var (
		uid      types.UID
		rv       string
		services []ServiceVersion
		objects  []ObjectVersion
	)
	switch {
	case e.t != nil:
		uid, rv, services, objects = e.t.UID, e.t.ResourceVersion, e.t.Services, e.t.Objects()
	case e.rejected != nil:
		r := e.rejected
		uid, rv, services, objects = r.uid, r.rv, r.services, r.objects
	default:
		return false
	}
	return uid == ing.UID && rv == ing.ResourceVersion && servicesUnchanged(services, lk.Services) && objectsUnchanged(objects, lk)
}

// result returns the entry's translation or rejection.
func (e *cacheEntry) result() (*IngressTranslation, error) {
	if e.rejected != nil {
		return nil, e.rejected.err
	}
	return e.t, nil
}

// translate returns the entry's translation of ing (hit) when nothing it depends on changed, and
// otherwise translates ing and makes e its entry. shared is the owner's pointer to opts, which the
// entries made with the same options share.
func (e *cacheEntry) translate(ing *networkingv1.Ingress, lk *Lookups, opts, shared *TranslateOptions) (t *IngressTranslation, err error, hit bool) {
	if e.fresh(ing, lk, opts, shared) {
		t, err = e.result()
		return t, err, true
	}
	t, services, objects, err := translate(ing, *lk, *opts)
	if err != nil || t == nil {
		*e = cacheEntry{opts: shared, rejected: &cachedRejection{uid: ing.UID, rv: ing.ResourceVersion, services: services, objects: objects, err: err}}
	} else {
		*e = cacheEntry{opts: shared, t: t}
	}
	return t, err, false
}

// NewTranslationCache returns an empty cache.
func NewTranslationCache() *TranslationCache {
	return &TranslationCache{entries: make(map[types.NamespacedName]cacheEntry)}
}

// Translate returns the cached translation of ing when nothing it depends on changed, and translates it
// with TranslateIngress otherwise. Rejections are cached too. The returned translation is shared: do not
// modify it.
func (c *TranslationCache) Translate(ing *networkingv1.Ingress, svc ServiceLookup, opts TranslateOptions) (*IngressTranslation, error) {
	return c.TranslateWith(ing, Lookups{Services: svc}, opts)
}

// TranslateWith is Translate with the Secrets that annotations may name; a change of one of those
// that the translation read translates again too.
func (c *TranslationCache) TranslateWith(ing *networkingv1.Ingress, lk Lookups, opts TranslateOptions) (*IngressTranslation, error) {
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	c.mu.Lock()
	e := c.entries[key]
	if c.opts == nil || *c.opts != opts {
		o := opts // only a change of options allocates
		c.opts = &o
	}
	shared := c.opts
	c.mu.Unlock()
	t, err, hit := e.translate(ing, &lk, &opts, shared)
	c.mu.Lock()
	if hit {
		c.hits++
	} else {
		c.entries[key] = e
		c.misses++
	}
	c.mu.Unlock()
	return t, err
}

// Evict forgets an Ingress that was deleted or is no longer ours.
func (c *TranslationCache) Evict(key types.NamespacedName) {
	c.mu.Lock()
	delete(c.entries, key)
	c.mu.Unlock()
}

// Len returns the number of cached Ingresses.
func (c *TranslationCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Stats returns how many Translate calls were answered from the cache and how many translated.
func (c *TranslationCache) Stats() (hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

func servicesUnchanged(seen []ServiceVersion, svc ServiceLookup) bool {
	for _, s := range seen {
		cur, ok := svc.Service(s.Key)
		rv := ""
		if ok {
			rv = cur.ResourceVersion
		}
		if rv != s.ResourceVersion {
			return false
		}
	}
	return true
}

func objectsUnchanged(seen []ObjectVersion, lk *Lookups) bool {
	for _, o := range seen {
		if lk.version(o.ObjectRef) != o.ResourceVersion {
			return false
		}
	}
	return true
}
