package nginx

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The canary annotations of ingress-nginx. An Ingress with canary "true" serves no path of its own: each
// of its routes adds an alternative upstream to the route of the main Ingress with the same host, path
// and path type (see Merger), and the Lua router sends a request there by the rules below.
const (
	AnnotationCanary                = IngressNginxPrefix + "canary"
	AnnotationCanaryByHeader        = IngressNginxPrefix + "canary-by-header"
	AnnotationCanaryByHeaderValue   = IngressNginxPrefix + "canary-by-header-value"
	AnnotationCanaryByHeaderPattern = IngressNginxPrefix + "canary-by-header-pattern"
	AnnotationCanaryByCookie        = IngressNginxPrefix + "canary-by-cookie"
	AnnotationCanaryWeight          = IngressNginxPrefix + "canary-weight"
	AnnotationCanaryWeightTotal     = IngressNginxPrefix + "canary-weight-total"
)

// Bounds of the canary values: a header or cookie name, a header value or pattern, a weight total.
const (
	maxCanaryName     = 256
	maxCanaryValue    = 1024
	maxCanaryWeight   = 1_000_000
	defaultCanaryBase = 100
)

// CanaryRule decides which requests of a route its canary upstream serves, checked in this order (as
// ingress-nginx's balancer did): the header, then the cookie, then the weight.
//   - Header: with HeaderValue, a request whose header equals it goes to the canary; else, with
//     HeaderPattern (PCRE, unanchored), one whose header matches it; else "always" goes to the canary and
//     "never" to the main upstream. Any other value, or no header, goes on to the cookie.
//   - Cookie: "always" and "never" as for the header; anything else goes on to the weight.
//   - Weight: Weight out of WeightTotal of the remaining requests, at random.
//
// Balance is the canary Ingress's own balancing (load-balance, upstream-hash-by, and with LegacyAffinity
// its affinity); Merger.hostCanaries makes the location's canary balancing of it and the main Ingress's.
type CanaryRule struct {
	Header, HeaderValue, HeaderPattern string
	Cookie                             string
	Weight, WeightTotal                int
	Balance                            BalanceOptions
	LegacyAffinity                     bool
}

// LocationCanary is the canary of a location: the upstream of the canary Ingress's route for the same
// host, path and path type, and its rule. The location's own settings (its main Ingress's) apply to the
// canary's requests too, but for balancing: Balance balances the canary's requests (canaryBalance).
type LocationCanary struct {
	Upstream UpstreamName
	Ingress  types.NamespacedName
	Rule     *CanaryRule
	Balance  BalanceOptions
}

// Equal reports whether c and o send the same requests to the same upstream; nil equals nil only.
func (c *LocationCanary) Equal(o *LocationCanary) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Upstream == o.Upstream && c.Ingress == o.Ingress && *c.Rule == *o.Rule && c.Balance == o.Balance
}

// canaryBalance returns the balancing of a canary's requests, as ingress-nginx's merge of an alternative
// backend: with affinity-canary-behavior sticky the main location's affinity (so a client the canary
// served keeps its cookie's backend), else, and when the main location has none, the canary's own.
func canaryBalance(rule *CanaryRule, main *RouteOptions) BalanceOptions {
	if !rule.LegacyAffinity && main != nil && main.Balance.Affinity {
		return main.Balance
	}
	return rule.Balance
}

