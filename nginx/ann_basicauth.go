package nginx

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Basic authentication (auth-type, auth-secret, auth-secret-type, auth-realm): the Lua router checks
// the Authorization header of each request against the users of a Secret, which travel in the routes
// push (lua/ingress_reactor/auth.lua verifies the hashes). No file is written and no change reloads.
const (
	AnnotationAuthType       = IngressNginxPrefix + "auth-type"
	AnnotationAuthSecret     = IngressNginxPrefix + "auth-secret"
	AnnotationAuthSecretType = IngressNginxPrefix + "auth-secret-type"
	AnnotationAuthRealm      = IngressNginxPrefix + "auth-realm"
)

// authFileKey is the Secret's key that holds the htpasswd lines with auth-secret-type auth-file.
const authFileKey = "auth"

// Bounds of basic authentication.
const (
	// maxAuthUsersBytes bounds the user list of one Secret as it travels ("user:hash" lines).
	maxAuthUsersBytes = 64 << 10
	// maxAuthUsersPushBytes bounds the user list times the hosts of the Ingress: the list travels once
	// per host entry of the routes push (shared by the host's routes), and the routes dict is shared by
	// every host.
	maxAuthUsersPushBytes = 256 << 10
	maxAuthUser           = 256
	maxAuthHash           = 512
	maxAuthRealm          = 256
)

// authHashFormats are the hash formats that NGINX's auth_basic accepts and that the router verifies:
// NGINX's own ({PLAIN}, {SHA}, {SSHA}, $apr1$) and those of crypt(3) in Debian's libcrypt (libxcrypt).
var authHashFormats = []struct {
	prefix string
	re     *regexp.Regexp
}{
	{"{PLAIN}", regexp.MustCompile(`^\{PLAIN\}[\x21-\x7e]*$`)},
	{"{SHA}", regexp.MustCompile(`^\{SHA\}[A-Za-z0-9+/]{27}=$`)},
	{"{SSHA}", regexp.MustCompile(`^\{SSHA\}[A-Za-z0-9+/]{28,}={0,2}$`)},
	{"$apr1$", regexp.MustCompile(`^\$apr1\$[^$:\s]{1,8}\$[./0-9A-Za-z]{22}$`)},
	{"$1$", regexp.MustCompile(`^\$1\$[^$:\s]{1,8}\$[./0-9A-Za-z]{22}$`)},
	{"$5$", regexp.MustCompile(`^\$5\$(rounds=[0-9]{1,9}\$)?[^$:\s]{1,16}\$[./0-9A-Za-z]{43}$`)},
	{"$6$", regexp.MustCompile(`^\$6\$(rounds=[0-9]{1,9}\$)?[^$:\s]{1,16}\$[./0-9A-Za-z]{86}$`)},
	{"$2", regexp.MustCompile(`^\$2[abxy]\$[0-9]{2}\$[./0-9A-Za-z]{53}$`)},
	{"$y$", regexp.MustCompile(`^\$y\$[./0-9A-Za-z]+\$[./0-9A-Za-z]+\$[./0-9A-Za-z]{43}$`)},
	{"$gy$", regexp.MustCompile(`^\$gy\$[./0-9A-Za-z]+\$[./0-9A-Za-z]+\$[./0-9A-Za-z]{43}$`)},
	{"", regexp.MustCompile(`^[./0-9A-Za-z]{13}$`)}, // traditional DES crypt
}

const authFormatsText = "`{PLAIN}`, `{SHA}`, `{SSHA}`, `$apr1$` (htpasswd's default), and crypt(3)'s `$1$` (MD5), `$5$` (SHA-256), " +
	"`$6$` (SHA-512), `$2a$`/`$2b$`/`$2y$` (bcrypt, `htpasswd -B`), `$y$` (yescrypt), `$gy$` and traditional DES"

