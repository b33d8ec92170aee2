// Command ingress-reactor is a Kubernetes ingress controller that drives NGINX.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ingress-reactor/ingress-reactor/app"
)

// Set by the linker: -X main.version=... -X main.commit=...
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	cfg := app.DefaultConfig()
	fs := flag.NewFlagSet("ingress-reactor", flag.ContinueOnError)
	app.BindFlags(fs, &cfg)
	showVersion := fs.Bool("version", false, "Print version and commit, then exit.")
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprintf(w, "Usage: ingress-reactor [flags]\n\nA Kubernetes ingress controller that drives NGINX.\n\nFlags:\n")
		printFlags(fs)
	}
	// The flag package prints its error to stderr; the usage follows it there, except for --help, whose
	// answer goes to stdout (so `ingress-reactor --help | less` works) with exit code 0.
	fs.Usage = func() {}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(os.Stdout)
			os.Exit(0)
		}
		usage(os.Stderr)
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", fs.Args())
		os.Exit(2)
	}
	if *showVersion {
		fmt.Printf("ingress-reactor %s (commit %s)\n", version, commit)
		return
	}
	cfg.Version, cfg.Commit = version, commit
	if err := app.Run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "ingress-reactor: %v\n", err)
		os.Exit(1)
	}
}

// printFlags lists every flag with its type and default, the empty ones included, so --help is a full reference.
func printFlags(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		if typ == "" {
			typ = "bool"
		}
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(fs.Output(), "  --%s %s\n    \t%s (default %s)\n", f.Name, typ, strings.ReplaceAll(usage, "\n", "\n    \t"), def)
	})
}
