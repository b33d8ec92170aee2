package nginx

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp/syntax"
	"strconv"
	"strings"

	"github.com/ingress-reactor/ingress-reactor/certs"
)

// Client certificate authentication (auth-tls-*). NGINX has one TLS server for every host here, so the
// CA cannot be a server directive: the CA travels with the host's routes (route data), the handshake
// of a host asks for and verifies a client certificate with it from ssl_certificate_by_lua
// (ngx.ssl.verify_client, certificates.lua), and the router checks the verdict, $ssl_client_verify, for
// each route of an Ingress with auth-tls-secret (router.lua). No file is written and no change reloads,
// except that NGINX's TLS session cache is off while any host verifies client certificates (see
// Model.ClientCertificates).
const (
	AnnotationAuthTLSSecret       = IngressNginxPrefix + "auth-tls-secret"
	AnnotationAuthTLSVerifyClient = IngressNginxPrefix + "auth-tls-verify-client"
	AnnotationAuthTLSVerifyDepth  = IngressNginxPrefix + "auth-tls-verify-depth"
	AnnotationAuthTLSErrorPage    = IngressNginxPrefix + "auth-tls-error-page"
	AnnotationAuthTLSPassCert     = IngressNginxPrefix + "auth-tls-pass-certificate-to-upstream"
	AnnotationAuthTLSMatchCN      = IngressNginxPrefix + "auth-tls-match-cn"
)

// ClientCRLKey is the Secret key of a certificate revocation list for auth-tls-secret. The
// controller's Secret cache keeps it, so that a Secret with one is refused rather than served without it.
const ClientCRLKey = "ca.crl"

// Client certificate modes (auth-tls-verify-client), as NGINX's ssl_verify_client names them.
const (
	ClientCertOn           = "on"
	ClientCertOff          = "off"
	ClientCertOptional     = "optional"
	ClientCertOptionalNoCA = "optional_no_ca"
)

// Bounds of client certificate authentication.
const (
	// maxClientCABytes bounds the CA certificates of one Secret; they travel once per host entry, and
	// maxClientCAPushBytes bounds them times the hosts of the Ingress.
	maxClientCABytes     = 64 << 10
	maxClientCAPushBytes = 256 << 10
	maxClientDepth       = 16
	maxMatchCN           = 1024
	maxErrorPageURL      = 2048
)

