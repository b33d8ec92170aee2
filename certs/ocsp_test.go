package certs

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs/ocsptest"
)

// ocspCert issues a certificate for host from ca and parses it as a Secret's.
func ocspCert(t *testing.T, ca *ocsptest.CA, host, ocspURL string) (*Certificate, *big.Int) {
	t.Helper()
	chain, key, serial := ca.Issue(t, host, ocspURL)
	c, err := ParsePEM(types.NamespacedName{Namespace: "ns", Name: host}, chain, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, serial
}

func TestNewOCSPTarget(t *testing.T) {
	ca := ocsptest.NewCA(t)
	c, _ := ocspCert(t, ca, "a.example.com", "")
	tgt, err := NewOCSPTarget(c)
	if err != nil || tgt.URL != ca.URL || !tgt.Issuer.Equal(ca.Cert) || tgt.ContentHash != c.ContentHash {
		t.Fatalf("target %+v, %v", tgt, err)
	}

	noURL, _ := ocspCert(t, ca, "b.example.com", "-")
	if _, err := NewOCSPTarget(noURL); !errors.Is(err, ErrNoOCSPResponder) {
		t.Errorf("no responder: %v, want ErrNoOCSPResponder", err)
	}
	ldap, _ := ocspCert(t, ca, "c.example.com", "ldap://ocsp.example.com/")
	if _, err := NewOCSPTarget(ldap); !errors.Is(err, ErrNoOCSPResponder) {
		t.Errorf("ldap responder: %v, want ErrNoOCSPResponder", err)
	}

	chain, key, _ := ca.Issue(t, "d.example.com", "")
	leafOnly := chain[:len(chain)-len(ca.PEM())]
	c2, err := ParsePEM(types.NamespacedName{Namespace: "ns", Name: "d"}, leafOnly, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewOCSPTarget(c2); !errors.Is(err, ErrNoIssuer) {
		t.Errorf("leaf alone: %v, want ErrNoIssuer", err)
	}
	other := ocsptest.NewCA(t)
	wrong, err := ParsePEM(types.NamespacedName{Namespace: "ns", Name: "e"}, append(append([]byte{}, leafOnly...), other.PEM()...), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewOCSPTarget(wrong); !errors.Is(err, ErrNoIssuer) {
		t.Errorf("another CA in the chain: %v, want ErrNoIssuer", err)
	}
}

func TestOCSPTargetCheck(t *testing.T) {
	ca := ocsptest.NewCA(t)
	other := ocsptest.NewCA(t)
	c, serial := ocspCert(t, ca, "a.example.com", "")
	_, otherSerial := ocspCert(t, ca, "b.example.com", "")
	tgt, err := NewOCSPTarget(c)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	delegated := ocsptest.NewCA(t)
	dc, dserial := ocspCert(t, delegated, "d.example.com", "")
	dtgt, _ := NewOCSPTarget(dc)
	delegated.DelegateResponder(t, true)
	noEKU := ocsptest.NewCA(t)
	nc, nserial := ocspCert(t, noEKU, "n.example.com", "")
	ntgt, _ := NewOCSPTarget(nc)
	noEKU.DelegateResponder(t, false)

	for name, tc := range map[string]struct {
		target      OCSPTarget
		der         []byte
		wantClass   string // "" : a staple
		wantRevoked bool
		wantExpires time.Time
	}{
		"good":             {target: tgt, der: ca.Response(t, serial, ocsp.Good, now.Add(-time.Minute), time.Hour), wantExpires: now.Add(59 * time.Minute)},
		"revoked, stapled": {target: tgt, der: ca.Response(t, serial, ocsp.Revoked, now.Add(-time.Minute), time.Hour), wantRevoked: true, wantExpires: now.Add(59 * time.Minute)},
		"no nextUpdate":    {target: tgt, der: ca.Response(t, serial, ocsp.Good, now.Add(-time.Minute), 0), wantExpires: now.Add(-time.Minute).Add(OCSPDefaultValidity)},
		"unknown":          {target: tgt, der: ca.Response(t, serial, ocsp.Unknown, now.Add(-time.Minute), time.Hour), wantClass: OCSPUnknown},
		"another serial":   {target: tgt, der: ca.Response(t, otherSerial, ocsp.Good, now.Add(-time.Minute), time.Hour), wantClass: OCSPInvalid},
		"another signer":   {target: tgt, der: other.Response(t, serial, ocsp.Good, now.Add(-time.Minute), time.Hour), wantClass: OCSPInvalid},
		"expired":          {target: tgt, der: ca.Response(t, serial, ocsp.Good, now.Add(-2*time.Hour), time.Hour), wantClass: OCSPInvalid},
		"no nextUpdate, older than the default validity": {target: tgt, der: ca.Response(t, serial, ocsp.Good, now.Add(-OCSPDefaultValidity-time.Minute), 0), wantClass: OCSPInvalid},
		"from the future":               {target: tgt, der: ca.Response(t, serial, ocsp.Good, now.Add(time.Hour), time.Hour), wantClass: OCSPInvalid},
		"not DER":                       {target: tgt, der: []byte("<html>busy</html>"), wantClass: OCSPInvalid},
		"delegated responder":           {target: dtgt, der: delegated.Response(t, dserial, ocsp.Good, now.Add(-time.Minute), time.Hour), wantExpires: now.Add(59 * time.Minute)},
		"delegated without OCSPSigning": {target: ntgt, der: noEKU.Response(t, nserial, ocsp.Good, now.Add(-time.Minute), time.Hour), wantClass: OCSPInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			st, err := tc.target.Check(tc.der, now)
			if tc.wantClass != "" {
				if err == nil || OCSPClass(err) != tc.wantClass {
					t.Fatalf("Check = %+v, %v; want class %s", st, err, tc.wantClass)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Revoked != tc.wantRevoked || !st.Expires.Equal(tc.wantExpires) || string(st.Response) != string(tc.der) ||
				st.ContentHash != tc.target.ContentHash || st.Hash == "" || !st.Fetched.Equal(now) {
				t.Errorf("staple %+v; want revoked %v, expires %s", st, tc.wantRevoked, tc.wantExpires)
			}
		})
	}
}

func TestStapleRefreshAt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		staple Staple
		want   time.Time
	}{
		"halfway to nextUpdate": {Staple{Fetched: t0, ThisUpdate: t0, NextUpdate: t0.Add(96 * time.Hour), Expires: t0.Add(96 * time.Hour)}, t0.Add(48 * time.Hour)},
		"halfway from the fetch, not from thisUpdate": {
			Staple{Fetched: t0, ThisUpdate: t0.Add(-10 * time.Hour), NextUpdate: t0.Add(2 * time.Hour), Expires: t0.Add(2 * time.Hour)}, t0.Add(time.Hour)},
		"no nextUpdate: hourly": {Staple{Fetched: t0, ThisUpdate: t0, Expires: t0.Add(OCSPDefaultValidity)}, t0.Add(OCSPDefaultRefresh)},
		"about to expire: not before the minimum": {
			Staple{Fetched: t0, ThisUpdate: t0, NextUpdate: t0.Add(30 * time.Second), Expires: t0.Add(30 * time.Second)}, t0.Add(OCSPMinRefresh)},
		"short validity: a minute before it expires": {
			Staple{Fetched: t0, ThisUpdate: t0.Add(-time.Hour), NextUpdate: t0.Add(90 * time.Second), Expires: t0.Add(90 * time.Second)}, t0.Add(OCSPMinRefresh)},
	} {
		if got := tc.staple.RefreshAt(); !got.Equal(tc.want) {
			t.Errorf("%s: RefreshAt = %s, want %s", name, got, tc.want)
		}
	}
}

func TestOCSPRetryDelay(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 6: 32 * time.Minute, 7: time.Hour, 50: time.Hour} {
		if got := OCSPRetryDelay(n); got != want {
			t.Errorf("OCSPRetryDelay(%d) = %s, want %s", n, got, want)
		}
	}
}

// staplerHarness runs an OCSPStapler on a clock the test moves, and records what it reports.
type staplerHarness struct {
	s       *OCSPStapler
	mu      sync.Mutex
	now     time.Time
	staples chan stapleEvent
	fetches chan string
}

type stapleEvent struct {
	secret types.NamespacedName
	staple *Staple
}

func newStaplerHarness(t *testing.T) *staplerHarness {
	h := &staplerHarness{now: time.Now(), staples: make(chan stapleEvent, 100), fetches: make(chan string, 100)}
	h.s = NewOCSPStapler(OCSPStaplerOptions{
		Now:      h.clock,
		OnStaple: func(k types.NamespacedName, s *Staple) { h.staples <- stapleEvent{k, s} },
		OnFetch:  func(_ types.NamespacedName, result string, _ error) { h.fetches <- result },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *staplerHarness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// advance moves the clock and has the stapler look at it.
func (h *staplerHarness) advance(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
	h.s.poke()
}

func (h *staplerHarness) nextStaple(t *testing.T) stapleEvent {
	t.Helper()
	select {
	case e := <-h.staples:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no staple change reported")
		return stapleEvent{}
	}
}

func (h *staplerHarness) nextFetch(t *testing.T) string {
	t.Helper()
	select {
	case r := <-h.fetches:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no fetch reported")
		return ""
	}
}

func TestOCSPStapler(t *testing.T) {
	ca := ocsptest.NewCA(t)
	c, serial := ocspCert(t, ca, "a.example.com", "")
	key := c.SecretKey
	h := newStaplerHarness(t)
	ca.SetClock(h.clock)

	if err := h.s.Set(key, c); err != nil {
		t.Fatal(err)
	}
	noURL, _ := ocspCert(t, ca, "b.example.com", "-")
	if err := h.s.Set(noURL.SecretKey, noURL); !errors.Is(err, ErrNoOCSPResponder) {
		t.Fatalf("Set without responder = %v", err)
	}
	// Disabled: nothing is fetched until enable-ocsp.
	h.advance(time.Hour)
	if n := ca.Requests.Load(); n != 0 {
		t.Fatalf("%d requests while disabled", n)
	}

	h.s.SetEnabled(true)
	if r := h.nextFetch(t); r != OCSPGood {
		t.Fatalf("first fetch: %s", r)
	}
	first := h.nextStaple(t)
	if first.secret != key || first.staple == nil || first.staple.Revoked || first.staple.ContentHash != c.ContentHash {
		t.Fatalf("first staple %+v", first)
	}
	if h.s.Stapled() != 1 {
		t.Fatalf("Stapled = %d", h.s.Stapled())
	}

	// The responder goes down: the refresh fails, the staple stays until it expires, then goes.
	ca.SetDown(true)
	h.advance(first.staple.RefreshAt().Sub(h.clock()))
	if r := h.nextFetch(t); r != OCSPUnreachable {
		t.Fatalf("fetch from a down responder: %s", r)
	}
	if st := h.s.Staple(key); st == nil || st.Hash != first.staple.Hash {
		t.Fatalf("the staple did not survive a failed refresh: %+v", st)
	}
	h.advance(first.staple.Expires.Sub(h.clock()))
	if e := h.nextStaple(t); e.staple != nil {
		t.Fatalf("expired staple not dropped: %+v", e)
	}

	// Back up, and the certificate revoked: the next retry staples the revoked response.
	ca.SetDown(false)
	ca.SetStatus(serial, ocsp.Revoked)
	h.advance(OCSPDefaultRefresh)
	for {
		if r := h.nextFetch(t); r == OCSPRevoked {
			break
		}
	}
	if e := h.nextStaple(t); e.staple == nil || !e.staple.Revoked {
		t.Fatalf("revoked response not stapled: %+v", e)
	}

	// A renewed certificate: the old staple goes at once, the new one is fetched.
	renewed, _ := ocspCert(t, ca, "a.example.com", "")
	if err := h.s.Set(key, renewed); err != nil {
		t.Fatal(err)
	}
	if e := h.nextStaple(t); e.staple != nil {
		t.Fatalf("the old certificate's staple was kept: %+v", e)
	}
	if e := h.nextStaple(t); e.staple == nil || e.staple.ContentHash != renewed.ContentHash || e.staple.Revoked {
		t.Fatalf("renewed certificate's staple %+v", e)
	}

	// Switched off: dropped.
	h.s.SetEnabled(false)
	if e := h.nextStaple(t); e.staple != nil {
		t.Fatalf("disabled, still stapled: %+v", e)
	}
	if h.s.Stapled() != 0 {
		t.Fatalf("Stapled = %d after disabling", h.s.Stapled())
	}
}
