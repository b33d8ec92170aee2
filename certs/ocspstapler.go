package certs

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// OCSPStaplerOptions configure an OCSPStapler. Hooks are called with the stapler's lock held: they
// must be quick and must not call the stapler.
type OCSPStaplerOptions struct {
	// Client fetches responses; nil: a client with OCSPFetchTimeout.
	Client *http.Client
	// Concurrency bounds the fetches in flight; 0 means 4.
	Concurrency int
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// OnStaple hears each change of a Secret's staple: the new one, or nil when it has none any more
	// (expired, its certificate changed or went away, stapling switched off).
	OnStaple func(secret types.NamespacedName, s *Staple)
	// OnFetch hears each fetch's result: a Staple's Status, or the class of its error.
	OnFetch func(secret types.NamespacedName, result string, err error)
}

// OCSPStapler keeps an OCSP response for each certificate it is given while it is enabled: it fetches
// one at once, then again before it expires (Staple.RefreshAt), with a growing pause after failures
// (one minute, doubling up to OCSPDefaultRefresh). A failed fetch keeps the previous response until it
// expires; then the certificate is stapled no more. Certificates without a responder or issuer are
// left alone.
type OCSPStapler struct {
	opts OCSPStaplerOptions
	wake chan struct{}

	mu      sync.Mutex
	enabled bool
	entries map[types.NamespacedName]*ocspEntry
	running int
	// gen numbers the entries' generations across the stapler, so that an entry created after its
	// Secret's previous one was deleted never takes a fetch started for that one.
	gen uint64
}

type ocspEntry struct {
	target   OCSPTarget
	staple   *Staple
	due      time.Time // next fetch; zero while one is in flight
	failures int
	gen      uint64 // renewed when the certificate changes: a fetch for an older one is discarded
}

// NewOCSPStapler returns a stapler; Run drives it.
func NewOCSPStapler(opts OCSPStaplerOptions) *OCSPStapler {
	if opts.Client == nil {
		opts.Client = NewOCSPClient()
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &OCSPStapler{opts: opts, wake: make(chan struct{}, 1), entries: map[types.NamespacedName]*ocspEntry{}}
}

// SetEnabled switches stapling on or off; off drops every staple.
func (s *OCSPStapler) SetEnabled(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.enabled == on {
		return
	}
	s.enabled = on
	now := s.opts.Now()
	for key, e := range s.entries {
		s.gen++
		e.gen = s.gen
		e.failures = 0
		e.due = now
		s.setStaple(key, e, nil)
	}
	s.poke()
}

// Set gives the stapler the certificate of a Secret; nil forgets it. A certificate without an OCSP
// responder or an issuer in its chain returns why (ErrNoOCSPResponder, ErrNoIssuer) and is not stapled.
func (s *OCSPStapler) Set(secret types.NamespacedName, c *Certificate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.entries[secret]
	if c != nil && old != nil && old.target.ContentHash == c.ContentHash {
		return nil
	}
	if old != nil {
		s.setStaple(secret, old, nil)
		delete(s.entries, secret)
	}
	if c == nil {
		return nil
	}
	t, err := NewOCSPTarget(c)
	if err != nil {
		return err
	}
	s.gen++
	e := &ocspEntry{target: t, due: s.opts.Now(), gen: s.gen}
	s.entries[secret] = e
	s.poke()
	return nil
}

// Staple returns the current staple of a Secret, nil when none.
func (s *OCSPStapler) Staple(secret types.NamespacedName) *Staple {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[secret]; e != nil {
		return e.staple
	}
	return nil
}

// Tracked returns how many certificates it follows: those with a responder and an issuer.
func (s *OCSPStapler) Tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Stapled returns how many certificates have a staple.
func (s *OCSPStapler) Stapled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.entries {
		if e.staple != nil {
			n++
		}
	}
	return n
}

func (s *OCSPStapler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// setStaple changes e's staple and tells OnStaple. s.mu is held.
func (s *OCSPStapler) setStaple(key types.NamespacedName, e *ocspEntry, st *Staple) {
	if e.staple == nil && st == nil {
		return
	}
	e.staple = st
	if s.opts.OnStaple != nil {
		s.opts.OnStaple(key, st)
	}
}

// NewOCSPClient returns the client that fetches responses: OCSPFetchTimeout per request, headers of at
// most OCSPMaxResponseBytes, and no
// redirect is followed (a 3xx answer is a failure), as NGINX and ingress-nginx did: the responder URL
// comes from a certificate that any namespace with a TLS Secret chooses, and a redirect would turn the
// POST into a GET to yet another address.
func NewOCSPClient() *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// The answer's body is capped at OCSPMaxResponseBytes; its headers would otherwise be read up to
	// 10 MB each.
	transport.MaxResponseHeaderBytes = OCSPMaxResponseBytes
	return &http.Client{
		Transport:     transport,
		Timeout:       OCSPFetchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Run fetches and expires responses until ctx ends, and waits for the fetches in flight.
func (s *OCSPStapler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := s.step(ctx, &wg)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if !next.IsZero() {
			timer.Reset(max(next.Sub(s.opts.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// step drops expired staples and starts the fetches that are due, as many as Concurrency allows; it
// returns when something is due next (zero: nothing).
func (s *OCSPStapler) step(ctx context.Context, wg *sync.WaitGroup) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	var next time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for key, e := range s.entries {
		if e.staple != nil && !e.staple.Expires.After(now) {
			s.setStaple(key, e, nil)
		}
		if e.staple != nil {
			soonest(e.staple.Expires)
		}
		if !s.enabled || e.due.IsZero() {
			continue
		}
		if e.due.After(now) {
			soonest(e.due)
			continue
		}
		if s.running >= s.opts.Concurrency {
			// Due, but no room: the end of a fetch in flight pokes Run. Waking on e.due, which has
			// passed, would spin until then.
			continue
		}
		e.due = time.Time{}
		s.running++
		wg.Add(1)
		go func(key types.NamespacedName, t OCSPTarget, gen uint64) {
			defer wg.Done()
			st, err := t.Fetch(ctx, s.opts.Client, s.opts.Now)
			s.fetched(key, gen, st, err)
		}(key, e.target, e.gen)
	}
	return next
}

// fetched records a fetch's outcome and schedules the next one.
func (s *OCSPStapler) fetched(key types.NamespacedName, gen uint64, st *Staple, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.poke()
	s.running--
	e := s.entries[key]
	if e == nil || e.gen != gen {
		return // the certificate changed or went away meanwhile
	}
	now := s.opts.Now()
	if err != nil && errors.Is(err, context.Canceled) {
		e.due = now
		return
	}
	if s.opts.OnFetch != nil {
		result := ""
		if err == nil {
			result = st.Status()
		} else {
			result = OCSPClass(err)
		}
		s.opts.OnFetch(key, result, err)
	}
	if err != nil {
		e.failures++
		e.due = now.Add(OCSPRetryDelay(e.failures))
		return
	}
	e.failures = 0
	e.due = st.RefreshAt()
	if e.staple == nil || e.staple.Hash != st.Hash {
		s.setStaple(key, e, st)
	} else {
		e.staple = st
	}
}

// OCSPRetryDelay is the pause after the n-th failed fetch in a row (n >= 1): one minute, doubling up to
// OCSPDefaultRefresh.
func OCSPRetryDelay(n int) time.Duration {
	d := OCSPMinRefresh
	for i := 1; i < n && d < OCSPDefaultRefresh; i++ {
		d *= 2
	}
	return min(d, OCSPDefaultRefresh)
}
