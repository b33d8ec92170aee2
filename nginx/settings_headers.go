package nginx

import "fmt"

// The ConfigMap keys of response headers from backends (issue #18).

// HeaderSettings are the ConfigMap's keys about the headers of backends' responses.
type HeaderSettings struct {
	// Hide are header names NGINX drops from backends' responses (hide-headers).
	Hide []string
	// AllowServer passes the backend's Server header (allow-backend-server-header).
	AllowServer bool
	// AllowedResponse are the names custom-headers may set (global-allowed-response-headers); none: all.
	AllowedResponse []string
}

// maxHiddenHeaders bounds hide-headers.
const maxHiddenHeaders = 64

// isHeaderNameWord reports whether w is a header name of letters, digits, '-' and '_'.
func isHeaderNameWord(w string) bool {
	if w == "" || len(w) > maxHeaderName {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func init() {
	registerSettings(
		settingKey{Name: "hide-headers", Values: fmt.Sprintf("header names of letters, digits, `-` and `_`, separated by commas or spaces (at most %d)", maxHiddenHeaders),
			Doc: "Headers of backends' responses that do not reach clients (proxy_hide_header).",
			Difference: "Applies to HTTP backends, as in ingress-nginx; gRPC backends (backend-protocol GRPC, GRPCS) keep their headers. " +
				"Headers that custom-headers sets are set after this and reach clients.",
			set: settingsField(func(s *Settings) *[]string { return &s.Headers.Hide }, func(v string) ([]string, error) {
				return wordList(v, maxHiddenHeaders, isHeaderNameWord, "header names")
			})},
		settingKey{Name: "allow-backend-server-header", Default: "false", Values: boolValues,
			Doc: "Pass the Server header of backends' responses instead of NGINX's own (proxy_pass_header Server).",
			set: boolField(func(s *Settings) *bool { return &s.Headers.AllowServer })},
		settingKey{Name: "global-allowed-response-headers", Values: "header names of letters, digits, `-` and `_`, separated by commas or spaces (at most 64)",
			Doc: "When set, the only header names the custom-headers annotation may set (in any case); an Ingress whose ConfigMap names " +
				"another is rejected with a Warning.",
			Difference: "Empty (the default) allows every valid name, where ingress-nginx allowed none: values are checked and reach only " +
				"the Ingress's own responses (see custom-headers in docs/annotations.md). Names that frame the message stay refused.",
			set: settingsField(func(s *Settings) *[]string { return &s.Headers.AllowedResponse }, func(v string) ([]string, error) {
				return wordList(v, maxCustomHeaders, isHeaderNameWord, "header names")
			})},
	)
}

// headersView is what the template sees of HeaderSettings.
type headersView struct {
	// Hide are quoted header names.
	Hide        []string
	AllowServer bool
}

func newHeadersView(q *quoter, h HeaderSettings) headersView {
	v := headersView{AllowServer: h.AllowServer}
	for _, name := range h.Hide {
		v.Hide = append(v.Hide, q.quote(name))
	}
	return v
}
