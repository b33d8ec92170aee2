package nginx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
)

// The balancing group: session affinity by cookie, consistent hashing on request variables, and EWMA
// load balancing. All of it is route data: the router hands a route's settings to the Lua balancer
// (lua/ingress_reactor/balancing.lua), which keeps the hash rings and latency statistics per upstream in
// each worker, so that no setting here ever reloads NGINX.

// Annotations of the balancing group.
const (
	AnnotationAffinity                      = IngressNginxPrefix + "affinity"
	AnnotationAffinityMode                  = IngressNginxPrefix + "affinity-mode"
	AnnotationAffinityCanaryBehavior        = IngressNginxPrefix + "affinity-canary-behavior"
	AnnotationSessionCookieName             = IngressNginxPrefix + "session-cookie-name"
	AnnotationSessionCookiePath             = IngressNginxPrefix + "session-cookie-path"
	AnnotationSessionCookieDomain           = IngressNginxPrefix + "session-cookie-domain"
	AnnotationSessionCookieSameSite         = IngressNginxPrefix + "session-cookie-samesite"
	AnnotationSessionCookieConditionalSSN   = IngressNginxPrefix + "session-cookie-conditional-samesite-none"
	AnnotationSessionCookieExpires          = IngressNginxPrefix + "session-cookie-expires"
	AnnotationSessionCookieMaxAge           = IngressNginxPrefix + "session-cookie-max-age"
	AnnotationSessionCookieSecure           = IngressNginxPrefix + "session-cookie-secure"
	AnnotationSessionCookieChangeOnFailure  = IngressNginxPrefix + "session-cookie-change-on-failure"
	AnnotationUpstreamHashBy                = IngressNginxPrefix + "upstream-hash-by"
	AnnotationUpstreamHashBySubset          = IngressNginxPrefix + "upstream-hash-by-subset"
	AnnotationUpstreamHashBySubsetSize      = IngressNginxPrefix + "upstream-hash-by-subset-size"
	AnnotationLoadBalance                   = IngressNginxPrefix + "load-balance"
	defaultSessionCookieName                = "INGRESSCOOKIE"
	defaultHashSubsetSize                   = 3
	maxHashSubsetSize                       = 1000
	maxCookieSeconds                        = 1<<31 - 1
	maxHashExpression                       = 256
	maxCookieName, maxCookiePath, maxDomain = 128, 1024, 253
)

// BalanceOptions are a route's balancing settings (RouteOptions.Balance); the zero value is round
// robin. Affinity wins over HashBy, and both over LoadBalance, as in ingress-nginx.
type BalanceOptions struct {
	// LoadBalance is "ewma", or "" for round robin (load-balance).
	LoadBalance string
	// HashBy is a validated expression of allowed request variables (upstream-hash-by); HashSubsetSize,
	// when not 0, picks at random among that many endpoints that follow the key on the ring.
	HashBy         string
	HashSubsetSize int
	// Affinity turns cookie affinity on (affinity: cookie); the Cookie* fields describe the cookie.
	// CookiePath "" is the route's path; CookieSecure marks every cookie Secure (else those set over
	// HTTPS are); CookieExpires and CookieMaxAge are seconds as digits, "" for none. CookieKey keys the endpoint
	// tokens of persistent affinity.
	Affinity                                                           bool
	CookiePersistent                                                   bool
	CookieName, CookiePath, CookieDomain, CookieSameSite               string
	CookieSameSiteNoneConditional, CookieChangeOnFailure, CookieSecure bool
	CookieExpires, CookieMaxAge                                        string
	CookieKey                                                          string
}

var (
	// cookieToken is an RFC 6265 cookie name (an RFC 7230 token).
	cookieToken = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
	// hashVariable and hashLiteral are the parts of an upstream-hash-by expression.
	hashVariable = regexp.MustCompile(`^\$(\{[A-Za-z0-9_]+\}|[A-Za-z0-9_]+)`)
	hashLiteral  = regexp.MustCompile(`^[A-Za-z0-9._:/-]+`)
)

// hashVariables are the request variables an upstream-hash-by expression may name, and hashPrefixes
// the families (balancing.lua checks the same list).
var (
	hashVariables = []string{"remote_addr", "binary_remote_addr", "request_uri", "uri", "document_uri", "args", "query_string",
		"host", "http_host", "scheme", "request_method", "server_name", "server_port"}
	hashPrefixes = []string{"arg_", "http_", "cookie_"}
)

