package nginx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// heldStarts returns conf changed so that a master loading it waits in init_by_lua, before it installs
// its signal handlers and listens (as a master loading a very large configuration does), until the
// returned release file exists; only a master that finds the returned flag file does (and removes it).
// nginx -t is never held and never removes the file. (io.popen, not os.execute: system() ignores
// SIGQUIT while it waits.)
func heldStarts(t *testing.T, conf []byte, paths Paths) (held []byte, flag, release string) {
	t.Helper()
	flag = filepath.Join(paths.Prefix, "hold-start")
	release = filepath.Join(paths.Prefix, "release-start")
	lua := fmt.Sprintf(`init_by_lua_block {
		local f = io.open("/proc/self/cmdline")
		local args = f and f:read("*a") or ""
		if f then f:close() end
		if not args:find(string.char(0) .. "-t" .. string.char(0), 1, true) and os.remove(%q) then
			while true do
				local released = io.open(%q)
				if released then
					released:close()
					break
				end
				io.popen("sleep 0.05"):close()
			end
		end
`, flag, release)
	out := strings.Replace(string(conf), "init_by_lua_block {\n", lua, 1)
	if out == string(conf) {
		t.Fatal("no init_by_lua_block in the rendered configuration")
	}
	return []byte(out), flag, release
}

// fatalWorkers returns conf changed so that every worker exits with code 2 as it starts, as after a
// failed worker initialization: the master logs that it cannot respawn them and runs on without
// workers, answering nothing.
func fatalWorkers(t *testing.T, conf []byte) []byte {
	t.Helper()
	out := strings.Replace(string(conf), "init_worker_by_lua_block {\n", "init_worker_by_lua_block {\n\t\tos.exit(2)\n", 1)
	if out == string(conf) {
		t.Fatal("no init_worker_by_lua_block in the rendered configuration")
	}
	return []byte(out)
}

// startConfig is the configuration of the start tests: plain HTTP on free ports, in a new prefix.
func startConfig(t *testing.T) (Paths, RenderConfig) {
	t.Helper()
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.HTTPSPort = 0
	return paths, cfg
}

// nextConfig renders a configuration that differs from cfg's (so applying it reloads NGINX).
func nextConfig(t *testing.T, cfg RenderConfig) ([]byte, string) {
	t.Helper()
	cfg.WorkerConnections = 512
	return mustRenderHash(t, Model{}, cfg)
}

// heldRuntime returns a Runtime for cfg with the settings of rc that are set, and the tests' defaults
// otherwise; NGINX starts at the first Apply.
func heldRuntime(t *testing.T, cfg RenderConfig, rc RuntimeConfig) *Runtime {
	t.Helper()
	rc.Process.Paths = cfg.Paths
	if rc.Process.Log == nil {
		rc.Process.Log = zaptest.NewLogger(t)
	}
	rc.Process.MinBackoff = 10 * time.Millisecond
	rc.Process.MaxBackoff = 100 * time.Millisecond
	rc.StatusPort, rc.StatusToken = cfg.StatusPort, cfg.StatusToken
	return newTestRuntime(t, rc)
}

// newTestRuntime returns NewRuntime(rc), stopped when the test ends.
func newTestRuntime(t *testing.T, rc RuntimeConfig) *Runtime {
	t.Helper()
	rt, err := NewRuntime(rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
	})
	return rt
}

// observedLog is a test logger whose messages can also be searched.
type observedLog struct {
	log  *zap.Logger
	logs *observer.ObservedLogs
}

func observed(t *testing.T) observedLog {
	core, logs := observer.New(zap.InfoLevel)
	return observedLog{log: zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)), logs: logs}
}