func init() {
	spec := func(name, values, def, diff string) AnnotationSpec {
		return AnnotationSpec{Name: name, Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			RestrictsAccess: true, Values: values, Default: def, Difference: diff}
	}
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			spec("auth-tls-secret", "`namespace/name` of a Secret in the Ingress's own namespace (a bare `name` means that namespace too) "+
				"whose `ca.crt` holds the PEM CA certificates that client certificates must chain to",
				"none: no client certificate authentication",
				"**Route data**, checked per Ingress, not per host: the handshake of a host asks for a client certificate "+
					"of the host's CA (from Lua, `ngx.ssl.verify_client`, since one TLS server serves every host), and only the "+
					"routes of Ingresses with `auth-tls-secret` (and the requests that fall back to such an Ingress's "+
					"`default-backend`) check the verdict; a path of another Ingress on the same host "+
					"stays as its own Ingress says (**ingress-nginx applied the check to the whole host**: when migrating, give "+
					"every Ingress of a protected host the annotation), and its backend never gets a client's own `ssl-client-*` "+
					"headers. A host verifies with one "+
					"CA: when Ingresses of a host name Secrets with different `ca.crt` (or depths), the oldest decides and the "+
					"others' rules for the host are **not served**, with a Warning; likewise an Ingress with `auth-tls-secret` "+
					"of another namespace than the host's oldest Ingress (a namespace never makes another's host ask its "+
					"clients for certificates). A request whose TLS connection was "+
					"negotiated for another name (SNI) than its Host, or without SNI, when that name's handshake did not verify "+
					"with the route's CA, gets **421** (NGINX does the same when `ssl_verify_client` is on). A Secret in **another "+
					"namespace is refused**; a missing Secret, no or invalid `ca.crt`, or more than 64 KiB of it, **rejects the "+
					"Ingress** and its last good version is not kept serving; so does a `ca.crt` that, times the Ingress's hosts, "+
					"exceeds 256 KiB (it travels once per host). A `ca.crl` **rejects the Ingress** (ingress-nginx "+
					"applied it with `ssl_crl`): the handshake verifies with `ngx.ssl.verify_client` (lua-nginx-module 0.10.23, "+
					"lua-resty-core 0.1.25), which takes CA certificates and a depth but no revocation list and gives each connection "+
					"a certificate store of its own, so neither it nor an `ssl_crl` of nginx.conf (the TLS server's store, which that "+
					"replaces) checks revocation; serving the Ingress without the list would admit revoked certificates. A change of a host's CA "+
					"reloads NGINX once (as in ingress-nginx), so that connections verified with the old CA are closed. While any host verifies client certificates, "+
					"NGINX's TLS session cache is **off for every host** (turning it off or on again reloads NGINX once): "+
					"with one TLS server, a session verified for one host could otherwise be resumed on another host "+
					"without verification."),
			spec("auth-tls-verify-client", "`on`, `off`, `optional`, `optional_no_ca`", "`on`",
				"As NGINX's `ssl_verify_client`: `on` answers 400 without a certificate or with one that does not verify, "+
					"`optional` only with one that does not verify, `optional_no_ca` never; `off` asks for none (the "+
					"`ssl-client-verify` header then says `NONE`). Another value **rejects the Ingress** (ingress-nginx used `on`)."),
			spec("auth-tls-verify-depth", "an integer from 1 to 16", "`1`",
				"As ingress-nginx, 0 means 1. Another value **rejects the Ingress** (it changes which certificates verify)."),
			spec("auth-tls-error-page", "an absolute `http://` or `https://` URL with a host, printable ASCII, at most 2048 bytes", "none: the 400 itself",
				"Instead of the 400 of a missing or unverified certificate, a **302** to the URL, as NGINX's `error_page 495 496 = URL` "+
					"answered. A path or a named location (an internal redirect in ingress-nginx) is **ignored with a Warning**, as "+
					"is any other value: the client then gets the 400."),
			spec("auth-tls-pass-certificate-to-upstream", "a boolean: `true` or `false` (as Go's strconv.ParseBool)", "`false`",
				"With `true` the backend gets the client certificate as URL-escaped PEM in `ssl-client-cert`, as ingress-nginx sent "+
					"it; with `false` an `ssl-client-cert` header from the client is **removed** (ingress-nginx passed it through). "+
					"`ssl-client-verify`, `ssl-client-subject-dn` and `ssl-client-issuer-dn` are always set from the connection on "+
					"the Ingress's routes, replacing the client's own. Another value is ignored with a Warning (`false`)."),
			spec("auth-tls-match-cn", "a regular expression (RE2 and PCRE alike, printable ASCII, at most 1024 bytes) searched in the "+
				"client certificate's subject DN (`CN=alice,O=example`), e.g. `CN=(alice|bob)`", "none",
				"As ingress-nginx: unanchored and case-sensitive, 403 when it does not match (also without a certificate). The "+
					"pattern is parsed by Go and written anew for NGINX's PCRE, never copied into a configuration (ingress-nginx "+
					"wrote it into nginx.conf, which allowed configuration injection, CVE-2025-1097); constructs that RE2 and PCRE "+
					"read differently are refused. An invalid pattern **rejects the Ingress**."),
		},
		apply: applyClientCert,
	})
}

