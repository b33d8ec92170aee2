package nginx

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// IngressNginxPrefix is the prefix of ingress-nginx's annotations, which migrating users carry over.
const IngressNginxPrefix = "nginx.ingress.kubernetes.io/"

// AnnotationStatus says what the controller does with an ingress-nginx annotation.
type AnnotationStatus string

const (
	// AnnotationSupported annotations are read and applied.
	AnnotationSupported AnnotationStatus = "supported"
	// AnnotationRefused annotations reject the Ingress: serving it without them would open what its owner
	// closed or take traffic that is not its own.
	AnnotationRefused AnnotationStatus = "refused"
	// AnnotationIgnored annotations are reported in one Warning and have no effect.
	AnnotationIgnored AnnotationStatus = "ignored"
)

// AnnotationKind says where a supported annotation takes effect, which decides whether changing it can
// reload NGINX.
type AnnotationKind string

const (
	// KindRouteData values travel in the Lua router's route table: a change never reloads NGINX.
	KindRouteData AnnotationKind = "route data"
	// KindProfile values are rendered into nginx.conf once per distinct combination, shared by every route
	// that uses it: a new combination reloads NGINX, a known one does not.
	KindProfile AnnotationKind = "profile setting"
	// KindModule annotations are read by another module than the translation (named in the spec).
	KindModule AnnotationKind = "another module"
)

// AnnotationOrigin says where ingress-nginx defines an annotation name.
type AnnotationOrigin string

const (
	// OriginDocumented names are in ingress-nginx's annotations documentation.
	OriginDocumented AnnotationOrigin = "documented"
	// OriginUndocumented names are read by ingress-nginx's annotation parsers without being documented.
	OriginUndocumented AnnotationOrigin = "undocumented"
	// OriginRetired names were documented once and are no longer read by ingress-nginx.
	OriginRetired AnnotationOrigin = "retired"
)

// AnnotationSpec is one annotation of the registry: its status here and what a user migrating from
// ingress-nginx needs to know about it. docs/annotations.md is generated from the specs.
type AnnotationSpec struct {
	// Name is the annotation without IngressNginxPrefix, as ingress-nginx spells it.
	Name   string
	Origin AnnotationOrigin
	Status AnnotationStatus
	// Kind is set for supported annotations.
	Kind AnnotationKind
	// Values describes the accepted values (Markdown); Default the value that applies without the
	// annotation.
	Values, Default string
	// Reason says why a refused or ignored annotation is not applied. For a refused one it is also the
	// rejection message, after the annotation's name.
	Reason string
	// Planned names the issue that plans support, for ignored and refused annotations.
	Planned string
	// Difference states what differs from ingress-nginx on purpose (Markdown; empty when nothing does).
	Difference string
	// RestrictsAccess marks annotations that narrow who reaches the backends. An unknown name close to one
	// of them rejects the Ingress (a misspelt allowlist must not open it), and so does a refused one.
	RestrictsAccess bool
	// inert reports values that ask for nothing, so that a refused annotation set to them (enable-modsecurity
	// "false") is not a reason to reject the Ingress.
	inert func(value string) bool
	// group is the index of the supported group that reads the annotation in the registry, or -1.
	group int
}

// Key returns the full annotation key.
func (s *AnnotationSpec) Key() string { return IngressNginxPrefix + s.Name }

// annotationGroup is one supported group of annotations: one small file (ann_*.go) declares its specs and
// the function that parses, validates and applies them.
type annotationGroup struct {
	specs []AnnotationSpec
	// apply reads the group's annotations (at least one is present on the Ingress) into t.out. A group
	// read by another module (KindModule) has no apply.
	apply func(t *translator)
}

// annotationGroups are the supported groups, registered by their files' init functions.
var annotationGroups []annotationGroup

// registerAnnotationGroup adds a supported group to the registry. Its specs must be supported and must
// not be listed in unsupportedAnnotations (TestAnnotationRegistry checks both).
func registerAnnotationGroup(g annotationGroup) { annotationGroups = append(annotationGroups, g) }

// annotationIndex is the registry built once from the groups and the table of unsupported annotations.
type annotationIndex struct {
	specs  []AnnotationSpec // sorted by name
	byName map[string]*AnnotationSpec
	groups []annotationGroup // sorted by their first spec's name, so groups apply in a stable order
}

