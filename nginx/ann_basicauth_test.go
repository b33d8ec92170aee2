package nginx

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// authVectors are hashes of the password "s3cret" (and one longer password with a colon), one per
// format, generated once with:
//
//	openssl passwd -apr1 -salt saltsalt s3cret      openssl passwd -1 -salt saltsalt s3cret
//	openssl passwd -5 -salt saltsalt s3cret         openssl passwd -6 -salt saltsalt s3cret
//	openssl passwd -apr1 -salt x7Qz 'a much longer password than sixteen:bytes'
//	perl -e 'print crypt("s3cret", q($2b$05$abcdefghijklmnopqrstuu))'   (likewise $2y$, $y$j9T$abcdefghijklmnop$,
//	$gy$j9T$abcdefghijklmnop$ and "ab" for DES; perl's crypt is libcrypt's)
//
// {PLAIN}, {SHA} and {SSHA} are computed by authSHA and authSSHA.
var authVectors = map[string]struct{ hash, password string }{
	"apr1":      {"$apr1$saltsalt$64vPg1.FPS6FtcYJ7Ti1V.", "s3cret"},
	"apr1-long": {"$apr1$x7Qz$vjitb/Kh7xTEav/2Xq.mc.", "a much longer password than sixteen:bytes"},
	"md5":       {"$1$saltsalt$RwMqRjSWhXMKbW72DwzGd1", "s3cret"},
	"sha256":    {"$5$saltsalt$i1q2ZQzc.tl/BQ6CHiENAcVDvEY6nJ1OWlWXKh94b1.", "s3cret"},
	"sha512":    {"$6$saltsalt$As4wrv0kZlfch1du9WeH7qhskyLriQWySXrZzynnvi46nFnNxjdpl6ksRegrrKexvhIa/Iny8S8uF3fVWTMuC1", "s3cret"},
	"bcrypt2b":  {"$2b$05$abcdefghijklmnopqrstuuLK7U1u6pVRmL7L1BBM2aS35PSZnDXlK", "s3cret"},
	"bcrypt2y":  {"$2y$05$abcdefghijklmnopqrstuuLK7U1u6pVRmL7L1BBM2aS35PSZnDXlK", "s3cret"},
	"yescrypt":  {"$y$j9T$abcdefghijklmnop$tySFNIfWVy.ymkBDHEMW6bAQ07dlkLVGalgni.VV4l8", "s3cret"},
	"gost":      {"$gy$j9T$abcdefghijklmnop$ltcxOUqefkevBOeShdu7CRbvQ0pIilvG/0pGIrmTPe3", "s3cret"},
	"des":       {"abhWCwoTZY2c6", "s3cret"},
	"plain":     {"{PLAIN}s3cret", "s3cret"},
	"sha":       {authSHA("s3cret"), "s3cret"},
	"ssha":      {authSSHA("s3cret", "NaCl4u"), "s3cret"},
}

func authSHA(password string) string {
	sum := sha1.Sum([]byte(password))
	return "{SHA}" + base64.StdEncoding.EncodeToString(sum[:])
}

func authSSHA(password, salt string) string {
	sum := sha1.Sum([]byte(password + salt))
	return "{SSHA}" + base64.StdEncoding.EncodeToString(append(sum[:], salt...))
}

// authSecret builds a Secret with data (nil: none).
func authSecret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "1"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// manyUsers is an htpasswd file of n users user0, user1, ... with hash.
func manyUsers(n int, hash string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "user%d:%s\n", i, hash)
	}
	return b.String()
}

