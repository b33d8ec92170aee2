package nginx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs"
)

// Backend TLS (proxy-ssl-*): how NGINX authenticates to, and verifies, HTTPS and GRPCS backends.
const (
	// AnnotationProxySSLSecret names the Secret ("namespace/name") with the client certificate
	// (tls.crt, tls.key) and the CA (ca.crt) for the backends.
	AnnotationProxySSLSecret = IngressNginxPrefix + "proxy-ssl-secret"
	// AnnotationProxySSLVerify turns verification of the backends' certificates on or off.
	AnnotationProxySSLVerify      = IngressNginxPrefix + "proxy-ssl-verify"
	AnnotationProxySSLVerifyDepth = IngressNginxPrefix + "proxy-ssl-verify-depth"
	AnnotationProxySSLName        = IngressNginxPrefix + "proxy-ssl-name"
	AnnotationProxySSLServerName  = IngressNginxPrefix + "proxy-ssl-server-name"
	AnnotationProxySSLProtocols   = IngressNginxPrefix + "proxy-ssl-protocols"
	AnnotationProxySSLCiphers     = IngressNginxPrefix + "proxy-ssl-ciphers"
)

// BackendTLSDir is the directory, relative to the directory of nginx.conf (Paths.Prefix), that holds
// the backend TLS files. NGINX resolves the relative names in the profiles against it.
const BackendTLSDir = "backend-tls"

const proxySSLOnlyTLS = "Applies only with `backend-protocol` HTTPS or GRPCS (as `grpc_ssl_*`); with another protocol " +
	"it is ignored with a Warning, except `proxy-ssl-verify: on`, which then **rejects the Ingress** (its owner asked for " +
	"verified TLS and would get plain text)."

func init() {
	profile := func(name, values, def, diff string) AnnotationSpec {
		return AnnotationSpec{Name: name, Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values: values, Default: def, Difference: diff}
	}
	needsSecret := " Without `proxy-ssl-secret` it is ignored with a Warning, as ingress-nginx ignores it. An invalid value " +
		"**rejects the Ingress** (ingress-nginx fell back to its default): a backend's TLS settings decide who can read its traffic."
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			profile("proxy-ssl-secret", "`namespace/name` of a Secret in the Ingress's own namespace (a bare `name` means that "+
				"namespace too) holding `ca.crt` (PEM CA certificates that verify the backend), `tls.crt` and `tls.key` (a PEM "+
				"client certificate and its key, presented to the backend), or all three",
				"none: NGINX presents no client certificate and trusts no CA",
				"A **profile setting**: the Secret's content is written by the controller into NGINX's directory (`"+BackendTLSDir+
					"/`, mode 0600, named after the Secret and a hash of its content), never into nginx.conf; a change of the "+
					"Secret's content is a new profile and reloads NGINX once. Each such profile has an upstream block of its own, so that NGINX's idle "+
					"connections to a backend, opened with one profile's client certificate and verification, never carry another profile's "+
					"requests. A Secret in **another namespace is refused** "+
					"(one tenant must not present another's client key); ingress-nginx allowed that only with "+
					"`--allow-cross-namespace-resources`, which does not exist here. A Secret that is missing, has an "+
					"unparsable certificate, a key that does not match `tls.crt`, only one of `tls.crt`/`tls.key`, or no "+
					"`ca.crt` while `proxy-ssl-verify` is on **rejects the Ingress** with a Warning, until the Secret is fixed; "+
					"unlike other rejections, its last good version is **not** kept serving, since it would go on using the "+
					"deleted or replaced Secret's key and CA (ingress-nginx denied the paths, 503). "+proxySSLOnlyTLS),
			profile("proxy-ssl-verify", "`on` or `off`", "`off` (as ingress-nginx)",
				"`on` without `proxy-ssl-secret`, or with a Secret without `ca.crt`, **rejects the Ingress**: verification "+
					"is never turned off silently. Any other value than `on`/`off` rejects it too (ingress-nginx fell back to off). "+
					proxySSLOnlyTLS),
			profile("proxy-ssl-verify-depth", "an integer from 1 to 100", "`1` (as ingress-nginx and NGINX)",
				"Written only with `proxy-ssl-verify: on`, where it has an effect."+needsSecret),
			profile("proxy-ssl-name", "a DNS name (`backend.example.com`); it is verified against the backend's "+
				"certificate and sent in SNI when `proxy-ssl-server-name` is on", "NGINX's: the host of the `proxy_pass` URL, "+
				"which is the internal upstream's name here, so set it whenever `proxy-ssl-verify` is on",
				"NGINX variables are not accepted."+needsSecret),
			profile("proxy-ssl-server-name", "`on` or `off`", "`off`: no SNI is sent to the backend", strings.TrimSpace(needsSecret)),
			profile("proxy-ssl-protocols", "space-separated, from `SSLv2`, `SSLv3`, `TLSv1`, `TLSv1.1`, `TLSv1.2`, `TLSv1.3`",
				"NGINX's (`TLSv1 TLSv1.1 TLSv1.2 TLSv1.3`)",
				"ingress-nginx's default left out TLS 1.3 (`TLSv1 TLSv1.1 TLSv1.2`); here a backend may use TLS 1.3 unless "+
					"the annotation says otherwise."+needsSecret),
			profile("proxy-ssl-ciphers", "an OpenSSL cipher list: letters, digits and `+`, `:`, `_`, `-`, `!`",
				"NGINX's (`DEFAULT`)", "A list OpenSSL does not know fails NGINX's configuration test: the Ingresses of "+
					"that profile are quarantined with a Warning."+needsSecret),
		},
		apply: applyProxySSL,
	})
	registerProfileDirectives(proxySSLDirectives)
}

