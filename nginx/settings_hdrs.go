package nginx

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The ConfigMap keys that name another ConfigMap of headers (issue #18): add-headers and proxy-set-headers.

// SettingsRefLookup returns the data of the ConfigMap a key names ("namespace/name"), or why it cannot
// be used (missing, in another namespace). modules/settings resolves from its informer's store.
type SettingsRefLookup func(ref string) (map[string]string, error)

// HeaderLine is one validated header: an RFC 7230 token and a value of printable ASCII without '$'.
type HeaderLine struct {
	Name, Value string
}

// HeaderRefSettings are the headers of the ConfigMaps that add-headers and proxy-set-headers name.
type HeaderRefSettings struct {
	// Add are set on every response to clients (add-headers).
	Add []HeaderLine
	// ProxySet are set on every request to HTTP backends (proxy-set-headers).
	ProxySet []HeaderLine
}

// deniedProxyHeaders are the request headers proxy-set-headers may not set (lower case): those that
// frame the message or the connection, Host, and those the controller sets itself (a second
// proxy_set_header would send the header twice).
var deniedProxyHeaders = append(slices.Clone(deniedResponseHeaders), "host", "x-request-id", "x-real-ip", "x-forwarded-for",
	"x-forwarded-host", "x-forwarded-port", "x-forwarded-proto", "x-forwarded-scheme", "x-scheme", "x-original-uri",
	"x-forwarded-prefix", "proxy")

const headerRefValues = "`namespace/name` of a ConfigMap in the --configmap's namespace (a bare `name` means that namespace); each entry " +
	"of its `data` is a header: the key its name (an RFC 7230 token, at most 256 bytes), the value its value (printable ASCII " +
	"without `$`, at most 4096 bytes); at most 64 entries"

func init() {
	registerSettings(
		settingKey{Name: "add-headers", Values: headerRefValues,
			Doc: "Headers set on every response to clients. A header that an Ingress's custom-headers sets replaces the one of the same name; " +
				"a Strict-Transport-Security here replaces the hsts keys' value.",
			Difference: "The Lua router sets them in the header filter (replacing a backend's header of the same name), so every location " +
				"gets them. The ConfigMap must be in the --configmap's namespace: a reference to another namespace is not applied " +
				"(Warning). Values are literal: `$` is refused where ingress-nginx expanded NGINX variables. Names that frame the " +
				"message or the connection are refused. A change of the referenced ConfigMap applies like a change of --configmap's.",
			resolve: resolveHeaderRef(deniedResponseHeaders),
			set: settingsField(func(s *Settings) *[]HeaderLine { return &s.HeaderRefs.Add }, func(v string) ([]HeaderLine, error) {
				return parseHeaderLines(v, deniedResponseHeaders)
			})},
		settingKey{Name: "proxy-set-headers", Values: headerRefValues,
			Doc: "Headers set on every request to HTTP backends (proxy_set_header), in the public location, the profiles' and the error pages'.",
			Difference: "The ConfigMap must be in the --configmap's namespace: a reference to another namespace is not applied (Warning). " +
				"Values are literal: `$` is refused where ingress-nginx expanded NGINX variables. Names that frame the message or the " +
				"connection, `Host`, and the headers the controller sets itself (`X-Forwarded-*`, `X-Real-IP`, `X-Request-ID`, " +
				"`X-Scheme`, `X-Original-URI`, `Proxy`) are refused, where ingress-nginx sent such a header twice. gRPC backends do " +
				"not get them.",
			resolve: resolveHeaderRef(deniedProxyHeaders),
			set: settingsField(func(s *Settings) *[]HeaderLine { return &s.HeaderRefs.ProxySet }, func(v string) ([]HeaderLine, error) {
				return parseHeaderLines(v, deniedProxyHeaders)
			})},
	)
}

// errNoLookup is the problem of a reference key parsed without a SettingsRefLookup.
var errNoLookup = errors.New("ConfigMap references cannot be resolved here")

// resolveHeaderRef returns a resolve function: it reads the named ConfigMap's data, checks it, and
// returns it as sorted "Name:value" lines, the form set parses (and lastGood keeps).
func resolveHeaderRef(denied []string) func(string, SettingsRefLookup) (string, error) {
	return func(ref string, lookup SettingsRefLookup) (string, error) {
		if ref == "" {
			return "", nil
		}
		if lookup == nil {
			return "", errNoLookup
		}
		data, err := lookup(ref)
		if err != nil {
			return "", err
		}
		if len(data) > maxCustomHeaders {
			return "", fmt.Errorf("configmap %s has %d entries, more than the %d accepted", ref, len(data), maxCustomHeaders)
		}
		var b strings.Builder
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range data {
				if !yield(k) {
					return
				}
			}
		}) {
			value := strings.Trim(data[name], " ")
			if err := checkHeaderLine(name, value, denied); err != nil {
				return "", fmt.Errorf("configmap %s: %w", ref, err)
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(name + ":" + value)
		}
		if b.Len() > MaxConfigMapData {
			return "", fmt.Errorf("configmap %s: %d bytes of headers, more than the %d accepted", ref, b.Len(), MaxConfigMapData)
		}
		return b.String(), nil
	}
}

// checkHeaderLine checks one header of add-headers or proxy-set-headers.
func checkHeaderLine(name, value string, denied []string) error {
	switch {
	case !isHeaderToken(name) || len(name) > maxHeaderName:
		return fmt.Errorf("key %s is not a header name (an RFC 7230 token of at most %d bytes)", quoteValue(name), maxHeaderName)
	case slices.Contains(denied, strings.ToLower(name)):
		return fmt.Errorf("header %s cannot be set", name)
	case len(value) > maxHeaderValue || strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 || r > 0x7e || r == '$' }):
		return fmt.Errorf("the value of %s is not a literal header value (printable ASCII without $, at most %d bytes)", name, maxHeaderValue)
	}
	return nil
}

// parseHeaderLines parses the "Name:value" lines of resolveHeaderRef, checking each again.
func parseHeaderLines(v string, denied []string) ([]HeaderLine, error) {
	if v == "" {
		return nil, nil
	}
	lines := strings.Split(v, "\n")
	if len(lines) > maxCustomHeaders || len(v) > MaxConfigMapData {
		return nil, fmt.Errorf("at most %d headers", maxCustomHeaders)
	}
	out := make([]HeaderLine, 0, len(lines))
	for _, l := range lines {
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("%s is not a header line", quoteValue(l))
		}
		if err := checkHeaderLine(name, value, denied); err != nil {
			return nil, err
		}
		out = append(out, HeaderLine{Name: name, Value: value})
	}
	return out, nil
}

// headerLineView is a header ready to print: both parts quoted.
type headerLineView struct {
	Name, Value string
}

func newHeaderLineViews(q *quoter, lines []HeaderLine) []headerLineView {
	var v []headerLineView
	for _, l := range lines {
		v = append(v, headerLineView{Name: q.quote(l.Name), Value: q.quote(l.Value)})
	}
	return v
}