// TestAnnotationBasicAuth: auth-* annotations and the Secret -> the route options, or -> the exact
// rejection (withdrawn when it is the Secret's fault).
func TestAnnotationBasicAuth(t *testing.T) {
	const ann = "metadata.annotations[" + IngressNginxPrefix
	apr1 := authVectors["apr1"].hash
	bcrypt := authVectors["bcrypt2b"].hash
	secrets := secretLookup{
		nn("default", "file"):     authSecret("file", map[string]string{"auth": "# admins\nalice:" + apr1 + "\r\n\nbob:" + bcrypt + ":comment\nalice:{PLAIN}second\n"}),
		nn("default", "map"):      authSecret("map", map[string]string{"alice": apr1 + "\n", "bob": bcrypt}),
		nn("default", "nokey"):    authSecret("nokey", map[string]string{"users": "alice:" + apr1}),
		nn("default", "empty"):    authSecret("empty", map[string]string{"auth": "# nobody\n\n"}),
		nn("default", "plain"):    authSecret("plain", map[string]string{"auth": "alice:" + apr1 + "\nbob:hunter2\n"}),
		nn("default", "nocolon"):  authSecret("nocolon", map[string]string{"auth": "alice " + apr1}),
		nn("default", "badapr1"):  authSecret("badapr1", map[string]string{"auth": "alice:$apr1$x$short"}),
		nn("default", "nouser"):   authSecret("nouser", map[string]string{"auth": ":" + apr1}),
		nn("default", "ctrluser"): authSecret("ctrluser", map[string]string{"auth": "al\x00ice:" + apr1}),
		nn("default", "big"):      authSecret("big", map[string]string{"auth": manyUsers(1100, bcrypt)}),
		nn("other", "file"):       authSecret("file", map[string]string{"auth": "alice:" + apr1}),
	}
	with := func(kv ...string) []string {
		return append([]string{AnnotationAuthType, "basic", AnnotationAuthSecret, "file"}, kv...)
	}
	tests := map[string]struct {
		kv           []string
		wantUsers    string
		wantRealm    string
		wantWarning  string
		wantErr      string
		wantWithdraw bool
	}{
		"auth-file: comments, CR and empty lines skipped, a third field ignored, the first alice wins": {
			kv: with(AnnotationAuthRealm, "Staff only"), wantUsers: "alice:" + apr1 + "\nbob:" + bcrypt + "\n", wantRealm: `Basic realm="Staff only"`,
		},
		"default realm is empty": {kv: with(), wantUsers: "alice:" + apr1 + "\nbob:" + bcrypt + "\n", wantRealm: `Basic realm=""`},
		"auth-map: keys are users, the value's newline dropped": {
			kv:        []string{AnnotationAuthType, "Basic", AnnotationAuthSecret, "default/map", AnnotationAuthSecretType, "auth-map"},
			wantUsers: "alice:" + apr1 + "\nbob:" + bcrypt + "\n", wantRealm: `Basic realm=""`,
		},
		"a realm's quotes and backslashes are escaped": {
			kv: with(AnnotationAuthRealm, `a "b" \c`), wantUsers: "alice:" + apr1 + "\nbob:" + bcrypt + "\n", wantRealm: `Basic realm="a \"b\" \\c"`,
		},
		"a realm with CRLF is ignored with a Warning": {
			kv: with(AnnotationAuthRealm, "x\r\nSet-Cookie: a=1"), wantUsers: "alice:" + apr1 + "\nbob:" + bcrypt + "\n", wantRealm: `Basic realm=""`,
			wantWarning: ann + `auth-realm]: "x\r\nSet-Cookie: a=1" is not printable ASCII`,
		},
		"auth-realm alone restricts nothing": {
			kv: []string{AnnotationAuthRealm, "x"}, wantWarning: ann + `auth-realm]: has no effect without ` + AnnotationAuthType + `; ignored`,
		},
		"digest is refused: no module": {
			kv:      []string{AnnotationAuthType, "digest", AnnotationAuthSecret, "file"},
			wantErr: ann + `auth-type]: "digest": this NGINX has no digest authentication module; the Ingress is not served rather than served without authentication (use "basic" over HTTPS)`,
		},
		"an unknown type": {
			kv:      []string{AnnotationAuthType, "basic; auth_basic off", AnnotationAuthSecret, "file"},
			wantErr: ann + `auth-type]: "basic; auth_basic off" is not an authentication type (want "basic"); the Ingress is not served rather than served without authentication`,
		},
		"auth-secret without auth-type": {
			kv:      []string{AnnotationAuthSecret, "file"},
			wantErr: ann + `auth-secret]: the Secret of users applies only with ` + AnnotationAuthType + `: "basic"; the Ingress is not served rather than served without authentication`,
		},
		"auth-type without a Secret": {
			kv:      []string{AnnotationAuthType, "basic"},
			wantErr: ann + `auth-type]: ` + AnnotationAuthType + `: "basic" needs ` + AnnotationAuthSecret + `, the Secret that lists the users`,
		},
		"an unknown secret type": {
			kv:      with(AnnotationAuthSecretType, "htpasswd"),
			wantErr: ann + `auth-secret-type]: "htpasswd" is not a secret type (want "auth-file" or "auth-map")`,
		},
		"another namespace's Secret": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "other/file"},
			wantErr: ann + `auth-secret]: "other/file" is in namespace other; only Secrets of the Ingress's own namespace (default) may be used`,
		},
		"not an object name": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "../file"},
			wantErr: ann + `auth-secret]: "../file" is not a Secret's namespace/name (want lowercase RFC 1123 names such as "default/basic-auth")`,
		},
		"a missing Secret withdraws": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "gone"},
			wantErr: ann + `auth-secret]: secret default/gone does not exist; the Ingress is not served until it is fixed`, wantWithdraw: true,
		},
		"no auth key": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "nokey"},
			wantErr: `secret default/nokey has no key "auth" (auth-secret-type auth-file wants htpasswd lines there)`, wantWithdraw: true,
		},
		"no users": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "empty"},
			wantErr: `secret default/empty lists no users`, wantWithdraw: true,
		},
		"a plain-text password names the line, never the content": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "plain"},
			wantErr: `secret default/plain key "auth", line 2: the hash is in no supported format`, wantWithdraw: true,
		},
		"a line without a colon": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "nocolon"},
			wantErr: `secret default/nocolon key "auth", line 1: not user:hash`, wantWithdraw: true,
		},
		"a malformed apr1 hash": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "badapr1"},
			wantErr: `secret default/badapr1 key "auth", line 1: the hash starts with $apr1$ but is not well formed`, wantWithdraw: true,
		},
		"an empty user": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "nouser"},
			wantErr: `line 1: the user name is empty, longer than 256 bytes or has control characters`, wantWithdraw: true,
		},
		"a user with a NUL": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "ctrluser"},
			wantErr: `line 1: the user name is empty, longer than 256 bytes or has control characters`, wantWithdraw: true,
		},
		"auth-map with a hash that is no hash": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "plain", AnnotationAuthSecretType, "auth-map"},
			wantErr: `secret default/plain key "auth": the hash is in no supported format`, wantWithdraw: true,
		},
		"a list over 64 KiB": {
			kv:      []string{AnnotationAuthType, "basic", AnnotationAuthSecret, "big"},
			wantErr: `secret default/big lists 75890 bytes of users and hashes, more than the 65536 accepted`, wantWithdraw: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(tc.kv...))
			got, err := TranslateIngressWith(ing, Lookups{Services: servicesOf(service("default", "web", port(80, "http"))), Secrets: secrets}, DefaultTranslateOptions())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if errors.Is(err, ErrWithdrawn) != tc.wantWithdraw {
					t.Fatalf("withdrawn = %v, want %v", errors.Is(err, ErrWithdrawn), tc.wantWithdraw)
				}
				for _, v := range authVectors {
					if strings.Contains(err.Error(), v.hash) || strings.Contains(err.Error(), "hunter2") {
						t.Fatalf("the rejection shows a hash or password: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var users, realm string
			if o := got.Options; o != nil {
				users, realm = o.AuthUsers, o.AuthChallenge
			}
			if users != tc.wantUsers || realm != tc.wantRealm {
				t.Fatalf("users %q realm %q, want %q %q", users, realm, tc.wantUsers, tc.wantRealm)
			}
			if tc.wantWarning != "" && !strings.Contains(strings.Join(got.Warnings, "\n"), tc.wantWarning) {
				t.Fatalf("warnings %q, want %q", got.Warnings, tc.wantWarning)
			}
		})
	}
}