// BackendTLSFiles is the material of one proxy-ssl-secret as NGINX reads it: the client certificate's
// chain followed by its key, and the CA certificates. Its fields are unexported, so that reflection
// (loggers, JSON) never sees the key; the content is immutable.
type BackendTLSFiles struct {
	// Stem names the files: "<namespace>_<name>_<hash>", the hash covering the Secret's key and the
	// content, so that a change of content is a new name (and a new profile).
	Stem string
	// certAndKey is the PEM chain followed by the PEM key; nil without a client certificate.
	certAndKey []byte
	// ca is the PEM CA certificates; nil without ca.crt.
	ca []byte
}

// String names the files without their content.
func (f *BackendTLSFiles) String() string { return "backend TLS files " + f.Stem }

// GoString is String, so that %#v never prints the key.
func (f *BackendTLSFiles) GoString() string { return f.String() }

// CertFile and CAFile are the files' names relative to the directory of nginx.conf.
func (f *BackendTLSFiles) CertFile() string { return backendTLSCertFile(f.Stem) }

// CAFile: see CertFile.
func (f *BackendTLSFiles) CAFile() string { return backendTLSCAFile(f.Stem) }

func backendTLSCertFile(stem string) string { return BackendTLSDir + "/" + stem + ".pem" }
func backendTLSCAFile(stem string) string   { return BackendTLSDir + "/" + stem + "-ca.pem" }

// maxStemKey bounds the "<namespace>_<name>" part of a stem, so that a file name stays under 255 bytes.
const maxStemKey = 180

// newBackendTLSFiles names the validated material of Secret key.
func newBackendTLSFiles(key types.NamespacedName, certAndKey, ca []byte) *BackendTLSFiles {
	h := sha256.New()
	h.Write([]byte(key.String()))
	h.Write([]byte{0})
	h.Write(certAndKey)
	h.Write([]byte{0})
	h.Write(ca)
	prefix := key.Namespace + "_" + key.Name
	if len(prefix) > maxStemKey {
		prefix = prefix[:maxStemKey]
	}
	return &BackendTLSFiles{Stem: prefix + "_" + hex.EncodeToString(h.Sum(nil)[:16]), certAndKey: certAndKey, ca: ca}
}

var (
	proxySSLCiphers   = regexp.MustCompile(`^[A-Za-z0-9+:_!-]+$`)
	proxySSLProtocols = []string{"SSLv2", "SSLv3", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}
)

// maxCiphers bounds proxy-ssl-ciphers.
const maxCiphers = 1024

// parseOnOff reads an on/off annotation ("on", "off", any case and spaces; ingress-nginx's values).
func parseOnOff(raw string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "on":
		return true, true
	case "off":
		return false, true
	}
	return false, false
}

