package nginx

import (
	"net/netip"
	"strings"
	"testing"
)

// TestAnnotationSourceRanges: the source address annotations become the translation's Access, parsed,
// canonical, sorted and without duplicates; an entry that is not an address rejects the Ingress with a
// message naming the annotation and the entry.
func TestAnnotationSourceRanges(t *testing.T) {
	const notRange = "is not an IP address or a CIDR range (for example 192.0.2.7, 10.0.0.0/8 or 2001:db8::/32)"
	p := netip.MustParsePrefix
	tests := map[string]struct {
		annotations  []string
		want         *SourceRanges
		wantWarnings []string
		wantErrs     []string
	}{
		"none": {},
		// cert-manager's HTTP-01 solver puts exactly this on every challenge Ingress it creates.
		"cert-manager's challenge Ingress: every IPv4 and IPv6 address": {
			annotations: []string{AnnotationWhitelistSourceRange, "0.0.0.0/0,::/0"},
			want:        &SourceRanges{Allow: []netip.Prefix{p("0.0.0.0/0"), p("::/0")}},
		},
		"addresses and ranges, whitespace, host bits masked, duplicates dropped, sorted IPv4 first": {
			annotations: []string{AnnotationAllowlistSourceRange, " 2001:DB8::1 ,10.1.2.3/8,\t192.0.2.7, 10.0.0.0/8,192.0.2.7/32 ,2001:db8:0:0::/32"},
			want: &SourceRanges{Allow: []netip.Prefix{
				p("10.0.0.0/8"), p("192.0.2.7/32"), p("2001:db8::/32"), p("2001:db8::1/128"),
			}},
		},
		"IPv4-mapped IPv6 is written as IPv4 (NGINX checks mapped clients against IPv4 rules)": {
			annotations: []string{AnnotationAllowlistSourceRange, "::ffff:192.0.2.7,::ffff:10.0.0.0/104"},
			want:        &SourceRanges{Allow: []netip.Prefix{p("10.0.0.0/8"), p("192.0.2.7/32")}},
		},
		"denylist alone": {
			annotations: []string{AnnotationDenylistSourceRange, "18.0.0.0/8, 56.0.0.1"},
			want:        &SourceRanges{Deny: []netip.Prefix{p("18.0.0.0/8"), p("56.0.0.1/32")}},
		},
		"denylist with an allowlist": {
			annotations: []string{AnnotationDenylistSourceRange, "18.1.0.0/16", AnnotationWhitelistSourceRange, "18.0.0.0/8"},
			want:        &SourceRanges{Deny: []netip.Prefix{p("18.1.0.0/16")}, Allow: []netip.Prefix{p("18.0.0.0/8")}},
		},
		"both names: allowlist-source-range wins, with a warning": {
			annotations: []string{AnnotationAllowlistSourceRange, "10.0.0.0/8", AnnotationWhitelistSourceRange, "0.0.0.0/0"},
			want:        &SourceRanges{Allow: []netip.Prefix{p("10.0.0.0/8")}},
			wantWarnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/whitelist-source-range]: ignored, because " +
				"nginx.ingress.kubernetes.io/allowlist-source-range (its newer name) is set too and wins, as in ingress-nginx"},
		},
		"an empty allowlist-source-range leaves whitelist-source-range in force": {
			annotations:  []string{AnnotationAllowlistSourceRange, "", AnnotationWhitelistSourceRange, "10.0.0.0/8"},
			want:         &SourceRanges{Allow: []netip.Prefix{p("10.0.0.0/8")}},
			wantWarnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/allowlist-source-range]: lists no addresses, so it restricts nothing"},
		},
		"blank lists restrict nothing, and say so": {
			annotations: []string{AnnotationWhitelistSourceRange, " , ", AnnotationDenylistSourceRange, ""},
			wantWarnings: []string{
				"metadata.annotations[nginx.ingress.kubernetes.io/denylist-source-range]: lists no addresses, so it restricts nothing",
				"metadata.annotations[nginx.ingress.kubernetes.io/whitelist-source-range]: lists no addresses, so it restricts nothing",
			},
		},
		"an entry that is not an address rejects the Ingress": {
			annotations: []string{AnnotationWhitelistSourceRange, "10.0.0.0/8, 10.0.0.300"},
			wantErrs:    []string{`metadata.annotations[nginx.ingress.kubernetes.io/whitelist-source-range]: entry "10.0.0.300" ` + notRange},
		},
		"prefix too long, host name, zone, space-separated, injection: each is named": {
			annotations: []string{
				AnnotationAllowlistSourceRange, "10.0.0.0/33,example.com",
				AnnotationDenylistSourceRange, "fe80::1%eth0, 10.0.0.0/8 10.1.0.0/16,1.2.3.4;allow all"},
			wantErrs: []string{
				`metadata.annotations[nginx.ingress.kubernetes.io/denylist-source-range]: entry "fe80::1%eth0" ` + notRange,
				`metadata.annotations[nginx.ingress.kubernetes.io/denylist-source-range]: entry "10.0.0.0/8 10.1.0.0/16" ` + notRange,
				`metadata.annotations[nginx.ingress.kubernetes.io/denylist-source-range]: entry "1.2.3.4;allow all" ` + notRange,
				`metadata.annotations[nginx.ingress.kubernetes.io/allowlist-source-range]: entry "10.0.0.0/33" ` + notRange,
				`metadata.annotations[nginx.ingress.kubernetes.io/allowlist-source-range]: entry "example.com" ` + notRange,
			},
		},
		"an invalid whitelist-source-range rejects even when allowlist-source-range wins": {
			annotations: []string{AnnotationAllowlistSourceRange, "10.0.0.0/8", AnnotationWhitelistSourceRange, "10.0.0.0/8,bad"},
			wantErrs:    []string{`metadata.annotations[nginx.ingress.kubernetes.io/whitelist-source-range]: entry "bad" ` + notRange},
		},
		"newline, NUL and a long entry are quoted and cut": {
			annotations: []string{AnnotationDenylistSourceRange, "10.0.0.1\n}\x00," + strings.Repeat("9", 100)},
			wantErrs: []string{
				`metadata.annotations[nginx.ingress.kubernetes.io/denylist-source-range]: entry "10.0.0.1\n}\x00" ` + notRange,
				`metadata.annotations[nginx.ingress.kubernetes.io/denylist-source-range]: entry "` + strings.Repeat("9", 64) + `"... (100 bytes) ` + notRange,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.annotations...)
			same(t, "rejection", errs, tc.wantErrs)
			if got == nil {
				return
			}
			same(t, "access", got.Access, tc.want)
			same(t, "warnings", got.Warnings, tc.wantWarnings)
		})
	}
}
