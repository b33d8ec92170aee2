package app

import (
	"flag"
	"fmt"
	"strings"
)

// FlagsMarkdown renders every flag of the controller as the Markdown table in docs/flags.md, so the document
// is generated from the same definitions as --help and a test keeps the two equal.
func FlagsMarkdown() string {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("ingress-reactor", flag.ContinueOnError)
	BindFlags(fs, &cfg)
	var b strings.Builder
	b.WriteString("# Flags\n\n")
	b.WriteString("Generated from the flag definitions (`go run ./hack/flagsdoc > docs/flags.md`); `ingress-reactor --help`\n")
	b.WriteString("prints the same list. Names follow ingress-nginx wherever the concept is the same.\n\n")
	b.WriteString("| flag | default | description |\n|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s |\n", f.Name, def, strings.ReplaceAll(f.Usage, "|", `\|`))
	})
	b.WriteString("| `--version` | `false` | Print version and commit, then exit. |\n")
	return b.String()
}
