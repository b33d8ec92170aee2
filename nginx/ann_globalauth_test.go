package nginx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// globalAuthOptions returns translate options with the global auth of a ConfigMap's data.
func globalAuthOptions(t *testing.T, data map[string]string) TranslateOptions {
	t.Helper()
	s, _, problems := ParseSettings(data, nil)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	return s.TranslateOptions(DefaultTranslateOptions())
}

// buildModelFrom is buildModel with translate options, from a list of Services and Ingresses; it also
// returns the rejections, by Ingress name.
func buildModelFrom(t *testing.T, objs []any, opts TranslateOptions) (Model, map[string]error) {
	t.Helper()
	svcs, ings := splitObjects(t, objs)
	return translateAndMerge(svcs, opts, ings...)
}

// TestGlobalAuthSettings: the ConfigMap keys -> GlobalAuth, an invalid value without a good one marks it.
func TestGlobalAuthSettings(t *testing.T) {
	tests := map[string]struct {
		data, lastGood map[string]string
		want           GlobalAuth
		wantProblems   string
	}{
		"defaults": {want: GlobalAuth{SigninRedirectParam: "rd", CacheDuration: defaultAuthCacheDuration, NoAuthLocations: "/.well-known/acme-challenge"}},
		"url without a path, $host form": {
			data: map[string]string{"global-auth-url": " http://auth.example ", "global-auth-signin": "https://$host/oauth2/start?rd=$escaped_request_uri"},
			want: GlobalAuth{URL: "http://auth.example/", Signin: "https://$host/oauth2/start?rd=$escaped_request_uri", SigninRedirectParam: "rd",
				CacheDuration: defaultAuthCacheDuration, NoAuthLocations: "/.well-known/acme-challenge"}},
		"$host auth url": {data: map[string]string{"global-auth-url": "https://$host/oauth2/auth", "no-auth-locations": ""},
			want: GlobalAuth{URL: "https://$host/oauth2/auth", SigninRedirectParam: "rd", CacheDuration: defaultAuthCacheDuration}},
		"an invalid url fails closed": {data: map[string]string{"global-auth-url": "http://auth.example/;return 200"},
			want: GlobalAuth{SigninRedirectParam: "rd", CacheDuration: defaultAuthCacheDuration, NoAuthLocations: "/.well-known/acme-challenge",
				Invalid: "global-auth-url"}, wantProblems: "global-auth-url: invalid value"},
		"an invalid url keeps the last good one": {data: map[string]string{"global-auth-url": "http://$http_x/"},
			lastGood: map[string]string{"global-auth-url": "http://auth.example/a"},
			want: GlobalAuth{URL: "http://auth.example/a", SigninRedirectParam: "rd", CacheDuration: defaultAuthCacheDuration,
				NoAuthLocations: "/.well-known/acme-challenge"}, wantProblems: "its last good value stays applied"},
		"several invalid keys": {data: map[string]string{"global-auth-url": "http://auth.example/", "global-auth-method": "get",
			"global-auth-response-headers": "X User", "global-auth-signin": "https://$hostname/"},
			want: GlobalAuth{URL: "http://auth.example/", SigninRedirectParam: "rd", CacheDuration: defaultAuthCacheDuration,
				NoAuthLocations: "/.well-known/acme-challenge", Invalid: "global-auth-method,global-auth-response-headers,global-auth-signin"},
			wantProblems: "global-auth-method"},
		"an invalid redirect param takes the default": {data: map[string]string{"global-auth-signin-redirect-param": "r d"},
			want:         GlobalAuth{SigninRedirectParam: "rd", CacheDuration: defaultAuthCacheDuration, NoAuthLocations: "/.well-known/acme-challenge"},
			wantProblems: "global-auth-signin-redirect-param"},
		"no-auth-locations": {data: map[string]string{"no-auth-locations": " /healthz ,, /public,/healthz"},
			want: GlobalAuth{SigninRedirectParam: "rd", CacheDuration: defaultAuthCacheDuration, NoAuthLocations: "/healthz,/public"}},
		"invalid no-auth-locations takes the default": {data: map[string]string{"no-auth-locations": "/a, b"},
			want:         GlobalAuth{SigninRedirectParam: "rd", CacheDuration: defaultAuthCacheDuration, NoAuthLocations: "/.well-known/acme-challenge"},
			wantProblems: `no-auth-locations: invalid value "/a, b": "b" is not a path prefix`},
		"cache": {data: map[string]string{"global-auth-cache-key": "$remote_user$http_authorization", "global-auth-cache-duration": "200 10m, 401 1m"},
			want: GlobalAuth{SigninRedirectParam: "rd", CacheKey: "${remote_user}${http_authorization}", CacheDuration: "200 10m,401 1m",
				NoAuthLocations: "/.well-known/acme-challenge"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, _, problems := ParseSettings(tc.data, tc.lastGood)
			if s.GlobalAuth != tc.want {
				t.Errorf("global auth\n %+v, want\n %+v", s.GlobalAuth, tc.want)
			}
			var got []string
			for _, p := range problems {
				got = append(got, p.String())
			}
			if joined := strings.Join(got, "\n"); (tc.wantProblems == "") != (joined == "") || !strings.Contains(joined, tc.wantProblems) {
				t.Errorf("problems %q, want %q", joined, tc.wantProblems)
			}
		})
	}
}

