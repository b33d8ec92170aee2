package nginx

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
)

// Regex paths, as ingress-nginx has them: a path of an Ingress with use-regex (or with a rewrite-target
// that differs from it) is matched as the case-insensitive regular expression "^" + path against the
// normalized request path, and once one such path is on a host, every path of the host is (see
// Server.RegexMode and the matching rules in routes.go).
//
// The Lua router matches with NGINX's PCRE (ngx.re), the Go model with Go's regexp (RE2). A pattern is
// parsed once, by Go's regexp/syntax, and the PCRE pattern pushed to NGINX is written from the parsed
// tree, not copied from the Ingress: literals and classes become explicit bytes, "." and "$" their RE2
// meaning, so that NGINX cannot read the text differently. PCRE runs without UTF-8 mode (one byte, one
// character) while Go reads UTF-8; the Go matcher therefore sees every byte above 0x7f as DEL (0x7f),
// and the PCRE classes written from the tree admit bytes above 0x7f exactly when they admit DEL. ASCII
// patterns cannot tell DEL from those bytes otherwise (checkRegexTree refuses the classes that could), so
// both engines match the same requests with the same captures.

// PathRegex is the compiled form of a path matched as a regular expression.
type PathRegex struct {
	// Source is the pattern as ingress-nginx writes it into a location: "^" + the path, case-insensitive.
	Source string
	// PCRE is the pattern for NGINX's ngx.re, written from the parsed Source (no options needed).
	PCRE string
	// Literal is set when the pattern only matches a fixed prefix (ASCII, compared case-insensitively):
	// the prefix in lower case. The router then compares strings instead of running a regex.
	Literal string

	once sync.Once
	re   *regexp.Regexp
}

