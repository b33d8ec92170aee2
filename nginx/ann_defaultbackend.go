package nginx

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// AnnotationDefaultBackend names a Service of the Ingress's namespace that answers for the Ingress when
// its own backends cannot: paths whose Service has no endpoints, and requests to its hosts that no path
// matches.
const AnnotationDefaultBackend = IngressNginxPrefix + "default-backend"

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "default-backend", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values:  "the name of a Service in the Ingress's namespace; its first TCP port is used, as in ingress-nginx",
			Default: "none: `--default-backend-service`, or a built-in 404",
			Difference: "Serves the Ingress's paths while their Service has no ready endpoint (as in ingress-nginx), and requests to the " +
				"Ingress's hosts that no path matches instead of `--default-backend-service` (ingress-nginx's docs: it \"overrides the global " +
				"default backend\"). On a host that several Ingresses route, the unmatched requests go to the default backend of the oldest " +
				"Ingress of the host's oldest namespace that sets one, so one namespace never takes another's host's fallback. " +
				"A Service that does not exist yet, or has no TCP port, is ignored with a Warning until it does. " +
				"A value that is not a Service name **rejects the Ingress**. With `custom-http-errors` it also serves the error pages.",
		}},
		apply: applyDefaultBackend,
	})
}

// applyDefaultBackend resolves the annotation's Service to an upstream on its first TCP port and sets
// it in the route options; the merge lists the upstream so that the endpoint lane fills it.
func applyDefaultBackend(t *translator) {
	raw := t.ing.Annotations[AnnotationDefaultBackend]
	name := strings.TrimSpace(raw)
	if len(name) > 63 || validateLabel(name) != nil {
		t.fail("metadata.annotations[%s]: %s is not a Service name (want the name of a Service in namespace %s)", AnnotationDefaultBackend, quoteValue(raw), t.ing.Namespace)
		return
	}
	key := types.NamespacedName{Namespace: t.ing.Namespace, Name: name}
	svc, found := t.svc.Service(key)
	t.recordService(key, svc, found)
	if !found {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: service %s does not exist; ignored until it does", AnnotationDefaultBackend, key))
		return
	}
	port, ok := FirstTCPPort(svc)
	if !ok {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: service %s has no TCP port; ignored", AnnotationDefaultBackend, key))
		return
	}
	up := NewUpstream(key, intstr.FromInt32(port))
	t.out.Upstreams = append(t.out.Upstreams, up)
	t.options().DefaultBackend = up.Name
}
