package certs

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/crypto/ocsp"
)

// OCSP stapling (the ConfigMap's enable-ocsp): the controller asks each served certificate's OCSP
// responder for its status, checks the answer, and hands NGINX the DER response to staple in the
// handshakes of that certificate. This file holds the stateless parts: the request, the fetch and the
// checks. OCSPStapler (ocspstapler.go) schedules them.

// Fetch results, the values of OCSPError.Class and of the result label of the fetch metric.
const (
	// OCSPGood and OCSPRevoked are valid responses, stapled as returned.
	OCSPGood    = "good"
	OCSPRevoked = "revoked"
	// OCSPUnknown is a valid response whose status is "unknown": not stapled.
	OCSPUnknown = "unknown"
	// OCSPUnreachable: the responder did not answer, or not with 200 and a body.
	OCSPUnreachable = "unreachable"
	// OCSPInvalid: the answer is not a valid, current response for the certificate signed by its issuer.
	OCSPInvalid = "invalid"
)

// OCSP timing.
const (
	// OCSPFetchTimeout bounds one request to a responder.
	OCSPFetchTimeout = 10 * time.Second
	// OCSPMaxResponseBytes bounds the body read from a responder.
	OCSPMaxResponseBytes = 64 << 10
	// OCSPDefaultValidity is how long a response without nextUpdate is stapled after its thisUpdate.
	OCSPDefaultValidity = 24 * time.Hour
	// OCSPDefaultRefresh is how often a response without nextUpdate is fetched again.
	OCSPDefaultRefresh = time.Hour
	// OCSPMinRefresh is the shortest wait before the next fetch of a certificate.
	OCSPMinRefresh = time.Minute
	// ocspClockSkew is how far in the future a thisUpdate may lie.
	ocspClockSkew = 5 * time.Minute
)

// ErrNoOCSPResponder says that a certificate names no HTTP OCSP responder (Authority Information Access).
var ErrNoOCSPResponder = errors.New("the certificate names no http OCSP responder")

// ErrNoIssuer says that the chain lacks the certificate that signed the leaf, which OCSP needs.
var ErrNoIssuer = errors.New("the chain holds no certificate that signed the leaf")

// OCSPError is a failed fetch, with its class (OCSPUnknown, OCSPUnreachable or OCSPInvalid).
type OCSPError struct {
	Class string
	Err   error
}

func (e *OCSPError) Error() string { return e.Class + ": " + e.Err.Error() }
func (e *OCSPError) Unwrap() error { return e.Err }

// OCSPClass returns the class of err: that of an *OCSPError, OCSPUnreachable for any other error.
func OCSPClass(err error) string {
	if oe, ok := errors.AsType[*OCSPError](err); ok {
		return oe.Class
	}
	return OCSPUnreachable
}

// Staple is a checked OCSP response for one certificate, ready to be stapled.
type Staple struct {
	// Response is the DER response exactly as the responder sent it.
	Response []byte
	// Revoked is true for a "revoked" status, false for "good".
	Revoked bool
	// ThisUpdate and NextUpdate are the response's; NextUpdate is zero when it gave none.
	ThisUpdate, NextUpdate time.Time
	// Expires is when it stops being stapled: NextUpdate, or ThisUpdate + OCSPDefaultValidity.
	Expires time.Time
	// Fetched is when it was fetched.
	Fetched time.Time
	// ContentHash is the Certificate.ContentHash it was fetched for.
	ContentHash string
	// Hash is the hex SHA-256 of Response.
	Hash string
}

// Status returns OCSPGood or OCSPRevoked.
func (s *Staple) Status() string {
	if s.Revoked {
		return OCSPRevoked
	}
	return OCSPGood
}

// RefreshAt returns when to fetch the staple's successor: halfway through the response's validity as
// seen from its fetch (hourly without nextUpdate), at least OCSPMinRefresh after the fetch and at the
// latest OCSPMinRefresh before it expires, so that a failed refresh has time to be retried.
func (s *Staple) RefreshAt() time.Time {
	var at time.Time
	if s.NextUpdate.IsZero() {
		at = s.Fetched.Add(OCSPDefaultRefresh)
	} else {
		at = s.Fetched.Add(s.Expires.Sub(s.Fetched) / 2)
	}
	if latest := s.Expires.Add(-OCSPMinRefresh); at.After(latest) {
		at = latest
	}
	if earliest := s.Fetched.Add(OCSPMinRefresh); at.Before(earliest) {
		at = earliest
	}
	return at
}

// OCSPTarget is what asking for and checking a certificate's OCSP status needs.
type OCSPTarget struct {
	// URL is the leaf's first http OCSP responder.
	URL string
	// Leaf is the certificate; Issuer the chain's certificate that signed it.
	Leaf, Issuer *x509.Certificate
	// ContentHash is the Certificate's.
	ContentHash string
}

