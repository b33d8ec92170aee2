package secretsync

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	listersnetv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

const ns = "apps"

// pair is a certificate and its key, PEM encoded.
type pair struct {
	cert, key []byte
	// leafSHA is the hex SHA-256 of the leaf (DER), as certs.Certificate.Fingerprint().
	leafSHA string
}

// newPair makes a self-signed ECDSA certificate for the given DNS names.
func newPair(t testing.TB, names ...string) pair {
	t.Helper()
	return newPairUntil(t, time.Now().Add(48*time.Hour), names...)
}

// newPairUntil makes a self-signed ECDSA certificate for the given DNS names that expires at notAfter.
func newPairUntil(t testing.TB, notAfter time.Time, names ...string) pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "test"},
		DNSNames:     names,
		NotBefore:    notAfter.Add(-72 * time.Hour),
		NotAfter:     notAfter,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return pair{
		cert:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:     pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		leafSHA: hex.EncodeToString(sum[:]),
	}
}

// Fixed certificates, made once: generating keys is the slow part of these tests.
var (
	certsOnce                  sync.Once
	certA, certA2, certB, othr pair
)

func fixtures(t testing.TB) {
	certsOnce.Do(func() {
		certA = newPair(t, "a.example")
		certA2 = newPair(t, "a.example", "www.a.example")
		certB = newPair(t, "b.example")
		othr = newPair(t, "other.example")
	})
}

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

// tlsSecret is kubernetes.io/tls Secret name holding p.
func tlsSecret(name string, p pair) *corev1.Secret {
	return gen.Secret(ns, name, gen.TLSData(p.cert, p.key))
}

// brokenSecret holds p's certificate with another certificate's key.
func brokenSecret(name string, p pair) *corev1.Secret {
	return gen.Secret(ns, name, gen.TLSData(p.cert, othr.key))
}

// ingress is Ingress name with one spec.tls entry for host name.example per Secret.
func ingress(name string, secrets ...string) *networkingv1.Ingress {
	opts := make([]gen.IngressOption, 0, len(secrets))
	for _, s := range secrets {
		opts = append(opts, gen.TLS(s, name+".example"))
	}
	return gen.Ingress(ns, name, opts...)
}

// env is a Syncer in a moduletest.Harness, not started. Tests drive it step by step: they change
// objects, wait until the informer caches show the change, and run the syncs that the change would
// queue, so every outcome is known once a step returns.
type env struct {
	t       *testing.T
	h       *moduletest.Harness
	out     *pipeline.Topic[modules.CertChange]
	changes *moduletest.Collector[modules.CertChange]
	store   *certs.Store
	dir     string
	syncer  *Syncer
}

func newEnv(t *testing.T, defaultCert string, objs ...runtime.Object) *env {
	t.Helper()
	fixtures(t)
	dir := filepath.Join(t.TempDir(), "ssl")
	store, err := certs.NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := moduletest.New(t, objs...)
	out := pipeline.NewTopic[modules.CertChange]("cert-changes")
	e := &env{t: t, h: h, out: out, changes: moduletest.Collect(out), store: store, dir: dir}
	opts := Options{Store: store}
	if defaultCert != "" {
		opts.DefaultCertificate = key(defaultCert)
	}
	s, err := New(Params{
		Options: opts, Factory: h.Factory, IngressChanges: h.IngressChanges, CertChanges: out,
		Recorder: h.Recorder, Metrics: h.Metrics, Registry: h.Registry, Log: h.Log,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.syncer = s
	// Not h.Run: most tests never start the syncer, one starts it itself; Stop must hold either way.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), moduletest.WaitLimit)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		out.Close()
	})
	h.Start()
	return e
}

// run syncs keys as the workers would, in name order so that tables can list changes in order.
func (e *env) run(keys ...types.NamespacedName) {
	e.t.Helper()
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		if err := e.syncer.sync(context.Background(), k); err != nil {
			e.t.Fatalf("sync %s: %v", k, err)
		}
	}
}

