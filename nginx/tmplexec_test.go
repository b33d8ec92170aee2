package nginx

import (
	"bytes"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"text/template"
)

// The executor in tmplexec.go is checked against text/template itself (which the tests may use: only
// the controller's binary must not link it): on the embedded template with many configurations, on a
// table of templates that uses each construct, and by FuzzTemplateExec.

// execData is a root value with one field of each kind the executor meets. It has no methods, so
// text/template and the executor must agree on everything text/template executes.
type execData struct {
	S       string
	Empty   string
	I       int
	I64     int64
	U       uint
	F       float64
	B       bool
	Strs    []string
	None    []string
	Ints    []int
	M       map[string]int
	Nested  execNested
	Ptr     *execNested
	NilPtr  *execNested
	Any     any
	NilAny  any
	Prefix  netip.Prefix
	Items   []execNested
	MapList map[string][]string
	// The real view has none of these; templates must still not panic the controller on them, and
	// read them as text/template does.
	*execEmbedded // nil: its promoted field cannot be read
	AnyZero       any
	AnyFalse      any
	AnyEmpty      any
	PtrNilAny     *any
	NaN           float64
	U8            uint8
	Bools         map[bool]string
	MapAny        map[any]int
	MapInt        map[int64]string
	Pair1, Pair2  execPair // comparable types holding slices: == panics
}

type execEmbedded struct{ Deep string }

type execPair struct{ A any }

type execNested struct {
	Name  string
	Count int
	Tags  []string
}

func testExecData() execData {
	return execData{
		S: "text", I: 3, I64: -7, U: 9, F: 1.5, B: true,
		Strs: []string{"a", "b", "c"}, Ints: []int{0, 1, 2},
		M:      map[string]int{"zeta": 26, "alpha": 1, "mid": 13},
		Nested: execNested{Name: "inner", Count: 2, Tags: []string{"x"}},
		Ptr:    &execNested{Name: "pointed", Count: 5},
		Any:    "in an interface",
		Prefix: netip.MustParsePrefix("10.0.0.0/8"),
		Items:  []execNested{{Name: "one", Count: 1}, {Name: "two"}, {Name: "three", Count: 3, Tags: []string{"p", "q"}}},
		MapList: map[string][]string{
			"b": {"2"}, "a": {"1", "1"},
		},
		AnyZero: 0, AnyFalse: false, AnyEmpty: "", PtrNilAny: new(any),
		NaN: math.NaN(), U8: 3,
		Bools:  map[bool]string{true: "yes", false: "no"},
		MapAny: map[any]int{"k": 1},
		MapInt: map[int64]string{2: "two"},
		Pair1:  execPair{A: []int{1}}, Pair2: execPair{A: []int{1}},
	}
}

// execBoth runs text through text/template (missingkey=error, as the controller did before) and the
// executor; errors are returned as strings, "" for none.
func execBoth(t testing.TB, text string, data any) (want, got string, wantErr, gotErr error) {
	t.Helper()
	var wb, gb bytes.Buffer
	tt, err := template.New("nginx.conf").Option("missingkey=error").Parse(text)
	if err != nil {
		wantErr = err
	} else {
		wantErr = tt.Execute(&wb, data)
	}
	set, err := parseTmplSet("nginx.conf", text)
	if err != nil {
		gotErr = err
	} else {
		gotErr = set.execute(&gb, data)
	}
	return wb.String(), gb.String(), wantErr, gotErr
}

// execMismatch says how the executor's result differs from text/template's, "" when they agree: both
// fail, or both give the same text.
func execMismatch(text, want, got string, wantErr, gotErr error) string {
	if (wantErr == nil) != (gotErr == nil) {
		return fmt.Sprintf("%q: text/template error %v, executor error %v", text, wantErr, gotErr)
	}
	if wantErr == nil && got != want {
		return fmt.Sprintf("%q:\n executor      %q\n text/template %q", text, got, want)
	}
	return ""
}

