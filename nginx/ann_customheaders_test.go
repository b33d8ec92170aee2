package nginx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// configMapLookup is a fixed set of ConfigMaps.
type configMapLookup map[types.NamespacedName]*corev1.ConfigMap

func (c configMapLookup) ConfigMap(key types.NamespacedName) (*corev1.ConfigMap, bool) {
	cm, ok := c[key]
	return cm, ok
}

func configMap(ns, name, rv string, kv ...string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}, Data: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		cm.Data[kv[i]] = kv[i+1]
	}
	return cm
}

// TestAnnotationCustomHeaders: custom-headers and its ConfigMap -> the route data's header lines, or ->
// the exact rejection.
func TestAnnotationCustomHeaders(t *testing.T) {
	many := configMap("default", "many", "1")
	for i := range maxCustomHeaders + 1 {
		many.Data[fmt.Sprintf("X-H%d", i)] = "v"
	}
	dropped := configMap("default", "dropped", "1")
	dropped.Annotations = map[string]string{ConfigMapDataDroppedAnnotation: "20000"}
	binary := configMap("default", "binary", "1")
	binary.BinaryData = map[string][]byte{"X-Bin": {0}}
	cms := configMapLookup{
		nn("default", "security"): configMap("default", "security", "1", "X-Frame-Options", " DENY ", "Content-Security-Policy", "default-src 'self'; img-src *",
			"Strict-Transport-Security", "max-age=31536000;\tincludeSubDomains"),
		nn("default", "empty"):        configMap("default", "empty", "1"),
		nn("default", "bad-name"):     configMap("default", "bad-name", "1", "X Frame", "DENY"),
		nn("default", "framing"):      configMap("default", "framing", "1", "Transfer-Encoding", "chunked"),
		nn("default", "crlf"):         configMap("default", "crlf", "1", "X-Evil", "a\r\nSet-Cookie: x=1"),
		nn("default", "non-ascii"):    configMap("default", "non-ascii", "1", "X-Name", "é"),
		nn("default", "long"):         configMap("default", "long", "1", "X-Long", strings.Repeat("a", maxHeaderValue+1)),
		nn("default", "many"):         many,
		nn("default", "dropped"):      dropped,
		nn("default", "binary"):       binary,
		nn("other", "security"):       configMap("other", "security", "1", "X-Secret", "from another namespace"),
		nn("default", "token-chars"):  configMap("default", "token-chars", "1", "X-A!#$%&'*+.^_`|~1", "ok"),
		nn("default", "empty-value"):  configMap("default", "empty-value", "1", "X-Empty", ""),
		nn("default", "keep-alive"):   configMap("default", "keep-alive", "1", "keep-alive", "timeout=5"),
		nn("default", "content-type"): configMap("default", "content-type", "1", "Content-Type", "text/plain"),
	}
	const ann = "metadata.annotations[nginx.ingress.kubernetes.io/custom-headers]: "
	tests := map[string]struct {
		value   string
		want    string
		wantErr string
	}{
		"headers sorted by name, values trimmed": {value: "default/security",
			want: "Content-Security-Policy:default-src 'self'; img-src *\nStrict-Transport-Security:max-age=31536000;\tincludeSubDomains\nX-Frame-Options:DENY"},
		"a bare name is the Ingress's namespace": {value: " security ", want: "Content-Security-Policy:default-src 'self'; img-src *\nStrict-Transport-Security:max-age=31536000;\tincludeSubDomains\nX-Frame-Options:DENY"},
		"an empty ConfigMap sets nothing":        {value: "empty"},
		"token characters":                       {value: "token-chars", want: "X-A!#$%&'*+.^_`|~1:ok"},
		"an empty value":                         {value: "empty-value", want: "X-Empty:"},
		"Content-Type may be set":                {value: "content-type", want: "Content-Type:text/plain"},
		"missing":                                {value: "default/nope", wantErr: ann + "configmap default/nope does not exist; the Ingress is not served until it does"},
		"another namespace":                      {value: "other/security", wantErr: ann + `"other/security" is in namespace other; only ConfigMaps of the Ingress's own namespace (default) may be used`},
		"not a name":                             {value: "default/X;Y", wantErr: ann + `"default/X;Y" is not a ConfigMap's namespace/name (want lowercase RFC 1123 names such as "default/security-headers")`},
		"a name with a space":                    {value: "bad-name", wantErr: ann + `configmap default/bad-name: key "X Frame" is not a header name (an RFC 7230 token of at most 256 bytes); the Ingress is not served until it is fixed`},
		"a framing header":                       {value: "framing", wantErr: ann + "configmap default/framing: header Transfer-Encoding frames the message or the connection and cannot be set; the Ingress is not served until it is fixed"},
		"a hop-by-hop header in lower case":      {value: "keep-alive", wantErr: ann + "configmap default/keep-alive: header keep-alive frames the message or the connection and cannot be set; the Ingress is not served until it is fixed"},
		"CR LF in a value":                       {value: "crlf", wantErr: ann + "configmap default/crlf: the value of X-Evil is not a header value (printable ASCII and tabs, at most 4096 bytes); the Ingress is not served until it is fixed"},
		"non-ASCII in a value":                   {value: "non-ascii", wantErr: ann + "configmap default/non-ascii: the value of X-Name is not a header value (printable ASCII and tabs, at most 4096 bytes); the Ingress is not served until it is fixed"},
		"a value too long":                       {value: "long", wantErr: ann + "configmap default/long: the value of X-Long is not a header value (printable ASCII and tabs, at most 4096 bytes); the Ingress is not served until it is fixed"},
		"too many":                               {value: "many", wantErr: ann + "configmap default/many: 65 entries, more than the 64 accepted; the Ingress is not served until it is fixed"},
		"data the cache dropped":                 {value: "dropped", wantErr: ann + `configmap default/dropped: its data ("20000" bytes) is larger than the 16384 bytes accepted; the Ingress is not served until it is fixed`},
		"binary data":                            {value: "binary", wantErr: ann + "configmap default/binary: binaryData cannot be a header value; the Ingress is not served until it is fixed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(AnnotationCustomHeaders, tc.value))
			got, err := TranslateIngressWith(ing, Lookups{Services: servicesOf(service("default", "web", port(80, "http"))), ConfigMaps: cms}, DefaultTranslateOptions())
			if tc.wantErr != "" {
				if got != nil || err == nil || !slices.Contains(strings.Split(strings.TrimPrefix(err.Error(), "ingress default/a rejected: "), "\n"), tc.wantErr) {
					t.Fatalf("got %+v, error %v; want the rejection %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			var headers string
			if got.Options != nil {
				headers = got.Options.ResponseHeaders
			}
			if headers != tc.want {
				t.Errorf("headers %q, want %q", headers, tc.want)
			}
			if got.Profile != nil {
				t.Errorf("custom-headers made a profile %+v; it is route data", got.Profile)
			}
		})
	}
}

// TestCustomHeadersBudget: the header lines travel with each route, so an Ingress whose headers times
// its routes exceed the budget is rejected, naming both; the same headers on fewer paths are served.
func TestCustomHeadersBudget(t *testing.T) {
	big := configMap("default", "big", "1")
	for i := range 4 {
		big.Data[fmt.Sprintf("X-Big-%d", i)] = strings.Repeat("v", maxHeaderValue)
	}
	lk := Lookups{Services: servicesOf(service("default", "web", port(80, "http"))), ConfigMaps: configMapLookup{nn("default", "big"): big}}
	paths := func(n int) []networkingv1.HTTPIngressPath {
		var out []networkingv1.HTTPIngressPath
		for i := range n {
			out = append(out, prefix(fmt.Sprintf("/p%d", i), "web", 80))
		}
		return out
	}
	few := ingress("default", "a", rule("a.example.com", paths(10)...), annotate(AnnotationCustomHeaders, "big"))
	if _, err := TranslateIngressWith(few, lk, DefaultTranslateOptions()); err != nil {
		t.Fatalf("16 KiB of headers on 10 paths: %v", err)
	}
	many := ingress("default", "a", rule("a.example.com", paths(20)...), annotate(AnnotationCustomHeaders, "big"))
	_, err := TranslateIngressWith(many, lk, DefaultTranslateOptions())
	if err == nil || !strings.Contains(err.Error(), "travel with each of the Ingress's 20 routes") {
		t.Fatalf("16 KiB of headers on 20 paths: %v, want the budget's rejection", err)
	}
}

// TestCustomHeadersNginx runs custom-headers through real NGINX and the Lua router: the headers are set
// on a plain route's responses and on a profile's (after ngx.exec), replacing the backend's header of
// the same name, and not on another Ingress's routes; a change of the ConfigMap is a routes push that
// leaves nginx.conf as it was.
func TestCustomHeadersNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()
	backend := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "from the backend")
		w.Header().Set("X-Backend", "yes")
		http.Error(w, "backend", http.StatusNotFound)
	})
	cms := configMapLookup{nn("default", "headers"): configMap("default", "headers", "1", "X-Frame-Options", "DENY", "X-Custom", "one: two", "X_Under", "u")}
	svcs := servicesOf(service("default", "web", port(80, "http")))
	ingresses := map[types.NamespacedName]*networkingv1.Ingress{
		nn("default", "plain"):   ingress("default", "plain", rule("plain.example.com", prefix("/", "web", 80)), annotate(AnnotationCustomHeaders, "headers")),
		nn("default", "profile"): ingress("default", "profile", rule("profile.example.com", prefix("/", "web", 80)), annotate(AnnotationCustomHeaders, "headers", AnnotationCustomHTTPErrors, "503")),
		nn("default", "none"):    ingress("default", "none", rule("none.example.com", prefix("/", "web", 80))),
	}
	b := NewModelBuilder()
	build := b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ingresses[nn("default", "none")], ingresses[nn("default", "plain")], ingresses[nn("default", "profile")]},
		Services: svcs, ConfigMaps: cms, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 || len(build.Model.Profiles) != 1 {
		t.Fatalf("rejected %+v, profiles %+v", build.Rejected, build.Model.Profiles)
	}
	hash := applyModel(t, rt, build.Model, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "web", 80).Name: {backend}}); err != nil {
		t.Fatal(err)
	}
	get := func(host string) http.Header {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Backend") != "yes" {
			t.Fatalf("%s: %d, X-Backend %q; want the backend's 404", host, resp.StatusCode, resp.Header.Get("X-Backend"))
		}
		return resp.Header
	}
	for _, host := range []string{"plain.example.com", "profile.example.com"} {
		h := get(host)
		if got := h.Values("X-Frame-Options"); !slices.Equal(got, []string{"DENY"}) || h.Get("X-Custom") != "one: two" {
			t.Errorf("%s: X-Frame-Options %q, X-Custom %q; want DENY (replacing the backend's) and \"one: two\"", host, got, h.Get("X-Custom"))
		}
		// As more_set_headers: a name with underscores is sent as written, not with hyphens.
		if h.Get("X_Under") != "u" || h.Get("X-Under") != "" {
			t.Errorf("%s: X_Under %q, X-Under %q; want the name as written", host, h.Get("X_Under"), h.Get("X-Under"))
		}
	}
	// A body without Content-Length (chunked here; every HTTP/2 request without one) on a route without a
	// profile goes through location @ingress_reactor_default, which must set the headers too.
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), io.NopCloser(strings.NewReader("chunked body")))
	if err != nil {
		t.Fatal(err)
	}
	req.Host, req.ContentLength = "plain.example.com", -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Backend") != "yes" || resp.Header.Get("X-Custom") != "one: two" {
		t.Errorf("chunked POST: X-Backend %q, X-Custom %q; want the backend's answer with the custom header", resp.Header.Get("X-Backend"), resp.Header.Get("X-Custom"))
	}
	if h := get("none.example.com"); h.Get("X-Frame-Options") != "from the backend" || h.Get("X-Custom") != "" {
		t.Errorf("an Ingress without custom-headers got X-Frame-Options %q, X-Custom %q", h.Get("X-Frame-Options"), h.Get("X-Custom"))
	}

	// The ConfigMap changes: the Ingresses that name it are translated again, nginx.conf stays.
	cms[nn("default", "headers")] = configMap("default", "headers", "2", "X-Custom", "three")
	build = b.Update(UpdateInput{Objects: []ObjectRef{{Kind: KindConfigMap, Key: nn("default", "headers")}}, Get: func(k types.NamespacedName) (*networkingv1.Ingress, bool) {
		ing, ok := ingresses[k]
		return ing, ok
	}, Lookup: svcs, ConfigMaps: cms, Options: DefaultTranslateOptions()})
	if _, h, err := Render(build.Model, cfg); err != nil || h != hash {
		t.Fatalf("the ConfigMap's change changed nginx.conf (%v)", err)
	}
	if err := rt.Client().ReplaceRoutes(ctx, routeTable(&build.Model)); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"plain.example.com", "profile.example.com"} {
		if h := get(host); h.Get("X-Custom") != "three" || h.Get("X-Frame-Options") != "from the backend" {
			t.Errorf("%s after the change: X-Custom %q, X-Frame-Options %q; want three and the backend's", host, h.Get("X-Custom"), h.Get("X-Frame-Options"))
		}
	}
	// The router's side checks the lines too: a push with a header line NGINX would split is refused.
	for _, bad := range []string{`X-A:b\r\nSet-Cookie: x=1`, `X A:b`, `:b`, ``} {
		entry := []byte(`{"routes":[{"path":"/","exact":false,"upstream":"` + string(up("default", "web", 80).Name) + `","response_headers":"` + bad + `"}]}`)
		err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{"evil.example.com": entry}})
		if refused, ok := errors.AsType[*RoutesRefusedError](err); !ok || len(refused.Refused) != 1 {
			t.Errorf("response_headers %q: push answered %v, want the host refused", bad, err)
		}
	}
}
