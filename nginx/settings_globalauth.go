package nginx

import (
	"fmt"
	"slices"
	"strings"
)

// Global external authentication (the ConfigMap's global-auth-* keys and no-auth-locations): the
// external auth of every Ingress that has no auth-url of its own and does not set enable-global-auth
// "false" (ann_globalauth.go applies it). The values are parsed by the auth-url group's parsers, so
// they are exactly what the annotations accept.

// GlobalAuth is the global external authentication. It is comparable (it travels in TranslateOptions);
// every field is validated by its key's parser, empty when the key is not set.
type GlobalAuth struct {
	// URL is the auth service (global-auth-url) as parseAuthURL returns it; empty: no global auth.
	URL string
	// Method, Signin (as written, variables checked), SigninRedirectParam ("rd" by default),
	// ResponseHeaders (comma-separated names), RequestRedirect, CacheKey (braced variables) and
	// CacheDuration (comma-separated proxy_cache_valid entries) are those of the annotations without
	// "global-".
	Method, Signin, SigninRedirectParam string
	ResponseHeaders, RequestRedirect    string
	CacheKey, CacheDuration             string
	// NoAuthLocations are the path prefixes whose routes the global auth skips, comma-separated.
	NoAuthLocations string
	// Invalid names the keys (comma-separated, sorted) whose value was refused with no last good value
	// to keep: the Ingresses that would use the global auth are rejected rather than served without it
	// or with a part of it missing.
	Invalid string
}

// maxNoAuthLocations bounds no-auth-locations.
const maxNoAuthLocations = 64

