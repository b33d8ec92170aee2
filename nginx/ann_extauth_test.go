package nginx

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestAnnotationExtAuth: the external auth annotations -> the translation's profile, a Warning, or the
// Ingress rejected.
func TestAnnotationExtAuth(t *testing.T) {
	p := IngressNginxPrefix
	const authURL = "http://oauth2-proxy.auth.svc.cluster.local:4180/oauth2/auth"
	tests := map[string]struct {
		kv          []string
		want        ProfileSettings
		wantWarning string
		wantErr     string
	}{
		"no annotation": {},
		"auth-url":      {kv: []string{AnnotationAuthURL, authURL}, want: ProfileSettings{AuthURL: authURL}},
		"auth-url without a path gets /": {kv: []string{AnnotationAuthURL, " https://192.0.2.7:8443 "},
			want: ProfileSettings{AuthURL: "https://192.0.2.7:8443/"}},
		"auth-url with a query and no path": {kv: []string{AnnotationAuthURL, "http://auth.example.com?a=/b"},
			want: ProfileSettings{AuthURL: "http://auth.example.com/?a=/b"}},
		"auth-url with IPv6": {kv: []string{AnnotationAuthURL, "http://[2001:db8::1]:80/a%2Fb"}, want: ProfileSettings{AuthURL: "http://[2001:db8::1]:80/a%2Fb"}},
		"every setting": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthMethod, "POST",
			AnnotationAuthSignin, "https://auth.example.com/oauth2/start", AnnotationAuthSigninRedirectParam, "redirect_to",
			AnnotationAuthResponseHeaders, "X-Auth-Request-User, X-Auth-Request-Email,x-auth-request-user,,Authorization",
			AnnotationAuthRequestRedirect, "https://app.example.com/", AnnotationAuthAlwaysSetCookie, "true"},
			want: ProfileSettings{AuthURL: authURL, AuthMethod: "POST", AuthSignin: "https://auth.example.com/oauth2/start",
				AuthSigninRedirectParam: "redirect_to", AuthResponseHeaders: "X-Auth-Request-User,X-Auth-Request-Email,Authorization",
				AuthRequestRedirect: "https://app.example.com/", AuthAlwaysSetCookie: true}},
		"signin that names rd already": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, "https://auth.example.com/start?rd=https://app.example.com/"},
			want: ProfileSettings{AuthURL: authURL, AuthSignin: "https://auth.example.com/start?rd=https://app.example.com/"}},
		"signin default parameter": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, "https://auth.example.com/start?x=1"},
			want: ProfileSettings{AuthURL: authURL, AuthSignin: "https://auth.example.com/start?x=1", AuthSigninRedirectParam: "rd"}},
		"companions without auth-url are ignored": {kv: []string{AnnotationAuthSignin, "https://auth.example.com/start"},
			wantWarning: "metadata.annotations[" + p + "auth-signin]: applies only with " + p + "auth-url; ignored"},
		"redirect param without signin is ignored": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSigninRedirectParam, "next"},
			want:        ProfileSettings{AuthURL: authURL},
			wantWarning: "metadata.annotations[" + p + "auth-signin-redirect-param]: applies only with " + p + "auth-signin; ignored"},
		"signin with oauth2-proxy's variables": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, "https://$host/oauth2/start?rd=$escaped_request_uri"},
			want: ProfileSettings{AuthURL: authURL, AuthSignin: "https://$host/oauth2/start?rd=$escaped_request_uri"}},
		"signin with braced variables": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, "https://${best_http_host}/start"},
			want: ProfileSettings{AuthURL: authURL, AuthSignin: "https://${best_http_host}/start", AuthSigninRedirectParam: "rd"}},
		"signin with another variable": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, "https://a.example.com/?t=$http_authorization"},
			wantErr: p + `auth-signin]: "https://a.example.com/?t=$http_authorization" names an NGINX variable other than $host`},
		"signin with a variable name's prefix": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, "https://$hostname/"},
			wantErr: p + `auth-signin]: "https://$hostname/" names an NGINX variable other than`},
		"signin with an unclosed brace": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, "https://${host/"},
			wantErr: p + `auth-signin]: "https://${host/" names an NGINX variable other than`},
		"signin with a variable and a CVE payload": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, "https://$host/;}\nlocation / {return 200;}#"},
			wantErr: p + `auth-signin]: "https://$host/;}\nlocation / {return 200;}#": want an absolute`},
		"bad method":       {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthMethod, "get"}, wantErr: p + `auth-method]: "get" is not a method`},
		"bad header name":  {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthResponseHeaders, "X-User, X User"}, wantErr: p + `auth-response-headers]: "X User" is not a header name`},
		"bad header quote": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthResponseHeaders, `X"User`}, wantErr: p + `auth-response-headers]: "X\"User" is not a header name`},
		"bad cookie bool":  {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthAlwaysSetCookie, "yes"}, wantErr: p + `auth-always-set-cookie]: "yes" is not a boolean`},
		"bad redirect param": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, "https://a.example.com/", AnnotationAuthSigninRedirectParam, "r d"},
			wantErr: p + `auth-signin-redirect-param]: "r d" is not a query parameter name`},
		"bad request redirect": {kv: []string{AnnotationAuthURL, authURL, AnnotationAuthRequestRedirect, "$request_uri"},
			wantErr: p + `auth-request-redirect]: "$request_uri": want a URL or path`},
	}
	// auth-url and auth-signin refuse, among others, ingress-nginx's auth CVE payloads.
	for i, bad := range []string{
		"", "ftp://auth.example.com/", "http://", "//auth.example.com/", "auth.example.com/check",
		"http://$remote_addr/oauth2/auth", "https://auth.example.com/oauth2/start?rd=$escaped_request_uri",
		"https://$host.evil.example/", "https://$host:8443/", "https://$hostname/", "https://$host/;}",
		"http://auth.example.com/auth;}\nlocation /x {return 200 pwned;}\n", "http://auth.example.com/#}", "http://a.example.com/\"; deny all; #",
		"http://a.example.com/ x", "http://a.example.com/{", "http://user:pw@a.example.com/", "http://a.example.com:0/", "http://a.example.com:99999/",
		"http://a_b.example.com/", "http://-a.example.com/", "http://a.example.com/%zz", "http://a.example.com/\\x", "http://a.example.com/'",
		"http://[::1%25lo]/", "http://[a.example.com]/", "http://a.example.com/é", "http://a.example.com/?a=${b}", "http://a.example.com/\x00",
		"http://a.example.com/a?b=[c]",
	} {
		tests[fmt.Sprintf("bad auth-url %d", i)] = struct {
			kv          []string
			want        ProfileSettings
			wantWarning string
			wantErr     string
		}{kv: []string{AnnotationAuthURL, bad}, wantErr: p + "auth-url]: " + quoteValue(bad) + ": want an absolute http:// or https:// URL"}
		if strings.Contains(bad, "$") {
			continue // auth-signin's variables: below
		}
		tests[fmt.Sprintf("bad auth-signin %d", i)] = struct {
			kv          []string
			want        ProfileSettings
			wantWarning string
			wantErr     string
		}{kv: []string{AnnotationAuthURL, authURL, AnnotationAuthSignin, bad}, wantErr: p + "auth-signin]: " + quoteValue(bad) + ": want an absolute http:// or https:// URL"}
	}
	// The request's own host, as oauth2-proxy's documentation writes it: routed by this controller.
	for raw, want := range map[string]string{
		"https://$host/oauth2/auth":      "https://$host/oauth2/auth",
		" http://${http_host}/auth?x=1 ": "http://$host/auth?x=1",
		"https://$best_http_host":        "https://$host/",
		"https://$host?check=1":          "https://$host/?check=1",
	} {
		tests["own host "+raw] = struct {
			kv          []string
			want        ProfileSettings
			wantWarning string
			wantErr     string
		}{kv: []string{AnnotationAuthURL, raw}, want: ProfileSettings{AuthURL: want}}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.kv...)
			if tc.wantErr != "" {
				if got != nil || !strings.Contains(fmt.Sprint(errs), tc.wantErr) {
					t.Fatalf("got %+v, errors %q, want the Ingress rejected with %q", got, errs, tc.wantErr)
				}
				return
			}
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			if !profileIs(got.Profile, tc.want) {
				t.Errorf("profile %+v, want %+v", got.Profile, tc.want)
			}
			if tc.wantWarning == "" && len(got.Warnings) > 0 || tc.wantWarning != "" && !slices.Contains(got.Warnings, tc.wantWarning) {
				t.Errorf("warnings %q, want %q", got.Warnings, tc.wantWarning)
			}
			// Whatever is accepted renders, with every value quoted.
			if !tc.want.IsZero() {
				for _, l := range tc.want.auxiliaryLocations() {
					for _, d := range l.Directives {
						if strings.Contains(d, "invalid") {
							t.Errorf("directive %q of an accepted profile", d)
						}
					}
				}
			}
		})
	}
}