func init() {
	const (
		invalidRejects = "An invalid value **rejects the canary Ingress** (its last good version keeps being served; the main " +
			"Ingress serves every request when there is none); ingress-nginx logged it and used the default."
		token = "a header name: letters, digits, `-` and `_`, at most 256 bytes"
	)
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			{
				Name: "canary", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "a boolean: `true` or `false` (as Go's strconv.ParseBool); spaces around it are trimmed",
				Default: "`false`: a plain Ingress",
				Difference: "**Route data**: a canary never reloads NGINX, whether it appears, changes its rules or weight, or goes " +
					"(ingress-nginx applied these through its sync loop). A canary Ingress serves no path by itself: each of its paths " +
					"adds its backend to the path with the same host, path and path type of the main (non-canary) Ingress, which keeps " +
					"its own settings (annotations) for the canary's requests too, as in ingress-nginx; a path the main Ingress lacks is " +
					"not served (a Warning Event says so). ingress-nginx attached a canary to the main path's Service port, so it also " +
					"split the other paths (and Ingresses) routed to that Service port; here it splits only the paths it names. One canary per path: the oldest wins, the others get a Warning Event. " +
					"On purpose: the canary must be in the **main Ingress's namespace** (ingress-nginx let any namespace split another's " +
					"traffic). The canary splits the main Ingress's `server-alias` hosts too. On a canary Ingress the other annotations " +
					"(but `service-upstream`, `use-regex` and `rewrite-target`, which only say how its paths are read, `load-balance`, " +
					"`upstream-hash-by*` and, as `affinity-canary-behavior` says, `affinity*` and `session-cookie-*`, which balance the " +
					"canary's requests), `spec.tls` and the `default-backend`'s fallback are ignored with a Warning, as ingress-nginx ignored " +
					"them; its `spec.defaultBackend` splits the catch-all server's `/` only, as in ingress-nginx. A request for the canary " +
					"whose canary Service has no ready endpoint goes to the main backend, as in ingress-nginx; one for the canary while " +
					"the main Service has none is served by the canary (ingress-nginx answered 503 before looking at the canary). A value that is not a " +
					"boolean **rejects the Ingress** (ingress-nginx served it as a plain Ingress, which took the main Ingress's paths).",
			},
			{
				Name: "canary-by-cookie", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "a cookie name: letters, digits, `-`, `_` and `.`, at most 256 bytes", Default: "none",
				Difference: "A request whose cookie is `always` goes to the canary, `never` to the main backend, whatever the weight; " +
					"any other value falls through to the weight. Comes after `canary-by-header`. " + invalidRejects,
			},
			{
				Name: "canary-by-header", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: token, Default: "none",
				Difference: "A request whose header is `always` goes to the canary, `never` to the main backend (with " +
					"`canary-by-header-value` or `-pattern`, only their match counts); any other value falls through to the cookie " +
					"and the weight. " + invalidRejects,
			},
			{
				Name: "canary-by-header-pattern", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "a regular expression (unanchored, case-sensitive, as ingress-nginx's `ngx.re.match`), at most 1024 bytes of " +
					"printable ASCII, in the common syntax of Go's RE2 and PCRE (constructs they read differently are refused)",
				Default: "none",
				Difference: "A request whose `canary-by-header` header matches goes to the canary; otherwise it falls through. " +
					"Ignored, with a Warning, without `canary-by-header` or with `canary-by-header-value` (which wins, as in " +
					"ingress-nginx). The pattern is checked when the Ingress is translated, so a pattern NGINX cannot compile never " +
					"reaches it; ingress-nginx logged a match error per request. " + invalidRejects,
			},
			{
				Name: "canary-by-header-value", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "a header value: printable ASCII, at most 1024 bytes", Default: "none",
				Difference: "A request whose `canary-by-header` header equals the value goes to the canary; otherwise it falls " +
					"through (`always` and `never` then have no special meaning). Ignored, with a Warning, without " +
					"`canary-by-header`. " + invalidRejects,
			},
			{
				Name: "canary-weight", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "a whole number from 0 to `canary-weight-total`", Default: "`0`: no request by weight",
				Difference: "The share of the requests that the header and cookie rules left undecided that goes to the canary, at " +
					"random per request. A change is a push to the router, applied within milliseconds without a reload " +
					"(docs/benchmarks.md). A weight above the total, which ingress-nginx took as \"every request\", " +
					"**rejects the canary Ingress**. " + invalidRejects,
			},
			{
				Name: "canary-weight-total", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "a whole number from 100 to 1000000", Default: "`100`",
				Difference: "What `canary-weight` is a share of. ingress-nginx replaced a total below 100 by 100 without a word; " +
					"here such a total **rejects the canary Ingress**, so that a weight is never read against another total than " +
					"its owner wrote. " + invalidRejects,
			},
		},
		apply: applyCanary,
	})
}

// canaryRuleAnnotations are the canary annotations besides canary itself.
var canaryRuleAnnotations = []string{AnnotationCanaryByCookie, AnnotationCanaryByHeader, AnnotationCanaryByHeaderPattern,
	AnnotationCanaryByHeaderValue, AnnotationCanaryWeight, AnnotationCanaryWeightTotal}

