package nginx

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// clientCASecret is a Secret named name in "default" with the given data keys.
func clientCASecret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "1"}, Data: data}
}

// TestAnnotationClientCert: auth-tls-* annotations and the Secret -> the route options, or -> the exact
// rejection (withdrawn when it is the Secret's fault), or a Warning for the cosmetic ones.
func TestAnnotationClientCert(t *testing.T) {
	const ann = "metadata.annotations[" + IngressNginxPrefix
	ca := newTestCA(t, "client-ca")
	other := newTestCA(t, "other-ca")
	secrets := secretLookup{
		nn("default", "ca"):      clientCASecret("ca", map[string][]byte{"ca.crt": ca.pem}),
		nn("default", "two"):     clientCASecret("two", map[string][]byte{"ca.crt": append(append([]byte("comment\n"), ca.pem...), other.pem...)}),
		nn("default", "noca"):    clientCASecret("noca", map[string][]byte{"tls.crt": ca.pem}),
		nn("default", "garbage"): clientCASecret("garbage", map[string][]byte{"ca.crt": []byte("not a certificate")}),
		nn("default", "crl"):     clientCASecret("crl", map[string][]byte{"ca.crt": ca.pem, "ca.crl": []byte("x")}),
		nn("default", "big"):     clientCASecret("big", map[string][]byte{"ca.crt": []byte(strings.Repeat(string(ca.pem), 200))}),
		nn("other", "ca"):        {ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "ca"}, Data: map[string][]byte{"ca.crt": ca.pem}},
	}
	with := func(kv ...string) []string { return append([]string{AnnotationAuthTLSSecret, "ca"}, kv...) }
	type want struct {
		mode, matchCN, errorPage string
		pass                     bool
		depth                    int
		caCerts                  int
	}
	on := want{mode: "on", depth: 1, caCerts: 1}
	tests := map[string]struct {
		kv           []string
		want         *want
		wantWarning  string
		wantErr      string
		wantWithdraw bool
	}{
		"defaults: on, depth 1":             {kv: with(), want: &on},
		"a namespace/name key":              {kv: []string{AnnotationAuthTLSSecret, "default/ca"}, want: &on},
		"depth 0 is 1, as ingress-nginx":    {kv: with(AnnotationAuthTLSVerifyDepth, "0"), want: &on},
		"two CAs, text around them dropped": {kv: []string{AnnotationAuthTLSSecret, "two", AnnotationAuthTLSVerifyDepth, " 3 "}, want: &want{mode: "on", depth: 3, caCerts: 2}},
		"every setting": {
			kv: with(AnnotationAuthTLSVerifyClient, "optional", AnnotationAuthTLSErrorPage, "https://errors.example.com/cert?x=1",
				AnnotationAuthTLSPassCert, "true", AnnotationAuthTLSMatchCN, "CN=(alice|bob)"),
			want: &want{mode: "optional", depth: 1, caCerts: 1, pass: true, errorPage: "https://errors.example.com/cert?x=1", matchCN: `CN\x3d((?:alice|bob))`},
		},
		"optional_no_ca":                         {kv: with(AnnotationAuthTLSVerifyClient, "optional_no_ca"), want: &want{mode: "optional_no_ca", depth: 1, caCerts: 1}},
		"off asks for nothing and chooses no CA": {kv: with(AnnotationAuthTLSVerifyClient, "off"), want: &want{mode: "off"}},
		"a match-cn with a space and an escaped comma": {
			kv: with(AnnotationAuthTLSMatchCN, `CN=Alice Smith\,Jr`), want: &want{mode: "on", depth: 1, caCerts: 1, matchCN: `CN\x3dAlice\x20Smith\x2cJr`},
		},
		"annotations without the Secret do nothing": {
			kv: []string{AnnotationAuthTLSVerifyClient, "on"}, wantWarning: ann + "auth-tls-verify-client]: has no effect without " + AnnotationAuthTLSSecret,
		},
		"an error page that is a path is ignored": {
			kv: with(AnnotationAuthTLSErrorPage, "/cert-error"), want: &on,
			wantWarning: ann + `auth-tls-error-page]: "/cert-error" is not an absolute http:// or https:// URL`,
		},
		"an error page with CRLF is ignored": {
			kv: with(AnnotationAuthTLSErrorPage, "https://e.example.com/\r\nSet-Cookie: a=1"), want: &on,
			wantWarning: ann + `auth-tls-error-page]: "https://e.example.com/\r\nSet-Cookie: a=1" is not`,
		},
		"pass-certificate not a boolean": {
			kv: with(AnnotationAuthTLSPassCert, "yes"), want: &on, wantWarning: ann + `auth-tls-pass-certificate-to-upstream]: "yes" is not a boolean`,
		},
		"an unknown mode": {
			kv:      with(AnnotationAuthTLSVerifyClient, "on; ssl_verify_client off"),
			wantErr: ann + `auth-tls-verify-client]: "on; ssl_verify_client off" is not a verification mode (want "on", "off", "optional" or "optional_no_ca")`,
		},
		"a depth that is no number": {
			kv: with(AnnotationAuthTLSVerifyDepth, "1;"), wantErr: ann + `auth-tls-verify-depth]: "1;" is not a depth (want an integer from 1 to 16)`,
		},
		"a negative depth": {kv: with(AnnotationAuthTLSVerifyDepth, "-1"), wantErr: ann + `auth-tls-verify-depth]: "-1" is not a depth`},
		"CVE-2025-1097: match-cn breaking out of nginx.conf": {
			kv:      with(AnnotationAuthTLSMatchCN, "CN=a\" ) { return 200; }\n#"),
			wantErr: ann + `auth-tls-match-cn]: "CN=a\" ) { return 200; }\n#": only printable ASCII and spaces are allowed`,
		},
		"match-cn that RE2 does not parse": {
			kv: with(AnnotationAuthTLSMatchCN, "CN=(a"), wantErr: ann + `auth-tls-match-cn]: "CN=(a": not a regular expression that Go's regexp (RE2) accepts: missing closing )`,
		},
		"match-cn with a back-reference": {
			kv: with(AnnotationAuthTLSMatchCN, `CN=(a)\1`), wantErr: `\1 is an octal escape for RE2 and a back-reference for PCRE`,
		},
		"match-cn with (?m)":        {kv: with(AnnotationAuthTLSMatchCN, `(?m)^CN=a$`), wantErr: `the multi-line flag (?m) is not supported`},
		"match-cn that is too long": {kv: with(AnnotationAuthTLSMatchCN, strings.Repeat("a", 1025)), wantErr: `1025 bytes long, more than the limit of 1024`},
		"match-cn that grows past the data plane's limit written for PCRE": {kv: with(AnnotationAuthTLSMatchCN, strings.Repeat(`\w`, 512)), wantErr: `bytes once written for NGINX's PCRE, more than the limit of 4096`},
		"another namespace's Secret": {
			kv:      []string{AnnotationAuthTLSSecret, "other/ca"},
			wantErr: ann + `auth-tls-secret]: "other/ca" is in namespace other; only Secrets of the Ingress's own namespace (default) may be used`,
		},
		"not an object name": {
			kv: []string{AnnotationAuthTLSSecret, "../ca"}, wantErr: ann + `auth-tls-secret]: "../ca" is not a Secret's namespace/name`,
		},
		"a missing Secret withdraws": {
			kv:      []string{AnnotationAuthTLSSecret, "gone"},
			wantErr: ann + `auth-tls-secret]: secret default/gone does not exist; the Ingress is not served until it is fixed`, wantWithdraw: true,
		},
		"no ca.crt": {
			kv: []string{AnnotationAuthTLSSecret, "noca"}, wantErr: `secret default/noca has no ca.crt`, wantWithdraw: true,
		},
		"a ca.crt that is no certificate": {
			kv: []string{AnnotationAuthTLSSecret, "garbage"}, wantErr: `secret default/garbage is not valid: ca.crt`, wantWithdraw: true,
		},
		"a CRL is refused, not ignored": {
			kv: []string{AnnotationAuthTLSSecret, "crl"}, wantErr: `secret default/crl has a ca.crl, and certificate revocation lists are not supported`, wantWithdraw: true,
		},
		"a ca.crt over 64 KiB": {
			kv: []string{AnnotationAuthTLSSecret, "big"}, wantErr: `bytes in ca.crt, more than the 65536 accepted`, wantWithdraw: true,
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
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantWarning != "" && !strings.Contains(strings.Join(got.Warnings, "\n"), tc.wantWarning) {
				t.Fatalf("warnings %q, want %q", got.Warnings, tc.wantWarning)
			}
			o := got.Options
			if tc.want == nil {
				if o != nil && o.ClientCertMode != "" {
					t.Fatalf("client certificates set: %+v", o)
				}
				return
			}
			if o == nil {
				t.Fatal("no route options")
			}
			w := tc.want
			if o.ClientCertMode != w.mode || o.ClientCertMatchCN != w.matchCN || o.ClientCertErrorPage != w.errorPage ||
				o.ClientCertPass != w.pass || o.ClientCADepth != w.depth {
				t.Fatalf("mode %q match %q page %q pass %v depth %d, want %+v", o.ClientCertMode, o.ClientCertMatchCN, o.ClientCertErrorPage,
					o.ClientCertPass, o.ClientCADepth, *w)
			}
			if n := strings.Count(o.ClientCA, "-----BEGIN CERTIFICATE-----"); n != w.caCerts || strings.Contains(o.ClientCA, "comment") {
				t.Fatalf("the CA holds %d certificates (%q), want %d, nothing else", n, o.ClientCA, w.caCerts)
			}
			if (o.ClientCAID != "") != (w.caCerts > 0) {
				t.Fatalf("CA id %q with %d certificates", o.ClientCAID, w.caCerts)
			}
		})
	}
}