const hashValues = "an expression of NGINX variables and text, such as `$request_uri`, `$remote_addr`, `${arg_user}-v1`: variables " +
	"`$remote_addr`, `$binary_remote_addr`, `$request_uri`, `$uri`, `$document_uri`, `$args`, `$query_string`, `$host`, " +
	"`$http_host`, `$scheme`, `$request_method`, `$server_name`, `$server_port` and the families `$arg_*`, `$http_*`, " +
	"`$cookie_*`; text of letters, digits, `-`, `_`, `.`, `:` and `/`; at most 256 bytes"

const cookieDifference = "**Route data** with `affinity: cookie`: a change never reloads NGINX."

func init() {
	cookieSpec := func(name, values, def, diff string) AnnotationSpec {
		return AnnotationSpec{Name: name, Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values: values, Default: def, Difference: cookieDifference + " " + diff}
	}
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "affinity", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values: "`cookie`", Default: "none: requests are balanced by `load-balance`",
			Difference: "**Route data**: the Lua balancer keeps a client on the endpoint its cookie names, so turning it on or off, or " +
				"changing any `session-cookie-*`, never reloads NGINX. It applies to the Ingress's own paths (in ingress-nginx, the " +
				"first Ingress of a Service set it for all). The cookie value never shows an endpoint's address: a random key " +
				"(balanced) or a keyed hash of the endpoint (persistent), keyed by the Ingress's UID, then `|` and a tag of the " +
				"upstream (main or canary, see `affinity-canary-behavior`). Another value **rejects the " +
				"Ingress** (ingress-nginx served it without affinity, which breaks server-side sessions). With `affinity`, " +
				"`upstream-hash-by` and `load-balance` are ignored with a Warning.",
		}, {
			Name: "affinity-mode", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values: "`balanced` or `persistent`", Default: "`balanced`",
			Difference: "**Route data**. `balanced`: a cookie holds a random key that a consistent-hash ring maps to an endpoint, so a " +
				"new endpoint takes over its share of sessions and an endpoint that is gone hands its sessions to the others, " +
				"while every other session stays where it is. `persistent`: a cookie names its endpoint and keeps it while the " +
				"endpoint exists, whatever is added. An invalid value is ignored with a Warning (`balanced`).",
		},
			{
				Name: "affinity-canary-behavior", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "`sticky` or `legacy` (any case)", Default: "`sticky`",
				Difference: "**Route data**, read on the canary Ingress, as in ingress-nginx. `sticky`: the canary's requests are " +
					"balanced with the main Ingress's `affinity` and `session-cookie-*` (the canary's own are ignored with a " +
					"Warning), so a client the canary served once keeps going to the canary; with `legacy` the canary Ingress's " +
					"own affinity annotations apply to its requests. Either way the canary's `load-balance` and `upstream-hash-by` " +
					"apply to its requests when no affinity does. As in ingress-nginx, the cookie names the backend (canary or " +
					"main) besides the session's key, and a request whose cookie names one goes there before the canary rules " +
					"(header, cookie, weight) are looked at; a canary without ready endpoints leaves it to the main backend. An " +
					"invalid value is ignored with a Warning (`sticky`, as ingress-nginx); on a non-canary Ingress the annotation " +
					"is ignored with a Warning.",
			},
			cookieSpec("session-cookie-name", "a cookie name (RFC 6265 token characters), at most 128 bytes", "`INGRESSCOOKIE`",
				"An invalid name is ignored with a Warning (`INGRESSCOOKIE`)."),
			cookieSpec("session-cookie-path", "a path starting with `/`, printable ASCII without `;` and `,`", "the path of the route",
				"Routes with regex paths (`use-regex`, `rewrite-target`) use `/` without it, with a Warning (ingress-nginx wrote the "+
					"regex). An invalid value is ignored with a Warning."),
			cookieSpec("session-cookie-domain", "a domain name, optionally with a leading dot", "none: the cookie is the request host's",
				"An invalid value is ignored with a Warning."),
			cookieSpec("session-cookie-samesite", "`None`, `Lax` or `Strict` (any case)", "none",
				"An invalid value is ignored with a Warning."),
			cookieSpec("session-cookie-conditional-samesite-none", "`\"true\"` or `\"false\"`", "`false`",
				"Leaves `SameSite=None` out for browsers that mishandle it (Chrome 40-69, iOS 12, Safari on macOS 10.14), as "+
					"ingress-nginx. An invalid value is ignored with a Warning."),
			cookieSpec("session-cookie-expires", "whole seconds from now, up to 2147483647", "none: a session cookie",
				"Sets `Expires`. An invalid value is ignored with a Warning."),
			cookieSpec("session-cookie-max-age", "whole seconds, up to 2147483647", "none: a session cookie",
				"Sets `Max-Age`. An invalid value is ignored with a Warning."),
			cookieSpec("session-cookie-secure", "`\"true\"` or `\"false\"`", "`Secure` on cookies set over HTTPS",
				"`true` marks every cookie `Secure`; otherwise those set over HTTPS are, as in ingress-nginx. An invalid value is "+
					"ignored with a Warning."),
			cookieSpec("session-cookie-change-on-failure", "`\"true\"` or `\"false\"`", "`false`: retries go to the cookie's endpoint again",
				"`true`: a retry (`proxy-next-upstream`) goes to another endpoint, and the cookie follows it when its first try failed "+
					"before any response (NGINX may refuse a `Set-Cookie` from a later retry; the next request then picks again). An "+
					"invalid value is ignored with a Warning."),
			{
				Name: "upstream-hash-by", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: hashValues, Default: "the ConfigMap's `upstream-hash-by` (for Ingresses without affinity or load-balance annotations), else none",
				Difference: "**Route data**: the Lua balancer hashes the expression's value onto a consistent-hash ring (160 points " +
					"per endpoint), so a change never reloads NGINX and an endpoint change moves only the keys of the endpoints " +
					"added or removed. Only the variables listed are allowed: any other, or a character outside the list, **rejects " +
					"the Ingress** (ingress-nginx read any variable, and served invalid values without hashing). The ring is the same " +
					"in every worker and replica.",
			}, {
				Name: "upstream-hash-by-subset", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "`\"true\"` or `\"false\"`", Default: "`false`",
				Difference: "**Route data**: a key goes to one of the `upstream-hash-by-subset-size` endpoints that follow it on the " +
					"ring, picked at random per request; ingress-nginx cut the endpoint list into fixed subsets, which an endpoint " +
					"change reshuffled. An invalid value is ignored with a Warning.",
			}, {
				Name: "upstream-hash-by-subset-size", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "a whole number from 1 to 1000", Default: "`3`",
				Difference: "**Route data**. An invalid value is ignored with a Warning (`3`).",
			}, {
				Name: "load-balance", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "`round_robin` or `ewma`", Default: "the ConfigMap's `load-balance` (`round_robin` unless set)",
				Difference: "**Route data**: a change never reloads NGINX. `ewma` picks the lower-latency endpoint of two drawn at " +
					"random (latency: connect plus response time, decayed over 10 s), with statistics per NGINX worker (ingress-nginx " +
					"shared them between workers). ingress-nginx's other names (`chash`, `chashsubset`, `sticky_balanced`, " +
					"`sticky_persistent`) mean `upstream-hash-by` and `affinity` here; they and unknown values are ignored with a " +
					"Warning, as ingress-nginx fell back to round robin.",
			}},
		apply: applyBalancing,
	})
}