// TestAnnotationGlobalAuth: which locations get the global auth's profile.
func TestAnnotationGlobalAuth(t *testing.T) {
	const authURL = "http://auth.example:4180/oauth2/auth"
	global := map[string]string{"global-auth-url": authURL, "global-auth-signin": "https://login.example/start",
		"global-auth-response-headers": "X-User", "global-auth-method": "GET", "global-auth-cache-key": "$http_authorization",
		"no-auth-locations": "/.well-known/acme-challenge,/public"}
	globalProfile := ProfileSettings{AuthURL: authURL, AuthMethod: "GET", AuthSignin: "https://login.example/start", AuthSigninRedirectParam: "rd",
		AuthResponseHeaders: "X-User", AuthCacheKey: "${http_authorization}", AuthCacheDuration: defaultAuthCacheDuration}
	svc := service("default", "app", port(80, "http"))
	tests := map[string]struct {
		settings map[string]string
		ing      *networkingv1.Ingress
		// want is the profile of each location, by path; wantErr rejects the Ingress.
		want    map[string]ProfileSettings
		wantErr string
	}{
		"no global auth": {ing: ingress("default", "a", rule("a.example", prefix("/", "app", 80))),
			want: map[string]ProfileSettings{"/": {}}},
		"an Ingress without annotations gets it": {settings: global,
			ing:  ingress("default", "a", rule("a.example", prefix("/", "app", 80), prefix("/public/docs", "app", 80), exact("/.well-known/acme-challenge/tok", "app", 80))),
			want: map[string]ProfileSettings{"/": globalProfile, "/public/docs": {}, "/.well-known/acme-challenge/tok": {}}},
		"a path is compared, not a request: / keeps it": {settings: map[string]string{"global-auth-url": authURL, "no-auth-locations": "/"},
			ing:  ingress("default", "a", rule("a.example", prefix("/app", "app", 80))),
			want: map[string]ProfileSettings{"/app": {}}},
		"enable-global-auth false": {settings: global,
			ing:  ingress("default", "a", annotate(AnnotationEnableGlobalAuth, "false"), rule("a.example", prefix("/", "app", 80))),
			want: map[string]ProfileSettings{"/": {}}},
		"enable-global-auth true": {settings: global,
			ing:  ingress("default", "a", annotate(AnnotationEnableGlobalAuth, " true "), rule("a.example", prefix("/", "app", 80))),
			want: map[string]ProfileSettings{"/": globalProfile}},
		"enable-global-auth invalid": {settings: global,
			ing:     ingress("default", "a", annotate(AnnotationEnableGlobalAuth, "no"), rule("a.example", prefix("/", "app", 80))),
			wantErr: `enable-global-auth]: "no" is not a boolean`},
		"its own auth-url wins, no-auth-locations does not drop it": {settings: global,
			ing: ingress("default", "a", annotate(AnnotationAuthURL, "http://own.example/check"),
				rule("a.example", prefix("/public", "app", 80))),
			want: map[string]ProfileSettings{"/public": {AuthURL: "http://own.example/check"}}},
		"other profile settings are kept, and kept on skipped paths": {settings: global,
			ing: ingress("default", "a", annotate(AnnotationProxyBodySize, "1m"),
				rule("a.example", prefix("/", "app", 80), prefix("/public", "app", 80))),
			want: map[string]ProfileSettings{"/": withBodySize(globalProfile, "1048576"), "/public": {ClientMaxBodySize: "1048576"}}},
		"signin that names its parameter": {settings: map[string]string{"global-auth-url": authURL,
			"global-auth-signin": "https://$host/start?next=$escaped_request_uri", "global-auth-signin-redirect-param": "next"},
			ing:  ingress("default", "a", rule("a.example", prefix("/", "app", 80))),
			want: map[string]ProfileSettings{"/": {AuthURL: authURL, AuthSignin: "https://$host/start?next=$escaped_request_uri"}}},
		"an invalid key with no good value rejects": {settings: map[string]string{"global-auth-url": authURL, "global-auth-response-headers": "X User"},
			ing:     ingress("default", "a", rule("a.example", prefix("/", "app", 80))),
			wantErr: "the ConfigMap's global-auth-response-headers (global external auth) has an invalid value"},
		"an invalid url with no good value rejects": {settings: map[string]string{"global-auth-url": "http://a b/"},
			ing:     ingress("default", "a", rule("a.example", prefix("/", "app", 80))),
			wantErr: "the ConfigMap's global-auth-url (global external auth) has an invalid value"},
		"an invalid key without global auth does nothing": {settings: map[string]string{"global-auth-method": "get"},
			ing:  ingress("default", "a", rule("a.example", prefix("/", "app", 80))),
			want: map[string]ProfileSettings{"/": {}}},
		"an invalid key and enable-global-auth false": {settings: map[string]string{"global-auth-url": "http://a b/"},
			ing:  ingress("default", "a", annotate(AnnotationEnableGlobalAuth, "false"), rule("a.example", prefix("/", "app", 80))),
			want: map[string]ProfileSettings{"/": {}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, _, _ := ParseSettings(tc.settings, nil)
			m, rejected := buildModelFrom(t, []any{svc, tc.ing}, s.TranslateOptions(DefaultTranslateOptions()))
			if err := rejected[tc.ing.Name]; (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if tc.wantErr != "" {
				return
			}
			got := map[string]*ProfileSettings{}
			for _, srv := range m.Servers {
				for _, l := range srv.Locations {
					got[l.Path] = l.Profile
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("locations %v, want %v", got, tc.want)
			}
			for p, want := range tc.want {
				if !profileIs(got[p], want) {
					t.Errorf("%s: profile\n %+v, want\n %+v", p, got[p], want)
				}
			}
		})
	}
}

func withBodySize(p ProfileSettings, size string) ProfileSettings {
	p.ClientMaxBodySize = size
	return p
}

// TestGlobalAuthSatisfyAny: satisfy "any" with an allowlist works with the global auth as with auth-url.
func TestGlobalAuthSatisfyAny(t *testing.T) {
	ing := ingress("default", "a", annotate(AnnotationSatisfy, "any", AnnotationAllowlistSourceRange, "192.0.2.0/24"),
		rule("a.example", prefix("/", "app", 80)))
	for _, tc := range []struct {
		settings map[string]string
		want     bool
	}{{nil, false}, {map[string]string{"global-auth-url": "http://auth.example/"}, true}} {
		got, err := TranslateIngress(ing, servicesOf(service("default", "app", port(80, "http"))), globalAuthOptions(t, tc.settings))
		if err != nil {
			t.Fatal(err)
		}
		on := got.Options != nil && got.Options.SatisfyAny
		warned := slices.ContainsFunc(got.Warnings, func(w string) bool { return strings.Contains(w, AnnotationSatisfy) })
		if on != tc.want || warned == tc.want {
			t.Errorf("settings %v: satisfy any %v (want %v), warnings %q", tc.settings, on, tc.want, got.Warnings)
		}
	}
}

// TestGlobalAuthSharesOneProfile: every Ingress with the global auth shares its named location.
func TestGlobalAuthSharesOneProfile(t *testing.T) {
	opts := globalAuthOptions(t, map[string]string{"global-auth-url": "http://auth.example/check"})
	objs := []any{service("default", "app", port(80, "http"))}
	for i := range 50 {
		objs = append(objs, ingress("default", fmt.Sprintf("i%d", i), rule(fmt.Sprintf("h%d.example", i), prefix("/", "app", 80))))
	}
	m, rejected := buildModelFrom(t, objs, opts)
	if len(rejected) > 0 || len(m.Profiles) != 1 || m.Profiles[0].AuthURL != "http://auth.example/check" {
		t.Fatalf("rejected %v, profiles %+v; want one, the global auth's", rejected, m.Profiles)
	}
}

// TestLocationsShareTheirIngressProfile: the locations of an Ingress point at one profile, and those
// that no-auth-locations lists at one profile without the global auth, rather than each holding a copy
// (a model has a location per path of every Ingress).
func TestLocationsShareTheirIngressProfile(t *testing.T) {
	opts := globalAuthOptions(t, map[string]string{"global-auth-url": "http://auth.example/check", "no-auth-locations": "/public"})
	ing := ingress("default", "a", annotate(AnnotationProxyBodySize, "1m"), rule("a.example", prefix("/", "app", 80), prefix("/app", "app", 80)),
		rule("b.example", prefix("/", "app", 80), prefix("/public/docs", "app", 80), prefix("/public/img", "app", 80)))
	plain := ingress("default", "plain", annotate(AnnotationEnableGlobalAuth, "false"), rule("c.example", prefix("/", "app", 80), prefix("/app", "app", 80)))
	m, rejected := buildModelFrom(t, []any{service("default", "app", port(80, "http")), ing, plain}, opts)
	if len(rejected) > 0 {
		t.Fatalf("rejected %v", rejected)
	}
	var authed, open []*ProfileSettings
	for _, srv := range m.Servers {
		for _, l := range srv.Locations {
			switch {
			case l.Ingress.Name == "plain":
				if l.Profile != nil {
					t.Errorf("%s%s: profile %+v, want none", srv.Host, l.Path, *l.Profile)
				}
			case strings.HasPrefix(l.Path, "/public"):
				open = append(open, l.Profile)
			default:
				authed = append(authed, l.Profile)
			}
		}
	}
	if len(authed) != 3 || len(open) != 2 {
		t.Fatalf("%d locations with the global auth, %d without; want 3 and 2", len(authed), len(open))
	}
	if authed[0] == nil || authed[0].AuthURL == "" || authed[0].ClientMaxBodySize == "" {
		t.Fatalf("profile %+v, want the global auth and the body size", authed[0])
	}
	if open[0] == nil || open[0].AuthURL != "" || open[0].ClientMaxBodySize == "" {
		t.Fatalf("profile %+v, want the body size alone", open[0])
	}
	for _, p := range authed[1:] {
		if p != authed[0] {
			t.Errorf("the Ingress's locations hold copies of its profile, want one shared")
		}
	}
	if open[1] != open[0] {
		t.Errorf("the locations without the global auth hold copies of their profile, want one shared")
	}
}

// TestGlobalAuthThroughNginx runs the global auth through real NGINX: an Ingress without annotations goes
// through the global auth service, one with enable-global-auth "false" and a path of no-auth-locations
// do not, and an Ingress with its own auth-url uses its own service.
func TestGlobalAuthThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)

	var mu sync.Mutex
	calls := map[string][]string{} // per auth service, the X-Original-URL of its requests
	authServer := func(name string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls[name] = append(calls[name], r.Header.Get("X-Original-URL"))
			mu.Unlock()
			if r.Header.Get("X-Test-Verdict") != "allow" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			w.Header().Set("X-User", name+"-user")
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(s.Close)
		return "http://" + s.Listener.Addr().String()
	}
	globalURL, ownURL := authServer("global")+"/check", authServer("own")+"/check"
	takeCalls := func(name string) []string {
		mu.Lock()
		defer mu.Unlock()
		c := calls[name]
		delete(calls, name)
		return c
	}
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "app "+r.URL.Path+" user="+r.Header.Get("X-User"))
	})
	opts := globalAuthOptions(t, map[string]string{"global-auth-url": globalURL, "global-auth-response-headers": "X-User",
		"global-auth-signin": "https://login.example/start"})
	m, rejected := buildModelFrom(t, []any{
		service("default", "app", port(80, "http")),
		ingress("default", "plain", rule("plain.example", prefix("/", "app", 80), prefix("/.well-known/acme-challenge", "app", 80))),
		ingress("default", "off", annotate(AnnotationEnableGlobalAuth, "false"), rule("off.example", prefix("/", "app", 80))),
		ingress("default", "own", annotate(AnnotationAuthURL, ownURL, AnnotationAuthResponseHeaders, "X-User"), rule("own.example", prefix("/", "app", 80))),
	}, opts)
	if len(rejected) > 0 || len(m.Profiles) != 2 {
		t.Fatalf("rejected %v, profiles %+v; want two (global, own)", rejected, m.Profiles)
	}
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(host, path, verdict string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("X-Test-Verdict", verdict)
		req.Header.Set("X-User", "mallory")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}

	// No annotations: the global auth decides, its 401 redirects to global-auth-signin, its headers reach the backend.
	if code, loc, _ := get("plain.example", "/page", "deny"); code != http.StatusFound ||
		loc != "https://login.example/start?rd=http://plain.example%2Fpage" {
		t.Errorf("plain, denied: %d Location %q, want 302 to the global signin", code, loc)
	}
	if c := takeCalls("global"); len(c) != 1 || c[0] != "http://plain.example/page" {
		t.Errorf("global auth service calls %q, want one for the request", c)
	}
	if code, _, body := get("plain.example", "/page", "allow"); code != http.StatusOK || body != "app /page user=global-user" {
		t.Errorf("plain, allowed: %d %q, want the app with the global auth's X-User", code, body)
	}
	if c := takeCalls("global"); len(c) != 1 {
		t.Errorf("global auth service calls %q, want one", c)
	}
	// A path of no-auth-locations (the default's ACME challenge): no auth at all.
	if code, _, body := get("plain.example", "/.well-known/acme-challenge/token", "deny"); code != http.StatusOK ||
		body != "app /.well-known/acme-challenge/token user=mallory" {
		t.Errorf("no-auth location: %d %q, want the app without auth", code, body)
	}
	// enable-global-auth "false": no auth.
	if code, _, body := get("off.example", "/x", "deny"); code != http.StatusOK || body != "app /x user=mallory" {
		t.Errorf("enable-global-auth false: %d %q, want the app without auth", code, body)
	}
	if c := takeCalls("global"); len(c) != 0 {
		t.Errorf("the global auth service was asked for %q, want no call", c)
	}
	// Its own auth-url: its own service, not the global one.
	if code, _, _ := get("own.example", "/x", "deny"); code != http.StatusUnauthorized {
		t.Errorf("own auth-url, denied: %d, want 401 (no global signin)", code)
	}
	if code, _, body := get("own.example", "/x", "allow"); code != http.StatusOK || body != "app /x user=own-user" {
		t.Errorf("own auth-url, allowed: %d %q", code, body)
	}
	if g, o := takeCalls("global"), takeCalls("own"); len(g) != 0 || len(o) != 2 {
		t.Errorf("calls: global %q, own %q; want the own service's two", g, o)
	}
}