func init() {
	spec := func(name, values, def, diff string) AnnotationSpec {
		return AnnotationSpec{Name: name, Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values: values, Default: def, Difference: diff}
	}
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			spec("auth-type", "`basic`", "none: no authentication",
				"**Route data**: the Lua router checks the `Authorization` header in the rewrite phase (after the CORS "+
					"preflight, the redirects, source ranges and rate limits, as NGINX's access phase came after them in "+
					"ingress-nginx) and answers 401 with `WWW-Authenticate: Basic realm=\"<auth-realm>\"`; the users travel in "+
					"the routes push, so neither a change of the Secret nor of an annotation reloads NGINX, and no password file "+
					"is written to disk. `digest` **rejects the Ingress**: Debian's NGINX has no digest module, and the Ingress "+
					"is not served open instead. Any other value, or `auth-secret` without `auth-type`, rejects it too "+
					"(ingress-nginx served the latter without authentication). Hash formats: "+authFormatsText+"; a hash in "+
					"another form (a plain-text password, for example) rejects the Ingress, and so does a costly one (bcrypt cost over 17, `$5$`/`$6$` "+
					"with more than 1000000 rounds), which would block a worker for seconds or more per wrong password. Each worker caches up to 1024 "+
					"successful checks (keyed by a keyed hash of the stored hash and the password), because bcrypt and "+
					"yescrypt cost tens of milliseconds per check and block the worker meanwhile, as they do in NGINX's "+
					"`auth_basic`: wrong passwords are not cached, so guessing costs that much per attempt (combine with "+
					"`limit-rps`)."),
			spec("auth-secret", "`namespace/name` of a Secret in the Ingress's own namespace (a bare `name` means that namespace too)",
				"none; required with `auth-type`",
				"A Secret in **another namespace is refused** (ingress-nginx allowed it only with "+
					"`--allow-cross-namespace-resources`). A Secret that is missing, has no users, a line that is not "+
					"`user:hash`, or a hash in an unknown format **rejects the Ingress** with a Warning naming the Secret and "+
					"the line (never its content); unlike other rejections its last good version is **not** kept serving, so "+
					"that a user removed from the Secret, or a deleted Secret, never keeps its access. The user list may hold "+
					"at most 64 KiB, and travels once per host of the Ingress (its routes on a host share it), at most 256 KiB "+
					"in all. A change of the Secret is a push: a removed user's next request gets 401."),
			spec("auth-secret-type", "`auth-file`: the Secret's key `auth` holds htpasswd lines (`user:hash`, `#` "+
				"comments and empty lines skipped, fields after a second `:` ignored, as NGINX reads them); `auth-map`: "+
				"each key of the Secret is a user and its value that user's hash",
				"`auth-file`", "Any other value **rejects the Ingress**. With `auth-map`, a value's surrounding "+
					"white space (the newline of `--from-file`) is dropped, and traditional DES hashes are not accepted: the controller's "+
					"cache keeps of a Secret only the keys it reads (TLS keys, `auth`, and values that are password hashes), so that "+
					"other credentials stay out of its memory, and a key whose value is not such a hash is not seen (that user cannot "+
					"log in). A user listed twice is checked against its first hash, as in NGINX."),
			spec("auth-realm", "printable ASCII, at most 256 bytes", "empty (`Basic realm=\"\"`, as ingress-nginx)",
				"Sent as a quoted string, `\"` and `\\` escaped (ingress-nginx sent them unescaped). Another value is "+
					"ignored with a Warning (the realm is cosmetic)."),
		},
		apply: applyBasicAuth,
	})
}

// applyBasicAuth reads the basic authentication annotations into the Ingress's route options.
func applyBasicAuth(t *translator) {
	ann := t.ing.Annotations
	rawType, hasType := ann[AnnotationAuthType]
	if !hasType {
		if _, ok := ann[AnnotationAuthSecret]; ok {
			t.fail("metadata.annotations[%s]: the Secret of users applies only with %s: \"basic\"; the Ingress is not served "+
				"rather than served without authentication", AnnotationAuthSecret, AnnotationAuthType)
		}
		for _, a := range []string{AnnotationAuthSecretType, AnnotationAuthRealm} {
			if _, ok := ann[a]; ok {
				t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has no effect without %s; ignored", a, AnnotationAuthType))
			}
		}
		return
	}
	switch strings.ToLower(strings.TrimSpace(rawType)) {
	case "basic":
	case "digest":
		t.fail("metadata.annotations[%s]: %s: this NGINX has no digest authentication module; the Ingress is not served rather "+
			"than served without authentication (use \"basic\" over HTTPS)", AnnotationAuthType, quoteValue(rawType))
		return
	default:
		t.fail("metadata.annotations[%s]: %s is not an authentication type (want \"basic\"); the Ingress is not served rather "+
			"than served without authentication", AnnotationAuthType, quoteValue(rawType))
		return
	}
	secretType := "auth-file"
	if raw, ok := ann[AnnotationAuthSecretType]; ok {
		secretType = strings.TrimSpace(raw)
		if secretType != "auth-file" && secretType != "auth-map" {
			t.fail("metadata.annotations[%s]: %s is not a secret type (want \"auth-file\" or \"auth-map\")", AnnotationAuthSecretType, quoteValue(raw))
			return
		}
	}
	realm := ""
	if raw, ok := ann[AnnotationAuthRealm]; ok {
		if len(raw) > maxAuthRealm || strings.ContainsFunc(raw, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is not printable ASCII of at most %d "+
				"bytes; ignored, the realm is empty", AnnotationAuthRealm, quoteValue(raw), maxAuthRealm))
		} else {
			realm = raw
		}
	}
	_, ok := ann[AnnotationAuthSecret]
	if !ok {
		t.fail("metadata.annotations[%s]: %s: \"basic\" needs %s, the Secret that lists the users", AnnotationAuthType, AnnotationAuthType, AnnotationAuthSecret)
		return
	}
	key, ok := t.ownObjectKey(AnnotationAuthSecret, "Secret", "default/basic-auth")
	if !ok {
		return
	}
	ref := ObjectRef{Kind: KindSecret, Key: key}
	sec, found := t.lk.secret(key)
	var users, reason string
	if !found {
		t.recordMissing(ref)
		reason = "does not exist"
	} else {
		t.recordObject(ref, sec.ResourceVersion)
		if secretType == "auth-map" {
			users, reason = authMapUsers(sec.Data)
		} else {
			users, reason = authFileUsers(sec.Data)
		}
	}
	if reason != "" {
		// Not even the last good version stays served: it would go on admitting users, and passwords,
		// that were removed from the Secret.
		t.withdraw = true
		t.fail("metadata.annotations[%s]: secret %s %s; the Ingress is not served until it is fixed", AnnotationAuthSecret, key, reason)
		return
	}
	t.out.setRare().authSource = &basicAuthSource{key: key, authMap: secretType == "auth-map"}
	o := t.options()
	o.AuthChallenge = basicChallenge(realm)
	o.AuthUsers = users
	sum := sha256.Sum256([]byte(users))
	o.AuthUsersID = hex.EncodeToString(sum[:12])
}

