package nginx

import "fmt"

// The ConfigMap's redirect key (issue #18).

// RedirectSettings are the ConfigMap's redirect keys.
type RedirectSettings struct {
	// Code answers plain HTTP that must go to HTTPS (ssl-redirect, force-ssl-redirect) and requests for a
	// www twin (from-to-www-redirect): http-redirect-code.
	Code int
}

func init() {
	registerSettings(settingKey{Name: "http-redirect-code", Default: "308", Values: "`301`, `302`, `307` or `308`",
		Doc: "The status of redirects from HTTP to HTTPS (ssl-redirect, force-ssl-redirect) and of from-to-www-redirect.",
		set: settingsField(func(s *Settings) *int { return &s.Redirects.Code }, func(v string) (int, error) {
			switch v {
			case "301", "302", "307", "308":
				var n int
				_, _ = fmt.Sscan(v, &n)
				return n, nil
			}
			return 0, fmt.Errorf("want 301, 302, 307 or 308")
		})})
}
