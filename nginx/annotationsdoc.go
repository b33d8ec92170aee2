package nginx

import (
	"fmt"
	"strings"
)

// AnnotationsMarkdown renders the annotation registry as docs/annotations.md, so the document is generated
// from the same specs the translation applies and a test keeps the two equal.
func AnnotationsMarkdown() string {
	specs := AnnotationRegistry()
	count := map[any]int{}
	for _, s := range specs {
		count[s.Origin]++
		count[s.Status]++
	}
	var b strings.Builder
	b.WriteString("# Annotations\n\n")
	b.WriteString("Generated from the annotation registry in `nginx/` (`go run ./hack/annotationsdoc > docs/annotations.md`);\n")
	b.WriteString("`nginx/annotationsdoc_test.go` fails when this file differs from it.\n\n")
	fmt.Fprintf(&b, "Every ingress-nginx annotation, by its exact name: the %d in ingress-nginx's annotations documentation, the %d its\n",
		count[OriginDocumented], count[OriginUndocumented])
	fmt.Fprintf(&b, "annotation parsers read without documenting them, and %d retired ones (documented once, read no more) that older\n", count[OriginRetired])
	fmt.Fprintf(&b, "Ingresses still carry. Here %d are supported, %d refused and %d ignored.\n\n",
		count[AnnotationSupported], count[AnnotationRefused], count[AnnotationIgnored])
	b.WriteString(`## What happens to an annotation

- **supported**: the value is parsed into a typed value and validated. Its kind says where it takes effect:
  *route data* travels in the Lua router's route table, so a change never reloads NGINX; a *profile setting*
  is rendered into nginx.conf once per distinct combination of values, shared by every route that uses it
  (a new combination reloads NGINX, a known one does not); *another module* means a module other than the
  translation reads it.
- An **invalid value** of an annotation whose loss would change who gets what (access, redirects, routing,
  TLS) **rejects the Ingress** alone: a Warning Event ` + "`Rejected`" + ` names the annotation, the value and what is
  accepted, and the Ingress's last good version keeps being served. An invalid value of a cosmetic annotation
  is ignored with a Warning Event.
- **refused**: the Ingress is rejected (Warning Event ` + "`Rejected`" + `, counted in ` + "`ingress_reactor_ingresses_rejected`" + `) until
  the annotation is supported or removed.
- **ignored**: the Ingress is served with the defaults; one Warning Event lists every ignored annotation of the
  Ingress.
- **Unknown names** with the ` + "`nginx.ingress.kubernetes.io/`" + ` prefix (not in the table below) get a Warning Event each,
  naming the nearest known annotation when the name looks like a typo. A name shaped like an access
  restriction (` + "`auth-*`, `modsecurity-*`, `*-source-range`" + `) or a snippet (` + "`*-snippet`" + `), or close to the name of an
  annotation that restricts access, is refused instead: a misspelt restriction must not open the Ingress.
- Values reach NGINX only as typed, validated values, through one escaping function; messages quote values
  and cut them after 64 bytes.

## Differences on purpose

- **Snippets are never applied.** Raw NGINX configuration from Ingress owners is the injection path this
  project removes; an Ingress with a snippet is refused rather than served without what the snippet did.
- **Access restrictions refuse rather than silently open.** An Ingress with an access restriction that is not
  supported yet (some authentication settings, ModSecurity) is not served; an invalid source
  range rejects the Ingress instead of being dropped.
- **Tenancy.** A namespace's TLS entry and its HTTPS redirect never apply to another namespace's paths on a
  shared host (see [migration.md](migration.md)); annotations act on the Ingress's own paths.

## Annotations

All names start with ` + "`nginx.ingress.kubernetes.io/`" + `.

| annotation | status | accepted values | default | difference from ingress-nginx |
|---|---|---|---|---|
`)
	for _, s := range specs {
		name := "`" + s.Name + "`"
		switch s.Origin {
		case OriginUndocumented:
			name += " (undocumented)"
		case OriginRetired:
			name += " (retired)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, cell(statusCell(&s)), cell(orDash(s.Values)), cell(orDash(s.Default)), cell(s.Difference))
	}
	return b.String()
}

// statusCell is the status column: the status, the kind or the reason, and the issue that plans support.
func statusCell(s *AnnotationSpec) string {
	var out string
	switch s.Status {
	case AnnotationSupported:
		out = "supported (" + string(s.Kind) + ")"
	case AnnotationRefused:
		// The rejection message's first clause; the rest of it says what the difference column says.
		reason, _, _ := strings.Cut(s.Reason, ";")
		reason, _, _ = strings.Cut(reason, ", which")
		out = "**refused**: " + reason
	default:
		out = "ignored: " + s.Reason
	}
	if s.Planned != "" {
		out += "; planned in issue " + s.Planned
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// cell keeps a value inside its Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
