package nginx

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAnnotationCORS: CORS annotations -> the translation's route options, its warnings, or the exact
// rejection.
func TestAnnotationCORS(t *testing.T) {
	const (
		badOrigin = `metadata.annotations[nginx.ingress.kubernetes.io/cors-allow-origin]: entry %s is not an origin (want *, null, or <scheme>://<host>[:<port>] without a path, where the host may start with *. for one label, as https://*.example.com)`
		noEffect  = `metadata.annotations: %s: no effect without nginx.ingress.kubernetes.io/enable-cors: "true"`
	)
	defaults := CORSOptions{AllowOrigin: "*", AllowMethods: DefaultCORSAllowMethods, AllowHeaders: DefaultCORSAllowHeaders, AllowCredentials: true, MaxAge: DefaultCORSMaxAge}
	with := func(f func(c *CORSOptions)) *RouteOptions {
		c := defaults
		f(&c)
		return &RouteOptions{EnableCORS: true, CORS: c}
	}
	tests := map[string]struct {
		kv       []string
		want     *RouteOptions
		warnings []string
		errs     []string
	}{
		"enable-cors: ingress-nginx's defaults": {kv: []string{AnnotationEnableCORS, "true"}, want: with(func(*CORSOptions) {})},
		"enable-cors false: nothing":            {kv: []string{AnnotationEnableCORS, "false"}},
		"every setting": {
			kv: []string{AnnotationEnableCORS, "true", AnnotationCORSAllowOrigin, " https://App.Example.com , http://localhost:8080,https://*.example.org:8443, null,",
				AnnotationCORSAllowMethods, "GET,post , PUT", AnnotationCORSAllowHeaders, "X-Requested-With, x_custom ,Authorization",
				AnnotationCORSExposeHeaders, "*, X-Total", AnnotationCORSAllowCredentials, "false", AnnotationCORSMaxAge, " 600 "},
			want: with(func(c *CORSOptions) {
				*c = CORSOptions{AllowOrigin: "https://app.example.com,http://localhost:8080,https://*.example.org:8443,null",
					AllowMethods: "GET, post, PUT", AllowHeaders: "X-Requested-With,x_custom,Authorization", ExposeHeaders: "*,X-Total", MaxAge: 600}
			}),
		},
		"* anywhere in the list allows every origin, as ingress-nginx": {
			kv:   []string{AnnotationEnableCORS, "true", AnnotationCORSAllowOrigin, "https://a.example.com, *"},
			want: with(func(*CORSOptions) {}),
		},
		"duplicates are dropped": {
			kv:   []string{AnnotationEnableCORS, "true", AnnotationCORSAllowOrigin, "https://a.example.com,HTTPS://A.EXAMPLE.COM"},
			want: with(func(c *CORSOptions) { c.AllowOrigin = "https://a.example.com" }),
		},
		"an empty origin list allows none, with a warning": {
			kv:       []string{AnnotationEnableCORS, "true", AnnotationCORSAllowOrigin, " , "},
			want:     with(func(c *CORSOptions) { c.AllowOrigin = "" }),
			warnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/cors-allow-origin]: lists no origin, so no request gets CORS headers"},
		},
		"cors-* without enable-cors: no effect": {
			kv:       []string{AnnotationCORSAllowOrigin, "https://a.example.com", AnnotationCORSMaxAge, "5"},
			warnings: []string{fmtErr(noEffect, "nginx.ingress.kubernetes.io/cors-allow-origin, nginx.ingress.kubernetes.io/cors-max-age")},
		},
		"an invalid origin is rejected even without enable-cors": {
			kv:   []string{AnnotationCORSAllowOrigin, "https://a.example.com/"},
			errs: []string{fmtErr(badOrigin, `"https://a.example.com/"`)},
		},
		"origins that are not origins, all reported": {
			kv: []string{AnnotationEnableCORS, "true", AnnotationCORSAllowOrigin,
				"app.example.com, https://*.*.example.com, https://a.*.example.com, https://*, https://a.example.com:0"},
			errs: []string{
				fmtErr(badOrigin, `"app.example.com"`), fmtErr(badOrigin, `"https://*.*.example.com"`), fmtErr(badOrigin, `"https://a.*.example.com"`),
				fmtErr(badOrigin, `"https://*"`), fmtErr(badOrigin, `"https://a.example.com:0"`),
			},
		},
		"more origins that are not origins": {
			kv: []string{AnnotationEnableCORS, "true", AnnotationCORSAllowOrigin,
				"https://a.example.com:65536, https://a_b.example.com, https://[::1], https://a.example.com\r\nX: 1, 1https://a.example.com"},
			errs: []string{
				fmtErr(badOrigin, `"https://a.example.com:65536"`), fmtErr(badOrigin, `"https://a_b.example.com"`), fmtErr(badOrigin, `"https://[::1]"`),
				fmtErr(badOrigin, `"https://a.example.com\r\nX: 1"`), fmtErr(badOrigin, `"1https://a.example.com"`),
			},
		},
		"methods that are not tokens": {
			kv:   []string{AnnotationEnableCORS, "true", AnnotationCORSAllowMethods, "GET; DELETE"},
			errs: []string{`metadata.annotations[nginx.ingress.kubernetes.io/cors-allow-methods]: "GET; DELETE": want comma-separated methods of letters only (GET, PUT, POST), or *`},
		},
		"no methods": {
			kv:   []string{AnnotationEnableCORS, "true", AnnotationCORSAllowMethods, " , "},
			errs: []string{`metadata.annotations[nginx.ingress.kubernetes.io/cors-allow-methods]: " , ": want comma-separated methods of letters only (GET, PUT, POST), or *`},
		},
		"headers with a colon": {
			kv:   []string{AnnotationEnableCORS, "true", AnnotationCORSAllowHeaders, "X-A: 1"},
			errs: []string{`metadata.annotations[nginx.ingress.kubernetes.io/cors-allow-headers]: "X-A: 1": want comma-separated header names of letters, digits, - and _, or *`},
		},
		"* for methods and headers (the Fetch standard's wildcard)": {
			kv:   []string{AnnotationEnableCORS, "true", AnnotationCORSAllowMethods, "*", AnnotationCORSAllowHeaders, " * "},
			want: with(func(c *CORSOptions) { c.AllowMethods, c.AllowHeaders = "*", "*" }),
		},
		"credentials not a boolean (ingress-nginx: true)": {
			kv:   []string{AnnotationEnableCORS, "true", AnnotationCORSAllowCredentials, "no"},
			errs: []string{`metadata.annotations[nginx.ingress.kubernetes.io/cors-allow-credentials]: "no" is not a boolean (want "true" or "false")`},
		},
		"enable-cors not a boolean": {
			kv:   []string{AnnotationEnableCORS, "yes"},
			errs: []string{`metadata.annotations[nginx.ingress.kubernetes.io/enable-cors]: "yes" is not a boolean (want "true" or "false")`},
		},
		"expose headers and max age: cosmetic, ignored with warnings": {
			kv:   []string{AnnotationEnableCORS, "true", AnnotationCORSExposeHeaders, "X-A\nSet-Cookie: a=1", AnnotationCORSMaxAge, "-1"},
			want: with(func(*CORSOptions) {}),
			warnings: []string{
				`metadata.annotations[nginx.ingress.kubernetes.io/cors-expose-headers]: "X-A\nSet-Cookie: a=1" is not a list of header names (letters, digits, - and _) or *; ignored, no header is exposed`,
				`metadata.annotations[nginx.ingress.kubernetes.io/cors-max-age]: "-1" is not a number of seconds from 0 to 2147483647; the default 1728000 applies`,
			},
		},
		"a value too long": {
			kv:   []string{AnnotationEnableCORS, "true", AnnotationCORSAllowHeaders, strings.Repeat("X-A,", 1100)},
			errs: []string{`metadata.annotations[nginx.ingress.kubernetes.io/cors-allow-headers]: "X-A,X-A,X-A,X-A,X-A,X-A,X-A,X-A,X-A,X-A,X-A,X-A,X-A,X-A,X-A,X-A,"... (4400 bytes): want comma-separated header names of letters, digits, - and _, or *`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.kv...)
			if tc.errs != nil {
				same(t, "rejection", errs, tc.errs)
				return
			}
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			same(t, "options", got.Options, tc.want)
			same(t, "warnings", got.Warnings, tc.warnings)
		})
	}
}