// TestGlobalAuthInvalidWithdrawsAnOpenLastGoodVersion: a global auth turned on with an invalid key (no
// good value to keep) rejects the Ingresses that would use it; their last good version without external
// auth is not served either (it would stay open), while one that had the global auth stays served.
func TestGlobalAuthInvalidWithdrawsAnOpenLastGoodVersion(t *testing.T) {
	svcs := servicesOf(service("a", "web", port(80, "http")))
	ing := ingress("a", "site", rule("shop.example", prefix("/", "web", 80)))
	servedBy := func(m Model) string {
		s, ok := server(m, "shop.example")
		if !ok || len(s.Locations) != 1 {
			return "nobody"
		}
		return s.Locations[0].Ingress.String() + " auth=" + valueOf(s.Locations[0].Profile).AuthURL
	}
	valid := DefaultTranslateOptions()
	valid.GlobalAuth = GlobalAuth{URL: "http://auth.example/", SigninRedirectParam: "rd"}
	invalid := valid
	invalid.GlobalAuth.Invalid = "global-auth-method"

	b := NewModelBuilder()
	build := func(opts TranslateOptions) Build {
		return b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, Options: opts})
	}
	build(DefaultTranslateOptions())
	if got := build(invalid); servedBy(got.Model) != "nobody" || len(got.Rejected) != 1 {
		t.Errorf("open last good version, global auth invalid: served by %s, %d rejected; want it withdrawn", servedBy(got.Model), len(got.Rejected))
	}

	b = NewModelBuilder()
	build(valid)
	if got := build(invalid); servedBy(got.Model) != "a/site auth=http://auth.example/" || len(got.Rejected) != 1 {
		t.Errorf("last good version with the global auth: served by %s, %d rejected; want it kept", servedBy(got.Model), len(got.Rejected))
	}
}

