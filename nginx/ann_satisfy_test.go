package nginx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestAnnotationSatisfy: satisfy -> the route options' SatisfyAny, set only where it changes something;
// a value other than all or any rejects the Ingress.
func TestAnnotationSatisfy(t *testing.T) {
	const ann = "metadata.annotations[" + AnnotationSatisfy + "]: "
	const noEffect = ann + `"any" has no effect without both ` + AnnotationAllowlistSourceRange + " (or " + AnnotationWhitelistSourceRange +
		") and authentication (" + AnnotationAuthType + " or " + AnnotationAuthURL + "); ignored"
	secrets := secretLookup{nn("default", "users"): authSecret("users", map[string]string{"auth": "alice:" + authVectors["apr1"].hash})}
	basic := []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "users"}
	ext := []string{AnnotationAuthURL, "http://auth.example.com/check"}
	allow := []string{AnnotationAllowlistSourceRange, "10.0.0.0/8"}
	join := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	tests := map[string]struct {
		kv          []string
		want        bool
		wantWarning string
		wantErr     string
	}{
		"any with an allowlist and basic authentication":    {kv: join(allow, basic, []string{AnnotationSatisfy, "any"}), want: true},
		"any with an allowlist and external authentication": {kv: join(allow, ext, []string{AnnotationSatisfy, " any "}), want: true},
		"any with the older allowlist name":                 {kv: join([]string{AnnotationWhitelistSourceRange, "10.0.0.0/8"}, basic, []string{AnnotationSatisfy, "any"}), want: true},
		"all is the default":                                {kv: join(allow, basic, []string{AnnotationSatisfy, "all"})},
		"any without an allowlist changes nothing":          {kv: join(basic, []string{AnnotationSatisfy, "any"}), wantWarning: noEffect},
		"any with a denylist only changes nothing": {
			kv: join([]string{AnnotationDenylistSourceRange, "10.0.0.0/8"}, basic, []string{AnnotationSatisfy, "any"}), wantWarning: noEffect,
		},
		"any without authentication changes nothing": {kv: join(allow, []string{AnnotationSatisfy, "any"}), wantWarning: noEffect},
		"ANY is not any": {kv: join(allow, basic, []string{AnnotationSatisfy, "ANY"}), wantErr: ann + `"ANY" is not "all" or "any"`},
		"an injection attempt": {
			kv: join(allow, basic, []string{AnnotationSatisfy, "any;\nallow all"}), wantErr: ann + `"any;\nallow all" is not "all" or "any"`,
		},
		"empty": {kv: join(allow, basic, []string{AnnotationSatisfy, ""}), wantErr: ann + `"" is not "all" or "any"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(tc.kv...))
			got, err := TranslateIngressWith(ing, Lookups{Services: servicesOf(service("default", "web", port(80, "http"))), Secrets: secrets}, DefaultTranslateOptions())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if any := got.Options != nil && got.Options.SatisfyAny; any != tc.want {
				t.Fatalf("SatisfyAny = %v, want %v", any, tc.want)
			}
			same(t, "warnings", strings.Join(got.Warnings, "\n"), tc.wantWarning)
			route := string(appendRouteOptions(nil, got.Options))
			if strings.Contains(route, `"satisfy_any":true`) != tc.want {
				t.Fatalf("wire form %s, want satisfy_any %v", route, tc.want)
			}
		})
	}
}

// TestSatisfyThroughNginx runs satisfy through real NGINX, with basic authentication and an auth service
// run by the test. The test client connects from 127.0.0.1: hosts whose allowlist holds it are "allowed",
// those with 10.0.0.0/8 only play another client's address.
func TestSatisfyThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	var authCalls atomic.Int32
	authSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authCalls.Add(1)
		if r.Header.Get("X-Test-Verdict") != "ok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Auth-User", "from-auth")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(authSrv.Close)
	authURL := "http://" + authSrv.Listener.Addr().String() + "/check"

	var mu sync.Mutex
	var backendUsers []string
	var reached atomic.Int32
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		mu.Lock()
		backendUsers = append(backendUsers, r.Header.Get("X-Auth-User"))
		mu.Unlock()
		_, _ = io.WriteString(w, "app")
	})

	secrets := secretLookup{nn("default", "users"): authSecret("users", map[string]string{"auth": "alice:" + authVectors["apr1"].hash})}
	basic := []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "users"}
	ext := []string{AnnotationAuthURL, authURL, AnnotationAuthResponseHeaders, "X-Auth-User"}
	here := []string{AnnotationAllowlistSourceRange, "127.0.0.1"}
	elsewhere := []string{AnnotationAllowlistSourceRange, "10.0.0.0/8"}
	anyOf := []string{AnnotationSatisfy, "any"}
	site := func(name string, lists ...[]string) *networkingv1.Ingress {
		var kv []string
		for _, l := range lists {
			kv = append(kv, l...)
		}
		return ingress("default", name, annotate(kv...), rule(name+".example.com", prefix("/", "app", 80)))
	}
	ings := []*networkingv1.Ingress{
		site("basic-any", here, basic, anyOf),
		site("basic-all", here, basic),
		site("basic-other-any", elsewhere, basic, anyOf),
		site("basic-other-all", elsewhere, basic),
		site("denied-any", []string{AnnotationAllowlistSourceRange, "127.0.0.0/8", AnnotationDenylistSourceRange, "127.0.0.1"}, basic, anyOf),
		site("ext-any", here, ext, anyOf),
		site("ext-all", here, ext),
		site("ext-other-any", elsewhere, ext, anyOf),
		site("both-other-any", elsewhere, basic, ext, anyOf),
	}
	b := NewModelBuilder()
	build := b.Build(BuildInput{Ingresses: ings, Services: servicesOf(service("default", "app", port(80, "http"))), Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 {
		t.Fatalf("rejected %+v", build.Rejected)
	}
	applyModel(t, rt, build.Model, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, host     string
		user, verdict  string
		want           int
		wantAuthCalled bool
	}{
		{"allowed address, any: no credentials needed", "basic-any", "", "", 200, false},
		{"allowed address, all: credentials still needed", "basic-all", "", "", 401, false},
		{"allowed address, all: with credentials", "basic-all", "alice", "", 200, false},
		{"other address, any: credentials needed (401, not 403)", "basic-other-any", "", "", 401, false},
		{"other address, any: a wrong password", "basic-other-any", "mallory", "", 401, false},
		{"other address, any: with credentials", "basic-other-any", "alice", "", 200, false},
		{"other address, all: 403 whatever the credentials", "basic-other-all", "alice", "", 403, false},
		{"a denied address is denied even with credentials", "denied-any", "alice", "", 403, false},
		{"external auth, allowed address, any: the service is not asked", "ext-any", "", "no", 200, false},
		{"external auth, allowed address, all: the service says no", "ext-all", "", "no", 401, true},
		{"external auth, allowed address, all: the service says yes", "ext-all", "", "ok", 200, true},
		{"external auth, other address, any: the service says no", "ext-other-any", "", "no", 401, true},
		{"external auth, other address, any: the service says yes", "ext-other-any", "", "ok", 200, true},
		{"both, other address, any: basic credentials suffice", "both-other-any", "alice", "no", 200, false},
		{"both, other address, any: or the auth service", "both-other-any", "", "ok", 200, true},
		{"both, other address, any: a wrong password and the service says yes", "both-other-any", "mallory", "ok", 200, true},
		{"both, other address, any: neither", "both-other-any", "", "no", 401, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/x", cfg.HTTPPort), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host + ".example.com"
			switch tc.user {
			case "alice":
				req.SetBasicAuth("alice", authVectors["apr1"].password)
			case "mallory":
				req.SetBasicAuth("alice", "wrong")
			}
			req.Header.Set("X-Test-Verdict", tc.verdict)
			// A client's own X-Auth-User must never reach the backend as the auth service's verdict.
			req.Header.Set("X-Auth-User", "forged")
			calls, before := authCalls.Load(), reached.Load()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.want)
			}
			if called := authCalls.Load() != calls; called != tc.wantAuthCalled {
				t.Fatalf("auth service asked: %v, want %v", called, tc.wantAuthCalled)
			}
			if got := reached.Load() != before; got != (tc.want == 200) {
				t.Fatalf("backend reached: %v, want %v", got, tc.want == 200)
			}
			if tc.want == 401 && strings.Contains(tc.host, "basic") && resp.Header.Get("WWW-Authenticate") != `Basic realm=""` {
				t.Fatalf("WWW-Authenticate %q, want the basic challenge", resp.Header.Get("WWW-Authenticate"))
			}
			if tc.want == 200 {
				mu.Lock()
				user := backendUsers[len(backendUsers)-1]
				mu.Unlock()
				want := ""
				if tc.wantAuthCalled {
					want = "from-auth"
				}
				if strings.HasPrefix(tc.host, "ext") || strings.HasPrefix(tc.host, "both") {
					if user != want {
						t.Fatalf("backend saw X-Auth-User %q, want %q", user, want)
					}
				}
			}
		})
	}

	// The router's side refuses satisfy_any where it would open the route: without authentication, or
	// without an allowlist.
	for _, bad := range []string{
		`"routes":[{"path":"/","upstream":"","allow":["0a000000/8"],"satisfy_any":true}]`,
		`"auth_users":{"ab":"alice:{PLAIN}x"},"routes":[{"path":"/","upstream":"","satisfy_any":true,"auth":{"challenge":"Basic realm=\"a\"","users":"ab"}}]`,
		`"auth_users":{"ab":"alice:{PLAIN}x"},"routes":[{"path":"/","upstream":"","allow":["0a000000/8"],"satisfy_any":"yes","auth":{"challenge":"Basic realm=\"a\"","users":"ab"}}]`,
	} {
		err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{"evil.example.com": []byte("{" + bad + "}")}})
		if refused, ok := errors.AsType[*RoutesRefusedError](err); !ok || len(refused.Refused) != 1 || !strings.Contains(refused.Error(), "satisfy_any") {
			t.Errorf("%s: push answered %v, want the host refused for satisfy_any", bad, err)
		}
	}
}