// basicAuthSource is where a translation's users come from: a Secret, read as auth-map or auth-file.
type basicAuthSource struct {
	key     types.NamespacedName
	authMap bool
}

// staleAuthUsers reports whether tr admits users (basic authentication) other than those its Secret lists
// now (lk): a removed user, a changed password, a Secret deleted or broken since. Such a version must
// not stay served after a rejection of a newer one (last good, quarantine), or the removed user keeps
// their access as long as the Ingress stays rejected.
func (tr *IngressTranslation) staleAuthUsers(lk *Lookups) bool {
	if tr == nil || tr.rareOf().authSource == nil || tr.Options == nil {
		return false
	}
	sec, ok := lk.secret(tr.rareOf().authSource.key)
	if !ok {
		return true
	}
	var users, reason string
	if tr.rareOf().authSource.authMap {
		users, reason = authMapUsers(sec.Data)
	} else {
		users, reason = authFileUsers(sec.Data)
	}
	return reason != "" || users != tr.Options.AuthUsers
}

// basicChallenge is the WWW-Authenticate value for realm (printable ASCII), as an RFC 7230 quoted string.
func basicChallenge(realm string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `Basic realm="` + r.Replace(realm) + `"`
}

// authFileUsers reads the htpasswd lines of an auth-file Secret into the wire form of the user list,
// or says what is wrong (naming lines, never their content).
func authFileUsers(data map[string][]byte) (string, string) {
	content, ok := data[authFileKey]
	if !ok {
		return "", "has no key \"" + authFileKey + "\" (auth-secret-type auth-file wants htpasswd lines there)"
	}
	if len(content) > 4*maxAuthUsersBytes {
		return "", fmt.Sprintf("has %d bytes in %q, more than the %d accepted", len(content), authFileKey, 4*maxAuthUsersBytes)
	}
	var list authUserList
	for i, line := range strings.Split(string(content), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		user, rest, found := strings.Cut(line, ":")
		hash, _, _ := strings.Cut(rest, ":") // NGINX ignores what follows a second ':'
		if !found {
			return "", fmt.Sprintf("key %q, line %d: not user:hash", authFileKey, i+1)
		}
		if why := list.add(user, hash); why != "" {
			return "", fmt.Sprintf("key %q, line %d: %s", authFileKey, i+1, why)
		}
	}
	return list.wire()
}

// authMapUsers reads an auth-map Secret (user -> hash) into the wire form of the user list.
func authMapUsers(data map[string][]byte) (string, string) {
	var list authUserList
	for _, user := range slices.Sorted(func(yield func(string) bool) {
		for k := range data {
			if !yield(k) {
				return
			}
		}
	}) {
		if why := list.add(user, strings.TrimSpace(string(data[user]))); why != "" {
			return "", fmt.Sprintf("key %s: %s", quoteValue(user), why)
		}
	}
	return list.wire()
}

// authUserList collects validated users and hashes; the first hash of a user wins, as in NGINX.
type authUserList struct {
	b    strings.Builder
	seen map[string]bool
}

