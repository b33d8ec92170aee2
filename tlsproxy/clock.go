package tlsproxy

import "time"

// clock schedules the idle checks; tests replace it to fire them on demand.
type clock interface {
	AfterFunc(d time.Duration, f func()) stopper
}

// stopper is the part of *time.Timer the proxy uses.
type stopper interface {
	Stop() bool
}

type realClock struct{}

func (realClock) AfterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }
