package nginx

import (
	"fmt"
	"strings"
)

// The ConfigMap keys of client addresses, forwarded headers and global blocking (issue #18).

// maxBlockEntries bounds the entries of one block-* key; maxBlockEntryLen the bytes of one.
const (
	maxBlockEntries  = 1000
	maxBlockEntryLen = 512
)

// fwdSettings are the typed values of these keys (embedded in Settings).
type fwdSettings struct {
	UseForwardedHeaders     bool
	UseProxyProtocol        bool
	EnableRealIP            bool
	ForwardedForHeader      string
	ComputeFullForwardedFor bool
	// ProxyRealIPCIDR are canonical prefixes.
	ProxyRealIPCIDR      []string
	GenerateRequestID    bool
	AddOriginalURIHeader bool
	// BlockCIDRs are canonical addresses or prefixes.
	BlockCIDRs []string
	// BlockUserAgents and BlockReferers are map keys for NGINX before quoting: "~" or "~*" and a
	// pattern rewritten for PCRE, or "\" and an exact string (the backslash makes NGINX read the rest
	// literally, even "default" or a leading "~").
	BlockUserAgents []string
	BlockReferers   []string
	// WhitelistSourceRange and DenylistSourceRange are canonical prefixes (TranslateOptions).
	WhitelistSourceRange []string
	DenylistSourceRange  []string
}