func TestTemplateExecMatchesTextTemplate(t *testing.T) {
	for _, text := range []string{
		"plain text only",
		"{{.S}} {{.I}} {{.I64}} {{.U}} {{.F}} {{.B}} {{.Prefix}} {{.Any}} {{.NilAny}} {{.NilPtr}} {{.Ptr}} {{.Nested}}",
		"{{.Nested.Name}} {{.Ptr.Name}} {{.Ptr.Count}} {{.M.alpha}} {{.Strs}} {{.None}} {{.Items}}",
		"a {{- .S -}} b\n  {{- /* a comment */ -}}\n  c",
		"{{if .B}}yes{{else}}no{{end}} {{if .Empty}}set{{else if .S}}elif{{else}}none{{end}} {{if .None}}x{{end}}",
		"{{if .NilPtr}}p{{end}}{{if .Ptr}}P{{end}}{{if .NilAny}}a{{end}}{{if .Any}}A{{end}}{{if .F}}F{{end}}{{if .U}}U{{end}}",
		"{{with .Nested}}{{.Name}}/{{.Count}}{{end}} {{with .Empty}}x{{else}}empty{{end}} {{with $x := .S}}{{$x}}{{.}}{{end}}",
		"{{range .Strs}}[{{.}}]{{end}} {{range $i, $s := .Strs}}{{$i}}={{$s}},{{end}} {{range $s := .Strs}}{{$s}}{{end}}",
		"{{range .NilPtr}}x{{else}}nil pointer{{end}}", "{{range .NilAny}}x{{else}}nil interface{{end}}", "{{range .Ptr}}x{{end}}",
		"{{range .None}}x{{else}}no items{{end}} {{range .M}}{{.}} {{end}} {{range $k, $v := .M}}{{$k}}:{{$v}} {{end}}",
		"{{range $k, $v := .MapList}}{{$k}}{{range $v}}-{{.}}{{end}};{{end}}",
		"{{range .Items}}{{if eq .Name \"two\"}}{{continue}}{{end}}{{.Name}}{{if gt .Count 2}}{{break}}{{end}},{{end}}",
		"{{range 3}}{{.}}{{end}} {{range $i := .I}}{{$i}}{{end}}",
		"{{$x := 1}}{{range .Strs}}{{$x = 2}}{{end}}{{$x}} {{$.S}} {{range .Items}}{{$.S}}{{.Name}}{{end}}",
		"{{define \"t\"}}<{{.}}|{{$}}>{{end}}{{template \"t\" .S}} {{template \"t\" .I}} {{template \"t\"}}",
		"{{define \"n\"}}{{.Name}}{{end}}{{range .Items}}{{template \"n\" .}}{{end}} {{template \"n\" $.Nested}}",
		"{{and .B .S}} {{and .B .Empty .S}} {{or .Empty .S}} {{or .Empty .None}} {{not .B}} {{not .Empty}} {{and}}",
		"{{or .S .NoSuchField}} {{and .Empty .NoSuchField}}",
		"{{eq .S \"text\"}} {{eq .I 3}} {{eq .I 1 2 3}} {{eq .U 9}} {{eq .I .U}} {{ne .S \"x\"}} {{eq .Prefix .Prefix}} {{eq .B true}}",
		"{{lt .I 4}} {{le .I 3}} {{gt .I64 .I}} {{ge .U .I}} {{lt .S \"z\"}} {{lt .F 2.5}} {{gt .I64 .U}}",
		"{{len .S}} {{len .Strs}} {{len .M}} {{len .None}} {{index .Strs 1}} {{index .M \"mid\"}} {{index .M \"absent\"}} {{index .MapList \"a\" 1}}",
		"{{print .S .I}} {{println .S}} {{printf \"%s-%d-%v\" .S .I .B}} {{.I | printf \"%03d\"}} {{.S | printf \"%s+%s\" \"x\"}}",
		"{{printf \"%v\" (eq (len .Strs) 3)}} {{(index .Items 2).Name}} {{(index .Items 2).Tags}} {{with index .Items 0}}{{.Name}}{{end}}",
		"{{if and .B (or .Empty .S) (not .None)}}composed{{end}} {{if eq (len .None) 0}}none{{end}}",
		"{{.S}}\n{{- range .Strs}}\n\t{{.}};\n{{- end}}\n",
		"{{nil}}", "{{.Missing}}", "{{.M.absent}}", "{{.NilPtr.Name}}", "{{index .Strs 10}}", "{{len .I}}",
		"{{template \"undefined\"}}", "{{$u}}", "{{eq .S 1}}", "{{lt .B .B}}", "{{not 1 2}}", "{{range .S}}x{{end}}",
		"{{.S.Field}}", "{{.Nested.name}}", "{{if}}{{end}}",
		// Values in empty interfaces are read as the values they hold.
		"{{if .AnyZero}}t{{else}}f{{end}} {{if .AnyFalse}}t{{else}}f{{end}} {{with .AnyEmpty}}t{{else}}f{{end}}",
		"{{not .AnyFalse}} {{and .AnyFalse 1}} {{or .AnyZero .AnyEmpty}} {{$x := .AnyZero}}{{if $x}}t{{else}}f{{end}}",
		"{{.PtrNilAny}} {{print .PtrNilAny}}",
		// eq compares with nil: nil slices, pointers and interfaces equal it.
		"{{eq .None nil}} {{eq .Strs nil}} {{eq .NilPtr nil}} {{eq .Ptr nil}} {{eq .NilPtr .NilAny}} {{eq .None .NilAny}} {{ne .NilPtr nil}} {{eq .S nil}}",
		"{{eq .Nested.Tags nil}} {{eq .M .NilPtr}}",
		// NaN is neither less, equal nor greater, and gt and ge are le's and lt's negation.
		"{{lt .NaN .F}} {{le .NaN .F}} {{gt .NaN .F}} {{ge .NaN .F}} {{eq .NaN .NaN}} {{ne .NaN .NaN}} {{lt .F .NaN}}",
		// Variables declared by range live in its else branch; those of a parenthesized pipeline to the
		// end of the enclosing block.
		"{{range $x := .None}}{{else}}[{{$x}}]{{end}} {{range $i, $e := .M}}{{end}}{{range $k, $v := .None}}{{else}}{{$k}}{{$v}}{{end}}",
		"{{print ($x := 1)}}{{$x}} {{range $i := 2}}{{print ($y := $i)}}{{$y}}{{end}} {{if ($z := .S)}}{{$z}}{{end}}",
		// Ranges over unsigned integers, elements of the integer's type.
		"{{range .U8}}{{.}}{{end}} {{range $i := .U}}{{printf \"%T\" $i}}{{end}} {{range $i := .I64}}{{end}}{{range $i := 2}}{{printf \"%T\" $i}}{{end}}",
		"{{range $k, $v := .Bools}}{{$k}}={{$v}} {{end}}",
		"{{$i := 9}}{{$e := 9}}{{range $i, $e = .Strs}}{{$i}}{{$e}}{{end}}{{$i}}{{$e}} {{range $x := index .MapList ($k := \"a\")}}{{$x}}{{$k}}{{end}}",
		"{{range $i, $x := index .MapList ($k := \"b\")}}{{$i}}{{$x}}{{$k}}{{print ($t := $x)}}{{$t}}{{end}}",
		"{{printf \"%T %T %T %T\" -0x1e 0x1e 1e2 0x1p2}}",
		"{{index .MapInt 2}} {{index .MapInt .U8}} {{index .MapInt 5}} {{index .MapAny \"k\"}} {{.MapAny.k}}", "{{.MapAny.absent}}", "{{.MapInt.k}}",
		// Failures.
		"{{index nil}}", "{{.Deep}}", "{{eq .Pair1 .Pair2}}", "{{index .MapAny .Strs}}", "{{range .U8}}{{break}}{{end}}",
	} {
		want, got, wantErr, gotErr := execBoth(t, text, testExecData())
		if m := execMismatch(text, want, got, wantErr, gotErr); m != "" {
			t.Error(m)
		}
	}
}

