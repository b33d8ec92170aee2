package modules

import (
	"context"
	"testing"

	"go.uber.org/fx/fxtest"
)

// stopProbe records whether the Start context was still live while Stop ran.
type stopProbe struct {
	ctx             context.Context
	liveDuringStop  bool
	stopCalledTimes int
}

func (p *stopProbe) Start(ctx context.Context) { p.ctx = ctx }

func (p *stopProbe) Stop(context.Context) error {
	p.stopCalledTimes++
	p.liveDuringStop = p.ctx.Err() == nil
	return nil
}

// TestBindCancelsAfterStop: work in flight keeps its context while Stop drains it; the context ends once
// Stop has returned, so goroutines that wait on it end too.
func TestBindCancelsAfterStop(t *testing.T) {
	lc := fxtest.NewLifecycle(t)
	p := &stopProbe{}
	Bind(lc, p)
	lc.RequireStart()
	if p.ctx == nil || p.ctx.Err() != nil {
		t.Fatalf("Start context after OnStart: %v", p.ctx)
	}
	lc.RequireStop()
	if p.stopCalledTimes != 1 {
		t.Fatalf("Stop called %d times, want 1", p.stopCalledTimes)
	}
	if !p.liveDuringStop {
		t.Error("the Start context was cancelled before Stop ran: in-flight work is cut off instead of drained")
	}
	if p.ctx.Err() == nil {
		t.Error("the Start context is still live after OnStop")
	}
}
