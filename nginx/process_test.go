package nginx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// fakeNginx writes a shell script that stands in for nginx and returns its path.
func fakeNginx(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nginx")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestProcessGivesUpOnQuickDeaths(t *testing.T) {
	var exits atomic.Int32
	p := NewProcess(ProcessConfig{
		Binary:      fakeNginx(t, `echo "nginx: [emerg] bind() to 0.0.0.0:80 failed (98: Address already in use)" >&2; exit 1`),
		Paths:       Paths{Prefix: t.TempDir()},
		Log:         zaptest.NewLogger(t),
		MinBackoff:  time.Millisecond,
		MaxBackoff:  4 * time.Millisecond,
		MaxFailures: 3,
		OnExit:      func(error) { exits.Add(1) },
	})
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	// 1 start + 3 restarts, then the Process stays down.
	eventually(t, "give up", 10*time.Second, func() bool { return exits.Load() == 4 && p.Starts() == 4 && !p.Running() && p.GaveUp() })
	if p.Restarts() != 3 {
		t.Errorf("restarts = %d, want 3", p.Restarts())
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("Err() = %v, want nginx's message", err)
	}
	if err := p.Reload(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Reload of a stopped process: %v", err)
	}
	// A new Start is allowed after giving up.
	if err := p.Start(); err != nil {
		t.Errorf("Start after giving up: %v", err)
	}
	eventually(t, "second give up", 10*time.Second, func() bool { return p.Starts() == 8 && !p.Running() })
}

func TestProcessStop(t *testing.T) {
	tests := map[string]struct {
		script  string
		timeout time.Duration
		wantErr bool
	}{
		"graceful: SIGQUIT ends it":                     {script: `trap 'exit 0' QUIT; while true; do sleep 0.05; done`, timeout: 10 * time.Second},
		"ignores SIGQUIT: killed when the context ends": {script: `trap '' QUIT; while true; do sleep 0.05; done`, timeout: 300 * time.Millisecond, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var starts atomic.Uint64
			p := NewProcess(ProcessConfig{Binary: fakeNginx(t, tc.script), Paths: Paths{Prefix: t.TempDir()}, Log: zaptest.NewLogger(t),
				OnStart: func(n uint64) { starts.Store(n) }})
			if err := p.Stop(context.Background()); err != nil {
				t.Fatalf("Stop before Start: %v", err)
			}
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			if err := p.Start(); err == nil {
				t.Error("a second Start while running succeeded")
			}
			if starts.Load() != 1 || !p.Running() || p.PID() == 0 {
				t.Fatalf("after Start: starts %d, running %v, pid %d", starts.Load(), p.Running(), p.PID())
			}
			// Give the script time to install its trap: poll until its shell is sleeping in the loop.
			pid := p.PID()
			eventually(t, "script running", 5*time.Second, func() bool {
				children, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
				return len(strings.TrimSpace(string(children))) > 0
			})
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			err := p.Stop(ctx)
			if (err != nil) != tc.wantErr {
				t.Errorf("Stop: %v, want error %v", err, tc.wantErr)
			}
			if p.Running() {
				t.Error("running after Stop")
			}
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
				if status, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); !strings.Contains(string(status), ") Z ") {
					t.Errorf("process %d still alive after Stop", pid)
				}
			}
			if p.Restarts() != 0 {
				t.Errorf("Stop counted as a crash: %d restarts", p.Restarts())
			}
		})
	}
}

func TestConfigTest(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	tests := map[string]struct {
		conf    string
		wantErr string
	}{
		"valid":             {conf: "events {}\nhttp {}\n"},
		"unknown directive": {conf: "events {}\nhttp { nope on; }\n", wantErr: `nginx -t: [emerg] unknown directive "nope" in `},
		"unbalanced":        {conf: "events {\n", wantErr: `nginx -t: [emerg] unexpected end of file, expecting "}" in `},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(paths.Prefix, "t.conf")
			if err := os.WriteFile(file, []byte(tc.conf), 0o600); err != nil {
				t.Fatal(err)
			}
			err := Test(context.Background(), "", paths, file)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestProcessRestart: restart replaces the master of a given start (and its process group) at once,
// counted as a restart; a master that reported a fatal worker exit is marked for its start only.
func TestProcessRestart(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started-once")
	// The first start reports a worker that cannot be respawned, as NGINX does; later ones do not.
	script := `if [ ! -e ` + marker + ` ]; then : > ` + marker + `; echo "[alert] 7#7: worker process 8 exited with fatal code 2 and cannot be respawned" >&2; fi
sleep 1000 & wait`
	p := NewProcess(ProcessConfig{Binary: fakeNginx(t, script), Paths: Paths{Prefix: t.TempDir()}, Log: zaptest.NewLogger(t),
		MinBackoff: time.Hour}) // an unasked-for restart would not come within the test
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
	})
	eventually(t, "the fatal worker exit to be noticed", 10*time.Second, func() bool { return p.workersLost(1) })
	first := p.PID()
	if err := p.restart(2); !errors.Is(err, errStartChanged) {
		t.Errorf("restart of another start: %v, want errStartChanged", err)
	}
	if err := p.restart(1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the next start", 10*time.Second, func() bool { return p.Starts() == 2 && p.Running() })
	if lost := p.workersLost(2); lost || p.Restarts() != 1 || p.PID() == first {
		t.Errorf("after restart: workers lost %v, restarts %d, pid %d (was %d)", lost, p.Restarts(), p.PID(), first)
	}
}