// TestGlobalAuthRefusedByNginxIsNotServedOpen: when NGINX refuses the global auth's profile (its host does
// not resolve), an Ingress's earlier version without external auth is not served instead.
func TestGlobalAuthRefusedByNginxIsNotServedOpen(t *testing.T) {
	svcs := servicesOf(service("a", "web", port(80, "http")))
	ing := ingress("a", "site", rule("shop.example", prefix("/", "web", 80)))
	opts := DefaultTranslateOptions()
	opts.GlobalAuth = GlobalAuth{URL: "http://auth.invalid/", SigninRedirectParam: "rd"}
	b := NewModelBuilder()
	b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, Options: DefaultTranslateOptions()})
	b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, Options: opts})
	refusal := &Refusal{Err: errors.New("nginx -t: host not found"), Profile: ProfileSettings{AuthURL: "http://auth.invalid/"}}
	got := b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, Options: opts,
		Quarantine: func(*networkingv1.Ingress) *Refusal { return refusal }})
	if s, ok := server(got.Model, "shop.example"); ok {
		for _, l := range s.Locations {
			if valueOf(l.Profile).AuthURL == "" {
				t.Errorf("location %s served without external auth while the global auth is refused", l.Path)
			}
		}
	}
	if len(got.Rejected) != 1 {
		t.Errorf("rejected %+v, want the Ingress", got.Rejected)
	}
}

