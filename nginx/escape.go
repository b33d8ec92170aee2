package nginx

import (
	"fmt"
	"unicode/utf8"
)

// Quote is the one function through which strings reach nginx.conf. It returns s as an nginx
// double-quoted string, with '"' and '\' escaped, so nginx reads back exactly s as a single argument
// whatever s contains (';', '{', '}', '#', spaces, quotes). It rejects what no quoting makes safe:
//   - '$': nginx interpolates variables inside quoted strings, and has no escape for '$';
//   - control characters (newlines included) and invalid UTF-8: they have no business in a directive
//     and would make the file hard to read and to audit.
//
// Validated values (hosts, paths, upstream names) never contain any of these; Quote is the second
// line of defence and the one place to look when auditing the configuration for injection.
func Quote(s string) (string, error) {
	b, err := appendQuoted(make([]byte, 0, len(s)+2), s)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendQuoted appends the quoted form of s to dst.
func appendQuoted(dst []byte, s string) ([]byte, error) {
	if err := checkQuotable(s); err != nil {
		return dst, err
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"'), nil
}

func checkQuotable(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("string %q cannot be written to nginx.conf: invalid UTF-8", s)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '$':
			return fmt.Errorf("string %q cannot be written to nginx.conf: '$' would be read as a variable", s)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("string %q cannot be written to nginx.conf: control character 0x%02x", s, c)
		}
	}
	return nil
}