// canaryEnabled reports whether ing's canary annotation says "true"; a value that is not a boolean
// counts as true here (the canary group rejects the Ingress), so that such an Ingress never takes
// paths as a plain one.
func canaryEnabled(annotations map[string]string) bool {
	raw, ok := annotations[AnnotationCanary]
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(strings.TrimSpace(raw))
	return err != nil || b
}

// IsCanary reports whether ing is a canary Ingress (canary "true", or a value the translation rejects):
// it serves no route of its own.
func IsCanary(ing *networkingv1.Ingress) bool { return canaryEnabled(ing.Annotations) }

// appliesToCanary reports whether a supported annotation is read on a canary Ingress: the canary group's,
// service-upstream, which decides the canary upstream's endpoints, and use-regex and rewrite-target, which
// decide how its paths are read (a canary copied from a main Ingress with regex paths, as Flagger makes
// them, has the same paths), and the balancing group's, which ingress-nginx applies to the canary's
// backend; the effect of the others on requests is the main Ingress's (canaryOnly drops the options but
// for their balancing).
func appliesToCanary(name string) bool {
	switch name {
	case "canary", "service-upstream", "use-regex", "rewrite-target", "affinity", "affinity-mode", "affinity-canary-behavior", "load-balance":
		return true
	}
	return strings.HasPrefix(name, "canary-") || strings.HasPrefix(name, "session-cookie-") || strings.HasPrefix(name, "upstream-hash-by")
}

// applyCanary reads the canary annotations into t.out.Canary. Without canary "true" the rules have
// nothing to apply to and are ignored with a Warning.
func applyCanary(t *translator) {
	a := t.ing.Annotations
	if _, ok := a[AnnotationCanary]; !ok || !canaryEnabled(a) {
		var set []string
		for _, k := range canaryRuleAnnotations {
			if _, ok := a[k]; ok {
				set = append(set, k)
			}
		}
		if len(set) > 0 {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations: %s: ignored, because the Ingress is no canary (%s is not \"true\")",
				strings.Join(set, ", "), AnnotationCanary))
		}
		return
	}
	if on, ok := t.parseBoolAnnotation(AnnotationCanary); !ok || !on {
		return
	}
	rule := &CanaryRule{WeightTotal: defaultCanaryBase}
	if raw, ok := a[AnnotationCanaryByHeader]; ok {
		v := strings.TrimSpace(raw)
		if !canaryName(v, false) {
			t.fail("metadata.annotations[%s]: %s is not a header name (want letters, digits, - and _, at most %d bytes)",
				AnnotationCanaryByHeader, quoteValue(raw), maxCanaryName)
		}
		rule.Header = v
	}
	if raw, ok := a[AnnotationCanaryByHeaderValue]; ok {
		switch {
		case rule.Header == "":
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has no effect without %s", AnnotationCanaryByHeaderValue, AnnotationCanaryByHeader))
		case raw == "" || len(raw) > maxCanaryValue || strings.ContainsFunc(raw, func(r rune) bool { return r < ' ' || r > '~' }):
			t.fail("metadata.annotations[%s]: %s is not a header value (want printable ASCII, at most %d bytes)",
				AnnotationCanaryByHeaderValue, quoteValue(raw), maxCanaryValue)
		default:
			rule.HeaderValue = raw
		}
	}
	if raw, ok := a[AnnotationCanaryByHeaderPattern]; ok {
		switch {
		case rule.Header == "":
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has no effect without %s", AnnotationCanaryByHeaderPattern, AnnotationCanaryByHeader))
		case rule.HeaderValue != "":
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: ignored, because %s is set too and wins, as in ingress-nginx",
				AnnotationCanaryByHeaderPattern, AnnotationCanaryByHeaderValue))
		default:
			pcre, err := compileUserPCRE(raw, maxCanaryValue)
			if err == nil && raw == "" {
				err = fmt.Errorf("empty")
			}
			if err != nil {
				t.fail("metadata.annotations[%s]: %s: %v", AnnotationCanaryByHeaderPattern, quoteValue(raw), err)
			} else {
				rule.HeaderPattern = pcre
			}
		}
	}
	if raw, ok := a[AnnotationCanaryByCookie]; ok {
		v := strings.TrimSpace(raw)
		if !canaryName(v, true) {
			t.fail("metadata.annotations[%s]: %s is not a cookie name (want letters, digits, -, _ and ., at most %d bytes)",
				AnnotationCanaryByCookie, quoteValue(raw), maxCanaryName)
		}
		rule.Cookie = v
	}
	total, totalOK := t.canaryWhole(AnnotationCanaryWeightTotal, defaultCanaryBase, defaultCanaryBase, maxCanaryWeight)
	weight, weightOK := t.canaryWhole(AnnotationCanaryWeight, 0, 0, maxCanaryWeight)
	if totalOK && weightOK && weight > total {
		t.fail("metadata.annotations[%s]: %d is more than the total, %d (%s); ingress-nginx sent every request to the canary then",
			AnnotationCanaryWeight, weight, total, AnnotationCanaryWeightTotal)
	}
	rule.Weight, rule.WeightTotal = weight, total
	t.out.Canary = rule
}

