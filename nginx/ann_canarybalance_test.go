package nginx

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// canaryPair translates a main and a canary Ingress for host with opts and merges them; it returns the
// location "/" of host and the canary's translation warnings.
func canaryPair(t *testing.T, opts TranslateOptions, mainKV, canaryKV []string) (*Location, []string) {
	t.Helper()
	const host = "shop.example.com"
	svcs := servicesOf(service("default", "web", port(80, "")), service("default", "web-v2", port(80, "")))
	var ts []*IngressTranslation
	var warnings []string
	for _, ing := range []*networkingv1.Ingress{
		ingress("default", "main", rule(host, prefix("/", "web", 80)), annotate(mainKV...)),
		ingress("default", "canary", rule(host, prefix("/", "web-v2", 80)), annotate(append([]string{AnnotationCanary, "true"}, canaryKV...)...)),
	} {
		tr, err := TranslateIngress(ing, svcs, opts)
		if err != nil {
			t.Fatalf("%s: %v", ing.Name, err)
		}
		if ing.Name == "canary" {
			warnings = tr.Warnings
		}
		ts = append(ts, tr)
	}
	m, conflicts := Merge(ts, nil)
	if len(conflicts) > 0 {
		t.Fatalf("conflicts %+v", conflicts)
	}
	s := m.Server(host)
	if s == nil || len(s.Locations) != 1 || s.Locations[0].Canary == nil {
		t.Fatalf("server %+v: want one location with a canary", s)
	}
	return &s.Locations[0], warnings
}

// cookieKeyOf is the persistent-affinity key of Ingress default/name (its UID is "default/name").
func cookieKeyOf(name string) string {
	sum := sha256.Sum256([]byte("ingress-reactor affinity\x00default/" + name + "\x00default/" + name))
	return hex.EncodeToString(sum[:16])
}

// TestCanaryBalance: which balancing the canary's requests get (affinity-canary-behavior sticky: the
// main Ingress's affinity, else the canary's own load-balance and upstream-hash-by; legacy: the canary's
// own affinity), and the Warnings for what a canary ignores.
func TestCanaryBalance(t *testing.T) {
	affinity := []string{AnnotationAffinity, "cookie", AnnotationSessionCookieName, "SHOP", AnnotationAffinityMode, "persistent"}
	mainCookie := BalanceOptions{Affinity: true, CookieName: "SHOP", CookiePersistent: true, CookieKey: cookieKeyOf("main")}
	stickyIgnored := "metadata.annotations: " + AnnotationAffinity + ", " + AnnotationSessionCookieName + ": ignored on a canary Ingress with " +
		AnnotationAffinityCanaryBehavior + " sticky (the default): the main Ingress's affinity applies to the canary's requests, as in ingress-nginx"
	tests := map[string]struct {
		opts         TranslateOptions
		main, canary []string
		want         BalanceOptions
		wantWarning  string
	}{
		"sticky (the default): the main's affinity balances the canary's requests": {
			main: affinity, canary: []string{AnnotationCanaryWeight, "10"}, want: mainCookie},
		"sticky said so": {
			main: affinity, canary: []string{AnnotationAffinityCanaryBehavior, " Sticky "}, want: mainCookie},
		"sticky: the main's affinity wins over the canary's upstream-hash-by": {
			main: affinity, canary: []string{AnnotationUpstreamHashBy, "$arg_user"}, want: mainCookie},
		"sticky: the canary's own affinity is ignored with a Warning": {
			canary: []string{AnnotationAffinity, "cookie", AnnotationSessionCookieName, "OWN"}, wantWarning: stickyIgnored},
		"sticky: without the main's affinity, the canary's load-balance": {
			canary: []string{AnnotationLoadBalance, "ewma"}, want: BalanceOptions{LoadBalance: "ewma"}},
		"sticky: without the main's affinity, the canary's upstream-hash-by": {
			canary: []string{AnnotationUpstreamHashBy, "$arg_user", AnnotationUpstreamHashBySubset, "true"},
			want:   BalanceOptions{HashBy: "$arg_user", HashSubsetSize: 3}},
		"legacy: the canary's own affinity": {
			main:   affinity,
			canary: []string{AnnotationAffinityCanaryBehavior, "legacy", AnnotationAffinity, "cookie", AnnotationAffinityMode, "persistent"},
			want:   BalanceOptions{Affinity: true, CookieName: defaultSessionCookieName, CookiePersistent: true, CookieKey: cookieKeyOf("canary")}},
		"legacy without affinity of its own: round robin, whatever the main's": {
			main: affinity, canary: []string{AnnotationAffinityCanaryBehavior, "LEGACY"}},
		"legacy: the canary's upstream-hash-by": {
			main: affinity, canary: []string{AnnotationAffinityCanaryBehavior, "legacy", AnnotationUpstreamHashBy, "$remote_addr"},
			want: BalanceOptions{HashBy: "$remote_addr"}},
		"an invalid behavior is ignored with a Warning: sticky": {
			main: affinity, canary: []string{AnnotationAffinityCanaryBehavior, "sometimes"}, want: mainCookie,
			wantWarning: "metadata.annotations[" + AnnotationAffinityCanaryBehavior + `]: "sometimes" is not sticky or legacy; ignored`},
		"the ConfigMap's load-balance balances a canary without annotations of its own": {
			opts: TranslateOptions{LoadBalance: "ewma"}, want: BalanceOptions{LoadBalance: "ewma"}},
		"the ConfigMap's upstream-hash-by gives way to the main's affinity (sticky)": {
			opts: TranslateOptions{UpstreamHashBy: "$remote_addr"}, main: affinity, want: mainCookie},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, warnings := canaryPair(t, tc.opts, tc.main, tc.canary)
			if l.Canary.Balance != tc.want {
				t.Errorf("canary balance %+v, want %+v", l.Canary.Balance, tc.want)
			}
			if tc.wantWarning == "" && len(warnings) > 0 || tc.wantWarning != "" && !slices.Contains(warnings, tc.wantWarning) {
				t.Errorf("canary warnings %q, want %q", warnings, tc.wantWarning)
			}
		})
	}
}