// TestGlobalAuthFixedEndsTheQuarantine: once the ConfigMap's global auth that NGINX refused is fixed, the
// Ingress (the same object version) is served with the new one rather than kept quarantined.
func TestGlobalAuthFixedEndsTheQuarantine(t *testing.T) {
	svcs := servicesOf(service("a", "web", port(80, "http")))
	ing := ingress("a", "site", rule("shop.example", prefix("/", "web", 80)))
	bad, fixed := DefaultTranslateOptions(), DefaultTranslateOptions()
	bad.GlobalAuth = GlobalAuth{URL: "http://auth.invalid/", SigninRedirectParam: "rd"}
	fixed.GlobalAuth = GlobalAuth{URL: "http://auth.example/", SigninRedirectParam: "rd"}
	refusal := &Refusal{Err: errors.New("nginx -t: host not found"), Profile: ProfileSettings{AuthURL: "http://auth.invalid/"}}
	quarantine := func(*networkingv1.Ingress) *Refusal { return refusal } // keyed by the object's version, which does not change
	b := NewModelBuilder()
	b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, Options: bad})
	b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, Options: bad, Quarantine: quarantine})
	got := b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, Options: fixed, Quarantine: quarantine})
	s, ok := server(got.Model, "shop.example")
	if !ok || len(s.Locations) != 1 || valueOf(s.Locations[0].Profile).AuthURL != "http://auth.example/" || len(got.Rejected) != 0 {
		t.Errorf("after the fix: locations %+v, rejected %+v; want the Ingress served with the fixed global auth", s.Locations, got.Rejected)
	}
}
