package nginx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The rate limit annotations of ingress-nginx (see RateLimits): route data. The Lua router counts
// requests and connections per client address in the limits shared dict (limits.lua), so a new or
// changed limit needs no reload. limit-allowlist is the newer name of limit-whitelist; when both are
// set it wins, as in ingress-nginx.
const (
	AnnotationLimitRPS             = IngressNginxPrefix + "limit-rps"
	AnnotationLimitRPM             = IngressNginxPrefix + "limit-rpm"
	AnnotationLimitConnections     = IngressNginxPrefix + "limit-connections"
	AnnotationLimitBurstMultiplier = IngressNginxPrefix + "limit-burst-multiplier"
	AnnotationLimitAllowlist       = IngressNginxPrefix + "limit-allowlist"
	AnnotationLimitWhitelist       = IngressNginxPrefix + "limit-whitelist"
)

// DefaultLimitBurstMultiplier is ingress-nginx's burst multiplier: a client may send rate times this
// many requests at once beyond its rate.
const DefaultLimitBurstMultiplier = 5

// LimitStatusCode answers requests over a limit: ingress-nginx's default of the ConfigMap's
// limit-req-status-code and limit-conn-status-code.
const LimitStatusCode = 503

// maxLimit bounds the limits, the multiplier and the bursts (a burst beyond it limits nothing anyway),
// so that every number stays exact in Lua.
const maxLimit = 1_000_000_000

// RateLimits are an Ingress's request and connection limits per client address. All its paths share
// one set of counters, as ingress-nginx's zones per Ingress did. Zero values limit nothing.
type RateLimits struct {
	// Zone names the Ingress's counters in the limits dict: a hash of its namespace, name and UID.
	Zone string
	// RPS and RPM are requests per second and per minute; each admits bursts of BurstMultiplier times
	// itself at once, like NGINX's limit_req with burst and nodelay.
	RPS, RPM        int
	BurstMultiplier int
	// Connections bounds the requests of one client in progress at once.
	Connections int
	// Allowlist holds the client ranges that are not limited, as wire prefixes ("<hex>/<bits>") joined
	// by ",".
	Allowlist string
}

// active reports whether any limit is set.
func (l *RateLimits) active() bool { return l.RPS > 0 || l.RPM > 0 || l.Connections > 0 }

func init() {
	const (
		count   = "a whole number from 0 (no limit) to 1000000000; spaces around it are trimmed"
		invalid = "An invalid value **rejects the Ingress** (its last good version keeps being served); ingress-nginx served it without its limits, which lets more through than its owner wrote."
		common  = "Counted per client address (`$binary_remote_addr`: the connection's, or the PROXY protocol's) per Ingress, all its paths together, " +
			"per controller replica, as in ingress-nginx. The counters live in NGINX's shared dict `ingress_reactor_limits` (`--limits-dict-size`), " +
			"not in a zone per Ingress, so a new or changed limit needs no reload: 16 MB by default, about 8,000 counters (client address × Ingress × limit) per MB. " +
			"When it is full, NGINX drops the least recently used counters: a client whose counter was dropped starts again with a full allowance. " +
			"The dict is shared by every Ingress (ingress-nginx had a zone per Ingress), so a flood of client addresses at one limited Ingress " +
			"can push out the counters of others and loosen their limits for a while: size the dict for the clients you expect. "
		rate = "Leaky bucket like NGINX's `limit_req` with `burst` = rate × `limit-burst-multiplier` and `nodelay`: a client may send burst + 1 requests at once, " +
			"then one per interval; the rest get the ConfigMap's `limit-req-status-code` (503 by default). " +
			"A changed rate or multiplier takes effect at once and gives every client a full allowance again (ingress-nginx kept what each had spent). "
	)
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			{
				Name: "limit-allowlist", Origin: OriginUndocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "comma-separated IPv4 and IPv6 addresses and CIDR ranges (`10.0.0.0/8, 192.0.2.7`)",
				Default: "none",
				Difference: "Clients in these ranges are not limited. The newer name of `limit-whitelist`, which ingress-nginx reads without documenting it; " +
					"when both are set it wins, with a Warning. An entry that is not an address or a range **rejects the Ingress**, as in ingress-nginx. " +
					"No effect without a limit (a Warning says so).",
			},
			{
				Name: "limit-burst-multiplier", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: "a whole number from 0 to 1000000000", Default: "`5`",
				Difference: "Applies to `limit-rps` and `limit-rpm`. An invalid value **rejects the Ingress** (its last good version keeps being served); " +
					"ingress-nginx used 5, which may let more through. No effect without a rate (a Warning says so).",
			},
			{
				Name: "limit-connections", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: count, Default: "no limit",
				Difference: common + "Requests of one client in progress at once (each HTTP/2 stream counts, as with NGINX's `limit_conn`); one more gets the ConfigMap's " +
					"`limit-conn-status-code` (503 by default). A request counts from when the router admits it until NGINX logs it, also when it fails. " + invalid,
			},
			{
				Name: "limit-rpm", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: count, Default: "no limit",
				Difference: common + rate + "With `limit-rps` too, a request must pass both, and one refused by either counts against neither. " + invalid,
			},
			{
				Name: "limit-rps", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values: count, Default: "no limit",
				Difference: common + rate + invalid,
			},
			{
				Name: "limit-whitelist", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "comma-separated IPv4 and IPv6 addresses and CIDR ranges (`10.0.0.0/8, 192.0.2.7`)",
				Default: "none",
				Difference: "Clients in these ranges are not limited. The older name of `limit-allowlist`; ignored, with a Warning, when that one is set. " +
					"An entry that is not an address or a range **rejects the Ingress**, as in ingress-nginx. The address checked is the connection's " +
					"(`X-Forwarded-For` is not trusted). No effect without a limit (a Warning says so).",
			},
		},
		apply: applyRateLimits,
	})
}

