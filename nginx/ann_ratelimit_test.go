package nginx

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestAnnotationRateLimits: rate limit annotations -> the translation's route options, its warnings, or
// the exact rejection.
func TestAnnotationRateLimits(t *testing.T) {
	const (
		notNumber = `metadata.annotations[nginx.ingress.kubernetes.io/%s]: %s is not a whole number from 0 to 1000000000`
		noLimit   = `metadata.annotations: %s: no effect without nginx.ingress.kubernetes.io/limit-rps, nginx.ingress.kubernetes.io/limit-rpm or nginx.ingress.kubernetes.io/limit-connections`
	)
	// The zone of translateAnnotated's Ingress default/a (no UID).
	const zone = "a26886d5c78f0234"
	limits := func(l RateLimits) *RouteOptions {
		l.Zone = zone
		return &RouteOptions{Limits: l}
	}
	tests := map[string]struct {
		kv       []string
		want     *RouteOptions
		warnings []string
		errs     []string
	}{
		"limit-rps with the default multiplier": {kv: []string{AnnotationLimitRPS, "10"}, want: limits(RateLimits{RPS: 10, BurstMultiplier: 5})},
		"every limit": {
			kv:   []string{AnnotationLimitRPS, " 2", AnnotationLimitRPM, "30 ", AnnotationLimitConnections, "4", AnnotationLimitBurstMultiplier, "1"},
			want: limits(RateLimits{RPS: 2, RPM: 30, Connections: 4, BurstMultiplier: 1}),
		},
		"0 limits nothing": {kv: []string{AnnotationLimitRPS, "0"}},
		"limit-whitelist: canonical wire ranges": {
			kv:   []string{AnnotationLimitRPM, "60", AnnotationLimitWhitelist, "192.0.2.7, 10.0.0.0/8,::1"},
			want: limits(RateLimits{RPM: 60, BurstMultiplier: 5, Allowlist: "0a000000/8,c0000207/32,00000000000000000000000000000001/128"}),
		},
		"limit-allowlist wins over limit-whitelist": {
			kv:       []string{AnnotationLimitConnections, "3", AnnotationLimitAllowlist, "127.0.0.1", AnnotationLimitWhitelist, "10.0.0.0/8"},
			want:     limits(RateLimits{Connections: 3, BurstMultiplier: 5, Allowlist: "7f000001/32"}),
			warnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/limit-whitelist]: ignored, because nginx.ingress.kubernetes.io/limit-allowlist (its newer name) is set too and wins, as in ingress-nginx"},
		},
		"a multiplier without a rate": {
			kv:       []string{AnnotationLimitConnections, "3", AnnotationLimitBurstMultiplier, "2"},
			want:     limits(RateLimits{Connections: 3, BurstMultiplier: 2}),
			warnings: []string{"metadata.annotations[nginx.ingress.kubernetes.io/limit-burst-multiplier]: no effect without nginx.ingress.kubernetes.io/limit-rps or nginx.ingress.kubernetes.io/limit-rpm"},
		},
		"an allowlist without a limit": {
			kv:       []string{AnnotationLimitWhitelist, "10.0.0.0/8", AnnotationLimitBurstMultiplier, "2"},
			warnings: []string{fmtErr(noLimit, "nginx.ingress.kubernetes.io/limit-burst-multiplier, nginx.ingress.kubernetes.io/limit-whitelist")},
		},
		"not numbers, all reported": {
			kv: []string{AnnotationLimitRPS, "1.5", AnnotationLimitRPM, "-1", AnnotationLimitConnections, "1e3", AnnotationLimitBurstMultiplier, "1000000001"},
			errs: []string{fmtErr(notNumber, "limit-rps", `"1.5"`), fmtErr(notNumber, "limit-rpm", `"-1"`), fmtErr(notNumber, "limit-connections", `"1e3"`),
				fmtErr(notNumber, "limit-burst-multiplier", `"1000000001"`)},
		},
		"an invalid multiplier is not replaced by the default": {
			kv:   []string{AnnotationLimitRPS, "5", AnnotationLimitBurstMultiplier, "five"},
			errs: []string{fmtErr(notNumber, "limit-burst-multiplier", `"five"`)},
		},
		"an allowlist entry that is no range": {
			kv:   []string{AnnotationLimitRPS, "5", AnnotationLimitWhitelist, "10.0.0.0/8;allow all"},
			errs: []string{`metadata.annotations[nginx.ingress.kubernetes.io/limit-whitelist]: entry "10.0.0.0/8;allow all" is not an IP address or a CIDR range (for example 192.0.2.7, 10.0.0.0/8 or 2001:db8::/32)`},
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

// TestRateLimitZones: each Ingress has counters of its own; a recreated one (another UID) starts afresh.
func TestRateLimitZones(t *testing.T) {
	zoneOf := func(ns, name, uid string) string {
		t.Helper()
		ing := ingress(ns, name, rule("a.example.com", prefix("/", "web", 80)), annotate(AnnotationLimitRPS, "1"))
		ing.UID = types.UID(uid)
		got, err := TranslateIngress(ing, servicesOf(service(ns, "web", port(80, "http"))), DefaultTranslateOptions())
		if err != nil {
			t.Fatal(err)
		}
		return got.Options.Limits.Zone
	}
	a := zoneOf("default", "a", "1")
	for what, z := range map[string]string{"another name": zoneOf("default", "b", "1"), "another namespace": zoneOf("other", "a", "1"),
		"another UID": zoneOf("default", "a", "2")} {
		if z == a {
			t.Errorf("%s: the same zone %s", what, z)
		}
	}
	if zoneOf("default", "a", "1") != a {
		t.Error("the same Ingress got another zone")
	}
}

// TestRateLimitWire: the limit options' form in the routes push.
func TestRateLimitWire(t *testing.T) {
	tests := map[string]struct {
		l    RateLimits
		want string
	}{
		"none":          {l: RateLimits{Zone: "ab", BurstMultiplier: 5}, want: ``},
		"rps, burst 5×": {l: RateLimits{Zone: "ab", RPS: 3, BurstMultiplier: 5}, want: `,"limit":{"zone":"ab","rps":3,"rps_burst":15}`},
		"multiplier 0: no burst, connections and an allowlist": {
			l:    RateLimits{Zone: "ab", RPM: 10, Connections: 2, Allowlist: "7f000001/32,0a000000/8"},
			want: `,"limit":{"zone":"ab","rpm":10,"conn":2,"allow":["7f000001/32","0a000000/8"]}`,
		},
		"bursts are bounded": {
			l:    RateLimits{Zone: "ab", RPS: maxLimit, RPM: 2, BurstMultiplier: maxLimit},
			want: `,"limit":{"zone":"ab","rps":1000000000,"rps_burst":1000000000,"rpm":2,"rpm_burst":1000000000}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := string(appendLimitOptions(nil, &RouteOptions{Limits: tc.l}))
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if got != "" && !json.Valid([]byte("{"+got[1:]+"}")) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}