// regexSyntaxChars are the characters a regex path may use besides letters and digits.
const regexSyntaxChars = pathPunctuation + `^$[]{}?|\`

// CompilePathRegex parses path as a regular expression as ingress-nginx uses it ("^" + path, case
// insensitive). It refuses what RE2 and PCRE read differently, naming the construct.
func CompilePathRegex(path string) (*PathRegex, error) {
	if err := validateRegexText(path); err != nil {
		return nil, err
	}
	source := "^" + path
	tree, err := syntax.Parse(source, syntax.Perl|syntax.FoldCase)
	if err != nil {
		return nil, fmt.Errorf("path %q is not a regular expression that Go's regexp (RE2) accepts: %s", path, regexErrorReason(err))
	}
	if err := checkRegexTree(tree, path); err != nil {
		return nil, err
	}
	w := pcreWriter{}
	w.write(tree)
	return &PathRegex{Source: source, PCRE: w.b.String(), Literal: literalPrefix(tree)}, nil
}

// literalRegex is the PathRegex of a path that is not a usable regex on a regex host: its text, matched
// as a case-insensitive prefix.
func literalRegex(path string) *PathRegex {
	tree := &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{
		{Op: syntax.OpBeginText},
		{Op: syntax.OpLiteral, Rune: []rune(path), Flags: syntax.FoldCase},
	}}
	w := pcreWriter{}
	w.write(tree)
	return &PathRegex{Source: "^" + regexp.QuoteMeta(path), PCRE: w.b.String(), Literal: strings.ToLower(path)}
}

// hostPathRegex is the pattern of a non-regex path on a regex host: the path read as a regex, as
// ingress-nginx does, or its text when it is no regex that both engines read alike.
func hostPathRegex(path string) *PathRegex {
	if r, err := CompilePathRegex(path); err == nil {
		return r
	}
	return literalRegex(path)
}

func regexErrorReason(err error) string {
	if se, ok := err.(*syntax.Error); ok {
		return fmt.Sprintf("%s in %q", se.Code, se.Expr)
	}
	return err.Error()
}

// validateRegexText checks the characters of a regex path and refuses, before parsing, the escapes whose
// meaning differs between RE2 and PCRE.
func validateRegexText(p string) error {
	if p == "" || p[0] != '/' {
		return fmt.Errorf("path %q must start with '/'", p)
	}
	if len(p) > maxPathLength {
		return fmt.Errorf("path is %d bytes long, more than the limit of %d", len(p), maxPathLength)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(regexSyntaxChars, c) >= 0 {
			continue
		}
		return fmt.Errorf("path %q: character %s is not allowed in a regular expression path (allowed: letters, digits and %s)",
			p, describeByte(c), regexSyntaxChars)
	}
	if why := pcreTextProblem(p); why != "" {
		return fmt.Errorf("path %q: %s", p, why)
	}
	return nil
}

// pcreTextProblem returns why the text of regex p reads differently for RE2 and NGINX's PCRE before it
// is parsed ("{," and escapes), or "" when it does not.
func pcreTextProblem(p string) string {
	if strings.Contains(p, "{,") {
		return "\"{,\" is a literal for RE2 and a repetition for newer PCRE; write {0,n} or \\{"
	}
	for i := 0; i+1 < len(p); i++ {
		if p[i] != '\\' {
			continue
		}
		i++
		switch c := p[i]; {
		case c >= '0' && c <= '9':
			return fmt.Sprintf("\\%c is an octal escape for RE2 and a back-reference for PCRE; neither is supported", c)
		case c == 'p' || c == 'P':
			return fmt.Sprintf("\\%c (Unicode classes) reads UTF-8 for RE2 and single bytes for NGINX's PCRE; use ASCII classes such as [a-z]", c)
		case c == 's' || c == 'S':
			return fmt.Sprintf("\\%c differs between RE2 and PCRE (vertical tab); use a class such as [ \\t]", c)
		case c == 'x':
			return "\\x escapes are not supported (bytes above 0x7f differ between RE2 and NGINX's PCRE); write ASCII characters, escaped with \\ where needed"
		}
	}
	return ""
}

// checkRegexTree refuses parsed constructs that RE2 and PCRE match differently.
func checkRegexTree(re *syntax.Regexp, path string) error {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine:
		return fmt.Errorf("path %q: the multi-line flag (?m) is not supported: its ^ and $ differ between RE2 and PCRE", path)
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r > 0x7e {
				return fmt.Errorf("path %q: character %s cannot be matched alike by RE2 and PCRE", path, strconv.QuoteRune(r))
			}
		}
	case syntax.OpCharClass:
		if classHas(re.Rune, 0x7f) != classHas(re.Rune, 0x80) {
			return fmt.Errorf("path %q: a character class that tells DEL (0x7f) from bytes above it ([[:ascii:]], [[:cntrl:]]) reads bytes for PCRE and UTF-8 for RE2", path)
		}
	case syntax.OpStar, syntax.OpPlus, syntax.OpRepeat:
		if re.Op != syntax.OpRepeat || re.Max == -1 || re.Max > 1 {
			if matchesEmpty(re.Sub[0]) && hasCapture(re.Sub[0]) {
				return fmt.Errorf("path %q: a repeated group that can match the empty string captures differently in RE2 and PCRE", path)
			}
		}
	}
	for _, s := range re.Sub {
		if err := checkRegexTree(s, path); err != nil {
			return err
		}
	}
	return nil
}

func classHas(ranges []rune, r rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] <= r && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// matchesEmpty reports whether re can match the empty string (conservatively: true when unsure).
func matchesEmpty(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL, syntax.OpNoMatch:
		return false
	case syntax.OpPlus, syntax.OpCapture:
		return matchesEmpty(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min == 0 || matchesEmpty(re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !matchesEmpty(s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if matchesEmpty(s) {
				return true
			}
		}
		return false
	}
	return true // empty matches, anchors, boundaries, star, quest
}

func hasCapture(re *syntax.Regexp) bool {
	if re.Op == syntax.OpCapture {
		return true
	}
	for _, s := range re.Sub {
		if hasCapture(s) {
			return true
		}
	}
	return false
}

// literalPrefix returns the lower-case prefix when tree is "^" followed by case-folded ASCII literals.
func literalPrefix(tree *syntax.Regexp) string {
	if tree.Op != syntax.OpConcat || len(tree.Sub) != 2 || tree.Sub[0].Op != syntax.OpBeginText {
		return ""
	}
	lit := tree.Sub[1]
	if lit.Op != syntax.OpLiteral || lit.Flags&syntax.FoldCase == 0 {
		return ""
	}
	b := make([]byte, len(lit.Rune))
	for i, r := range lit.Rune {
		if r >= 0x7f {
			return ""
		}
		b[i] = byte(r)
	}
	return strings.ToLower(string(b))
}

// pcreWriter writes a parsed pattern as PCRE text, byte-oriented and with every construct explicit.
type pcreWriter struct{ b strings.Builder }

func (w *pcreWriter) write(re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpNoMatch:
		w.b.WriteString(`[^\x00-\xff]`)
	case syntax.OpEmptyMatch:
		w.b.WriteString(`(?:)`)
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				lower, upper := r|0x20, r&^0x20
				w.b.WriteByte('[')
				w.b.WriteRune(upper)
				w.b.WriteRune(lower)
				w.b.WriteByte(']')
				continue
			}
			w.byteLiteral(byte(r))
		}
	case syntax.OpCharClass:
		w.class(re.Rune)
	case syntax.OpAnyCharNotNL:
		w.b.WriteString(`[\x00-\x09\x0b-\xff]`)
	case syntax.OpAnyChar:
		w.b.WriteString(`[\x00-\xff]`)
	case syntax.OpBeginText:
		w.b.WriteString(`\A`)
	case syntax.OpEndText:
		w.b.WriteString(`\z`)
	case syntax.OpWordBoundary:
		w.b.WriteString(`\b`)
	case syntax.OpNoWordBoundary:
		w.b.WriteString(`\B`)
	case syntax.OpCapture:
		w.b.WriteByte('(')
		w.write(re.Sub[0])
		w.b.WriteByte(')')
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		w.b.WriteString(`(?:`)
		w.write(re.Sub[0])
		w.b.WriteByte(')')
		switch re.Op {
		case syntax.OpStar:
			w.b.WriteByte('*')
		case syntax.OpPlus:
			w.b.WriteByte('+')
		case syntax.OpQuest:
			w.b.WriteByte('?')
		default:
			w.b.WriteByte('{')
			w.b.WriteString(strconv.Itoa(re.Min))
			if re.Max != re.Min {
				w.b.WriteByte(',')
				if re.Max >= 0 {
					w.b.WriteString(strconv.Itoa(re.Max))
				}
			}
			w.b.WriteByte('}')
		}
		if re.Flags&syntax.NonGreedy != 0 {
			w.b.WriteByte('?')
		}
	case syntax.OpConcat:
		for _, s := range re.Sub {
			w.write(s)
		}
	case syntax.OpAlternate:
		w.b.WriteString(`(?:`)
		for i, s := range re.Sub {
			if i > 0 {
				w.b.WriteByte('|')
			}
			w.write(s)
		}
		w.b.WriteByte(')')
	default:
		// Every op of regexp/syntax is handled above; an unknown one must not match anything.
		w.b.WriteString(`[^\x00-\xff]`)
	}
}

func (w *pcreWriter) byteLiteral(c byte) {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' {
		w.b.WriteByte(c)
		return
	}
	w.hex(c)
}

func (w *pcreWriter) hex(c byte) {
	const digits = "0123456789abcdef"
	w.b.WriteString(`\x`)
	w.b.WriteByte(digits[c>>4])
	w.b.WriteByte(digits[c&0xf])
}

// class writes a Go character class as PCRE byte ranges: its ASCII part, plus every byte above 0x7f when
// it holds DEL (see the package comment on regex paths).
func (w *pcreWriter) class(ranges []rune) {
	w.b.WriteByte('[')
	empty := true
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if lo > 0x7f {
			break
		}
		hi = min(hi, 0x7f)
		if hi == 0x7f {
			hi = 0xff
		}
		empty = false
		w.hex(byte(lo))
		if hi != lo {
			w.b.WriteByte('-')
			w.hex(byte(hi))
		}
	}
	if empty {
		w.b.WriteString(`^\x00-\xff`)
	}
	w.b.WriteByte(']')
}

// Match matches uri as NGINX's PCRE does: it returns the start and end offsets of the whole match and
// of each group (-1 for a group that did not take part), or nil.
func (r *PathRegex) Match(uri string) []int {
	r.once.Do(func() {
		// The source passed CompilePathRegex (or is quoted): it compiles.
		r.re = regexp.MustCompile("(?i)" + r.Source)
	})
	return r.re.FindStringSubmatchIndex(bytesAsPCRE(uri))
}

// bytesAsPCRE maps every byte above 0x7f to DEL, so that Go's UTF-8 matching sees one character per byte
// like PCRE without UTF-8 mode.
func bytesAsPCRE(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 0x80 {
					b[j] = 0x7f
				}
			}
			return string(b)
		}
	}
	return s
}
