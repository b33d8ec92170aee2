package nginx

import (
	"fmt"
	"net/netip"
	"strings"
)

// maxPathLength bounds Ingress paths; longer ones are almost certainly mistakes and only bloat the config.
const maxPathLength = 1024

// pathPunctuation is every non-alphanumeric byte a path may contain. Left out on purpose:
//   - whitespace, control bytes, '{', '}', ';', both quotes, '\\', '`', '#', '$': they are nginx syntax or
//     variable interpolation, and no escaping makes them harmless in every directive;
//   - '?': the query string is never part of the matched URI;
//   - '%': nginx matches locations against the decoded URI, so an encoded path would never match;
//   - '<', '>', '^', '|', '[', ']', and non-ASCII bytes: not valid unencoded in a URI path (RFC 3986).
const pathPunctuation = "-._~!*(),+=:@/&"

// ValidatePath checks an Ingress path for use in a location. It returns an error that says what is wrong
// and which characters are allowed.
func ValidatePath(p string) error {
	if p == "" {
		return fmt.Errorf("path must not be empty")
	}
	if p[0] != '/' {
		return fmt.Errorf("path %q must start with '/'", p)
	}
	if len(p) > maxPathLength {
		return fmt.Errorf("path is %d bytes long, more than the limit of %d", len(p), maxPathLength)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if strings.IndexByte(pathPunctuation, c) < 0 {
			return fmt.Errorf("path %q: character %s is not allowed (allowed: letters, digits and %s; regular expressions need the use-regex annotation and pathType ImplementationSpecific)",
				p, describeByte(c), pathPunctuation)
		}
	}
	// nginx normalizes the request URI (merges slashes, resolves dot segments) before matching, so a
	// location with such segments could never match anything.
	for _, seg := range []string{"//", "/./", "/../"} {
		if strings.Contains(p, seg) {
			return fmt.Errorf("path %q must not contain %q: nginx normalizes request paths, so it would never match", p, seg)
		}
	}
	if strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..") {
		return fmt.Errorf("path %q must not end with a dot segment: nginx normalizes request paths, so it would never match", p)
	}
	return nil
}

func describeByte(c byte) string {
	switch {
	case c == ' ':
		return "' ' (space)"
	case c < 0x20 || c == 0x7f:
		return fmt.Sprintf("0x%02x (control character)", c)
	case c >= 0x80:
		return fmt.Sprintf("0x%02x (non-ASCII)", c)
	default:
		return fmt.Sprintf("%q", string(c))
	}
}

// ValidateHost checks an Ingress host: a lowercase RFC 1123 DNS name of at most 253 bytes, or "*." followed
// by one. IP addresses are rejected, as the Ingress API does.
func ValidateHost(h string) error {
	if h == "" {
		return fmt.Errorf("host must not be empty")
	}
	if len(h) > 253 {
		return fmt.Errorf("host is %d bytes long, more than the limit of 253", len(h))
	}
	name := h
	if strings.HasPrefix(h, "*.") {
		name = h[2:]
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return fmt.Errorf("host %q must be a DNS name, not an IP address", h)
	}
	if name == "" {
		return fmt.Errorf("host %q: wildcard needs a domain after \"*.\"", h)
	}
	for _, label := range strings.Split(name, ".") {
		if err := validateLabel(label); err != nil {
			return fmt.Errorf("host %q: %w (want a lowercase RFC 1123 name like \"example.com\" or a wildcard like \"*.example.com\")", h, err)
		}
	}
	return nil
}

func validateLabel(l string) error {
	if l == "" {
		return fmt.Errorf("empty label")
	}
	if len(l) > 63 {
		return fmt.Errorf("label %q is longer than 63 bytes", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		case c == '-':
			if i == 0 || i == len(l)-1 {
				return fmt.Errorf("label %q must start and end with a letter or digit", l)
			}
		case c >= 'A' && c <= 'Z':
			return fmt.Errorf("upper-case character %q", string(c))
		default:
			return fmt.Errorf("character %s is not allowed", describeByte(c))
		}
	}
	return nil
}
