package reloader

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// staple is an OCSP response named body for the certificate name@version.
func staple(name, version, body string) modules.OCSPChange {
	return modules.OCSPChange{Secret: secret(name), Staple: &certs.Staple{
		Response: []byte(body), Hash: body, ContentHash: name + "@" + version, Expires: time.Unix(2000000000, 0)}}
}

// TestCertStateStaples: an OCSP response travels with the certificate it was fetched for, a new or
// dropped response pushes the certificate again, and a response for an older certificate is never sent.
func TestCertStateStaples(t *testing.T) {
	type step struct {
		certs   []modules.CertChange
		staples []modules.OCSPChange
		full    bool
		want    map[string]string // id -> OCSP body sent ("" none); absent: not pushed
	}
	for name, steps := range map[string][]step{
		"a response pushes the certificate with it, once": {
			{certs: []modules.CertChange{set("a", "1")}, want: map[string]string{id("a"): ""}},
			{staples: []modules.OCSPChange{staple("a", "1", "good")}, want: map[string]string{id("a"): "good"}},
			{want: map[string]string{}},
			{full: true, want: map[string]string{id("a"): "good"}},
		},
		"a replaced response goes out, a dropped one is taken back": {
			{certs: []modules.CertChange{set("a", "1")}, staples: []modules.OCSPChange{staple("a", "1", "good")}, want: map[string]string{id("a"): "good"}},
			{staples: []modules.OCSPChange{staple("a", "1", "revoked")}, want: map[string]string{id("a"): "revoked"}},
			{staples: []modules.OCSPChange{{Secret: secret("a")}}, want: map[string]string{id("a"): ""}},
		},
		"a renewed certificate goes out without its predecessor's response": {
			{certs: []modules.CertChange{set("a", "1")}, staples: []modules.OCSPChange{staple("a", "1", "good")}, want: map[string]string{id("a"): "good"}},
			{certs: []modules.CertChange{set("a", "2")}, want: map[string]string{id("a"): ""}},
			{staples: []modules.OCSPChange{staple("a", "2", "good2")}, want: map[string]string{id("a"): "good2"}},
		},
		"a response arriving before its certificate waits for it": {
			{certs: []modules.CertChange{set("a", "1")}, want: map[string]string{id("a"): ""}},
			{staples: []modules.OCSPChange{staple("a", "2", "early")}, want: map[string]string{}},
			{certs: []modules.CertChange{set("a", "2")}, want: map[string]string{id("a"): "early"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newCertState()
			s.useModel(tlsModel(map[nginx.Hostname]types.NamespacedName{"a.example": secret("a")}))
			for i, st := range steps {
				for _, c := range st.certs {
					s.apply(c)
				}
				for _, c := range st.staples {
					s.setStaple(c)
				}
				u, nextCerts, nextHosts := s.diff(st.full)
				got := map[string]string{}
				for id, pem := range u.Certificates {
					got[id] = string(pem.OCSP)
					if len(pem.OCSP) > 0 && !pem.OCSPExpires.Equal(time.Unix(2000000000, 0)) {
						t.Errorf("step %d: expires %s", i, pem.OCSPExpires)
					}
				}
				if len(got) != len(st.want) {
					t.Fatalf("step %d: pushed %v, want %v", i, got, st.want)
				}
				for id, body := range st.want {
					if g, ok := got[id]; !ok || g != body {
						t.Fatalf("step %d: pushed %v, want %v", i, got, st.want)
					}
				}
				s.pushedCerts, s.pushedHosts = nextCerts, nextHosts
			}
		})
	}
}
