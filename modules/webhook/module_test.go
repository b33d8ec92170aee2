package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// ourClass is the class the tests' filter accepts.
const ourClass = "ours"

// writeCertificate writes a self-signed certificate for 127.0.0.1 and its key to dir and returns the
// files and the certificate.
func writeCertificate(tb testing.TB, dir, cn string) (certFile, keyFile string, cert *x509.Certificate) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	// Written beside and renamed, as cert-manager's Secret volumes do: a reader never sees half a file.
	for file, data := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(file+".new", data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	// The key first: a certificate without its key would not load, and the watch would keep the old one
	// until the second rename.
	for _, file := range []string{keyFile, certFile} {
		if err := os.Rename(file+".new", file); err != nil {
			tb.Fatal(err)
		}
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return certFile, keyFile, cert
}

// newWebhook builds the webhook over a fake API holding objs, with the caches synced, not yet serving.
func newWebhook(tb testing.TB, objs ...runtime.Object) (*Webhook, *moduletest.Harness) {
	tb.Helper()
	h := moduletest.New(tb, objs...)
	certFile, keyFile, _ := writeCertificate(tb, tb.TempDir(), "webhook")
	res, err := New(Params{
		Options: Options{
			Address:  "127.0.0.1:0",
			CertFile: certFile, KeyFile: keyFile,
			Accepts: func(ing *networkingv1.Ingress) bool {
				return ing.Spec.IngressClassName != nil && *ing.Spec.IngressClassName == ourClass
			},
			Translate: nginx.DefaultTranslateOptions(),
		},
		Factory:  h.Factory,
		Registry: h.Registry,
		Log:      h.Log,
	})
	if err != nil {
		tb.Fatal(err)
	}
	h.Start()
	res.Webhook.ready.Store(true)
	return res.Webhook, h
}

type ingOption func(*networkingv1.Ingress)

func ingress(ns, name, host string, opts ...ingOption) *networkingv1.Ingress {
	pt := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(ourClass),
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
			}}}},
		},
	}
	for _, o := range opts {
		o(ing)
	}
	return ing
}

func annotated(k, v string) ingOption {
	return func(ing *networkingv1.Ingress) {
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[k] = v
	}
}

func class(name string) ingOption {
	return func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To(name) }
}

// created makes the Ingress a new one, as the API server sends it for admission: no resourceVersion
// yet, created now.
func created(ing *networkingv1.Ingress) {
	ing.CreationTimestamp = metav1.NewTime(time.Now())
	ing.ResourceVersion = ""
}

func webService(ns string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
}

// review returns the JSON of an AdmissionReview of op on ing.
func review(tb testing.TB, op admissionv1.Operation, ing *networkingv1.Ingress) []byte {
	tb.Helper()
	raw, err := json.Marshal(ing)
	if err != nil {
		tb.Fatal(err)
	}
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "req-1", Kind: metav1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
			Resource:  metav1.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
			Namespace: ing.Namespace, Name: ing.Name, Operation: op,
		},
	}
	if op != admissionv1.Delete {
		r.Request.Object = runtime.RawExtension{Raw: raw}
	} else {
		r.Request.OldObject = runtime.RawExtension{Raw: raw}
	}
	b, err := json.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// post sends body to the handler and returns the status and, for 200, the decoded response.
func post(tb testing.TB, h http.Handler, method, path, contentType string, body []byte) (int, *admissionv1.AdmissionResponse, string) {
	tb.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return rec.Code, nil, rec.Body.String()
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		tb.Fatalf("response is not an AdmissionReview: %v: %s", err, rec.Body.String())
	}
	uid := types.UID("req-1")
	if in, err := decodeReview(body); err == nil {
		uid = in.Request.UID
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil || out.Response.UID != uid {
		tb.Fatalf("response does not answer the request: %s", rec.Body.String())
	}
	return rec.Code, out.Response, rec.Body.String()
}

