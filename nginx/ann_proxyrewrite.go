package nginx

import (
	"fmt"
	"regexp"
	"strings"
)

// The proxy rewrite group: what NGINX changes in the backend's answers, in Set-Cookie (domain and path)
// and in Location and Refresh (redirects). Profile settings; they have no gRPC equivalent.

// Annotations of the proxy rewrite group.
const (
	AnnotationProxyCookieDomain = IngressNginxPrefix + "proxy-cookie-domain"
	AnnotationProxyCookiePath   = IngressNginxPrefix + "proxy-cookie-path"
	AnnotationProxyRedirectFrom = IngressNginxPrefix + "proxy-redirect-from"
	AnnotationProxyRedirectTo   = IngressNginxPrefix + "proxy-redirect-to"
)

var (
	// cookieDomain is a domain as Set-Cookie carries it (a leading dot allowed).
	cookieDomain = regexp.MustCompile(`^\.?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)
	// cookiePath is a cookie path: '/' and the unreserved URL characters.
	cookiePath = regexp.MustCompile(`^/[A-Za-z0-9._~/-]*$`)
	// redirectURL is a URL or a path as proxy_redirect takes one, without regexes and variables: printable
	// ASCII without spaces, quotes, '\', '$', ';', '{', '}' and '#'.
	redirectURL = regexp.MustCompile(`^[A-Za-z0-9._~:/?&=%+@!*,()\[\]-]+$`)
)

func init() {
	rewriteDiff := "A **profile setting**: the first Ingress with a new combination of profile settings reloads NGINX once; `off` asks " +
		"for nothing. Not applied to gRPC backends. Regular expressions (`~`) and NGINX variables are not accepted (ingress-nginx wrote " +
		"the value into nginx.conf as it was); such a value, or another invalid one, is ignored with a Warning."
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "proxy-cookie-domain", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "`off`, or a domain and its replacement separated by a space (`backend.local example.com`), as NGINX's `proxy_cookie_domain`",
			Default: "`off` (the ConfigMap's `proxy-cookie-domain`)", Difference: rewriteDiff,
		}, {
			Name: "proxy-cookie-path", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "`off`, or a path and its replacement separated by a space (`/app/ /`), as NGINX's `proxy_cookie_path`",
			Default: "`off` (the ConfigMap's `proxy-cookie-path`)", Difference: rewriteDiff,
		}, {
			Name: "proxy-redirect-from", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values: "`off`, or the start of a `Location` to replace (a URL or a path) by `proxy-redirect-to`, as the " +
				"arguments of NGINX's `proxy_redirect`; `default` rewrites nothing here (as in ingress-nginx, where NGINX's default named " +
				"the internal upstream), with a Warning",
			Default: "`off` (the ConfigMap's `proxy-redirect-from`)", Difference: rewriteDiff,
		}, {
			Name: "proxy-redirect-to", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "the replacement (a URL or a path) of `proxy-redirect-from`; `off` for none",
			Default: "`off` (the ConfigMap's `proxy-redirect-to`)", Difference: rewriteDiff,
		}},
		apply: applyProxyRewrite,
	})
	registerProfileDirectives(proxyRewriteDirectives)
}

// proxyRewriteDirectives writes the group's directives into p's named location.
func proxyRewriteDirectives(p ProfileSettings, out []string) []string {
	if p.usesGRPC() {
		return out
	}
	out = appendDirective(out, "proxy_cookie_domain", p.ProxyCookieDomain)
	out = appendDirective(out, "proxy_cookie_path", p.ProxyCookiePath)
	out = appendDirective(out, "proxy_redirect", p.ProxyRedirect)
	return out
}

// applyProxyRewrite parses the group's annotations into the Ingress's profile.
func applyProxyRewrite(t *translator) {
	ann := t.ing.Annotations
	p := &t.profile
	// inherited: the ConfigMap's key of the same name rewrites in the http block, which an explicit "off"
	// must cancel (NGINX inherits proxy_cookie_* into a location that has none of its own).
	pair := func(key string, valid *regexp.Regexp, want string, inherited bool) string {
		raw, ok := ann[key]
		if !ok {
			return ""
		}
		f := strings.Fields(raw)
		if len(f) == 1 && f[0] == "off" {
			if inherited {
				return "off"
			}
			return ""
		}
		q, ok := quoteArgs(f...)
		if len(f) != 2 || !valid.MatchString(f[0]) || !valid.MatchString(f[1]) || !ok {
			t.warnIgnored(key, raw, want)
			return ""
		}
		return q
	}
	p.ProxyCookieDomain = pair(AnnotationProxyCookieDomain, cookieDomain, "off, or a domain and its replacement", t.opts.ProxyCookieDomain)
	p.ProxyCookiePath = pair(AnnotationProxyCookiePath, cookiePath, "off, or a path and its replacement", t.opts.ProxyCookiePath)

	from, fromSet := ann[AnnotationProxyRedirectFrom]
	to, toSet := ann[AnnotationProxyRedirectTo]
	fromOwn, toOwn := fromSet, toSet
	if !fromSet && !toSet {
		return // the ConfigMap's proxy-redirect-from and -to, in the http block, apply
	}
	// An annotation the Ingress lacks takes the ConfigMap's value (validated there), as ingress-nginx
	// combined them.
	if !fromSet && t.opts.ProxyRedirectFrom != "" {
		from, fromSet = t.opts.ProxyRedirectFrom, true
	}
	if !toSet && t.opts.ProxyRedirectTo != "" {
		to, toSet = t.opts.ProxyRedirectTo, true
	}
	from, to = strings.TrimSpace(from), strings.TrimSpace(to)
	const want = "off, default, or a URL or path without regexes and variables"
	switch {
	case !fromSet || from == "off":
		if toOwn && to != "off" {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has an effect only with %s; ignored",
				AnnotationProxyRedirectTo, AnnotationProxyRedirectFrom))
		}
	case from == "default":
		// NGINX's default replaces the proxy_pass URL, which is the internal upstream's name here (and was
		// in ingress-nginx): no backend sends it.
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: default rewrites only the URL of "+
			"NGINX's internal upstream, which no backend sends; ignored", AnnotationProxyRedirectFrom))
	case !redirectURL.MatchString(from) || strings.HasPrefix(from, "~"):
		t.warnIgnored(AnnotationProxyRedirectFrom, ann[AnnotationProxyRedirectFrom], want)
	case !toSet || to == "off":
		if !fromOwn {
			break
		}
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: has an effect only with %s; ignored",
			AnnotationProxyRedirectFrom, AnnotationProxyRedirectTo))
	case !redirectURL.MatchString(to):
		t.warnIgnored(AnnotationProxyRedirectTo, ann[AnnotationProxyRedirectTo], want)
	default:
		if q, ok := quoteArgs(from, to); ok {
			p.ProxyRedirect = q
		}
	}
	if p.ProxyRedirect == "" && t.opts.ProxyRedirectFrom != "" && t.opts.ProxyRedirectTo != "" {
		p.ProxyRedirect = "off" // the Ingress's pair rewrites nothing: the http block's must not apply either
	}
}

// quoteArgs quotes directive arguments (validated by the caller, whose patterns exclude what Quote
// refuses) and joins them with spaces; false if one cannot be quoted.
func quoteArgs(args ...string) (string, bool) {
	out := make([]string, len(args))
	for i, a := range args {
		q, err := Quote(a)
		if err != nil {
			return "", false
		}
		out[i] = q
	}
	return strings.Join(out, " "), true
}
