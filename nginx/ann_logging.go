package nginx

import (
	"fmt"
	"strconv"
	"strings"
)

// The logging group: whether the Ingress's requests are written to the access log, and whether its path
// rewrites are logged.
const (
	AnnotationEnableAccessLog  = IngressNginxPrefix + "enable-access-log"
	AnnotationEnableRewriteLog = IngressNginxPrefix + "enable-rewrite-log"
)

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "enable-access-log", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values:  "a boolean: `true` or `false` (as Go's strconv.ParseBool); spaces around it are trimmed",
			Default: "`true`: requests are logged when the access log is on (`--access-log`)",
			Difference: "With `false` the Ingress's requests are left out of the access log (the router marks them and the access " +
				"log's `if=` condition skips them), changing without a reload. Requests that no path of the Ingress matches are " +
				"logged as usual. An invalid value is ignored with a Warning: logging does not change who gets what.",
		}, {
			Name: "enable-rewrite-log", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values:  "a boolean: `true` or `false` (as Go's strconv.ParseBool); spaces around it are trimmed",
			Default: "`false`",
			Difference: "With `true` every path rewrite of the Ingress (`rewrite-target`) is written to the error log at `notice` " +
				"level, with the path before and after and the host, as one line. ingress-nginx turned on NGINX's `rewrite_log`, " +
				"which logs the steps of its `rewrite` directives; here rewrites are done by the Lua router, which logs the " +
				"result instead. As there, the error log level must be `notice` or lower to see them (`--error-log-level`). An " +
				"invalid value is ignored with a Warning.",
		}},
		apply: applyLogging,
	})
}

// applyLogging reads the logging group into the route options.
func applyLogging(t *translator) {
	if on, ok := t.cosmeticBool(AnnotationEnableAccessLog); ok && !on {
		t.options().NoAccessLog = true
	}
	if on, ok := t.cosmeticBool(AnnotationEnableRewriteLog); ok && on {
		t.options().RewriteLog = true
	}
}

// cosmeticBool parses a boolean annotation whose loss changes nothing of who gets what: absent or
// invalid is false, not ok; invalid adds a Warning.
func (t *translator) cosmeticBool(key string) (value, ok bool) {
	raw, set := t.ing.Annotations[key]
	if !set {
		return false, false
	}
	b, err := strconv.ParseBool(strings.TrimSpace(raw))
	if err != nil {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is not a boolean (want \"true\" or \"false\"); ignored",
			key, quoteValue(raw)))
		return false, false
	}
	return b, true
}

// appendLoggingOptions writes the logging group's options.
func appendLoggingOptions(b []byte, o *RouteOptions) []byte {
	if o.NoAccessLog {
		b = append(b, `,"no_access_log":true`...)
	}
	if o.RewriteLog {
		b = append(b, `,"rewrite_log":true`...)
	}
	return b
}