func init() {
	registerSettings(
		settingKey{Name: "use-forwarded-headers", Default: "false", Values: boolValues,
			Doc: "Trust the client's X-Forwarded-For (the header forwarded-for-header names), X-Forwarded-Proto, X-Forwarded-Host " +
				"and X-Forwarded-Port and pass them on, for NGINX behind another L7 proxy. The client address is taken from the " +
				"forwarded-for header (NGINX's realip module, recursive) when the connection comes from proxy-real-ip-cidr; " +
				"HTTP->HTTPS redirects (ssl-redirect) follow the trusted X-Forwarded-Proto, and the backend's Host header is the trusted " +
				"X-Forwarded-Host (its first entry; upstream-vhost still wins), as ingress-nginx's $best_http_host.",
			Difference: "X-Forwarded-Proto, -Host and -Port are trusted only from proxy-real-ip-cidr, as X-Forwarded-For is " +
				"(ingress-nginx trusted them from any client). With --enable-ssl-passthrough, TLS connections that NGINX terminates " +
				"then take their address from the forwarded-for header too, not from the passthrough proxy's PROXY header " +
				"(NGINX has one real_ip_header per server).",
			set: boolField(func(s *Settings) *bool { return &s.UseForwardedHeaders })},
		settingKey{Name: "use-proxy-protocol", Default: "false", Values: boolValues,
			Doc: "NGINX's HTTP and HTTPS listeners expect a PROXY protocol header (v1 or v2) on every connection, from a load balancer; " +
				"the client address (and X-Forwarded-Port) come from it when the connection comes from proxy-real-ip-cidr. " +
				"compute-full-forwarded-for appends the PROXY header's address.",
			Difference: "With --enable-ssl-passthrough the public HTTPS port belongs to the passthrough proxy: the flag --use-proxy-protocol " +
				"makes it expect the header (a ConfigMap cannot change that listener), and this key applies to the HTTP port. " +
				"With use-forwarded-headers too, the address comes from the PROXY header only: the forwarded-for header is not read for it " +
				"(ingress-nginx then read X-Forwarded-For from trusted load balancers), while X-Forwarded-Proto, -Host and -Port are " +
				"trusted from load balancers in proxy-real-ip-cidr.",
			set: boolField(func(s *Settings) *bool { return &s.UseProxyProtocol })},
		settingKey{Name: "enable-real-ip", Default: "false", Values: boolValues,
			Doc: "Take the client address from the forwarded-for header of connections from proxy-real-ip-cidr (NGINX's " +
				"realip module), without trusting the other X-Forwarded-* headers. use-forwarded-headers implies it.",
			Difference: "As use-forwarded-headers with --enable-ssl-passthrough.",
			set:        boolField(func(s *Settings) *bool { return &s.EnableRealIP })},
		settingKey{Name: "forwarded-for-header", Default: "X-Forwarded-For", Values: "a header name (letters, digits and `-`)",
			Doc: "The header that carries the client address for use-forwarded-headers and enable-real-ip.",
			set: func(s *Settings, v string) error {
				if !isHeaderNameToken(v) {
					return fmt.Errorf("want a header name of letters, digits and -")
				}
				s.ForwardedForHeader = v
				return nil
			}},
		settingKey{Name: "compute-full-forwarded-for", Default: "false", Values: boolValues,
			Doc: "With use-forwarded-headers, send the backend the client's X-Forwarded-For with the connection's address appended, " +
				"instead of the client address alone.",
			set: boolField(func(s *Settings) *bool { return &s.ComputeFullForwardedFor })},
		settingKey{Name: "proxy-real-ip-cidr", Default: "0.0.0.0/0", Values: "IP addresses or CIDR ranges, separated by commas (at most 1000)",
			Doc: "The addresses of the proxies whose forwarded headers are trusted (use-forwarded-headers, enable-real-ip). The " +
				"default, as ingress-nginx's, trusts every IPv4 client: set it to the load balancer's range, or any client can " +
				"choose the address that logs, block-cidrs, whitelist-source-range and limits see.",
			set: func(s *Settings, v string) error {
				p, err := parsePrefixList(v)
				if err != nil {
					return err
				}
				if len(p) == 0 {
					return fmt.Errorf("want at least one address or CIDR range")
				}
				s.ProxyRealIPCIDR = p
				return nil
			}},
		settingKey{Name: "generate-request-id", Default: "true", Values: boolValues,
			Doc: "Send the backend an X-Request-ID, random when the request has none (the request's own is always passed on).",
			set: boolField(func(s *Settings) *bool { return &s.GenerateRequestID })},
		settingKey{Name: "proxy-add-original-uri-header", Default: "false", Values: boolValues,
			Doc: "Send the backend an X-Original-URI header with the request URI as the client sent it. Custom error pages " +
				"(custom-http-errors) always get it.",
			set: boolField(func(s *Settings) *bool { return &s.AddOriginalURIHeader })},
		settingKey{Name: "block-cidrs", Values: "IP addresses or CIDR ranges, separated by commas (at most 1000)",
			Doc: "Requests from these addresses are answered 403 (NGINX's deny), on every host. The address is the client's " +
				"after enable-real-ip / use-forwarded-headers.",
			Difference: "Applies to the public listeners only, not to NGINX's loopback status server.",
			set:        settingsField(func(s *Settings) *[]string { return &s.BlockCIDRs }, parsePrefixList)},
		settingKey{Name: "whitelist-source-range", Values: "IP addresses or CIDR ranges, separated by commas",
			Doc:        "The allowlist of every Ingress without `allowlist-source-range` or `whitelist-source-range`: other addresses get 403.",
			Difference: "`satisfy: any` needs the Ingress's own allowlist annotation.",
			set:        settingsField(func(s *Settings) *[]string { return &s.WhitelistSourceRange }, parseRangeSetting)},
		settingKey{Name: "denylist-source-range", Values: "IP addresses or CIDR ranges, separated by commas",
			Doc: "The denylist of every Ingress without `denylist-source-range`: these addresses get 403.",
			set: settingsField(func(s *Settings) *[]string { return &s.DenylistSourceRange }, parseRangeSetting)},
		settingKey{Name: "block-user-agents", Values: blockPatternValues,
			Doc:        "Requests whose User-Agent matches one entry are answered 403, on every host.",
			Difference: blockPatternDifference,
			set:        settingsField(func(s *Settings) *[]string { return &s.BlockUserAgents }, parseBlockPatterns)},
		settingKey{Name: "block-referers", Values: blockPatternValues,
			Doc:        "Requests whose Referer matches one entry are answered 403, on every host.",
			Difference: blockPatternDifference,
			set:        settingsField(func(s *Settings) *[]string { return &s.BlockReferers }, parseBlockPatterns)},
	)
}

const blockPatternValues = "entries separated by commas (at most 1000): an exact string (compared ignoring case, as NGINX's map), " +
	"or `~` (case-sensitive) / `~*` (ignoring case) and a regular expression"