// has reports whether a message containing text was logged.
func (o observedLog) has(text string) bool {
	for _, e := range o.logs.All() {
		if strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

func createFile(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(name, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// TestRuntimeSlowFirstStartReportsReady: a first start that takes longer than ConfirmTimeout fails its
// Apply, but once NGINX answers, OnReady still fires (the caller pushes endpoints only after it), and the
// next Apply makes the configuration live without a restart. The start is held until the first Apply
// failed, so no bound depends on the machine's speed but the reload's ConfirmTimeout, which is generous.
func TestRuntimeSlowFirstStartReportsReady(t *testing.T) {
	requireNginx(t)
	paths, cfg := startConfig(t)
	var ready atomic.Uint64
	rt := heldRuntime(t, cfg, RuntimeConfig{ConfirmTimeout: 5 * time.Second, OnReady: func(starts uint64) { ready.Store(starts) }})
	ctx := context.Background()

	conf, hash := mustRenderHash(t, Model{}, cfg)
	conf, flag, release := heldStarts(t, conf, paths)
	createFile(t, flag)
	if err := rt.Apply(ctx, conf, hash); err == nil {
		t.Fatal("Apply succeeded although NGINX could not answer within ConfirmTimeout")
	}
	if ready.Load() != 0 || exists(flag) {
		t.Fatalf("OnReady %d, flag file there %v: want a start held in init_by_lua", ready.Load(), exists(flag))
	}
	createFile(t, release)
	eventually(t, "OnReady for the slow first start", 30*time.Second, func() bool { return ready.Load() == 1 })
	if err := rt.Ready(); err == nil {
		t.Error("ready without a configuration confirmed live")
	}

	if err := rt.Apply(ctx, conf, hash); err != nil {
		t.Fatalf("Apply once NGINX answers: %v", err)
	}
	if err := rt.Ready(); err != nil {
		t.Errorf("not ready after Apply: %v", err)
	}
	if rt.Process().Starts() != 1 || rt.Process().Restarts() != 0 {
		t.Errorf("starts %d, restarts %d; want the first start to have survived", rt.Process().Starts(), rt.Process().Restarts())
	}
}

// TestRuntimeReloadWaitsForALoadingMaster: after a crash, the restarted NGINX is loading its configuration
// (a SIGHUP would kill it) when a new configuration arrives. The runtime is not ready until the new
// master answered and OnReady returned, and Apply waits for that before it reloads.
func TestRuntimeReloadWaitsForALoadingMaster(t *testing.T) {
	requireNginx(t)
	paths, cfg := startConfig(t)
	var ready atomic.Uint64
	secondGate := make(chan struct{})
	logs := observed(t)
	rt := heldRuntime(t, cfg, RuntimeConfig{Process: ProcessConfig{Log: logs.log}, OnReady: func(starts uint64) {
		if starts == 2 {
			<-secondGate
		}
		ready.Store(starts)
	}})
	ctx := context.Background()

	conf, hash := mustRenderHash(t, Model{}, cfg)
	conf, flag, release := heldStarts(t, conf, paths)
	if err := rt.Apply(ctx, conf, hash); err != nil {
		t.Fatal(err)
	}
	eventually(t, "OnReady for the first start", 5*time.Second, func() bool { return ready.Load() == 1 })

	createFile(t, flag)
	if err := syscall.Kill(rt.Process().PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restarted master to load its configuration", 10*time.Second, func() bool {
		return rt.Process().Starts() == 2 && !exists(flag)
	})
	if err := rt.Ready(); err == nil {
		t.Error("ready while the restarted NGINX has not answered (its shared dicts are empty)")
	}

	// A new configuration arrives while the restarted master is held in init_by_lua.
	conf2, hash2 := nextConfig(t, cfg)
	applied := make(chan error, 1)
	go func() { applied <- rt.Apply(ctx, conf2, hash2) }()
	eventually(t, "Apply to wait for the loading master", 30*time.Second, func() bool { return logs.has("nginx is still loading its configuration") })
	createFile(t, release)
	close(secondGate)
	if err := <-applied; err != nil {
		t.Fatalf("Apply while the restarted master loads: %v", err)
	}
	if got := rt.Process().Restarts(); got != 1 {
		t.Errorf("restarts %d, want 1: the reload killed the loading master", got)
	}
	// Apply confirmed hash2 from a new worker; a status request may still reach an old worker that is
	// finishing its connections for a moment (under load, seen in CI), so the hash is polled.
	eventually(t, "the live hash to be the new configuration's", 5*time.Second, func() bool {
		live, err := rt.Client().ConfigHash(ctx)
		return err == nil && live == hash2
	})
	if err := rt.Ready(); err != nil || ready.Load() != 2 {
		t.Errorf("after the reload: ready %v, OnReady %d", err, ready.Load())
	}
}

// TestRuntimeReplacesAStuckStart: a master whose workers exited fatally runs on without workers and never
// answers. The next Apply must not wait for it forever: it starts NGINX again with the new configuration
// (a restart), which then goes live.
func TestRuntimeReplacesAStuckStart(t *testing.T) {
	requireNginx(t)
	_, cfg := startConfig(t)
	var ready atomic.Uint64
	rt := heldRuntime(t, cfg, RuntimeConfig{ConfirmTimeout: 5 * time.Second, OnReady: func(starts uint64) { ready.Store(starts) }})

	broken, brokenHash := mustRenderHash(t, Model{}, cfg)
	broken = fatalWorkers(t, broken)
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := rt.Apply(short, broken, brokenHash); err == nil {
		t.Fatal("Apply of a configuration whose workers exit succeeded")
	}
	eventually(t, "the master to report its workers lost", 30*time.Second, func() bool {
		return strings.Contains(rt.Process().RecentOutput(), "cannot be respawned")
	})
	if !rt.Process().Running() || ready.Load() != 0 {
		t.Fatalf("running %v, OnReady %d: want a master that runs without answering", rt.Process().Running(), ready.Load())
	}

	fixed, fixedHash := nextConfig(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := rt.Apply(ctx, fixed, fixedHash); err != nil {
		t.Fatalf("Apply of a fixed configuration after a stuck start: %v", err)
	}
	if live, err := rt.Client().ConfigHash(ctx); err != nil || live != fixedHash {
		t.Errorf("live hash %q (%v), want %q", live, err, fixedHash)
	}
	if err := rt.Ready(); err != nil {
		t.Errorf("not ready after the fixed configuration went live: %v", err)
	}
	if starts, restarts := rt.Process().Starts(), rt.Process().Restarts(); starts != 2 || restarts != 1 || ready.Load() != 2 {
		t.Errorf("starts %d, restarts %d, OnReady %d; want the stuck start replaced by one restart", starts, restarts, ready.Load())
	}
	if err := rt.Alive(); err != nil {
		t.Errorf("not alive after the restart: %v", err)
	}
}

// TestRuntimeReplacesAStartSilentForStartTimeout: a master that never gets past loading its configuration
// counts as stuck after StartTimeout; the next Apply replaces it.
func TestRuntimeReplacesAStartSilentForStartTimeout(t *testing.T) {
	requireNginx(t)
	paths, cfg := startConfig(t)
	rt := heldRuntime(t, cfg, RuntimeConfig{ConfirmTimeout: 10 * time.Second, StartTimeout: 2 * time.Second})

	conf, hash := mustRenderHash(t, Model{}, cfg)
	held, flag, _ := heldStarts(t, conf, paths) // never released
	createFile(t, flag)
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := rt.Apply(short, held, hash); err == nil {
		t.Fatal("Apply of a start that never answers succeeded")
	}

	conf2, hash2 := nextConfig(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := rt.Apply(ctx, conf2, hash2); err != nil {
		t.Fatalf("Apply after a start that never answered: %v", err)
	}
	if live, err := rt.Client().ConfigHash(ctx); err != nil || live != hash2 || rt.Process().Restarts() != 1 {
		t.Errorf("live hash %q (%v), restarts %d; want %q after one restart", live, err, rt.Process().Restarts(), hash2)
	}
	// The start that replaced it answered: the next slow start gets the plain timeout again.
	if got := rt.startTimeout(); got != 2*time.Second {
		t.Errorf("start timeout after an answered start: %s, want 2s", got)
	}
}

// TestRuntimeBacksOffForSlowStarts: each start replaced in a row for being silent doubles the time the
// next one gets, so a configuration that loads slower than the start timeout is not replaced forever.
func TestRuntimeBacksOffForSlowStarts(t *testing.T) {
	requireNginx(t)
	paths, cfg := startConfig(t)
	rt := heldRuntime(t, cfg, RuntimeConfig{ConfirmTimeout: 10 * time.Second, StartTimeout: time.Second})
	conf, hash := mustRenderHash(t, Model{}, cfg)
	held, flag, release := heldStarts(t, conf, paths)
	createFile(t, flag)
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := rt.Apply(short, held, hash); err == nil {
		t.Fatal("Apply of a start that never answers succeeded")
	}
	// The next Apply replaces the silent start with another held one, which is released afterwards.
	createFile(t, flag)
	conf2, hash2 := nextConfig(t, cfg)
	held2, _, _ := heldStarts(t, conf2, paths)
	done := make(chan error, 1)
	ctx, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	go func() { done <- rt.Apply(ctx, held2, hash2) }()
	eventually(t, "the silent start to be replaced", 30*time.Second, func() bool { return rt.Process().Restarts() == 1 })
	if got := rt.startTimeout(); got != 2*time.Second {
		t.Errorf("start timeout after one silent start was replaced: %s, want 2s (doubled)", got)
	}
	createFile(t, release)
	if err := <-done; err != nil {
		t.Fatalf("Apply of the released start: %v", err)
	}
	if got := rt.startTimeout(); got != time.Second {
		t.Errorf("start timeout after the start answered: %s, want 1s again", got)
	}
}

// TestRuntimeNotAliveWhenStuck: with no Apply coming to replace it, a stuck start fails the liveness
// check, so that the kubelet restarts the pod.
func TestRuntimeNotAliveWhenStuck(t *testing.T) {
	requireNginx(t)
	_, cfg := startConfig(t)
	rt := heldRuntime(t, cfg, RuntimeConfig{ConfirmTimeout: time.Second})
	if err := rt.Alive(); err != nil {
		t.Fatalf("not alive before the first start: %v", err)
	}
	conf, hash := mustRenderHash(t, Model{}, cfg)
	if err := rt.Apply(context.Background(), fatalWorkers(t, conf), hash); err == nil {
		t.Fatal("Apply of a configuration whose workers exit succeeded")
	}
	eventually(t, "the liveness check to fail", 60*time.Second, func() bool { return rt.Alive() != nil })
	if err := rt.Alive(); !strings.Contains(err.Error(), "cannot be respawned") {
		t.Errorf("Alive: %v, want the reason", err)
	}
}

// TestRuntimeRevertsAReloadWhoseWorkersDie: a configuration that passes nginx -t but whose workers exit
// fatally is reported at once, and NGINX is taken back to the last good configuration: without that the
// master, having stopped the previous workers, would run on without any and serve nothing.
func TestRuntimeRevertsAReloadWhoseWorkersDie(t *testing.T) {
	requireNginx(t)
	_, cfg := startConfig(t)
	rt := heldRuntime(t, cfg, RuntimeConfig{ConfirmTimeout: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	good, goodHash := mustRenderHash(t, Model{}, cfg)
	if err := rt.Apply(ctx, good, goodHash); err != nil {
		t.Fatal(err)
	}

	next, nextHash := nextConfig(t, cfg)
	err := rt.Apply(ctx, fatalWorkers(t, next), nextHash)
	if err == nil || !strings.Contains(err.Error(), "cannot be respawned") {
		t.Fatalf("Apply of a configuration whose workers exit: %v, want an error naming the lost workers", err)
	}
	if live, err := rt.Client().ConfigHash(ctx); err != nil || live != goodHash {
		t.Fatalf("after the failed reload NGINX answers %q (%v), want the last good configuration %q", live, err, goodHash)
	}
	if err := rt.Ready(); err != nil {
		t.Errorf("not ready on the last good configuration: %v", err)
	}
	if restarts := rt.Process().Restarts(); restarts != 0 {
		t.Errorf("%d restarts: a reload back to the good configuration needs none", restarts)
	}
}