func (l *authUserList) add(user, hash string) string {
	if user == "" || len(user) > maxAuthUser || strings.ContainsFunc(user, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Sprintf("the user name is empty, longer than %d bytes or has control characters", maxAuthUser)
	}
	if why := checkAuthHash(hash); why != "" {
		return why
	}
	if l.seen[user] {
		return ""
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[user] = true
	l.b.WriteString(user)
	l.b.WriteByte(':')
	l.b.WriteString(hash)
	l.b.WriteByte('\n')
	return ""
}

func (l *authUserList) wire() (string, string) {
	switch {
	case l.b.Len() == 0:
		return "", "lists no users"
	case l.b.Len() > maxAuthUsersBytes:
		return "", fmt.Sprintf("lists %d bytes of users and hashes, more than the %d accepted", l.b.Len(), maxAuthUsersBytes)
	}
	return l.b.String(), ""
}

// KeepsBasicAuthEntry reports whether the informer cache, which drops a Secret's keys that the controller
// does not read, keeps key of a Secret for basic authentication: the key "auth" (auth-file), and a key
// whose value is a password hash of a supported format other than DES (an auth-map entry; DES is left
// out because any 13 letters and digits look like one, an API token too).
func KeepsBasicAuthEntry(key string, value []byte) bool {
	if key == authFileKey {
		return true
	}
	v := strings.TrimSpace(string(value))
	return len(v) > 13 && checkAuthHash(v) == ""
}

// Bounds of a hash's cost: each wrong password costs a whole check, in an NGINX worker that serves
// nothing else meanwhile, so that one Ingress's hash must not take it for minutes (bcrypt's cost 31 takes
// days). htpasswd -B accepts costs up to 17; sha-crypt's default is 5000 rounds.
const (
	maxBcryptCost     = 17
	maxShaCryptRounds = 1000000
)

// authHashCost says why a well-formed hash of format prefix costs too much to check, or "".
func authHashCost(prefix, hash string) string {
	switch prefix {
	case "$2":
		if cost, err := strconv.Atoi(hash[4:6]); err != nil || cost > maxBcryptCost {
			return fmt.Sprintf("the bcrypt hash's cost is over %d (each check would block an NGINX worker for seconds or more)", maxBcryptCost)
		}
	case "$5$", "$6$":
		if r, ok := strings.CutPrefix(hash[3:], "rounds="); ok {
			n, _, _ := strings.Cut(r, "$")
			if rounds, err := strconv.Atoi(n); err != nil || rounds > maxShaCryptRounds {
				return fmt.Sprintf("the hash has more than %d rounds (each check would block an NGINX worker for seconds or more)", maxShaCryptRounds)
			}
		}
	}
	return ""
}

// checkAuthHash says why hash is not in one of authHashFormats, or "".
func checkAuthHash(hash string) string {
	if len(hash) > maxAuthHash {
		return fmt.Sprintf("the hash is longer than %d bytes", maxAuthHash)
	}
	for _, f := range authHashFormats {
		if !strings.HasPrefix(hash, f.prefix) {
			continue
		}
		if !f.re.MatchString(hash) {
			if f.prefix == "" {
				break
			}
			return "the hash starts with " + f.prefix + " but is not well formed"
		}
		if why := authHashCost(f.prefix, hash); why != "" {
			return why
		}
		if f.prefix == "{SSHA}" {
			if raw, err := base64.StdEncoding.DecodeString(hash[len(f.prefix):]); err != nil || len(raw) <= 20 {
				return "the hash starts with {SSHA} but is not base64 of a SHA-1 digest and a salt"
			}
		}
		return ""
	}
	return "the hash is in no supported format (" + strings.ReplaceAll(authFormatsText, "`", "") + "; a plain-text password needs {PLAIN})"
}

// authUsersBudget rejects an Ingress whose user list, carried once per host entry, would take more than
// maxAuthUsersPushBytes of the routes dict.
func (t *translator) authUsersBudget() {
	o := t.out.Options
	if o == nil || o.AuthUsers == "" {
		return
	}
	hosts := map[Hostname]bool{}
	for _, r := range t.out.Routes {
		hosts[r.Host] = true
	}
	if n := len(o.AuthUsers) * len(hosts); n > maxAuthUsersPushBytes {
		t.fail("metadata.annotations[%s]: its users (%d bytes) travel with each of the Ingress's %d hosts, %d bytes in all, more than "+
			"the %d one Ingress may add to the data plane's routes; use fewer users or hosts", AnnotationAuthSecret, len(o.AuthUsers),
			len(hosts), n, maxAuthUsersPushBytes)
	}
}
