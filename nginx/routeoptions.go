package nginx

// RouteOptions are an Ingress's settings that the Lua router applies per request: route data in the
// annotation registry's terms (KindRouteData). They travel with each route in the routes push, so a
// change of one is a push, never a reload. The translation sets them from the Ingress's annotations
// (one ann_*.go file per group); every location of the Ingress shares the value, which must not be
// modified once translated. nil means none is set.
//
// Adding an option: a field here (comparable, or compared in Equal), its wire form in appendRouteOptions,
// its check in configuration.lua's normalize_host, and its effect in router.lua.
type RouteOptions struct{}

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