func init() {
	const same = "Parsed and checked exactly as the annotation `%s` (see docs/annotations.md); an Ingress with its own `auth-url` uses " +
		"its own settings and none of these. "
	const closed = "An invalid value is a Warning on the ConfigMap and its last good value stays applied; with no good value to keep " +
		"(an invalid value at the controller's start), **every Ingress that would use the global auth is rejected** (Warning Event), " +
		"rather than served without authentication or with a part of it missing: ingress-nginx logged the error and served them."
	const keeps = "An invalid value is a Warning on the ConfigMap and its last good value stays applied, else the default."
	key := func(name, def, values, doc, diff string, set func(*GlobalAuth, string) error) settingKey {
		return settingKey{Name: name, Default: def, Values: values, Doc: doc, Difference: diff,
			set: func(s *Settings, v string) error {
				err := set(&s.GlobalAuth, v)
				s.GlobalAuth.markInvalid(name, err != nil)
				return err
			}}
	}
	registerSettings(
		key("global-auth-url", "", "an absolute `http://` or `https://` URL, as the annotation `auth-url` accepts (its `$host` form included)",
			"The external auth service of every Ingress without an `auth-url` of its own and without `enable-global-auth: \"false\"`, "+
				"except for the paths listed in `no-auth-locations`. It works as `auth-url`: a **profile setting**, so all those Ingresses share "+
				"one named location (one per distinct combination with their other profile annotations), and the first setting or change "+
				"reloads NGINX once. Empty: no global authentication.",
			fmt.Sprintf(same, "auth-url")+"An Ingress whose `auth-url` has the `$host` form and serves the auth service itself (oauth2-proxy's "+
				"`/oauth2`) must set `enable-global-auth: \"false\"` (or have its path in `no-auth-locations`), as in ingress-nginx. "+
				"As for `auth-url`, a host name is resolved when NGINX loads its configuration: one that does not resolve takes every "+
				"Ingress that uses the global auth out of service (closed, never open). "+closed,
			func(g *GlobalAuth, v string) error {
				g.URL = ""
				if v == "" {
					return nil
				}
				u, ok := parseAuthURL(v)
				if !ok {
					return fmt.Errorf("%s", authURLWant)
				}
				g.URL = u
				return nil
			}),
		key("global-auth-method", "", "`GET`, `HEAD`, `POST`, `PUT`, `PATCH`, `DELETE`, `CONNECT`, `OPTIONS` or `TRACE`",
			"The method of the global auth request (`auth-method`); empty: the request's own.", fmt.Sprintf(same, "auth-method")+closed,
			func(g *GlobalAuth, v string) error {
				g.Method = ""
				if v != "" && !slices.Contains(authMethods, v) {
					return fmt.Errorf("want one of %s", strings.Join(authMethods, ", "))
				}
				g.Method = v
				return nil
			}),
		key("global-auth-signin", "", "a URL as the annotation `auth-signin` accepts, with the same variables",
			"Where a 401 of the global auth service redirects (`auth-signin`); empty: the 401 reaches the client.",
			fmt.Sprintf(same, "auth-signin")+closed,
			func(g *GlobalAuth, v string) error {
				g.Signin = ""
				if v == "" {
					return nil
				}
				checked, ok := signinStructure(v)
				if !ok {
					return fmt.Errorf("names an NGINX variable other than %s", signinVariableList())
				}
				if _, ok := normalizeAuthURL(checked); !ok {
					return fmt.Errorf("%s", authURLWant)
				}
				g.Signin = v
				return nil
			}),
		key("global-auth-signin-redirect-param", "rd", "a query parameter name: letters, digits, `-`, `_` and `.`",
			"The query parameter of `global-auth-signin` that gets the request's URL (`auth-signin-redirect-param`).",
			fmt.Sprintf(same, "auth-signin-redirect-param")+keeps,
			func(g *GlobalAuth, v string) error {
				if !authRedirectParam.MatchString(v) {
					return fmt.Errorf("want a query parameter name (letters, digits, -, _ and .)")
				}
				g.SigninRedirectParam = v
				return nil
			}),
		key("global-auth-response-headers", "", "a comma-separated list of header names (letters, digits, `-` and `_`), at most 32",
			"The headers of the global auth service's answer set on the request to the backend (`auth-response-headers`).",
			fmt.Sprintf(same, "auth-response-headers")+closed,
			func(g *GlobalAuth, v string) error {
				names, why := parseAuthResponseHeaders(v)
				if why != "" {
					g.ResponseHeaders = ""
					return fmt.Errorf("%s", why)
				}
				g.ResponseHeaders = names
				return nil
			}),
		key("global-auth-request-redirect", "", "a URL or path of URL characters, as `auth-request-redirect`",
			"Sent to the global auth service as `X-Auth-Request-Redirect` (`auth-request-redirect`); empty: the request's URI.",
			fmt.Sprintf(same, "auth-request-redirect")+closed,
			func(g *GlobalAuth, v string) error {
				g.RequestRedirect = ""
				if v != "" && !validAuthRequestRedirect(v) {
					return fmt.Errorf("want a URL or path of URL characters (letters, digits and -._~/?&=%%+,:@!*), at most 2048 bytes")
				}
				g.RequestRedirect = v
				return nil
			}),
		key("global-auth-cache-key", "", "as the annotation `auth-cache-key`: NGINX variables of its list and `A-Z a-z 0-9 - _`",
			"Caches the global auth service's answers under this key (`auth-cache-key`); empty: no cache.",
			fmt.Sprintf(same, "auth-cache-key")+closed,
			func(g *GlobalAuth, v string) error {
				g.CacheKey = ""
				if v == "" {
					return nil
				}
				k, why := parseAuthCacheKey(v)
				if why != "" {
					return fmt.Errorf("%s", why)
				}
				g.CacheKey = k
				return nil
			}),
		key("global-auth-cache-duration", defaultAuthCacheDuration, "as the annotation `auth-cache-duration`",
			"How long the global auth answers are cached (`auth-cache-duration`); without `global-auth-cache-key` it has no effect.",
			fmt.Sprintf(same, "auth-cache-duration")+keeps,
			func(g *GlobalAuth, v string) error {
				d, why := parseAuthCacheDurations(v)
				if why != "" {
					return fmt.Errorf("%s", why)
				}
				g.CacheDuration = d
				return nil
			}),
		key("no-auth-locations", "/.well-known/acme-challenge",
			"a comma-separated list of path prefixes, each starting with `/`, of printable ASCII without spaces, quotes, `;`, `$`, braces or `\\`; at most 64",
			"The global auth skips the routes of an Ingress whose path starts with one of these (as ingress-nginx compares them: the "+
				"Ingress's path, not the request's), so that the ACME HTTP-01 challenges of cert-manager's solver Ingresses reach it by default.",
			"On purpose: only the global auth is skipped; an Ingress's own `auth-url`, `auth-type` or client certificates "+
				"always apply (ingress-nginx also dropped an Ingress's own `auth-url` and basic auth on these paths, so a ConfigMap entry "+
				"opened paths that their owner had closed). An invalid value keeps the last good one, or the default.",
			func(g *GlobalAuth, v string) error {
				list, err := parseNoAuthLocations(v)
				if err != nil {
					return err
				}
				g.NoAuthLocations = list
				return nil
			}),
	)
}

// markInvalid records whether key's value was refused (Invalid).
func (g *GlobalAuth) markInvalid(key string, invalid bool) {
	var keys []string
	if g.Invalid != "" {
		keys = strings.Split(g.Invalid, ",")
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == key })
	if invalid {
		keys = append(keys, key)
		slices.Sort(keys)
	}
	g.Invalid = strings.Join(keys, ",")
}

// parseNoAuthLocations checks a no-auth-locations value and returns its prefixes, comma-separated.
func parseNoAuthLocations(v string) (string, error) {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !strings.HasPrefix(item, "/") || len(item) > 1024 || !printableASCII(item) || strings.ContainsAny(item, " \t\"'`;${}\\") {
			return "", fmt.Errorf("%s is not a path prefix (starting with /, printable ASCII without spaces, quotes, ';', '$', braces or '\\')", quoteValue(item))
		}
		if !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	if len(out) > maxNoAuthLocations {
		return "", fmt.Errorf("%d prefixes, at most %d", len(out), maxNoAuthLocations)
	}
	return strings.Join(out, ","), nil
}

// noAuth reports whether the global auth skips a route with this path (no-auth-locations).
func (g GlobalAuth) noAuth(path string) bool {
	if g.NoAuthLocations == "" {
		return false
	}
	for prefix := range strings.SplitSeq(g.NoAuthLocations, ",") {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}
