package nginx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// refLookup resolves references from a fixed table, as modules/settings does from its store.
func refLookup(cms map[string]map[string]string) SettingsRefLookup {
	return func(ref string) (map[string]string, error) {
		if strings.HasPrefix(ref, "other/") {
			return nil, errors.New("configmap " + ref + " is not in the namespace of --configmap (ingress)")
		}
		data, ok := cms[ref]
		if !ok {
			return nil, errors.New("configmap " + ref + " does not exist")
		}
		return data, nil
	}
}

// testHeaderRefs are the ConfigMaps nonDefaultSettings' add-headers and proxy-set-headers name.
var testHeaderRefs = map[string]map[string]string{
	"ingress/add":   {"X-Frame-Options": "DENY", "X-Added": ` a "quoted" \ value; { } `},
	"ingress/proxy": {"X-Tenant": "blue", "X_Under": "u"},
}

// TestHeaderRefSettings: add-headers and proxy-set-headers -> the validated headers of the ConfigMap
// they name, or a problem (the last good headers kept).
func TestHeaderRefSettings(t *testing.T) {
	cms := map[string]map[string]string{
		"ingress/add":        testHeaderRefs["ingress/add"],
		"ingress/proxy":      testHeaderRefs["ingress/proxy"],
		"ingress/empty":      {},
		"ingress/dollar":     {"X-A": "$remote_addr"},
		"ingress/badname":    {"X A": "1"},
		"ingress/framing":    {"Transfer-Encoding": "chunked"},
		"ingress/host":       {"Host": "evil.example"},
		"ingress/xff":        {"X-Forwarded-For": "1.2.3.4"},
		"ingress/control":    {"X-A": "a\r\nX-B: b"},
		"ingress/tab":        {"X-A": "a\tb"},
		"ingress/hsts":       {"Strict-Transport-Security": "max-age=1"},
		"ingress/toomany":    {},
		"ingress/longvalue":  {"X-A": strings.Repeat("a", maxHeaderValue+1)},
		"ingress/semicolon":  {"X-A": "a; proxy_pass http://evil"},
		"ingress/injectname": {"X-A;": "1"},
	}
	for i := 0; i <= maxCustomHeaders; i++ {
		cms["ingress/toomany"][fmt.Sprintf("X-%d", i)] = "1"
	}
	for name, tc := range map[string]struct {
		key, ref  string
		wantAdd   []HeaderLine
		wantProxy []HeaderLine
		problem   string
	}{
		"add-headers": {key: "add-headers", ref: "ingress/add",
			wantAdd: []HeaderLine{{"X-Added", `a "quoted" \ value; { }`}, {"X-Frame-Options", "DENY"}}},
		"proxy-set-headers":                  {key: "proxy-set-headers", ref: "ingress/proxy", wantProxy: []HeaderLine{{"X-Tenant", "blue"}, {"X_Under", "u"}}},
		"empty ConfigMap":                    {key: "add-headers", ref: "ingress/empty"},
		"empty value: none":                  {key: "proxy-set-headers", ref: ""},
		"add-headers may set HSTS":           {key: "add-headers", ref: "ingress/hsts", wantAdd: []HeaderLine{{"Strict-Transport-Security", "max-age=1"}}},
		"a value with ; is literal":          {key: "proxy-set-headers", ref: "ingress/semicolon", wantProxy: []HeaderLine{{"X-A", "a; proxy_pass http://evil"}}},
		"another namespace":                  {key: "add-headers", ref: "other/add", problem: "not in the namespace"},
		"missing":                            {key: "proxy-set-headers", ref: "ingress/nope", problem: "does not exist"},
		"variable":                           {key: "proxy-set-headers", ref: "ingress/dollar", problem: "printable ASCII without $"},
		"variable in add-headers":            {key: "add-headers", ref: "ingress/dollar", problem: "printable ASCII without $"},
		"bad name":                           {key: "add-headers", ref: "ingress/badname", problem: "not a header name"},
		"name with ;":                        {key: "proxy-set-headers", ref: "ingress/injectname", problem: "not a header name"},
		"framing response header":            {key: "add-headers", ref: "ingress/framing", problem: "cannot be set"},
		"framing request header":             {key: "proxy-set-headers", ref: "ingress/framing", problem: "cannot be set"},
		"Host":                               {key: "proxy-set-headers", ref: "ingress/host", problem: "cannot be set"},
		"a header the controller sets":       {key: "proxy-set-headers", ref: "ingress/xff", problem: "cannot be set"},
		"control characters":                 {key: "add-headers", ref: "ingress/control", problem: "not a literal header value"},
		"tab":                                {key: "proxy-set-headers", ref: "ingress/tab", problem: "not a literal header value"},
		"too many":                           {key: "add-headers", ref: "ingress/toomany", problem: "more than the 64 accepted"},
		"too long":                           {key: "add-headers", ref: "ingress/longvalue", problem: "not a literal header value"},
		"proxy-set-headers lacks a lookup":   {key: "proxy-set-headers", ref: "ingress/proxy", problem: "cannot be resolved"},
		"a bare name is resolved by the map": {key: "add-headers", ref: "add", problem: "does not exist"},
	} {
		t.Run(name, func(t *testing.T) {
			lookup := refLookup(cms)
			if strings.Contains(name, "lacks a lookup") {
				lookup = nil
			}
			s, good, problems := ParseSettingsRefs(map[string]string{tc.key: tc.ref}, nil, lookup)
			if tc.problem != "" {
				if len(problems) != 1 || !strings.Contains(problems[0].Reason, tc.problem) || len(good) != 0 {
					t.Fatalf("problems %v, good %v; want one with %q", problems, good, tc.problem)
				}
			} else if len(problems) != 0 {
				t.Fatalf("problems %v", problems)
			}
			if !slices.Equal(s.HeaderRefs.Add, tc.wantAdd) || !slices.Equal(s.HeaderRefs.ProxySet, tc.wantProxy) {
				t.Errorf("add %q, proxy %q; want %q, %q", s.HeaderRefs.Add, s.HeaderRefs.ProxySet, tc.wantAdd, tc.wantProxy)
			}
		})
	}
	t.Run("a broken ConfigMap keeps the last good headers", func(t *testing.T) {
		lookup := refLookup(cms)
		_, good, _ := ParseSettingsRefs(map[string]string{"add-headers": "ingress/add"}, nil, lookup)
		s, _, problems := ParseSettingsRefs(map[string]string{"add-headers": "ingress/dollar"}, good, lookup)
		if len(problems) != 1 || !problems[0].KeptLastGood || len(s.HeaderRefs.Add) != 2 {
			t.Errorf("problems %v, add %q; want the last good two headers", problems, s.HeaderRefs.Add)
		}
	})
}