// TestBasicAuthHashFormats: every vector passes the Go validation.
func TestBasicAuthHashFormats(t *testing.T) {
	for name, v := range authVectors {
		if why := checkAuthHash(v.hash); why != "" {
			t.Errorf("%s: %s", name, why)
		}
	}
	for _, bad := range []string{"hunter2", "$apr1$toolongsalt$64vPg1.FPS6FtcYJ7Ti1V.", "{SHA}abc", "{SSHA}" + base64.StdEncoding.EncodeToString([]byte("short")),
		"$2b$05$short", "$6$salt$x", "$3$abc", "{PLAIN}with space"} {
		if checkAuthHash(bad) == "" {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestBasicAuthUsersBudget: a big user list on many hosts is rejected; the list travels once per host
// entry, whatever the number of paths.
func TestBasicAuthUsersBudget(t *testing.T) {
	bcrypt := authVectors["bcrypt2b"].hash
	secrets := secretLookup{nn("default", "big"): authSecret("big", map[string]string{"auth": manyUsers(700, bcrypt)})} // about 48 KiB
	svcs := servicesOf(service("default", "web", port(80, "http")))
	var rules []ingressOption
	for i := range 6 {
		rules = append(rules, rule(fmt.Sprintf("h%d.example.com", i), prefix("/", "web", 80), prefix("/a", "web", 80), prefix("/b", "web", 80)))
	}
	ing := ingress("default", "a", append(rules, annotate(AnnotationAuthType, "basic", AnnotationAuthSecret, "big"))...)
	if _, err := TranslateIngressWith(ing, Lookups{Services: svcs, Secrets: secrets}, DefaultTranslateOptions()); err == nil ||
		!strings.Contains(err.Error(), "travel with each of the Ingress's 6 hosts") {
		t.Fatalf("err = %v, want the budget's rejection", err)
	}
	ing = ingress("default", "a", append(rules[:4], annotate(AnnotationAuthType, "basic", AnnotationAuthSecret, "big"))...)
	tr, err := TranslateIngressWith(ing, Lookups{Services: svcs, Secrets: secrets}, DefaultTranslateOptions())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Merge([]*IngressTranslation{tr}, nil)
	for i := range m.Servers {
		s := &m.Servers[i]
		if s.Host == "" {
			continue
		}
		wire := string(AppendRouteHostJSON(nil, s))
		if n := strings.Count(wire, "user699:"); n != 1 {
			t.Fatalf("host %s carries the list %d times, want once", s.Host, n)
		}
	}
}

// TestBasicAuthThroughNginx runs basic authentication through real NGINX: without credentials 401 with
// the realm (escaped), a wrong password 401, the right one 200 for every hash format; a CORS preflight
// is answered before authentication; a user removed from the Secret gets 401 after the push, without a
// reload; a password with a colon works.
func TestBasicAuthThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	rt := testRuntime(t, cfg, nil)
	ctx := context.Background()

	var reached atomic.Int32
	app := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, "app")
	})
	var lines strings.Builder
	for name, v := range authVectors {
		fmt.Fprintf(&lines, "%s:%s\n", name, v.hash)
	}
	secrets := secretLookup{nn("default", "users"): authSecret("users", map[string]string{"auth": lines.String()})}
	svcs := servicesOf(service("default", "app", port(80, "http")))
	ing := ingress("default", "site", annotate(AnnotationAuthType, "basic", AnnotationAuthSecret, "users",
		AnnotationAuthRealm, `Staff "only"`, AnnotationEnableCORS, "true", AnnotationCORSAllowOrigin, "https://app.example.com"),
		rule("site.example.com", prefix("/", "app", 80), prefix("/api", "app", 80)))
	b := NewModelBuilder()
	build := b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 {
		t.Fatalf("rejected %+v", build.Rejected)
	}
	hash := applyModel(t, rt, build.Model, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "app", 80).Name: {app}}); err != nil {
		t.Fatal(err)
	}

	do := func(method, path, user, password string, header map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "site.example.com"
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	want401 := func(resp *http.Response, what string) {
		t.Helper()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="Staff \"only\""` {
			t.Fatalf("%s: %d %q, want 401 with the realm", what, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	want401(do("GET", "/", "", "", nil), "no credentials")
	want401(do("GET", "/api/x", "", "", map[string]string{"Authorization": "Bearer abc"}), "another scheme")
	want401(do("GET", "/", "nobody", "s3cret", nil), "an unknown user")
	for name, v := range authVectors {
		want401(do("GET", "/", name, v.password+"x", nil), name+" with a wrong password")
		want401(do("GET", "/", name, "", nil), name+" with an empty password")
		for range 2 { // the second time from the cache
			if resp := do("GET", "/api/x", name, v.password, nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("%s with its password: %d, want 200", name, resp.StatusCode)
			}
		}
	}
	if reached.Load() != int32(2*len(authVectors)) {
		t.Fatalf("the backend got %d requests, want %d (only the authenticated ones)", reached.Load(), 2*len(authVectors))
	}
	// A CORS preflight is answered before authentication, as ingress-nginx's location did.
	if resp := do("OPTIONS", "/", "", "", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight: %d, want 204", resp.StatusCode)
	}

	// apr1 is removed from the Secret: its next request gets 401, after a push and without a reload,
	// cache or not.
	updated := authSecret("users", map[string]string{"auth": strings.Replace(lines.String(), "apr1:"+authVectors["apr1"].hash+"\n", "", 1)})
	updated.ResourceVersion = "2"
	secrets[nn("default", "users")] = updated
	get := func(types.NamespacedName) (*networkingv1.Ingress, bool) { return ing, true }
	build = b.Update(UpdateInput{Objects: []ObjectRef{{Kind: KindSecret, Key: nn("default", "users")}}, Get: get, Lookup: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 {
		t.Fatalf("rejected %+v", build.Rejected)
	}
	conf, newHash, err := Render(build.Model, cfg)
	if err != nil || newHash != hash || len(conf) == 0 {
		t.Fatalf("the Secret's change changed nginx.conf (hash %s -> %s, %v): it would reload", hash, newHash, err)
	}
	if err := rt.Client().ReplaceRoutes(ctx, routeTable(&build.Model)); err != nil {
		t.Fatal(err)
	}
	want401(do("GET", "/", "apr1", "s3cret", nil), "a removed user")
	if resp := do("GET", "/", "sha512", "s3cret", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a remaining user: %d, want 200", resp.StatusCode)
	}

	// The router's side checks what it is pushed: a challenge that would split the header, a route naming
	// a list the host lacks, a line without a user, a user list that is not a string.
	for _, bad := range []string{
		`"auth_users":{"ab":"alice:{PLAIN}x"},"routes":[{"path":"/","upstream":"","auth":{"challenge":"Basic realm=\"a\r\nX: 1\"","users":"ab"}}]`,
		`"auth_users":{"ab":"alice:{PLAIN}x"},"routes":[{"path":"/","upstream":"","auth":{"challenge":"Basic realm=\"a\"","users":"cd"}}]`,
		`"routes":[{"path":"/","upstream":"","auth":{"challenge":"Basic realm=\"a\"","users":"ab"}}]`,
		`"auth_users":{"ab":":{PLAIN}x"},"routes":[{"path":"/","upstream":"","auth":{"challenge":"Basic realm=\"a\"","users":"ab"}}]`,
		`"auth_users":{"ab":"alice:{PLAIN}x\r"},"routes":[{"path":"/","upstream":"","auth":{"challenge":"Basic realm=\"a\"","users":"ab"}}]`,
		`"auth_users":{"ab":["alice:{PLAIN}x"]},"routes":[]`,
	} {
		err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{"evil.example.com": []byte("{" + bad + "}")}})
		if refused, ok := errors.AsType[*RoutesRefusedError](err); !ok || len(refused.Refused) != 1 {
			t.Errorf("%s: push answered %v, want the host refused", bad, err)
		} else if strings.Contains(refused.Error(), "{PLAIN}") {
			t.Errorf("%s: the refusal shows a hash: %v", bad, refused)
		}
	}

	// The Secret is deleted: the Ingress is withdrawn, its host no longer routed to the backend.
	delete(secrets, nn("default", "users"))
	build = b.Update(UpdateInput{Objects: []ObjectRef{{Kind: KindSecret, Key: nn("default", "users")}}, Get: get, Lookup: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 1 || !errors.Is(build.Rejected[0].Err, ErrWithdrawn) {
		t.Fatalf("rejected %+v, want the Ingress withdrawn", build.Rejected)
	}
	if err := rt.Client().ReplaceRoutes(ctx, routeTable(&build.Model)); err != nil {
		t.Fatal(err)
	}
	before := reached.Load()
	if resp := do("GET", "/", "sha512", "s3cret", nil); resp.StatusCode != http.StatusNotFound || reached.Load() != before {
		t.Fatalf("after the deletion: %d (backend reached %v), want the built-in 404", resp.StatusCode, reached.Load() != before)
	}
}

// TestBasicAuthHashCostBounded: a hash whose cost would block an NGINX worker for minutes to days per
// wrong password (bcrypt cost 31, sha-crypt with a billion rounds) is refused: one Ingress of one
// tenant must not be able to stall the data plane every other Ingress shares.
func TestBasicAuthHashCostBounded(t *testing.T) {
	b := authVectors["bcrypt2b"].hash // "$2b$NN$" + 53
	for _, bad := range []string{
		b[:4] + "31" + b[6:],
		b[:4] + "18" + b[6:],
		"$6$rounds=999999999$salt$" + strings.Repeat("a", 86),
		"$5$rounds=999999999$salt$" + strings.Repeat("a", 43),
	} {
		if checkAuthHash(bad) == "" {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{b[:4] + "17" + b[6:], "$6$rounds=1000000$salt$" + strings.Repeat("a", 86)} {
		if why := checkAuthHash(good); why != "" {
			t.Errorf("%q refused: %s", good, why)
		}
	}
}
