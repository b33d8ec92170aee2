package app

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// apiProbeInterval is how often an unreachable API server is probed. It bounds how long after the API
// server returns the informers resume.
const apiProbeInterval = 500 * time.Millisecond

// apiWaiter makes reads from an unreachable API server wait for it instead of failing.
//
// client-go's reflectors back off exponentially (up to 30 s, doubled by jitter) after each failed list or
// watch, and that backoff is not configurable through a SharedInformerFactory: after a 30 s outage, changes
// made right after the API server returned went live 47 to 61 s later, and nothing was logged. With the
// waiter, a GET whose connection fails is held until a probe of the API server's /readyz gets an answer
// (any status below 500), then sent again: the reflector never sees the outage as a string of errors, so
// it has no backoff to sit out, and resumes within one probe interval of the API server's return. Writes
// (status, Events, Leases) still fail at once: their callers have their own retries and deadlines, and a
// leader must notice that it cannot renew.
//
// The lost and the regained connection are logged once each, and ingress_reactor_kube_api_reachable says
// which state the controller is in.
type apiWaiter struct {
	log       *zap.Logger
	reachable prometheus.Gauge
	stop      <-chan struct{}
	interval  time.Duration

	mu sync.Mutex
	// back is non-nil while the API server is unreachable, and closed when it answers again.
	back  chan struct{}
	since time.Time
}

func newAPIWaiter(log *zap.Logger, reachable prometheus.Gauge, stop <-chan struct{}) *apiWaiter {
	reachable.Set(1)
	return &apiWaiter{log: log, reachable: reachable, stop: stop, interval: apiProbeInterval}
}

// wrap is a rest.Config.WrapTransport: next is the TLS transport, beneath authentication.
func (w *apiWaiter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		for {
			resp, err := next.RoundTrip(req)
			if err == nil || req.Method != http.MethodGet || req.Body != nil || !connectionFailed(err) {
				return resp, err
			}
			back := w.lost(req, next, err)
			select {
			case <-back:
			case <-req.Context().Done():
				return nil, err
			case <-w.stop:
				return nil, err
			}
		}
	})
}

// lost records that the API server could not be reached and returns a channel closed once it answers.
// The first request to fail starts the one probe.
func (w *apiWaiter) lost(req *http.Request, next http.RoundTripper, cause error) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.back != nil {
		return w.back
	}
	w.back = make(chan struct{})
	w.since = time.Now()
	w.reachable.Set(0)
	w.log.Warn("lost the connection to the Kubernetes API server; reads wait for it to return",
		zap.String("server", req.URL.Host), zap.Error(cause))
	probe := *req.URL
	probe.Path, probe.RawPath, probe.RawQuery = "/readyz", "", ""
	go w.probe(next, probe.String())
	return w.back
}

// probe asks url every interval until the API server answers, then releases the waiting requests.
func (w *apiWaiter) probe(next http.RoundTripper, url string) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if w.answers(next, url) {
			w.mu.Lock()
			close(w.back)
			w.back = nil
			outage := time.Since(w.since)
			w.mu.Unlock()
			w.reachable.Set(1)
			w.log.Info("the Kubernetes API server answers again; resuming", zap.Duration("unreachable_for", outage))
			return
		}
	}
}

// answers reports whether the API server serves requests: a readiness answer below 500. An
// authentication or authorization refusal counts, since it comes from a serving API server.
func (w *apiWaiter) answers(next http.RoundTripper, url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*w.interval+time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode < http.StatusInternalServerError
}

// connectionFailed reports whether err means that the API server could not be reached or dropped the
// connection before answering, as opposed to an answer or a cancelled request.
func connectionFailed(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// roundTripperFunc is an http.RoundTripper made of a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip implements http.RoundTripper.
func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
