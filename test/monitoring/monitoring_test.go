//go:build integration

package monitoring

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// Hosts and objects of the monitored workload.
const (
	shopHost   = "shop.monitoring.test"
	legacyHost = "legacy.monitoring.test"
	errorsHost = "errors.monitoring.test"
)

// scrapeInterval is the time between the three scrapes as the query engine sees them. The
// samples carry these timestamps rather than the wall clock's, so rate() has three points
// over a minute without the test waiting a minute.
const scrapeInterval = 30 * time.Second

// TestDashboardAndAlertsAgainstRunningController runs the controller on a real API server
// with real NGINX, sends traffic that yields 2xx, 3xx, 4xx and 5xx answers over HTTP and HTTPS to
// three Ingresses (two with TLS Secrets, one expiring within 14 days), makes a change that
// reloads NGINX, kills NGINX (the controller restarts it), and scrapes /metrics three times. The samples go into a Prometheus TSDB, and
// Prometheus's query engine then evaluates:
//   - every dashboard query, its variables substituted: each must return a sample that is
//     not NaN; a variable's label_values() must list the namespace and Ingresses under test;
//   - every alert expression with its thresholds removed: each must return samples, so it
//     provably reads series that exist; and each selector in it must match series;
//   - every alert expression as written: only the alerts this workload should raise (the
//     expiring certificate, the Ingress answering 503s, the NGINX restart) may fire, and
//     they must.
//
// The queries that read the request metrics (nginx_ingress_controller_*) are listed apart
// in the failure messages.
func TestDashboardAndAlertsAgainstRunningController(t *testing.T) {
	harness.RequireNetns(t)
	f := harness.New(t)

	web := f.StartBackend("web", false)
	f.CreateService("web", 80, web.Port)
	f.ServeBackends("web", web)
	f.CreateService("down", 80, 8080) // no endpoints: NGINX answers 503

	applyTLSSecret(f, "shop-tls", selfSigned(t, shopHost, 90*24*time.Hour))
	applyTLSSecret(f, "legacy-tls", selfSigned(t, legacyHost, 3*24*time.Hour))

	shop := f.Ingress("shop", shopHost,
		harness.IngressBackend{Path: "/", Service: "web", Port: 80},
		harness.IngressBackend{Path: "/down", Service: "down", Port: 80})
	shop.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{shopHost}, SecretName: "shop-tls"}}
	f.CreateIngress(shop)
	admin := f.Ingress("shop-admin", shopHost, harness.IngressBackend{Path: "/admin", Service: "web", Port: 80})
	admin.Annotations = map[string]string{"nginx.ingress.kubernetes.io/denylist-source-range": "127.0.0.0/8"}
	f.CreateIngress(admin)
	legacy := f.Ingress("legacy", legacyHost, harness.IngressBackend{Service: "web", Port: 80})
	legacy.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{legacyHost}, SecretName: "legacy-tls"}}
	f.CreateIngress(legacy)

	r := f.StartReactor()
	r.WaitReady()
	waitStatus(t, r, harness.Request{Host: shopHost, Path: "/", HTTPS: true}, http.StatusOK)
	waitStatus(t, r, harness.Request{Host: legacyHost, Path: "/", HTTPS: true}, http.StatusOK)
	waitStatus(t, r, harness.Request{Host: shopHost, Path: "/down", HTTPS: true}, http.StatusServiceUnavailable)
	waitStatus(t, r, harness.Request{Host: shopHost, Path: "/admin", HTTPS: true}, http.StatusForbidden)
	r.WaitConfigSettled()

	batches := 0 // calls of traffic
	traffic := func() {
		t.Helper()
		batches++
		for i := range 20 {
			for _, req := range []struct {
				harness.Request
				want int
			}{
				{harness.Request{Host: shopHost, Path: "/", HTTPS: true}, http.StatusOK},
				{harness.Request{Host: shopHost, Path: "/products/" + strconv.Itoa(i), HTTPS: true}, http.StatusOK},
				{harness.Request{Host: shopHost, Path: "/", HTTPS: true, Method: http.MethodPost, Body: bytes.Repeat([]byte("x"), 100*i)}, http.StatusOK},
				{harness.Request{Host: shopHost, Path: "/"}, http.StatusPermanentRedirect}, // TLS hosts redirect plain HTTP
				{harness.Request{Host: shopHost, Path: "/down", HTTPS: true}, http.StatusServiceUnavailable},
				{harness.Request{Host: shopHost, Path: "/admin", HTTPS: true}, http.StatusForbidden},
				{harness.Request{Host: legacyHost, Path: "/", HTTPS: true}, http.StatusOK},
			} {
				resp, err := r.Do(req.Request)
				if err != nil {
					t.Fatalf("%s %s%s: %v", req.Method, req.Host, req.Path, err)
				}
				if resp.Status != req.want {
					t.Fatalf("%s %s%s: %s, want status %d", req.Method, req.Host, req.Path, resp, req.want)
				}
			}
		}
	}

	// NGINX's workers hand their request counts to the controller about once a second: a
	// scrape waits until every kind of request traffic sent is counted (each has a series
	// only traffic adds to, or a lower bound on one), so rate() sees this batch. A controller
	// without request metrics shows none within the first 10 s (ten hand-overs); the test then
	// stops waiting for them, and the queries that read them fail below.
	requestMetricsAbsent := false
	waitCounted := func() {
		t.Helper()
		if requestMetricsAbsent {
			return
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			m, err := r.Metrics()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m[requestMetricPrefix+"requests"]; ok {
				break
			}
			if time.Now().After(deadline) {
				t.Logf("no %srequests metric 10 s after the first requests: the request-metric queries below will return nothing", requestMetricPrefix)
				requestMetricsAbsent = true
				return
			}
		}
		n := float64(20 * batches)
		for _, c := range []struct {
			labels map[string]string
			least  float64
		}{
			{map[string]string{"method": "POST", "status": "200"}, n},
			{map[string]string{"method": "GET", "status": "200"}, 3 * n},
			{map[string]string{"status": "308"}, n},
			{map[string]string{"status": "403"}, n},
			{map[string]string{"status": "503"}, n},
		} {
			r.WaitMetric(requestMetricPrefix+"requests", c.labels, fmt.Sprintf(">= %g", c.least), func(v float64) bool { return v >= c.least })
		}
	}

	var scrapes [][]byte
	scrape := func() {
		t.Helper()
		waitCounted()
		b, err := fetch(r.HealthzURL("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		scrapes = append(scrapes, b)
	}

	traffic()
	scrape()
	reloadsBefore := r.MetricValue("ingress_reactor_reloads_total", map[string]string{"result": "success"})

	// A new profile (custom-http-errors makes a named location) needs a reload: the reload
	// panels and the reload-duration histogram get a sample inside the scraped window.
	errs := f.Ingress("errors", errorsHost, harness.IngressBackend{Service: "down", Port: 80})
	errs.Annotations = map[string]string{"nginx.ingress.kubernetes.io/custom-http-errors": "503"}
	f.CreateIngress(errs)
	waitStatus(t, r, harness.Request{Host: errorsHost, Path: "/"}, http.StatusServiceUnavailable)
	r.WaitConfigSettled()
	if after := r.MetricValue("ingress_reactor_reloads_total", map[string]string{"result": "success"}); after <= reloadsBefore {
		t.Fatalf("the custom-http-errors Ingress did not reload NGINX (successful reloads %g, before %g): the reload panels would show nothing new", after, reloadsBefore)
	}
	// NGINX dies and is restarted: the restart panel and alert see it, and traffic goes on.
	restarts := r.MetricValue("ingress_reactor_nginx_restarts_total", nil)
	pid, err := r.NginxMasterPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill NGINX master %d: %v", pid, err)
	}
	r.WaitMetric("ingress_reactor_nginx_restarts_total", nil, fmt.Sprintf(">= %g", restarts+1), func(v float64) bool { return v >= restarts+1 })
	waitStatus(t, r, harness.Request{Host: shopHost, Path: "/", HTTPS: true}, http.StatusOK)
	waitStatus(t, r, harness.Request{Host: legacyHost, Path: "/", HTTPS: true}, http.StatusOK)

	traffic()
	scrape()
	traffic()
	scrape()

	// The last scrape is "now", so time() and the wall-clock gauges agree.
	now := time.Now()
	db := loadScrapes(t, scrapes, now, map[string]string{"job": "ingress-reactor", "instance": fmt.Sprintf("127.0.0.1:%d", r.HealthzPort)})
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	p := parser.NewParser(parser.Options{})
	eval := func(expr string) (promql.Vector, error) {
		q, err := eng.NewInstantQuery(context.Background(), db, nil, expr, now)
		if err != nil {
			return nil, err
		}
		defer q.Close()
		res := q.Exec(context.Background())
		if res.Err != nil {
			return nil, res.Err
		}
		switch v := res.Value.(type) {
		case promql.Vector:
			return v, nil
		case promql.Scalar:
			return promql.Vector{{F: v.V, T: v.T}}, nil
		}
		return nil, fmt.Errorf("result is a %s, want an instant vector", res.Value.Type())
	}
	// emptySelectors names the metrics of expr that match no series at all.
	emptySelectors := func(expr parser.Expr) []string {
		var empty []string
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			v, err := eval(vs.String())
			if err != nil || len(v) == 0 {
				empty = append(empty, vs.String())
			}
			return nil
		})
		return empty
	}

	var failed, failedRequest []string
	report := func(where string, expr parser.Expr, problem string) {
		t.Helper()
		msg := fmt.Sprintf("%s: %s", where, problem)
		if empty := emptySelectors(expr); len(empty) > 0 {
			msg += "; selectors without series: " + strings.Join(empty, ", ")
		}
		if needsRequestMetrics(expr) {
			failedRequest = append(failedRequest, msg)
		} else {
			failed = append(failed, msg)
		}
	}

	_, queries := loadDashboard(t)
	vars := testVariables(f.Namespace)
	wantValues := map[string][]string{"namespace": {f.Namespace}, "ingress": {"shop", "shop-admin", "legacy"}}
	for _, q := range queries {
		src := substitute(q.Expr, vars)
		expr, err := p.ParseExpr(src)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", q.Where, src, err)
			continue
		}
		v, err := eval(src)
		switch {
		case err != nil:
			report(q.Where, expr, fmt.Sprintf("%q fails: %v", src, err))
		case len(v) == 0:
			report(q.Where, expr, fmt.Sprintf("%q returns nothing", src))
		case countNumbers(v) == 0:
			report(q.Where, expr, fmt.Sprintf("%q returns only NaN (%d samples)", src, len(v)))
		case q.Variable != "":
			got := labelValues(v, q.Variable)
			for _, want := range wantValues[q.Variable] {
				if !slices.Contains(got, want) {
					report(q.Where, expr, fmt.Sprintf("%q lists %s values %v, want %q among them", src, q.Variable, got, want))
				}
			}
		}
	}

	firing := map[string]string{}
	rules := loadAlerts(t)
	for _, rule := range rules {
		expr, err := p.ParseExpr(rule.Expr)
		if err != nil {
			t.Errorf("alert %s: %v", rule.Alert, err)
			continue
		}
		stripped := withoutThresholds(expr).String()
		v, err := eval(stripped)
		switch {
		case err != nil:
			report("alert "+rule.Alert, expr, fmt.Sprintf("without thresholds, %q fails: %v", stripped, err))
			continue
		case len(v) == 0:
			report("alert "+rule.Alert, expr, fmt.Sprintf("without thresholds, %q returns nothing", stripped))
			continue
		}
		if empty := emptySelectors(expr); len(empty) > 0 {
			report("alert "+rule.Alert, expr, "reads series that do not exist")
		}
		v, err = eval(rule.Expr)
		if err != nil {
			t.Errorf("alert %s: %v", rule.Alert, err)
			continue
		}
		if len(v) > 0 {
			firing[rule.Alert] = describe(v)
		}
	}

	sort.Strings(failed)
	sort.Strings(failedRequest)
	for _, m := range failed {
		t.Errorf("returns nothing: %s", m)
	}
	for _, m := range failedRequest {
		t.Errorf("returns nothing (reads the request metrics %s*): %s", requestMetricPrefix, m)
	}
	t.Logf("%d dashboard queries and %d alerts checked; %d fail on the controller's metrics, %d on the request metrics",
		len(queries), len(rules), len(failed), len(failedRequest))

	// What this workload must and must not raise. The expiring certificate is legacy-tls's
	// alone; the 503s are the shop Ingress's (a fifth of its requests); NGINX was killed once.
	wantFiring := map[string]string{
		"IngressReactorCertificateExpiringSoon": `secret="legacy-tls"`,
		"IngressReactorHigh5xxRatio":            `ingress="shop"`,
		"IngressReactorNginxRestarting":         `instance="127.0.0.1:`,
	}
	for alert, got := range firing {
		want, ok := wantFiring[alert]
		switch {
		case !ok:
			t.Errorf("alert %s fires for a healthy controller: %s", alert, got)
		case !strings.Contains(got, want) || strings.Count(got, "{") != 1:
			t.Errorf("alert %s fires for %s, want exactly one series with %s", alert, got, want)
		}
	}
	for alert := range wantFiring {
		if _, ok := firing[alert]; !ok {
			t.Errorf("alert %s does not fire; this workload should raise it", alert)
		}
	}
}

