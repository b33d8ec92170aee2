package nginx

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReviewIngress(t *testing.T) {
	svcs := Lookups{Services: servicesOf(service("a", "web", port(80, "")), service("b", "web", port(80, "")))}
	older := ingress("a", "old", rule("shop.example.com", prefix("/", "web", 80)))
	cases := map[string]struct {
		others    []*networkingv1.Ingress
		cand      *networkingv1.Ingress
		ownership HostOwnership
		wantErr   string
		// wantWarnings are substrings, one per warning, in order.
		wantWarnings []string
		wantMerged   int
	}{
		"valid and alone": {
			cand: ingress("a", "new", rule("new.example.com", prefix("/", "web", 80))),
		},
		"bad annotation value is the renderer's rejection": {
			cand:    ingress("a", "new", rule("new.example.com", prefix("/", "web", 80)), annotate(AnnotationSSLRedirect, "maybe")),
			wantErr: "ingress a/new rejected: metadata.annotations[" + AnnotationSSLRedirect + "]",
		},
		"bad path": {
			cand:    ingress("a", "new", rule("new.example.com", prefix("/a;b", "web", 80))),
			wantErr: `spec.rules[0].http.paths[0].path: path "/a;b"`,
		},
		"a Secret that does not exist yet is a warning": {
			cand: ingress("a", "new", rule("new.example.com", prefix("/", "web", 80)),
				annotate(AnnotationAuthType, "basic"), annotate(AnnotationAuthSecret, "users")),
			wantWarnings: []string{"secret a/users does not exist"},
		},
		"a ConfigMap that does not exist yet with another fault is the rejection": {
			cand: ingress("a", "new", rule("new.example.com", prefix("/", "web", 80)),
				annotate(AnnotationCustomHeaders, "headers"), annotate(AnnotationSSLRedirect, "maybe")),
			wantErr: "configmap a/headers does not exist",
		},
		"missing Service is a warning": {
			cand:         ingress("a", "new", rule("new.example.com", prefix("/", "nope", 80))),
			wantWarnings: []string{"a/nope"},
		},
		"same path as an older Ingress: served without it": {
			others:       []*networkingv1.Ingress{older},
			cand:         ingress("b", "new", rule("shop.example.com", prefix("/", "web", 80))),
			wantWarnings: []string{`path "/" (Prefix) on host shop.example.com is already served by Ingress a/old`},
			wantMerged:   1,
		},
		"a new Ingress without creation time is the youngest": {
			others: []*networkingv1.Ingress{older},
			cand: func() *networkingv1.Ingress {
				c := ingress("b", "new", rule("shop.example.com", prefix("/", "web", 80)))
				c.CreationTimestamp = metav1.Time{}
				return c
			}(),
			wantWarnings: []string{"already served by Ingress a/old"},
			wantMerged:   1,
		},
		"an update of the older Ingress replaces its cached version": {
			others:     []*networkingv1.Ingress{older},
			cand:       ingress("a", "old", rule("shop.example.com", prefix("/", "web", 80), prefix("/x", "web", 80))),
			wantMerged: 0,
		},
		"other paths of the host: merged, no conflict": {
			others:     []*networkingv1.Ingress{older, ingress("a", "far", rule("far.example.com", prefix("/", "web", 80)))},
			cand:       ingress("b", "new", rule("shop.example.com", prefix("/api", "web", 80))),
			wantMerged: 1,
		},
		"host owned by another namespace": {
			others:       []*networkingv1.Ingress{older},
			cand:         ingress("b", "new", rule("shop.example.com", prefix("/api", "web", 80))),
			ownership:    HostsByNamespace,
			wantWarnings: []string{"namespace a owns the host"},
			wantMerged:   1,
		},
		"TLS for a host only another namespace routes": {
			others:       []*networkingv1.Ingress{older},
			cand:         ingress("b", "new", rule("other.example.com", prefix("/", "web", 80)), withTLS("cert", "shop.example.com")),
			wantWarnings: []string{"TLS for host shop.example.com is ignored"},
			wantMerged:   1,
		},
		"wildcard TLS of another namespace over the host": {
			others:     []*networkingv1.Ingress{ingress("a", "wild", rule("*.example.com", prefix("/", "web", 80)), withTLS("cert", "*.example.com"))},
			cand:       ingress("b", "new", rule("shop.example.com", prefix("/", "web", 80))),
			wantMerged: 1,
		},
		"wildcard TLS over others' hosts without a rival: they are not merged": {
			others: []*networkingv1.Ingress{older, ingress("b", "wild", rule("y.example.com", prefix("/", "web", 80)), withTLS("cert", "*.example.com"))},
			cand:   ingress("a", "new", rule("x.test", prefix("/", "web", 80)), withTLS("wild", "*.example.com"), age(time.Minute)),
			// b/wild lists the wildcard, of another namespace: it is merged, but it cannot take the
			// certificate of a/old's host from the candidate, so that host is not.
			wantMerged: 1,
		},
		"wildcard TLS over a host whose namespace lists the wildcard with another Secret": {
			others:       []*networkingv1.Ingress{ingress("a", "old", rule("shop.example.com", prefix("/", "web", 80)), withTLS("cert", "*.example.com"))},
			cand:         ingress("a", "new", rule("x.test", prefix("/", "web", 80)), withTLS("wild", "*.example.com"), age(time.Minute)),
			wantWarnings: []string{"TLS for host shop.example.com is served with the secret of Ingress a/old"},
			wantMerged:   1,
		},
		"wildcard TLS with a rival: hosts only other namespaces route are not merged": {
			others: []*networkingv1.Ingress{ingress("a", "old", rule("shop.example.com", prefix("/", "web", 80)), withTLS("cert", "*.example.com")),
				ingress("b", "far", rule("y.example.com", prefix("/", "web", 80)))},
			cand:         ingress("a", "new", rule("x.test", prefix("/", "web", 80)), withTLS("wild", "*.example.com"), age(time.Minute)),
			wantWarnings: []string{"TLS for host shop.example.com is served with the secret of Ingress a/old"},
			wantMerged:   1,
		},
		"an Ingress of another class is not merged": {
			others: []*networkingv1.Ingress{ingress("a", "old", rule("shop.example.com", prefix("/", "web", 80)),
				annotate("kubernetes.io/ingress.class", "other"))},
			cand: ingress("b", "new", rule("shop.example.com", prefix("/", "web", 80))),
		},
		"a rejected other Ingress is not merged": {
			others: []*networkingv1.Ingress{ingress("a", "old", rule("shop.example.com", prefix("/", "web", 80)),
				annotate(AnnotationSSLRedirect, "maybe"))},
			cand: ingress("b", "new", rule("shop.example.com", prefix("/", "web", 80))),
		},
	}
	accepts := func(ing *networkingv1.Ingress) bool { return ing.Annotations["kubernetes.io/ingress.class"] == "" }
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ReviewIngress(AdmissionInput{Ingress: tc.cand, Others: tc.others, Accepts: accepts, Lookups: svcs,
				Options: DefaultTranslateOptions(), Ownership: tc.ownership, Cache: NewTranslationCache(), Now: epoch.Add(time.Hour)})
			switch {
			case tc.wantErr == "" && got.Err != nil:
				t.Fatalf("rejected: %v", got.Err)
			case tc.wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", got.Err, tc.wantErr)
			}
			if len(got.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %d like %q", got.Warnings, len(tc.wantWarnings), tc.wantWarnings)
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(got.Warnings[i], w) {
					t.Errorf("warning %d is %q, want it to contain %q", i, got.Warnings[i], w)
				}
			}
			if got.Merged != tc.wantMerged {
				t.Errorf("merged with %d others, want %d", got.Merged, tc.wantMerged)
			}
		})
	}
}

