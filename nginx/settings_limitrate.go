package nginx

import "fmt"

// The ConfigMap's limit-rate and limit-rate-after (issue #18): the defaults of the annotations of those
// names, as route data.

// LimitRateSettings are the defaults of limit-rate and limit-rate-after, in bytes (0: none).
type LimitRateSettings struct {
	Rate, After int64
}

// parseLimitRateSetting takes kilobytes as a whole number, as ingress-nginx, or an NGINX size.
func parseLimitRateSetting(v string) (int64, error) {
	if n, err := parseDigits(v); err == nil {
		if n > maxLimitRate>>10 {
			return 0, fmt.Errorf("at most %d kilobytes", maxLimitRate>>10)
		}
		return n << 10, nil
	}
	n, err := parseNginxSize(v)
	if err != nil || n > maxLimitRate {
		return 0, fmt.Errorf("want a number of kilobytes, or an NGINX size such as 1m, up to 1024g")
	}
	return n, nil
}

func init() {
	registerSettings(
		settingKey{Name: "limit-rate", Default: "0", Values: "kilobytes per second as a whole number, or an NGINX size per second (`1m`); `0` for no limit",
			Doc: "The limit-rate of the Ingresses without that annotation (route data: see limit-rate in docs/annotations.md).",
			Difference: "Like the annotation, it takes effect only for responses NGINX buffers (proxy-buffering on), never for gRPC backends; " +
				"no Warning is given for the routes it cannot limit.",
			set: settingsField(func(s *Settings) *int64 { return &s.LimitRate.Rate }, parseLimitRateSetting)},
		settingKey{Name: "limit-rate-after", Default: "0", Values: "kilobytes as a whole number, or an NGINX size (`1m`)",
			Doc:        "The limit-rate-after of the routes whose limit-rate (annotation or ConfigMap) applies without a limit-rate-after annotation.",
			Difference: "An Ingress's limit-rate-after annotation counts only with its own limit-rate annotation, as before.",
			set:        settingsField(func(s *Settings) *int64 { return &s.LimitRate.After }, parseLimitRateSetting)},
	)
}

// limitRateDefault applies the ConfigMap's limit-rate and limit-rate-after where the Ingress's
// annotations leave them unset.
func (t *translator) limitRateDefault() {
	_, rateSet := t.ing.Annotations[AnnotationLimitRate]
	_, afterSet := t.ing.Annotations[AnnotationLimitRateAfter]
	switch {
	case !rateSet && t.opts.LimitRate > 0:
		o := t.options()
		o.LimitRate, o.LimitRateAfter = t.opts.LimitRate, t.opts.LimitRateAfter
	case rateSet && !afterSet && t.out.Options != nil && t.out.Options.LimitRate > 0:
		t.out.Options.LimitRateAfter = t.opts.LimitRateAfter
	}
}