// applyBalancing parses the group's annotations into the Ingress's route options.
func applyBalancing(t *translator) {
	ann := t.ing.Annotations
	var b BalanceOptions
	canary := canaryEnabled(ann)
	if raw, ok := ann[AnnotationAffinityCanaryBehavior]; ok {
		switch v := strings.ToLower(strings.TrimSpace(raw)); {
		case !canary:
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has an effect only on a canary Ingress; ignored",
				AnnotationAffinityCanaryBehavior))
		case v == "legacy":
			t.canaryLegacyAffinity = true
		case v != "sticky":
			t.warnIgnored(AnnotationAffinityCanaryBehavior, raw, "sticky or legacy")
		}
	}
	stickyCanary := canary && !t.canaryLegacyAffinity
	if stickyCanary {
		// sticky: the main Ingress's affinity balances the canary's requests (Merger.hostCanaries).
		var set []string
		for _, k := range affinityAnnotations {
			if _, ok := ann[k]; ok {
				set = append(set, k)
			}
		}
		if len(set) > 0 {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations: %s: ignored on a canary Ingress with %s sticky (the "+
				"default): the main Ingress's affinity applies to the canary's requests, as in ingress-nginx", strings.Join(set, ", "),
				AnnotationAffinityCanaryBehavior))
		}
		ann = maps.Clone(ann)
		for _, k := range affinityAnnotations {
			delete(ann, k)
		}
	}
	if raw, ok := ann[AnnotationAffinity]; ok {
		switch v := strings.ToLower(strings.TrimSpace(raw)); v {
		case "cookie":
			b.Affinity = true
		case "":
		default:
			t.fail("metadata.annotations[%s]: %s is not an affinity type (want \"cookie\")", AnnotationAffinity, quoteValue(raw))
			return
		}
	}
	if b.Affinity {
		t.cookieAffinity(&b)
	} else if !stickyCanary { // a sticky canary's were reported above
		t.onlyWith(AnnotationAffinity+": cookie", affinityAnnotations[1:]...)
	}
	if strings.TrimSpace(ann[AnnotationUpstreamHashBy]) == "" {
		t.onlyWith(AnnotationUpstreamHashBy, AnnotationUpstreamHashBySubset, AnnotationUpstreamHashBySubsetSize)
	} else if !isTrue(ann[AnnotationUpstreamHashBySubset]) {
		t.onlyWith(AnnotationUpstreamHashBySubset+": \"true\"", AnnotationUpstreamHashBySubsetSize)
	}
	if raw, ok := ann[AnnotationUpstreamHashBy]; ok && strings.TrimSpace(raw) != "" {
		expr := strings.TrimSpace(raw)
		if problem := hashExpressionProblem(expr); problem != "" {
			t.fail("metadata.annotations[%s]: %s: %s (want %s)", AnnotationUpstreamHashBy, quoteValue(raw), problem,
				"variables such as $request_uri, $remote_addr, $arg_<name>, $http_<name>, $cookie_<name> and text of letters, digits, -, _, ., :, /")
			return
		}
		if b.Affinity {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: ignored: %s applies (as in ingress-nginx)",
				AnnotationUpstreamHashBy, AnnotationAffinity))
		} else {
			b.HashBy = expr
			if on, ok := t.warnBool(AnnotationUpstreamHashBySubset); ok && on {
				b.HashSubsetSize = defaultHashSubsetSize
				if raw, ok := ann[AnnotationUpstreamHashBySubsetSize]; ok {
					if n, err := strconv.Atoi(strings.TrimSpace(raw)); err != nil || n < 1 || n > maxHashSubsetSize {
						t.warnIgnored(AnnotationUpstreamHashBySubsetSize, raw, "a whole number from 1 to 1000")
					} else {
						b.HashSubsetSize = n
					}
				}
			}
		}
	}
	if raw, ok := ann[AnnotationLoadBalance]; ok {
		switch v := strings.ToLower(strings.TrimSpace(raw)); {
		case v != "round_robin" && v != "ewma":
			t.warnIgnored(AnnotationLoadBalance, raw, "round_robin or ewma (use affinity or upstream-hash-by for sticky and hashed balancing)")
		case b.Affinity || b.HashBy != "":
			if v != "round_robin" {
				t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: ignored: %s applies (as in ingress-nginx)",
					AnnotationLoadBalance, map[bool]string{true: AnnotationAffinity, false: AnnotationUpstreamHashBy}[b.Affinity]))
			}
		case v == "ewma":
			b.LoadBalance = v
		}
	}
	if b != (BalanceOptions{}) {
		t.options().Balance = b
	}
}