// TestReviewIngressIsTheFullMerge compares ReviewIngress, which merges only the Ingresses that share a
// host with the candidate, with the merge of every Ingress, on random Ingresses over a few hosts,
// wildcards, TLS entries, aliases and canaries: the candidate's warnings must be the same.
func TestReviewIngressIsTheFullMerge(t *testing.T) {
	hosts := []string{"", "example.com", "www.example.com", "a.example.com", "b.example.com", "*.example.com", "x.a.example.com", "*.a.example.com", "other.test"}
	paths := []string{"/", "/api", "/b"}
	lk := Lookups{Services: servicesOf(service("n0", "web", port(80, "")), service("n1", "web", port(80, "")), service("n2", "web", port(80, "")))}
	rng := rand.New(rand.NewPCG(1, 21))
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	random := func(i int) *networkingv1.Ingress {
		ns := fmt.Sprintf("n%d", rng.IntN(3))
		var opts []ingressOption
		for range 1 + rng.IntN(2) {
			opts = append(opts, rule(pick(hosts), prefix(pick(paths), "web", 80)))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, withTLS(fmt.Sprintf("cert%d", rng.IntN(2)), pick(hosts[1:])))
		}
		if rng.IntN(4) == 0 { // wildcard entries over hosts the Ingress may not route
			opts = append(opts, withTLS(fmt.Sprintf("cert%d", rng.IntN(2)), pick([]string{"*.example.com", "*.a.example.com"})))
		}
		switch rng.IntN(8) {
		case 0:
			opts = append(opts, annotate(IngressNginxPrefix+"server-alias", pick(hosts[1:])))
		case 1:
			opts = append(opts, annotate(IngressNginxPrefix+"from-to-www-redirect", "true"))
		case 2:
			opts = append(opts, annotate(AnnotationCanary, "true"))
		case 3:
			opts = append(opts, withDefaultBackend("web", 80))
		}
		opts = append(opts, age(time.Duration(rng.IntN(5))*time.Minute))
		return ingress(ns, fmt.Sprintf("i%d", i), opts...)
	}
	checked, covered := 0, 0
	for round := range 1000 {
		others := make([]*networkingv1.Ingress, 3+rng.IntN(10))
		for i := range others {
			others[i] = random(i)
		}
		cand := random(rng.IntN(len(others) + 3)) // sometimes an update of one of others
		ownership := HostsShared
		if round%2 == 1 {
			ownership = HostsByNamespace
		}
		got := ReviewIngress(AdmissionInput{Ingress: cand, Others: others, Lookups: lk, Options: DefaultTranslateOptions(), Ownership: ownership})

		ct, err := TranslateIngressWith(cand, lk, DefaultTranslateOptions())
		if (err != nil) != (got.Err != nil) {
			t.Fatalf("round %d: translation error %v, review error %v", round, err, got.Err)
		}
		if err != nil {
			continue
		}
		all := []*IngressTranslation{ct}
		for _, o := range others {
			if o.Namespace == cand.Namespace && o.Name == cand.Name {
				continue
			}
			if ot, err := TranslateIngressWith(o, lk, DefaultTranslateOptions()); err == nil {
				all = append(all, ot)
			}
		}
		want := slices.Clone(ct.Warnings)
		for _, c := range MergeAll(all, MergeOptions{Ownership: ownership}).Conflicts {
			if c.Loser == ct.Ingress {
				want = append(want, c.Message())
				if !slices.Contains(routedHostsOf(ct), c.Host) && !slices.Contains(tlsHostsOf(ct), c.Host) {
					covered++ // lost on a host only its wildcard TLS entry reaches
				}
			}
		}
		if !slices.Equal(got.Warnings, want) {
			t.Fatalf("round %d (%s): review warnings\n%q\nwant (full merge)\n%q", round, ownership, got.Warnings, want)
		}
		// Through an index of the Ingresses by AdmissionIndexKeys, as the webhook's informer has them.
		index := map[string][]*networkingv1.Ingress{}
		for _, o := range others {
			for _, k := range AdmissionIndexKeys(o) {
				index[k] = append(index[k], o)
			}
		}
		indexed := ReviewIngress(AdmissionInput{Ingress: cand, Indexed: func(k string) []*networkingv1.Ingress { return index[k] },
			Lookups: lk, Options: DefaultTranslateOptions(), Ownership: ownership})
		if !slices.Equal(indexed.Warnings, want) || indexed.Merged != got.Merged {
			t.Fatalf("round %d (%s): through the index, %d merged and warnings\n%q\nwant %d and (full merge)\n%q",
				round, ownership, indexed.Merged, indexed.Warnings, got.Merged, want)
		}
		if len(want) > len(ct.Warnings) {
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("only %d rounds had conflicts of the candidate: the generator no longer makes them", checked)
	}
	t.Logf("%d conflicts on hosts only the candidate's wildcard TLS reaches", covered)
	if covered < 5 {
		t.Fatalf("only %d conflicts on hosts only the candidate's wildcard TLS reaches: the generator no longer makes them", covered)
	}
}

