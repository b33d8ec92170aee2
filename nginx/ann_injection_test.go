package nginx

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// injectionValues are hostile annotation values: NGINX syntax, quotes, newlines, variables, NUL, and
// very long values. The corpus is applied to every supported annotation.
func injectionValues() []string {
	return []string{
		`true; } server { listen 81; return 200; } #`, "false\n}\nhttp {", `"true"`, `'false'`, `true"`, `\`, `$host`,
		"${uri}", "true\x00", "\x00", ";", "{", "}", "#", "true\r\n", "10.0.0.0/8;allow all",
		"10.0.0.0/8 } location / { return 200; }", "10.0.0.1\r\n", `10.0.0.0/8\`, `::/0"`, "0.0.0.0/0 ;",
		"10.0.0.0/8,$remote_addr", "10.0.0.0/8\n,192.0.2.1", "1.2.3.4/32\x00", "\xff\xfe", "é",
		strings.Repeat("1", 1<<20), strings.Repeat("10.0.0.0/8,", 20000) + "x", strings.Repeat("{", 4096),
		// URL-shaped: redirect targets and app roots.
		"https://a.example/\r\nSet-Cookie: x=1", "https://a.example/x\"}", "https://a.example/;}location/{return 200;}#",
		"https://a.example/$request_uri", "http://a.example/\x00", "/app;}", "/app\r\n", "/$uri\"", "https://" + strings.Repeat("a", 3000),
		// CORS origins, header lists and limits.
		"https://app.example\r\nAccess-Control-Allow-Credentials: true", "https://*.*.example.com", "https://a.example.com/path",
		"https://a.example.com:99999", "*\r\n", "https://*", "null\n", "GET\r\nX: 1", "X-Total\nSet-Cookie: a=1", "X-A:1",
		"99999999999999999999", "-1", "1e3", "0x10", "1.5", " 5 ", "1000000001",
		// Object names (proxy-ssl-secret) and TLS settings: a path out of the files' directory, directives.
		"default/../../etc/passwd", "../x", "default/a\nproxy_ssl_verify off", "TLSv1.2;proxy_ssl_verify off", "HIGH:!aNULL;}", "on;",
		// Sizes, times and directive arguments (the proxy groups).
		"8m; }", "8m\n}", "1m 1m", "60s;", "1h 30m; return 200", "${request_time}", "error timeout; }", "error\ntimeout",
		"on;", "off }", "1.0;", "/app/ /$uri", "a.example b.example;", "http://a/ http://b/;} #", "~^/(.*) /$1",
		"keep-alive\r\nX-Evil: 1", "keep-alive;", "99999999999999999999", "1e9", "0x10", "-5",
		// External auth URLs: ingress-nginx's auth-url injection CVEs (CVE-2025-24514 and kin) closed the
		// location with '}' or ';' and a newline, hid the rest with '#', or read files through variables.
		"http://auth.example.com/#;\n}}\nserver { listen 80; location / { return 200 pwned; } }\n#",
		"http://auth.example.com/auth;\nload_module /tmp/evil.so;#", "https://auth.example.com/\"; } ssl_engine /tmp/x.so; #",
		"http://auth.example.com/auth?a=$http_authorization", "http://$host/oauth2/auth", "http://auth.example.com/auth}\n",
		"http://a.example.com/ x", "X-Auth-Request-User;\nproxy_pass http://evil", "X-User, $http_cookie", "GET;", "rd\nx",
		// Basic authentication: realms that break out of the quoted string or the header, types that
		// turn it off, Secret names out of the namespace, user names with colons.
		`Staff" , Basic realm="x`, "Staff\r\nWWW-Authenticate: None", `realm\"`, "basic; auth_basic off", "digest", "none", "basic\n",
		"auth-map\n", "../auth", "kube-system/admin-users", "alice:bob", "user:{PLAIN}x",
		// Client certificates: ingress-nginx's auth-tls-match-cn CVE (CVE-2025-1097) closed the quoted
		// regex of an "if" and the server block; modes and depths with directives after them.
		"CN=abc$\" ) { return 200; } } load_module /tmp/evil.so; server { #", "CN=(a|b)\ninclude /etc/passwd;",
		"on; ssl_verify_client off", "optional_no_ca;", "off\n", "1; ssl_verify_depth 100", "kube-system/root-ca", "/cert-error;}",
		// satisfy: the directive's own syntax after a valid value, case and white space.
		"any; allow all", "any;\n}\nlocation / { satisfy any; allow all; }", "ANY", "any\n", "all\r\n", "all any",
		// auth-cache-key and auth-cache-duration: variables that read more than the request, directive syntax.
		"$remote_user$http_authorization;}", "${request_body}", "$http_authorization\nproxy_cache off", "200 202 5m; proxy_cache off", "200 5m\n}",
		// Canary rules: header and cookie names that would read another variable or break the push, header
		// values and patterns that close the JSON string or the header, weights out of range.
		"X-Canary\r\nX-Evil: 1", "host:x", "a\",\"upstream\":\"evil\"}", "cookie_session", "always\n", "^(a|b)$\"}", "(?m)^a$", "\\1",
		"(a", ".*\x00", "101", "100\n", "50%",
		// Affinity cookies and hash keys: attributes that add attributes or headers to Set-Cookie, and
		// variables outside upstream-hash-by's allow-list (secrets of the configuration, the body).
		"SESSION; Domain=evil.example", "name=value", "/app; HttpOnly=false", "/app\r\nSet-Cookie: admin=1", ".example.com;Secure",
		"a.example,b.example", "None; Domain=x", "$ingress_reactor_token", "$request_body", "$ssl_client_cert", "$arg_x;$host",
		"${arg_x\"}", "$arg_x'", "cookie\n", "persistent;",
		// affinity-canary-behavior: its two words with syntax after them.
		"legacy;", "sticky\n}", "legacy\"}", "LEGACY\r\n",
	}
}