// TestHeaderRefSettingsNginx: through a real NGINX, add-headers reach responses (replacing a backend's
// header, replaced by an Ingress's custom-headers), and proxy-set-headers reach the backend, in the
// public location and in a profile's.
func TestHeaderRefSettingsNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	s, _, problems := ParseSettingsRefs(map[string]string{"add-headers": "ingress/add", "proxy-set-headers": "ingress/proxy"}, nil, refLookup(testHeaderRefs))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	cfg.Settings = s
	rt := testRuntime(t, cfg, nil)
	backend := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "from the backend")
		_ = json.NewEncoder(w).Encode(echo{Header: r.Header})
	})
	cms := configMapLookup{nn("default", "own"): configMap("default", "own", "1", "X-Frame-Options", "SAMEORIGIN")}
	b := NewModelBuilder()
	build := b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{
		ingress("default", "plain", rule("plain.example.com", prefix("/", "web", 80))),
		ingress("default", "profile", rule("profile.example.com", prefix("/", "web", 80)), annotate(AnnotationCustomHTTPErrors, "503")),
		ingress("default", "own", rule("own.example.com", prefix("/", "web", 80)), annotate(AnnotationCustomHeaders, "own")),
	}, Services: servicesOf(service("default", "web", port(80, "http"))), ConfigMaps: cms, Options: s.TranslateOptions(DefaultTranslateOptions())})
	if len(build.Rejected) != 0 || len(build.Model.Profiles) != 1 {
		t.Fatalf("rejected %+v, profiles %+v", build.Rejected, build.Model.Profiles)
	}
	applyModel(t, rt, build.Model, cfg)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "web", 80).Name: {backend}}); err != nil {
		t.Fatal(err)
	}
	for host, frame := range map[string]string{"plain.example.com": "DENY", "profile.example.com": "DENY", "own.example.com": "SAMEORIGIN"} {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e echo
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d, %v", host, resp.StatusCode, err)
		}
		if got := resp.Header.Values("X-Frame-Options"); !slices.Equal(got, []string{frame}) {
			t.Errorf("%s: X-Frame-Options %q, want only %q", host, got, frame)
		}
		if got := resp.Header.Get("X-Added"); got != `a "quoted" \ value; { }` {
			t.Errorf("%s: X-Added %q", host, got)
		}
		if got := e.Header.Values("X-Tenant"); !slices.Equal(got, []string{"blue"}) {
			t.Errorf("%s: the backend saw X-Tenant %q, want blue", host, got)
		}
		if got := e.Header.Values("X_under"); !slices.Equal(got, []string{"u"}) {
			t.Errorf("%s: the backend saw X_Under %q (headers %v), want u", host, got, e.Header)
		}
	}
}
