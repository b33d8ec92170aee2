package nginx

import (
	"fmt"
	"slices"
	"strings"
)

// The annotations that serve an Ingress's routes on more hosts: server-alias serves them on the hosts
// listed, from-to-www-redirect answers the "www." twin of each of its hosts with a redirect to the host.
// Such hosts are aliases: they yield to any Ingress whose rules name the host, and an alias host is
// served for one namespace only (the oldest Ingress's that claims it), so an alias never takes a host or
// requests that another Ingress routes.
const (
	AnnotationServerAlias       = IngressNginxPrefix + "server-alias"
	AnnotationFromToWWWRedirect = IngressNginxPrefix + "from-to-www-redirect"
)

// maxAliases bounds the hosts of one server-alias annotation.
const maxAliases = 100

func init() {
	const yields = "An alias host yields to every Ingress whose rules name the host (as in ingress-nginx, whatever their age or namespace), " +
		"and among Ingresses that alias one host the oldest one's namespace serves it; the others get a Warning Event. " +
		"This holds with `--host-ownership=namespace` too: an alias never makes a namespace the owner of a host that another namespace's rules name."
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{
			{
				Name: "from-to-www-redirect", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "a boolean: `true` or `false` (as Go's strconv.ParseBool); spaces around it are trimmed",
				Default: "`false`",
				Difference: "Requests for `www.<host>` (or for `<host>` when the rule's host starts with `www.`) get a 308 (the ConfigMap's `http-redirect-code`) to the rule's host, " +
					"same scheme, path and query (one trailing `/` of the path dropped), as in ingress-nginx. The port written is the one the client " +
					"used in its Host header (ingress-nginx wrote NGINX's listening port). Over HTTPS the twin host presents the certificate of " +
					"the rule's host when the Ingress's `tls` lists that host and not the twin. " + yields +
					" An invalid value **rejects the Ingress**.",
			},
			{
				Name: "server-alias", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
				Values:  "comma-separated host names (`www.example.com, example.net`; wildcards like `*.example.org` too), at most 100; upper case is folded",
				Default: "none",
				Difference: "The aliases serve the paths this Ingress routes for its first host (in rule order; a Warning names it when the Ingress " +
					"has several). ingress-nginx added the aliases to that host's whole server, with other Ingresses' paths on it: here an alias " +
					"serves this Ingress's paths, and those of other Ingresses of its namespace that alias the same host. Over HTTPS an alias presents " +
					"the certificate of the Ingress's `tls` entry for its first host, unless `tls` lists the alias itself. " + yields +
					" An entry that is not a host name **rejects the Ingress** (ingress-nginx wrote it into `server_name` unchecked); " +
					"an alias that is one of the Ingress's own hosts is ignored with a Warning.",
			},
		},
		apply: applyHostAliases,
	})
}

// applyHostAliases reads the alias annotations; hostAliases adds their routes once the rules are known.
func applyHostAliases(t *translator) {
	if _, ok := t.ing.Annotations[AnnotationFromToWWWRedirect]; ok {
		if b, ok := t.parseBoolAnnotation(AnnotationFromToWWWRedirect); ok {
			t.wwwRedirect = b
		}
	}
	raw, ok := t.ing.Annotations[AnnotationServerAlias]
	if !ok {
		return
	}
	// The first bad entry rejects the Ingress; one message is enough to fix a list.
	for entry := range strings.SplitSeq(raw, ",") {
		entry = strings.ToLower(strings.TrimSpace(entry))
		if entry == "" {
			continue
		}
		if ValidateHost(entry) != nil {
			t.fail("metadata.annotations[%s]: entry %s is not a host name (want a name like \"www.example.com\" or a wildcard like \"*.example.com\")",
				AnnotationServerAlias, quoteValue(entry))
			t.aliases = nil
			return
		}
		if !slices.Contains(t.aliases, Hostname(entry)) {
			t.aliases = append(t.aliases, Hostname(entry))
		}
		if len(t.aliases) > maxAliases {
			t.fail("metadata.annotations[%s]: more than %d hosts", AnnotationServerAlias, maxAliases)
			t.aliases = nil
			return
		}
	}
}

// hostAliases adds the routes of the Ingress's alias hosts: for each server-alias host, a copy of the
// routes of the Ingress's first host; for each www twin (from-to-www-redirect), a "/" route that
// redirects to its host. It runs after rules, defaultBackend and tls, and derives a TLS entry for an
// alias host from the entry of the host it copies.
func (t *translator) hostAliases() {
	if len(t.aliases) == 0 && !t.wwwRedirect || len(t.out.Routes) == 0 {
		return
	}
	var routed []Hostname
	for i := range t.out.Routes {
		if h := t.out.Routes[i].Host; !slices.Contains(routed, h) {
			routed = append(routed, h)
		}
	}
	// The routes of the first host are copied; the slice grows below.
	first := routed[0]
	var copied []Route
	for _, r := range t.out.Routes {
		if r.Host == first {
			copied = append(copied, r)
		}
	}
	served := 0
	for _, a := range t.aliases {
		if slices.Contains(routed, a) {
			t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: %s is a host of the Ingress's rules; ignored as an alias",
				AnnotationServerAlias, a))
			continue
		}
		served++
		for _, r := range copied {
			r.Host, r.Alias = a, true
			t.addRoute(fieldRef{rule: -1}, r)
		}
		t.deriveTLS(a, first)
	}
	if served > 0 && len(routed) > 1 {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: the aliases serve the paths of host %s, the Ingress's first; its other hosts have none",
			AnnotationServerAlias, hostForMessage(first)))
	}
	if !t.wwwRedirect {
		return
	}
	for _, h := range routed {
		if h == "" || h.IsWildcard() {
			continue
		}
		twin := Hostname("www." + string(h))
		if rest, ok := strings.CutPrefix(string(h), "www."); ok {
			twin = Hostname(rest)
		}
		if ValidateHost(string(twin)) != nil || slices.Contains(routed, twin) || slices.Contains(t.aliases, twin) {
			continue
		}
		t.addRoute(fieldRef{rule: -1}, Route{Host: twin, Path: "/", PathType: PathPrefix, Alias: true, RedirectHost: h})
		t.deriveTLS(twin, h)
	}
}

// deriveTLS lets alias host a present the certificate of the Ingress's TLS entry for host from, as the
// alias did in ingress-nginx (one server, one certificate), unless an entry of the Ingress covers a.
func (t *translator) deriveTLS(a, from Hostname) {
	var secret *TLSHost
	for i := range t.out.TLS {
		e := &t.out.TLS[i]
		if e.Host == a {
			return
		}
		if w, ok := wildcardAbove(a); ok && e.Host == w && !a.IsWildcard() {
			return
		}
		if e.Host == from && secret == nil {
			secret = e
		}
	}
	if secret != nil {
		t.out.TLS = append(t.out.TLS, TLSHost{Host: a, ServerTLS: ServerTLS{Secret: secret.Secret}})
	}
}