// affinityAnnotations are affinity and the annotations that have an effect only with it.
var affinityAnnotations = []string{AnnotationAffinity, AnnotationAffinityMode, AnnotationSessionCookieName, AnnotationSessionCookiePath,
	AnnotationSessionCookieDomain, AnnotationSessionCookieSameSite, AnnotationSessionCookieConditionalSSN,
	AnnotationSessionCookieExpires, AnnotationSessionCookieMaxAge, AnnotationSessionCookieSecure,
	AnnotationSessionCookieChangeOnFailure}

// balanceDefaults applies the ConfigMap's upstream-hash-by and load-balance to an Ingress whose
// annotations choose no balancing (affinity, upstream-hash-by or a valid load-balance): the hash wins
// over load-balance, as the annotations do.
func (t *translator) balanceDefaults() {
	hash, lb := t.opts.UpstreamHashBy, t.opts.LoadBalance
	if hash == "" && lb == "" {
		return
	}
	if t.out.Options != nil && t.out.Options.Balance != (BalanceOptions{}) {
		return
	}
	if v := strings.ToLower(strings.TrimSpace(t.ing.Annotations[AnnotationLoadBalance])); v == "round_robin" || v == "ewma" {
		return // the Ingress chose
	}
	if hash != "" {
		t.options().Balance = BalanceOptions{HashBy: hash}
	} else {
		t.options().Balance = BalanceOptions{LoadBalance: lb}
	}
}