// TestTemplateExecRefusesMethods: a template that calls a method fails with an error that says
// templates read fields (text/template would call it; the executor does not, see tmplexec.go).
func TestTemplateExecRefusesMethods(t *testing.T) {
	set, err := parseTmplSet("nginx.conf", "{{.Name}}")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	err = set.execute(&b, ProfileSettings{CustomHTTPErrors: "404"}) // has a Name method, no Name field
	if err == nil || !strings.Contains(err.Error(), "can't evaluate field Name") || !strings.Contains(err.Error(), "not methods") {
		t.Fatalf("error %v, want one that names the field and says methods are not read", err)
	}
	if !strings.Contains(err.Error(), "nginx.conf:1:2") {
		t.Errorf("error %v does not name the position", err)
	}
}

// TestTemplateExecRefusesOtherFunctions: text/template's html, js, urlquery, slice and call are not
// offered (nginx.conf has no use for them); a template that names one is refused when parsed.
func TestTemplateExecRefusesOtherFunctions(t *testing.T) {
	for _, f := range []string{"html", "js", "urlquery", "slice", "call"} {
		if _, err := parseTmplSet("nginx.conf", "{{"+f+" .S}}"); err == nil || !strings.Contains(err.Error(), `function "`+f+`" not defined`) {
			t.Errorf("%s: error %v, want function not defined", f, err)
		}
	}
}

