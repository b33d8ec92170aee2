package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestCustomHTTPErrorsSetting: the ConfigMap's custom-http-errors is the profile of Ingresses without
// the annotation; the annotation wins; an invalid value is a problem.
func TestCustomHTTPErrorsSetting(t *testing.T) {
	s, _, problems := ParseSettings(map[string]string{"custom-http-errors": " 503,404, 503"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	opts := s.TranslateOptions(DefaultTranslateOptions())
	svcs := servicesOf(service("default", "web", port(80, "http")))
	for _, tc := range []struct {
		ing  *networkingv1.Ingress
		want string
	}{
		{ingress("default", "plain", rule("a.example", prefix("/", "web", 80))), "404,503"},
		{ingress("default", "own", annotate(AnnotationCustomHTTPErrors, "418"), rule("b.example", prefix("/", "web", 80))), "418"},
	} {
		tr, err := TranslateIngress(tc.ing, svcs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if valueOf(tr.Profile).CustomHTTPErrors != tc.want {
			t.Errorf("%s: codes %q, want %q", tc.ing.Name, valueOf(tr.Profile).CustomHTTPErrors, tc.want)
		}
	}
	for _, bad := range []string{"200", "5xx", "404;503"} {
		if _, _, problems := ParseSettings(map[string]string{"custom-http-errors": bad}, nil); len(problems) != 1 {
			t.Errorf("%q: problems %v", bad, problems)
		}
	}
}

// TestCustomHTTPErrorsSettingThroughNginx: through real NGINX, with the ConfigMap's custom-http-errors,
// a backend's 503 is answered by the default backend's page.
func TestCustomHTTPErrorsSettingThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	s, _, problems := ParseSettings(map[string]string{"custom-http-errors": "503"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	cfg.Settings = s
	rt := testRuntime(t, cfg, nil)
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "app 503")
	})
	fallback := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "fallback page for "+r.Header.Get("X-Code"))
	})
	tr, err := TranslateIngress(ingress("default", "web", rule("web.example", prefix("/", "web", 80))),
		servicesOf(service("default", "web", port(80, "http"))), s.TranslateOptions(DefaultTranslateOptions()))
	if err != nil {
		t.Fatal(err)
	}
	def := NewUpstream(nn("default", "fallback"), intstr.FromInt32(8080))
	m, _ := Merge([]*IngressTranslation{tr}, &def)
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{
		up("default", "web", 80).Name: {app}, def.Name: {fallback},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := proxyClient(cfg.HTTPPort, nil).Get(fmt.Sprintf("http://web.example:%d/", cfg.HTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(body) != "fallback page for 503" {
		t.Errorf("%d %q, want 503 from the default backend", resp.StatusCode, body)
	}
}

// TestLimitRateSettings: the ConfigMap's limit-rate and limit-rate-after reach the routes of Ingresses
// without the annotations; an Ingress's limit-rate wins and takes the ConfigMap's limit-rate-after when
// it has none of its own.
func TestLimitRateSettings(t *testing.T) {
	s, _, problems := ParseSettings(map[string]string{"limit-rate": "100", "limit-rate-after": "1m"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	opts := s.TranslateOptions(DefaultTranslateOptions())
	svcs := servicesOf(service("default", "web", port(80, "http")))
	for _, tc := range []struct {
		ing         *networkingv1.Ingress
		rate, after int64
	}{
		{ingress("default", "plain", rule("a.example", prefix("/", "web", 80))), 100 << 10, 1 << 20},
		{ingress("default", "own", annotate(AnnotationLimitRate, "10"), rule("b.example", prefix("/", "web", 80))), 10 << 10, 1 << 20},
		{ingress("default", "both", annotate(AnnotationLimitRate, "10", AnnotationLimitRateAfter, "5"), rule("c.example", prefix("/", "web", 80))), 10 << 10, 5 << 10},
		{ingress("default", "none", annotate(AnnotationLimitRate, "0"), rule("d.example", prefix("/", "web", 80))), 0, 0},
	} {
		tr, err := TranslateIngress(tc.ing, svcs, opts)
		if err != nil {
			t.Fatal(err)
		}
		var rate, after int64
		if tr.Options != nil {
			rate, after = tr.Options.LimitRate, tr.Options.LimitRateAfter
		}
		if rate != tc.rate || after != tc.after {
			t.Errorf("%s: rate %d after %d, want %d %d", tc.ing.Name, rate, after, tc.rate, tc.after)
		}
	}
	for _, bad := range []string{"-1", "fast", "2000g"} {
		if _, _, problems := ParseSettings(map[string]string{"limit-rate": bad}, nil); len(problems) != 1 {
			t.Errorf("%q: problems %v", bad, problems)
		}
	}
}