// cookieAffinity parses the cookie's settings into b; every invalid value is ignored with a Warning
// (the affinity still holds, with the default).
func (t *translator) cookieAffinity(b *BalanceOptions) {
	ann := t.ing.Annotations
	trimmed := func(key string) (string, string, bool) {
		raw, ok := ann[key]
		return raw, strings.TrimSpace(raw), ok
	}
	b.CookieName = defaultSessionCookieName
	if raw, v, ok := trimmed(AnnotationAffinityMode); ok {
		switch strings.ToLower(v) {
		case "persistent":
			b.CookiePersistent = true
		case "balanced":
		default:
			t.warnIgnored(AnnotationAffinityMode, raw, "balanced or persistent")
		}
	}
	if raw, v, ok := trimmed(AnnotationSessionCookieName); ok {
		if len(v) > maxCookieName || !cookieToken.MatchString(v) {
			t.warnIgnored(AnnotationSessionCookieName, raw, "a cookie name of token characters (letters, digits, !#$%&'*+.^_`|~-)")
		} else {
			b.CookieName = v
		}
	}
	if raw, v, ok := trimmed(AnnotationSessionCookiePath); ok {
		if len(v) > maxCookiePath || !strings.HasPrefix(v, "/") || strings.ContainsAny(v, ";,") || !printableASCII(v) {
			t.warnIgnored(AnnotationSessionCookiePath, raw, "a path starting with / of printable ASCII without ; and ,")
		} else {
			b.CookiePath = v
		}
	}
	if b.CookiePath == "" && (isTrue(ann[AnnotationUseRegex]) || strings.TrimSpace(ann[AnnotationRewriteTarget]) != "") {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: not set, and the paths are regular expressions: "+
			"the affinity cookie's path is /", AnnotationSessionCookiePath))
	}
	if raw, v, ok := trimmed(AnnotationSessionCookieDomain); ok {
		if len(v) > maxDomain || !cookieDomain.MatchString(v) {
			t.warnIgnored(AnnotationSessionCookieDomain, raw, "a domain name")
		} else {
			b.CookieDomain = v
		}
	}
	if raw, v, ok := trimmed(AnnotationSessionCookieSameSite); ok {
		switch strings.ToLower(v) {
		case "none":
			b.CookieSameSite = "None"
		case "lax":
			b.CookieSameSite = "Lax"
		case "strict":
			b.CookieSameSite = "Strict"
		default:
			t.warnIgnored(AnnotationSessionCookieSameSite, raw, "None, Lax or Strict")
		}
	}
	b.CookieSameSiteNoneConditional, _ = t.warnBool(AnnotationSessionCookieConditionalSSN)
	b.CookieChangeOnFailure, _ = t.warnBool(AnnotationSessionCookieChangeOnFailure)
	b.CookieSecure, _ = t.warnBool(AnnotationSessionCookieSecure)
	for _, f := range []struct {
		key string
		to  *string
	}{{AnnotationSessionCookieExpires, &b.CookieExpires}, {AnnotationSessionCookieMaxAge, &b.CookieMaxAge}} {
		raw, v, ok := trimmed(f.key)
		if !ok {
			continue
		}
		if n, err := parseDigits(v); err != nil || n > maxCookieSeconds {
			t.warnIgnored(f.key, raw, "whole seconds up to 2147483647")
		} else {
			*f.to = strconv.FormatInt(n, 10)
		}
	}
	if b.CookiePersistent {
		// A secret of the Ingress that clients do not know (its UID), so that a cookie's token cannot be
		// matched to an endpoint address by trying addresses; the same in every replica and after restarts.
		sum := sha256.Sum256([]byte("ingress-reactor affinity\x00" + t.ing.Namespace + "/" + t.ing.Name + "\x00" + string(t.ing.UID)))
		b.CookieKey = hex.EncodeToString(sum[:16])
	}
}

// onlyWith reports each of keys that the Ingress has as without effect, because what (an annotation
// and value) is missing.
func (t *translator) onlyWith(what string, keys ...string) {
	for _, k := range keys {
		if _, ok := t.ing.Annotations[k]; ok {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has an effect only with %s; ignored", k, what))
		}
	}
}