// applyClientCert reads the auth-tls-* annotations into the Ingress's route options. Invalid values
// that decide who gets in reject the Ingress; the cosmetic ones are ignored with a Warning.
func applyClientCert(t *translator) {
	ann := t.ing.Annotations
	raw, ok := ann[AnnotationAuthTLSSecret]
	if !ok {
		for _, a := range []string{AnnotationAuthTLSVerifyClient, AnnotationAuthTLSVerifyDepth, AnnotationAuthTLSErrorPage,
			AnnotationAuthTLSPassCert, AnnotationAuthTLSMatchCN} {
			if _, ok := ann[a]; ok {
				t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has no effect without %s; ignored", a, AnnotationAuthTLSSecret))
			}
		}
		return
	}
	mode := ClientCertOn
	if v, ok := ann[AnnotationAuthTLSVerifyClient]; ok {
		switch m := strings.TrimSpace(v); m {
		case ClientCertOn, ClientCertOff, ClientCertOptional, ClientCertOptionalNoCA:
			mode = m
		default:
			t.fail("metadata.annotations[%s]: %s is not a verification mode (want \"on\", \"off\", \"optional\" or \"optional_no_ca\")",
				AnnotationAuthTLSVerifyClient, quoteValue(v))
			return
		}
	}
	depth := 1
	if v, ok := ann[AnnotationAuthTLSVerifyDepth]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > maxClientDepth {
			t.fail("metadata.annotations[%s]: %s is not a depth (want an integer from 1 to %d)", AnnotationAuthTLSVerifyDepth, quoteValue(v), maxClientDepth)
			return
		}
		if n > 0 {
			depth = n
		}
	}
	var matchCN string
	if v, ok := ann[AnnotationAuthTLSMatchCN]; ok && v != "" {
		pcre, err := compileMatchCN(v)
		if err != nil {
			t.fail("metadata.annotations[%s]: %s: %v; the Ingress is not served rather than served without the check",
				AnnotationAuthTLSMatchCN, quoteValue(v), err)
			return
		}
		matchCN = pcre
	}
	errorPage := ""
	if v, ok := ann[AnnotationAuthTLSErrorPage]; ok {
		if u, ok := errorPageURL(v); ok {
			errorPage = u
		} else {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is not an absolute http:// or https:// URL "+
				"with a host of at most %d bytes of printable ASCII (paths and named locations are not supported); ignored, the "+
				"client gets the 400", AnnotationAuthTLSErrorPage, quoteValue(v), maxErrorPageURL))
		}
	}
	pass := false
	if v, ok := ann[AnnotationAuthTLSPassCert]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is not a boolean (want \"true\" or \"false\"); ignored",
				AnnotationAuthTLSPassCert, quoteValue(v)))
		} else {
			pass = b
		}
	}
	key, err := parseObjectKey(t.ing.Namespace, raw)
	if err != nil {
		t.fail("metadata.annotations[%s]: %s is not a Secret's namespace/name (want lowercase RFC 1123 names such as "+
			"\"default/client-ca\")", AnnotationAuthTLSSecret, quoteValue(raw))
		return
	}
	if key.Namespace != t.ing.Namespace {
		t.fail("metadata.annotations[%s]: %s is in namespace %s; only Secrets of the Ingress's own namespace (%s) may be used",
			AnnotationAuthTLSSecret, quoteValue(raw), key.Namespace, t.ing.Namespace)
		return
	}
	ref := ObjectRef{Kind: KindSecret, Key: key}
	sec, found := t.lk.secret(key)
	var ca []byte
	reason := ""
	switch {
	case !found:
		t.recordMissing(ref)
		reason = "does not exist"
	default:
		t.recordObject(ref, sec.ResourceVersion)
		caPEM, hasCA := sec.Data[certs.CAKey]
		_, hasCRL := sec.Data[ClientCRLKey]
		switch {
		case !hasCA:
			reason = "has no " + certs.CAKey + " (the CA certificates that client certificates must chain to)"
		case hasCRL:
			reason = "has a " + ClientCRLKey + ", and certificate revocation lists are not supported; remove it, or the Ingress stays " +
				"unserved rather than served without revocation checks"
		case len(caPEM) > maxClientCABytes:
			reason = fmt.Sprintf("has %d bytes in %s, more than the %d accepted", len(caPEM), certs.CAKey, maxClientCABytes)
		default:
			ca, err = certs.ParseCA(key, caPEM)
			if err != nil {
				reason = "is not valid: " + strings.TrimPrefix(err.Error(), "secret "+key.String()+": ")
			}
		}
	}
	if reason != "" {
		// Not even the last good version stays served: it would go on admitting certificates of a CA
		// that was removed from the Secret.
		t.withdraw = true
		t.fail("metadata.annotations[%s]: secret %s %s; the Ingress is not served until it is fixed", AnnotationAuthTLSSecret, key, reason)
		return
	}
	o := t.options()
	o.ClientCertMode = mode
	o.ClientCertMatchCN = matchCN
	o.ClientCertErrorPage = errorPage
	o.ClientCertPass = pass
	if mode == ClientCertOff {
		return // asks for no certificate: the host's CA is not this Ingress's to choose
	}
	o.ClientCA = string(ca)
	o.ClientCADepth = depth
	sum := sha256.Sum256(fmt.Appendf(nil, "%d\n%s", depth, ca))
	o.ClientCAID = hex.EncodeToString(sum[:12])
}

