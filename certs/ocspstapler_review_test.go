package certs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/ingress-reactor/ingress-reactor/certs/ocsptest"
)

// TestOCSPStaplerStepWithoutRoomWaits: with every fetch slot taken, a certificate that is due must not
// make Run wake at once (its due time has passed), or Run spins until a fetch ends.
func TestOCSPStaplerStepWithoutRoomWaits(t *testing.T) {
	ca := ocsptest.NewCA(t)
	now := time.Now()
	s := NewOCSPStapler(OCSPStaplerOptions{Concurrency: 1, Now: func() time.Time { return now }})
	for _, host := range []string{"a.example.com", "b.example.com"} {
		c, _ := ocspCert(t, ca, host, "")
		if err := s.Set(c.SecretKey, c); err != nil {
			t.Fatal(err)
		}
	}
	s.SetEnabled(true)
	s.mu.Lock()
	s.running = s.opts.Concurrency // the slot is taken
	s.mu.Unlock()
	var wg sync.WaitGroup
	next := s.step(context.Background(), &wg)
	wg.Wait()
	if !next.IsZero() && !next.After(now) {
		t.Fatalf("step with no free slot asks to run again at %s, now is %s: Run would spin", next, now)
	}
	if ca.Requests.Load() != 0 {
		t.Fatalf("%d fetches started without a free slot", ca.Requests.Load())
	}
}

// TestOCSPStaplerDiscardsFetchOfDeletedEntry: a fetch started for a certificate whose Secret was then
// forgotten and given another certificate is not taken as the new certificate's staple (it would stay
// the entry's staple and postpone the new certificate's first fetch until the old one's refresh time).
func TestOCSPStaplerDiscardsFetchOfDeletedEntry(t *testing.T) {
	ca := ocsptest.NewCA(t)
	now := time.Now().Truncate(time.Second)
	s := NewOCSPStapler(OCSPStaplerOptions{Now: func() time.Time { return now }})
	s.SetEnabled(true)
	old, serial := ocspCert(t, ca, "a.example.com", "")
	key := old.SecretKey
	if err := s.Set(key, old); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	oldGen := s.entries[key].gen
	s.running++ // a fetch for old is in flight
	s.mu.Unlock()

	if err := s.Set(key, nil); err != nil {
		t.Fatal(err)
	}
	renewed, _ := ocspCert(t, ca, "a.example.com", "")
	if err := s.Set(key, renewed); err != nil {
		t.Fatal(err)
	}
	tgt, err := NewOCSPTarget(old)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tgt.Check(ca.Response(t, serial, ocsp.Good, now.Add(-time.Minute), 24*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	s.fetched(key, oldGen, st, nil)
	if got := s.Staple(key); got != nil {
		t.Fatalf("the renewed certificate took the old one's staple (for %x)", got.ContentHash)
	}
	s.mu.Lock()
	due := s.entries[key].due
	s.mu.Unlock()
	if due.After(now) {
		t.Fatalf("the renewed certificate's first fetch was postponed to %s", due)
	}
}

// TestOCSPClientFollowsNoRedirect: a responder that redirects is a failure, and the redirect target
// is never asked.
func TestOCSPClientFollowsNoRedirect(t *testing.T) {
	var hit atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hit.Add(1) }))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/internal", http.StatusFound)
	}))
	defer redirector.Close()
	ca := ocsptest.NewCA(t)
	c, _ := ocspCert(t, ca, "a.example.com", redirector.URL+"/")
	tgt, err := NewOCSPTarget(c)
	if err != nil {
		t.Fatal(err)
	}
	s := NewOCSPStapler(OCSPStaplerOptions{})
	_, err = tgt.Fetch(context.Background(), s.opts.Client, time.Now)
	if OCSPClass(err) != OCSPUnreachable {
		t.Fatalf("Fetch through a redirect = %v, want class %s", err, OCSPUnreachable)
	}
	if hit.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

// TestOCSPStaplerDisabledFetchesNothing: while enable-ocsp is false a certificate that is due is not
// fetched. (TestOCSPStapler's check of this looks before an asynchronous fetch could have landed.)
func TestOCSPStaplerDisabledFetchesNothing(t *testing.T) {
	ca := ocsptest.NewCA(t)
	now := time.Now()
	s := NewOCSPStapler(OCSPStaplerOptions{Now: func() time.Time { return now }})
	c, _ := ocspCert(t, ca, "a.example.com", "")
	if err := s.Set(c.SecretKey, c); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	s.step(context.Background(), &wg)
	wg.Wait() // every fetch step started has ended
	if n := ca.Requests.Load(); n != 0 {
		t.Fatalf("%d requests while disabled", n)
	}
	s.SetEnabled(true)
	s.step(context.Background(), &wg)
	wg.Wait()
	if n := ca.Requests.Load(); n != 1 {
		t.Fatalf("%d requests once enabled, want 1", n)
	}
	if s.Staple(c.SecretKey) == nil {
		t.Fatal("no staple once enabled")
	}
}

// TestOCSPClientBoundsHeaders: a responder's headers are read up to OCSPMaxResponseBytes, like its body.
func TestOCSPClientBoundsHeaders(t *testing.T) {
	big := strings.Repeat("x", 4*OCSPMaxResponseBytes)
	responder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Padding", big)
		_, _ = w.Write([]byte("not an OCSP response"))
	}))
	defer responder.Close()
	ca := ocsptest.NewCA(t)
	c, _ := ocspCert(t, ca, "a.example.com", responder.URL+"/")
	tgt, err := NewOCSPTarget(c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tgt.Fetch(context.Background(), NewOCSPClient(), time.Now)
	if OCSPClass(err) != OCSPUnreachable || !strings.Contains(err.Error(), "header") {
		t.Fatalf("Fetch with %d bytes of headers = %v, want the headers refused", len(big), err)
	}
}
