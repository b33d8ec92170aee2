package nginx

import (
	"fmt"
	"strconv"
	"testing"
)

// BenchmarkTranslateAnnotated translates 1,000 Ingresses, half of them with annotations a migrated
// Ingress typically carries: ssl-redirect, an allowlist, proxy-body-size (a profile), proxy-read-timeout
// (route data), rewrite-target, which makes the paths regexes, x-forwarded-prefix, upstream-vhost,
// redirects, aliases, a default backend, and a typo.
func BenchmarkTranslateAnnotated(b *testing.B) {
	const n = 1000
	ings, svcs := benchWorld(n)
	for i, ing := range ings {
		if i%2 == 0 {
			annotate(
				AnnotationSSLRedirect, "false",
				AnnotationWhitelistSourceRange, "10.0.0.0/8, 192.0.2.0/24, 2001:db8::/32",
				IngressNginxPrefix+"proxy-body-size", "8m",
				IngressNginxPrefix+"proxy-read-timeout", strconv.Itoa(60+i%5),
				AnnotationRewriteTarget, "/$2",
				AnnotationXForwardedPrefix, "/svc",
				AnnotationUpstreamVhost, "backend.internal",
				IngressNginxPrefix+"proxy-bodysize", "1m", // a typo: the nearest name is looked up
				"kubernetes.io/ingress.class", "nginx",
				// The routing group's redirects, aliases and default backend (ann_redirect.go, ann_hosts.go,
				// ann_defaultbackend.go).
				AnnotationPermanentRedirect, "https://new.example.org/landing?from="+strconv.Itoa(i),
				AnnotationPermanentRedirectCode, "308",
				AnnotationAppRoot, "/app",
				AnnotationForceSSLRedirect, "true",
				AnnotationPreserveTrailingSlash, "true",
				AnnotationUsePortInRedirects, "false",
				AnnotationServerAlias, fmt.Sprintf("alias-%d.bench.example.com, alias-%d.bench.example.org", i, i),
				AnnotationFromToWWWRedirect, "true",
				AnnotationDefaultBackend, ing.Name,
			)(ing)
		}
	}
	b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, ing := range ings {
				if _, err := TranslateIngress(ing, svcs, DefaultTranslateOptions()); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
