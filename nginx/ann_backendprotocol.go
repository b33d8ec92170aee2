package nginx

import "strings"

// AnnotationBackendProtocol says how NGINX talks to the Ingress's backends: HTTP, HTTPS, GRPC or GRPCS.
const AnnotationBackendProtocol = IngressNginxPrefix + "backend-protocol"

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "backend-protocol", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "`HTTP`, `HTTPS`, `GRPC` or `GRPCS` (any case, as ingress-nginx)",
			Default: "`HTTP`",
			Difference: "A **profile setting**: each protocol other than HTTP is a named location (`proxy_pass https://`, " +
				"`grpc_pass grpc://`, `grpc_pass grpcs://`, with the Lua balancer choosing the endpoint as for HTTP); the first " +
				"Ingress with a new combination of profile settings reloads NGINX once. `AUTO_HTTP`, `H2C` and `FCGI` are not " +
				"supported yet and **reject the Ingress** (its backends would get a protocol they do not speak), as does any " +
				"other value; ingress-nginx fell back to HTTP. Backend TLS is not verified unless `proxy-ssl-verify` says so " +
				"(ingress-nginx's default), and gRPC needs clients on HTTP/2, which NGINX offers on the " +
				"HTTPS port.",
		}},
		apply: applyBackendProtocol,
	})
}

// applyBackendProtocol sets the protocol of the Ingress's profile. A value it cannot honour rejects
// the Ingress: serving it over plain HTTP would fail while the Ingress looks served.
func applyBackendProtocol(t *translator) {
	raw := t.ing.Annotations[AnnotationBackendProtocol]
	switch v := strings.ToUpper(strings.TrimSpace(raw)); v {
	case "HTTP":
	case "HTTPS", "GRPC", "GRPCS":
		t.out.Profile.BackendProtocol = v
	case "AUTO_HTTP", "H2C", "FCGI":
		t.fail("metadata.annotations[%s]: %s is not supported yet (HTTP, HTTPS, GRPC and GRPCS are); the Ingress is not served "+
			"rather than served with a protocol its backends do not speak", AnnotationBackendProtocol, quoteValue(raw))
	default:
		t.fail("metadata.annotations[%s]: %s is not a backend protocol (want HTTP, HTTPS, GRPC or GRPCS)", AnnotationBackendProtocol, quoteValue(raw))
	}
}

// Pass returns the directive that sends the requests of p's named location upstream: to the Lua
// balancer's upstream, in p's backend protocol.
func (p ProfileSettings) Pass() string {
	up := "upstream_balancer"
	if u := p.OwnUpstream(); u != "" {
		up = u
	}
	switch p.BackendProtocol {
	case "HTTPS":
		return "proxy_pass https://" + up
	case "GRPC":
		return "grpc_pass grpc://" + up
	case "GRPCS":
		return "grpc_pass grpcs://" + up
	}
	return "proxy_pass http://" + up
}

// usesGRPC reports whether p's requests go upstream through the gRPC module, whose directives are
// grpc_* instead of proxy_*.
func (p ProfileSettings) usesGRPC() bool {
	return p.BackendProtocol == "GRPC" || p.BackendProtocol == "GRPCS"
}