const blockPatternDifference = "Regular expressions are checked as Go's regexp reads them and written anew for NGINX's PCRE; " +
	"constructs the two read differently (back-references, `\\x`, `\\p`, ...) are refused, where ingress-nginx handed any text " +
	"to NGINX. Entries may not contain `$` or control characters."

// isHeaderNameToken reports whether v is a header name of letters, digits and '-' (never NGINX's
// "proxy_protocol").
func isHeaderNameToken(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// parsePrefixList parses addresses and CIDR ranges separated by commas into canonical prefixes.
func parsePrefixList(v string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if len(out) == maxBlockEntries {
			return nil, fmt.Errorf("at most %d addresses or ranges", maxBlockEntries)
		}
		// As the source range annotations: IPv4-mapped ranges become IPv4 ones, which NGINX compares
		// mapped clients with.
		p, ok := parseSourceRange(f)
		if !ok {
			return nil, fmt.Errorf("%s is not an IP address or CIDR range", quoteValue(f))
		}
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	return out, nil
}

// parseBlockPatterns parses the entries of block-user-agents and block-referers into map keys.
func parseBlockPatterns(v string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if len(out) == maxBlockEntries {
			return nil, fmt.Errorf("at most %d entries", maxBlockEntries)
		}
		if len(f) > maxBlockEntryLen {
			return nil, fmt.Errorf("an entry is %d bytes long, more than the limit of %d", len(f), maxBlockEntryLen)
		}
		if err := checkQuotable(f); err != nil || strings.ContainsAny(f, "\x7f") {
			return nil, fmt.Errorf("%s: entries may not contain $ or control characters", quoteValue(f))
		}
		if !strings.HasPrefix(f, "~") {
			out = append(out, `\`+f)
			continue
		}
		prefix, pattern := "~", f[1:]
		if strings.HasPrefix(pattern, "*") {
			prefix, pattern = "~*", pattern[1:]
		}
		if strings.TrimSpace(pattern) == "" {
			return nil, fmt.Errorf("%s: want a regular expression after %s", quoteValue(f), prefix)
		}
		re, err := compileUserPCRE(pattern, maxBlockEntryLen)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", quoteValue(f), err)
		}
		out = append(out, prefix+re)
	}
	return out, nil
}

// fwdView is what the template prints of these keys.
type fwdView struct {
	// RealIP configures the realip module on the public server: RealIPHeader (a validated header name)
	// from RealIPFrom (canonical prefixes).
	RealIP       bool
	RealIPHeader string
	RealIPFrom   []string
	// ProxyProtocol puts the PROXY protocol on the HTTP and HTTPS listeners (use-proxy-protocol); the
	// client's address then comes from it.
	ProxyProtocol bool
	// TrustFrom are the prefixes whose X-Forwarded-Proto/-Host/-Port are trusted (use-forwarded-headers).
	TrustFrom []string
	// FullForwardedFor appends the connection's address to the client's X-Forwarded-For.
	FullForwardedFor  bool
	GenerateRequestID bool
	OriginalURI       bool
	BlockCIDRs        []string
	// BlockUserAgents and BlockReferers are quoted map keys.
	BlockUserAgents []string
	BlockReferers   []string
}

func newFwdView(q *quoter, s Settings) fwdView {
	v := fwdView{
		RealIP:            s.UseForwardedHeaders || s.EnableRealIP,
		ProxyProtocol:     s.UseProxyProtocol,
		RealIPHeader:      s.ForwardedForHeader,
		RealIPFrom:        s.ProxyRealIPCIDR,
		FullForwardedFor:  s.UseForwardedHeaders && s.ComputeFullForwardedFor,
		GenerateRequestID: s.GenerateRequestID,
		OriginalURI:       s.AddOriginalURIHeader,
		BlockCIDRs:        s.BlockCIDRs,
	}
	if s.UseForwardedHeaders {
		v.TrustFrom = s.ProxyRealIPCIDR
	}
	for _, p := range s.BlockUserAgents {
		v.BlockUserAgents = append(v.BlockUserAgents, q.quote(p))
	}
	for _, p := range s.BlockReferers {
		v.BlockReferers = append(v.BlockReferers, q.quote(p))
	}
	return v
}
