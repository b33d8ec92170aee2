package webhook

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// hostileValues are annotation values that try to leave their place in nginx.conf or in the route push
// (a selection of nginx/ann_injection_test.go's corpus, which checks each at the translation level).
var hostileValues = []string{
	`true; } server { listen 81; return 200; } #`, "false\n}\nhttp {", `"true"`, `\`, `$host`, "true\x00", ";", "{", "}",
	"10.0.0.0/8 } location / { return 200; }", "https://a.example/\r\nSet-Cookie: x=1", "https://a.example/;}location/{return 200;}#",
	"8m; }", "60s;", "http://auth.example.com/#;\n}}\nserver { listen 80; location / { return 200 pwned; } }\n#",
	"http://auth.example.com/auth;\nload_module /tmp/evil.so;#", `Staff" , Basic realm="x`, "CN=abc$\" ) { return 200; } } load_module /tmp/evil.so; server { #",
	"any; allow all", "$remote_user$http_authorization;}", "X-Canary\r\nX-Evil: 1", "SESSION; Domain=evil.example", "$ingress_reactor_token",
	"default/../../etc/passwd", "\xff\xfe", strings.Repeat("{", 4096),
}

// supportedAnnotations are the annotations the registry supports, sorted.
func supportedAnnotations() []nginx.AnnotationSpec {
	var out []nginx.AnnotationSpec
	for _, s := range nginx.AnnotationRegistry() {
		if s.Status == nginx.AnnotationSupported {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// checkVerdict asserts what every answer of the handler must satisfy: a known status; for 200 an
// AdmissionReview answering the request; and an Ingress of ours is admitted exactly when the renderer's
// translation accepts it (the same lookups and options), so nothing the webhook lets through is
// something the controller would refuse, and the reverse.
func checkVerdict(t *testing.T, w *Webhook, body []byte) (code int, allowed bool) {
	t.Helper()
	code, resp, text := post(t, w.Handler(), http.MethodPost, Path, "application/json", body)
	switch code {
	case http.StatusOK:
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return code, false
	default:
		t.Fatalf("status %d: %s", code, text)
	}
	review, err := decodeReview(body)
	if err != nil {
		t.Fatalf("answered 200 to a body that does not decode: %v", err)
	}
	req := review.Request
	if req.Kind != ingressGVK || req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		if !resp.Allowed {
			t.Fatalf("denied a request that is not an Ingress write: %s", text)
		}
		return code, true
	}
	ing, err := decodeIngress(req)
	if err != nil {
		t.Fatalf("answered 200 to an object that does not decode: %v", err)
	}
	if !w.opts.Accepts(ing) {
		if !resp.Allowed {
			t.Fatalf("denied an Ingress of another class: %s", text)
		}
		return code, true
	}
	_, terr := nginx.TranslateIngressWith(ing, nginx.Lookups{
		Services:   nginx.ServiceLookupFunc(w.lookupService),
		Secrets:    nginx.SecretLookupFunc(w.lookupSecret),
		ConfigMaps: nginx.ConfigMapLookupFunc(w.lookupConfigMap),
	}, w.opts.Translate)
	if resp.Allowed != (terr == nil) {
		t.Fatalf("allowed %v, but translation says %v: %s", resp.Allowed, terr, text)
	}
	if !resp.Allowed && (resp.Result == nil || resp.Result.Message != terr.Error()) {
		t.Fatalf("denial %+v, want the translation's error %q", resp.Result, terr)
	}
	for _, warning := range resp.Warnings {
		if strings.ContainsFunc(warning, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.Fatalf("warning with a control character: %q", warning)
		}
	}
	return code, resp.Allowed
}

// TestHandlerInjection sends the hostile values in every supported annotation through the handler: an
// Ingress is admitted exactly when translation accepts it. Which values translation accepts (ignored
// with a warning, or valid for that annotation, such as a URL) and that they stay out of nginx.conf's
// structure is what nginx's injection tests check.
func TestHandlerInjection(t *testing.T) {
	w, _ := newWebhook(t, webService("team-a"))
	denied, total := 0, 0
	for _, spec := range supportedAnnotations() {
		for _, v := range hostileValues {
			ing := ingress("team-a", "hostile", "hostile.example.com", created, annotated(spec.Key(), v))
			if _, allowed := checkVerdict(t, w, review(t, admissionv1.Create, ing)); !allowed {
				denied++
			}
			total++
		}
	}
	if denied < total/3 {
		t.Fatalf("only %d of %d hostile values were refused: the Ingress around them no longer reaches translation", denied, total)
	}
}

// FuzzHandler sends hostile AdmissionReviews to the handler: it never panics, answers with a known
// status, and admits an Ingress of ours exactly when the renderer's translation accepts it.
func FuzzHandler(f *testing.F) {
	w, _ := newWebhook(f, webService("team-a"), ingress("team-a", "shop", "shop.example.com"))
	specs := supportedAnnotations()
	for i, v := range hostileValues {
		if len(v) > 1000 {
			continue
		}
		ing := ingress("team-a", "hostile", "hostile.example.com", created, annotated(specs[i*7%len(specs)].Key(), v))
		f.Add(review(f, admissionv1.Create, ing))
	}
	f.Add(review(f, admissionv1.Create, ingress("team-a", "blog", "blog.example.com", created)))
	f.Add(review(f, admissionv1.Update, ingress("team-b", "shop", "shop.example.com")))
	f.Add(review(f, admissionv1.Delete, ingress("team-a", "shop", "shop.example.com")))
	f.Add(review(f, admissionv1.Create, ingress("team-a", "other", "a.example.com", class("other"))))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"networking.k8s.io","version":"v1","kind":"Ingress"},"operation":"CREATE","namespace":"team-a","object":{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"x"},"spec":{"rules":[{"host":"a..b","http":{"paths":[{"path":"/","pathType":"Exact","backend":{"service":{"name":"web","port":{"number":80}}}}]}}],"ingressClassName":"ours"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":null}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"networking.k8s.io","version":"v1","kind":"Ingress"},"operation":"UPDATE","object":{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","spec":{"ingressClassName":"ours","tls":[{"hosts":["*.example.com"],"secretName":"x"}],"defaultBackend":{"service":{"name":"web","port":{"name":"http"}}}}}}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"networking.k8s.io","version":"v1","kind":"Ingress"},"operation":"CREATE","object":{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","spec":{"ingressClassName":"ours","rules":[{"host":"x","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"web","port":{"number":80}}}}]}}]}}},"request":{"uid":"v"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkVerdict(t, w, body)
	})
}

// BenchmarkAdmission5000 measures an admission request answered in-process (decoding, the review, the
// response) with 5,000 Ingresses of our class in the cache, two per host, each with TLS, half of them
// with from-to-www-redirect, for a new host,
// a host in use (a lost conflict), an update of a cached Ingress, and an Ingress whose wildcard TLS entry
// covers all 2,500 hosts: without and with another entry for the wildcard in its namespace (which merges
// the hosts of its namespace). Each reports the 50th and 99th percentile.
func BenchmarkAdmission5000(b *testing.B) {
	const n = 5000
	objs := []runtime.Object{}
	for ns := range 50 {
		objs = append(objs, webService(fmt.Sprintf("ns-%d", ns)))
	}
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		ing := ingress(fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("ing-%d", i), fmt.Sprintf("app-%d.example.com", i/2))
		ing.CreationTimestamp.Time = epoch.Add(time.Duration(i) * time.Second)
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{ing.Spec.Rules[0].Host}, SecretName: "cert"}}
		if i%2 == 1 { // half of them answer the www twin of their host too
			annotated(nginx.AnnotationFromToWWWRedirect, "true")(ing)
		}
		objs = append(objs, ing)
	}
	// An Ingress of ns-5 lists the wildcard with another Secret: a wildcard entry of ns-5 may lose the
	// certificate of ns-5's hosts to it, which must be merged.
	rival := ingress("ns-5", "wild-rival", "rival.test", created, withTLSHosts("*.example.com"))
	rival.Spec.TLS[0].SecretName = "other"
	objs = append(objs, rival)
	w, _ := newWebhook(b, objs...)
	if got, _ := w.ingresses.List(labels.Everything()); len(got) != n+1 {
		b.Fatalf("cache holds %d Ingresses, want %d", len(got), n+1)
	}
	h := w.Handler()
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"new-host", review(b, admissionv1.Create, ingress("ns-1", "new", "new.example.com", created))},
		{"conflict", review(b, admissionv1.Create, ingress("ns-2", "conflict", "app-7.example.com", created))},
		{"update", review(b, admissionv1.Update, ingress("ns-3", "ing-3", "app-1.example.com"))},
		{"wildcard-tls-over-all-hosts", review(b, admissionv1.Create, ingress("ns-4", "wild", "*.example.com", created, withTLSHosts("*.example.com")))},
		{"wildcard-tls-with-a-rival", review(b, admissionv1.Create, ingress("ns-5", "wild", "*.example.com", created, withTLSHosts("*.example.com")))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			post(b, h, http.MethodPost, Path, "application/json", bc.body) // warms the translation cache, as the first requests after a start do
			durations := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				code, _, text := post(b, h, http.MethodPost, Path, "application/json", bc.body)
				durations = append(durations, time.Since(start))
				if code != http.StatusOK {
					b.Fatalf("status %d: %s", code, text)
				}
			}
			b.StopTimer()
			slices.Sort(durations)
			pct := func(p float64) float64 {
				return float64(durations[min(len(durations)-1, int(float64(len(durations))*p))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}

func withTLSHosts(hosts ...string) ingOption {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{Hosts: hosts, SecretName: "wild"})
	}
}