// TestTemplateExecWorkBounded: a template that loops a billion times, a million times
// in nested loops or writes without end fails with an error within its step or output budget.
func TestTemplateExecWorkBounded(t *testing.T) {
	for text, want := range map[string]string{
		"{{range 1000000000}}x{{end}}": "more than 1000000 steps",
		`{{define "a"}}{{range 1000}}{{range 1000}}{{end}}{{end}}{{end}}{{template "a"}}`:                                     "more than 1000000 steps",
		`{{define "w"}}{{.}}{{.}}{{.}}{{.}}{{end}}{{range 200000}}{{template "w" "` + strings.Repeat("x", 100) + `"}}{{end}}`: "more than 32 MB",
	} {
		set, err := parseTmplSet("nginx.conf", text)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := set.execute(&b, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60s: error %v, want %q", text, err, want)
		}
	}
}

// TestTemplateExecNestingBounded: a template that calls itself ends with an error, not a stack overflow.
func TestTemplateExecNestingBounded(t *testing.T) {
	set, err := parseTmplSet("nginx.conf", `{{define "loop"}}x{{template "loop" .}}{{end}}{{template "loop" .}}`)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := set.execute(&b, nil); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("error %v, want the nesting bound", err)
	}
}

// TestDefaultTemplateExecMatchesTextTemplate renders the embedded template for many configurations
// with the executor and with text/template: the bytes are equal.
func TestDefaultTemplateExecMatchesTextTemplate(t *testing.T) {
	probeModel, probe := templateProbe()
	tt := template.Must(template.New("nginx.conf").Option("missingkey=error").Parse(defaultTemplateText))
	settings := func(data map[string]string) Settings {
		t.Helper()
		s, _, problems := ParseSettings(data, nil)
		if len(problems) > 0 {
			t.Fatalf("settings %v: %v", data, problems)
		}
		return s
	}
	many := map[string]string{
		"use-gzip": "true", "gzip-types": "text/css application/json", "gzip-disable": "msie6", "gzip-level": "5",
		"hsts-preload": "true", "use-forwarded-headers": "true", "compute-full-forwarded-for": "true",
		"enable-real-ip": "true", "proxy-real-ip-cidr": "10.0.0.0/8,192.168.0.0/16", "forwarded-for-header": "X-Real-Client",
		"block-user-agents": "~*crawler,badbot", "block-referers": "~*spam", "block-cidrs": "192.0.2.0/24",
		"use-proxy-protocol": "true", "reuse-port": "false", "use-http2": "false", "server-tokens": "true",
		"upstream-keepalive-connections": "32", "proxy-buffering": "on", "proxy-busy-buffers-size": "16k",
		"log-format-upstream": "$remote_addr $status", "access-log-params": "buffer=16k", "disable-access-log": "false",
		"ssl-protocols": "TLSv1.3", "ssl-session-tickets": "true", "ssl-reject-handshake": "true", "http-redirect-code": "301",
		"add-headers": "", "hide-headers": "X-Powered-By", "allow-backend-server-header": "true", "enable-underscores-in-headers": "true",
		"custom-http-errors": "404,503", "proxy-next-upstream": "error timeout http_502", "proxy-next-upstream-tries": "5",
		"client-body-buffer-size": "16k", "large-client-header-buffers": "8 16k", "keep-alive": "0", "relative-redirects": "true",
	}
	manySettings := settings(many)
	cases := map[string]func(*RenderConfig){
		"probe":    func(*RenderConfig) {},
		"no https": func(c *RenderConfig) { c.HTTPSPort = 0 },
		"ipv6 and metrics": func(c *RenderConfig) {
			c.IPv6 = true
			c.RequestMetrics = testRequestMetrics()
		},
		"passthrough listener": func(c *RenderConfig) {
			c.HTTPSListenAddress, c.HTTPSProxyProtocol, c.RedirectHTTPSPort = "127.0.0.1", true, 8443
		},
		"listen address, user, workers": func(c *RenderConfig) {
			c.ListenAddress, c.User, c.WorkerProcesses, c.WorkerConnections = "192.0.2.10", "www-data", "4", 2048
			c.AccessLog, c.ErrorLogLevel = "/var/log/nginx/access.log", "warn"
		},
		"many settings":                 func(c *RenderConfig) { c.Settings = manySettings },
		"many settings, no https, ipv6": func(c *RenderConfig) { c.Settings, c.HTTPSPort, c.IPv6 = manySettings, 0, true },
	}
	for name, mutate := range cases {
		for _, m := range []Model{{}, probeModel} {
			t.Run(fmt.Sprintf("%s/profiles=%d", name, len(m.Profiles)), func(t *testing.T) {
				cfg := probe
				mutate(&cfg)
				data, _, err := renderView(m, cfg)
				if err != nil {
					t.Fatal(err)
				}
				var want, got bytes.Buffer
				if err := tt.Execute(&want, data); err != nil {
					t.Fatal(err)
				}
				if err := defaultTemplate.tmpl.execute(&got, data); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Errorf("the executor's nginx.conf differs from text/template's:\n%s", firstDifference(got.String(), want.String()))
				}
			})
		}
	}
}