// TestClientCAHostMerge: a host verifies client certificates with one CA. The oldest Ingress that
// verifies decides; another with a different CA or depth loses its rules for the host (a conflict),
// one with the same CA (another Secret) and Ingresses without auth-tls keep theirs.
func TestClientCAHostMerge(t *testing.T) {
	ca := newTestCA(t, "ca")
	other := newTestCA(t, "other")
	secrets := secretLookup{
		nn("default", "ca"):    clientCASecret("ca", map[string][]byte{"ca.crt": ca.pem}),
		nn("default", "same"):  clientCASecret("same", map[string][]byte{"ca.crt": ca.pem}),
		nn("default", "other"): clientCASecret("other", map[string][]byte{"ca.crt": other.pem}),
		nn("tenant", "ca"):     {ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "ca"}, Data: map[string][]byte{"ca.crt": ca.pem}},
	}
	svcs := servicesOf(service("default", "web", port(80, "http")), service("tenant", "web", port(80, "http")))
	ings := []*networkingv1.Ingress{
		ingress("default", "first", age(1), annotate(AnnotationAuthTLSSecret, "ca"), rule("a.example.com", prefix("/first", "web", 80))),
		ingress("default", "open", rule("a.example.com", prefix("/open", "web", 80))), // older, without auth-tls
		ingress("default", "same", age(2), annotate(AnnotationAuthTLSSecret, "same", AnnotationAuthTLSVerifyClient, "optional"),
			rule("a.example.com", prefix("/same", "web", 80))),
		ingress("default", "other-ca", age(3), annotate(AnnotationAuthTLSSecret, "other"),
			rule("a.example.com", prefix("/other", "web", 80)), rule("b.example.com", prefix("/", "web", 80))),
		ingress("default", "other-depth", age(4), annotate(AnnotationAuthTLSSecret, "ca", AnnotationAuthTLSVerifyDepth, "2"),
			rule("a.example.com", prefix("/depth", "web", 80))),
		// Another namespace, even with the same CA, does not make default's host ask for certificates.
		ingress("tenant", "tenant", age(5), annotate(AnnotationAuthTLSSecret, "ca"),
			rule("a.example.com", prefix("/tenant", "web", 80)), rule("c.example.com", prefix("/", "web", 80))),
	}
	build := NewModelBuilder().Build(BuildInput{Ingresses: ings, Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if len(build.Rejected) != 0 {
		t.Fatalf("rejected %+v", build.Rejected)
	}
	paths := map[Hostname][]string{}
	cas := map[Hostname]string{}
	for _, s := range build.Model.Servers {
		for _, l := range s.Locations {
			paths[s.Host] = append(paths[s.Host], l.Path)
		}
		if o := s.ClientCA(); o != nil {
			cas[s.Host] = o.ClientCA
		}
	}
	if got := strings.Join(paths["a.example.com"], " "); got != "/first /open /same" {
		t.Errorf("a.example.com serves %s, want /first /open /same", got)
	}
	if got := strings.Join(paths["b.example.com"], " "); got != "/" {
		t.Errorf("b.example.com serves %q: the other CA's Ingress keeps the hosts it alone verifies", got)
	}
	if got := strings.Join(paths["c.example.com"], " "); got != "/" {
		t.Errorf("c.example.com serves %q: the tenant verifies on its own host", got)
	}
	if cas["a.example.com"] != string(ca.pem) || cas["b.example.com"] != string(other.pem) || cas["c.example.com"] != string(ca.pem) {
		t.Errorf("hosts verify with the wrong CA")
	}
	if !build.Model.ClientCertificates() {
		t.Error("the model does not say that hosts verify client certificates")
	}
	var got []string
	for _, c := range build.Conflicts {
		if c.Kind == ConflictClientCANamespace {
			got = append(got, c.Loser.Name+"<ns:"+c.Winner.Name+"@"+string(c.Host))
			if !strings.Contains(c.Message(), "only Ingresses of that namespace may make the host's TLS handshakes ask") {
				t.Errorf("message %q", c.Message())
			}
		}
		if c.Kind == ConflictClientCA {
			got = append(got, c.Loser.Name+"<"+c.Winner.Name+"@"+string(c.Host))
			if !strings.Contains(c.Message(), "verifies client certificates with the CA of Ingress default/first") {
				t.Errorf("message %q", c.Message())
			}
		}
	}
	slices.Sort(got)
	if strings.Join(got, " ") != "other-ca<first@a.example.com other-depth<first@a.example.com tenant<ns:open@a.example.com" {
		t.Errorf("conflicts %v", got)
	}
	conf, _, err := Render(build.Model, baseRenderConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "ssl_session_cache off;") || strings.Contains(string(conf), "ssl_session_cache shared") {
		t.Error("nginx.conf keeps the TLS session cache while hosts verify client certificates")
	}
	empty := NewModelBuilder().Build(BuildInput{Ingresses: ings[1:2], Services: svcs, Secrets: secrets, Options: DefaultTranslateOptions()})
	if conf, _, err = Render(empty.Model, baseRenderConfig()); err != nil || !strings.Contains(string(conf), "ssl_session_cache shared:SSL:10m;") {
		t.Errorf("without client certificates the session cache is not on (%v)", err)
	}
}

// TestClientCABudget: the CA travels once per host of the Ingress; more than 256 KiB in all rejects it.
func TestClientCABudget(t *testing.T) {
	ca := newTestCA(t, "ca")
	bundle := []byte(strings.Repeat(string(ca.pem), 60000/len(ca.pem)))
	secrets := secretLookup{nn("default", "ca"): clientCASecret("ca", map[string][]byte{"ca.crt": bundle})}
	svcs := servicesOf(service("default", "web", port(80, "http")))
	var rules []ingressOption
	for _, h := range []string{"a", "b", "c", "d", "e"} {
		rules = append(rules, rule(h+".example.com", prefix("/", "web", 80)))
		opts := append([]ingressOption{annotate(AnnotationAuthTLSSecret, "ca")}, rules...)
		_, err := TranslateIngressWith(ingress("default", "a", opts...), Lookups{Services: svcs, Secrets: secrets}, DefaultTranslateOptions())
		over := len(bundle)*len(rules) > 256<<10
		if (err != nil) != over || over && !strings.Contains(err.Error(), "travel with each of the Ingress's 5 hosts") {
			t.Fatalf("%d hosts of %d bytes: err = %v", len(rules), len(bundle), err)
		}
	}
}

// TestClientCASecretIsWatched: the builder lists an Ingress as a user of its auth-tls-secret before
// translating it, so that the Secret's creation or change translates the Ingress again.
func TestClientCASecretIsWatched(t *testing.T) {
	ing := ingress("default", "a", annotate(AnnotationAuthTLSSecret, "client-ca"), rule("a.example.com", prefix("/", "web", 80)))
	b := NewModelBuilder()
	b.Build(BuildInput{Ingresses: []*networkingv1.Ingress{ing}, Services: servicesOf(service("default", "web", port(80, "http"))),
		Secrets: secretLookup{}, Options: DefaultTranslateOptions()})
	if !b.DependsOnObject(ObjectRef{Kind: KindSecret, Key: nn("default", "client-ca")}) {
		t.Fatal("the builder does not depend on the auth-tls-secret")
	}
}