// canaryWhole parses a whole-number canary annotation within [lo, hi]; def when it is absent.
func (t *translator) canaryWhole(key string, def, lo, hi int) (int, bool) {
	raw, ok := t.ing.Annotations[key]
	if !ok {
		return def, true
	}
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil || n < lo || n > hi {
		t.fail("metadata.annotations[%s]: %s is not a whole number from %d to %d", key, quoteValue(raw), lo, hi)
		return def, false
	}
	return n, true
}

// canaryName reports whether v can name the canary's header (letters, digits, '-', '_': NGINX reads it
// as $http_<name>) or cookie (also '.').
func canaryName(v string, cookie bool) bool {
	if v == "" || len(v) > maxCanaryName {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || cookie && c == '.') {
			return false
		}
	}
	return true
}

// canaryOnly leaves out of a canary Ingress what only a main Ingress may have: its route options, and its
// spec.tls, with a Warning (a canary never chooses a host's certificate).
func (t *translator) canaryOnly() {
	if t.out.Canary == nil {
		return
	}
	if t.out.Options != nil {
		t.out.Canary.Balance = t.out.Options.Balance
	}
	t.out.Canary.LegacyAffinity = t.canaryLegacyAffinity
	t.out.Options = nil // read for the paths and balancing only: the main Ingress's options apply
	// spec.defaultBackend adds a "/" route to each host of the rules; on a canary that would split the
	// main Ingress's "/" of a host whose rules name other paths only. ingress-nginx merged a canary's
	// default backend into the catch-all server only, so the catch-all's route stays.
	dropped := false
	t.out.Routes = slices.DeleteFunc(t.out.Routes, func(r Route) bool {
		drop := r.FromDefaultBackend && r.Host != ""
		dropped = dropped || drop
		return drop
	})
	if dropped {
		t.seen = nil
		t.out.Warnings = append(t.out.Warnings, "spec.defaultBackend: ignored for the hosts of the rules of a canary Ingress: it is the canary of "+
			"the catch-all server's \"/\" only, as in ingress-nginx")
	}
	if len(t.out.TLS) > 0 {
		t.out.TLS = nil
		t.out.Warnings = append(t.out.Warnings, "spec.tls: ignored on a canary Ingress: the main Ingress's TLS serves its requests, as in ingress-nginx")
	}
}

// canaryIgnoredWarning reports the supported annotations that a canary Ingress does not apply.
func (t *translator) canaryIgnoredWarning(keys []string) {
	if len(keys) == 0 {
		return
	}
	slices.Sort(keys)
	t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations: %s: ignored on a canary Ingress: the main Ingress's settings "+
		"apply to the canary's requests, as in ingress-nginx", strings.Join(keys, ", ")))
}

// appendCanary writes location l's canary ("canary":{...}), with the balancing of its requests.
func appendCanary(b []byte, l *Location) []byte {
	c := l.Canary
	if c == nil {
		return b
	}
	r := c.Rule
	b = append(b, `,"canary":{"upstream":"`...)
	b = append(b, c.Upstream...)
	b = append(b, `","weight":`...)
	b = strconv.AppendInt(b, int64(r.Weight), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(r.WeightTotal), 10)
	for _, f := range [...]struct{ name, v string }{{"header", r.Header}, {"header_value", r.HeaderValue}, {"header_pattern", r.HeaderPattern}, {"cookie", r.Cookie}} {
		if f.v != "" {
			b = append(b, `,"`...)
			b = append(b, f.name...)
			b = append(b, `":`...)
			b = appendJSONString(b, f.v)
		}
	}
	b = appendBalance(b, &c.Balance, l)
	return append(b, '}')
}
