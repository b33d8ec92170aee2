package app

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/ingress-reactor/ingress-reactor/modules/statusleader"
	"github.com/ingress-reactor/ingress-reactor/status"
)

// parseStatusFlags applies args to the defaults through bindStatusFlags only, so these tests do not
// depend on how BindFlags is assembled.
func parseStatusFlags(t *testing.T, args ...string) Config {
	t.Helper()
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	bindStatusFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return cfg
}

func TestStatusFlagsValidate(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"defaults":                     {},
		"publish service":              {args: []string{"--publish-service=ingress/lb"}},
		"bad publish service":          {args: []string{"--publish-service=lb"}, wantErr: "--publish-service"},
		"addresses":                    {args: []string{"--publish-status-address=192.0.2.1, lb.example.com"}},
		"bad address":                  {args: []string{"--publish-status-address=192.0.2.1,bad_name"}, wantErr: "--publish-status-address"},
		"interval in seconds":          {args: []string{"--status-update-interval=90"}},
		"interval too short":           {args: []string{"--status-update-interval=100ms"}, wantErr: "--status-update-interval"},
		"empty election id":            {args: []string{"--election-id="}, wantErr: "--election-id"},
		"election id not a Lease name": {args: []string{"--election-id=My_Leader"}, wantErr: "not a valid Lease name"},
		"short but consistent timings": {args: []string{"--election-lease-duration=3s", "--election-renew-deadline=2s", "--election-retry-period=500ms"}},
		"ingress-nginx's --election-ttl": {
			args: []string{"--election-ttl=3s", "--election-renew-deadline=2s", "--election-retry-period=500ms"},
		},
		"sub-second lease":           {args: []string{"--election-lease-duration=500ms", "--election-renew-deadline=400ms", "--election-retry-period=100ms"}, wantErr: "--election-lease-duration must be at least 1s"},
		"renew deadline not shorter": {args: []string{"--election-renew-deadline=30s"}, wantErr: "--election-renew-deadline"},
		"retry period too long":      {args: []string{"--election-retry-period=17s"}, wantErr: "--election-retry-period"},
		"election checks skipped when leader election is off": {
			args: []string{"--disable-leader-election", "--election-id=", "--election-retry-period=0s"},
		},
		"election checks skipped when status is off": {args: []string{"--update-status=false", "--election-id="}},
		"address syntax checked even when status is off": {
			args: []string{"--update-status=false", "--publish-status-address=not_valid"}, wantErr: "--publish-status-address",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := parseStatusFlags(t, tc.args...)
			errs := validateStatus(&cfg)
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Fatalf("want no error, got %v", errs)
			case tc.wantErr != "" && !strings.Contains(joinErrors(errs), tc.wantErr):
				t.Fatalf("want an error containing %q, got %v", tc.wantErr, errs)
			}
		})
	}
}

func joinErrors(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error())
		b.WriteString("\n")
	}
	return b.String()
}

func TestStatusUpdateIntervalTakesSecondsOrDuration(t *testing.T) {
	for arg, want := range map[string]time.Duration{"90": 90 * time.Second, "2m": 2 * time.Minute, "45s": 45 * time.Second} {
		if got := parseStatusFlags(t, "--status-update-interval="+arg).StatusUpdateInterval; got != want {
			t.Errorf("--status-update-interval=%s gives %s, want %s", arg, got, want)
		}
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	bindStatusFlags(fs, &cfg)
	if err := fs.Parse([]string{"--status-update-interval=soon"}); err == nil {
		t.Error("--status-update-interval=soon was accepted")
	}
	if got := fs.Lookup("status-update-interval").DefValue; got != "1m0s" {
		t.Errorf("default shown as %q, want 1m0s", got)
	}
}

func TestStatusModulesFollowUpdateStatus(t *testing.T) {
	if got := statusModules(parseStatusFlags(t, "--update-status=false")); got != nil {
		t.Errorf("--update-status=false still adds %d options", len(got))
	}
	if got := statusModules(parseStatusFlags(t)); len(got) == 0 {
		t.Error("--update-status (the default) adds no module")
	}
}

func TestStatusPodFromEnv(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ingress")
	t.Setenv("POD_NAME", "ctl-abc")
	if got := statusPodFromEnv(); got.Namespace != "ingress" || got.Name != "ctl-abc" {
		t.Errorf("statusPodFromEnv = %v, want ingress/ctl-abc", got)
	}
	t.Setenv("POD_NAMESPACE", "")
	// Outside a pod there is no service account file, so the namespace falls back to "default".
	if got := statusPodFromEnv(); got.Namespace == "" {
		t.Error("no namespace without POD_NAMESPACE; the Lease would have none")
	}
}

func TestElectionIdentityIsUniquePerProcess(t *testing.T) {
	a, b := electionIdentity("ctl-abc"), electionIdentity("ctl-abc")
	if a == b {
		t.Errorf("two processes with one POD_NAME got the same identity %q; both would believe they lead", a)
	}
	if !strings.HasPrefix(a, "ctl-abc_") {
		t.Errorf("identity %q does not start with the pod name", a)
	}
	if electionIdentity("") == "" {
		t.Error("empty identity without POD_NAME")
	}
}

func TestLocalModePublishesLoopback(t *testing.T) {
	var got []status.Address
	cfg := parseStatusFlags(t)
	cfg.LocalManifests = "examples/local"
	opts := statusModules(cfg)
	if len(opts) == 0 {
		t.Fatal("no status module in local mode")
	}
	app := fx.New(fx.NopLogger, opts[0], fx.Invoke(func(o statusleader.Options) { got = o.Discovery.Static }))
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []status.Address{{IP: "127.0.0.1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("local mode publishes %v, want %v", got, want)
	}
}
