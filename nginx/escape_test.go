package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

func TestQuote(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    string
		wantErr string
	}{
		"plain":                         {in: "/api", want: `"/api"`},
		"empty":                         {in: "", want: `""`},
		"double quote is escaped":       {in: `a"b`, want: `"a\"b"`},
		"backslash is escaped":          {in: `a\b`, want: `"a\\b"`},
		"trailing backslash":            {in: `a\`, want: `"a\\"`},
		"single quote stays":            {in: `a'b`, want: `"a'b"`},
		"syntax inside quotes is inert": {in: `a; } location / { return 200 x; # c`, want: `"a; } location / { return 200 x; # c"`},
		"non-ASCII UTF-8":               {in: "café", want: `"café"`},
		"dollar is rejected":            {in: "$host", wantErr: "'$' would be read as a variable"},
		"dollar-brace is rejected":      {in: "a${x}", wantErr: "'$'"},
		"newline is rejected":           {in: "a\nb", wantErr: "control character 0x0a"},
		"carriage return is rejected":   {in: "a\rb", wantErr: "control character 0x0d"},
		"tab is rejected":               {in: "a\tb", wantErr: "control character 0x09"},
		"NUL is rejected":               {in: "a\x00b", wantErr: "control character 0x00"},
		"DEL is rejected":               {in: "a\x7fb", wantErr: "control character 0x7f"},
		"invalid UTF-8 is rejected":     {in: "a\xffb", wantErr: "invalid UTF-8"},
		"dollar after non-ASCII":        {in: "é$x", wantErr: "'$'"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Quote(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Quote(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Quote(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			if back, ok := nginxUnquote(got); !ok || back != tc.in {
				t.Errorf("nginx reads %q back as %q (ok=%v)", got, back, ok)
			}
		})
	}
}

// nginxUnquote reads one double-quoted token the way nginx's configuration parser does
// (ngx_conf_read_token and its unescaping): it fails if the token ends before the last byte.
func nginxUnquote(tok string) (string, bool) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(tok)-1; i++ {
		c := tok[i]
		switch c {
		case '"':
			return "", false // the token would end here
		case '\\':
			if i+1 >= len(tok)-1 {
				return "", false // escapes the closing quote
			}
			i++
			switch tok[i] {
			case '"', '\'', '\\':
				b.WriteByte(tok[i])
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte('\\')
				b.WriteByte(tok[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

func FuzzQuote(f *testing.F) {
	for _, s := range []string{"/api", `a"b`, `a\`, `\"`, "a;b}", "$x", "a\nb", "é", "\xff", `\\"`, "#", "'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Quote(s)
		if err != nil {
			return
		}
		back, ok := nginxUnquote(q)
		if !ok || back != s {
			t.Fatalf("Quote(%q) = %q, which nginx reads as %q (single token: %v)", s, q, back, ok)
		}
		for i := 0; i < len(q); i++ {
			if c := q[i]; c == '$' || c < 0x20 || c == 0x7f {
				t.Fatalf("Quote(%q) = %q contains byte 0x%02x", s, q, c)
			}
		}
	})
}

// TestQuoteRoundTripsThroughNginx has the real NGINX read quoted strings back: each one is served by
// "return 200 <quoted>" and must come back byte for byte.
func TestQuoteRoundTripsThroughNginx(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	inputs := []string{
		`plain`, `a"b`, `a\b`, `a\\"b`, `\`, `x; y } z {`, `# not a comment`, `'single' "double"`,
		`\n is not a newline`, `\t`, "café ☕", `{{.Template}}`, `";return 500;"`,
	}
	var conf strings.Builder
	port := freePort(t)
	fmt.Fprintf(&conf, "daemon off;\npid %s;\nerror_log stderr;\nevents {}\nhttp {\n\taccess_log off;\n\tserver {\n\t\tlisten 127.0.0.1:%d;\n", mustQuote(t, paths.PIDFile()), port)
	for i, in := range inputs {
		fmt.Fprintf(&conf, "\t\tlocation = /q%d { return 200 %s; }\n", i, mustQuote(t, in))
	}
	conf.WriteString("\t}\n}\n")
	if err := os.WriteFile(paths.ConfFile(), []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := NewProcess(ProcessConfig{Paths: paths})
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	for i, in := range inputs {
		var body []byte
		eventually(t, "nginx answers", 5*time.Second, func() bool {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/q%d", port, i))
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, err = io.ReadAll(resp.Body)
			return err == nil
		})
		if string(body) != in {
			t.Errorf("nginx read %q back as %q", in, body)
		}
	}
}

func mustQuote(t *testing.T, s string) string {
	t.Helper()
	q, err := Quote(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
