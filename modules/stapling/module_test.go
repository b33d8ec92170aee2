package stapling

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/certs/ocsptest"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

type fixture struct {
	h        *moduletest.Harness
	s        *Stapling
	certs    *pipeline.Topic[modules.CertChange]
	settings *pipeline.Topic[modules.SettingsChange]
	out      *moduletest.Collector[modules.OCSPChange]
}

func newFixture(t *testing.T) *fixture {
	h := moduletest.New(t)
	f := &fixture{
		h:        h,
		certs:    pipeline.NewTopic[modules.CertChange]("cert-changes"),
		settings: pipeline.NewTopic[modules.SettingsChange]("settings-changes"),
	}
	out := pipeline.NewTopic[modules.OCSPChange]("ocsp-changes")
	t.Cleanup(func() { f.certs.Close(); f.settings.Close(); out.Close() })
	f.out = moduletest.Collect(out)
	s, err := New(Params{Certs: f.certs, Settings: f.settings, Out: out, Registry: h.Registry, Log: h.Log})
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	h.Run(s)
	return f
}

func (f *fixture) enable(t *testing.T, on bool) {
	t.Helper()
	st, _, problems := nginx.ParseSettings(map[string]string{"enable-ocsp": map[bool]string{true: "true", false: "false"}[on]}, nil)
	if len(problems) > 0 || st.EnableOCSP != on {
		t.Fatalf("settings: %v", problems)
	}
	f.settings.Publish(modules.SettingsChange{Settings: st})
}

func issue(t *testing.T, ca *ocsptest.CA, name string) *certs.Certificate {
	chain, key, _ := ca.Issue(t, name+".example.com", "")
	c, err := certs.ParsePEM(types.NamespacedName{Namespace: "apps", Name: name}, chain, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStaplingFollowsSettingsAndCertificates: nothing is fetched until enable-ocsp; then each certificate
// gets its response, counted by result; a responder that is down costs no staple that exists and is
// logged once; switching enable-ocsp off takes every staple back.
func TestStaplingFollowsSettingsAndCertificates(t *testing.T) {
	f := newFixture(t)
	ca := ocsptest.NewCA(t)
	a := issue(t, ca, "a")
	f.certs.Publish(modules.CertChange{Secret: a.SecretKey, Certificate: a})
	f.enable(t, false)

	down := ocsptest.NewCA(t)
	down.SetDown(true)
	b := issue(t, down, "b")
	c := issue(t, down, "c")
	f.certs.Publish(modules.CertChange{Secret: b.SecretKey, Certificate: b})
	f.certs.Publish(modules.CertChange{Secret: c.SecretKey, Certificate: c})
	moduletest.Eventually(t, "certificates taken in", func() bool { return f.s.stapler.Tracked() == 3 })
	// A settings change is delivered on its own goroutine: have this one taken in as well.
	f.enable(t, false)
	if n := ca.Requests.Load() + down.Requests.Load(); n != 0 || len(f.out.All()) != 0 {
		t.Fatalf("enable-ocsp false: %d requests, %d changes", n, len(f.out.All()))
	}

	f.enable(t, true)
	got := f.out.WaitFor(t, "a's staple", func(c modules.OCSPChange) bool { return c.Secret == a.SecretKey && c.Staple != nil })
	st := got[len(got)-1].Staple
	if st.Revoked || st.ContentHash != a.ContentHash || len(st.Response) == 0 {
		t.Fatalf("staple %+v", st)
	}
	moduletest.Eventually(t, "fetches counted", func() bool {
		return testutil.ToFloat64(f.s.fetches.WithLabelValues(certs.OCSPGood)) == 1 &&
			testutil.ToFloat64(f.s.fetches.WithLabelValues(certs.OCSPUnreachable)) == 2
	})
	if n := f.h.Logs.FilterMessageSnippet("OCSP response not stapled").Len(); n != 1 {
		t.Errorf("%d log lines for two failures of one class, want 1", n)
	}
	for _, e := range f.h.Logs.FilterMessageSnippet("OCSP response not stapled").All() {
		for _, fld := range e.Context {
			if strings.Contains(fld.String, "PRIVATE KEY") {
				t.Error("key material logged")
			}
		}
	}
	if v := gathered(t, f, "ingress_reactor_ocsp_stapled"); v != 1 {
		t.Errorf("ingress_reactor_ocsp_stapled = %v, want 1", v)
	}

	f.enable(t, false)
	f.out.WaitFor(t, "a's staple taken back", func(c modules.OCSPChange) bool { return c.Secret == a.SecretKey && c.Staple == nil })
	if v := gathered(t, f, "ingress_reactor_ocsp_stapled"); v != 0 {
		t.Errorf("ingress_reactor_ocsp_stapled = %v after disabling, want 0", v)
	}
}

// gathered returns the value of an unlabelled metric from the registry.
func gathered(t *testing.T, f *fixture, name string) float64 {
	t.Helper()
	mfs, err := f.h.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
