package nginx

import (
	"fmt"
	"strconv"
	"strings"
)

// The regex and rewrite annotations of ingress-nginx (see PathRegex and RouteOptions).
const (
	AnnotationUseRegex         = IngressNginxPrefix + "use-regex"
	AnnotationRewriteTarget    = IngressNginxPrefix + "rewrite-target"
	AnnotationXForwardedPrefix = IngressNginxPrefix + "x-forwarded-prefix"
	AnnotationUpstreamVhost    = IngressNginxPrefix + "upstream-vhost"
)

func init() {
	const regexHost = "Once a path of a host is a regex (use-regex, or a rewrite-target that differs from the path), every path of the host, " +
		"of every Ingress and namespace, is matched as ingress-nginx does it: as the case-insensitive regex `^` + path, " +
		"first match in order of descending path length (then descending path), a Prefix path `/p` as `^/p/` and `^/p`, an Exact path as `^/p` " +
		"(see [migration.md](migration.md#regex-paths))."
	const regexSyntax = "Patterns are RE2 (Go's regexp), as the Kubernetes docs of ingress-nginx ask; constructs that NGINX's PCRE reads " +
		"differently are refused, naming the construct: `\\p{..}`, `\\s`, `\\x..`, `\\1`-style escapes, `(?m)`, `{,n}`, `[[:ascii:]]`/`[[:cntrl:]]`, " +
		"repeated groups that can match the empty string. `$` matches only at the very end (PCRE also before a final newline)."
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			{
				Name: "rewrite-target", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "a path of letters, digits, `-._~/:` and captures `$0`-`$9` (ingress-nginx's characters)",
				Default: "no rewrite",
				Difference: "The backend sees the rewritten path and the original query string, as with ingress-nginx's `rewrite ... break`. " +
					"It makes the Ingress's paths (other than one equal to the target) regex paths. " + regexHost + " " +
					"The captures are those of the path's match anchored at the start (ingress-nginx matched the path again unanchored, " +
					"which differs only for a path with a top-level `|`). `$` followed by anything but a digit (an NGINX variable) and an " +
					"invalid value **reject the Ingress** (its last good version keeps being served); ingress-nginx ignored an invalid value.",
			},
			{
				Name: "upstream-vhost", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "a host name, optionally with `:port`; spaces around it are trimmed",
				Default: "the request's Host header",
				Difference: "NGINX variables (`$host`, `$service_name`, ...) are not expanded: a value with `$` **rejects the Ingress**, as does any " +
					"value that is not a host name. X-Forwarded-Host keeps the request's host, as in ingress-nginx.",
			},
			{
				Name: "use-regex", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "a boolean (Go's strconv.ParseBool, after trimming spaces)",
				Default: "`false`",
				Difference: "Regex characters are allowed in ImplementationSpecific paths; Exact and Prefix paths keep the plain path characters " +
					"and are matched as `^` + path. " + regexHost + " " + regexSyntax + " A path that is not such a regex, or an invalid " +
					"boolean, **rejects the Ingress**. Non-regex paths of other Ingresses on a regex host that are no valid regex are matched " +
					"as text (ingress-nginx failed its configuration test).",
			},
			{
				Name: "x-forwarded-prefix", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "letters, digits and `-._~/:`",
				Default: "the request's X-Forwarded-Prefix, if any, is passed on",
				Difference: "Sent, as in ingress-nginx, only with requests that rewrite-target rewrote (a Warning says so when the Ingress has no " +
					"rewrite-target). An invalid value **rejects the Ingress**.",
			},
		},
		apply: applyRewrite,
	})
}

// applyRewrite reads the regex and rewrite annotations into the Ingress's RouteOptions. Invalid values
// reject the Ingress: a lost rewrite or regex changes which backend gets which path.
func applyRewrite(t *translator) {
	o := RouteOptions{}
	a := t.ing.Annotations
	if _, ok := a[AnnotationUseRegex]; ok {
		o.UseRegex, _ = t.parseBoolAnnotation(AnnotationUseRegex)
	}
	if v, ok := a[AnnotationRewriteTarget]; ok && v != "" {
		if err := validateRewriteTarget(v); err != nil {
			t.fail("metadata.annotations[%s]: %s %s (want a path of letters, digits, -._~/: and captures $0-$9)", AnnotationRewriteTarget, quoteValue(v), err)
		} else {
			o.RewriteTarget = v
		}
	}
	if v, ok := a[AnnotationXForwardedPrefix]; ok && v != "" {
		switch {
		case !onlyChars(v, "-._~/:"):
			t.fail("metadata.annotations[%s]: %s is not allowed (want letters, digits and -._~/:)", AnnotationXForwardedPrefix, quoteValue(v))
		case o.RewriteTarget == "":
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has no effect without %s (the header goes with rewritten requests only, as in ingress-nginx)",
				AnnotationXForwardedPrefix, AnnotationRewriteTarget))
		default:
			o.XForwardedPrefix = v
		}
	}
	if v, ok := a[AnnotationUpstreamVhost]; ok && strings.TrimSpace(v) != "" {
		host := strings.TrimSpace(v)
		if err := validateVhost(host); err != nil {
			t.fail("metadata.annotations[%s]: %s %s", AnnotationUpstreamVhost, quoteValue(v), err)
		} else {
			o.UpstreamVhost = host
		}
	}
	if o != (RouteOptions{}) {
		if t.out.Options == nil {
			t.out.Options = &RouteOptions{}
		}
		opts := t.out.Options
		opts.UseRegex, opts.RewriteTarget, opts.XForwardedPrefix, opts.UpstreamVhost = o.UseRegex, o.RewriteTarget, o.XForwardedPrefix, o.UpstreamVhost
	}
}

func onlyChars(s, punctuation string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(punctuation, c) >= 0) {
			return false
		}
	}
	return true
}

// validateRewriteTarget accepts ingress-nginx's characters for a rewrite target, with "$" only before a
// digit (a capture; NGINX reads one digit, so "$12" is capture 1 and "2").
func validateRewriteTarget(v string) error {
	if !onlyChars(v, "-._~/:$") {
		return fmt.Errorf("has a character that is not allowed")
	}
	for i := 0; i < len(v); i++ {
		if v[i] == '$' && (i+1 == len(v) || v[i+1] < '0' || v[i+1] > '9') {
			return fmt.Errorf("has a $ that is not a capture $0-$9 (NGINX variables are not supported)")
		}
	}
	return nil
}

// validateVhost accepts a host name of letters, digits, '-' and '.', optionally with ":port".
func validateVhost(v string) error {
	if strings.Contains(v, "$") {
		return fmt.Errorf("is not a host name: NGINX variables are not supported")
	}
	host, port, hasPort := strings.Cut(v, ":")
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return fmt.Errorf("has an invalid port (want host or host:port with a port in 1-65535)")
		}
	}
	if host == "" || len(host) > 253 || !onlyChars(host, "-.") || host[0] == '.' || host[0] == '-' || strings.Contains(host, "..") {
		return fmt.Errorf("is not a host name (want letters, digits, '-' and '.', optionally with :port)")
	}
	return nil
}
