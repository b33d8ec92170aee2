package nginx

// enable-ocsp: OCSP stapling of the served certificates. Nothing of it reaches nginx.conf: the controller
// fetches and checks the responses (certs.OCSPStapler) and pushes them with the certificates, which
// certificates.lua staples in the handshake. Switching it changes no configuration, so no reload.

func init() {
	registerSettings(settingKey{Name: "enable-ocsp", Default: "false", Values: boolValues,
		Doc: "Staples OCSP responses to the handshakes of the served certificates that name an http OCSP responder and carry " +
			"their issuer in the chain (tls.crt). The controller fetches each response when the certificate arrives and again " +
			"halfway to the response's nextUpdate (hourly without one), retries failures after 1 minute doubling up to 1 hour, " +
			"and staples only responses signed by the issuer (or a responder it delegated OCSP signing to) for the certificate's " +
			"serial and not expired. A responder that fails never fails a handshake: the certificate is served without a staple " +
			"once its last response expires. The requests go out from the controller's pod to the responder URL that the " +
			"certificate itself names, so whoever may create a TLS Secret and an Ingress of this class chooses where the pod " +
			"sends a POST (as with ingress-nginx, whose NGINX made them from the same pod): no redirect is followed, each " +
			"request is bounded to 10 s and 64 KiB of answer, at most 4 run at once, and only an answer signed by the " +
			"certificate's issuer is ever used; restrict the pod's egress (a NetworkPolicy) where that matters.",
		Difference: "ingress-nginx fetched from NGINX on the first handshake of a certificate (which went out without a staple), kept the " +
			"response three days whatever its nextUpdate, and stapled only `good` responses. Here the controller fetches before " +
			"the first handshake, a response is stapled until its nextUpdate (24 hours after thisUpdate without one) and never " +
			"after, and a `revoked` response is stapled as returned. Switching the key needs no reload.",
		set: boolField(func(s *Settings) *bool { return &s.EnableOCSP })})
}