// waitStatus waits until req is answered with status.
func waitStatus(t *testing.T, r *harness.Reactor, req harness.Request, status int) {
	t.Helper()
	r.Eventually(harness.DefaultTimeout, fmt.Sprintf("%s%s to answer %d", req.Host, req.Path, status), func() (bool, string) {
		resp, err := r.Do(req)
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == status, resp.String()
	})
}

// fetch returns the body of a GET of url.
func fetch(url string) ([]byte, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

// loadScrapes stores each scrape's samples in a fresh TSDB, as a Prometheus scraping
// every scrapeInterval would, the last one at last; target labels are added to every series.
func loadScrapes(t *testing.T, scrapes [][]byte, last time.Time, target map[string]string) storage.Queryable {
	t.Helper()
	opts := tsdb.DefaultOptions()
	opts.RetentionDuration = 0
	db, err := tsdb.Open(t.TempDir(), nil, nil, opts, nil)
	if err != nil {
		t.Fatalf("open TSDB: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for i, b := range scrapes {
		ts := last.Add(-time.Duration(len(scrapes)-1-i) * scrapeInterval).UnixMilli()
		tp := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := tp.TextToMetricFamilies(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		app := db.Appender(context.Background())
		for _, fam := range fams {
			for _, s := range familySamples(fam) {
				lset := labels.NewBuilder(labels.EmptyLabels())
				for k, v := range target {
					lset.Set(k, v)
				}
				for k, v := range s.labels {
					lset.Set(k, v)
				}
				if _, err := app.Append(0, lset.Labels(), ts, s.value); err != nil {
					t.Fatalf("scrape %d: append %v: %v", i, lset.Labels(), err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatalf("scrape %d: commit: %v", i, err)
		}
	}
	return db
}

// sample is one series' value in a scrape; labels include __name__.
type sample struct {
	labels map[string]string
	value  float64
}

// familySamples flattens a metric family into the series Prometheus stores for it: a
// histogram into _bucket (with le), _sum and _count; a summary into its quantiles, _sum
// and _count.
func familySamples(fam *dto.MetricFamily) []sample {
	var out []sample
	for _, m := range fam.GetMetric() {
		base := map[string]string{}
		for _, l := range m.GetLabel() {
			base[l.GetName()] = l.GetValue()
		}
		add := func(suffix string, v float64, extra ...string) {
			ls := map[string]string{model.MetricNameLabel: fam.GetName() + suffix}
			for k, v := range base {
				ls[k] = v
			}
			for i := 0; i+1 < len(extra); i += 2 {
				ls[extra[i]] = extra[i+1]
			}
			out = append(out, sample{labels: ls, value: v})
		}
		switch {
		case m.Counter != nil:
			add("", m.Counter.GetValue())
		case m.Gauge != nil:
			add("", m.Gauge.GetValue())
		case m.Untyped != nil:
			add("", m.Untyped.GetValue())
		case m.Histogram != nil:
			h := m.Histogram
			inf := false
			for _, b := range h.GetBucket() {
				inf = inf || math.IsInf(b.GetUpperBound(), 1)
				add("_bucket", float64(b.GetCumulativeCount()), "le", formatBound(b.GetUpperBound()))
			}
			if !inf {
				add("_bucket", float64(h.GetSampleCount()), "le", "+Inf")
			}
			add("_sum", h.GetSampleSum())
			add("_count", float64(h.GetSampleCount()))
		case m.Summary != nil:
			s := m.Summary
			for _, q := range s.GetQuantile() {
				add("", q.GetValue(), "quantile", formatBound(q.GetQuantile()))
			}
			add("_sum", s.GetSampleSum())
			add("_count", float64(s.GetSampleCount()))
		}
	}
	return out
}

// formatBound writes a bucket bound or quantile as Prometheus does.
func formatBound(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// countNumbers counts the samples of v that are not NaN.
func countNumbers(v promql.Vector) int {
	n := 0
	for _, s := range v {
		if !math.IsNaN(s.F) {
			n++
		}
	}
	return n
}

// labelValues lists the values of label name in v, sorted.
func labelValues(v promql.Vector, name string) []string {
	var out []string
	for _, s := range v {
		if val := s.Metric.Get(name); val != "" && !slices.Contains(out, val) {
			out = append(out, val)
		}
	}
	slices.Sort(out)
	return out
}

// describe lists v's series and values for messages.
func describe(v promql.Vector) string {
	var parts []string
	for _, s := range v {
		parts = append(parts, fmt.Sprintf("%s %g", s.Metric, s.F))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// tlsKeyPair is a PEM certificate and key.
type tlsKeyPair struct{ cert, key []byte }

// selfSigned makes a self-signed certificate for host valid from an hour ago for validity.
func selfSigned(t *testing.T, host string, validity time.Duration) tlsKeyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return tlsKeyPair{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// applyTLSSecret creates a kubernetes.io/tls Secret.
func applyTLSSecret(f *harness.Fixture, name string, kp tlsKeyPair) {
	f.T.Helper()
	_, err := f.Client.CoreV1().Secrets(f.Namespace).Create(f.Ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: kp.cert, corev1.TLSPrivateKeyKey: kp.key},
	}, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatalf("create Secret %s: %v", name, err)
	}
}
