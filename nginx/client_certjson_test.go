package nginx

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// decodedCertificates is what configuration.lua decodes from POST /configuration/certificates.
type decodedCertificates struct {
	Full         bool `json:"full"`
	Certificates map[string]*struct {
		Cert        string `json:"cert"`
		Key         string `json:"key"`
		OCSP        []byte `json:"ocsp,omitempty"`
		OCSPExpires int64  `json:"ocsp_expires,omitempty"`
	} `json:"certificates"`
	Hosts map[Hostname]*string `json:"hosts"`
}

// TestCertificatesJSON: the hand-built body of a certificates push is valid JSON that decodes to what
// the update says (PEM newlines, quotes and control bytes escaped, OCSP in base64, removals as null,
// and none of them in a full push), keys in order, and fits the buffer sized for it.
func TestCertificatesJSON(t *testing.T) {
	cert := "-----BEGIN CERTIFICATE-----\nMIIB\"odd\\\x01\n-----END CERTIFICATE-----\n"
	key := "-----BEGIN PRIVATE KEY-----\nMC4C\n-----END PRIVATE KEY-----\n"
	expires := time.Unix(1800000000, 0)
	u := CertificateUpdate{
		Certificates: map[string]*CertificatePEM{
			"web/b":  {Cert: []byte(cert), Key: []byte(key)},
			"web/a":  {Cert: []byte(cert), Key: []byte(key), OCSP: []byte{0x30, 0x82, 0xff, 0x00}, OCSPExpires: expires},
			"gone/x": nil,
		},
		Hosts: map[Hostname]string{"b.example.com": "web/b", "*.example.com": "web/a", "old.example.com": ""},
	}
	for _, full := range []bool{false, true} {
		out := appendCertificatesJSON(nil, u, full)
		var got decodedCertificates
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("full=%v: %v in %s", full, err, out)
		}
		if got.Full != full || len(got.Certificates) != 3-b2i(full) || len(got.Hosts) != 3-b2i(full) {
			t.Fatalf("full=%v: %s", full, out)
		}
		for id, want := range u.Certificates {
			c, ok := got.Certificates[id]
			switch {
			case want == nil && full:
				if ok {
					t.Errorf("full push carries the removal of %s", id)
				}
			case want == nil:
				if !ok || c != nil {
					t.Errorf("removal of %s: %v, %v; want null", id, c, ok)
				}
			case c == nil || c.Cert != string(want.Cert) || c.Key != string(want.Key) || !reflect.DeepEqual(c.OCSP, want.OCSP) && len(want.OCSP) > 0:
				t.Errorf("full=%v: certificate %s decodes to %+v", full, id, c)
			case len(want.OCSP) > 0 && c.OCSPExpires != expires.Unix():
				t.Errorf("ocsp_expires %d, want %d", c.OCSPExpires, expires.Unix())
			case len(want.OCSP) == 0 && (c.OCSP != nil || c.OCSPExpires != 0):
				t.Errorf("certificate %s without a staple carries one: %+v", id, c)
			}
		}
		for h, want := range u.Hosts {
			id, ok := got.Hosts[h]
			switch {
			case want == "" && full && ok, want == "" && !full && (!ok || id != nil), want != "" && (id == nil || *id != want):
				t.Errorf("full=%v: host %s decodes to %v (present %v), want %q", full, h, id, ok, want)
			}
		}
		if i, j := strings.Index(string(out), `"web/a"`), strings.Index(string(out), `"web/b"`); i < 0 || j < i {
			t.Errorf("certificates not in key order: %s", out)
		}
		if sized := appendCertificatesJSON(nil, u, full); cap(sized) < len(sized) || cap(sized) > 2*len(sized)+128 {
			t.Errorf("buffer of %d bytes for %d written", cap(sized), len(sized))
		}
	}
	if got := string(appendCertificatesJSON(nil, CertificateUpdate{}, true)); got != `{"full":true,"certificates":{},"hosts":{}}` {
		t.Errorf("empty full push: %s", got)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkCertificatesPushBody encodes a full push of 10,000 certificates (ECDSA-sized PEM) by hand
// and, for comparison, with encoding/json as the client did before. encoding/json's B/op leaves out the
// buffer it builds the text in, which it keeps in its pool between pushes (as large as the output): by
// hand there is one allocation, sized up front, and nothing is kept.
//
//	go test -run '^$' -bench CertificatesPushBody -benchmem ./nginx/
func BenchmarkCertificatesPushBody(b *testing.B) {
	cert := "-----BEGIN CERTIFICATE-----\n" + strings.Repeat(strings.Repeat("A", 64)+"\n", 10) + "-----END CERTIFICATE-----\n"
	key := "-----BEGIN PRIVATE KEY-----\n" + strings.Repeat(strings.Repeat("B", 64)+"\n", 3) + "-----END PRIVATE KEY-----\n"
	u := CertificateUpdate{Certificates: map[string]*CertificatePEM{}, Hosts: map[Hostname]string{}}
	type pair struct {
		Cert string `json:"cert"`
		Key  string `json:"key"`
	}
	type body struct {
		Full         bool                `json:"full"`
		Certificates map[string]*pair    `json:"certificates"`
		Hosts        map[Hostname]string `json:"hosts"`
	}
	old := body{Full: true, Certificates: map[string]*pair{}, Hosts: map[Hostname]string{}}
	for i := range 10000 {
		id := "ns/tls-" + strconv.Itoa(i)
		u.Certificates[id] = &CertificatePEM{Cert: []byte(cert), Key: []byte(key)}
		u.Hosts[Hostname("h"+strconv.Itoa(i)+".example.com")] = id
		old.Certificates[id] = &pair{Cert: cert, Key: key}
		old.Hosts[Hostname("h"+strconv.Itoa(i)+".example.com")] = id
	}
	b.Run("by-hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = appendCertificatesJSON(nil, u, true)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(old); err != nil {
				b.Fatal(err)
			}
		}
	})
}
