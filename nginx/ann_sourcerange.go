package nginx

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// The source address annotations of ingress-nginx (see SourceRanges). allowlist-source-range is the
// newer name of whitelist-source-range; when both list addresses, allowlist-source-range wins, as in
// ingress-nginx (which read the old name only when the new one was empty).
const (
	AnnotationAllowlistSourceRange = IngressNginxPrefix + "allowlist-source-range"
	AnnotationWhitelistSourceRange = IngressNginxPrefix + "whitelist-source-range"
	AnnotationDenylistSourceRange  = IngressNginxPrefix + "denylist-source-range"
)

func init() {
	const (
		values = "comma-separated IPv4 and IPv6 addresses and CIDR ranges (`10.0.0.0/8, 192.0.2.7, 2001:db8::/32`); spaces around entries are allowed"
		differ = "Applies to the Ingress's own paths only (another Ingress on the same host keeps its rules; requests no path matches have none). " +
			"An entry that is not an address or a range **rejects the Ingress** (its last good version keeps being served); " +
			"ingress-nginx served the location denied, or with the entries it could parse. A list without entries restricts nothing, with a Warning. " +
			"The address checked is the client's as NGINX sees it (`$remote_addr`): the connection's, or, with the ConfigMap's " +
			"`use-forwarded-headers` or `enable-real-ip`, the forwarded-for header of a proxy in `proxy-real-ip-cidr`. " +
			"The ConfigMap's `whitelist-source-range` and `denylist-source-range` are the defaults of Ingresses without these annotations."
	)
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			{
				Name: "allowlist-source-range", Origin: OriginUndocumented, Status: AnnotationSupported, Kind: KindRouteData, RestrictsAccess: true,
				Values: values, Default: "every address",
				Difference: "Only these addresses reach the paths; others get 403. The newer name of `whitelist-source-range`, which ingress-nginx " +
					"reads without documenting it; when both list addresses it wins, as there, with a Warning. " + differ,
			},
			{
				Name: "denylist-source-range", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData, RestrictsAccess: true,
				Values: values, Default: "no address",
				Difference: "These addresses get 403, checked before the allowlist. " + differ,
			},
			{
				Name: "whitelist-source-range", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData, RestrictsAccess: true,
				Values: values, Default: "every address",
				Difference: "The older name of `allowlist-source-range`; ignored, with a Warning, when that one lists addresses. " +
					"cert-manager's HTTP-01 challenge Ingresses (`0.0.0.0/0,::/0`) are served. " + differ,
			},
		},
		apply: applySourceRanges,
	})
}

// applySourceRanges reads the source address annotations into t.out.Access. An entry that is not an
// address or a CIDR range rejects the Ingress: serving it with a narrower list than its owner wrote could
// open it, and with a wider one could lock clients out.
func applySourceRanges(t *translator) {
	deny := t.prefixList(AnnotationDenylistSourceRange)
	allow := t.prefixList(AnnotationAllowlistSourceRange)
	if legacy := t.prefixList(AnnotationWhitelistSourceRange); len(legacy) > 0 {
		if len(allow) > 0 {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf(
				"metadata.annotations[%s]: ignored, because %s (its newer name) is set too and wins, as in ingress-nginx",
				AnnotationWhitelistSourceRange, AnnotationAllowlistSourceRange))
		} else {
			allow = legacy
		}
	}
	if len(deny) > 0 || len(allow) > 0 {
		t.out.Access = &SourceRanges{Deny: deny, Allow: allow}
	}
}

// prefixList parses the comma-separated addresses and CIDR ranges of annotation key: canonical, sorted,
// without duplicates. Blank entries are skipped; a value without any entry restricts nothing, which
// the owner is told in a warning.
func (t *translator) prefixList(key string) []netip.Prefix {
	value, ok := t.ing.Annotations[key]
	if !ok {
		return nil
	}
	var out []netip.Prefix
	valid := true
	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, ok := parseSourceRange(entry)
		if !ok {
			t.fail("metadata.annotations[%s]: entry %s is not an IP address or a CIDR range (for example 192.0.2.7, 10.0.0.0/8 or 2001:db8::/32)", key, quoteValue(entry))
			valid = false
			continue
		}
		out = append(out, p)
	}
	if !valid {
		return nil
	}
	if len(out) == 0 {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: lists no addresses, so it restricts nothing", key))
		return nil
	}
	slices.SortFunc(out, netip.Prefix.Compare)
	return slices.Compact(out)
}

// parseSourceRange parses an IPv4 or IPv6 address (a /32 or /128 range) or a CIDR range, masked to its
// network. An IPv4-mapped IPv6 range becomes the IPv4 range: NGINX checks clients that arrive on IPv6
// with a mapped address against the IPv4 rules, so the mapped form would never match.
func parseSourceRange(s string) (netip.Prefix, bool) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, false
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, false
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

// sourceRangeDefaults applies the ConfigMap's whitelist-source-range and denylist-source-range to an
// Ingress without the annotation of its kind (the allowlist's two names count as one).
func (t *translator) sourceRangeDefaults() {
	_, allowSet := t.ing.Annotations[AnnotationAllowlistSourceRange]
	if _, legacy := t.ing.Annotations[AnnotationWhitelistSourceRange]; legacy {
		allowSet = true
	}
	_, denySet := t.ing.Annotations[AnnotationDenylistSourceRange]
	var allow, deny []netip.Prefix
	if !allowSet {
		allow = defaultRanges(t.opts.AllowSourceRange)
	}
	if !denySet {
		deny = defaultRanges(t.opts.DenySourceRange)
	}
	if len(allow) == 0 && len(deny) == 0 {
		return
	}
	if t.out.Access == nil {
		t.out.Access = &SourceRanges{}
	}
	if len(allow) > 0 {
		t.out.Access.Allow = allow
	}
	if len(deny) > 0 {
		t.out.Access.Deny = deny
	}
}

// defaultRanges parses the canonical list of a TranslateOptions field (see parseRangeSetting).
func defaultRanges(list string) []netip.Prefix {
	var out []netip.Prefix
	for entry := range strings.SplitSeq(list, ",") {
		if p, ok := parseSourceRange(entry); ok {
			out = append(out, p)
		}
	}
	return out
}

// parseRangeSetting parses a ConfigMap list of addresses and CIDR ranges as the annotations are:
// canonical, sorted, without duplicates.
func parseRangeSetting(v string) ([]string, error) {
	var ps []netip.Prefix
	for entry := range strings.SplitSeq(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, ok := parseSourceRange(entry)
		if !ok {
			return nil, fmt.Errorf("%s is not an IP address or a CIDR range", quoteValue(entry))
		}
		ps = append(ps, p)
	}
	slices.SortFunc(ps, netip.Prefix.Compare)
	var out []string
	for _, p := range slices.Compact(ps) {
		out = append(out, p.String())
	}
	return out, nil
}