// warnBool parses a boolean annotation whose invalid value is ignored with a Warning; ok is false
// when it is absent or invalid.
func (t *translator) warnBool(key string) (value, ok bool) {
	raw, present := t.ing.Annotations[key]
	if !present {
		return false, false
	}
	v, err := strconv.ParseBool(strings.TrimSpace(raw))
	if err != nil {
		t.warnIgnored(key, raw, `a boolean ("true" or "false")`)
		return false, false
	}
	return v, true
}

// isTrue reports values that parse as boolean true.
func isTrue(v string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && b
}

// hashExpressionProblem says what is wrong with an upstream-hash-by expression, or "".
func hashExpressionProblem(expr string) string {
	if len(expr) > maxHashExpression {
		return "longer than 256 bytes"
	}
	vars := 0
	for rest := expr; rest != ""; {
		if m := hashVariable.FindString(rest); m != "" {
			name := strings.ToLower(strings.Trim(m[1:], "{}"))
			if !hashVariableAllowed(name) {
				return "$" + name + " is not a variable an expression may use"
			}
			vars++
			rest = rest[len(m):]
			continue
		}
		if m := hashLiteral.FindString(rest); m != "" {
			rest = rest[len(m):]
			continue
		}
		return fmt.Sprintf("%q is neither a variable nor text of letters, digits, -, _, ., :, /", rest[:1])
	}
	if vars == 0 {
		return "no variable (every request would go to the same endpoint)"
	}
	return ""
}

// hashVariableAllowed reports whether an expression may name variable name (lower case).
func hashVariableAllowed(name string) bool {
	for _, v := range hashVariables {
		if name == v {
			return true
		}
	}
	for _, p := range hashPrefixes {
		if rest, ok := strings.CutPrefix(name, p); ok && rest != "" {
			return true
		}
	}
	return false
}

// appendBalanceOptions writes location l's balancing settings (appendBalance).
func appendBalanceOptions(b []byte, l *Location) []byte {
	if l.Options == nil {
		return b
	}
	return appendBalance(b, &l.Options.Balance, l)
}

// appendBalance writes balancing settings bo of location l: "balance" as {"lb"}, {"hash", "subset"} or
// {"cookie": {...}}, whose path is the location's unless set (or "/" for a regex path); nothing for
// round robin.
func appendBalance(b []byte, bo *BalanceOptions, l *Location) []byte {
	if *bo == (BalanceOptions{}) {
		return b
	}
	o := l.Options
	b = append(b, `,"balance":{`...)
	switch {
	case bo.Affinity:
		path := bo.CookiePath
		if path == "" {
			path = l.Path
			if o.regexPath(l.Path) || strings.ContainsAny(path, ";,") || !printableASCII(path) {
				path = "/"
			}
		}
		b = append(b, `"cookie":{"name":`...)
		b = appendJSONString(b, bo.CookieName)
		b = append(b, `,"path":`...)
		b = appendJSONString(b, path)
		if bo.CookieDomain != "" {
			b = append(b, `,"domain":`...)
			b = appendJSONString(b, bo.CookieDomain)
		}
		if bo.CookieSameSite != "" {
			b = append(b, `,"samesite":"`...)
			b = append(b, bo.CookieSameSite...)
			b = append(b, '"')
		}
		if bo.CookieSameSiteNoneConditional {
			b = append(b, `,"samesite_none_conditional":true`...)
		}
		if bo.CookieExpires != "" {
			b = append(b, `,"expires":`...)
			b = append(b, bo.CookieExpires...)
		}
		if bo.CookieMaxAge != "" {
			b = append(b, `,"max_age":`...)
			b = append(b, bo.CookieMaxAge...)
		}
		if bo.CookieSecure {
			b = append(b, `,"secure":true`...)
		}
		if bo.CookieChangeOnFailure {
			b = append(b, `,"change_on_failure":true`...)
		}
		if bo.CookiePersistent {
			b = append(b, `,"persistent":true,"key":"`...)
			b = append(b, bo.CookieKey...)
			b = append(b, '"')
		}
		b = append(b, '}')
	case bo.HashBy != "":
		b = append(b, `"hash":`...)
		b = appendJSONString(b, bo.HashBy)
		if bo.HashSubsetSize > 0 {
			b = append(b, `,"subset":`...)
			b = strconv.AppendInt(b, int64(bo.HashSubsetSize), 10)
		}
	default:
		b = append(b, `"lb":"ewma"`...)
	}
	return append(b, '}')
}
