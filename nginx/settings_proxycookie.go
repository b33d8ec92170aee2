package nginx

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// The ConfigMap's defaults of the proxy-cookie-domain and proxy-cookie-path annotations: http-level
// directives, which a profile with the annotation replaces (NGINX drops inherited proxy_cookie_* lines in a
// location that has its own).

func init() {
	registerSettings(
		settingKey{Name: "proxy-cookie-domain", Default: "off", Values: "`off`, or a domain and its replacement separated by a space",
			Doc: "The default of the proxy-cookie-domain annotation: rewrites the Domain attribute of the backends' Set-Cookie headers.",
			set: settingsField(func(s *Settings) *string { return &s.ProxyCookieDomain }, func(v string) (string, error) {
				return parseCookieRewrite(v, cookieDomain, "a domain")
			})},
		settingKey{Name: "proxy-cookie-path", Default: "off", Values: "`off`, or a path and its replacement separated by a space",
			Doc:        "The default of the proxy-cookie-path annotation: rewrites the Path attribute of the backends' Set-Cookie headers.",
			Difference: "Paths are literal (letters, digits and `._~/-`): the regular expressions NGINX would take are refused, as for the annotation.",
			set: settingsField(func(s *Settings) *string { return &s.ProxyCookiePath }, func(v string) (string, error) {
				return parseCookieRewrite(v, cookiePath, "a path")
			})},
	)
}

// parseCookieRewrite parses "off" ("") or "<from> <to>", both matching valid, into quoted directive arguments.
func parseCookieRewrite(v string, valid *regexp.Regexp, what string) (string, error) {
	if strings.ContainsFunc(v, unicode.IsControl) {
		return "", fmt.Errorf("want off, or %s and its replacement, without control characters", what)
	}
	f := strings.Fields(v)
	if len(f) == 1 && f[0] == "off" {
		return "", nil
	}
	if len(f) != 2 || !valid.MatchString(f[0]) || !valid.MatchString(f[1]) {
		return "", fmt.Errorf("want off, or %s and its replacement", what)
	}
	q, ok := quoteArgs(f...)
	if !ok {
		return "", fmt.Errorf("want off, or %s and its replacement", what)
	}
	return q, nil
}