var annotationRegistry = sync.OnceValue(func() *annotationIndex {
	idx := &annotationIndex{byName: map[string]*AnnotationSpec{}}
	idx.groups = slices.Clone(annotationGroups)
	slices.SortFunc(idx.groups, func(a, b annotationGroup) int { return strings.Compare(a.specs[0].Name, b.specs[0].Name) })
	for i, g := range idx.groups {
		for _, s := range g.specs {
			s.group = i
			idx.specs = append(idx.specs, s)
		}
	}
	for _, s := range unsupportedAnnotations() {
		s.group = -1
		idx.specs = append(idx.specs, s)
	}
	slices.SortStableFunc(idx.specs, func(a, b AnnotationSpec) int { return strings.Compare(a.Name, b.Name) })
	for i := range idx.specs {
		if _, dup := idx.byName[idx.specs[i].Name]; !dup {
			idx.byName[idx.specs[i].Name] = &idx.specs[i]
		}
	}
	return idx
})

// AnnotationRegistry returns every ingress-nginx annotation the controller knows, sorted by name: the
// documented ones, the ones its parsers read without documenting them, and retired ones that migrating
// Ingresses still carry.
func AnnotationRegistry() []AnnotationSpec { return slices.Clone(annotationRegistry().specs) }

// LookupAnnotation returns the spec of an annotation, by its name without IngressNginxPrefix.
func LookupAnnotation(name string) (AnnotationSpec, bool) {
	s, ok := annotationRegistry().byName[name]
	if !ok {
		return AnnotationSpec{}, false
	}
	return *s, true
}

// annotations applies the Ingress's ingress-nginx annotations through the registry. Supported groups
// present on the Ingress parse and apply their values; refused annotations reject the Ingress; ignored
// ones are reported in one Warning, so a migrating owner learns what does not carry over; unknown names
// get a Warning each, with the nearest known name when it looks like a typo (or are refused when that
// name restricts access).
func (t *translator) annotations() {
	if len(t.ing.Annotations) == 0 {
		return
	}
	reg := annotationRegistry()
	var present []bool
	var ignored, canaryIgnored []string
	canary := canaryEnabled(t.ing.Annotations)
	for _, key := range slices.Sorted(maps.Keys(t.ing.Annotations)) {
		name, ok := strings.CutPrefix(key, IngressNginxPrefix)
		if !ok {
			continue
		}
		spec, known := reg.byName[name]
		if !known {
			t.unknownAnnotation(key, name)
			continue
		}
		switch spec.Status {
		case AnnotationSupported:
			if canary && !appliesToCanary(name) {
				if spec.Kind != KindModule {
					canaryIgnored = append(canaryIgnored, key)
				}
				continue
			}
			if spec.group >= 0 && reg.groups[spec.group].apply != nil {
				if present == nil {
					present = make([]bool, len(reg.groups))
				}
				present[spec.group] = true
			}
		case AnnotationRefused:
			if spec.inert != nil && spec.inert(t.ing.Annotations[key]) {
				continue
			}
			t.fail("metadata.annotations[%s]: %s", key, spec.Reason)
		case AnnotationIgnored:
			ignored = append(ignored, key)
		}
	}
	for i, on := range present {
		if on {
			reg.groups[i].apply(t)
		}
	}
	t.canaryIgnoredWarning(canaryIgnored)
	if len(ignored) > 0 {
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf(
			"metadata.annotations: %s: not supported yet and ignored; the Ingress is served with the defaults (docs/annotations.md says why for each)",
			strings.Join(ignored, ", ")))
	}
}

// Refusal messages shared by the registry's refused annotations (and by unknown names that look like
// them, which are refused the same way).
const (
	refusedAccess = "restricts access, which ingress-reactor does not support yet; the Ingress is not served " +
		"rather than served without the restriction (see docs/annotations.md)"
	refusedSnippet = "snippets (raw NGINX configuration) are never applied; the Ingress is not served " +
		"rather than served without what the snippet did (see docs/annotations.md)"
)

// looksLikeAccessRestriction reports names that ingress-nginx uses for access restrictions, including
// ones it does not define (blacklist-source-range): refused rather than ignored.
func looksLikeAccessRestriction(name string) bool {
	return strings.HasPrefix(name, "auth-") || strings.HasPrefix(name, "modsecurity-") || strings.HasSuffix(name, "-source-range")
}

