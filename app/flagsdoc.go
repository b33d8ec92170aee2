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
	var ignored []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(*ignoredValue); ok {
			ignored = append(ignored, f)
			return
		}
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s |\n", f.Name, def, strings.ReplaceAll(f.Usage, "|", `\|`))
	})
	b.WriteString("| `--version` | `false` | Print version and commit, then exit. |\n")
	b.WriteString("\n## ingress-nginx flags without effect\n\n")
	b.WriteString("Every flag of ingress-nginx's command line is accepted, so that a Deployment or Helm chart written for it starts\n")
	b.WriteString("unchanged: the flags above carry its names where the concept is the same, and the flags below (with klog's\n")
	b.WriteString("logging flags) are parsed with ingress-nginx's types and have no effect. The controller logs one Warning at\n")
	b.WriteString("start naming those that were given. Two are refused on purpose: `--annotations-prefix` with another\n")
	b.WriteString("prefix and a non-empty `--watch-namespace-selector` stop the controller, since ignoring them would serve\n")
	b.WriteString("paths without their authentication annotations or Ingresses of namespaces the operator excluded.\n\n")
	b.WriteString("| flag | ingress-nginx default | why it has no effect |\n|---|---|---|\n")
	for _, f := range ignored {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s |\n", f.Name, def, strings.ReplaceAll(f.Value.(*ignoredValue).flag.why, "|", `\|`))
	}
	return b.String()
}