// readingAnnotations returns the supported annotations that translation reads (the registry path that
// the corpus and the fuzz target exercise).
func readingAnnotations() []AnnotationSpec {
	reg := annotationRegistry()
	var out []AnnotationSpec
	for _, s := range reg.specs {
		if s.Status == AnnotationSupported && s.group >= 0 && reg.groups[s.group].apply != nil {
			out = append(out, s)
		}
	}
	return out
}

var wirePrefix = regexp.MustCompile(`^([0-9a-f]{8}|[0-9a-f]{32})/[0-9]{1,3}$`)

// moreErrors is the last line of a rejection with more errors than it reports.
var moreErrors = regexp.MustCompile(`^and [0-9]+ more errors$`)

// checkAnnotationValue translates the one-path Ingress of translateAnnotated with annotation spec set to
// value. A rejection must name the annotation on every line, in a bounded, single-line message. An
// accepted value must leave nginx.conf byte for byte as without the annotation (route data never reaches
// it) and give route pushes that are valid JSON with the Ingress's one route unchanged.
func checkAnnotationValue(t *testing.T, spec AnnotationSpec, value string) {
	t.Helper()
	key := spec.Key()
	kv := []string{key, value}
	if strings.HasPrefix(spec.Name, "canary-") || spec.Name == "affinity-canary-behavior" {
		kv = append(kv, AnnotationCanary, "true") // the rules apply to canaries only
	}
	got, errs := translateAnnotated(t, DefaultTranslateOptions(), kv...)
	if got == nil {
		for i, e := range errs {
			if i == len(errs)-1 && moreErrors.MatchString(e) {
				continue // the count of the errors left out after the first ones
			}
			if e == ErrWithdrawn.Error() {
				continue // the controller's own line: the last good version is not served either
			}
			if !strings.HasPrefix(e, "metadata.annotations["+key+"]: ") {
				t.Fatalf("%s=%.40q: rejection line %.200q does not name the annotation", key, value, e)
			}
			if len(e) > 400 || strings.ContainsAny(e, "\x00\r") {
				t.Fatalf("%s=%.40q: rejection line is %d bytes or has control bytes: %.200q", key, value, len(e), e)
			}
		}
		return
	}
	base, _ := translateAnnotated(t, DefaultTranslateOptions())
	baseModel, _ := Merge([]*IngressTranslation{base}, nil)
	model, _ := Merge([]*IngressTranslation{got}, nil)
	if got.Canary != nil {
		// A canary serves nothing alone: merged with a main Ingress of the same path, it adds its
		// rule to the main's route, and nothing else.
		main := *base
		main.Ingress = nn("default", "main")
		model, _ = Merge([]*IngressTranslation{&main, got}, nil)
		if l := model.Servers[1].Locations[0]; l.Canary == nil || l.Canary.Rule != got.Canary {
			t.Fatalf("%s=%.40q: the canary is not the main route's: %+v", key, value, l)
		}
	}
	if spec.Kind == KindProfile {
		conf, _, err := Render(model, baseRenderConfig())
		if err != nil {
			t.Fatalf("%s=%.40q: accepted, but the model does not render: %v", key, value, err)
		}
		if bytes.Contains(conf, []byte(`"" invalid`)) {
			t.Fatalf("%s=%.40q: accepted, but a value could not be quoted", key, value)
		}
	}
	if spec.Kind == KindRouteData {
		want, _, err := Render(baseModel, baseRenderConfig())
		if err != nil {
			t.Fatal(err)
		}
		conf, _, err := Render(model, baseRenderConfig())
		if err != nil {
			t.Fatalf("%s=%.40q: accepted, but the model does not render: %v", key, value, err)
		}
		if !bytes.Equal(conf, want) {
			t.Fatalf("%s=%.40q: route data changed nginx.conf", key, value)
		}
	}
	// Alias annotations add servers (validated host names); every other server is the same as without
	// the annotation.
	addsHosts := spec.Name == "server-alias" || spec.Name == "from-to-www-redirect"
	if len(model.Servers) != len(baseModel.Servers) && !addsHosts {
		t.Fatalf("%s=%.40q: %d servers, want %d", key, value, len(model.Servers), len(baseModel.Servers))
	}
	for i := range model.Servers {
		wire := AppendRouteHostJSON(nil, &model.Servers[i])
		var host RouteHost
		if err := json.Unmarshal(wire, &host); err != nil {
			t.Fatalf("%s=%.40q: route push is not JSON: %v", key, value, err)
		}
		baseServer := baseModel.Server(model.Servers[i].Host)
		if baseServer == nil {
			if err := ValidateHost(string(model.Servers[i].Host)); err != nil {
				t.Fatalf("%s=%.40q: added server %.80q: %v", key, value, model.Servers[i].Host, err)
			}
			continue
		}
		var want RouteHost
		if err := json.Unmarshal(AppendRouteHostJSON(nil, baseServer), &want); err != nil {
			t.Fatal(err)
		}
		if len(host.Routes) != len(want.Routes) {
			t.Fatalf("%s=%.40q: %d routes, want %d", key, value, len(host.Routes), len(want.Routes))
		}
		for j, r := range host.Routes {
			wantUpstream := want.Routes[j].Upstream
			if b, err := strconv.ParseBool(strings.TrimSpace(value)); spec.Name == "service-upstream" && err == nil && b {
				// The one annotation that picks another upstream: the Service's cluster IP.
				wantUpstream = NewServiceIPUpstream(nn("default", "web"), intstr.FromInt32(80)).Name
			}
			if r.Path != want.Routes[j].Path || r.Exact != want.Routes[j].Exact || r.Upstream != wantUpstream {
				t.Fatalf("%s=%.40q: route %+v, want %+v", key, value, r, want.Routes[j])
			}
			var limitRanges []string
			if r.Limit != nil {
				limitRanges = r.Limit.Allow
			}
			for _, p := range slices.Concat(r.Deny, r.Allow, limitRanges) {
				if !wirePrefix.MatchString(p) {
					t.Fatalf("%s=%.40q: source range %q on the wire", key, value, p)
				}
			}
		}
	}
}

