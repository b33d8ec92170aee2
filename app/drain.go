package app

import (
	"errors"
	"sync/atomic"

	"go.uber.org/fx"

	"github.com/ingress-reactor/ingress-reactor/modules"
)

// Drain is the shutdown state readiness reports. After SIGTERM, Run begins draining: /readyz fails so
// that Endpoints, kube-proxy and load balancers stop sending new connections, while NGINX keeps serving
// for --shutdown-grace-period before anything stops.
type Drain struct{ draining atomic.Bool }

// NewDrain returns the shutdown state and its readiness check.
func NewDrain() (*Drain, modules.ReadyCheck) {
	d := &Drain{}
	return d, modules.ReadyCheck{Name: "shutdown", Check: d.check}
}

// Begin makes readiness fail from now on.
func (d *Drain) Begin() { d.draining.Store(true) }

func (d *Drain) check() error {
	if d.draining.Load() {
		return errors.New("shutting down: no new connections, please")
	}
	return nil
}

// drainModule provides *Drain and puts its check into the readiness group.
var drainModule = fx.Provide(fx.Annotate(NewDrain, fx.ResultTags(``, `group:"readyz"`)))
