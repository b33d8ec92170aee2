package settings

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// secretSyncTimeout bounds how long the settings wait for the informer of a newly named Secret
// (ssl-dh-param) before they are published without it: an API server that refuses the Secret must not
// hold back the rest of the ConfigMap.
const secretSyncTimeout = 15 * time.Second

// secretSource follows the one Secret that ssl-dh-param names, with an informer of that object alone
// (a field selector on its name), so that no other Secret of its namespace is cached.
type secretSource struct {
	key      types.NamespacedName
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	stop     chan struct{}
	// deadline: past it, an informer that has not synced counts as synced, without the Secret.
	deadline time.Time
}

// dhParamSecret returns the Secret ssl-dh-param names in data, or false.
func dhParamSecret(data map[string]string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(strings.TrimSpace(data["ssl-dh-param"]), "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// followSecret starts following the Secret data names, stopping the one followed before when it is
// another. It reports whether the Secret's informer is ready: synced, or past its deadline. w.mu is held.
func (w *Watcher) followSecret(data map[string]string) bool {
	key, ok := dhParamSecret(data)
	if w.secret != nil && (!ok || w.secret.key != key) {
		close(w.secret.stop)
		w.secret.factory.Shutdown()
		w.secret = nil
	}
	if !ok || w.client == nil {
		return true
	}
	select {
	case <-w.stop:
		return true // stopped: stopSecret may have run already, and nothing would stop a new informer
	default:
	}
	if w.secret == nil {
		s := &secretSource{key: key, stop: make(chan struct{}), deadline: time.Now().Add(secretSyncTimeout)}
		s.factory = informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithNamespace(key.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.Name).String()
			}))
		s.informer = s.factory.Core().V1().Secrets().Informer()
		// Handlers run on the informer's goroutine; sync takes w.mu itself.
		_, _ = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { go w.sync() },
			UpdateFunc: func(any, any) { go w.sync() },
			DeleteFunc: func(any) { go w.sync() },
		})
		s.factory.Start(s.stop)
		go func() {
			// An empty list (no such Secret) calls no handler: sync once the cache has it, or at the deadline.
			timer := time.NewTimer(secretSyncTimeout)
			defer timer.Stop()
			synced := make(chan struct{})
			go func() {
				if cache.WaitForCacheSync(s.stop, s.informer.HasSynced) {
					close(synced)
				}
			}()
			select {
			case <-synced:
			case <-timer.C:
			case <-s.stop:
				return
			}
			w.sync()
		}()
		w.secret = s
	}
	return w.secret.informer.HasSynced() || time.Now().After(w.secret.deadline)
}

// secretData returns the data of the followed Secret as strings (its dhparam.pem only), or nil when it
// does not exist or is not followed.
func (w *Watcher) secretData() map[string]string {
	if w.secret == nil {
		return nil
	}
	obj, exists, err := w.secret.informer.GetStore().GetByKey(w.secret.key.String())
	if err != nil || !exists {
		return nil
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return nil
	}
	out := map[string]string{}
	if v, ok := secret.Data[nginx.DHParamKey]; ok {
		out[nginx.DHParamKey] = string(v)
	}
	return out
}

// stopSecret stops following the Secret.
func (w *Watcher) stopSecret() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.secret != nil {
		close(w.secret.stop)
		w.secret.factory.Shutdown()
		w.secret = nil
	}
}
