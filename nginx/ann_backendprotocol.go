package nginx

import "strings"

// AnnotationBackendProtocol says how NGINX talks to the Ingress's backends: HTTP, HTTPS, AUTO_HTTP (the
// client's scheme), GRPC, GRPCS or H2C.
const AnnotationBackendProtocol = IngressNginxPrefix + "backend-protocol"

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "backend-protocol", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "`HTTP`, `HTTPS`, `AUTO_HTTP`, `GRPC`, `GRPCS` or `H2C` (any case, as ingress-nginx)",
			Default: "`HTTP`",
			Difference: "A **profile setting**: each protocol other than HTTP is a named location (`proxy_pass https://`, " +
				"`proxy_pass $scheme://` for `AUTO_HTTP`, `grpc_pass grpc://`, `grpc_pass grpcs://`, with the Lua balancer choosing " +
				"the endpoint as for HTTP, so endpoint changes never reload for any protocol); the first Ingress with a new " +
				"combination of profile settings reloads NGINX once. `H2C` is ours (ingress-nginx took it as HTTP): HTTP/2 without " +
				"TLS to the backend, through NGINX's gRPC module, which speaks HTTP/2 upstream for any request. `FCGI` is not " +
				"supported and **rejects the Ingress** (its backends would get a protocol they do not speak), as does any other " +
				"value; ingress-nginx fell back to HTTP. gRPC (unary and streaming) needs clients on HTTP/2, which NGINX offers on " +
				"the HTTPS port. Backend TLS is not verified unless `proxy-ssl-verify` says so (ingress-nginx's default). Each protocol " +
				"keeps its idle connections to the backends apart (an upstream block each): ingress-nginx shared one pool, so a backend " +
				"serving two protocols on one port (gRPC and HTTPS, as Argo CD does) could get a request on a connection of the other " +
				"protocol.",
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
	case "HTTPS", "AUTO_HTTP", "GRPC", "GRPCS", "H2C":
		t.profile.BackendProtocol = v
	case "FCGI":
		t.fail("metadata.annotations[%s]: %s is not supported (HTTP, HTTPS, AUTO_HTTP, GRPC, GRPCS and H2C are); the Ingress is not "+
			"served rather than served with a protocol its backends do not speak", AnnotationBackendProtocol, quoteValue(raw))
	default:
		t.fail("metadata.annotations[%s]: %s is not a backend protocol (want HTTP, HTTPS, AUTO_HTTP, GRPC, GRPCS or H2C)",
			AnnotationBackendProtocol, quoteValue(raw))
	}
}

// Pass returns the directive that sends the requests of p's named location upstream: to an upstream
// block whose Lua balancer picks the endpoint, in p's backend protocol.
func (p ProfileSettings) Pass() string {
	up := p.OwnUpstream()
	if up == "" {
		up = protocolUpstream(p.BackendProtocol)
	}
	switch p.BackendProtocol {
	case "HTTPS":
		return "proxy_pass https://" + up
	case "AUTO_HTTP":
		// The request's own scheme, and the pool of that scheme (a map of nginx.tmpl); with variables
		// NGINX looks the name up among the upstream blocks at request time.
		return "proxy_pass $scheme://$ingress_reactor_auto_upstream"
	case "GRPC", "H2C":
		return "grpc_pass grpc://" + up
	case "GRPCS":
		return "grpc_pass grpcs://" + up
	}
	return "proxy_pass http://" + up
}

// ProtocolUpstreams are the upstream blocks, beside upstream_balancer (plain HTTP), that keep the idle
// connections of each backend protocol apart. NGINX keeps idle upstream connections per block and hands
// one to any request for the same address, so without them a backend that speaks several protocols on
// one port (Argo CD's gRPC and HTTPS, for one) would get an HTTP/1.1 request on an HTTP/2 connection,
// or plain text on a TLS one.
var ProtocolUpstreams = []string{"upstream_balancer_https", "upstream_balancer_h2c", "upstream_balancer_grpcs"}

// protocolUpstream returns the upstream block of a backend protocol's connections.
func protocolUpstream(protocol string) string {
	switch protocol {
	case "HTTPS":
		return ProtocolUpstreams[0]
	case "GRPC", "H2C": // HTTP/2 without TLS, through the gRPC module alike
		return ProtocolUpstreams[1]
	case "GRPCS":
		return ProtocolUpstreams[2]
	}
	return "upstream_balancer"
}

// usesGRPC reports whether p's requests go upstream through the gRPC module, whose directives are
// grpc_* instead of proxy_*.
func (p ProfileSettings) usesGRPC() bool {
	return p.BackendProtocol == "GRPC" || p.BackendProtocol == "GRPCS"
}
