package nginx

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// IngressNginxPrefix is the prefix of ingress-nginx's annotations, which migrating users carry over.
const IngressNginxPrefix = "nginx.ingress.kubernetes.io/"

// Annotations of ingress-nginx that this package reads, and the ones other parts of the controller own.
const (
	AnnotationSSLRedirect    = IngressNginxPrefix + "ssl-redirect"
	AnnotationSSLPassthrough = IngressNginxPrefix + "ssl-passthrough"
)

// The source address annotations of ingress-nginx (see SourceRanges). allowlist-source-range is the
// newer name of whitelist-source-range; when both list addresses, allowlist-source-range wins, as in
// ingress-nginx (which read the old name only when the new one was empty).
const (
	AnnotationAllowlistSourceRange = IngressNginxPrefix + "allowlist-source-range"
	AnnotationWhitelistSourceRange = IngressNginxPrefix + "whitelist-source-range"
	AnnotationDenylistSourceRange  = IngressNginxPrefix + "denylist-source-range"
)

// handledElsewhere are ingress-nginx annotations that other modules read, so translation says nothing
// about them.
var handledElsewhere = []string{AnnotationSSLPassthrough}

// restrictsAccess reports whether an ingress-nginx annotation (name without the prefix) narrows who may
// reach the Ingress's backends: authentication (basic, external, client certificates), source address
// lists, and the web application firewall. Serving such an Ingress while ignoring the annotation would
// open what its owner closed, so an Ingress that carries one is rejected until it is supported. The
// three source address lists ingress-nginx knows are supported (and handled before this is asked);
// other "-source-range" names (blacklist-, blocklist-) are refused rather than ignored.
func restrictsAccess(name string) bool {
	switch {
	case strings.HasPrefix(name, "auth-"),
		strings.HasPrefix(name, "modsecurity-"),
		strings.HasSuffix(name, "-source-range"),
		name == "satisfy",
		name == "enable-modsecurity",
		name == "enable-owasp-core-rules":
		return true
	}
	return false
}

// AnnotationCanary marks an ingress-nginx canary Ingress: a second Ingress for the same host and path
// that gets only a share of the traffic.
const AnnotationCanary = IngressNginxPrefix + "canary"

// annotations applies the Ingress's ingress-nginx annotations: ssl-redirect and the source address
// lists are supported. Annotations whose loss would change who gets what are refused, rejecting the
// Ingress: other access restrictions (serving without them opens what the owner closed), snippets (raw
// NGINX configuration, often deny/allow rules; ingress-nginx also refused them by default since 1.9)
// and canary (the canary Ingress would serve its paths outright, or take them over when it is older).
// Every other one is reported as ignored in one Warning, so a migrating owner learns what does not
// carry over.
func (t *translator) annotations() {
	var ignored []string
	for _, key := range slices.Sorted(maps.Keys(t.ing.Annotations)) {
		name, ok := strings.CutPrefix(key, IngressNginxPrefix)
		if !ok || slices.Contains(handledElsewhere, key) {
			continue
		}
		value := t.ing.Annotations[key]
		switch {
		case key == AnnotationSSLRedirect:
			b, err := strconv.ParseBool(strings.TrimSpace(value))
			if err != nil {
				t.fail("metadata.annotations[%s]: %q is not a boolean (want \"true\" or \"false\")", key, value)
				continue
			}
			t.out.SSLRedirect = b
		case key == AnnotationAllowlistSourceRange, key == AnnotationWhitelistSourceRange, key == AnnotationDenylistSourceRange:
			// read together by sourceRanges
		case restrictsAccess(name):
			t.fail("metadata.annotations[%s]: restricts access, which ingress-reactor does not support yet; "+
				"the Ingress is not served rather than served without the restriction (see docs/migration.md)", key)
		case strings.HasSuffix(name, "-snippet"):
			t.fail("metadata.annotations[%s]: snippets (raw NGINX configuration) are never applied; the Ingress is not served "+
				"rather than served without what the snippet did (see docs/migration.md)", key)
		case key == AnnotationCanary:
			if b, err := strconv.ParseBool(strings.TrimSpace(value)); err == nil && !b {
				continue // an explicit "false" is a plain Ingress
			}
			t.fail("metadata.annotations[%s]: canary Ingresses are not supported yet; the Ingress is not served, so that it "+
				"cannot take its host and paths from the main Ingress (see docs/migration.md)", key)
		default:
			ignored = append(ignored, key)
		}
	}
	t.sourceRanges()
	if len(ignored) > 0 {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf(
			"metadata.annotations: %s: not supported yet and ignored; the Ingress is served with the defaults",
			strings.Join(ignored, ", ")))
	}
}

// sourceRanges reads the source address annotations into t.out.Access. An entry that is not an address
// or a CIDR range rejects the Ingress: serving it with a narrower list than its owner wrote could open
// it, and with a wider one could lock clients out.
func (t *translator) sourceRanges() {
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
			t.fail("metadata.annotations[%s]: entry %q is not an IP address or a CIDR range (for example 192.0.2.7, 10.0.0.0/8 or 2001:db8::/32)", key, entry)
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
