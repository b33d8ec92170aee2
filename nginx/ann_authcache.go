package nginx

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// External auth's answer cache (auth-cache-key, auth-cache-duration; read by applyExtAuth): the internal
// location that calls the auth service caches its answers with proxy_cache in one zone that the http
// block declares while some profile uses it.
const (
	AnnotationAuthCacheKey      = IngressNginxPrefix + "auth-cache-key"
	AnnotationAuthCacheDuration = IngressNginxPrefix + "auth-cache-duration"
)

// Bounds and defaults of the auth cache.
const (
	maxAuthCacheKey = 256
	// defaultAuthCacheDuration is ingress-nginx's default.
	defaultAuthCacheDuration = "200 202 401 5m"
	maxAuthCacheDurations    = 16
	// maxAuthCacheSeconds bounds each duration: a year.
	maxAuthCacheSeconds = 365 * 24 * 3600
	// authCacheZone is the zone's name; AuthCacheDir its directory under the prefix.
	authCacheZone = "ingress_reactor_auth_cache"
)

// authCacheSpecs are the group's specs, registered with external auth's group.
func authCacheSpecs() []AnnotationSpec {
	spec := func(name, values, def, diff string) AnnotationSpec {
		return AnnotationSpec{Name: name, Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values: values, Default: def, Difference: diff}
	}
	return []AnnotationSpec{
		spec("auth-cache-key", "NGINX variables and the characters `A-Z a-z 0-9 - _` between them (ingress-nginx's characters), "+
			"e.g. `$remote_user$http_authorization`; the variables: `$http_<name>`, `$cookie_<name>`, `$arg_<name>`, `$host`, "+
			"`$remote_user`, `$remote_addr`, `$request_uri`, `$uri`, `$args`, `$request_method`, `$scheme`, `$ssl_client_s_dn`, "+
			"`$ssl_client_serial`, `$ssl_client_fingerprint`, `$ssl_client_verify` (also as `${name}`); at most 256 bytes",
			"none: the auth service is asked for every request",
			"As ingress-nginx: the auth service's answers are cached (`proxy_cache`) under this key, per profile (auth "+
				"configuration), per request host and per path of the Ingress (ingress-nginx's location), for `auth-cache-duration`; requests with the same key get the same answer "+
				"without asking the service, so the key must hold what the service decides by (the credentials: "+
				"`$http_authorization`, a session `$cookie_...`). As in NGINX, an answer with `Set-Cookie`, or whose "+
				"`Cache-Control`/`Expires` forbid it, is not cached. The zone (10 MiB of keys, at most 128 MiB of answers on disk "+
				"under the prefix's `tmp/auth-cache`, entries unused for 30 minutes dropped) is declared while some Ingress uses it, "+
				"so the first such Ingress reloads NGINX (a profile setting anyway). **Differences, on purpose:** only the listed "+
				"variables (ingress-nginx accepted any, and wrote the key into nginx.conf); the key is written anew from its "+
				"parsed parts. An invalid key **rejects the Ingress**; without `auth-url` it is ignored with a Warning."),
		spec("auth-cache-duration", "comma-separated entries of HTTP status codes (100-599) or `any`, followed by one time with its unit "+
			"(`s`, `m`, `h`, `d`, `w`, `M`, `y`; at most a year; NGINX refuses `ms` here), e.g. `200 202 10m, 401 5m`; at most 16 entries",
			"`200 202 401 5m`",
			"As ingress-nginx: one `proxy_cache_valid` per entry; an entry without codes caches 200, 301 and 302, as NGINX "+
				"does. Without `auth-cache-key` it is ignored with a Warning. An invalid value **rejects the Ingress** "+
				"(ingress-nginx denied the location)."),
	}
}

