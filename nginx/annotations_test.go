package nginx

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// translateAnnotated translates a one-path Ingress with TLS for its host and the given annotations
// (key, value pairs). It returns the translation, or the rejection's messages one per line.
func translateAnnotated(t *testing.T, opts TranslateOptions, kv ...string) (*IngressTranslation, []string) {
	t.Helper()
	svcs := servicesOf(service("default", "web", port(80, "http")))
	ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), withTLS("cert", "a.example.com"), annotate(kv...))
	got, err := TranslateIngress(ing, svcs, opts)
	if err == nil {
		return got, nil
	}
	msg, ok := strings.CutPrefix(err.Error(), "ingress default/a rejected: ")
	if !ok {
		t.Fatalf("rejection %q does not name the Ingress", err)
	}
	return nil, strings.Split(msg, "\n")
}

// TestAnnotationRegistry checks the registry's own rules: every name once, statuses complete, and the
// names ingress-nginx defines all present.
func TestAnnotationRegistry(t *testing.T) {
	specs := AnnotationRegistry()
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Name] {
			t.Errorf("%s is listed twice (a supported group's annotation must leave unsupportedAnnotations)", s.Name)
		}
		seen[s.Name] = true
		if s.Name == "" || strings.HasPrefix(s.Name, IngressNginxPrefix) || s.Name != strings.ToLower(s.Name) {
			t.Errorf("%q: want the name without the prefix, in lower case", s.Name)
		}
		switch s.Status {
		case AnnotationSupported:
			if s.Kind == "" || s.Values == "" || s.Default == "" {
				t.Errorf("%s: supported without kind, values or default", s.Name)
			}
			if s.group < 0 {
				t.Errorf("%s: supported but declared in no group file", s.Name)
			}
		case AnnotationRefused, AnnotationIgnored:
			if s.Reason == "" || s.Kind != "" || s.group >= 0 {
				t.Errorf("%s: %s needs a reason, and no kind or group", s.Name, s.Status)
			}
		default:
			t.Errorf("%s: unknown status %q", s.Name, s.Status)
		}
		if s.RestrictsAccess && s.Status == AnnotationIgnored {
			t.Errorf("%s restricts access: ignoring it would open the Ingress", s.Name)
		}
	}
	// ingress-nginx's annotations documentation (main, 2026-03) lists 130 names; its parsers read 8 more.
	count := map[AnnotationOrigin]int{}
	for _, s := range specs {
		count[s.Origin]++
	}
	if count[OriginDocumented] != 130 || count[OriginUndocumented] != 8 {
		t.Errorf("documented %d, undocumented %d; want 130 and 8", count[OriginDocumented], count[OriginUndocumented])
	}
	for _, name := range []string{
		"ssl-redirect", "ssl-passthrough", "whitelist-source-range", "allowlist-source-range", "denylist-source-range",
		"rewrite-target", "backend-protocol", "proxy-body-size", "auth-url", "canary", "configuration-snippet",
		"use-port-in-redirects", "limit-allowlist", "relative-redirects",
	} {
		if !seen[name] {
			t.Errorf("%s is missing", name)
		}
	}
	if !slices.IsSortedFunc(specs, func(a, b AnnotationSpec) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("AnnotationRegistry is not sorted by name")
	}
}

