//go:build integration

package harness

import (
	"testing"
	"time"
)

// Timeouts for polling. They are generous on purpose: they bound how long a broken
// test hangs, they are not performance expectations (no test asserts on speed).
const (
	// DefaultTimeout bounds waits for things the controller does on its own
	// (caches syncing, an object being seen, a route appearing).
	DefaultTimeout = 60 * time.Second
	// StopTimeout bounds how long a process may take to exit after SIGTERM before it
	// is killed and the test fails.
	StopTimeout = 30 * time.Second
)

// pollInterval grows from pollMin to pollMax so that fast conditions are noticed
// quickly and slow ones do not spin.
const (
	pollMin = 20 * time.Millisecond
	pollMax = 500 * time.Millisecond
)

// Eventually polls cond until it reports ok or timeout passes. On timeout it fails the
// test, naming what was expected (what) and the last thing cond saw.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, seen string)) {
	t.Helper()
	if seen, ok := poll(timeout, nil, cond); !ok {
		t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, seen)
	}
}

// poll runs cond until it succeeds, timeout passes, or abort (when not nil) returns a
// non-empty reason. It returns the last thing cond (or abort) saw and whether cond
// succeeded.
func poll(timeout time.Duration, abort func() string, cond func() (bool, string)) (string, bool) {
	return pollBetween(timeout, pollMin, pollMax, abort, cond)
}

// pollBetween is poll with an interval that grows from first to most (equal: a fixed interval).
func pollBetween(timeout, first, most time.Duration, abort func() string, cond func() (bool, string)) (string, bool) {
	deadline := time.Now().Add(timeout)
	interval := first
	var seen string
	for {
		ok, s := cond()
		if ok {
			return s, true
		}
		seen = s
		if abort != nil {
			if reason := abort(); reason != "" {
				return seen + " (" + reason + ")", false
			}
		}
		if time.Now().After(deadline) {
			return seen, false
		}
		time.Sleep(interval)
		interval = min(interval*2, most)
	}
}
