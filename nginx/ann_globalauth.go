package nginx

import (
	"errors"
	"slices"
	"strings"
)

// AnnotationEnableGlobalAuth turns the ConfigMap's global external auth (settings_globalauth.go) off for
// an Ingress.
const AnnotationEnableGlobalAuth = IngressNginxPrefix + "enable-global-auth"

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "enable-global-auth", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindProfile,
			Values:  "`true` or `false`",
			Default: "`true`: an Ingress without its own `auth-url` uses the ConfigMap's `global-auth-url`, when it is set",
			Difference: "As ingress-nginx: `\"false\"` serves the Ingress without the ConfigMap's global external auth (its own " +
				"`auth-url` always applies, with or without it). The global auth is a **profile setting** like `auth-url`: the Ingresses " +
				"that use it share its named location. An invalid value **rejects the Ingress** (it decides who gets in); a canary " +
				"Ingress follows its main Ingress's location and never has a global auth of its own.",
		}},
		apply: applyEnableGlobalAuth,
	})
}

// applyEnableGlobalAuth reads enable-global-auth; globalAuthDefaults applies the result.
func applyEnableGlobalAuth(t *translator) {
	if _, set := t.ing.Annotations[AnnotationEnableGlobalAuth]; !set {
		return
	}
	if b, ok := t.parseBoolAnnotation(AnnotationEnableGlobalAuth); ok && !b {
		t.globalAuthOff = true
	}
}

// globalAuthDefaults gives an Ingress without an auth-url of its own the ConfigMap's global external
// auth (TranslateOptions.GlobalAuth), unless enable-global-auth is "false". A global auth that has an
// invalid key with no good value to keep rejects the Ingress: serving it without would open it.
func (t *translator) globalAuthDefaults() {
	g := t.opts.GlobalAuth
	if g.URL == "" && !strings.Contains(","+g.Invalid+",", ",global-auth-url,") {
		return
	}
	if _, own := t.ing.Annotations[AnnotationAuthURL]; own || t.globalAuthOff || canaryEnabled(t.ing.Annotations) {
		return
	}
	if g.Invalid != "" {
		t.globalAuthInvalid = true
		t.fail("the ConfigMap's %s (global external auth) has an invalid value and no good value to keep; the Ingresses that "+
			"use the global auth are not served until it is fixed (or set %s: \"false\")", strings.ReplaceAll(g.Invalid, ",", ", "), AnnotationEnableGlobalAuth)
		return
	}
	p := &t.profile
	p.AuthURL, p.AuthMethod, p.AuthResponseHeaders, p.AuthRequestRedirect = g.URL, g.Method, g.ResponseHeaders, g.RequestRedirect
	if g.Signin != "" {
		p.AuthSignin = g.Signin
		param := g.SigninRedirectParam
		if param == "" {
			param = "rd"
		}
		if checked, ok := signinStructure(g.Signin); ok && signinNeedsParam(checked, param) {
			p.AuthSigninRedirectParam = param
		}
	}
	if g.CacheKey != "" {
		p.AuthCacheKey, p.AuthCacheDuration = g.CacheKey, g.CacheDuration
		if p.AuthCacheDuration == "" {
			p.AuthCacheDuration = defaultAuthCacheDuration
		}
	}
	t.out.setRare().globalAuth = true
	// satisfy (applied before this, with the annotations) found no authentication then: "any" with an
	// allowlist lets allowlisted clients in without asking the global auth service, as in ingress-nginx.
	if strings.TrimSpace(t.ing.Annotations[AnnotationSatisfy]) == "any" && t.out.Access != nil && len(t.out.Access.Allow) > 0 {
		t.options().SatisfyAny = true
		t.out.Warnings = slices.DeleteFunc(t.out.Warnings, func(w string) bool {
			return strings.HasPrefix(w, "metadata.annotations["+AnnotationSatisfy+"]")
		})
	}
}

// errGlobalAuthInvalid marks the rejection of an Ingress that would use the ConfigMap's global auth while
// it is invalid: a last good version without external auth is not served either (it would stay open
// while the ConfigMap asks for authentication).
var errGlobalAuthInvalid = errors.New("the global external auth it would use is invalid")

// noAuthLocations marks the routes that the global auth skips (no-auth-locations).
func (t *translator) noAuthLocations() {
	if !t.out.rareOf().globalAuth {
		return
	}
	for i := range t.out.Routes {
		if r := &t.out.Routes[i]; t.opts.GlobalAuth.noAuth(r.Path) {
			r.NoGlobalAuth = true
		}
	}
}

// finishProfile stores the profile the annotations built in the translation: nil when it is zero, so
// that the many Ingresses without profile settings carry none, and the variant without the global auth
// once, for the locations of the routes that no-auth-locations lists to share.
func (t *translator) finishProfile() {
	if t.profile.IsZero() {
		return
	}
	p := t.profile
	t.out.Profile = &p
	if t.out.rareOf().globalAuth && slices.ContainsFunc(t.out.Routes, func(r Route) bool { return r.NoGlobalAuth }) {
		if q := p.withoutAuth(); !q.IsZero() {
			t.out.setRare().noAuthProfile = &q
		}
	}
}

// routeProfile is the profile of r's location: the Ingress's, without the global auth on the paths
// that no-auth-locations lists; nil for none. Locations share the pointer; it must not be modified.
func (t *IngressTranslation) routeProfile(r *Route) *ProfileSettings {
	if r.NoGlobalAuth && t.rareOf().globalAuth {
		return t.rareOf().noAuthProfile
	}
	return t.Profile
}

// sameProfile reports whether a and b are the same settings, nil being the zero profile.
func sameProfile(a, b *ProfileSettings) bool {
	if a == b {
		return true
	}
	return valueOf(a) == valueOf(b)
}

// valueOf returns *p, or the zero profile for nil.
func valueOf(p *ProfileSettings) ProfileSettings {
	if p == nil {
		return ProfileSettings{}
	}
	return *p
}

// withoutAuth returns p without its external auth.
func (p ProfileSettings) withoutAuth() ProfileSettings {
	p.AuthURL, p.AuthMethod, p.AuthSignin, p.AuthSigninRedirectParam = "", "", "", ""
	p.AuthResponseHeaders, p.AuthRequestRedirect, p.AuthAlwaysSetCookie = "", "", false
	p.AuthProxySetHeaders, p.AuthCacheKey, p.AuthCacheDuration = "", "", ""
	return p
}
