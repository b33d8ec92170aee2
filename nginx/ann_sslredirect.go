package nginx

// AnnotationSSLRedirect ("false") keeps plain HTTP for the Ingress's paths on hosts with TLS, which are
// otherwise redirected to HTTPS.
const AnnotationSSLRedirect = IngressNginxPrefix + "ssl-redirect"

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name:    "ssl-redirect",
			Origin:  OriginDocumented,
			Status:  AnnotationSupported,
			Kind:    KindRouteData,
			Values:  "a boolean: `true` or `false` (also `1`, `t`, `TRUE`, `0`, `f`, `FALSE`, ... as Go's strconv.ParseBool, which ingress-nginx uses too); spaces around it are trimmed",
			Default: "`true` (plain HTTP to a host with TLS gets a 308 (the ConfigMap's `http-redirect-code`) to HTTPS)",
			Difference: "Applies to this Ingress's paths only: on a host that several namespaces share, one namespace's `spec.tls` never " +
				"redirects another namespace's paths (see [migration.md](migration.md)). An invalid value **rejects the Ingress** " +
				"(its last good version keeps being served); ingress-nginx logged it and used the default.",
		}},
		apply: applySSLRedirect,
	})
}

// applySSLRedirect overrides the controller-wide redirect default for the Ingress's paths. An invalid
// value rejects the Ingress: guessing either way would change who gets plain HTTP.
func applySSLRedirect(t *translator) {
	if b, ok := t.parseBoolAnnotation(AnnotationSSLRedirect); ok {
		t.out.SSLRedirect = b
	}
}