// TestAnnotationInjection runs the injection corpus through every supported annotation that translation
// reads: each value is rejected with a message naming the annotation, or accepted without reaching
// nginx.conf or the route push's structure.
func TestAnnotationInjection(t *testing.T) {
	specs := readingAnnotations()
	if len(specs) == 0 {
		t.Fatal("no supported annotation is read by translation")
	}
	for _, s := range specs {
		for _, v := range injectionValues() {
			checkAnnotationValue(t, s, v)
		}
		// Values that are accepted: the check above covers their output too.
		for _, v := range []string{"true", "false", "10.0.0.0/8", " 192.0.2.7 , ::/0 ", manyRanges(5000),
			"8m", "16k", "0", "60", "500ms", "on", "off", "1.0", "error http_503", "a.example b.example", "/app/ /", "keep-alive",
			"cookie", "persistent", "ewma", "$arg_x", "${request_uri}-v1", "$remote_addr$http_x_user", "Lax", ".example.com", "/app"} {
			checkAnnotationValue(t, s, v)
		}
	}
	// Apart from URLs and paths (in which ';', '{', '}', '$' and '#' are legal, and which are route data
	// that checkAnnotationValue keeps out of nginx.conf) and upstream-hash-by (allow-listed variables as
	// "$name" or "${name}", route data too), no annotation read today takes free text, so a value with
	// NGINX syntax in it is refused outright. (Whitespace around a value is trimmed: YAML block scalars
	// end in a newline.)
	takesURL := map[string]bool{"permanent-redirect": true, "temporal-redirect": true, "app-root": true, "upstream-hash-by": true}
	for _, s := range specs {
		if takesURL[s.Name] {
			continue
		}
		for _, v := range injectionValues() {
			if !strings.ContainsAny(v, ";{}\"'$\\#\x00") {
				continue
			}
			got, _ := translateAnnotated(t, DefaultTranslateOptions(), s.Key(), v)
			switch {
			case got == nil:
			case s.Name == "auth-url" && selfAuthURL.MatchString(valueOf(got.Profile).AuthURL):
				// The request's own host ($host), the one variable auth-url takes: only its validated
				// path reaches nginx.conf, quoted.
			case slices.ContainsFunc(got.Warnings, func(w string) bool { return strings.Contains(w, s.Key()) }):
				// An annotation whose loss is cosmetic (custom-http-errors, cors-expose-headers, the logging
				// group), or that has no effect without another annotation, is ignored with a Warning: nothing
				// of it may reach the profile (and so nginx.conf) or the route data.
				if got.Profile != nil || setsOptions(got) {
					t.Errorf("%s=%.40q was taken (profile %+v, options %+v)", s.Name, v, got.Profile, got.Options)
				}
			default:
				t.Errorf("%s=%.40q was accepted", s.Name, v)
			}
		}
	}
}

