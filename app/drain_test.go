package app

import (
	"flag"
	"testing"

	"go.uber.org/fx"

	"github.com/ingress-reactor/ingress-reactor/modules"
)

// TestDrainFailsReadiness: the drain check is in the readiness group and fails once draining begins.
func TestDrainFailsReadiness(t *testing.T) {
	var got struct {
		fx.In
		Drain  *Drain
		Checks []modules.ReadyCheck `group:"readyz"`
	}
	app := fx.New(fx.NopLogger, drainModule, fx.Populate(&got))
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got.Checks) != 1 || got.Checks[0].Name != "shutdown" {
		t.Fatalf("readiness checks %v, want the shutdown check", got.Checks)
	}
	if err := got.Checks[0].Check(); err != nil {
		t.Fatalf("ready before draining: %v", err)
	}
	got.Drain.Begin()
	if err := got.Checks[0].Check(); err == nil {
		t.Fatal("still ready after Begin")
	}
}

func TestShutdownGracePeriodFlag(t *testing.T) {
	for arg, want := range map[string]string{"15": "15s", "1m30s": "1m30s", "0": "0s"} {
		c := DefaultConfig()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		BindFlags(fs, &c)
		if err := fs.Parse([]string{"--shutdown-grace-period=" + arg}); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if c.ShutdownGracePeriod.String() != want {
			t.Errorf("--shutdown-grace-period=%s: %v, want %s", arg, c.ShutdownGracePeriod, want)
		}
	}
	c := DefaultConfig()
	c.ShutdownGracePeriod = -1
	if err := c.Validate(); err == nil {
		t.Error("a negative grace period is accepted")
	}
}