// NewOCSPTarget finds c's OCSP responder and issuer: ErrNoOCSPResponder or ErrNoIssuer when it has none.
func NewOCSPTarget(c *Certificate) (OCSPTarget, error) {
	var chain []*x509.Certificate
	rest := c.ChainPEM
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		x, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return OCSPTarget{}, fmt.Errorf("parse the chain: %w", err)
		}
		chain = append(chain, x)
	}
	if len(chain) == 0 {
		return OCSPTarget{}, errors.New("the chain holds no certificate")
	}
	t := OCSPTarget{Leaf: chain[0], ContentHash: c.ContentHash}
	for _, s := range t.Leaf.OCSPServer {
		if u, err := url.Parse(s); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			t.URL = s
			break
		}
	}
	if t.URL == "" {
		return OCSPTarget{}, ErrNoOCSPResponder
	}
	for _, x := range chain[1:] {
		if bytes.Equal(x.RawSubject, t.Leaf.RawIssuer) && t.Leaf.CheckSignatureFrom(x) == nil {
			t.Issuer = x
			break
		}
	}
	if t.Issuer == nil {
		return OCSPTarget{}, ErrNoIssuer
	}
	return t, nil
}

// Request returns the DER OCSP request for the leaf (SHA-1 CertID, which every responder takes).
func (t OCSPTarget) Request() ([]byte, error) {
	return ocsp.CreateRequest(t.Leaf, t.Issuer, &ocsp.RequestOptions{Hash: crypto.SHA1})
}

// Fetch asks the responder for the leaf's status by POST and checks the answer (Check).
func (t OCSPTarget) Fetch(ctx context.Context, client *http.Client, now func() time.Time) (*Staple, error) {
	body, err := t.Request()
	if err != nil {
		return nil, &OCSPError{Class: OCSPInvalid, Err: fmt.Errorf("build the request: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, OCSPFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return nil, &OCSPError{Class: OCSPUnreachable, Err: err}
	}
	req.Header.Set("Content-Type", "application/ocsp-request")
	req.Header.Set("Accept", "application/ocsp-response")
	resp, err := client.Do(req)
	if err != nil {
		return nil, &OCSPError{Class: OCSPUnreachable, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, &OCSPError{Class: OCSPUnreachable, Err: fmt.Errorf("responder %s answered HTTP %d", t.URL, resp.StatusCode)}
	}
	der, err := io.ReadAll(io.LimitReader(resp.Body, OCSPMaxResponseBytes+1))
	if err != nil {
		return nil, &OCSPError{Class: OCSPUnreachable, Err: fmt.Errorf("read the answer of %s: %w", t.URL, err)}
	}
	if len(der) > OCSPMaxResponseBytes {
		return nil, &OCSPError{Class: OCSPInvalid, Err: fmt.Errorf("the answer of %s exceeds %d bytes", t.URL, OCSPMaxResponseBytes)}
	}
	return t.Check(der, now())
}

// Check returns der as a Staple when it is a successful OCSP response for the leaf's serial, signed by
// the issuer (or by a responder certificate the issuer signed for OCSP signing), current at now, with
// status good or revoked. Anything else is an *OCSPError.
func (t OCSPTarget) Check(der []byte, now time.Time) (*Staple, error) {
	invalid := func(format string, args ...any) error {
		return &OCSPError{Class: OCSPInvalid, Err: fmt.Errorf(format, args...)}
	}
	r, err := ocsp.ParseResponseForCert(der, t.Leaf, t.Issuer)
	if err != nil {
		return nil, invalid("%w", err)
	}
	if r.Certificate != nil && !bytes.Equal(r.Certificate.Raw, t.Issuer.Raw) {
		// A delegated responder: the issuer signed it (checked by the parser), and for this purpose.
		if !hasOCSPSigning(r.Certificate) {
			return nil, invalid("the responder certificate %q is not for OCSP signing", r.Certificate.Subject.String())
		}
		if now.Before(r.Certificate.NotBefore) || now.After(r.Certificate.NotAfter) {
			return nil, invalid("the responder certificate %q is not valid now", r.Certificate.Subject.String())
		}
	}
	if r.SerialNumber.Cmp(t.Leaf.SerialNumber) != 0 {
		return nil, invalid("the response is for another serial number")
	}
	if r.ThisUpdate.After(now.Add(ocspClockSkew)) {
		return nil, invalid("thisUpdate %s lies in the future", r.ThisUpdate.UTC().Format(time.RFC3339))
	}
	s := &Staple{Response: der, ThisUpdate: r.ThisUpdate, NextUpdate: r.NextUpdate, Fetched: now, ContentHash: t.ContentHash}
	s.Expires = r.NextUpdate
	if s.Expires.IsZero() {
		s.Expires = r.ThisUpdate.Add(OCSPDefaultValidity)
	}
	if !s.Expires.After(now) {
		return nil, invalid("the response expired at %s", s.Expires.UTC().Format(time.RFC3339))
	}
	switch r.Status {
	case ocsp.Good:
	case ocsp.Revoked:
		s.Revoked = true
	default:
		return nil, &OCSPError{Class: OCSPUnknown, Err: errors.New("the responder does not know the certificate")}
	}
	sum := sha256.Sum256(der)
	s.Hash = hex.EncodeToString(sum[:])
	return s, nil
}

func hasOCSPSigning(c *x509.Certificate) bool {
	for _, u := range c.ExtKeyUsage {
		if u == x509.ExtKeyUsageOCSPSigning {
			return true
		}
	}
	return false
}