// applyProxySSL reads the proxy-ssl-* annotations into the Ingress's profile and the backend TLS
// files. Every invalid value rejects the Ingress: a backend's TLS settings decide who can read and
// impersonate its traffic.
func applyProxySSL(t *translator) {
	ann := t.ing.Annotations
	bad := func(name, raw, want string) {
		t.fail("metadata.annotations[%s]: %s is not valid (want %s)", name, quoteValue(raw), want)
	}
	var s ProfileSettings
	if raw, ok := ann[AnnotationProxySSLVerify]; ok {
		v, valid := parseOnOff(raw)
		if !valid {
			bad(AnnotationProxySSLVerify, raw, "on or off")
		}
		s.ProxySSLVerify = v
	}
	if raw, ok := ann[AnnotationProxySSLVerifyDepth]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || n < 1 || n > 100 {
			bad(AnnotationProxySSLVerifyDepth, raw, "an integer from 1 to 100")
		}
		s.ProxySSLVerifyDepth = n
	}
	if raw, ok := ann[AnnotationProxySSLName]; ok {
		v := strings.ToLower(strings.TrimSpace(raw))
		if err := ValidateHost(v); err != nil || strings.HasPrefix(v, "*.") {
			bad(AnnotationProxySSLName, raw, "a DNS name such as backend.example.com")
		}
		s.ProxySSLName = v
	}
	if raw, ok := ann[AnnotationProxySSLServerName]; ok {
		v, valid := parseOnOff(raw)
		if !valid {
			bad(AnnotationProxySSLServerName, raw, "on or off")
		}
		s.ProxySSLServerName = v
	}
	if raw, ok := ann[AnnotationProxySSLProtocols]; ok {
		var list []string
		for _, f := range strings.Fields(raw) {
			if !slices.Contains(proxySSLProtocols, f) {
				list = nil
				break
			}
			list = append(list, f)
		}
		if len(list) == 0 {
			bad(AnnotationProxySSLProtocols, raw, "protocols from "+strings.Join(proxySSLProtocols, ", ")+", separated by spaces")
		}
		slices.Sort(list)
		s.ProxySSLProtocols = strings.Join(slices.Compact(list), " ")
	}
	if raw, ok := ann[AnnotationProxySSLCiphers]; ok {
		v := strings.TrimSpace(raw)
		if len(v) > maxCiphers || !proxySSLCiphers.MatchString(v) {
			bad(AnnotationProxySSLCiphers, raw, "an OpenSSL cipher list of letters, digits and + : _ - !")
		}
		s.ProxySSLCiphers = v
	}

	_, hasSecret := ann[AnnotationProxySSLSecret]
	var key types.NamespacedName
	if hasSecret {
		var ok bool
		if key, ok = t.ownObjectKey(AnnotationProxySSLSecret, "Secret", "default/backend-tls"); !ok {
			return
		}
	}
	tls := t.profile.BackendProtocol == "HTTPS" || t.profile.BackendProtocol == "GRPCS"
	if !tls {
		if s.ProxySSLVerify {
			t.fail("metadata.annotations[%s]: verification asks for TLS to the backends, but %s is not HTTPS or GRPCS; "+
				"the Ingress is not served rather than served over plain text", AnnotationProxySSLVerify, AnnotationBackendProtocol)
			return
		}
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations: the proxy-ssl-* annotations apply only when %s is "+
			"HTTPS or GRPCS; ignored", AnnotationBackendProtocol))
		return
	}
	if !hasSecret {
		if s.ProxySSLVerify {
			t.fail("metadata.annotations[%s]: verification needs the CA of %s (a Secret with ca.crt); the Ingress is not served "+
				"rather than served without verification", AnnotationProxySSLVerify, AnnotationProxySSLSecret)
			return
		}
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations: the proxy-ssl-* annotations apply only with %s, "+
			"as in ingress-nginx; ignored", AnnotationProxySSLSecret))
		return
	}
	files, reason := t.backendTLSSecret(key, s.ProxySSLVerify)
	if reason != "" {
		// Not even the last good version stays served: it would go on presenting the client certificate
		// and trusting the CA of a Secret that was deleted or replaced (ingress-nginx denied the paths).
		t.withdraw = true
		t.fail("metadata.annotations[%s]: secret %s %s; the Ingress is not served until it is fixed", AnnotationProxySSLSecret, key, reason)
		return
	}
	if s.ProxySSLVerify && files.ca == nil {
		t.withdraw = true
		t.fail("metadata.annotations[%s]: secret %s has an empty %s, which proxy-ssl-verify needs to verify the backends; the Ingress is not served "+
			"until it is fixed", AnnotationProxySSLSecret, key, certs.CAKey)
		return
	}
	s.ProxySSLFiles = files.Stem
	s.ProxySSLClientCert = files.certAndKey != nil
	s.ProxySSLCA = files.ca != nil
	if !s.ProxySSLVerify {
		s.ProxySSLVerifyDepth = 0 // written only with verification
	} else if s.ProxySSLVerifyDepth == 0 {
		s.ProxySSLVerifyDepth = 1
	}
	if s.ProxySSLVerify && s.ProxySSLName == "" {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: verification without %s checks the backends' "+
			"certificates against the name of NGINX's internal upstream, which no certificate holds, so every request gets 502; set it "+
			"to the name in the backends' certificates", AnnotationProxySSLVerify, AnnotationProxySSLName))
	}
	p := &t.profile
	p.ProxySSLFiles, p.ProxySSLClientCert, p.ProxySSLCA = s.ProxySSLFiles, s.ProxySSLClientCert, s.ProxySSLCA
	p.ProxySSLVerify, p.ProxySSLVerifyDepth, p.ProxySSLName, p.ProxySSLServerName = s.ProxySSLVerify, s.ProxySSLVerifyDepth, s.ProxySSLName, s.ProxySSLServerName
	p.ProxySSLProtocols, p.ProxySSLCiphers = s.ProxySSLProtocols, s.ProxySSLCiphers
	t.out.setRare().backendTLS = files
}