func TestHandler(t *testing.T) {
	older := ingress("team-a", "shop", "shop.example.com")
	w, h := newWebhook(t, webService("team-a"), webService("team-b"), older)
	handler := w.Handler()
	good := ingress("team-b", "blog", "blog.example.com", created)
	withReview := func(mutate func(map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(review(t, admissionv1.Create, good), &m); err != nil {
			t.Fatal(err)
		}
		mutate(m)
		b, _ := json.Marshal(m)
		return b
	}
	request := func(m map[string]any) map[string]any { return m["request"].(map[string]any) }
	object := func(m map[string]any) map[string]any { return request(m)["object"].(map[string]any) }
	cases := map[string]struct {
		method, path, contentType string
		body                      []byte
		notReady                  bool
		wantCode                  int
		wantAllowed               bool
		// wantMessage is a substring of the denial, or of the error body when wantCode is not 200.
		wantMessage string
		// wantWarnings are substrings, one per warning.
		wantWarnings []string
		wantResult   string
	}{
		"good Ingress": {body: review(t, admissionv1.Create, good), wantCode: 200, wantAllowed: true, wantResult: resultAllowed},
		"bad annotation value": {
			body:     review(t, admissionv1.Create, ingress("team-b", "blog", "blog.example.com", created, annotated(nginx.AnnotationSSLRedirect, "maybe"))),
			wantCode: 200, wantMessage: "ingress team-b/blog rejected: metadata.annotations[" + nginx.AnnotationSSLRedirect + "]", wantResult: resultDenied,
		},
		"hostile annotation value": {
			body: review(t, admissionv1.Create, ingress("team-b", "blog", "blog.example.com", created,
				annotated(nginx.AnnotationSSLRedirect, "true; } server { listen 81; return 200; } #"))),
			wantCode: 200, wantMessage: "metadata.annotations[" + nginx.AnnotationSSLRedirect + "]", wantResult: resultDenied,
		},
		"conflicting host: allowed with a warning": {
			body:     review(t, admissionv1.Create, ingress("team-b", "shop-copy", "shop.example.com", created)),
			wantCode: 200, wantAllowed: true, wantResult: resultWarned,
			wantWarnings: []string{`path "/" (Prefix) on host shop.example.com is already served by Ingress team-a/shop, which is older`},
		},
		"missing Service: allowed with a warning": {
			body:     review(t, admissionv1.Create, ingress("team-c", "blog", "c.example.com", created)),
			wantCode: 200, wantAllowed: true, wantResult: resultWarned, wantWarnings: []string{"team-c/web"},
		},
		"update of the older Ingress itself": {
			body:     review(t, admissionv1.Update, ingress("team-a", "shop", "shop.example.com", annotated(nginx.AnnotationSSLRedirect, "false"))),
			wantCode: 200, wantAllowed: true, wantResult: resultAllowed,
		},
		"another class: allowed untouched": {
			body:     review(t, admissionv1.Create, ingress("team-b", "blog", "blog.example.com", created, class("other"), annotated(nginx.AnnotationSSLRedirect, "maybe"))),
			wantCode: 200, wantAllowed: true, wantResult: resultSkipped,
		},
		"DELETE": {body: review(t, admissionv1.Delete, ingress("team-a", "shop", "shop.example.com")), wantCode: 200, wantAllowed: true, wantResult: resultSkipped},
		"another resource": {
			body: withReview(func(m map[string]any) {
				request(m)["kind"] = map[string]any{"group": "", "version": "v1", "kind": "Service"}
			}),
			wantCode: 200, wantAllowed: true, wantResult: resultSkipped,
		},
		"status subresource": {
			body:     withReview(func(m map[string]any) { request(m)["subResource"] = "status" }),
			wantCode: 200, wantAllowed: true, wantResult: resultSkipped,
		},
		"malformed JSON": {body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{`), wantCode: 400, wantMessage: "not an AdmissionReview", wantResult: resultInvalid},
		"wrong kind": {
			body: withReview(func(m map[string]any) { m["kind"] = "Ingress" }), wantCode: 400, wantMessage: "kind AdmissionReview", wantResult: resultInvalid,
		},
		"v1beta1 review": {
			body: withReview(func(m map[string]any) { m["apiVersion"] = "admission.k8s.io/v1beta1" }), wantCode: 400, wantMessage: "admission.k8s.io/v1", wantResult: resultInvalid,
		},
		"field names in the wrong case": {
			body:     withReview(func(m map[string]any) { m["Request"] = m["request"]; delete(m, "request") }),
			wantCode: 400, wantMessage: "without a request", wantResult: resultInvalid,
		},
		"no uid": {
			body: withReview(func(m map[string]any) { delete(request(m), "uid") }), wantCode: 400, wantMessage: "uid", wantResult: resultInvalid,
		},
		"a response already": {
			body:     withReview(func(m map[string]any) { m["response"] = map[string]any{"uid": "x", "allowed": true} }),
			wantCode: 400, wantMessage: "response", wantResult: resultInvalid,
		},
		"object of another kind": {
			body: withReview(func(m map[string]any) { object(m)["kind"] = "Service" }), wantCode: 400, wantMessage: "kind Ingress", wantResult: resultInvalid,
		},
		"object of another namespace than the request": {
			body: withReview(func(m map[string]any) { object(m)["metadata"].(map[string]any)["namespace"] = "team-a" }), wantCode: 400,
			wantMessage: "not the request's", wantResult: resultInvalid,
		},
		"object not an object": {
			body: withReview(func(m map[string]any) { request(m)["object"] = []any{1, 2} }), wantCode: 400, wantMessage: "not an Ingress", wantResult: resultInvalid,
		},
		"no object": {
			body: withReview(func(m map[string]any) { delete(request(m), "object") }), wantCode: 400, wantMessage: "without an object", wantResult: resultInvalid,
		},
		"huge body": {
			body: withReview(func(m map[string]any) {
				object(m)["metadata"].(map[string]any)["annotations"] = map[string]any{"x": strings.Repeat("a", MaxBodyBytes)}
			}),
			wantCode: 413, wantMessage: "at most", wantResult: resultInvalid,
		},
		"GET":                {method: http.MethodGet, wantCode: 405, wantResult: resultInvalid},
		"another path":       {path: "/healthz", body: review(t, admissionv1.Create, good), wantCode: 404},
		"path below":         {path: Path + "/x", body: review(t, admissionv1.Create, good), wantCode: 404},
		"not JSON":           {contentType: "text/plain", body: review(t, admissionv1.Create, good), wantCode: 415, wantResult: resultInvalid},
		"caches not synced":  {notReady: true, body: review(t, admissionv1.Create, good), wantCode: 503, wantResult: resultUnavailable},
		"not synced, others": {notReady: true, body: review(t, admissionv1.Create, ingress("x", "y", "a.example", class("other"))), wantCode: 200, wantAllowed: true, wantResult: resultSkipped},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			method, path, ct := cmpOr(tc.method, http.MethodPost), cmpOr(tc.path, Path), cmpOr(tc.contentType, "application/json")
			w.ready.Store(!tc.notReady)
			var before float64
			if tc.wantResult != "" {
				before, _ = moduletest.LookupMetric(t, h.Registry, "ingress_reactor_admission_requests_total", "result", tc.wantResult)
			}
			code, resp, body := post(t, handler, method, path, ct, tc.body)
			if code != tc.wantCode {
				t.Fatalf("status %d, want %d: %s", code, tc.wantCode, body)
			}
			if tc.wantResult != "" {
				if after := moduletest.MetricValue(t, h.Registry, "ingress_reactor_admission_requests_total", "result", tc.wantResult); after != before+1 {
					t.Errorf("requests{result=%s} went from %v to %v", tc.wantResult, before, after)
				}
			}
			if code != http.StatusOK {
				if !strings.Contains(body, tc.wantMessage) {
					t.Errorf("body %q, want it to contain %q", body, tc.wantMessage)
				}
				return
			}
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed %v, want %v: %s", resp.Allowed, tc.wantAllowed, body)
			}
			if !tc.wantAllowed {
				if resp.Result == nil || resp.Result.Code != http.StatusBadRequest || !strings.Contains(resp.Result.Message, tc.wantMessage) {
					t.Fatalf("denial %+v, want code 400 and a message containing %q", resp.Result, tc.wantMessage)
				}
			}
			if len(resp.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %d like %q", resp.Warnings, len(tc.wantWarnings), tc.wantWarnings)
			}
			for i, want := range tc.wantWarnings {
				if !strings.Contains(resp.Warnings[i], want) {
					t.Errorf("warning %q, want it to contain %q", resp.Warnings[i], want)
				}
			}
		})
	}
	w.ready.Store(true)
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// TestServer runs the webhook's TLS server: TLS 1.2 and newer only, the certificate read again when its
// files change, a stop that ends serving.
func TestServer(t *testing.T) {
	w, h := newWebhook(t, webService("team-a"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr := w.Addr().String()
	serverCert := func(maxVersion uint16) (*x509.Certificate, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: maxVersion}) //nolint:gosec // the test reads what the server presents
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	if _, err := serverCert(tls.VersionTLS11); err == nil {
		t.Fatal("TLS 1.1 handshake succeeded")
	}
	first, err := serverCert(tls.VersionTLS12)
	if err != nil {
		t.Fatalf("TLS 1.2 handshake: %v", err)
	}

	// A round trip through the TLS server with the certificate trusted.
	pool := x509.NewCertPool()
	pool.AddCert(first)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Post("https://"+addr+Path, "application/json", bytes.NewReader(review(t, admissionv1.Create, ingress("team-a", "x", "x.example.com", created))))
	if err != nil {
		t.Fatal(err)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil || !out.Response.Allowed {
		t.Fatalf("response %+v, %v", out.Response, err)
	}
	resp.Body.Close()

	// Rotation: new files in place; the next handshakes present the new certificate. A broken pair
	// keeps the current one.
	dir := filepath.Dir(w.opts.CertFile)
	_, _, rotated := writeCertificate(t, dir, "rotated")
	moduletest.Eventually(t, "the rotated certificate to be served", func() bool {
		c, err := serverCert(0)
		return err == nil && c.Subject.CommonName == "rotated" && c.Equal(rotated)
	})
	if err := os.WriteFile(w.opts.CertFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the failed reload to be counted", func() bool {
		v, _ := moduletest.LookupMetric(t, h.Registry, "ingress_reactor_admission_certificate_reloads_total", "result", "failure")
		return v >= 1
	})
	if c, err := serverCert(0); err != nil || !c.Equal(rotated) {
		t.Fatalf("after a broken certificate file: %v, %v; want the rotated certificate still", c, err)
	}

	stopCtx, stopCancel := context.WithTimeout(context.Background(), moduletest.WaitLimit)
	defer stopCancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if _, err := serverCert(0); err == nil {
		t.Fatal("handshake after Stop succeeded")
	}
}

// TestHandlerBoundsConcurrentReviews: while as many reviews as allowed run, another waits, and is
// answered 503 when its request ends first; it is judged once a slot frees up.
func TestHandlerBoundsConcurrentReviews(t *testing.T) {
	w, _ := newWebhook(t, webService("team-a"))
	for range cap(w.reviews) {
		w.reviews <- struct{}{}
	}
	body := review(t, admissionv1.Create, ingress("team-a", "blog", "blog.example.com", created))
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { w.Handler().ServeHTTP(rec, req); close(done) }()
	select {
	case <-done:
		t.Fatalf("answered %d while every slot was taken", rec.Code)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	<-done
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "too many") {
		t.Fatalf("status %d %q, want 503", rec.Code, rec.Body.String())
	}
	<-w.reviews // one slot frees up
	if code, resp, text := post(t, w.Handler(), http.MethodPost, Path, "application/json", body); code != http.StatusOK || !resp.Allowed {
		t.Fatalf("status %d: %s", code, text)
	}
}

// TestConcurrentReviewsWhileIngressesChange runs reviews in parallel, all on the hosts of cached
// Ingresses that are updated and deleted meanwhile, so that they share the translation cache and the
// informer's objects: under -race it finds unsynchronized access; every review must still be answered.
func TestConcurrentReviewsWhileIngressesChange(t *testing.T) {
	var objs []runtime.Object
	objs = append(objs, webService("team-a"), webService("team-b"))
	for i := range 8 {
		objs = append(objs, ingress("team-a", fmt.Sprintf("ing-%d", i), fmt.Sprintf("h%d.example.com", i%4), withTLSHosts("*.example.com")))
	}
	w, h := newWebhook(t, objs...)
	handler := w.Handler()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 40 {
				ing := ingress("team-b", fmt.Sprintf("cand-%d", g), fmt.Sprintf("h%d.example.com", i%4), created, withTLSHosts("*.example.com"))
				if code, _, text := post(t, handler, http.MethodPost, Path, "application/json", review(t, admissionv1.Create, ing)); code != http.StatusOK {
					t.Errorf("status %d: %s", code, text)
					return
				}
			}
		})
	}
	ings := h.Client.NetworkingV1()
	for i := range 40 {
		ing := ingress("team-a", fmt.Sprintf("ing-%d", i%8), fmt.Sprintf("h%d.example.com", (i+1)%4), withTLSHosts("*.example.com"))
		ing.ResourceVersion = ""
		if i%5 == 4 {
			if err := ings.Ingresses("team-a").Delete(t.Context(), ing.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			continue
		}
		if _, err := ings.Ingresses("team-a").Update(t.Context(), ing, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			_, err = ings.Ingresses("team-a").Create(t.Context(), ing, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}