// TestCORSWire: the CORS options' form in the routes push.
func TestCORSWire(t *testing.T) {
	tests := map[string]struct {
		o    RouteOptions
		want string
	}{
		"off": {o: RouteOptions{CORS: CORSOptions{AllowOrigin: "*"}}, want: ``},
		"no origin allowed: nothing for the router to do": {o: RouteOptions{EnableCORS: true, CORS: CORSOptions{AllowMethods: "GET"}}, want: ``},
		"defaults": {
			o:    RouteOptions{EnableCORS: true, CORS: CORSOptions{AllowOrigin: "*", AllowMethods: DefaultCORSAllowMethods, AllowHeaders: "A", AllowCredentials: true, MaxAge: 5}},
			want: `,"cors":{"origins":["*"],"methods":"GET, PUT, POST, DELETE, PATCH, OPTIONS","headers":"A","credentials":true,"max_age":5}`,
		},
		"a list and exposed headers": {
			o: RouteOptions{EnableCORS: true, CORS: CORSOptions{AllowOrigin: "https://a.example.com,https://*.b.example.com:8443", AllowMethods: "GET",
				AllowHeaders: "A", ExposeHeaders: "*,X-Total"}},
			want: `,"cors":{"origins":["https://a.example.com","https://*.b.example.com:8443"],"methods":"GET","headers":"A","expose":"*,X-Total","credentials":false,"max_age":0}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := string(appendCORSOptions(nil, &tc.o))
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if got != "" && !json.Valid([]byte("{"+got[1:]+"}")) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}

// TestCORSInjectionWithEnableCORS runs the injection corpus through each CORS annotation with CORS on:
// each value is rejected, ignored with a Warning, or reaches the push only as tokens that cannot split
// or extend a response header.
func TestCORSInjectionWithEnableCORS(t *testing.T) {
	for _, key := range []string{AnnotationCORSAllowOrigin, AnnotationCORSAllowMethods, AnnotationCORSAllowHeaders, AnnotationCORSExposeHeaders,
		AnnotationCORSAllowCredentials, AnnotationCORSMaxAge} {
		for _, v := range injectionValues() {
			got, _ := translateAnnotated(t, DefaultTranslateOptions(), AnnotationEnableCORS, "true", key, v)
			if got == nil {
				continue
			}
			c := got.Options.CORS
			for _, s := range []string{c.AllowOrigin, c.AllowMethods, c.AllowHeaders, c.ExposeHeaders} {
				if strings.ContainsAny(s, "\x00\r\n\"';{}$\\ #") && s != DefaultCORSAllowMethods {
					t.Errorf("%s=%.40q: %q taken", key, v, s)
				}
			}
			var wire map[string]any
			if err := json.Unmarshal([]byte("{"+string(appendCORSOptions(nil, got.Options))[1:]+"}"), &wire); err != nil {
				t.Errorf("%s=%.40q: push not JSON: %v", key, v, err)
			}
		}
	}
}