var (
	// authCacheCode: a status code, or NGINX's "any" (which ingress-nginx passed on).
	authCacheCode = regexp.MustCompile(`^([1-5][0-9]{2}|any)$`)
	// authCacheTime: proxy_cache_valid reads its time in seconds, so NGINX refuses "ms" there.
	authCacheTime = regexp.MustCompile(`^([0-9]{1,9})(s|m|h|d|w|M|y)$`)
	// authCacheKeyChars are ingress-nginx's characters of auth-cache-key.
	authCacheKeyChars = regexp.MustCompile(`^[A-Za-z0-9_${}-]+$`)
	// authCacheKeyToken is what proxy_cache_key gets: braced variables and literal characters, unquoted.
	authCacheKeyToken = regexp.MustCompile(`^(\$\{[a-z0-9_]+\}|[A-Za-z0-9_:-])+$`)
	authCacheVarName  = regexp.MustCompile(`^((http|cookie|arg)_[a-z0-9_]+|host|remote_user|remote_addr|request_uri|uri|args|request_method|scheme|ssl_client_s_dn|ssl_client_serial|ssl_client_fingerprint|ssl_client_verify)$`)
	authCacheUnitSec  = map[string]int64{"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "M": 30 * 86400, "y": 365 * 86400}
)

// applyAuthCache reads auth-cache-key and auth-cache-duration into p (which has an auth-url).
func (t *translator) applyAuthCache(p *ProfileSettings) {
	a := t.ing.Annotations
	rawKey, hasKey := a[AnnotationAuthCacheKey]
	rawDur, hasDur := a[AnnotationAuthCacheDuration]
	if !hasKey {
		if hasDur {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: applies only with %s; ignored", AnnotationAuthCacheDuration, AnnotationAuthCacheKey))
		}
		return
	}
	key, why := parseAuthCacheKey(strings.TrimSpace(rawKey))
	if why != "" {
		t.fail("metadata.annotations[%s]: %s %s", AnnotationAuthCacheKey, quoteValue(rawKey), why)
		return
	}
	durations := defaultAuthCacheDuration
	if hasDur {
		var why string
		if durations, why = parseAuthCacheDurations(rawDur); why != "" {
			t.fail("metadata.annotations[%s]: %s", AnnotationAuthCacheDuration, why)
			return
		}
	}
	p.AuthCacheKey = key
	p.AuthCacheDuration = durations
}

// parseAuthCacheDurations returns the proxy_cache_valid entries of an auth-cache-duration value,
// comma-separated (the default for a value without entries), or why it is not accepted.
func parseAuthCacheDurations(raw string) (string, string) {
	if strings.Trim(raw, " ,") == "" {
		return defaultAuthCacheDuration, ""
	}
	var durations []string
	for entry := range strings.SplitSeq(raw, ",") {
		entry = strings.Join(strings.Fields(entry), " ")
		if entry == "" {
			continue
		}
		if why := checkAuthCacheDuration(entry); why != "" {
			return "", fmt.Sprintf("entry %s %s", quoteValue(entry), why)
		}
		durations = append(durations, entry)
	}
	if len(durations) > maxAuthCacheDurations {
		return "", fmt.Sprintf("%d entries, at most %d", len(durations), maxAuthCacheDurations)
	}
	return strings.Join(durations, ","), ""
}

// parseAuthCacheKey returns the key with every variable braced ("${remote_user}${http_authorization}"),
// or why it is not accepted.
func parseAuthCacheKey(s string) (string, string) {
	if s == "" || len(s) > maxAuthCacheKey || !authCacheKeyChars.MatchString(s) {
		return "", fmt.Sprintf("is not NGINX variables and the characters A-Z a-z 0-9 - _ (at most %d bytes)", maxAuthCacheKey)
	}
	var b strings.Builder
	for s != "" {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			i = len(s)
		}
		if strings.ContainsAny(s[:i], "{}") {
			return "", "has a brace outside ${name}"
		}
		b.WriteString(s[:i])
		s = s[i:]
		if s == "" {
			break
		}
		s = s[1:]
		var name string
		if strings.HasPrefix(s, "{") {
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return "", "has an unclosed ${"
			}
			name, s = s[1:end], s[end+1:]
		} else {
			n := 0
			for n < len(s) && (s[n] == '_' || 'a' <= s[n] && s[n] <= 'z' || 'A' <= s[n] && s[n] <= 'Z' || '0' <= s[n] && s[n] <= '9') {
				n++
			}
			name, s = s[:n], s[n:]
		}
		if !authCacheVarName.MatchString(name) {
			return "", fmt.Sprintf("names the variable %s, which is not one of $http_<name>, $cookie_<name>, $arg_<name>, $host, $remote_user, "+
				"$remote_addr, $request_uri, $uri, $args, $request_method, $scheme, $ssl_client_s_dn, $ssl_client_serial, "+
				"$ssl_client_fingerprint, $ssl_client_verify (in lower case)", quoteValue("$"+name))
		}
		b.WriteString("${" + name + "}")
	}
	return b.String(), ""
}

// checkAuthCacheDuration says why entry ("200 202 5m", single spaces) is not one proxy_cache_valid, or "".
func checkAuthCacheDuration(entry string) string {
	f := strings.Fields(entry)
	m := authCacheTime.FindStringSubmatch(f[len(f)-1])
	if m == nil {
		return "does not end in a time with its unit (s, m, h, d, w, M, y), as in \"200 202 10m\""
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	if n*authCacheUnitSec[m[2]] > maxAuthCacheSeconds {
		return "is longer than a year"
	}
	for _, c := range f[:len(f)-1] {
		if !authCacheCode.MatchString(c) {
			return fmt.Sprintf("has %s, which is not an HTTP status code (100-599) or \"any\"", quoteValue(c))
		}
	}
	return ""
}

// authCacheDirectives are the directives that cache the answers of p's auth service, in its internal
// location; none without auth-cache-key.
func (p ProfileSettings) authCacheDirectives() []string {
	if p.AuthCacheKey == "" {
		return nil
	}
	// Per request host, per profile (each auth configuration has its own answers) and per route (the
	// router sets its path: as ingress-nginx's key per location, an answer for one path never admits a
	// request for another), then the user's key.
	key := "${host}:" + p.Name() + ":${ingress_reactor_auth_route}:" + p.AuthCacheKey
	if !authCacheKeyToken.MatchString(key) {
		key = `"" invalid` // the parser made this impossible; nginx -t quarantines the profile
	}
	out := []string{"proxy_cache " + authCacheZone, "proxy_cache_key " + key, "proxy_buffering on"}
	for d := range strings.SplitSeq(p.AuthCacheDuration, ",") {
		if checkAuthCacheDuration(d) != "" {
			d = `"" invalid`
		}
		out = append(out, "proxy_cache_valid "+d)
	}
	return out
}

// AuthCacheDir is the directory of external auth's answer cache.
func (p Paths) AuthCacheDir() string { return filepath.Join(p.TempDir(), "auth-cache") }

// usesAuthCache reports whether a profile of m caches auth answers, so that the http block declares the zone.
func (m *Model) usesAuthCache() bool {
	for _, p := range m.Profiles {
		if p.AuthCacheKey != "" {
			return true
		}
	}
	return false
}
