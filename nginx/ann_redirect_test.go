package nginx

import "testing"

// TestAnnotationRedirects: redirect annotations -> the translation's route options, its warnings, or
// the exact rejection.
func TestAnnotationRedirects(t *testing.T) {
	const (
		badURL = `metadata.annotations[nginx.ingress.kubernetes.io/%s]: %s: want an absolute http:// or https:// URL with a host, at most 2048 bytes of printable ASCII`
		badApp = `metadata.annotations[nginx.ingress.kubernetes.io/app-root]: %s: want a path starting with a single /, at most 2048 bytes of printable ASCII`
	)
	tests := map[string]struct {
		kv       []string
		want     *RouteOptions
		warnings []string
		errs     []string
	}{
		"no redirect annotation: no options": {kv: []string{AnnotationSSLRedirect, "true"}},
		"permanent-redirect: 301": {
			kv:   []string{AnnotationPermanentRedirect, "https://new.example.org/x?y=1"},
			want: &RouteOptions{RedirectURL: "https://new.example.org/x?y=1", RedirectCode: 301},
		},
		"permanent-redirect with a code, spaces trimmed": {
			kv:   []string{AnnotationPermanentRedirect, " http://new.example.org ", AnnotationPermanentRedirectCode, " 308"},
			want: &RouteOptions{RedirectURL: "http://new.example.org", RedirectCode: 308},
		},
		"temporal-redirect: 302, and it wins over permanent-redirect": {
			kv:       []string{AnnotationTemporalRedirect, "https://maint.example.org/", AnnotationPermanentRedirect, "https://other.example.org/"},
			want:     &RouteOptions{RedirectURL: "https://maint.example.org/", RedirectCode: 302},
			warnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/permanent-redirect]: ignored, because nginx.ingress.kubernetes.io/temporal-redirect is set too and wins, as in ingress-nginx"},
		},
		"temporal-redirect-code 307": {
			kv:   []string{AnnotationTemporalRedirect, "https://maint.example.org/", AnnotationTemporalRedirectCode, "307"},
			want: &RouteOptions{RedirectURL: "https://maint.example.org/", RedirectCode: 307},
		},
		"temporal-redirect-code 308 is out of ingress-nginx's range": {
			kv:   []string{AnnotationTemporalRedirect, "https://maint.example.org/", AnnotationTemporalRedirectCode, "308"},
			errs: []string{`metadata.annotations[nginx.ingress.kubernetes.io/temporal-redirect-code]: "308" is not a redirect status code (want one of 301, 302, 303, 307)`},
		},
		"300 and 304 are no redirects a client follows": {
			kv:   []string{AnnotationPermanentRedirect, "https://a.example.org/", AnnotationPermanentRedirectCode, "304"},
			errs: []string{`metadata.annotations[nginx.ingress.kubernetes.io/permanent-redirect-code]: "304" is not a redirect status code (want one of 301, 302, 303, 307, 308)`},
		},
		"a code without its URL has no effect": {
			kv:       []string{AnnotationPermanentRedirectCode, "308"},
			warnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/permanent-redirect-code]: has no effect without nginx.ingress.kubernetes.io/permanent-redirect"},
		},
		"NGINX variables are sent as written, with a warning": {
			kv:       []string{AnnotationPermanentRedirect, "https://a.example.org$request_uri"},
			want:     &RouteOptions{RedirectURL: "https://a.example.org$request_uri", RedirectCode: 301},
			warnings: []string{`metadata.annotations[nginx.ingress.kubernetes.io/permanent-redirect]: "https://a.example.org$request_uri" is sent as written: NGINX variables are not expanded in redirect URLs`},
		},
		"a dollar that is no variable: no warning": {
			kv:   []string{AnnotationTemporalRedirect, "https://a.example.org/price/5$"},
			want: &RouteOptions{RedirectURL: "https://a.example.org/price/5$", RedirectCode: 302},
		},
		"not http or https":        {kv: []string{AnnotationPermanentRedirect, "ftp://a.example.org/"}, errs: []string{fmtErr(badURL, "permanent-redirect", `"ftp://a.example.org/"`)}},
		"javascript":               {kv: []string{AnnotationTemporalRedirect, "javascript:alert(1)"}, errs: []string{fmtErr(badURL, "temporal-redirect", `"javascript:alert(1)"`)}},
		"relative":                 {kv: []string{AnnotationPermanentRedirect, "/elsewhere"}, errs: []string{fmtErr(badURL, "permanent-redirect", `"/elsewhere"`)}},
		"no host":                  {kv: []string{AnnotationPermanentRedirect, "https:///x"}, errs: []string{fmtErr(badURL, "permanent-redirect", `"https:///x"`)}},
		"user info":                {kv: []string{AnnotationPermanentRedirect, "https://bank.example@evil.example/"}, errs: []string{fmtErr(badURL, "permanent-redirect", `"https://bank.example@evil.example/"`)}},
		"header injection":         {kv: []string{AnnotationPermanentRedirect, "https://a.example.org/\r\nSet-Cookie: x=1"}, errs: []string{fmtErr(badURL, "permanent-redirect", `"https://a.example.org/\r\nSet-Cookie: x=1"`)}},
		"a space":                  {kv: []string{AnnotationPermanentRedirect, "https://a.example.org/a b"}, errs: []string{fmtErr(badURL, "permanent-redirect", `"https://a.example.org/a b"`)}},
		"NUL":                      {kv: []string{AnnotationPermanentRedirect, "https://a.example.org/\x00"}, errs: []string{fmtErr(badURL, "permanent-redirect", `"https://a.example.org/\x00"`)}},
		"non-ASCII":                {kv: []string{AnnotationPermanentRedirect, "https://a.example.org/ü"}, errs: []string{fmtErr(badURL, "permanent-redirect", `"https://a.example.org/ü"`)}},
		"scheme without slash":     {kv: []string{AnnotationPermanentRedirect, "https:a.example.org"}, errs: []string{fmtErr(badURL, "permanent-redirect", `"https:a.example.org"`)}},
		"app-root":                 {kv: []string{AnnotationAppRoot, "/app1"}, want: &RouteOptions{AppRoot: "/app1"}},
		"app-root with a query":    {kv: []string{AnnotationAppRoot, "/app1?x=1"}, want: &RouteOptions{AppRoot: "/app1?x=1"}},
		"app-root not a path":      {kv: []string{AnnotationAppRoot, "app1"}, errs: []string{fmtErr(badApp, `"app1"`)}},
		"app-root to another host": {kv: []string{AnnotationAppRoot, "//evil.example/"}, errs: []string{fmtErr(badApp, `"//evil.example/"`)}},
		"app-root URL":             {kv: []string{AnnotationAppRoot, "https://a.example.org/"}, errs: []string{fmtErr(badApp, `"https://a.example.org/"`)}},
		"app-root injection":       {kv: []string{AnnotationAppRoot, "/a;\n}"}, errs: []string{fmtErr(badApp, `"/a;\n}"`)}},
		"force-ssl-redirect, preserve-trailing-slash, use-port-in-redirects": {
			kv:   []string{AnnotationForceSSLRedirect, "true", AnnotationPreserveTrailingSlash, "1", AnnotationUsePortInRedirects, "True"},
			want: &RouteOptions{ForceSSLRedirect: true, PreserveTrailingSlash: true, UsePortInRedirects: true},
		},
		"false sets nothing": {kv: []string{AnnotationForceSSLRedirect, "false", AnnotationPreserveTrailingSlash, "0"}},
		"not booleans, all reported": {
			kv: []string{AnnotationForceSSLRedirect, "yes", AnnotationUsePortInRedirects, "on"},
			errs: []string{
				`metadata.annotations[nginx.ingress.kubernetes.io/force-ssl-redirect]: "yes" is not a boolean (want "true" or "false")`,
				`metadata.annotations[nginx.ingress.kubernetes.io/use-port-in-redirects]: "on" is not a boolean (want "true" or "false")`,
			},
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
