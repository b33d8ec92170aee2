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
	entries map[types.NamespacedName]*cacheEntry
	// opts is the options of the latest translation, shared by the entries made with them: they are the
	// same for every Ingress between two changes of the controller's settings, and 336 bytes each.
	opts   *TranslateOptions
	hits   uint64
	misses uint64
}

type cacheEntry struct {
	uid  types.UID
	rv   string
	opts *TranslateOptions
	// services are the Services the translation looked at, with their versions then.
	services []ServiceVersion
	objects  []ObjectVersion
	t        *IngressTranslation
	err      error
}

// NewTranslationCache returns an empty cache.
func NewTranslationCache() *TranslationCache {
	return &TranslationCache{entries: make(map[types.NamespacedName]*cacheEntry)}
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
	svc := lk.Services
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	c.mu.Lock()
	e := c.entries[key]
	if c.opts == nil || *c.opts != opts {
		o := opts // only a change of options allocates
		c.opts = &o
	}
	shared := c.opts
	c.mu.Unlock()
	if e != nil && e.uid == ing.UID && e.rv == ing.ResourceVersion && (e.opts == shared || *e.opts == opts) && servicesUnchanged(e.services, svc) && objectsUnchanged(e.objects, &lk) {
		c.mu.Lock()
		c.hits++
		c.mu.Unlock()
		return e.t, e.err
	}
	t, services, objects, err := translate(ing, lk, opts)
	e = &cacheEntry{uid: ing.UID, rv: ing.ResourceVersion, opts: shared, services: services, objects: objects, t: t, err: err}
	c.mu.Lock()
	c.entries[key] = e
	c.misses++
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
