// Package certs is the certificate domain of ingress-reactor: it turns
// Kubernetes TLS Secrets into validated certificates, keeps them as files an
// NGINX process can read, and makes the fake default certificate.
//
// It is plain Go: no fx, no modules, no informers. The secretsync module owns
// the reactive glue (which Secrets are referenced, Events, metrics) and calls
// into this package.
//
// # Parsing
//
// [ParseSecret] accepts a Secret of type kubernetes.io/tls, or Opaque (also
// an empty type) carrying tls.crt and tls.key, as ingress-nginx did. Any other
// type is rejected. [ParsePEM] does the same work on raw PEM.
//
//   - tls.crt must hold at least one CERTIFICATE block; every such block must
//     parse. Text outside PEM blocks and blocks of other types are ignored, as
//     OpenSSL ignores them. The first certificate is the leaf (the server
//     certificate) and the rest is the chain, in the order given. At most
//     [MaxChainCertificates] certificates of at most [MaxChainDERBytes] in
//     all are accepted: the whole chain travels in every handshake, and a
//     huge one breaks clients that cap that message (ingress-nginx served
//     any size).
//   - tls.key must hold an unencrypted RSA, ECDSA or Ed25519 private key in
//     PKCS#1, PKCS#8 or SEC 1 form, and it must belong to the leaf. RSA keys
//     must have at least 2048 bits, because the OpenSSL that NGINX links
//     against refuses smaller keys at its default security level and the
//     failure would otherwise surface later, at reload or handshake time.
//   - ca.crt is optional; when present and not empty every CERTIFICATE block
//     in it must parse. It is kept for client-certificate authentication and
//     is not used to judge the server certificate.
//   - Names come from the DNS subjectAltNames; the subject common name is
//     used only when the certificate has no DNS or IP subjectAltNames
//     (RFC 6125, section 6.4.4). Names are lower-cased without a trailing dot.
//
// Problems that NGINX tolerates and that would be an outage to refuse become
// [Certificate.Warnings] instead of errors: a chain whose certificates do not
// sign one another in order, or a certificate with no usable name.
//
// Every failure is an [*Error] whose message names the Secret and says what
// is wrong, for example "secret default/foo: tls.key does not match the
// certificate in tls.crt". Messages never contain key material; errors from
// the key parsers are replaced with fixed text rather than wrapped, because
// their wording is not under our control.
//
// # Expiry
//
// An expired certificate (or one not yet valid) parses without error and is
// served, as ingress-nginx did: replacing it with the fake certificate would
// not help any client, and refusing it would turn an expiry into a broken
// configuration. Callers flag it with [Certificate.Expired] and export
// [Certificate.ExpireTime] as a metric.
//
// # Key material
//
// The private key is held in an unexported field and read with
// [Certificate.KeyPEM] or [Certificate.PEM]. Certificate's String and
// GoString methods print metadata only, and its JSON form has no key, so a
// certificate passed to a logger by mistake does not leak the key.
//
// # Files
//
// [Store] writes certificates into the ssl directory (the --ssl-dir flag)
// as one file each: the certificate chain followed by the private key, mode
// 0600, in a directory kept at mode 0700. Only a file a process reads is
// written: today that is the generated default certificate
// ([FakeDefaultKey]), which nginx.conf names for both ssl_certificate and
// ssl_certificate_key. Certificates of Secrets, --default-ssl-certificate
// included, are never written: the secretsync module parses them and the
// reloader hands them to NGINX's workers through Lua (ssl_certificate_by_lua),
// so their private keys stay in memory. At start secretsync calls
// [Store.Prune] to remove Secret files an earlier version wrote.
// One file, rather than a certificate file and a key file, means a single
// rename replaces both, so a reload can never see a new certificate with an
// old key. A ca.crt, when present, goes into a second file because NGINX
// would otherwise read it as part of the chain.
//
// File names are "<namespace>_<name>.pem" and "<namespace>_<name>_ca.pem".
// Namespaces and names are checked against the Kubernetes DNS-1123 rules
// before they become file names, and "_" cannot occur in either, so names
// never collide and never leave the directory. Keys with an empty namespace
// are the controller's own certificates (see [FakeDefaultKey]) and are named
// "<name>.pem". A name too long for the file system is replaced by its
// SHA-256 (see [Store.Path]).
//
// Writes are atomic: a temporary file in the same directory is written,
// fsynced, set to 0600 and renamed over the old file, and then the directory
// is fsynced. A write whose content equals the file on disk is skipped.
//
// # The fake default certificate
//
// [GenerateFakeDefault] makes a self-signed ECDSA P-256 certificate for
// "ingress.local", valid for [FakeDefaultValidity]. It is made anew at every
// start and is only ever written to the ssl directory through [Store]. It is
// served to clients whose SNI matches no certificate, so it is short-lived on
// purpose: it carries no trust, and a long-running controller should call
// [GenerateFakeDefault] again once [Certificate.Expired] reports true for a
// time [FakeDefaultRenewBefore] ahead.
package certs
