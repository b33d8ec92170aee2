package modules

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// decoded returns a copy of s in new memory, as a decoder hands out each string.
func decoded(s string) string { return string([]byte(s)) }

// The record of a Secret keeps its namespace as given, copies of its name and resource version, its type
// as a byte (a type Kubernetes does not define in its text), and its entries in a slice of exact length,
// sorted, with the well-known keys as the program's constants and the values as they are; the Secret it
// builds holds exactly that.
func TestSecretRecordContents(t *testing.T) {
	crt, key, ca, users := []byte("cert"), []byte("key"), []byte("ca"), []byte("$2y$05$hash")
	ns := decoded("team-a")
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: decoded("web-tls"), ResourceVersion: decoded("1234"),
			UID: "u", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}},
		Type: corev1.SecretType(decoded(string(corev1.SecretTypeTLS))),
		Data: map[string][]byte{decoded("tls.key"): key, decoded("tls.crt"): crt, decoded("ca.crt"): ca, decoded("alice"): users},
	}
	r := NewSecretRecord(s)
	if len(r.data) != 4 || cap(r.data) != 4 {
		t.Errorf("entries: len %d, cap %d; want 4, 4", len(r.data), cap(r.data))
	}
	var keys []string
	for _, e := range r.data {
		keys = append(keys, e.key)
		if cap(e.value) != len(e.value) {
			t.Errorf("%s: value of cap %d, len %d", e.key, cap(e.value), len(e.value))
		}
	}
	if !reflect.DeepEqual(keys, []string{"alice", "ca.crt", "tls.crt", "tls.key"}) {
		t.Errorf("keys %q, want sorted", keys)
	}
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, corev1.ServiceAccountRootCAKey} {
		for _, e := range r.data {
			if e.key == k && unsafe.StringData(e.key) != unsafe.StringData(k) {
				t.Errorf("key %q is the decoded copy, not the constant", k)
			}
		}
	}
	if unsafe.StringData(r.GetNamespace()) != unsafe.StringData(ns) {
		t.Error("the namespace is not the one given")
	}
	if unsafe.StringData(r.GetName()) == unsafe.StringData(s.Name) || unsafe.StringData(r.GetResourceVersion()) == unsafe.StringData(s.ResourceVersion) {
		t.Error("the record keeps a decoded string")
	}
	if r.typ != secretTypeTLS || r.GetName() != "web-tls" || r.GetResourceVersion() != "1234" || r.text != "web-tls1234" {
		t.Errorf("type %d, name %q, resource version %q, text %q", r.typ, r.GetName(), r.GetResourceVersion(), r.text)
	}
	for k, want := range map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca, "alice": users} {
		if v, ok := r.Value(k); !ok || &v[0] != &want[0] || len(v) != len(want) {
			t.Errorf("Value(%q) = %q, %v; want the given bytes", k, v, ok)
		}
	}
	if _, ok := r.Value("password"); ok {
		t.Error("Value of a key the Secret does not hold")
	}

	got := r.Secret()
	want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-tls", ResourceVersion: "1234"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca, "alice": users}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Secret() = %+v, want %+v", got, want)
	}
	if &got.Data["tls.crt"][0] != &crt[0] {
		t.Error("the built Secret's value is a copy")
	}
	if again := r.Secret(); again == got || reflect.ValueOf(again.Data).UnsafePointer() == reflect.ValueOf(got.Data).UnsafePointer() {
		t.Error("two calls share a Secret or its map")
	}
}

// Every type comes back as it was: the well-known ones as constants, others from the record's text; a
// Secret without data has no entries and builds a Secret without a map.
func TestSecretRecordTypes(t *testing.T) {
	for _, typ := range []corev1.SecretType{"", corev1.SecretTypeOpaque, corev1.SecretTypeTLS, corev1.SecretTypeBasicAuth,
		corev1.SecretTypeServiceAccountToken, corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson,
		corev1.SecretTypeSSHAuth, corev1.SecretTypeBootstrapToken, "helm.sh/release.v1", "example.com/custom", "Unknown"} {
		r := NewSecretRecord(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", ResourceVersion: "7"},
			Type: corev1.SecretType(decoded(string(typ)))})
		if got := r.Type(); got != typ {
			t.Errorf("type %q comes back as %q", typ, got)
		}
		if r.GetName() != "s" || r.GetResourceVersion() != "7" {
			t.Errorf("type %q: name %q, resource version %q", typ, r.GetName(), r.GetResourceVersion())
		}
		if r.data != nil || r.Len() != 0 || r.Secret().Data != nil {
			t.Errorf("type %q: a Secret without data has entries %v", typ, r.data)
		}
		if known := r.typ != secretTypeOther; known && unsafe.StringData(string(r.Type())) != unsafe.StringData(string(secretTypes[r.typ])) {
			t.Errorf("type %q is not the constant", typ)
		}
	}
	if r := NewSecretRecord(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{}}); r.data != nil {
		t.Errorf("an empty map makes entries %v", r.data)
	}
}

// The informer's key functions and meta.Accessor read a record as its Secret; SecretOf unwraps records,
// Secrets and tombstones; Secrets.Get finds both kinds by key and builds a new Secret per lookup.
func TestSecretRecordLookups(t *testing.T) {
	r := NewSecretRecord(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rec", ResourceVersion: "3"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("c")}})
	plain := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}}
	for _, obj := range []any{r, cache.DeletedFinalStateUnknown{Key: "ns/rec", Obj: r}} {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err != nil || k != "ns/rec" {
			t.Errorf("key of %T: %q, %v", obj, k, err)
		}
	}
	if m, err := meta.Accessor(r); err != nil || m.GetNamespace() != "ns" || m.GetName() != "rec" || m.GetResourceVersion() != "3" {
		t.Errorf("meta.Accessor: %v, %v", m, err)
	}
	for _, tc := range []struct {
		obj  any
		want string
	}{{r, "rec"}, {plain, "plain"}, {cache.DeletedFinalStateUnknown{Key: "ns/rec", Obj: r}, "rec"},
		{cache.DeletedFinalStateUnknown{Key: "ns/plain", Obj: plain}, "plain"}} {
		if s, ok := SecretOf(tc.obj); !ok || s.Name != tc.want {
			t.Errorf("SecretOf(%T) = %v, %v; want %s", tc.obj, s, ok, tc.want)
		}
	}
	for _, obj := range []any{nil, (*SecretRecord)(nil), (*corev1.Secret)(nil), cache.DeletedFinalStateUnknown{Key: "ns/x"}, &corev1.Service{}} {
		if s, ok := SecretOf(obj); ok || s != nil {
			t.Errorf("SecretOf(%#v) = %v, true", obj, s)
		}
	}

	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range []any{r, plain} {
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	secrets := SecretsIn(store)
	first, ok := secrets.Get(types.NamespacedName{Namespace: "ns", Name: "rec"})
	if !ok || string(first.Data["tls.crt"]) != "c" || first.Type != corev1.SecretTypeTLS {
		t.Errorf("Get(ns/rec) = %+v, %v", first, ok)
	}
	if second, _ := secrets.Get(types.NamespacedName{Namespace: "ns", Name: "rec"}); second == first {
		t.Error("two lookups return the same Secret")
	}
	if got, ok := secrets.Get(types.NamespacedName{Namespace: "ns", Name: "plain"}); !ok || got != plain {
		t.Errorf("Get(ns/plain) = %v, %v; want the cached Secret", got, ok)
	}
	if got, ok := secrets.Get(types.NamespacedName{Namespace: "ns", Name: "none"}); ok || got != nil {
		t.Errorf("Get(ns/none) = %v, true", got)
	}
}
