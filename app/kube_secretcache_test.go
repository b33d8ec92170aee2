package app

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/internal/gen"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/modules/secretsync"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// newSecretWatch is a lossyWatch of every Secret.
func newSecretWatch(client kubernetes.Interface) *lossyWatch {
	return newLossyWatch(client, client.CoreV1().Secrets("").List, client.CoreV1().Secrets("").Watch)
}

// TestSecretCacheOfRecords: through a real informer with the cache transform (and the app's sharing of
// unchanged values), the Secret cache holds records, keyed by namespace and name, and the modules that
// read it follow Secrets as they are added, updated and deleted, a deletion learnt from a new list (a
// tombstone) too. secretsync publishes the certificate of a TLS Secret, whose PEM shares the record's
// bytes; a label-only update publishes nothing and the new record keeps sharing those bytes; a new key
// publishes a new certificate; a deletion withdraws it. The renderer serves the users of a basic-auth
// Secret, follows their change and rejects the Ingress once the Secret is gone. No log line and no Event
// holds secret material.
func TestSecretCacheOfRecords(t *testing.T) {
	ctx := t.Context()
	certA, keyA := benchECDSACert(t)
	certB, keyB := benchECDSACert(t)
	const host = "app.example.com"
	aliceLine := []byte("alice:$apr1$saltsalt$64vPg1.FPS6FtcYJ7Ti1V.\n")
	bobLine := []byte("bob:$apr1$saltsalt$64vPg1.FPS6FtcYJ7Ti1V.\n")
	tlsKey := types.NamespacedName{Namespace: "ns", Name: "site-tls"}
	client := fake.NewClientset(
		gen.Service("ns", "web", gen.Port("http", 80)),
		gen.Ingress("ns", "site", gen.TLS("site-tls", host), gen.Rule(host, "/", gen.Backend("web", 80)),
			gen.Annotations(nginx.AnnotationAuthType, "basic", nginx.AnnotationAuthSecret, "basic-auth")),
		gen.Secret("ns", "site-tls", gen.TLSData(certA, keyA), gen.ResourceVersion("1"),
			gen.Annotations("cert-manager.io/issuer-name", "letsencrypt")),
		gen.Secret("ns", "basic-auth", gen.Data("auth", aliceLine), gen.Data("notes", []byte("rotated monthly")), gen.ResourceVersion("1")),
	)
	sw := newSecretWatch(client)
	secInf := newRecordInformer(t, client, sw, &corev1.Secret{})
	factory := secInf.factory
	if err := shareUnchangedSecretData(secInf); err != nil {
		t.Fatal(err)
	}

	h := moduletest.New(t)
	store, err := certs.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	certChanges := pipeline.NewTopic[modules.CertChange]("cert-changes")
	t.Cleanup(certChanges.Close)
	gotCerts := moduletest.Collect(certChanges)
	syncer, err := secretsync.New(secretsync.Params{Options: secretsync.Options{Store: store}, Factory: factory,
		IngressChanges: h.IngressChanges, CertChanges: certChanges, Recorder: h.Recorder, Metrics: h.Metrics, Registry: h.Registry, Log: h.Log})
	if err != nil {
		t.Fatal(err)
	}
	r, renders := newRecordRenderer(t, h, factory)
	secInf.start(t)
	h.Run(syncer)
	h.Run(r)
	announceIngress(t, h, "ns", "site")

	record := func(name, rv string) *modules.SecretRecord {
		t.Helper()
		var rec *modules.SecretRecord
		moduletest.Eventually(t, fmt.Sprintf("the cache to hold ns/%s at %s", name, rv), func() bool {
			o, exists, err := secInf.GetIndexer().GetByKey("ns/" + name)
			rec, _ = o.(*modules.SecretRecord)
			return err == nil && exists && rec != nil && rec.GetResourceVersion() == rv
		})
		return rec
	}
	sameBytes := func(a, b []byte) bool { return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] }
	published := func(what string) *certs.Certificate {
		t.Helper()
		var cert *certs.Certificate
		gotCerts.WaitFor(t, what, func(c modules.CertChange) bool {
			cert = c.Certificate
			return c.Secret == tlsKey && c.Certificate != nil
		})
		return cert
	}
	withdrawn := func(what string) {
		t.Helper()
		gotCerts.WaitFor(t, what, func(c modules.CertChange) bool { return c.Secret == tlsKey && c.Certificate == nil })
	}
	// users waits for a render whose location for the Ingress admits exactly the users named (none: the
	// Ingress is not served).
	users := func(what string, want ...string) {
		t.Helper()
		renders.WaitFor(t, what, func(m modules.Rendered) bool {
			var got *nginx.RouteOptions
			served := false
			for _, s := range m.Model.Servers {
				for _, l := range s.Locations {
					if s.Host == host && l.Ingress.Name == "site" {
						served, got = true, l.Options
					}
				}
			}
			if len(want) == 0 {
				return !served
			}
			if !served || got == nil {
				return false
			}
			for _, u := range []string{"alice", "bob"} {
				if strings.Contains(got.AuthUsers, u+":") != strings.Contains(strings.Join(want, ","), u) {
					return false
				}
			}
			return true
		})
	}

	// Added: the certificate is published and shares its PEM with the record's value.
	first := published("the first certificate")
	rec := record("site-tls", "1")
	crt, ok := rec.Value(corev1.TLSCertKey)
	if !ok || !sameBytes(first.ChainPEM, crt) {
		t.Fatal("the published certificate's PEM does not share the record's tls.crt bytes")
	}
	if rec.Len() != 2 || rec.Type() != corev1.SecretTypeTLS {
		t.Errorf("the TLS Secret's record keeps %d entries of type %q, want 2 of %q", rec.Len(), rec.Type(), corev1.SecretTypeTLS)
	}
	users("the basic-auth Secret's user served", "alice")
	if auth := record("basic-auth", "1"); auth.Len() != 1 {
		t.Errorf("the basic-auth Secret's record keeps %d entries, want auth alone", auth.Len())
	}

	secrets := client.CoreV1().Secrets("ns")
	update := func(s *corev1.Secret) {
		t.Helper()
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A label-only update (the fake API sets no resource versions: each update sets its own): the new
	// record keeps the cached bytes, which the published certificate shares.
	update(gen.Secret("ns", "site-tls", gen.TLSData(bytes.Clone(certA), bytes.Clone(keyA)), gen.ResourceVersion("2"), gen.Labels("renewed", "no")))
	rec = record("site-tls", "2")
	if crt, _ := rec.Value(corev1.TLSCertKey); !sameBytes(first.ChainPEM, crt) {
		t.Error("after a label-only update the record no longer shares the published certificate's PEM")
	}
	// A new key and certificate: a new certificate is published, and the label-only update published
	// nothing before it (its sync comes first, or is merged into this one).
	update(gen.Secret("ns", "site-tls", gen.TLSData(certB, keyB), gen.ResourceVersion("3")))
	changes := gotCerts.WaitFor(t, "the second certificate", func(c modules.CertChange) bool {
		return c.Secret == tlsKey && c.Certificate != nil && c.Certificate.ContentHash != first.ContentHash
	})
	if len(changes) != 1 {
		t.Errorf("%d certificate changes up to the new key's, want that one alone: %+v", len(changes), changes)
	}
	second := changes[len(changes)-1].Certificate
	rec = record("site-tls", "3")
	if crt, _ := rec.Value(corev1.TLSCertKey); !sameBytes(second.ChainPEM, crt) || sameBytes(first.ChainPEM, crt) {
		t.Error("the new certificate's PEM does not share the new record's tls.crt bytes")
	}

	// The basic-auth Secret's user changes; then it loses its auth key (the notes are not kept either).
	update(gen.Secret("ns", "basic-auth", gen.Data("auth", bobLine), gen.ResourceVersion("2")))
	users("the changed user served", "bob")
	update(gen.Secret("ns", "basic-auth", gen.Data("notes", []byte("moved")), gen.ResourceVersion("3")))
	if rec := record("basic-auth", "3"); rec.Len() != 0 || rec.Secret().Data != nil {
		t.Errorf("a Secret without kept entries keeps %d", rec.Len())
	}
	users("the Ingress not served without the auth key")
	update(gen.Secret("ns", "basic-auth", gen.Data("auth", aliceLine), gen.ResourceVersion("4")))
	users("the user served again", "alice")

	// Deleted: the certificate is withdrawn; the Ingress is rejected without its basic-auth Secret.
	if err := secrets.Delete(ctx, "site-tls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	withdrawn("the certificate withdrawn once the Secret is deleted")
	if err := secrets.Delete(ctx, "basic-auth", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	users("the Ingress not served once its basic-auth Secret is deleted")

	// Created again, then deleted while the watch loses events: the informer learns of the deletion from
	// the next list, through a tombstone that carries the record.
	if _, err := secrets.Create(ctx, gen.Secret("ns", "site-tls", gen.TLSData(certA, keyA), gen.ResourceVersion("5")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	published("the certificate of the recreated Secret")
	record("site-tls", "5")
	sw.lose()
	if err := secrets.Delete(ctx, "site-tls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sw.expire <- struct{}{}
	withdrawn("the certificate withdrawn once the tombstone arrives")
	if _, exists, _ := secInf.GetIndexer().GetByKey("ns/site-tls"); exists {
		t.Error("the Secret deleted while the watch was losing events is still cached")
	}
	tomb := secInf.tombstone(t, "the tombstone of site-tls")
	if rec, ok := tomb.(*modules.SecretRecord); !ok || rec.GetName() != "site-tls" || rec.GetResourceVersion() != "5" {
		t.Errorf("the tombstone carries %#v, want site-tls's record", tomb)
	}

	// Nothing logged or told holds secret material: no PEM, no key, no password hash.
	var told []string
	for _, e := range h.Logs.All() {
		told = append(told, e.Message, fmt.Sprint(e.ContextMap()))
	}
	for _, e := range h.Recorder.All() {
		told = append(told, e.Message)
	}
	if len(told) == 0 {
		t.Fatal("nothing was logged")
	}
	secretParts := []string{"PRIVATE KEY", "BEGIN CERTIFICATE", "$apr1$", "64vPg1"}
	for _, pemData := range [][]byte{certA, keyA, certB, keyB} {
		for _, line := range strings.Split(string(pemData), "\n") {
			if len(line) > 16 && !strings.HasPrefix(line, "-----") {
				secretParts = append(secretParts, line)
			}
		}
	}
	for _, line := range told {
		for _, p := range secretParts {
			if strings.Contains(line, p) {
				t.Errorf("secret material %q in %q", p, line)
			}
		}
	}
}