// TestAdmissionIndexKeys: alias hosts are index keys of their own, so that an Ingress with aliases is
// found by them (and only near them), as its rule and TLS hosts are.
func TestAdmissionIndexKeys(t *testing.T) {
	cases := map[string]struct {
		ing  *networkingv1.Ingress
		want []string
	}{
		"rules and TLS": {
			ing:  ingress("a", "x", rule("shop.example.com", prefix("/", "web", 80)), withTLS("cert", "*.example.com")),
			want: []string{"host:shop.example.com", "under:a/example.com", "host:*.example.com"},
		},
		"server-alias entries, folded and deduplicated": {
			ing: ingress("a", "x", rule("shop.example.com", prefix("/", "web", 80)),
				annotate(AnnotationServerAlias, " Shop.Example.NET ,,*.example.org, shop.example.net")),
			want: []string{"host:shop.example.net", "under:a/example.net", "host:*.example.org", "host:shop.example.com", "under:a/example.com"},
		},
		"from-to-www-redirect twins": {
			ing: ingress("a", "x", rule("shop.example.com", prefix("/", "web", 80)), rule("www.example.org", prefix("/", "web", 80)),
				rule("*.example.com", prefix("/", "web", 80)), annotate(AnnotationFromToWWWRedirect, "true")),
			want: []string{"host:www.shop.example.com", "under:a/shop.example.com", "host:example.org", "under:a/org",
				"host:shop.example.com", "under:a/example.com", "host:www.example.org", "under:a/example.org", "host:*.example.com"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := AdmissionIndexKeys(tc.ing); !slices.Equal(got, tc.want) {
				t.Fatalf("keys\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
