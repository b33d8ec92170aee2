package nginx

import (
	"fmt"
	"strings"
)

// AnnotationSatisfy chooses how the source address allowlist and authentication combine on the
// Ingress's paths, as NGINX's satisfy directive does in ingress-nginx's locations: "all" (the default)
// needs both, "any" lets a request through when the client's address is on the allowlist or the
// request authenticates (basic or external).
const AnnotationSatisfy = IngressNginxPrefix + "satisfy"

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "satisfy", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData, RestrictsAccess: true,
			Values: "`all` or `any`", Default: "`all`: a request needs an address on the allowlist and valid credentials",
			Difference: "**Route data**: the Lua router decides, so a change never reloads NGINX. With `any`, as NGINX's `satisfy any` " +
				"in ingress-nginx's location: a client whose address is on `allowlist-source-range` (or `whitelist-source-range`) " +
				"gets in without credentials, and neither the password check (`auth-type`) nor the auth service (`auth-url`) is " +
				"asked; any other client gets in with valid credentials (basic authentication, or a 2xx of the auth service; with " +
				"both, either one suffices, as in NGINX) and otherwise gets what the authentication answers (401, the redirect to " +
				"`auth-signin`, 403 or 500), not 403. Client certificates (`auth-tls-*`) and rate limits are not access checks in " +
				"NGINX's sense and always apply. **Differences, on purpose:** an address on `denylist-source-range` gets 403 even " +
				"with valid credentials (NGINX's `satisfy any` let valid credentials override a `deny`); with basic and external " +
				"authentication both failing, the answer is the auth service's (NGINX kept basic authentication's 401 over a 403 " +
				"of the service); a value other than `all` or `any` (`ANY` too) **rejects the Ingress** (ingress-nginx applied " +
				"`all` instead, which locks out the allowlisted clients). Without an allowlist or without authentication `any` " +
				"changes nothing, with a Warning.",
		}},
		apply: applySatisfy,
	})
}

// applySatisfy reads satisfy into the route options. It runs after the source range and auth groups
// (groups apply in the order of their first annotation's name), whose results it reads.
func applySatisfy(t *translator) {
	raw := t.ing.Annotations[AnnotationSatisfy]
	switch strings.TrimSpace(raw) {
	case "all":
		return
	case "any":
	default:
		t.fail("metadata.annotations[%s]: %s is not \"all\" or \"any\"", AnnotationSatisfy, quoteValue(raw))
		return
	}
	allowlist := t.out.Access != nil && len(t.out.Access.Allow) > 0
	authenticates := t.profile.AuthURL != "" || t.out.Options != nil && t.out.Options.AuthUsers != ""
	if !allowlist || !authenticates {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: \"any\" has no effect without both %s "+
			"(or %s) and authentication (%s or %s); ignored", AnnotationSatisfy, AnnotationAllowlistSourceRange,
			AnnotationWhitelistSourceRange, AnnotationAuthType, AnnotationAuthURL))
		return
	}
	t.options().SatisfyAny = true
}