// TestAnnotationDispatch: refused annotations reject with their reason, ignored ones share one Warning,
// unknown names get their own Warning with the nearest known name, and names that may hide an access
// restriction are refused.
func TestAnnotationDispatch(t *testing.T) {
	const p = IngressNginxPrefix
	const ignoredTail = ": not supported yet and ignored; the Ingress is served with the defaults (docs/annotations.md says why for each)"
	tests := map[string]struct {
		annotations  []string
		wantErrs     []string
		wantWarnings []string
	}{
		"foreign annotations and ssl-passthrough are not reported": {
			annotations: []string{AnnotationSSLPassthrough, "true", "kubernetes.io/ingress.class", "nginx", "example.com/team", "a"},
		},
		"ignored ones in one sorted warning": {
			annotations:  []string{p + "opentelemetry-trust-incoming-span", "true", p + "enable-opentelemetry", "true", p + "enable-opentracing", "true"},
			wantWarnings: []string{"metadata.annotations: " + p + "enable-opentelemetry, " + p + "enable-opentracing, " + p + "opentelemetry-trust-incoming-span" + ignoredTail},
		},
		"canary false is a plain Ingress; its rules are ignored": {
			annotations: []string{AnnotationCanary, " False ", p + "canary-weight", "10"},
			wantWarnings: []string{"metadata.annotations: " + p + "canary-weight: ignored, because the Ingress is no canary (" +
				p + "canary is not \"true\")"},
		},
		"canary with a value that is not a boolean is refused": {
			annotations: []string{AnnotationCanary, "yes"},
			wantErrs:    []string{"metadata.annotations[" + p + "canary]: \"yes\" is not a boolean (want \"true\" or \"false\")"},
		},
		"access restrictions are refused, each named": {
			annotations: []string{p + "modsecurity-transaction-id", "x", p + "enable-modsecurity", "true"},
			wantErrs: []string{
				"metadata.annotations[" + p + "enable-modsecurity]: " + refusedAccess,
				"metadata.annotations[" + p + "modsecurity-transaction-id]: " + refusedAccess,
			},
		},
		"a firewall switched off asks for nothing": {
			annotations: []string{p + "enable-modsecurity", "false", p + "enable-owasp-core-rules", "0"},
		},
		"snippets are refused; auth-snippet as an access restriction": {
			annotations: []string{p + "configuration-snippet", "deny all;", p + "server-snippet", "return 200;", p + "auth-snippet", "x"},
			wantErrs: []string{
				"metadata.annotations[" + p + "auth-snippet]: " + refusedAccess,
				"metadata.annotations[" + p + "configuration-snippet]: " + refusedSnippet,
				"metadata.annotations[" + p + "server-snippet]: " + refusedSnippet,
			},
		},
		"an unknown name close to a known one: warning with the nearest name": {
			annotations: []string{p + "ssl-redirct", "false", p + "proxy_body_size", "8m", p + "Rewrite-Target", "/"},
			wantWarnings: []string{
				"metadata.annotations[" + p + "Rewrite-Target]: not an ingress-nginx annotation; ignored (did you mean " + p + "rewrite-target?)",
				"metadata.annotations[" + p + "proxy_body_size]: not an ingress-nginx annotation; ignored (did you mean " + p + "proxy-body-size?)",
				"metadata.annotations[" + p + "ssl-redirct]: not an ingress-nginx annotation; ignored (did you mean " + p + "ssl-redirect?)",
			},
		},
		"an unknown name far from every known one: warning without a guess": {
			annotations:  []string{p + "make-it-fast", "true"},
			wantWarnings: []string{"metadata.annotations[" + p + "make-it-fast]: not an ingress-nginx annotation; ignored"},
		},
		"a misspelt source range is refused, not ignored": {
			annotations: []string{p + "whitelist-source-ranges", "10.0.0.0/8", p + "allowlist-sourcerange", "10.0.0.0/8"},
			wantErrs: []string{
				"metadata.annotations[" + p + "allowlist-sourcerange]: not an ingress-nginx annotation, but close to " + p +
					"allowlist-source-range, which restricts access; the Ingress is not served rather than served without a restriction its owner may have meant",
				"metadata.annotations[" + p + "whitelist-source-ranges]: not an ingress-nginx annotation, but close to " + p +
					"whitelist-source-range, which restricts access; the Ingress is not served rather than served without a restriction its owner may have meant",
			},
		},
		"unknown names shaped like access restrictions or snippets are refused": {
			annotations: []string{p + "blacklist-source-range", "1.2.3.4", p + "auth-urll", "http://a", p + "location-snippet", "x"},
			wantErrs: []string{
				"metadata.annotations[" + p + "auth-urll]: " + refusedAccess + " (did you mean " + p + "auth-url?)",
				"metadata.annotations[" + p + "blacklist-source-range]: " + refusedAccess,
				"metadata.annotations[" + p + "location-snippet]: " + refusedSnippet,
			},
		},
		"a satisfy typo is refused": {
			annotations: []string{p + "satisify", "any"},
			wantErrs: []string{"metadata.annotations[" + p + "satisify]: not an ingress-nginx annotation, but close to " + p +
				"satisfy, which restricts access; the Ingress is not served rather than served without a restriction its owner may have meant"},
		},
		"a key that did not pass the API server's validation is quoted": {
			annotations:  []string{p + "x\ny", "1"},
			wantWarnings: []string{`metadata.annotations["nginx.ingress.kubernetes.io/x\ny"]: not an ingress-nginx annotation; ignored`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.annotations...)
			same(t, "rejection", errs, tc.wantErrs)
			if got != nil {
				same(t, "warnings", got.Warnings, tc.wantWarnings)
			} else if tc.wantWarnings != nil {
				t.Errorf("rejected, want warnings %q", tc.wantWarnings)
			}
		})
	}
}

func TestNearestAnnotation(t *testing.T) {
	tests := map[string]string{
		"ssl-redirect":            "ssl-redirect",
		"ssl-redriect":            "ssl-redirect", // neighbours swapped
		"SSL-REDIRECT":            "ssl-redirect",
		"rewrite_target":          "rewrite-target",
		"proxy-body-sizee":        "proxy-body-size",
		"whitelist-source-rnages": "whitelist-source-range",
		"cors-allow-orign":        "cors-allow-origin",
		"x":                       "",
		"completely-unrelated":    "",
		strings.Repeat("a", 1000): "",
	}
	for in, want := range tests {
		name := ""
		if got, ok := nearestAnnotation(in); ok {
			name = got.Name
		}
		if name != want {
			t.Errorf("nearestAnnotation(%.20q) = %q, want %q", in, name, want)
		}
	}
}

func TestQuoteValue(t *testing.T) {
	if got := quoteValue("a\x00b\n"); got != `"a\x00b\n"` {
		t.Errorf("control bytes: %s", got)
	}
	long := strings.Repeat("x", 1<<20)
	if got := quoteValue(long); len(got) > 100 || !strings.HasSuffix(got, "... (1048576 bytes)") {
		t.Errorf("a megabyte is shown as %d bytes: %.80s", len(got), got)
	}
}

// fmtErr formats an expected message.
func fmtErr(format string, args ...any) string { return fmt.Sprintf(format, args...) }
