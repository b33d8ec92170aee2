package nginx

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// AnnotationCustomHTTPErrors lists upstream status codes that the Ingress's default backend (its
// default-backend annotation, else --default-backend-service) answers instead of the upstream.
const AnnotationCustomHTTPErrors = IngressNginxPrefix + "custom-http-errors"

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "custom-http-errors", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values: "a comma-separated list of HTTP status codes from 300 to 599 (what NGINX's `error_page` takes), for example " +
				"`404,503`; spaces and repeats are ignored",
			Default: "the ConfigMap's `custom-http-errors` (none: the upstream's own responses pass through)",
			Difference: "A **profile setting**: each distinct list of codes is one named location in nginx.conf, so the first Ingress " +
				"with a list no Ingress uses reloads NGINX once (its routes wait until that configuration is live); Ingresses with a " +
				"list in use already do not reload. The error page comes from the Ingress's `default-backend` Service, else " +
				"`--default-backend-service`, as a request for `/` (the query kept) with the request's Host and the headers " +
				"ingress-nginx sends (`X-Code`, `X-Format`, `X-Original-URI`, `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`, " +
				"`X-Service-Port`, `X-Request-ID`); without a default backend NGINX answers the code with its own page. Intercepted " +
				"are the upstream's answers and NGINX's own while it proxies (502, 503 and 504, and 413 for a chunked body over the " +
				"limit); not intercepted, unlike ingress-nginx, are the answers given before the route's location is entered: 403 of " +
				"a source range, 404 of an unmatched path and 413 of a `Content-Length` over the limit. An invalid value is ignored " +
				"with a Warning (an error page does not change who gets what).",
		}},
		apply: applyCustomHTTPErrors,
	})
	registerProfileDirectives(customErrorDirectives)
}

// customErrorDirectives hands the upstream answers with the profile's codes to the custom error
// pages' named locations.
func customErrorDirectives(p ProfileSettings, out []string) []string {
	codes := p.ErrorCodes()
	if len(codes) == 0 {
		return out
	}
	if p.usesGRPC() {
		out = append(out, "grpc_intercept_errors on")
	} else {
		out = append(out, "proxy_intercept_errors on")
	}
	for _, c := range codes {
		if c == 401 && p.signinLocation() != "" {
			continue // auth-signin's redirect takes the 401s
		}
		out = append(out, "error_page "+strconv.Itoa(c)+" = @ingress_reactor_error_"+strconv.Itoa(c))
	}
	return out
}

// applyCustomHTTPErrors parses the list of codes into the Ingress's profile.
func applyCustomHTTPErrors(t *translator) {
	raw := t.ing.Annotations[AnnotationCustomHTTPErrors]
	codes, ok := parseHTTPErrorCodes(raw)
	switch {
	case !ok:
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is not a list of HTTP status codes from 300 to 599; ignored",
			AnnotationCustomHTTPErrors, quoteValue(raw)))
	case codes == "":
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: lists no status code, so it intercepts nothing", AnnotationCustomHTTPErrors))
	default:
		t.profile.CustomHTTPErrors = codes
	}
}

// parseHTTPErrorCodes parses a comma-separated list of status codes from 300 to 599 into its written
// form: sorted, each once, separated by commas ("" for none).
func parseHTTPErrorCodes(raw string) (string, bool) {
	var codes []int
	for f := range strings.SplitSeq(raw, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 300 || n > 599 || len(f) != 3 {
			return "", false
		}
		codes = append(codes, n)
	}
	slices.Sort(codes)
	codes = slices.Compact(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ","), true
}