// applyRateLimits reads the rate limit annotations into the Ingress's route options.
func applyRateLimits(t *translator) {
	a := t.ing.Annotations
	l := RateLimits{BurstMultiplier: DefaultLimitBurstMultiplier}
	valid := true
	for _, f := range []struct {
		key string
		to  *int
	}{
		{AnnotationLimitRPS, &l.RPS}, {AnnotationLimitRPM, &l.RPM}, {AnnotationLimitConnections, &l.Connections},
		{AnnotationLimitBurstMultiplier, &l.BurstMultiplier},
	} {
		raw, ok := a[f.key]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || n < 0 || n > maxLimit {
			t.fail("metadata.annotations[%s]: %s is not a whole number from 0 to %d", f.key, quoteValue(raw), maxLimit)
			valid = false
			continue
		}
		*f.to = n
	}
	allow := t.prefixList(AnnotationLimitAllowlist)
	if _, ok := a[AnnotationLimitWhitelist]; ok {
		legacy := t.prefixList(AnnotationLimitWhitelist)
		if _, both := a[AnnotationLimitAllowlist]; both {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: ignored, because %s (its newer name) is set too and wins, as in ingress-nginx",
				AnnotationLimitWhitelist, AnnotationLimitAllowlist))
		} else {
			allow = legacy
		}
	}
	if !valid {
		return
	}
	if !l.active() {
		var set []string
		for _, k := range []string{AnnotationLimitAllowlist, AnnotationLimitBurstMultiplier, AnnotationLimitWhitelist} {
			if _, ok := a[k]; ok {
				set = append(set, k)
			}
		}
		if len(set) > 0 {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations: %s: no effect without %s, %s or %s",
				strings.Join(set, ", "), AnnotationLimitRPS, AnnotationLimitRPM, AnnotationLimitConnections))
		}
		return
	}
	if _, ok := a[AnnotationLimitBurstMultiplier]; ok && l.RPS == 0 && l.RPM == 0 {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: no effect without %s or %s",
			AnnotationLimitBurstMultiplier, AnnotationLimitRPS, AnnotationLimitRPM))
	}
	var wire []string
	for _, p := range allow {
		wire = append(wire, string(appendWirePrefix(nil, p)))
	}
	l.Allowlist = strings.Join(wire, ",")
	sum := sha256.Sum256([]byte(t.ing.Namespace + "/" + t.ing.Name + "/" + string(t.ing.UID)))
	l.Zone = hex.EncodeToString(sum[:8])
	t.options().Limits = l
}

// appendLimitOptions writes the rate limit group's options (ann_ratelimit.go) as
// ,"limit":{"zone":"<hex>","rps":n,"rps_burst":n,"rpm":n,"rpm_burst":n,"conn":n,"allow":["<hex>/<bits>",...]},
// leaving out zero values.
func appendLimitOptions(b []byte, o *RouteOptions) []byte {
	l := &o.Limits
	if !l.active() {
		return b
	}
	b = append(b, `,"limit":{"zone":`...)
	b = appendJSONString(b, l.Zone)
	for _, f := range []struct {
		name string
		n    int
	}{
		{"rps", l.RPS}, {"rps_burst", min(l.RPS*l.BurstMultiplier, maxLimit)}, {"rpm", l.RPM}, {"rpm_burst", min(l.RPM*l.BurstMultiplier, maxLimit)},
		{"conn", l.Connections},
	} {
		if f.n > 0 {
			b = append(b, `,"`...)
			b = append(b, f.name...)
			b = append(b, `":`...)
			b = strconv.AppendInt(b, int64(f.n), 10)
		}
	}
	if l.Allowlist != "" {
		b = append(b, `,"allow":[`...)
		for i, p := range strings.Split(l.Allowlist, ",") {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}
