package nginx

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

// TestAnnotationBalancing: the balancing group's annotations -> the route's balancing settings, a
// Warning for an ignored value, or the exact rejection.
func TestAnnotationBalancing(t *testing.T) {
	ignored := func(key, raw, want string) string {
		return "metadata.annotations[" + key + "]: " + raw + " is not " + want + "; ignored"
	}
	onlyWith := func(key, what string) string {
		return "metadata.annotations[" + key + "]: has an effect only with " + what + "; ignored"
	}
	sum := sha256.Sum256([]byte("ingress-reactor affinity\x00default/a\x00default/a"))
	key := hex.EncodeToString(sum[:16])
	cookie := func(b BalanceOptions) BalanceOptions {
		b.Affinity = true
		if b.CookieName == "" {
			b.CookieName = "INGRESSCOOKIE"
		}
		return b
	}
	const hashWant = " (want variables such as $request_uri, $remote_addr, $arg_<name>, $http_<name>, $cookie_<name> and text of letters, digits, -, _, ., :, /)"
	tests := map[string]struct {
		kv          []string
		want        BalanceOptions
		wantWarning string
		wantErr     string
	}{
		"no annotation":          {},
		"affinity cookie":        {kv: []string{AnnotationAffinity, "cookie"}, want: cookie(BalanceOptions{})},
		"affinity in upper case": {kv: []string{AnnotationAffinity, " Cookie\n"}, want: cookie(BalanceOptions{})},
		"affinity empty is none": {kv: []string{AnnotationAffinity, ""}},
		"affinity of another type rejects": {kv: []string{AnnotationAffinity, "ip"},
			wantErr: `metadata.annotations[` + AnnotationAffinity + `]: "ip" is not an affinity type (want "cookie")`},
		"every cookie setting": {kv: []string{AnnotationAffinity, "cookie", AnnotationAffinityMode, "persistent",
			AnnotationSessionCookieName, "ROUTE", AnnotationSessionCookiePath, "/app", AnnotationSessionCookieDomain, ".example.com",
			AnnotationSessionCookieSameSite, "none", AnnotationSessionCookieConditionalSSN, "true", AnnotationSessionCookieExpires, "172800",
			AnnotationSessionCookieMaxAge, "0", AnnotationSessionCookieSecure, "false", AnnotationSessionCookieChangeOnFailure, "true"},
			want: cookie(BalanceOptions{CookiePersistent: true, CookieName: "ROUTE", CookiePath: "/app", CookieDomain: ".example.com",
				CookieSameSite: "None", CookieSameSiteNoneConditional: true, CookieExpires: "172800", CookieMaxAge: "0",
				CookieChangeOnFailure: true, CookieKey: key})},
		"balanced mode": {kv: []string{AnnotationAffinity, "cookie", AnnotationAffinityMode, "balanced", AnnotationSessionCookieSameSite, "Strict"},
			want: cookie(BalanceOptions{CookieSameSite: "Strict"})},
		"unknown mode is ignored": {kv: []string{AnnotationAffinity, "cookie", AnnotationAffinityMode, "sticky"},
			want: cookie(BalanceOptions{}), wantWarning: ignored(AnnotationAffinityMode, `"sticky"`, "balanced or persistent")},
		"cookie name with a semicolon is ignored": {kv: []string{AnnotationAffinity, "cookie", AnnotationSessionCookieName, "S; Domain=evil.example"},
			want: cookie(BalanceOptions{}), wantWarning: ignored(AnnotationSessionCookieName, `"S; Domain=evil.example"`,
				"a cookie name of token characters (letters, digits, !#$%&'*+.^_`|~-)")},
		"cookie path with CRLF is ignored": {kv: []string{AnnotationAffinity, "cookie", AnnotationSessionCookiePath, "/a\r\nSet-Cookie: x=1"},
			want: cookie(BalanceOptions{}), wantWarning: ignored(AnnotationSessionCookiePath, `"/a\r\nSet-Cookie: x=1"`,
				"a path starting with / of printable ASCII without ; and ,")},
		"cookie path with a comma is ignored": {kv: []string{AnnotationAffinity, "cookie", AnnotationSessionCookiePath, "/a,b"},
			want: cookie(BalanceOptions{}), wantWarning: ignored(AnnotationSessionCookiePath, `"/a,b"`,
				"a path starting with / of printable ASCII without ; and ,")},
		"cookie domain with a semicolon is ignored": {kv: []string{AnnotationAffinity, "cookie", AnnotationSessionCookieDomain, "a.example;Secure"},
			want: cookie(BalanceOptions{}), wantWarning: ignored(AnnotationSessionCookieDomain, `"a.example;Secure"`, "a domain name")},
		"unknown samesite is ignored": {kv: []string{AnnotationAffinity, "cookie", AnnotationSessionCookieSameSite, "sometimes"},
			want: cookie(BalanceOptions{}), wantWarning: ignored(AnnotationSessionCookieSameSite, `"sometimes"`, "None, Lax or Strict")},
		"negative max-age is ignored": {kv: []string{AnnotationAffinity, "cookie", AnnotationSessionCookieMaxAge, "-1"},
			want: cookie(BalanceOptions{}), wantWarning: ignored(AnnotationSessionCookieMaxAge, `"-1"`, "whole seconds up to 2147483647")},
		"expires over 2^31 is ignored": {kv: []string{AnnotationAffinity, "cookie", AnnotationSessionCookieExpires, "2147483648"},
			want: cookie(BalanceOptions{}), wantWarning: ignored(AnnotationSessionCookieExpires, `"2147483648"`, "whole seconds up to 2147483647")},
		"secure true": {kv: []string{AnnotationAffinity, "cookie", AnnotationSessionCookieSecure, "true"},
			want: cookie(BalanceOptions{CookieSecure: true})},
		"secure not a boolean is ignored": {kv: []string{AnnotationAffinity, "cookie", AnnotationSessionCookieSecure, "yes"},
			want: cookie(BalanceOptions{}), wantWarning: ignored(AnnotationSessionCookieSecure, `"yes"`, `a boolean ("true" or "false")`)},
		"regex paths without a cookie path warn": {kv: []string{AnnotationAffinity, "cookie", AnnotationUseRegex, "true"},
			want: cookie(BalanceOptions{}), wantWarning: "metadata.annotations[" + AnnotationSessionCookiePath +
				"]: not set, and the paths are regular expressions: the affinity cookie's path is /"},
		"cookie settings without affinity are ignored": {kv: []string{AnnotationSessionCookieName, "ROUTE"},
			wantWarning: onlyWith(AnnotationSessionCookieName, AnnotationAffinity+": cookie")},
		"hash by a variable":       {kv: []string{AnnotationUpstreamHashBy, "$request_uri"}, want: BalanceOptions{HashBy: "$request_uri"}},
		"hash by text and vars":    {kv: []string{AnnotationUpstreamHashBy, " ${arg_user}-v1:$remote_addr "}, want: BalanceOptions{HashBy: "${arg_user}-v1:$remote_addr"}},
		"hash by header or cookie": {kv: []string{AnnotationUpstreamHashBy, "$http_x_user$cookie_sid"}, want: BalanceOptions{HashBy: "$http_x_user$cookie_sid"}},
		"hash subset": {kv: []string{AnnotationUpstreamHashBy, "$arg_x", AnnotationUpstreamHashBySubset, "true"},
			want: BalanceOptions{HashBy: "$arg_x", HashSubsetSize: 3}},
		"hash subset size": {kv: []string{AnnotationUpstreamHashBy, "$arg_x", AnnotationUpstreamHashBySubset, "true", AnnotationUpstreamHashBySubsetSize, "5"},
			want: BalanceOptions{HashBy: "$arg_x", HashSubsetSize: 5}},
		"hash subset size 0 is ignored": {kv: []string{AnnotationUpstreamHashBy, "$arg_x", AnnotationUpstreamHashBySubset, "true", AnnotationUpstreamHashBySubsetSize, "0"},
			want: BalanceOptions{HashBy: "$arg_x", HashSubsetSize: 3}, wantWarning: ignored(AnnotationUpstreamHashBySubsetSize, `"0"`, "a whole number from 1 to 1000")},
		"hash subset size without subset": {kv: []string{AnnotationUpstreamHashBy, "$arg_x", AnnotationUpstreamHashBySubsetSize, "5"},
			want: BalanceOptions{HashBy: "$arg_x"}, wantWarning: onlyWith(AnnotationUpstreamHashBySubsetSize, AnnotationUpstreamHashBySubset+`: "true"`)},
		"hash subset without hash": {kv: []string{AnnotationUpstreamHashBySubset, "true"},
			wantWarning: onlyWith(AnnotationUpstreamHashBySubset, AnnotationUpstreamHashBy)},
		"hash by a variable off the list rejects": {kv: []string{AnnotationUpstreamHashBy, "$request_body"},
			wantErr: `metadata.annotations[` + AnnotationUpstreamHashBy + `]: "$request_body": $request_body is not a variable an expression may use` + hashWant},
		"hash by the status token rejects": {kv: []string{AnnotationUpstreamHashBy, "${ingress_reactor_token}"},
			wantErr: `metadata.annotations[` + AnnotationUpstreamHashBy + `]: "${ingress_reactor_token}": $ingress_reactor_token is not a variable an expression may use` + hashWant},
		"hash with a semicolon rejects": {kv: []string{AnnotationUpstreamHashBy, "$arg_x; }"},
			wantErr: `metadata.annotations[` + AnnotationUpstreamHashBy + `]: "$arg_x; }": ";" is neither a variable nor text of letters, digits, -, _, ., :, /` + hashWant},
		"hash by text alone rejects": {kv: []string{AnnotationUpstreamHashBy, "constant"},
			wantErr: `metadata.annotations[` + AnnotationUpstreamHashBy + `]: "constant": no variable (every request would go to the same endpoint)` + hashWant},
		"affinity wins over hash": {kv: []string{AnnotationAffinity, "cookie", AnnotationUpstreamHashBy, "$arg_x"}, want: cookie(BalanceOptions{}),
			wantWarning: "metadata.annotations[" + AnnotationUpstreamHashBy + "]: ignored: " + AnnotationAffinity + " applies (as in ingress-nginx)"},
		"ewma":        {kv: []string{AnnotationLoadBalance, "ewma"}, want: BalanceOptions{LoadBalance: "ewma"}},
		"round robin": {kv: []string{AnnotationLoadBalance, "round_robin"}},
		"chash is ignored": {kv: []string{AnnotationLoadBalance, "chash"},
			wantWarning: ignored(AnnotationLoadBalance, `"chash"`, "round_robin or ewma (use affinity or upstream-hash-by for sticky and hashed balancing)")},
		"unknown method is ignored": {kv: []string{AnnotationLoadBalance, "least_conn"},
			wantWarning: ignored(AnnotationLoadBalance, `"least_conn"`, "round_robin or ewma (use affinity or upstream-hash-by for sticky and hashed balancing)")},
		"hash wins over ewma": {kv: []string{AnnotationUpstreamHashBy, "$arg_x", AnnotationLoadBalance, "ewma"}, want: BalanceOptions{HashBy: "$arg_x"},
			wantWarning: "metadata.annotations[" + AnnotationLoadBalance + "]: ignored: " + AnnotationUpstreamHashBy + " applies (as in ingress-nginx)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.kv...)
			if tc.wantErr != "" {
				if got != nil || !slices.Contains(errs, tc.wantErr) {
					t.Fatalf("got %+v, errors %q; want the rejection %q", got, errs, tc.wantErr)
				}
				return
			}
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			var b BalanceOptions
			if got.Options != nil {
				b = got.Options.Balance
			}
			if b != tc.want {
				t.Errorf("balance %+v, want %+v", b, tc.want)
			}
			if tc.wantWarning == "" && len(got.Warnings) > 0 || tc.wantWarning != "" && !slices.Contains(got.Warnings, tc.wantWarning) {
				t.Errorf("warnings %q, want %q", got.Warnings, tc.wantWarning)
			}
		})
	}
}

