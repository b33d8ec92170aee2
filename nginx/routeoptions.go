package nginx

// RouteOptions are an Ingress's settings that the Lua router applies per request: route data in the
// annotation registry's terms (KindRouteData). They travel with each route in the routes push, so a
// change of one is a push, never a reload. The translation sets them from the Ingress's annotations
// (one ann_*.go file per group); every location of the Ingress shares the value, which must not be
// modified once translated. nil means none is set.
//
// Adding an option: a field here (comparable, or compared in Equal), its wire form in appendRouteOptions,
// its check in configuration.lua's normalize_host, and its effect in router.lua.
type RouteOptions struct {
	// UseRegex (use-regex) matches the Ingress's paths as regular expressions (see PathRegex).
	UseRegex bool
	// RewriteTarget (rewrite-target) is the path the backend sees, with $0-$9 replaced by the captures
	// of the path's regex; it applies to the paths that differ from it. Empty for none.
	RewriteTarget string
	// XForwardedPrefix (x-forwarded-prefix) is sent as X-Forwarded-Prefix with rewritten requests.
	XForwardedPrefix string
	// UpstreamVhost (upstream-vhost) is the Host header the backend sees instead of the request's.
	UpstreamVhost string
}

// Equal reports whether o and p set the same options; nil equals nil only.
func (o *RouteOptions) Equal(p *RouteOptions) bool {
	if o == nil || p == nil {
		return o == p
	}
	return *o == *p
}

// appendRouteOptions appends the wire form of o's fields to a route object being written (each as
// `,"name":value`). Nothing is written for nil.
func appendRouteOptions(b []byte, o *RouteOptions) []byte {
	if o == nil {
		return b
	}
	return b
}

// appendRewriteOptions writes the rewrite group's fields of location l: "rewrite" and
// "x_forwarded_prefix" when the target rewrites its path, "upstream_vhost" whenever it is set. They
// depend on the path, so AppendRouteHostJSON calls it per location.
func appendRewriteOptions(b []byte, l *Location) []byte {
	o := l.Options
	if o == nil {
		return b
	}
	if o.rewrites(l.Path) {
		b = append(b, `,"rewrite":`...)
		b = appendJSONString(b, o.RewriteTarget)
		if o.XForwardedPrefix != "" {
			b = append(b, `,"x_forwarded_prefix":`...)
			b = appendJSONString(b, o.XForwardedPrefix)
		}
	}
	if o.UpstreamVhost != "" {
		b = append(b, `,"upstream_vhost":`...)
		b = appendJSONString(b, o.UpstreamVhost)
	}
	return b
}

// rewrites reports whether the rewrite target applies to path: as in ingress-nginx, a path equal to the
// target is not rewritten.
func (o *RouteOptions) rewrites(path string) bool {
	return o != nil && o.RewriteTarget != "" && o.RewriteTarget != path
}

// regexPath reports whether path is matched as a regular expression: with use-regex, or when the
// rewrite target applies to it (ingress-nginx's rule).
func (o *RouteOptions) regexPath(path string) bool {
	return o != nil && (o.UseRegex || o.rewrites(path))
}