// clientCABudget rejects an Ingress whose client CA, carried once per host entry, would take more than
// maxClientCAPushBytes of the routes dict.
func (t *translator) clientCABudget() {
	o := t.out.Options
	if o == nil || o.ClientCA == "" {
		return
	}
	hosts := map[Hostname]bool{}
	for _, r := range t.out.Routes {
		hosts[r.Host] = true
	}
	if n := len(o.ClientCA) * len(hosts); n > maxClientCAPushBytes {
		t.fail("metadata.annotations[%s]: its CA certificates (%d bytes) travel with each of the Ingress's %d hosts, %d bytes in all, more "+
			"than the %d one Ingress may add to the data plane's routes; use fewer CA certificates or hosts", AnnotationAuthTLSSecret,
			len(o.ClientCA), len(hosts), n, maxClientCAPushBytes)
	}
}

// compileMatchCN parses an auth-tls-match-cn pattern with Go's regexp (case-sensitive, unanchored, as
// NGINX's "!~" matched it) and writes it anew for NGINX's PCRE, refusing what the two read differently.
func compileMatchCN(p string) (string, error) { return compileUserPCRE(p, maxMatchCN) }

// compileUserPCRE parses a pattern of an annotation with Go's regexp and writes it anew for NGINX's
// PCRE, refusing what the two read differently, and patterns longer than limit bytes.
func compileUserPCRE(p string, limit int) (string, error) {
	if len(p) > limit {
		return "", fmt.Errorf("%d bytes long, more than the limit of %d", len(p), limit)
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r > '~' }) {
		return "", fmt.Errorf("only printable ASCII and spaces are allowed")
	}
	if why := pcreTextProblem(p); why != "" {
		return "", errors.New(why)
	}
	tree, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return "", fmt.Errorf("not a regular expression that Go's regexp (RE2) accepts: %s", regexErrorReason(err))
	}
	if err := checkRegexTree(tree, p); err != nil {
		return "", fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "path "+strconv.Quote(p)+": "))
	}
	w := pcreWriter{}
	w.write(tree)
	if n := w.b.Len(); n > maxPCREPattern {
		// The rewrite can grow a pattern ("." becomes a class of 20 bytes): configuration.lua refuses a
		// longer one, and with it the whole host's routes.
		return "", fmt.Errorf("%d bytes once written for NGINX's PCRE, more than the limit of %d", n, maxPCREPattern)
	}
	return w.b.String(), nil
}

// maxPCREPattern is the longest pattern (as written for PCRE) that configuration.lua accepts in route data
// (auth-tls-match-cn's "match_cn", the canary's "header_pattern").
const maxPCREPattern = 4096

// errorPageURL checks an auth-tls-error-page value: an absolute http or https URL with a host, printable
// ASCII (so that it cannot split or extend the Location header).
func errorPageURL(raw string) (string, bool) {
	v := strings.TrimSpace(raw)
	if v == "" || len(v) > maxErrorPageURL || !printableASCII(v) {
		return "", false
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		!strings.HasPrefix(strings.ToLower(v), u.Scheme+"://") {
		return "", false
	}
	return v, true
}