// TestBalanceRouteData: the balancing group's wire form in the route push, per location.
func TestBalanceRouteData(t *testing.T) {
	m, _ := buildModelWithServices(t, []any{service("default", "web", port(80, "")),
		ingress("default", "a", rule("a.example.com", prefix("/shop", "web", 80), exact("/x", "web", 80)),
			annotate(AnnotationAffinity, "cookie", AnnotationSessionCookieMaxAge, "60", AnnotationSessionCookieSecure, "true")),
		ingress("default", "b", rule("b.example.com", prefix("/", "web", 80)), annotate(AnnotationAffinity, "cookie",
			AnnotationAffinityMode, "persistent", AnnotationSessionCookieName, "ROUTE", AnnotationSessionCookiePath, "/",
			AnnotationSessionCookieDomain, "b.example.com", AnnotationSessionCookieSameSite, "none",
			AnnotationSessionCookieConditionalSSN, "true", AnnotationSessionCookieExpires, "10", AnnotationSessionCookieChangeOnFailure, "true")),
		ingress("default", "c", rule("c.example.com", prefix("/", "web", 80)), annotate(AnnotationUpstreamHashBy, "$arg_x",
			AnnotationUpstreamHashBySubset, "true")),
		ingress("default", "d", rule("d.example.com", prefix("/", "web", 80)), annotate(AnnotationLoadBalance, "ewma")),
		ingress("default", "e", rule("e.example.com", path("ImplementationSpecific", "/api/v[0-9]+", "web", 80)),
			annotate(AnnotationUseRegex, "true", AnnotationAffinity, "cookie")),
	}, nil)
	sum := sha256.Sum256([]byte("ingress-reactor affinity\x00default/b\x00default/b"))
	for host, wants := range map[Hostname][]string{
		"a.example.com": {`"path":"/shop","upstream":"` + string(up("default", "web", 80).Name) + `","balance":{"cookie":{"name":"INGRESSCOOKIE","path":"/shop","max_age":60,"secure":true}},"metrics":["default","a","web"]}`,
			`"path":"/x","exact":true,"upstream":"` + string(up("default", "web", 80).Name) + `","balance":{"cookie":{"name":"INGRESSCOOKIE","path":"/x","max_age":60,"secure":true}},"metrics":["default","a","web"]}`},
		"b.example.com": {`"balance":{"cookie":{"name":"ROUTE","path":"/","domain":"b.example.com","samesite":"None","samesite_none_conditional":true,` +
			`"expires":10,"change_on_failure":true,"persistent":true,"key":"` + hex.EncodeToString(sum[:16]) + `"}}`},
		"c.example.com": {`"balance":{"hash":"$arg_x","subset":3}`},
		"d.example.com": {`"balance":{"lb":"ewma"}`},
		"e.example.com": {`"balance":{"cookie":{"name":"INGRESSCOOKIE","path":"/"}}`},
	} {
		s := m.Server(host)
		if s == nil {
			t.Fatalf("no server %s", host)
		}
		wire := string(AppendRouteHostJSON(nil, s))
		for _, want := range wants {
			if !strings.Contains(wire, want) {
				t.Errorf("%s: route push %s, want it to contain %s", host, wire, want)
			}
		}
	}
}