// applySecret creates or updates a Secret, waits for the cache, and syncs it if the syncer's event
// handler would queue it.
func (e *env) applySecret(s *corev1.Secret) {
	e.t.Helper()
	api := e.h.Client.CoreV1().Secrets(s.Namespace)
	var out *corev1.Secret
	var err error
	if _, gerr := api.Get(context.Background(), s.Name, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
		out, err = api.Create(context.Background(), s, metav1.CreateOptions{})
	} else {
		out, err = api.Update(context.Background(), s, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
	moduletest.Eventually(e.t, "the secret cache to show "+s.Name, func() bool {
		got, ok := e.syncer.secrets.Get(types.NamespacedName{Namespace: s.Namespace, Name: s.Name})
		return ok && string(got.Data[corev1.TLSPrivateKeyKey]) == string(out.Data[corev1.TLSPrivateKeyKey]) &&
			string(got.Data[corev1.TLSCertKey]) == string(out.Data[corev1.TLSCertKey])
	})
	e.run(e.syncer.ifReferenced(out)...)
}

func (e *env) deleteSecret(name string) {
	e.t.Helper()
	obj, err := e.h.Client.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.h.Client.CoreV1().Secrets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	moduletest.Eventually(e.t, "the secret cache to drop "+name, func() bool {
		_, ok := e.syncer.secrets.Get(types.NamespacedName{Namespace: ns, Name: name})
		return !ok
	})
	e.run(e.syncer.ifReferenced(obj)...)
}

// accept creates or updates an Ingress and delivers its IngressChange as accepted.
func (e *env) accept(ing *networkingv1.Ingress) {
	e.t.Helper()
	api := e.h.Client.NetworkingV1().Ingresses(ing.Namespace)
	ing = ing.DeepCopy()
	if cur, err := api.Get(context.Background(), ing.Name, metav1.GetOptions{}); err == nil {
		ing.ResourceVersion = cur.ResourceVersion
		if _, err := api.Update(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	} else if _, err := api.Create(context.Background(), ing, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	moduletest.Eventually(e.t, "the ingress cache to show "+ing.Name, func() bool {
		got, err := e.syncer.ingresses.Ingresses(ing.Namespace).Get(ing.Name)
		return err == nil && slices.Equal(nginx.SecretsOf(got), nginx.SecretsOf(ing))
	})
	e.run(e.syncer.ingressChanged(modules.IngressChange{Key: types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}, Accepted: true})...)
}

// drop deletes an Ingress and delivers its IngressChange as no longer accepted.
func (e *env) drop(name string) {
	e.t.Helper()
	if err := e.h.Client.NetworkingV1().Ingresses(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	moduletest.Eventually(e.t, "the ingress cache to drop "+name, func() bool {
		_, err := e.syncer.ingresses.Ingresses(ns).Get(name)
		return apierrors.IsNotFound(err)
	})
	e.run(e.syncer.ingressChanged(modules.IngressChange{Key: key(name), Accepted: false})...)
}

// published returns the CertChanges published since the last call. A marker published after them
// arrives after all of them (a subscriber gets messages in order), so nothing is missed or left over.
func (e *env) published() []modules.CertChange {
	e.t.Helper()
	marker := types.NamespacedName{Namespace: "marker", Name: fmt.Sprint(time.Now().UnixNano())}
	e.out.Publish(modules.CertChange{Secret: marker})
	got := e.changes.WaitFor(e.t, "the marker CertChange", func(c modules.CertChange) bool { return c.Secret == marker })
	return got[:len(got)-1]
}

// files lists the Secret certificate files in the ssl dir (name without .pem), checking each is 0600.
func (e *env) files() []string {
	e.t.Helper()
	fi, err := os.Stat(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		e.t.Errorf("ssl dir mode %o, want 0700", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, en := range entries {
		info, err := en.Info()
		if err != nil {
			e.t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			e.t.Errorf("%s has mode %o, want 0600", en.Name(), info.Mode().Perm())
		}
		out = append(out, strings.TrimSuffix(en.Name(), ".pem"))
	}
	sort.Strings(out)
	return out
}

// gauge reads a series of metric name carrying the label pairs; ok is false when there is none.
func (e *env) gauge(name string, labels ...string) (float64, bool) {
	e.t.Helper()
	return moduletest.LookupMetric(e.t, e.h.Registry, name, labels...)
}

// change is a CertChange as the tables spell it: the Secret's name, the leaf fingerprint of the
// published certificate ("" for none), and the Default flag.
type change struct {
	secret, leaf string
	isDefault    bool
}

func (c change) String() string {
	leaf := "nil"
	if c.leaf != "" {
		leaf = c.leaf[:8]
	}
	return fmt.Sprintf("{%s %s default=%v}", c.secret, leaf, c.isDefault)
}

func asChanges(cs []modules.CertChange) []change {
	out := make([]change, 0, len(cs))
	for _, c := range cs {
		ch := change{secret: c.Secret.Name, isDefault: c.Default}
		if c.Certificate != nil {
			ch.leaf = c.Certificate.Fingerprint().String()
		}
		out = append(out, ch)
	}
	return out
}

// warning is an expected Warning Event: the Ingress's name and the reason.
type warning struct{ ingress, reason string }

func asWarnings(t *testing.T, evs []moduletest.Event) []warning {
	t.Helper()
	var out []warning
	for _, ev := range evs {
		if ev.Kind != corev1.EventTypeWarning {
			t.Errorf("event %+v is not a Warning", ev)
		}
		if strings.Contains(ev.Message, "PRIVATE KEY") {
			t.Errorf("event message shows key material: %q", ev.Message)
		}
		out = append(out, warning{ingress: strings.TrimPrefix(ev.Object, ns+"/"), reason: ev.Reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ingress+out[i].reason < out[j].ingress+out[j].reason })
	return out
}

// step is one change to the cluster and everything the syncer is expected to do about it.
type step struct {
	name string
	do   func(e *env)
	// changes are the CertChanges published, in order.
	changes []change
	// warnings are the Warning Events recorded.
	warnings []warning
	// invalid is the invalid-secrets gauge afterwards.
	invalid float64
}

func TestSyncerFollowsReferencesAndSecrets(t *testing.T) {
	fixtures(t)
	tests := map[string]struct {
		defaultCert string
		objs        []runtime.Object
		steps       []step
	}{
		"referenced secret is published, unreferenced secret is ignored": {
			objs: []runtime.Object{tlsSecret("a-tls", certA), tlsSecret("b-tls", certB)},
			steps: []step{
				{name: "ingress references a-tls", do: func(e *env) { e.accept(ingress("shop", "a-tls")) },
					changes: []change{{secret: "a-tls", leaf: certA.leafSHA}}},
				{name: "unreferenced b-tls changes", do: func(e *env) { e.applySecret(tlsSecret("b-tls", certA2)) }},
				{name: "a-tls rotates", do: func(e *env) { e.applySecret(tlsSecret("a-tls", certA2)) },
					changes: []change{{secret: "a-tls", leaf: certA2.leafSHA}}},
				{name: "a-tls updated with the same content", do: func(e *env) {
					s := tlsSecret("a-tls", certA2)
					s.Labels = map[string]string{"touched": "yes"}
					e.applySecret(s)
				}},
			},
		},
		"missing secret: event and nil change; created: published": {
			steps: []step{
				{name: "ingress references missing a-tls", do: func(e *env) { e.accept(ingress("shop", "a-tls")) },
					changes:  []change{{secret: "a-tls"}},
					warnings: []warning{{"shop", ReasonSecretNotFound}}, invalid: 1},
				{name: "ingress updated, still missing: no repeated event", do: func(e *env) {
					ing := ingress("shop", "a-tls")
					ing.Labels = map[string]string{"v": "2"}
					e.accept(ing)
				}, invalid: 1},
				{name: "a-tls created", do: func(e *env) { e.applySecret(tlsSecret("a-tls", certA)) },
					changes: []change{{secret: "a-tls", leaf: certA.leafSHA}}},
				{name: "a-tls deleted", do: func(e *env) { e.deleteSecret("a-tls") },
					changes:  []change{{secret: "a-tls"}},
					warnings: []warning{{"shop", ReasonSecretNotFound}}, invalid: 1},
			},
		},
		"invalid secret: event on every user, nil change; fixed: published": {
			objs: []runtime.Object{tlsSecret("a-tls", certA)},
			steps: []step{
				{name: "two ingresses reference a-tls", do: func(e *env) {
					e.accept(ingress("shop", "a-tls"))
					e.accept(ingress("blog", "a-tls"))
				}, changes: []change{{secret: "a-tls", leaf: certA.leafSHA}}},
				{name: "key replaced by another one's", do: func(e *env) { e.applySecret(brokenSecret("a-tls", certA)) },
					changes:  []change{{secret: "a-tls"}},
					warnings: []warning{{"blog", ReasonSecretInvalid}, {"shop", ReasonSecretInvalid}}, invalid: 1},
				{name: "a third ingress starts using the broken secret", do: func(e *env) { e.accept(ingress("wiki", "a-tls")) },
					warnings: []warning{{"wiki", ReasonSecretInvalid}}, invalid: 1},
				{name: "same problem synced again: nobody told twice", do: func(e *env) {
					ing := ingress("wiki", "a-tls")
					ing.Labels = map[string]string{"v": "2"}
					e.accept(ing)
					e.run(key("a-tls"))
				}, invalid: 1},
				{name: "broken differently: told again", do: func(e *env) {
					s := tlsSecret("a-tls", certA)
					delete(s.Data, corev1.TLSPrivateKeyKey)
					e.applySecret(s)
				}, warnings: []warning{{"blog", ReasonSecretInvalid}, {"shop", ReasonSecretInvalid}, {"wiki", ReasonSecretInvalid}}, invalid: 1},
				{name: "fixed", do: func(e *env) { e.applySecret(tlsSecret("a-tls", certA2)) },
					changes: []change{{secret: "a-tls", leaf: certA2.leafSHA}}},
			},
		},
		"unreferenced secret: nil change": {
			objs: []runtime.Object{tlsSecret("a-tls", certA), tlsSecret("b-tls", certB)},
			steps: []step{
				{name: "two ingresses share a-tls, one uses b-tls too", do: func(e *env) {
					e.accept(ingress("shop", "a-tls", "b-tls"))
					e.accept(ingress("blog", "a-tls"))
				}, changes: []change{{secret: "a-tls", leaf: certA.leafSHA}, {secret: "b-tls", leaf: certB.leafSHA}}},
				{name: "shop drops b-tls", do: func(e *env) { e.accept(ingress("shop", "a-tls")) },
					changes: []change{{secret: "b-tls"}}},
				{name: "shop deleted: blog still uses a-tls", do: func(e *env) { e.drop("shop") }},
				{name: "blog deleted", do: func(e *env) { e.drop("blog") },
					changes: []change{{secret: "a-tls"}}},
				{name: "a-tls changes while unreferenced", do: func(e *env) { e.applySecret(tlsSecret("a-tls", certA2)) }},
			},
		},
		"ingress swaps some of its secrets: dropped ones unreferenced, added one published, kept one untouched": {
			objs: []runtime.Object{tlsSecret("a-tls", certA), tlsSecret("b-tls", certB), tlsSecret("c-tls", certA2), tlsSecret("d-tls", certA)},
			steps: []step{
				{name: "shop uses a, b and c", do: func(e *env) { e.accept(ingress("shop", "c-tls", "a-tls", "b-tls")) },
					changes: []change{{secret: "a-tls", leaf: certA.leafSHA}, {secret: "b-tls", leaf: certB.leafSHA}, {secret: "c-tls", leaf: certA2.leafSHA}}},
				{name: "shop uses b and d", do: func(e *env) { e.accept(ingress("shop", "d-tls", "b-tls")) },
					changes: []change{{secret: "a-tls"}, {secret: "c-tls"}, {secret: "d-tls", leaf: certA.leafSHA}}},
				{name: "dropped a-tls changes while unreferenced", do: func(e *env) { e.applySecret(tlsSecret("a-tls", certB)) }},
				{name: "kept b-tls rotates", do: func(e *env) { e.applySecret(tlsSecret("b-tls", certA)) },
					changes: []change{{secret: "b-tls", leaf: certA.leafSHA}}},
			},
		},
		"broken secret no longer referenced: nothing left": {
			steps: []step{
				{name: "references a missing secret", do: func(e *env) { e.accept(ingress("shop", "a-tls")) },
					changes: []change{{secret: "a-tls"}}, warnings: []warning{{"shop", ReasonSecretNotFound}}, invalid: 1},
				{name: "deleted", do: func(e *env) { e.drop("shop") }, changes: []change{{secret: "a-tls"}}},
				{name: "referenced again: told again", do: func(e *env) { e.accept(ingress("shop", "a-tls")) },
					changes: []change{{secret: "a-tls"}}, warnings: []warning{{"shop", ReasonSecretNotFound}}, invalid: 1},
			},
		},
		"default certificate is synced without references and kept when one goes away": {
			defaultCert: "default-tls",
			objs:        []runtime.Object{tlsSecret("default-tls", certB)},
			steps: []step{
				{name: "start", do: func(e *env) { e.run(key("default-tls")) },
					changes: []change{{secret: "default-tls", leaf: certB.leafSHA, isDefault: true}}},
				{name: "an ingress uses it and goes away", do: func(e *env) {
					e.accept(ingress("shop", "default-tls"))
					e.drop("shop")
				}},
				{name: "rotated", do: func(e *env) { e.applySecret(tlsSecret("default-tls", certA)) },
					changes: []change{{secret: "default-tls", leaf: certA.leafSHA, isDefault: true}}},
				{name: "broken: no ingress to tell", do: func(e *env) { e.applySecret(brokenSecret("default-tls", certA)) },
					changes: []change{{secret: "default-tls", isDefault: true}}, invalid: 1},
			},
		},
		"missing default certificate": {
			defaultCert: "default-tls",
			steps: []step{
				{name: "start", do: func(e *env) { e.run(key("default-tls")) },
					changes: []change{{secret: "default-tls", isDefault: true}}, invalid: 1},
				{name: "created", do: func(e *env) { e.applySecret(tlsSecret("default-tls", certB)) },
					changes: []change{{secret: "default-tls", leaf: certB.leafSHA, isDefault: true}}},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, tc.defaultCert, tc.objs...)
			for _, st := range tc.steps {
				st.do(e)
				if got := asChanges(e.published()); !slices.Equal(got, st.changes) {
					t.Errorf("%s: published %v, want %v", st.name, got, st.changes)
				}
				if got := asWarnings(t, e.h.Recorder.Take()); !slices.Equal(got, st.warnings) {
					t.Errorf("%s: warnings %v, want %v", st.name, got, st.warnings)
				}
				if got := e.files(); len(got) != 0 {
					t.Errorf("%s: ssl dir holds %v, want no Secret's file", st.name, got)
				}
				if got, _ := e.gauge("ingress_reactor_ssl_invalid_secrets"); got != st.invalid {
					t.Errorf("%s: invalid secrets gauge %g, want %g", st.name, got, st.invalid)
				}
			}
		})
	}
}

func TestSyncerExpiryMetricFollowsCertificate(t *testing.T) {
	e := newEnv(t, "", tlsSecret("a-tls", certA))
	e.accept(ingress("shop", "a-tls"))
	cert, err := certs.ParseSecret(tlsSecret("a-tls", certA))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := e.gauge("ingress_reactor_ssl_expire_time_seconds", "namespace", ns, "secret", "a-tls", "host", "a.example"); !ok || got != float64(cert.NotAfter().Unix()) {
		t.Errorf("expiry of a.example = %g (present %v), want %d", got, ok, cert.NotAfter().Unix())
	}

	// The rotated certificate also covers www.a.example.
	e.applySecret(tlsSecret("a-tls", certA2))
	rotated, err := certs.ParseSecret(tlsSecret("a-tls", certA2))
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"a.example", "www.a.example"} {
		if got, ok := e.gauge("ingress_reactor_ssl_expire_time_seconds", "namespace", ns, "secret", "a-tls", "host", host); !ok || got != float64(rotated.NotAfter().Unix()) {
			t.Errorf("expiry of %s after rotation = %g (present %v), want %d", host, got, ok, rotated.NotAfter().Unix())
		}
	}

	e.drop("shop")
	if _, ok := e.gauge("ingress_reactor_ssl_expire_time_seconds", "secret", "a-tls"); ok {
		t.Error("expiry series of an unreferenced secret is still exported")
	}
}

// TestSyncerRunsFromInformersAndTopic runs the syncer as the application does (Start, informer events,
// the IngressChange topic) and follows one Secret through its life.
func TestSyncerRunsFromInformersAndTopic(t *testing.T) {
	e := newEnv(t, "default-tls", tlsSecret("default-tls", certB), tlsSecret("a-tls", certA))
	// A file of an earlier run for a Secret nobody references any more.
	stale := filepath.Join(e.dir, "apps_gone-tls.pem")
	if err := os.WriteFile(stale, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.syncer.Start(ctx)

	next := func(what string, match func(modules.CertChange) bool) modules.CertChange {
		t.Helper()
		got := e.changes.WaitFor(t, what, match)
		return got[len(got)-1]
	}
	withLeaf := func(name, leaf string) func(modules.CertChange) bool {
		return func(c modules.CertChange) bool {
			return c.Secret == key(name) && c.Certificate != nil && c.Certificate.Fingerprint().String() == leaf
		}
	}
	next("the default certificate", withLeaf("default-tls", certB.leafSHA))
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("file of an earlier run not pruned at start (stat: %v)", err)
	}

	ing := ingress("shop", "a-tls")
	if _, err := e.h.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the ingress cache", func() bool {
		_, err := e.syncer.ingresses.Ingresses(ns).Get("shop")
		return err == nil
	})
	e.h.IngressChanges.Publish(modules.IngressChange{Key: key("shop"), Accepted: true})
	next("a-tls", withLeaf("a-tls", certA.leafSHA))

	rotated := tlsSecret("a-tls", certA2)
	rotated.ResourceVersion = "2" // the fake clientset does not count versions; the API server does
	if _, err := e.h.Client.CoreV1().Secrets(ns).Update(ctx, rotated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	next("rotated a-tls", withLeaf("a-tls", certA2.leafSHA))

	e.h.IngressChanges.Publish(modules.IngressChange{Key: key("shop"), Accepted: false})
	next("a-tls dropped", func(c modules.CertChange) bool { return c.Secret == key("a-tls") && c.Certificate == nil })
	if _, err := os.Stat(filepath.Join(e.dir, "apps_a-tls.pem")); !os.IsNotExist(err) {
		t.Errorf("file of an unreferenced secret still there (stat: %v)", err)
	}
	if files := e.files(); len(files) != 0 {
		t.Errorf("ssl dir holds %v, want no Secret's file", files)
	}
}

// The generated default certificate is published as the default and generated again before it expires.
func TestFakeDefaultIsServedAndRenewed(t *testing.T) {
	e := newEnv(t, "")
	old, err := certs.GenerateFakeDefault(time.Now().Add(-certs.FakeDefaultValidity + time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.syncer.opts.FakeDefault = old
	e.syncer.opts.RenewCheck = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.syncer.renewFake(ctx) }()
	defer func() { cancel(); <-done }()

	anyChange := func(modules.CertChange) bool { return true }
	got := e.changes.WaitFor(t, "the fake certificate published", anyChange)
	got = append(got, e.changes.WaitFor(t, "the fake certificate renewed", anyChange)...)
	if got[0].Certificate != old || !got[0].Default || got[0].Secret != FakeDefaultID {
		t.Fatalf("first change: want the current fake certificate as default %v, got %+v", FakeDefaultID, got[0])
	}
	renewed := got[1].Certificate
	if renewed == nil || !renewed.NotAfter().After(old.NotAfter()) || !got[1].Default {
		t.Fatalf("second change: want a renewed default certificate expiring after %v, got %+v", old.NotAfter(), got[1])
	}
	paths, err := e.store.Path(certs.FakeDefaultKey)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(paths.Cert)
	if err != nil {
		t.Fatalf("renewed fake certificate file: %v", err)
	}
	if string(data) != string(renewed.PEM()) {
		t.Fatal("the fake certificate file does not hold the renewed certificate")
	}
}

// TestPrivateKeysOfSecretsStayOffTheDisk: NGINX reads only the generated default certificate's file;
// Secret certificates, the --default-ssl-certificate one included, reach its workers through the
// certificate lane. So a synced Secret, referenced or default, leaves no file (and no private key) in
// --ssl-dir.
func TestPrivateKeysOfSecretsStayOffTheDisk(t *testing.T) {
	fixtures(t)
	e := newEnv(t, "default-tls", tlsSecret("default-tls", certB), tlsSecret("a-tls", certA))
	e.run(key("default-tls"))
	e.accept(ingress("shop", "a-tls"))
	if got := e.published(); len(got) != 2 {
		t.Fatalf("published %v, want the default certificate and a-tls", got)
	}
	if files := e.files(); len(files) != 0 {
		t.Errorf("ssl dir holds %v, want no Secret's file", files)
	}
}

// TestUsersAreSortedAndRemovedAcrossManyIngresses: many Ingresses share one missing Secret; they are
// indexed and dropped in random order, and the users stay sorted by name (the order in which they
// are told), each one told once while it references the Secret.
func TestUsersAreSortedAndRemovedAcrossManyIngresses(t *testing.T) {
	names := []string{"a", "a-b", "a.b", "a0", "ab", "b", "z-9", "z.9", "z9"}
	for i := range 30 {
		names = append(names, fmt.Sprintf("app-%d", i)) // app-10 sorts before app-2
	}
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, ingress(n, "shared-tls"))
	}
	e := newEnv(t, "", objs...)
	shared := key("shared-tls")
	rng := mrand.New(mrand.NewPCG(13, 1))
	users := map[string]bool{}
	check := func(step string) {
		t.Helper()
		want := slices.Sorted(maps.Keys(users))
		var got []string
		users, _ := e.syncer.usersOf(shared)
		for _, u := range users {
			if u.Namespace != ns {
				t.Fatalf("%s: user %v in another namespace", step, u)
			}
			got = append(got, u.Name)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: users %v, want %v", step, got, want)
		}
		if referenced := len(e.syncer.ifReferenced(tlsSecret("shared-tls", certA))) > 0; referenced != (len(want) > 0) {
			t.Fatalf("%s: secret referenced %v with %d users", step, referenced, len(want))
		}
	}
	// told syncs the Secret and returns the Ingresses told about it, in the order they were told.
	told := func() []string {
		t.Helper()
		e.run(shared)
		var out []string
		for _, ev := range e.h.Recorder.Take() {
			if ev.Reason != ReasonSecretNotFound {
				t.Errorf("event %+v, want reason %s", ev, ReasonSecretNotFound)
			}
			out = append(out, strings.TrimPrefix(ev.Object, ns+"/"))
		}
		return out
	}
	accept := func(n string) {
		t.Helper()
		affected := e.syncer.ingressChanged(modules.IngressChange{Key: key(n), Accepted: true})
		if !slices.Equal(affected, []types.NamespacedName{shared}) {
			t.Fatalf("accept %s: affected %v, want only %v", n, affected, shared)
		}
		users[n] = true
		check("accept " + n)
	}
	drop := func(n string) {
		t.Helper()
		affected := e.syncer.ingressChanged(modules.IngressChange{Key: key(n), Accepted: false})
		want := []types.NamespacedName{shared}
		if !users[n] {
			want = []types.NamespacedName{}
		}
		if !slices.Equal(affected, want) {
			t.Fatalf("drop %s: affected %v, want %v", n, affected, want)
		}
		delete(users, n)
		check("drop " + n)
	}

	order := slices.Clone(names)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, n := range order[:20] {
		accept(n)
	}
	accept(order[3]) // again: no duplicate
	if got, want := told(), slices.Sorted(maps.Keys(users)); !slices.Equal(got, want) {
		t.Fatalf("first sync told %v, want every user once in name order %v", got, want)
	}
	for _, n := range order[20:] {
		accept(n)
	}
	if got, want := told(), slices.Sorted(slices.Values(order[20:])); !slices.Equal(got, want) {
		t.Fatalf("second sync told %v, want only the new users %v", got, want)
	}
	if got := told(); len(got) != 0 {
		t.Fatalf("sync without changes told %v again", got)
	}

	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, n := range order[:25] {
		drop(n)
	}
	drop(order[0]) // again: not a user any more
	if got := told(); len(got) != 0 {
		t.Fatalf("sync after drops told %v, want nobody", got)
	}
	for _, n := range order[:5] {
		accept(n)
	}
	if got, want := told(), slices.Sorted(slices.Values(order[:5])); !slices.Equal(got, want) {
		t.Fatalf("sync after re-adding told %v, want the re-added users %v", got, want)
	}
	for _, n := range order {
		drop(n)
	}
	if users, st := e.syncer.usersOf(shared); len(users) != 0 || !st.known() || len(e.syncer.byIngress)+len(e.syncer.moreSecrets)+len(e.syncer.moreUsers) != 0 {
		t.Fatalf("index not empty after every Ingress dropped: users %v (state known %v), byIngress %v %v, more users %v",
			users, st.known(), e.syncer.byIngress, e.syncer.moreSecrets, e.syncer.moreUsers)
	}
	e.run(shared)
	if _, kept := e.syncer.records[shared]; kept {
		t.Fatal("record kept for a Secret nobody references")
	}
}

// TestInvalidGaugeFollowsRandomChanges drives Secrets (the default one among them) and Ingresses
// through a random sequence of valid, broken, deleted, referenced and unreferenced states and checks
// the invalid-secrets gauge after every step against a count of the model and against a count over
// the syncer's state.
func TestInvalidGaugeFollowsRandomChanges(t *testing.T) {
	fixtures(t)
	secrets := []string{"d-tls", "s1-tls", "s2-tls", "s3-tls", "s4-tls"}
	ingresses := []string{"i1", "i2", "i3"}
	e := newEnv(t, "d-tls")
	e.run(key("d-tls"))
	content := map[string]string{} // secret -> "valid" or "broken"; absent: missing
	refs := map[string][]string{}  // accepted ingress -> secrets
	rng := mrand.New(mrand.NewPCG(7, 7))
	for step := range 80 {
		sec := secrets[rng.IntN(len(secrets))]
		ing := ingresses[rng.IntN(len(ingresses))]
		var what string
		switch op := rng.IntN(5); {
		case op == 0:
			p := certA
			if rng.IntN(2) == 0 {
				p = certB
			}
			e.applySecret(tlsSecret(sec, p))
			content[sec] = "valid"
			what = "valid " + sec
		case op == 1:
			e.applySecret(brokenSecret(sec, certA))
			content[sec] = "broken"
			what = "broken " + sec
		case op == 2 && content[sec] != "":
			e.deleteSecret(sec)
			delete(content, sec)
			what = "delete " + sec
		case op == 3:
			var use []string
			for _, s := range secrets[1:] {
				if rng.IntN(3) == 0 {
					use = append(use, s)
				}
			}
			e.accept(ingress(ing, use...))
			refs[ing] = use
			what = fmt.Sprintf("%s uses %v", ing, use)
		case op == 4 && refs[ing] != nil:
			e.drop(ing)
			delete(refs, ing)
			what = "drop " + ing
		default:
			continue
		}
		e.h.Recorder.Take()
		want := 0
		for _, s := range secrets {
			used := s == "d-tls"
			for _, r := range refs {
				used = used || slices.Contains(r, s)
			}
			if used && content[s] != "valid" {
				want++
			}
		}
		brute := 0
		e.syncer.mu.Lock()
		for _, rec := range e.syncer.records {
			if rec.state.problem() != "" {
				brute++
			}
		}
		e.syncer.mu.Unlock()
		got, _ := e.gauge("ingress_reactor_ssl_invalid_secrets")
		if got != float64(want) || brute != want {
			t.Fatalf("step %d (%s): gauge %g, state holds %d with a problem, want %d", step, what, got, brute, want)
		}
	}
}

// TestWarnedRecordOnlyWhenSomebodyWasTold: a usable Secret, or a broken one nobody could be told
// about, keeps no record of notices; a broken one keeps who was told.
func TestWarnedRecordOnlyWhenSomebodyWasTold(t *testing.T) {
	fixtures(t)
	e := newEnv(t, "default-tls", tlsSecret("a-tls", certA), brokenSecret("default-tls", certB))
	e.run(key("default-tls"))
	e.accept(ingress("shop", "a-tls"))
	e.accept(ingress("blog", "b-tls"))
	if w := e.syncer.records[key("a-tls")].state.warned(); w != nil {
		t.Errorf("usable a-tls keeps notices %+v", w)
	}
	if w := e.syncer.records[key("default-tls")].state.warned(); w != nil {
		t.Errorf("broken default-tls without users keeps notices %+v", w)
	}
	if w := e.syncer.records[key("b-tls")].state.warned(); w == nil || !slices.Equal(w.told, []types.NamespacedName{key("blog")}) {
		t.Errorf("missing b-tls: told %+v, want blog", w)
	}
}

// eventProbe is a recorder that runs probe before it records each Event.
type eventProbe struct {
	record.EventRecorder
	probe func()
}

func (r eventProbe) Event(obj runtime.Object, kind, reason, message string) {
	r.probe()
	r.EventRecorder.Event(obj, kind, reason, message)
}

// TestExpirySeriesStaysWhileARotationIsTold: a Secret whose certificate calls for a Warning Event (here
// an expired one) rotates; while its users are told, a scrape still shows its expiry series, with the
// new certificate's expiry, as it did when the series was a gauge set before telling.
func TestExpirySeriesStaysWhileARotationIsTold(t *testing.T) {
	first := newPairUntil(t, time.Now().Add(-2*time.Hour), "a.example")
	second := newPairUntil(t, time.Now().Add(-time.Hour), "a.example")
	e := newEnv(t, "", tlsSecret("a-tls", first), ingress("shop", "a-tls"))
	probed := 0
	var want float64
	e.syncer.recorder = eventProbe{EventRecorder: e.h.Recorder, probe: func() {
		probed++
		if got, ok := e.gauge("ingress_reactor_ssl_expire_time_seconds", "namespace", ns, "secret", "a-tls", "host", "a.example"); !ok || got != want {
			t.Errorf("event %d: expiry series = %g (present %v) while the users are told, want %g", probed, got, ok, want)
		}
	}}
	want = float64(certExpiry(t, first))
	e.accept(ingress("shop", "a-tls"))
	want = float64(certExpiry(t, second))
	e.applySecret(tlsSecret("a-tls", second))
	if probed != 2 {
		t.Fatalf("%d Warning Events, want one for each expired certificate", probed)
	}
}

// certExpiry returns p's NotAfter in Unix seconds.
func certExpiry(t *testing.T, p pair) int64 {
	t.Helper()
	block, _ := pem.Decode(p.cert)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.NotAfter.Unix()
}

// TestIndexMatchesAModelUnderRandomChanges drives the reference index and the Secrets' records through
// random Ingress changes (several Secrets each, repeated ones, none) and syncs, and compares them after
// every step with a plain model: a set of Secrets per accepted Ingress, and the Secrets synced while
// referenced. It checks the Secrets each change reports, each Secret's users, whether a Secret counts as
// referenced, and that no record outlives both its users and its state.
func TestIndexMatchesAModelUnderRandomChanges(t *testing.T) {
	fixtures(t)
	e := newEnv(t, "")
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	ingresses := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	e.syncer.ingresses = listersnetv1.NewIngressLister(ingresses)
	e.syncer.secrets = modules.SecretsIn(secrets)
	secretNames := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	for i, n := range secretNames {
		switch i % 3 {
		case 0:
			if err := secrets.Add(tlsSecret(n, certA)); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := secrets.Add(brokenSecret(n, certA)); err != nil {
				t.Fatal(err)
			}
		} // case 2: missing
	}
	ingressNames := []string{"i0", "i1", "i2", "i3", "i4"}
	refs := map[string]map[string]bool{} // accepted Ingress -> the Secrets it references
	known := map[string]bool{}           // Secrets synced while referenced, and not forgotten since
	problems := map[string]bool{}        // of those, the unusable ones
	usersOf := func(sec string) []string {
		var out []string
		for ing, set := range refs {
			if set[sec] {
				out = append(out, ing)
			}
		}
		slices.Sort(out)
		return out
	}
	rng := mrand.New(mrand.NewPCG(21, 5))
	for step := range 600 {
		var what string
		switch op := rng.IntN(3); op {
		case 0, 1:
			ing := ingressNames[rng.IntN(len(ingressNames))]
			before := refs[ing]
			now := map[string]bool{}
			accepted := op == 0
			if accepted {
				var use []string
				for range rng.IntN(4) {
					sec := secretNames[rng.IntN(len(secretNames))]
					use = append(use, sec) // repeats allowed
					now[sec] = true
				}
				if err := ingresses.Update(ingress(ing, use...)); err != nil {
					t.Fatal(err)
				}
				what = fmt.Sprintf("accept %s using %v", ing, use)
			} else {
				if err := ingresses.Delete(ingress(ing)); err != nil {
					t.Fatal(err)
				}
				what = "drop " + ing
			}
			var want []types.NamespacedName
			for _, sec := range secretNames {
				if before[sec] || now[sec] {
					want = append(want, key(sec))
				}
			}
			got := e.syncer.ingressChanged(modules.IngressChange{Key: key(ing), Accepted: accepted})
			if !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("step %d (%s): affected %v, want %v", step, what, got, want)
			}
			if len(now) == 0 {
				delete(refs, ing)
			} else {
				refs[ing] = now
			}
		case 2:
			sec := secretNames[rng.IntN(len(secretNames))]
			if err := e.syncer.sync(context.Background(), key(sec)); err != nil {
				t.Fatal(err)
			}
			if len(usersOf(sec)) > 0 {
				known[sec] = true
				problems[sec] = slices.Index(secretNames, sec)%3 != 0 // broken or missing
			} else {
				delete(known, sec)
				delete(problems, sec)
			}
			what = "sync " + sec
		}
		e.h.Recorder.Take()

		for _, sec := range secretNames {
			want := usersOf(sec)
			users, st := e.syncer.usersOf(key(sec))
			var got []string
			for _, u := range users {
				got = append(got, u.Name)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d (%s): users of %s %v, want %v", step, what, sec, got, want)
			}
			if referenced := len(e.syncer.ifReferenced(tlsSecret(sec, certA))) > 0; referenced != (len(want) > 0) {
				t.Fatalf("step %d (%s): %s referenced %v with users %v", step, what, sec, referenced, want)
			}
			if st.known() != known[sec] || (st.problem() != "") != problems[sec] || (st.cert != nil) != (known[sec] && !problems[sec]) {
				t.Fatalf("step %d (%s): state of %s: known %v, problem %q, certificate %v; want known %v, problem %v",
					step, what, sec, st.known(), st.problem(), st.cert != nil, known[sec], problems[sec])
			}
			_, kept := e.syncer.records[key(sec)]
			if kept != (len(want) > 0 || known[sec]) {
				t.Fatalf("step %d (%s): record of %s kept %v with users %v, known %v", step, what, sec, kept, want, known[sec])
			}
		}
		for _, ing := range ingressNames {
			var want []types.NamespacedName
			for _, sec := range secretNames {
				if refs[ing][sec] {
					want = append(want, key(sec))
				}
			}
			if got := expandKeys(ns, e.syncer.byIngress[key(ing)], e.syncer.moreSecrets[key(ing)]); !slices.Equal(got, want) {
				t.Fatalf("step %d (%s): %s references %v, want %v", step, what, ing, got, want)
			}
		}
		invalid := 0
		for _, p := range problems {
			if p {
				invalid++
			}
		}
		if got, _ := e.gauge("ingress_reactor_ssl_invalid_secrets"); got != float64(invalid) {
			t.Fatalf("step %d (%s): invalid secrets gauge %g, want %d", step, what, got, invalid)
		}
	}
}

// TestCompactKeySetsMatchPlainSets stores random sets of keys, over several namespaces, as a Secret's
// users and as an Ingress's Secrets, and reads them back: they equal the plain sorted sets, and they are
// kept in the compact form (a single key in the owner's namespace without a slice; no empty entries).
func TestCompactKeySetsMatchPlainSets(t *testing.T) {
	e := newEnv(t, "")
	s := e.syncer
	namespaces := []string{ns, "other", "z"}
	var pool []types.NamespacedName
	for _, n := range namespaces {
		for _, name := range []string{"a", "b", "c"} {
			pool = append(pool, types.NamespacedName{Namespace: n, Name: name})
		}
	}
	owners := pool[:5]
	plain := map[types.NamespacedName][]types.NamespacedName{}
	rng := mrand.New(mrand.NewPCG(9, 9))
	for step := range 3000 {
		owner := owners[rng.IntN(len(owners))]
		set := plain[owner]
		k := pool[rng.IntN(len(pool))]
		if rng.IntN(2) == 0 {
			set = insertKey(slices.Clone(set), k)
		} else {
			set = removeKey(slices.Clone(set), k)
		}
		if len(set) == 0 {
			set = nil
		}
		plain[owner] = set
		s.mu.Lock()
		s.setUsers(owner, insertKey(removeKey(slices.Clone(s.usersLocked(owner)), k), k)) // any edit, then the wanted set
		s.setUsers(owner, slices.Clone(set))
		setCompact(s.byIngress, s.moreSecrets, owner, slices.Clone(set))
		s.mu.Unlock()

		for _, o := range owners {
			want := plain[o]
			s.mu.Lock()
			users := s.usersLocked(o)
			secrets := expandKeys(o.Namespace, s.byIngress[o], s.moreSecrets[o])
			rec, kept := s.records[o]
			more, hasMore := s.moreUsers[o]
			s.mu.Unlock()
			if !slices.Equal(users, want) || !slices.Equal(secrets, want) {
				t.Fatalf("step %d: %v holds users %v and secrets %v, want %v", step, o, users, secrets, want)
			}
			single := len(want) == 1 && want[0].Namespace == o.Namespace
			if kept != (len(want) > 0) || (rec.user != "") != single || hasMore != (len(want) > 0 && !single) || (hasMore && len(more) == 0) {
				t.Fatalf("step %d: %v with %v stored as record %v (user %q), more %v (%v)", step, o, want, kept, rec.user, more, hasMore)
			}
			if _, one := s.byIngress[o]; one != single {
				t.Fatalf("step %d: %v with %v: single name stored %v", step, o, want, one)
			}
		}
	}
}
