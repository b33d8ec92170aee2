package nginx

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations may name other objects than Services: a Secret (proxy-ssl-secret), a ConfigMap
// (custom-headers). A translation records
// the version of each object it read (IngressTranslation.Objects), so that the TranslationCache knows
// when to translate again, and the ModelBuilder indexes its users, so that a change of the object
// translates again exactly the Ingresses that read it.

// ObjectKind is the kind of an object that annotations name.
type ObjectKind uint8

const (
	// KindSecret is a core/v1 Secret.
	KindSecret ObjectKind = iota + 1
	// KindConfigMap is a core/v1 ConfigMap.
	KindConfigMap
)

func (k ObjectKind) String() string {
	switch k {
	case KindSecret:
		return "Secret"
	case KindConfigMap:
		return "ConfigMap"
	}
	return "unknown"
}

// ObjectRef names an object that an Ingress's annotations read.
type ObjectRef struct {
	Kind ObjectKind
	Key  types.NamespacedName
}

// ObjectVersion records which version of an object a translation used ("" when it was missing).
type ObjectVersion struct {
	ObjectRef
	ResourceVersion string
}

// SecretLookup finds the Secrets that annotations name, usually from an informer's lister.
type SecretLookup interface {
	// Secret returns the Secret, or false when it does not exist.
	Secret(key types.NamespacedName) (*corev1.Secret, bool)
}

// SecretLookupFunc adapts a function to SecretLookup.
type SecretLookupFunc func(key types.NamespacedName) (*corev1.Secret, bool)

// Secret calls f.
func (f SecretLookupFunc) Secret(key types.NamespacedName) (*corev1.Secret, bool) { return f(key) }

// ConfigMapLookup finds the ConfigMaps that annotations name (custom-headers, auth-proxy-set-headers).
type ConfigMapLookup interface {
	// ConfigMap returns the ConfigMap, or false when it does not exist.
	ConfigMap(key types.NamespacedName) (*corev1.ConfigMap, bool)
}

// ConfigMapLookupFunc adapts a function to ConfigMapLookup.
type ConfigMapLookupFunc func(key types.NamespacedName) (*corev1.ConfigMap, bool)

// ConfigMap calls f.
func (f ConfigMapLookupFunc) ConfigMap(key types.NamespacedName) (*corev1.ConfigMap, bool) {
	return f(key)
}

// Lookups are the objects a translation may read besides the Ingress. A nil lookup finds nothing.
type Lookups struct {
	Services   ServiceLookup
	Secrets    SecretLookup
	ConfigMaps ConfigMapLookup
}

// version returns the current resourceVersion of ref ("" when it is missing).
func (l *Lookups) version(ref ObjectRef) string {
	switch ref.Kind {
	case KindSecret:
		if s, ok := l.secret(ref.Key); ok {
			return s.ResourceVersion
		}
	case KindConfigMap:
		if c, ok := l.configMap(ref.Key); ok {
			return c.ResourceVersion
		}
	}
	return ""
}

func (l *Lookups) configMap(key types.NamespacedName) (*corev1.ConfigMap, bool) {
	if l.ConfigMaps == nil {
		return nil, false
	}
	return l.ConfigMaps.ConfigMap(key)
}

func (l *Lookups) secret(key types.NamespacedName) (*corev1.Secret, bool) {
	if l.Secrets == nil {
		return nil, false
	}
	return l.Secrets.Secret(key)
}

// recordMissing notes that the translation looked for ref and it does not exist, which is about to reject
// the Ingress with one error: the caller fails it next. A rejection with no other cause is
// ErrOnlyMissingObjects (the admission webhook admits such an Ingress with a warning).
func (t *translator) recordMissing(ref ObjectRef) {
	t.recordObject(ref, "")
	t.missingObjects++
}

// recordObject notes that the translation read ref (obj nil: it does not exist).
func (t *translator) recordObject(ref ObjectRef, rv string) {
	for _, o := range t.out.Objects() {
		if o.ObjectRef == ref {
			return
		}
	}
	r := t.out.setRare()
	r.objects = append(r.objects, ObjectVersion{ObjectRef: ref, ResourceVersion: rv})
}

// ObjectsOf lists the objects other than Services that an Ingress's annotations name, sorted and unique,
// whether or not the names are valid: the builder lists the Ingress as their user before translating it.
func ObjectsOf(ing *networkingv1.Ingress) []ObjectRef {
	var out []ObjectRef
	if raw, ok := ing.Annotations[AnnotationProxySSLSecret]; ok {
		if key, err := parseObjectKey(ing.Namespace, raw); err == nil {
			out = append(out, ObjectRef{Kind: KindSecret, Key: key})
		}
	}
	if raw, ok := ing.Annotations[AnnotationAuthSecret]; ok {
		if key, err := parseObjectKey(ing.Namespace, raw); err == nil {
			out = append(out, ObjectRef{Kind: KindSecret, Key: key})
		}
	}
	if raw, ok := ing.Annotations[AnnotationAuthTLSSecret]; ok {
		if key, err := parseObjectKey(ing.Namespace, raw); err == nil {
			out = append(out, ObjectRef{Kind: KindSecret, Key: key})
		}
	}
	for _, a := range []string{AnnotationCustomHeaders, AnnotationAuthProxySetHeaders} {
		if raw, ok := ing.Annotations[a]; ok {
			if key, err := parseObjectKey(ing.Namespace, raw); err == nil {
				out = append(out, ObjectRef{Kind: KindConfigMap, Key: key})
			}
		}
	}
	slices.SortFunc(out, compareObjectRefs)
	return slices.Compact(out)
}

func compareObjectRefs(a, b ObjectRef) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), compareKeys(a.Key, b.Key))
}

// parseObjectKey reads an annotation's "namespace/name" (or "name", in the Ingress's namespace) and
// checks both parts.
func parseObjectKey(namespace, raw string) (types.NamespacedName, error) {
	v := strings.TrimSpace(raw)
	ns, name, found := strings.Cut(v, "/")
	if !found {
		ns, name = namespace, v
	}
	if err := validateLabel(ns); err != nil {
		return types.NamespacedName{}, err
	}
	if err := validateObjectName(name); err != nil {
		return types.NamespacedName{}, err
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// ownObjectKey parses the value of an annotation that names an object ("namespace/name", or "name" for
// the Ingress's namespace) of kind ("Secret", "ConfigMap"), which must be in the Ingress's own namespace:
// one tenant never uses another's credentials or data. It rejects the Ingress otherwise; example is a
// valid value for the message.
func (t *translator) ownObjectKey(annotation, kind, example string) (types.NamespacedName, bool) {
	raw := t.ing.Annotations[annotation]
	key, err := parseObjectKey(t.ing.Namespace, raw)
	if err != nil {
		t.fail("metadata.annotations[%s]: %s is not a %s's namespace/name (want lowercase RFC 1123 names such as %q)",
			annotation, quoteValue(raw), kind, example)
		return key, false
	}
	if key.Namespace != t.ing.Namespace {
		t.fail("metadata.annotations[%s]: %s is in namespace %s; only %ss of the Ingress's own namespace (%s) may be used",
			annotation, quoteValue(raw), key.Namespace, kind, t.ing.Namespace)
		return key, false
	}
	return key, true
}
