package nginx

// AnnotationSSLPassthrough ("true") hands the Ingress's TLS connections to its backend undecrypted. The
// passthrough module reads it; translation only lists it in the registry.
const AnnotationSSLPassthrough = IngressNginxPrefix + "ssl-passthrough"

func init() {
	registerAnnotationGroup(annotationGroup{specs: []AnnotationSpec{{
		Name: "ssl-passthrough", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindModule,
		Values:  "a boolean: `true` or `false`",
		Default: "`false`",
		Difference: "Read by the passthrough module, and only with `--enable-ssl-passthrough` (as in ingress-nginx); see [ssl-passthrough.md](ssl-passthrough.md). " +
			"An invalid value leaves the Ingress to NGINX, with a Warning. Ours in addition: the backend may get a PROXY protocol header " +
			"(`ingress-reactor.io/ssl-passthrough-proxy-protocol`).",
	}}})
}
