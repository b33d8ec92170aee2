package passthrough

import (
	"fmt"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/tlsproxy"
)

// Annotations read by this module. The first is ingress-nginx's, with its meaning; the second is ours.
const (
	// AnnotationSSLPassthrough ("true") passes TLS connections for the Ingress's hosts to its backend
	// undecrypted, instead of NGINX terminating them. Needs --enable-ssl-passthrough.
	AnnotationSSLPassthrough = nginx.AnnotationSSLPassthrough
	// AnnotationProxyProtocol ("v1" or "v2") sends the backend a PROXY protocol header with the client's
	// address in front of each passed-through connection.
	AnnotationProxyProtocol = "ingress-reactor.io/ssl-passthrough-proxy-protocol"
)

// HostRoute is one passed-through host of an Ingress.
type HostRoute struct {
	// Host is the rule's host: an exact name or a "*." wildcard.
	Host string
	// Upstream is the backend Service port, named exactly as the endpoint lane names it.
	Upstream nginx.Upstream
	// ProxyProtocol is the header sent to the backend.
	ProxyProtocol tlsproxy.ProxyProtocol
}

// RoutesOf returns the hosts an Ingress passes through. Each rule with a host contributes one route to the
// Service port of its "/" path, or of its first path when there is no "/" (or of spec.defaultBackend when
// the rule has no paths): TLS is routed by server name only, so paths play no part. The first rule wins
// when a host appears twice.
//
// enabled is false when the Ingress does not ask for passthrough (no annotation, or "false"), or when an
// annotation is invalid: such an Ingress is left to NGINX. problems are user-facing messages for the
// Ingress's Warning Event; they explain invalid annotations and the rules that cannot be passed through.
func RoutesOf(ing *networkingv1.Ingress) (routes []HostRoute, enabled bool, problems []string) {
	raw, ok := ing.Annotations[AnnotationSSLPassthrough]
	if !ok {
		return nil, false, nil
	}
	on, err := strconv.ParseBool(strings.TrimSpace(raw))
	if err != nil {
		return nil, false, []string{fmt.Sprintf("annotation %s: invalid value %q, want \"true\" or \"false\"; the Ingress is served by NGINX without passthrough",
			AnnotationSSLPassthrough, raw)}
	}
	if !on {
		return nil, false, nil
	}
	if nginx.IsCanary(ing) {
		// A canary adds a backend to its main Ingress's HTTP paths; passing a host through is no HTTP.
		return nil, false, []string{fmt.Sprintf("annotation %s: ignored on a canary Ingress (%s), as in ingress-nginx; the canary is served by NGINX",
			AnnotationSSLPassthrough, nginx.AnnotationCanary)}
	}
	var proto tlsproxy.ProxyProtocol
	switch v := strings.TrimSpace(ing.Annotations[AnnotationProxyProtocol]); v {
	case "", "none":
	case "v1":
		proto = tlsproxy.ProxyProtocolV1
	case "v2":
		proto = tlsproxy.ProxyProtocolV2
	default:
		return nil, false, []string{fmt.Sprintf("annotation %s: invalid value %q, want \"v1\", \"v2\" or \"none\"; the Ingress is not passed through until it is fixed",
			AnnotationProxyProtocol, v)}
	}
	seen := map[string]bool{}
	for i, rule := range ing.Spec.Rules {
		if rule.Host == "" {
			problems = append(problems, fmt.Sprintf("rule %d has no host: SSL passthrough routes by TLS server name, so the rule is left to NGINX", i+1))
			continue
		}
		if err := nginx.ValidateHost(rule.Host); err != nil {
			problems = append(problems, fmt.Sprintf("rule %d: %v; not passed through", i+1, err))
			continue
		}
		if seen[rule.Host] {
			continue
		}
		backend := ruleBackend(ing, rule)
		if backend == nil {
			problems = append(problems, fmt.Sprintf("host %s: no backend (neither a path nor spec.defaultBackend); not passed through", rule.Host))
			continue
		}
		up, err := nginx.BackendUpstream(ing.Namespace, backend)
		if err != nil {
			problems = append(problems, fmt.Sprintf("host %s: %v; not passed through", rule.Host, err))
			continue
		}
		seen[rule.Host] = true
		routes = append(routes, HostRoute{Host: rule.Host, Upstream: up, ProxyProtocol: proto})
	}
	return routes, true, problems
}

// ruleBackend picks the rule's "/" path, else its first path, else the Ingress's default backend.
func ruleBackend(ing *networkingv1.Ingress, rule networkingv1.IngressRule) *networkingv1.IngressBackend {
	if rule.HTTP != nil && len(rule.HTTP.Paths) > 0 {
		for i := range rule.HTTP.Paths {
			if rule.HTTP.Paths[i].Path == "/" {
				return &rule.HTTP.Paths[i].Backend
			}
		}
		return &rule.HTTP.Paths[0].Backend
	}
	return ing.Spec.DefaultBackend
}
