package modules

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/ingress-reactor/ingress-reactor/internal/strpack"
)

// SecretRecord is what the shared Secret informer's cache holds instead of a Secret: of its metadata the
// namespace, name and resource version (informers tell updates from resyncs by it); its type; and the data
// entries that the app's transform kept (the certificate, key, CA and CRL of TLS, basic authentication's
// entries), in a value slice of exact length, nil when none was kept. The values are the decoded ones, not
// copies: a certificate parsed from them shares its PEM with the record. Nothing reads a Secret's labels,
// annotations, UID or owners. A decoded TLS Secret trimmed to its data still kept a 304-byte struct and a
// map of about 400 bytes beside its values; its record keeps a 72-byte struct and 40 bytes per entry
// (BenchmarkCacheTransformRetained in app).
//
// The app's cache transform converts each Secret with NewSecretRecord; that is the one place that does.
// The cache then holds no *corev1.Secret, so the informer's generated lister must not be used on it (it
// would panic): modules read it through Secrets (a lookup by key), and the objects its event handlers and
// tombstones carry through SecretOf. Both hand out a *corev1.Secret built for the caller (Secret), which
// the cache never keeps. A record is never modified once built: the cache, event handlers and tombstones
// share it, and so do the certificates parsed from its values.
type SecretRecord struct {
	namespace string
	// text holds the name and the resource version one after the other, then the type when it is
	// one that secretTypes does not list; ends says where the first two end.
	text string
	ends [2]uint32
	typ  secretType
	data []secretEntry
}

// secretEntry is one kept data entry of a Secret.
type secretEntry struct {
	key   string
	value []byte
}

// secretType is a Secret's type: one of those Kubernetes defines (and Helm's), or secretTypeOther when
// the record's text holds it.
type secretType uint8

const (
	secretTypeUnset secretType = iota
	secretTypeOpaque
	secretTypeTLS
	secretTypeBasicAuth
	secretTypeServiceAccountToken
	secretTypeDockercfg
	secretTypeDockerConfigJSON
	secretTypeSSHAuth
	secretTypeBootstrapToken
	secretTypeHelmRelease
	secretTypeOther
)

var secretTypes = [...]corev1.SecretType{
	secretTypeUnset:               "",
	secretTypeOpaque:              corev1.SecretTypeOpaque,
	secretTypeTLS:                 corev1.SecretTypeTLS,
	secretTypeBasicAuth:           corev1.SecretTypeBasicAuth,
	secretTypeServiceAccountToken: corev1.SecretTypeServiceAccountToken,
	secretTypeDockercfg:           corev1.SecretTypeDockercfg,
	secretTypeDockerConfigJSON:    corev1.SecretTypeDockerConfigJson,
	secretTypeSSHAuth:             corev1.SecretTypeSSHAuth,
	secretTypeBootstrapToken:      corev1.SecretTypeBootstrapToken,
	secretTypeHelmRelease:         "helm.sh/release.v1",
}

func secretTypeFrom(t corev1.SecretType) secretType {
	for i, s := range secretTypes {
		if s == t {
			return secretType(i)
		}
	}
	return secretTypeOther
}

// sharedSecretKey returns the program's own copy of a data key that many Secrets hold (a decoded Secret
// holds a copy of each), and k itself for any other key (a user name of basic authentication's auth-map).
func sharedSecretKey(k string) string {
	switch k {
	case corev1.TLSCertKey:
		return corev1.TLSCertKey
	case corev1.TLSPrivateKeyKey:
		return corev1.TLSPrivateKeyKey
	case corev1.ServiceAccountRootCAKey:
		return corev1.ServiceAccountRootCAKey
	case "ca.crl":
		return "ca.crl"
	case "auth":
		return "auth"
	}
	return k
}

// NewSecretRecord returns the record of s. It keeps every entry of s.Data: the caller drops the entries
// nobody reads first. The values are kept as they are, not copied; the keys that many Secrets hold
// (tls.crt, tls.key, ca.crt, ca.crl, auth) become the program's own constants and other keys are kept as
// given; the namespace is kept as given, so a namespace the caller interned is what the record holds. Its
// own strings (name, resource version, and a type that is not a well-known one) are copied into one
// allocation: kept where the decoder put them, each would pin a small slot amid the garbage the rest of
// the decoded Secret leaves behind. Nothing else of s is kept. The entries are sorted by key.
func NewSecretRecord(s *corev1.Secret) *SecretRecord {
	r := &SecretRecord{namespace: s.Namespace, typ: secretTypeFrom(s.Type)}
	all := [...]string{s.Name, s.ResourceVersion, string(s.Type)}
	parts := all[:2]
	if r.typ == secretTypeOther {
		parts = all[:]
	}
	r.text = strpack.Join(parts, r.ends[:])
	if len(s.Data) > 0 {
		r.data = make([]secretEntry, 0, len(s.Data))
		for k, v := range s.Data {
			r.data = append(r.data, secretEntry{key: sharedSecretKey(k), value: v[:len(v):len(v)]})
		}
		slices.SortFunc(r.data, func(a, b secretEntry) int { return strings.Compare(a.key, b.key) })
	}
	return r
}

