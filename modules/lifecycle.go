package modules

import (
	"context"

	"go.uber.org/fx"
)

// Runnable is a module's background work. Start returns at once and starts goroutines that run until ctx
// ends; Stop stops them, letting in-flight work finish within its context.
type Runnable interface {
	Start(ctx context.Context)
	Stop(ctx context.Context) error
}

// Bind ties r to the application's lifecycle: Start at OnStart, with a context that OnStop cancels once
// Stop has returned, so work in flight (an API write, an NGINX reload) finishes within Stop's deadline
// instead of being cut off. A nil Lifecycle (a module built without fx) binds nothing; the caller starts
// and stops r.
func Bind(lc fx.Lifecycle, r Runnable) {
	if lc == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { r.Start(ctx); return nil },
		OnStop: func(stopCtx context.Context) error {
			defer cancel()
			return r.Stop(stopCtx)
		},
	})
}