// unknownAnnotation handles an annotation with ingress-nginx's prefix that the registry does not know.
// Names shaped like an access restriction or a snippet, or close to the name of an access restriction,
// reject the Ingress: ignoring a misspelt restriction would open what its owner meant to close. Other
// names get a Warning, with the nearest known name when it is close.
func (t *translator) unknownAnnotation(key, name string) {
	near, ok := nearestAnnotation(name)
	hint := ""
	if ok {
		hint = fmt.Sprintf(" (did you mean %s?)", near.Key())
	}
	shown := annotationKeyForMessage(key)
	switch {
	case looksLikeAccessRestriction(name):
		t.fail("metadata.annotations[%s]: %s%s", shown, refusedAccess, hint)
	case strings.HasSuffix(name, "-snippet"):
		t.fail("metadata.annotations[%s]: %s%s", shown, refusedSnippet, hint)
	case ok && near.RestrictsAccess:
		t.fail("metadata.annotations[%s]: not an ingress-nginx annotation, but close to %s, which restricts access; "+
			"the Ingress is not served rather than served without a restriction its owner may have meant", shown, near.Key())
	default:
		t.out.Warnings = append(t.out.Warnings, fmt.Sprintf("metadata.annotations[%s]: not an ingress-nginx annotation; ignored%s", shown, hint))
	}
}

// nearestAnnotation returns the known annotation whose name is closest to name, when it is close enough
// to be a typo: at most 2 edits (3 for names longer than 15 bytes), counting a swap of neighbours, a
// case change or '_' for '-' as one.
func nearestAnnotation(name string) (*AnnotationSpec, bool) {
	if len(name) > maxTypoName {
		return nil, false
	}
	// Registry names are lower case with '-': fold the candidate once instead of at every comparison.
	folded := []byte(name)
	for i, c := range folded {
		switch {
		case 'A' <= c && c <= 'Z':
			folded[i] = c + 'a' - 'A'
		case c == '_':
			folded[i] = '-'
		}
	}
	limit := 2
	if len(name) > 15 {
		limit = 3
	}
	var best *AnnotationSpec
	bestDist := limit + 1
	var rows editRows
	reg := annotationRegistry()
	for i := range reg.specs {
		s := &reg.specs[i]
		if d := absInt(len(s.Name) - len(folded)); d >= bestDist || len(s.Name) > maxTypoName {
			continue
		}
		if d := editDistance(folded, s.Name, bestDist, &rows); d < bestDist {
			best, bestDist = s, d
		}
	}
	return best, best != nil
}

// maxTypoName bounds the names nearestAnnotation compares; longer ones are no typo of a known name.
const maxTypoName = 100

// editRows are editDistance's three rows, kept by the caller across comparisons.
type editRows [3][maxTypoName + 1]int

// editDistance is the optimal string alignment distance between a and b (insertions, deletions,
// substitutions and swaps of neighbours), both at most maxTypoName bytes. It returns limit or more when
// the distance is at least limit.
func editDistance(a []byte, b string, limit int, rows *editRows) int {
	prev2, prev, cur := rows[0][:len(b)+1], rows[1][:len(b)+1], rows[2][:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// maxShownValue bounds how much of an annotation value a message repeats, so a hostile or mistaken
// megabyte value cannot flood Events and logs.
const maxShownValue = 64

// quoteValue quotes an annotation value (or an entry of it) for a message: Go-quoted, so control bytes,
// NUL and newlines show as escapes, and cut after maxShownValue bytes.
func quoteValue(v string) string {
	// The quoted form, not the value, is what is bounded: escapes make a byte up to four characters.
	q := strconv.Quote(v)
	if len(v) <= maxShownValue && len(q) <= 2*maxShownValue {
		return q
	}
	for n := min(len(v), maxShownValue); n > 0; n-- {
		if q = strconv.Quote(v[:n]); len(q) <= 2*maxShownValue {
			break
		}
	}
	return fmt.Sprintf("%s... (%d bytes)", q, len(v))
}

// annotationKeyForMessage returns key as it is when it is a well-formed annotation key, and quoted and
// cut otherwise (objects that did not pass the API server's validation, as in local mode).
func annotationKeyForMessage(key string) string {
	if len(key) > 253+1+63 {
		return quoteValue(key)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/') {
			return quoteValue(key)
		}
	}
	return key
}

// parseBoolAnnotation parses a boolean annotation as ingress-nginx does (Go's strconv.ParseBool, after
// trimming spaces). An invalid value rejects the Ingress.
func (t *translator) parseBoolAnnotation(key string) (value, ok bool) {
	raw := t.ing.Annotations[key]
	b, err := strconv.ParseBool(strings.TrimSpace(raw))
	if err != nil {
		t.fail("metadata.annotations[%s]: %s is not a boolean (want \"true\" or \"false\")", key, quoteValue(raw))
		return false, false
	}
	return b, true
}