// TestCanaryBehaviorOnMainIngress: affinity-canary-behavior on a main Ingress has no effect, with a
// Warning.
func TestCanaryBehaviorOnMainIngress(t *testing.T) {
	got, errs := translateAnnotated(t, DefaultTranslateOptions(), AnnotationAffinity, "cookie", AnnotationAffinityCanaryBehavior, "legacy")
	if got == nil {
		t.Fatalf("rejected: %q", errs)
	}
	want := "metadata.annotations[" + AnnotationAffinityCanaryBehavior + "]: has an effect only on a canary Ingress; ignored"
	if !slices.Contains(got.Warnings, want) {
		t.Errorf("warnings %q, want %q", got.Warnings, want)
	}
}

// TestCanaryBalanceRouteData: the canary's balancing travels in the route push inside "canary", with
// the location's cookie path; a change of it changes the location (the push), and no reload.
func TestCanaryBalanceRouteData(t *testing.T) {
	l, _ := canaryPair(t, DefaultTranslateOptions(), []string{AnnotationAffinity, "cookie"}, []string{AnnotationCanaryWeight, "5"})
	wire := string(AppendRouteHostJSON(nil, &Server{Host: "shop.example.com", Locations: []Location{*l}}))
	want := `"canary":{"upstream":"` + string(up("default", "web-v2", 80).Name) + `","weight":5,"total":100,` +
		`"balance":{"cookie":{"name":"INGRESSCOOKIE","path":"/"}}}`
	if !strings.Contains(wire, want) {
		t.Errorf("route push %s, want it to contain %s", wire, want)
	}
	other, _ := canaryPair(t, DefaultTranslateOptions(), []string{AnnotationAffinity, "cookie"},
		[]string{AnnotationCanaryWeight, "5", AnnotationAffinityCanaryBehavior, "legacy"})
	if l.Equal(other) {
		t.Error("locations whose canaries balance differently are Equal: the change would not be pushed")
	}
}