// setsOptions reports whether a translation took route options beyond the defaults.
func setsOptions(got *IngressTranslation) bool {
	return got.Options != nil && *got.Options != RouteOptions{}
}

// manyRanges lists n distinct /32 addresses.
func manyRanges(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
	}
	return strings.Join(entries, ",")
}

// FuzzAnnotationValue feeds arbitrary values to every supported annotation that translation reads, with
// the same checks as TestAnnotationInjection.
func FuzzAnnotationValue(f *testing.F) {
	for _, v := range injectionValues() {
		if len(v) <= 4096 {
			f.Add(uint8(0), v)
		}
	}
	for i := range readingAnnotations() {
		for _, v := range []string{"true", "False", "10.0.0.0/8", "2001:db8::1, 192.0.2.0/24", " , ", "::ffff:10.0.0.0/104",
			"8m", "0", "60", "1h 30m", "1500ms", "on", "off", "1.0", "error timeout http_503", "/app/ /", "keep-alive",
			"cookie", "persistent", "$arg_x", "${request_uri}-v1", "Lax", ".example.com"} {
			f.Add(uint8(i), v)
		}
	}
	specs := readingAnnotations()
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		checkAnnotationValue(t, specs[int(which)%len(specs)], value)
	})
}

// TestAnnotationInjectionNginx runs Ingresses with hostile and with oddly written annotation values
// through real NGINX and the Lua router: hostile ones are rejected alone (their host is not served, the
// neighbour is), and a value written as a YAML block scalar (a trailing newline) is applied.
func TestAnnotationInjectionNginx(t *testing.T) {
	web := service("default", "web", port(80, ""))
	hostile := func(name, key, value string) any {
		return ingress("default", name, rule(name+".example.com", prefix("/", "web", 80)), withTLS("cert", name+".example.com"), annotate(key, value))
	}
	runCorpus(t, map[string]routeCase{"hostile annotation values": {
		objs: []any{web,
			hostile("redirect", AnnotationSSLRedirect, "false; } server { listen 81; return 200; } #"),
			hostile("allow", AnnotationAllowlistSourceRange, "127.0.0.1;allow all"),
			hostile("deny", AnnotationDenylistSourceRange, "10.0.0.0/8\n}\n"+strings.Repeat("{", 1000)),
			hostile("nul", AnnotationWhitelistSourceRange, "127.0.0.1\x00"),
			hostile("authurl", AnnotationAuthURL, "http://127.0.0.1/#;\n}}\nserver { listen 80; location / { return 200 pwned; } }\n#"),
			ingress("default", "block", rule("block.example.com", prefix("/", "web", 80)), annotate(AnnotationDenylistSourceRange, "127.0.0.0/8\n")),
			ingress("default", "neighbour", rule("neighbour.example.com", prefix("/", "web", 80)), annotate(AnnotationSSLRedirect, "false\n")),
		},
		requests: map[string]string{
			"http://redirect.example.com/": "404", "http://allow.example.com/": "404", "http://deny.example.com/": "404",
			"http://nul.example.com/": "404", "http://authurl.example.com/": "404", "http://block.example.com/": "403",
			"http://neighbour.example.com/": "web",
		},
	}}, "127.0.0.1")
}