// TestExtAuthDirectives: what a profile with external auth renders.
func TestExtAuthDirectives(t *testing.T) {
	p := ProfileSettings{AuthURL: "http://192.0.2.5:9000/auth?x=1", AuthSignin: "https://login.example.com/start?app=1",
		AuthSigninRedirectParam: "rd", AuthResponseHeaders: "X-User,X-Email,X_Groups", CustomHTTPErrors: "401,503"}
	conf, _, err := Render(Model{Servers: []Server{{Host: ""}}, Profiles: []ProfileSettings{p}}, baseRenderConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := string(conf)
	for _, want := range []string{
		"auth_request " + p.authLocation() + ";",
		"auth_request_set $ingress_reactor_auth_header_1 $upstream_http_x_email;",
		`proxy_set_header "X-Email" $ingress_reactor_auth_header_1;`,
		// An underscore name also replaces the client's dashed spelling, which backends often merge.
		`proxy_set_header "X_Groups" $ingress_reactor_auth_header_2;`,
		`proxy_set_header "X-Groups" $ingress_reactor_auth_header_2;`,
		"error_page 401 = @" + p.Name() + "_signin;",
		"error_page 503 = @ingress_reactor_error_503;",
		"location = " + p.authLocation() + " {",
		"proxy_pass_request_body off;",
		`proxy_pass "http://192.0.2.5:9000/auth?x=1";`,
		`proxy_set_header Host "192.0.2.5";`,
		`set $ingress_reactor_signin_0 "https://login.example.com/start?app=1&rd=";`,
		`set $ingress_reactor_signin_2 "://";`,
		"return 302 ${ingress_reactor_signin_0}${ingress_reactor_pass_scheme}${ingress_reactor_signin_2}${ingress_reactor_pass_host}${ingress_reactor_escaped_request_uri};",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	if strings.Contains(c, "error_page 401 = @ingress_reactor_error_401") {
		t.Error("custom-http-errors takes the 401 that auth-signin redirects")
	}
	// The named location repeats the http block's proxy headers, which it would not inherit.
	named := c[strings.Index(c, "location @"+p.Name()+" {"):]
	named = named[:strings.Index(named, "\n\t\t}")]
	if !strings.Contains(named, "proxy_set_header Host $ingress_reactor_proxy_host;") {
		t.Errorf("the profile's named location lacks the proxy headers:\n%s", named)
	}

	// An auth host that does not resolve fails "nginx -t" on the internal location's line: the profile is
	// quarantined.
	lines := strings.Split(c, "\n")
	for i, l := range lines {
		if strings.Contains(l, "proxy_pass \"http://192.0.2.5") {
			msg := fmt.Sprintf(`[emerg] host not found in upstream "x" in /tmp/ir/nginx.conf.tmp-1:%d`, i+1)
			if got := FailingProfiles(conf, msg, []ProfileSettings{p}); len(got) != 1 || got[0] != p {
				t.Errorf("FailingProfiles(%q) = %v, want the auth profile", msg, got)
			}
		}
	}
}

// TestAnnotationAuthProxySetHeaders: auth-proxy-set-headers and its ConfigMap -> the profile's header
// lines and the auth location's proxy_set_header lines, or -> the exact rejection.
func TestAnnotationAuthProxySetHeaders(t *testing.T) {
	const ann = "metadata.annotations[" + AnnotationAuthProxySetHeaders + "]: "
	const authURL = "http://auth.example.com/check"
	many := configMap("default", "many", "1")
	for i := range maxAuthProxySetHeaders + 1 {
		many.Data[fmt.Sprintf("X-H%d", i)] = "v"
	}
	dropped := configMap("default", "dropped", "1")
	dropped.Annotations = map[string]string{ConfigMapDataDroppedAnnotation: "20000"}
	cms := configMapLookup{
		nn("default", "headers"):  configMap("default", "headers", "1", "X-Tenant", " acme ", "x_team", "blue \"team\" \\ 1", "X-Empty", ""),
		nn("default", "many"):     many,
		nn("default", "dropped"):  dropped,
		nn("default", "token"):    configMap("default", "token", "1", "X.Dot", "v"),
		nn("default", "host"):     configMap("default", "host", "1", "host", "evil.example.com"),
		nn("default", "xff"):      configMap("default", "xff", "1", "X-Forwarded-For", "10.0.0.1"),
		nn("default", "framing"):  configMap("default", "framing", "1", "Content-Length", "0"),
		nn("default", "variable"): configMap("default", "variable", "1", "X-Auth", "$http_authorization"),
		nn("default", "crlf"):     configMap("default", "crlf", "1", "X-Evil", "a\r\nX-Admin: 1"),
		nn("default", "inject"):   configMap("default", "inject", "1", "X-Evil", "a\"; } location / { return 200; } #"),
		nn("default", "utf8"):     configMap("default", "utf8", "1", "X-Name", "é"),
		nn("other", "headers"):    configMap("other", "headers", "1", "X-Tenant", "other"),
	}
	tests := map[string]struct {
		value   string
		want    string
		wantErr string
		noURL   bool
	}{
		"headers sorted by name, values trimmed, quotes and backslashes kept": {value: "headers",
			want: "X-Empty:\nX-Tenant:acme\nx_team:blue \"team\" \\ 1"},
		"namespace/name":               {value: "default/headers", want: "X-Empty:\nX-Tenant:acme\nx_team:blue \"team\" \\ 1"},
		"another namespace":            {value: "other/headers", wantErr: ann + `"other/headers" is in namespace other; only ConfigMaps of the Ingress's own namespace (default) may be used`},
		"missing":                      {value: "gone", wantErr: ann + "configmap default/gone does not exist; the Ingress is not served until it does"},
		"too many entries":             {value: "many", wantErr: ann + "configmap default/many: 65 entries, more than the 64 accepted"},
		"data dropped by the cache":    {value: "dropped", wantErr: ann + `configmap default/dropped: its data ("20000" bytes) is larger than the 16384 bytes accepted`},
		"a name ingress-nginx refuses": {value: "token", wantErr: ann + `configmap default/token: key "X.Dot" is not a header name`},
		"Host is the controller's":     {value: "host", wantErr: ann + "configmap default/host: header host is set by the controller or frames the request"},
		"X-Forwarded-For too":          {value: "xff", wantErr: ann + "configmap default/xff: header X-Forwarded-For is set by the controller"},
		"framing":                      {value: "framing", wantErr: ann + "configmap default/framing: header Content-Length is set by the controller or frames the request"},
		"a variable is refused":        {value: "variable", wantErr: ann + "configmap default/variable: the value of X-Auth has a '$'"},
		"CRLF":                         {value: "crlf", wantErr: ann + "configmap default/crlf: the value of X-Evil is not a header value"},
		"non-ASCII":                    {value: "utf8", wantErr: ann + "configmap default/utf8: the value of X-Name is not a header value"},
		"an injection is quoted":       {value: "inject", want: "X-Evil:a\"; } location / { return 200; } #"},
		"without auth-url: ignored":    {value: "headers", noURL: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kv := []string{AnnotationAuthURL, authURL, AnnotationAuthProxySetHeaders, tc.value}
			if tc.noURL {
				kv = kv[2:]
			}
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(kv...))
			got, err := TranslateIngressWith(ing, Lookups{Services: servicesOf(service("default", "web", port(80, "http"))), ConfigMaps: cms}, DefaultTranslateOptions())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if valueOf(got.Profile).AuthProxySetHeaders != tc.want {
				t.Fatalf("headers %q, want %q", valueOf(got.Profile).AuthProxySetHeaders, tc.want)
			}
			if tc.noURL {
				if !slices.Contains(got.Warnings, "metadata.annotations["+AnnotationAuthProxySetHeaders+"]: applies only with "+AnnotationAuthURL+"; ignored") {
					t.Fatalf("warnings %q", got.Warnings)
				}
				return
			}
			// The ConfigMap is a dependency: a change of it translates the Ingress again.
			if !slices.ContainsFunc(got.Objects(), func(o ObjectVersion) bool {
				return o.Kind == KindConfigMap && o.Key == nn("default", "headers") || o.Key == nn("default", "inject")
			}) {
				t.Fatalf("objects %+v lack the ConfigMap", got.Objects())
			}
			conf, _, err := Render(Model{Servers: []Server{{Host: ""}}, Profiles: []ProfileSettings{valueOf(got.Profile)}}, baseRenderConfig())
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(tc.want, "\n") {
				name, value, _ := strings.Cut(line, ":")
				want := "proxy_set_header " + quoteValidated(name) + " " + quoteValidated(value) + ";"
				if !strings.Contains(string(conf), want) {
					t.Errorf("nginx.conf lacks %q", want)
				}
			}
		})
	}
}