// firstDifference shows the first line where a and b differ.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n executor      %q\n text/template %q", i+1, x, y)
		}
	}
	return "(equal)"
}

// FuzzTemplateExec: for any template text/template executes on execData, the executor gives the same
// text or refuses a function it does not offer (html, js, urlquery, slice, call); where text/template
// fails, so does the executor.
func FuzzTemplateExec(f *testing.F) {
	for _, seed := range []string{
		"{{.S}}{{range $i, $e := .Items}}{{$i}}{{$e.Name}}{{end}}",
		"{{if and .B (not .Empty)}}{{printf \"%d\" .I}}{{else}}x{{end}}",
		"{{with .Ptr}}{{.Name}}{{end}}{{index .M \"zeta\"}}{{len .Strs}}",
		"{{define \"a\"}}{{.}}{{end}}{{template \"a\" .U}}{{eq .I .U 3}}",
		"{{$x := .I}}{{range .Ints}}{{if lt . $x}}{{.}}{{end}}{{end}}",
		"{{range .M}}{{.}}{{else}}none{{end}}{{.Nested.Tags}}",
		"{{if .AnyZero}}{{lt .NaN .F}}{{end}}{{range $k, $v := .Bools}}{{$k}}{{end}}{{range $i := .U8}}{{$i}}{{else}}{{$i}}{{end}}",
		"{{eq .Pair1 .Pair2 nil}}{{index .MapAny .Strs}}{{index .MapInt .U8}}{{.Deep}}{{.PtrNilAny}}{{not .AnyFalse}}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 512 {
			return
		}
		want, got, wantErr, gotErr := execBoth(t, text, testExecData())
		if gotErr != nil && strings.Contains(gotErr.Error(), "not defined") && wantErr == nil {
			return // a text/template function the executor does not offer
		}
		if m := execMismatch(text, want, got, wantErr, gotErr); m != "" {
			t.Fatal(m)
		}
	})
}

// TestTemplateRenderConcurrent: templates are shared (the embedded one is a package variable) and
// rendered from more than one goroutine; executing one must not write to it (run with -race).
func TestTemplateRenderConcurrent(t *testing.T) {
	set, err := parseTmplSet("nginx.conf", "{{range $i, $s := .Strs}}{{$i}}{{$s}}{{end}}")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			var b bytes.Buffer
			errs <- set.execute(&b, testExecData())
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
