package nginx

import "fmt"

// The ConfigMap keys of the rate and connection limits' answers (issue #18).

// LimitSettings are the statuses of requests over the limit annotations' limits.
type LimitSettings struct {
	// ReqStatus answers requests over limit-rps and limit-rpm (limit-req-status-code); ConnStatus those over
	// limit-connections (limit-conn-status-code).
	ReqStatus, ConnStatus int
}

func limitStatusKey(name string, field func(*Settings) *int) settingKey {
	return settingKey{Name: name, Default: fmt.Sprint(LimitStatusCode), Values: "an HTTP status from 400 to 599",
		Doc: "The status of requests over the limit; the router answers it (see the limit annotations in docs/annotations.md).",
		set: intField(field, 400, 599)}
}

func init() {
	registerSettings(
		limitStatusKey("limit-req-status-code", func(s *Settings) *int { return &s.Limits.ReqStatus }),
		limitStatusKey("limit-conn-status-code", func(s *Settings) *int { return &s.Limits.ConnStatus }),
	)
}
