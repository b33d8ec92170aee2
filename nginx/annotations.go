package nginx

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// IngressNginxPrefix is the prefix of ingress-nginx's annotations, which migrating users carry over.
const IngressNginxPrefix = "nginx.ingress.kubernetes.io/"

// Annotations of ingress-nginx that this package reads, and the ones other parts of the controller own.
const (
	AnnotationSSLRedirect    = IngressNginxPrefix + "ssl-redirect"
	AnnotationSSLPassthrough = IngressNginxPrefix + "ssl-passthrough"
)

// handledElsewhere are ingress-nginx annotations that other modules read, so translation says nothing
// about them.
var handledElsewhere = []string{AnnotationSSLPassthrough}

// restrictsAccess reports whether an ingress-nginx annotation (name without the prefix) narrows who may
// reach the Ingress's backends: authentication (basic, external, client certificates), source address
// lists, and the web application firewall. Serving such an Ingress while ignoring the annotation would
// open what its owner closed, so an Ingress that carries one is rejected until it is supported.
func restrictsAccess(name string) bool {
	switch {
	case strings.HasPrefix(name, "auth-"),
		strings.HasPrefix(name, "modsecurity-"),
		strings.HasSuffix(name, "-source-range"), // whitelist-, allowlist-, denylist-source-range
		name == "satisfy",
		name == "enable-modsecurity",
		name == "enable-owasp-core-rules":
		return true
	}
	return false
}

// AnnotationCanary marks an ingress-nginx canary Ingress: a second Ingress for the same host and path
// that gets only a share of the traffic.
const AnnotationCanary = IngressNginxPrefix + "canary"

// annotations applies the Ingress's ingress-nginx annotations: ssl-redirect is supported. Annotations
// whose loss would change who gets what are refused, rejecting the Ingress: access restrictions (serving
// without them opens what the owner closed), snippets (raw NGINX configuration, often deny/allow rules;
// ingress-nginx also refused them by default since 1.9) and canary (the canary Ingress would serve its
// paths outright, or take them over when it is older). Every other one is reported as ignored in one
// Warning, so a migrating owner learns what does not carry over.
func (t *translator) annotations() {
	var ignored []string
	for _, key := range slices.Sorted(maps.Keys(t.ing.Annotations)) {
		name, ok := strings.CutPrefix(key, IngressNginxPrefix)
		if !ok || slices.Contains(handledElsewhere, key) {
			continue
		}
		value := t.ing.Annotations[key]
		switch {
		case key == AnnotationSSLRedirect:
			b, err := strconv.ParseBool(strings.TrimSpace(value))
			if err != nil {
				t.fail("metadata.annotations[%s]: %q is not a boolean (want \"true\" or \"false\")", key, value)
				continue
			}
			t.out.SSLRedirect = b
		case restrictsAccess(name):
			t.fail("metadata.annotations[%s]: restricts access, which ingress-reactor does not support yet; "+
				"the Ingress is not served rather than served without the restriction (see docs/migration.md)", key)
		case strings.HasSuffix(name, "-snippet"):
			t.fail("metadata.annotations[%s]: snippets (raw NGINX configuration) are never applied; the Ingress is not served "+
				"rather than served without what the snippet did (see docs/migration.md)", key)
		case key == AnnotationCanary:
			if b, err := strconv.ParseBool(strings.TrimSpace(value)); err == nil && !b {
				continue // an explicit "false" is a plain Ingress
			}
			t.fail("metadata.annotations[%s]: canary Ingresses are not supported yet; the Ingress is not served, so that it "+
				"cannot take its host and paths from the main Ingress (see docs/migration.md)", key)
		default:
			ignored = append(ignored, key)
		}
	}
	if len(ignored) > 0 {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf(
			"metadata.annotations: %s: not supported yet and ignored; the Ingress is served with the defaults",
			strings.Join(ignored, ", ")))
	}
}
