package nginx

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// fakeRuntime returns a Runtime whose masters are fakeMasters and whose status server is faked: the
// current master answers unless it is silent, with nginx.conf's content as its configuration hash (so
// a test applies a configuration whose hash is its own text). "nginx -t" is a script that accepts all.
func fakeRuntime(t *testing.T, l *fakeLauncher, silent func(m *fakeMaster) bool, rc RuntimeConfig) *Runtime {
	t.Helper()
	paths := nginxDir(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		l.mu.Lock()
		var m *fakeMaster
		if n := len(l.masters); n > 0 {
			m = l.masters[n-1]
		}
		l.mu.Unlock()
		if m == nil || silent(m) {
			http.Error(w, "no workers", http.StatusServiceUnavailable)
			return
		}
		if req.URL.Path == "/configuration/hash" {
			conf, _ := os.ReadFile(paths.ConfFile())
			_, _ = w.Write(conf)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	rc.Process.Paths = paths
	rc.Process.Binary = fakeNginx(t, "exit 0")
	rc.Process.Log = zaptest.NewLogger(t)
	rc.Process.MinBackoff, rc.Process.MaxBackoff = time.Millisecond, 10*time.Millisecond
	rc.Process.launch = l.launch
	rc.StatusPort = ln.Addr().(*net.TCPAddr).Port
	return newTestRuntime(t, rc)
}

// TestRuntimeOnFakeMasterReplacesAStartWhoseTreeLostItsWorkers: a master whose process tree shows it
// loaded and without workers, with no log line saying so, counts as stuck after ConfirmTimeout: the next
// Apply replaces it, and fails the liveness check until then.
func TestRuntimeOnFakeMasterReplacesAStartWhoseTreeLostItsWorkers(t *testing.T) {
	l := &fakeLauncher{}
	l.setup = func(m *fakeMaster) {
		if m.pid == 1000 { // the first master lost its workers
			m.tree = processTree{Known: true, Loaded: true}
		}
	}
	var ready atomic.Uint64
	rt := fakeRuntime(t, l, func(m *fakeMaster) bool { return m.pid == 1000 },
		RuntimeConfig{ConfirmTimeout: 200 * time.Millisecond, StartTimeout: time.Hour, OnReady: func(n uint64) { ready.Store(n) }})

	err := rt.Apply(context.Background(), []byte("v1"), "v1")
	if err == nil || !strings.Contains(err.Error(), "cannot be respawned") {
		t.Fatalf("Apply on a master without workers: %v, want its workers reported lost", err)
	}
	eventually(t, "the liveness check to fail", 30*time.Second, func() bool { return rt.Alive() != nil })
	if err := rt.Ready(); err == nil {
		t.Error("ready without a configuration live")
	}

	if err := rt.Apply(context.Background(), []byte("v2"), "v2"); err != nil {
		t.Fatalf("Apply after the stuck start: %v", err)
	}
	if got := l.master(1).sent(); len(got) != 1 || got[0] != syscall.SIGKILL {
		t.Errorf("signals to the stuck master: %v, want SIGKILL (no SIGHUP to a master that never answered)", got)
	}
	if rt.Process().Restarts() != 1 || ready.Load() != 2 || rt.LiveHash() != "v2" {
		t.Errorf("restarts %d, OnReady %d, live %q; want the stuck start replaced once and v2 live", rt.Process().Restarts(), ready.Load(), rt.LiveHash())
	}
	if err := rt.Alive(); err != nil {
		t.Errorf("not alive after the replacement: %v", err)
	}
	// Lost workers are not a slow load: the next start gets the plain start timeout.
	if got := rt.startTimeout(); got != time.Hour {
		t.Errorf("start timeout %s, want 1h", got)
	}
}

// TestRuntimeOnFakeMasterLifecycle walks one master through starting, serving, reloading and gone.
func TestRuntimeOnFakeMasterLifecycle(t *testing.T) {
	l := &fakeLauncher{}
	var silent atomic.Bool
	silent.Store(true)
	var ready atomic.Uint64
	rt := fakeRuntime(t, l, func(*fakeMaster) bool { return silent.Load() },
		RuntimeConfig{ConfirmTimeout: 10 * time.Second, OnReady: func(n uint64) { ready.Store(n) }})
	phaseIs := func(want phase) func() bool {
		return func() bool { lc, _ := rt.snapshot(); return lc.phase == want }
	}

	applied := make(chan error, 1)
	go func() { applied <- rt.Apply(context.Background(), []byte("v1"), "v1") }()
	eventually(t, "starting", 10*time.Second, phaseIs(phaseStarting))
	if err := rt.Ready(); err == nil {
		t.Error("ready while starting")
	}
	silent.Store(false)
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	if lc, _ := rt.snapshot(); lc.phase != phaseServing || ready.Load() != 1 || rt.Ready() != nil {
		t.Fatalf("after the first Apply: %s, OnReady %d, ready %v; want serving", lc.phase, ready.Load(), rt.Ready())
	}

	if err := rt.Apply(context.Background(), []byte("v2"), "v2"); err != nil {
		t.Fatal(err)
	}
	if got := l.master(1).sent(); len(got) != 1 || got[0] != syscall.SIGHUP {
		t.Errorf("signals %v, want one SIGHUP", got)
	}
	if lc, _ := rt.snapshot(); lc.phase != phaseServing {
		t.Errorf("after the reload: %s, want serving", lc.phase)
	}

	l.master(1).exit(errors.New("segfault"))
	eventually(t, "the restarted master to serve", 10*time.Second, func() bool { return ready.Load() == 2 && rt.Ready() == nil })

	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if lc, _ := rt.snapshot(); lc.phase != phaseGone || !lc.stopped || !errors.Is(rt.Ready(), ErrNotRunning) {
		t.Errorf("after Stop: %+v, ready %v", lc, rt.Ready())
	}
	if err := rt.Apply(context.Background(), []byte("v3"), "v3"); !errors.Is(err, ErrStopped) {
		t.Errorf("Apply after Stop: %v, want ErrStopped", err)
	}
}

// TestRuntimeOnFakeMasterGivesUpReplacingAStuckStart: when NGINX cannot be started again after a stuck
// start was replaced, until the Process gives up, Apply says so at once rather than waiting out its
// bounds.
func TestRuntimeOnFakeMasterGivesUpReplacingAStuckStart(t *testing.T) {
	l := &fakeLauncher{failAfter: 1}
	rt := fakeRuntime(t, l, func(*fakeMaster) bool { return true },
		RuntimeConfig{ConfirmTimeout: time.Hour, StartTimeout: time.Millisecond, Process: ProcessConfig{MaxFailures: 2}})
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := rt.Apply(short, []byte("v1"), "v1"); err == nil {
		t.Fatal("Apply on a silent master succeeded")
	}
	err := rt.Apply(context.Background(), []byte("v2"), "v2")
	if err == nil || !strings.Contains(err.Error(), "no longer restarted") {
		t.Fatalf("Apply while the replacements keep dying: %v, want the give-up", err)
	}
	if lc, _ := rt.snapshot(); lc.phase != phaseGone || !lc.gaveUp || !rt.Process().GaveUp() {
		t.Errorf("lifecycle %+v, process gave up %v; want gone after giving up", lc, rt.Process().GaveUp())
	}
}
