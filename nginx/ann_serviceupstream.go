package nginx

import (
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// AnnotationServiceUpstream ("true") sends the Ingress's requests to its Services' cluster IPs instead
// of their Pods.
const AnnotationServiceUpstream = IngressNginxPrefix + "service-upstream"

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "service-upstream", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values:  "a boolean: `true` or `false` (as Go's strconv.ParseBool, which ingress-nginx uses too); spaces around it are trimmed",
			Default: "`false` (the ConfigMap's `service-upstream`): requests go to the Service's ready Pods, chosen by the Lua balancer",
			Difference: "With `true`, each of the Ingress's backends has one endpoint: the Service's cluster IP and port (a named port " +
				"looked up in the Service), so kube-proxy picks the Pod, as in ingress-nginx. The endpoint lane pushes it like any " +
				"endpoint (no reload), and follows a change of the cluster IP or port. Other Ingresses that route to the same " +
				"Service port keep its Pods: the upstream is this Ingress's own (ingress-nginx shared one upstream per Service " +
				"port, so the Ingress that came first decided for all). A Service without a cluster IP (headless) is served " +
				"through its Pods, with a log line, as in ingress-nginx; an ExternalName Service through its resolved name as " +
				"always. An invalid value **rejects the Ingress** (its last good version keeps being served); ingress-nginx " +
				"logged it and used the default.",
		}},
		apply: applyServiceUpstream,
	})
}

// applyServiceUpstream checks the value; the upstreams are named by IngressUpstream, which reads it too.
func applyServiceUpstream(t *translator) {
	t.parseBoolAnnotation(AnnotationServiceUpstream)
}

// serviceUpstream reports whether ing asks for its Services' cluster IPs; def (the ConfigMap's
// service-upstream) answers for an Ingress without the annotation. A value that is not a boolean counts
// as false here; the translation rejects such an Ingress.
func serviceUpstream(ing *networkingv1.Ingress, def bool) bool {
	raw, ok := ing.Annotations[AnnotationServiceUpstream]
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(raw))
	return err == nil && b
}