// backendTLSSecret reads and validates the Secret of proxy-ssl-secret, or says what is wrong with it
// (without any of its content).
func (t *translator) backendTLSSecret(key types.NamespacedName, verify bool) (*BackendTLSFiles, string) {
	sec, ok := t.lk.secret(key)
	ref := ObjectRef{Kind: KindSecret, Key: key}
	if !ok {
		t.recordMissing(ref)
		return nil, "does not exist"
	}
	t.recordObject(ref, sec.ResourceVersion)
	switch sec.Type {
	case corev1.SecretTypeTLS, corev1.SecretTypeOpaque, "":
	default:
		return nil, fmt.Sprintf("has type %q (want %s or %s)", sec.Type, corev1.SecretTypeTLS, corev1.SecretTypeOpaque)
	}
	crt, hasCrt := sec.Data[certs.CertKey]
	keyPEM, hasKey := sec.Data[certs.PrivateKeyKey]
	caPEM, hasCA := sec.Data[certs.CAKey]
	if verify && !hasCA {
		return nil, "has no " + certs.CAKey + ", which proxy-ssl-verify needs to verify the backends"
	}
	switch {
	case hasCrt != hasKey:
		return nil, "holds only one of " + certs.CertKey + " and " + certs.PrivateKeyKey + " (a client certificate needs both)"
	case hasCrt:
		c, err := certs.ParsePEM(key, crt, keyPEM, caPEM)
		if err != nil {
			return nil, "is not valid: " + strings.TrimPrefix(err.Error(), "secret "+key.String()+": ")
		}
		return newBackendTLSFiles(key, append(slices.Clip(c.ChainPEM), c.KeyPEM()...), c.CAPEM), ""
	case hasCA:
		ca, err := certs.ParseCA(key, caPEM)
		if err != nil {
			return nil, "is not valid: " + strings.TrimPrefix(err.Error(), "secret "+key.String()+": ")
		}
		return newBackendTLSFiles(key, nil, ca), ""
	}
	return nil, "holds neither " + certs.CAKey + " nor " + certs.CertKey + " and " + certs.PrivateKeyKey
}

// OwnUpstream is the name of the upstream block that p's requests go through when it must not share
// upstream_balancer, or "". A profile with backend TLS files has its own (with the same Lua balancer):
// NGINX keeps idle upstream connections per upstream block and reuses one for any request to the same
// address, so that a connection opened with one profile's client certificate, or without its
// verification, would otherwise carry another profile's requests.
func (p ProfileSettings) OwnUpstream() string {
	if p.ProxySSLFiles == "" {
		return ""
	}
	return p.Name() + "_tls"
}

// refusedWithoutLine reports whether an "nginx -t" message (msg) is about p's backend TLS settings.
// NGINX loads the certificates and sets the ciphers of a location while it merges the settings, and then
// names no line of nginx.conf: it names the file ("backend-tls/<stem>...", which only p's Secret content
// has) or the cipher list.
func (p ProfileSettings) refusedWithoutLine(msg string) bool {
	if p.ProxySSLFiles == "" {
		return false
	}
	if strings.Contains(msg, "/"+BackendTLSDir+"/"+p.ProxySSLFiles+".pem") || strings.Contains(msg, "/"+BackendTLSDir+"/"+p.ProxySSLFiles+"-ca.pem") {
		return true
	}
	return p.ProxySSLCiphers != "" && strings.Contains(msg, `_cipher_list("`+p.ProxySSLCiphers+`")`)
}

// proxySSLDirectives writes the backend TLS settings of p: proxy_ssl_* for HTTPS, grpc_ssl_* for GRPCS.
func proxySSLDirectives(p ProfileSettings, out []string) []string {
	if p.ProxySSLFiles == "" {
		return out
	}
	pre := "proxy_ssl_"
	if p.usesGRPC() {
		pre = "grpc_ssl_"
	}
	if p.ProxySSLCA {
		out = append(out, pre+"trusted_certificate "+backendTLSCAFile(p.ProxySSLFiles))
	}
	if p.ProxySSLClientCert {
		out = append(out, pre+"certificate "+backendTLSCertFile(p.ProxySSLFiles), pre+"certificate_key "+backendTLSCertFile(p.ProxySSLFiles))
	}
	if p.ProxySSLVerify {
		out = append(out, pre+"verify on", pre+"verify_depth "+strconv.Itoa(p.ProxySSLVerifyDepth))
	}
	out = appendDirective(out, pre+"name", p.ProxySSLName)
	if p.ProxySSLServerName {
		out = append(out, pre+"server_name on")
	}
	out = appendDirective(out, pre+"protocols", p.ProxySSLProtocols)
	out = appendDirective(out, pre+"ciphers", p.ProxySSLCiphers)
	return out
}
