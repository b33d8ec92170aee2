package nginx

import (
	"errors"
	"slices"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdmissionInput is what ReviewIngress reads: the Ingress of an admission request and the controller's
// cached view of the others. Nothing of it is modified.
type AdmissionInput struct {
	// Ingress is the candidate, the object the request would store.
	Ingress *networkingv1.Ingress
	// Others are the cached Ingresses, of every class; the candidate's own cached version (an update's
	// old object) is among them and skipped. Ignored when Indexed is set.
	Others []*networkingv1.Ingress
	// Indexed, when set, returns the cached Ingresses filed under an AdmissionIndexKeys key (an
	// informer's index): only those that can share a host with the candidate are then looked at, instead
	// of every Ingress in Others.
	Indexed func(key string) []*networkingv1.Ingress
	// Accepts reports whether one of Others is served by this controller (the class filter's rule).
	Accepts func(*networkingv1.Ingress) bool
	// Lookups, Options and Ownership are the renderer's: the same Services, Secrets and ConfigMaps,
	// translation options (the ConfigMap's included) and --host-ownership.
	Lookups   Lookups
	Options   TranslateOptions
	Ownership HostOwnership
	// Cache, when set, translates Others, so that an unchanged Ingress costs a lookup; it must be the
	// caller's own, never the renderer's. The candidate is never cached.
	Cache *TranslationCache
	// Now is the creation time of a candidate that has none yet: a new Ingress is the youngest.
	Now time.Time
}

// AdmissionResult is the answer to an admission request for an Ingress.
type AdmissionResult struct {
	// Err, when set, rejects the Ingress: it is the error the renderer would report in the Ingress's
	// Warning Event.
	Err error
	// Warnings are what the Ingress would be served with but its owner should know: the translation's
	// warnings (ignored annotations, missing Services), then the conflicts it loses (Conflict.Message),
	// the texts of the renderer's Warning Events.
	Warnings []string
	// Merged counts the other Ingresses merged with the candidate: those that share a host with it.
	Merged int
}

// ReviewIngress judges an Ingress as the renderer would if it were stored: it is translated with the
// same registry and options, then merged, by the same Merger, with the served translations of the other
// Ingresses that can change what the candidate's hosts serve (those routing a host it routes or lists in
// spec.tls, and the TLS entries that can cover them), so that host and path conflicts and the TLS rules
// across namespaces are those of the real merge. Nothing is rendered and nothing is written.
//
// An other Ingress whose current version is rejected is left out, where the renderer may still serve
// its last good version: a conflict with such a version is not reported.
func ReviewIngress(in AdmissionInput) AdmissionResult {
	cand := in.Ingress
	if cand.CreationTimestamp.IsZero() {
		c := *cand // shallow: translation reads the object, never writes it
		c.CreationTimestamp = metav1.NewTime(in.Now)
		cand = &c
	}
	t, err := TranslateIngressWith(cand, in.Lookups, in.Options)
	if errors.Is(err, ErrOnlyMissingObjects) {
		// A Secret or ConfigMap created after the Ingress (kubectl apply -f dir/, external-secrets) makes it
		// served; refusing it would force an order on every tool. Without a translation there is nothing to
		// merge: its conflicts are reported by the renderer's Events once it is served.
		return AdmissionResult{Warnings: []string{err.Error() + " (admitted: served once they exist)"}}
	}
	if err != nil {
		return AdmissionResult{Err: err}
	}
	out := AdmissionResult{Warnings: append([]string(nil), t.Warnings...)}

	// near are the hosts whose servers the candidate takes part in, and so where it can lose something:
	// those it routes or lists in spec.tls, and the hosts that its namespace routes under its wildcard TLS
	// entries when it has a rival there (wildcardsOf).
	// A host's server depends on the Ingresses that route it or list it in spec.tls, and on the TLS
	// entries of the wildcard one label above it (above).
	// Wildcards are kept by the domain under their "*.", so that a host is looked up without building
	// strings: this runs for every host of every cached Ingress.
	near := map[Hostname]struct{}{}
	aboveOf := map[string]struct{}{} // domains d of the wildcards "*.d" one label above a near host
	// wildcardsOf are the domains d of the candidate's TLS wildcards "*.d" whose covered hosts are merged;
	// wild are all of them. On a host it neither routes nor lists exactly, a wildcard entry of the
	// candidate can lose only one thing: the host's certificate, to an entry for the same wildcard of
	// another Ingress of its own namespace with another Secret (ConflictTLS; hostTLS reports the other
	// TLS conflicts only for exact entries). Without such a rival the hosts it covers cannot give the
	// candidate a warning, and are not merged: a "*.example.com" entry does not cost the merge of every
	// host under example.com.
	wildcardsOf := map[string]struct{}{}
	wild := map[string]struct{}{}
	addNear := func(h Hostname) {
		near[h] = struct{}{}
		if _, d, ok := strings.Cut(string(h), "."); ok && !h.IsWildcard() {
			aboveOf[d] = struct{}{}
		}
	}
	for _, h := range routedHostsOf(t) {
		addNear(h)
	}
	for _, h := range tlsHostsOf(t) {
		addNear(h)
		if h.IsWildcard() {
			wild[string(h[2:])] = struct{}{}
		}
	}
	// touchesNear holds for the hosts whose Ingresses take part in a near host's server; touches also for
	// the hosts under the candidate's wildcards, to find the Ingresses that route them.
	touchesNear := func(h Hostname) bool {
		if _, ok := near[h]; ok {
			return true
		}
		if h.IsWildcard() {
			_, ok := aboveOf[string(h[2:])]
			return ok
		}
		return false
	}
	touches := func(h Hostname) bool {
		if touchesNear(h) {
			return true
		}
		if h.IsWildcard() {
			return false
		}
		_, d, ok := strings.Cut(string(h), ".")
		if !ok {
			return false
		}
		_, ok = wildcardsOf[d]
		return ok
	}
	for {
		others := in.Others
		if in.Indexed != nil {
			others = in.indexedOthers(near, aboveOf, wildcardsOf)
		}
		relevant := in.relevantOthers(others, touches)
		grew := false
		// The candidate's wildcards are near hosts, so relevant has every served Ingress that lists them.
		for d := range wild {
			if !hasKey(wildcardsOf, d) && hasTLSRival(relevant, t, Hostname("*."+d)) {
				wildcardsOf[d] = struct{}{}
				grew = true
			}
		}
		for _, o := range relevant {
			if o.Ingress.Namespace != t.Ingress.Namespace {
				// The certificate of a host goes to entries of the namespace of its oldest rule: a host
				// only other namespaces route cannot take it from the candidate's wildcard entry.
				continue
			}
			for _, h := range routedHostsOf(o) {
				if _, ok := near[h]; ok || h.IsWildcard() {
					continue
				}
				if _, d, ok := strings.Cut(string(h), "."); ok && hasKey(wildcardsOf, d) {
					addNear(h) // under the candidate's wildcard: its TLS entry takes part there
					grew = true
				}
			}
		}
		if grew {
			continue // the hosts added may have other Ingresses' routes and TLS entries: look again
		}
		// Those found only under a wildcard of the candidate route no near host: hosts only other
		// namespaces route, where the candidate cannot lose (above).
		relevant = slices.DeleteFunc(relevant, func(o *IngressTranslation) bool {
			return !slices.ContainsFunc(routedHostsOf(o), touchesNear) && !slices.ContainsFunc(tlsHostsOf(o), touchesNear)
		})
		out.Merged = len(relevant)
		merged := MergeAll(append(relevant, t), MergeOptions{Ownership: in.Ownership})
		for _, c := range merged.Conflicts {
			if c.Loser == t.Ingress {
				out.Warnings = append(out.Warnings, c.Message())
			}
		}
		return out
	}
}

// relevantOthers returns the served translations of the other Ingresses that have a host for which
// touches holds. An Ingress is translated only when its spec names such a host or it has alias
// annotations (whose hosts only translation knows).
func (in *AdmissionInput) relevantOthers(others []*networkingv1.Ingress, touches func(Hostname) bool) []*IngressTranslation {
	var out []*IngressTranslation
	for _, ing := range others {
		if ing.Namespace == in.Ingress.Namespace && ing.Name == in.Ingress.Name {
			continue
		}
		if !mayTouch(ing, touches) || (in.Accepts != nil && !in.Accepts(ing)) {
			continue
		}
		var t *IngressTranslation
		var err error
		if in.Cache != nil {
			t, err = in.Cache.TranslateWith(ing, in.Lookups, in.Options)
		} else {
			t, err = TranslateIngressWith(ing, in.Lookups, in.Options)
		}
		if err != nil {
			continue
		}
		for _, h := range append(routedHostsOf(t), tlsHostsOf(t)...) {
			if touches(h) {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// Keys of AdmissionIndexKeys.
const (
	admissionKeyHost  = "host:"  // a host of the rules, spec.tls or the aliases ("" for rules without one and spec.defaultBackend)
	admissionKeyUnder = "under:" // namespace "/" the domain one label above such a host (not a wildcard)
)

// AdmissionIndexKeys returns the keys under which AdmissionInput.Indexed must find an Ingress: an
// informer indexer over it gives ReviewIngress the Ingresses near a candidate without a look at the rest.
// An Ingress is filed under host:h for every host h its translation can route or list in spec.tls (its
// aliases included), and under:namespace/d when h is one label under d; an Ingress with aliases is so
// found by its alias hosts, not looked at for every candidate.
func AdmissionIndexKeys(ing *networkingv1.Ingress) []string {
	var keys []string
	add := func(k string) {
		for _, x := range keys {
			if x == k {
				return
			}
		}
		keys = append(keys, k)
	}
	host := func(h string) {
		add(admissionKeyHost + h)
		if _, d, ok := strings.Cut(h, "."); ok && !strings.HasPrefix(h, "*.") {
			add(admissionKeyUnder + ing.Namespace + "/" + d)
		}
	}
	// The alias hosts, as applyHostAliases and hostAliases find them (a superset: every entry of
	// server-alias, valid or not, and the www twin of every rule host): an Ingress with aliases is filed
	// under them rather than looked at for every candidate. Beyond maxAliases distinct entries
	// translation rejects the Ingress, which so routes nothing.
	if raw, ok := ing.Annotations[AnnotationServerAlias]; ok {
		var seen []string
		for entry := range strings.SplitSeq(raw, ",") {
			entry = strings.ToLower(strings.TrimSpace(entry))
			if entry == "" || slices.Contains(seen, entry) {
				continue
			}
			if seen = append(seen, entry); len(seen) > maxAliases {
				break
			}
			host(entry)
		}
	}
	if _, ok := ing.Annotations[AnnotationFromToWWWRedirect]; ok {
		for i := range ing.Spec.Rules {
			h := ing.Spec.Rules[i].Host
			if h == "" || strings.HasPrefix(h, "*.") {
				continue
			}
			if rest, ok := strings.CutPrefix(h, "www."); ok {
				host(rest)
			} else {
				host("www." + h)
			}
		}
	}
	if ing.Spec.DefaultBackend != nil {
		add(admissionKeyHost)
	}
	for i := range ing.Spec.Rules {
		host(ing.Spec.Rules[i].Host)
	}
	for i := range ing.Spec.TLS {
		for _, h := range ing.Spec.TLS[i].Hosts {
			host(h)
		}
	}
	return keys
}

// indexedOthers returns, once each, the Ingresses filed under a key that touches looks for: the near
// hosts, the wildcards one label above them and the hosts of the candidate's namespace under its
// wildcards, alias hosts included.
func (in *AdmissionInput) indexedOthers(near map[Hostname]struct{}, aboveOf, wildcardsOf map[string]struct{}) []*networkingv1.Ingress {
	var out []*networkingv1.Ingress
	seen := map[*networkingv1.Ingress]struct{}{}
	take := func(key string) {
		for _, ing := range in.Indexed(key) {
			if _, ok := seen[ing]; !ok {
				seen[ing] = struct{}{}
				out = append(out, ing)
			}
		}
	}
	for h := range near {
		take(admissionKeyHost + string(h))
	}
	for d := range aboveOf {
		take(admissionKeyHost + "*." + d)
	}
	for d := range wildcardsOf {
		take(admissionKeyUnder + in.Ingress.Namespace + "/" + d) // only its namespace's hosts can matter
	}
	return out
}

// mayTouch reports whether an Ingress's translation can have a host for which touches holds, from its
// spec alone: translation takes hosts from the rules and spec.tls as written (or rejects them), routes a
// spec.defaultBackend without rules on the catch-all host, and adds hosts only for the alias annotations.
func mayTouch(ing *networkingv1.Ingress, touches func(Hostname) bool) bool {
	if _, ok := ing.Annotations[IngressNginxPrefix+"server-alias"]; ok {
		return true
	}
	if _, ok := ing.Annotations[IngressNginxPrefix+"from-to-www-redirect"]; ok {
		return true
	}
	if ing.Spec.DefaultBackend != nil && touches("") {
		return true
	}
	for i := range ing.Spec.Rules {
		if touches(Hostname(ing.Spec.Rules[i].Host)) {
			return true
		}
	}
	for i := range ing.Spec.TLS {
		for _, h := range ing.Spec.TLS[i].Hosts {
			if touches(Hostname(h)) {
				return true
			}
		}
	}
	return false
}

// hasTLSRival reports whether one of others, of the candidate's namespace, lists the TLS host w with
// another Secret than one of the candidate's entries for it: only such an entry can take a host's
// certificate from the candidate's entry for w.
func hasTLSRival(others []*IngressTranslation, cand *IngressTranslation, w Hostname) bool {
	for _, o := range others {
		if o.Ingress.Namespace != cand.Ingress.Namespace {
			continue
		}
		for _, e := range o.TLS {
			if e.Host != w {
				continue
			}
			for _, c := range cand.TLS {
				if c.Host == w && c.Secret != e.Secret {
					return true
				}
			}
		}
	}
	return false
}

func hasKey(m map[string]struct{}, k string) bool {
	_, ok := m[k]
	return ok
}