// GetNamespace returns the Secret's namespace.
func (r *SecretRecord) GetNamespace() string { return r.namespace }

// GetName returns the Secret's name.
func (r *SecretRecord) GetName() string { return r.text[:r.ends[0]] }

// GetResourceVersion returns the Secret's resource version: informers tell updates from resyncs by it.
func (r *SecretRecord) GetResourceVersion() string { return r.text[r.ends[0]:r.ends[1]] }

// Type returns the Secret's type.
func (r *SecretRecord) Type() corev1.SecretType {
	if r.typ == secretTypeOther {
		return corev1.SecretType(r.text[r.ends[1]:])
	}
	return secretTypes[r.typ]
}

// Value returns the kept value of the data entry key (the record's own bytes, which must not be written
// to), and false when the record has no such entry.
func (r *SecretRecord) Value(key string) ([]byte, bool) {
	for _, e := range r.data {
		if e.key == key {
			return e.value, true
		}
	}
	return nil, false
}

// Len returns the number of kept data entries.
func (r *SecretRecord) Len() int { return len(r.data) }

// GetObjectMeta makes the record readable by meta.Accessor, which the informer's key function, its
// update handling and the handlers' key functions and resource-version filters use. The metadata is
// built on each call, garbage once read rather than kept in every record, and holds the namespace, name
// and resource version only.
func (r *SecretRecord) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: r.namespace, Name: r.GetName(), ResourceVersion: r.GetResourceVersion()}
}

// Secret returns a new Secret holding what the record keeps: in its metadata the namespace, name and
// resource version; its type; and its data, in a new map whose values are the record's own bytes (not
// copies: a certificate parsed from them shares them with the cache). It is the caller's, garbage once
// read; the values must not be written to (nothing writes into objects read from an informer cache).
func (r *SecretRecord) Secret() *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.GetName(), ResourceVersion: r.GetResourceVersion()},
		Type:       r.Type(),
	}
	if len(r.data) > 0 {
		s.Data = make(map[string][]byte, len(r.data))
		for _, e := range r.data {
			s.Data[e.key] = e.value
		}
	}
	return s
}

// SecretOf returns the Secret that an object of the shared Secret informer stands for: a record's Secret
// (built for the caller), a *corev1.Secret as it is (a cache filled without the app's transform, as in
// module tests), or either of them in a tombstone (cache.DeletedFinalStateUnknown). ok is false for
// anything else, a tombstone without its object too.
func SecretOf(obj any) (secret *corev1.Secret, ok bool) {
	if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = tomb.Obj
	}
	switch o := obj.(type) {
	case *SecretRecord:
		if o != nil {
			return o.Secret(), true
		}
	case *corev1.Secret:
		if o != nil {
			return o, true
		}
	}
	return nil, false
}

// Secrets looks Secrets up in the shared Secret informer's cache by namespace and name. It replaces the
// generated Secret lister, which cannot read the SecretRecords that the cache holds.
type Secrets struct {
	store cache.Store
}

// NewSecrets returns the lookup of the factory's Secret informer (which it registers, as the lister
// would).
func NewSecrets(f informers.SharedInformerFactory) Secrets {
	return SecretsIn(f.Core().V1().Secrets().Informer().GetStore())
}

// SecretsIn returns the lookup of a store keyed by namespace/name that holds SecretRecords or Secrets
// (tests and benchmarks fill one of their own).
func SecretsIn(store cache.Store) Secrets { return Secrets{store: store} }

// Get returns the cached Secret key (built for the caller: see SecretOf), and false when the cache holds
// none.
func (s Secrets) Get(key types.NamespacedName) (*corev1.Secret, bool) {
	obj, exists, err := s.store.GetByKey(key.Namespace + "/" + key.Name)
	if err != nil || !exists {
		return nil, false
	}
	return SecretOf(obj)
}
