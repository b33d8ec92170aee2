package nginx

import (
	"fmt"
	"slices"
	"strings"
)

// AnnotationCustomHeaders names a ConfigMap ("namespace/name") whose entries are set as headers on the
// responses of the Ingress's paths.
const AnnotationCustomHeaders = IngressNginxPrefix + "custom-headers"

// ConfigMapDataDroppedAnnotation marks a ConfigMap whose data the informer cache did not keep because
// it is larger than MaxConfigMapData (app's cache transform); its value is the size in bytes.
const ConfigMapDataDroppedAnnotation = "ingress-reactor.io/data-dropped"

// Bounds of custom-headers.
const (
	// MaxConfigMapData is the largest ConfigMap data (keys and values) that the controller keeps.
	MaxConfigMapData = 16 << 10
	maxCustomHeaders = 64
	maxHeaderName    = 256
	maxHeaderValue   = 4096
)

// deniedResponseHeaders frame the message or the connection: NGINX sets them, and a value from an
// Ingress would break the response or the connection it travels on.
var deniedResponseHeaders = []string{"connection", "content-length", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}

func init() {
	registerAnnotationGroup(annotationGroup{
		specs: []AnnotationSpec{{
			Name: "custom-headers", Origin: OriginDocumented, Status: AnnotationSupported, Kind: KindRouteData,
			Values: "`namespace/name` of a ConfigMap in the Ingress's own namespace (a bare `name` means that namespace too); each " +
				"entry of its `data` is a response header: the key its name (an RFC 7230 token, at most 256 bytes), the value its " +
				"value (printable ASCII and tabs, at most 4096 bytes); at most 64 entries and 16 KiB; the header lines travel with each of the Ingress's routes, and " +
				"their size times the number of routes may not exceed 256 KiB",
			Default: "none",
			Difference: "**Route data**: the Lua router sets the headers on every response of the Ingress's paths (replacing a header " +
				"of the same name from the backend, as ingress-nginx's `more_set_headers`), so neither a change of the ConfigMap " +
				"nor of the annotation reloads NGINX. ingress-nginx allowed only the names listed in its ConfigMap's " +
				"`global-allowed-response-headers` (none by default); here that key, when set, restricts the names the same way, and " +
				"when empty (the default) every valid name is allowed except those that frame the message or the connection (`Connection`, `Content-Length`, " +
				"`Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`): the headers reach only the " +
				"Ingress's own responses, which its backend could set as well. A ConfigMap in **another namespace is refused** " +
				"(its data would be published to clients). A ConfigMap that is missing, larger than 16 KiB, or with an entry " +
				"that is no valid header **rejects the Ingress** with a Warning (its last good version keeps being served), as " +
				"ingress-nginx denied its paths: headers such as `Content-Security-Policy` protect the site's users.",
		}},
		apply: applyCustomHeaders,
	})
}

// applyCustomHeaders reads the ConfigMap of custom-headers into the Ingress's route options.
func applyCustomHeaders(t *translator) {
	key, ok := t.ownObjectKey(AnnotationCustomHeaders, "ConfigMap", "default/security-headers")
	if !ok {
		return
	}
	ref := ObjectRef{Kind: KindConfigMap, Key: key}
	cm, ok := t.lk.configMap(key)
	if !ok {
		t.recordMissing(ref)
		t.fail("metadata.annotations[%s]: configmap %s does not exist; the Ingress is not served until it does", AnnotationCustomHeaders, key)
		return
	}
	t.recordObject(ref, cm.ResourceVersion)
	fail := func(format string, args ...any) {
		t.fail("metadata.annotations[%s]: configmap %s: %s; the Ingress is not served until it is fixed", AnnotationCustomHeaders, key, fmt.Sprintf(format, args...))
	}
	if size, dropped := cm.Annotations[ConfigMapDataDroppedAnnotation]; dropped {
		fail("its data (%s bytes) is larger than the %d bytes accepted", quoteValue(size), MaxConfigMapData)
		return
	}
	if len(cm.Data) > maxCustomHeaders {
		fail("%d entries, more than the %d accepted", len(cm.Data), maxCustomHeaders)
		return
	}
	if len(cm.BinaryData) > 0 {
		fail("binaryData cannot be a header value")
		return
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range cm.Data {
			if !yield(k) {
				return
			}
		}
	})
	var b strings.Builder
	for _, name := range names {
		value := strings.Trim(cm.Data[name], " \t")
		switch {
		case !isHeaderToken(name) || len(name) > maxHeaderName:
			fail("key %s is not a header name (an RFC 7230 token of at most %d bytes)", quoteValue(name), maxHeaderName)
			return
		case slices.Contains(deniedResponseHeaders, strings.ToLower(name)):
			fail("header %s frames the message or the connection and cannot be set", name)
			return
		case t.opts.AllowedResponseHeaders != "" && !slices.Contains(strings.Split(t.opts.AllowedResponseHeaders, "\n"), strings.ToLower(name)):
			fail("header %s is not among the ConfigMap's global-allowed-response-headers", name)
			return
		case len(value) > maxHeaderValue || strings.ContainsFunc(value, func(r rune) bool { return r != '\t' && (r < 0x20 || r > 0x7e) }):
			fail("the value of %s is not a header value (printable ASCII and tabs, at most %d bytes)", name, maxHeaderValue)
			return
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(value)
	}
	if b.Len() > 0 {
		t.options().ResponseHeaders = b.String()
	}
}

// maxResponseHeaderBytes bounds what custom-headers adds to the routes push of one Ingress: the header
// lines travel with each of its routes, and the routes dict is shared by every host.
const maxResponseHeaderBytes = 256 << 10

// routeDataBudget rejects an Ingress whose custom-headers, copied to each of its routes, would take more
// than maxResponseHeaderBytes of the routes dict that every host shares.
func (t *translator) routeDataBudget() {
	o := t.out.Options
	if o == nil || o.ResponseHeaders == "" {
		return
	}
	if n := len(o.ResponseHeaders) * len(t.out.Routes); n > maxResponseHeaderBytes {
		t.fail("metadata.annotations[%s]: its headers (%d bytes) travel with each of the Ingress's %d routes, %d bytes in all, more "+
			"than the %d one Ingress may add to the data plane's routes; use fewer or shorter headers, or fewer paths",
			AnnotationCustomHeaders, len(o.ResponseHeaders), len(t.out.Routes), n, maxResponseHeaderBytes)
	}
}

// isHeaderToken reports whether s is an RFC 7230 token (tchar+).
func isHeaderToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