// TestBalanceSettingsDefaults: the ConfigMap's load-balance and upstream-hash-by apply to Ingresses
// whose annotations choose no balancing.
func TestBalanceSettingsDefaults(t *testing.T) {
	hash := TranslateOptions{UpstreamHashBy: "$remote_addr"}
	ewma := TranslateOptions{LoadBalance: "ewma"}
	both := TranslateOptions{UpstreamHashBy: "$remote_addr", LoadBalance: "ewma"}
	tests := map[string]struct {
		opts TranslateOptions
		kv   []string
		want BalanceOptions
	}{
		"nothing set":                          {},
		"load-balance ewma":                    {opts: ewma, want: BalanceOptions{LoadBalance: "ewma"}},
		"upstream-hash-by":                     {opts: hash, want: BalanceOptions{HashBy: "$remote_addr"}},
		"upstream-hash-by wins over ewma":      {opts: both, want: BalanceOptions{HashBy: "$remote_addr"}},
		"the annotation round_robin wins":      {opts: both, kv: []string{AnnotationLoadBalance, "round_robin"}},
		"the annotation ewma wins over a hash": {opts: hash, kv: []string{AnnotationLoadBalance, "ewma"}, want: BalanceOptions{LoadBalance: "ewma"}},
		"an ignored annotation value leaves the default": {opts: ewma, kv: []string{AnnotationLoadBalance, "chash"},
			want: BalanceOptions{LoadBalance: "ewma"}},
		"the annotation upstream-hash-by wins": {opts: both, kv: []string{AnnotationUpstreamHashBy, "$arg_user"}, want: BalanceOptions{HashBy: "$arg_user"}},
		"affinity wins": {opts: both, kv: []string{AnnotationAffinity, "cookie"},
			want: BalanceOptions{Affinity: true, CookieName: defaultSessionCookieName}},
		"an empty affinity leaves the default": {opts: ewma, kv: []string{AnnotationAffinity, ""}, want: BalanceOptions{LoadBalance: "ewma"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := DefaultTranslateOptions()
			opts.UpstreamHashBy, opts.LoadBalance = tc.opts.UpstreamHashBy, tc.opts.LoadBalance
			got, errs := translateAnnotated(t, opts, tc.kv...)
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			var b BalanceOptions
			if got.Options != nil {
				b = got.Options.Balance
			}
			if b != tc.want {
				t.Errorf("balance %+v, want %+v", b, tc.want)
			}
		})
	}
}

// TestBalanceSettingsKeys: the ConfigMap keys load-balance and upstream-hash-by parse into the
// translation's defaults, and refuse what the annotations refuse.
func TestBalanceSettingsKeys(t *testing.T) {
	s, _, problems := ParseSettings(map[string]string{"load-balance": " EWMA ", "upstream-hash-by": "${arg_user}-$remote_addr"}, nil)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if o := s.TranslateOptions(DefaultTranslateOptions()); o.LoadBalance != "ewma" || o.UpstreamHashBy != "${arg_user}-$remote_addr" {
		t.Errorf("translate options %+v", o)
	}
	if o := DefaultSettings().TranslateOptions(DefaultTranslateOptions()); o.LoadBalance != "" || o.UpstreamHashBy != "" {
		t.Errorf("defaults: translate options %+v, want round robin and no hash", o)
	}
	for key, bad := range map[string]string{"load-balance": "chash", "upstream-hash-by": "$request_body"} {
		s, _, problems := ParseSettings(map[string]string{key: bad}, map[string]string{"load-balance": "ewma", "upstream-hash-by": "$uri"})
		if len(problems) != 1 || !problems[0].KeptLastGood {
			t.Errorf("%s = %q: problems %v, want one that keeps the last good value", key, bad, problems)
		}
		if s.LoadBalance != map[bool]string{true: "ewma", false: ""}[key == "load-balance"] ||
			s.UpstreamHashBy != map[bool]string{true: "$uri", false: ""}[key == "upstream-hash-by"] {
			t.Errorf("%s = %q: settings %q %q", key, bad, s.LoadBalance, s.UpstreamHashBy)
		}
	}
}
