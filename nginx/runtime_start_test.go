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

	"go.uber.org/zap/zaptest"
)

// slowStarts returns conf changed so that a master loading it spends the given seconds in init_by_lua,
// before it installs its signal handlers and listens (as a master loading a very large configuration
// does), each time after the returned flag file was created: the master that sees the file removes it.
// nginx -t is never slowed down and never removes the file. (io.popen, not os.execute: system() ignores
// SIGQUIT while it waits.)
func slowStarts(t *testing.T, conf []byte, paths Paths, seconds int) (slow []byte, flag string) {
	t.Helper()
	flag = filepath.Join(paths.Prefix, "slow-start")
	lua := fmt.Sprintf(`init_by_lua_block {
		local f = io.open("/proc/self/cmdline")
		local args = f and f:read("*a") or ""
		if f then f:close() end
		if not args:find(string.char(0) .. "-t" .. string.char(0), 1, true) and os.remove(%q) then
			io.popen("sleep %d"):close()
		end
`, flag, seconds)
	out := strings.Replace(string(conf), "init_by_lua_block {\n", lua, 1)
	if out == string(conf) {
		t.Fatal("no init_by_lua_block in the rendered configuration")
	}
	return []byte(out), flag
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
// next Apply makes the configuration live without a restart.
func TestRuntimeSlowFirstStartReportsReady(t *testing.T) {
	requireNginx(t)
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.HTTPSPort = 0
	var ready atomic.Uint64
	rt, err := NewRuntime(RuntimeConfig{
		Process:        ProcessConfig{Paths: cfg.Paths, Log: zaptest.NewLogger(t), MinBackoff: 10 * time.Millisecond},
		StatusPort:     cfg.StatusPort,
		StatusToken:    cfg.StatusToken,
		ConfirmTimeout: time.Second,
		OnReady:        func(starts uint64) { ready.Store(starts) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	ctx := context.Background()

	conf, hash := mustRenderHash(t, Model{}, cfg)
	conf, flag := slowStarts(t, conf, paths, 2)
	createFile(t, flag)
	if err := rt.Apply(ctx, conf, hash); err == nil {
		t.Fatal("Apply succeeded although NGINX could not answer within ConfirmTimeout")
	}
	eventually(t, "OnReady for the slow first start", 10*time.Second, func() bool { return ready.Load() == 1 })
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
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.HTTPSPort = 0
	var ready atomic.Uint64
	secondGate := make(chan struct{})
	rt := testRuntime(t, cfg, func(starts uint64) {
		if starts == 2 {
			<-secondGate
		}
		ready.Store(starts)
	})
	ctx := context.Background()

	conf, hash := mustRenderHash(t, Model{}, cfg)
	conf, flag := slowStarts(t, conf, paths, 2)
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
	close(secondGate)

	cfg2 := cfg
	cfg2.WorkerConnections = 512
	conf2, hash2 := mustRenderHash(t, Model{}, cfg2)
	if err := rt.Apply(ctx, conf2, hash2); err != nil {
		t.Fatalf("Apply while the restarted master loads: %v", err)
	}
	if got := rt.Process().Restarts(); got != 1 {
		t.Errorf("restarts %d, want 1: the reload killed the loading master", got)
	}
	if live, err := rt.Client().ConfigHash(ctx); err != nil || live != hash2 {
		t.Errorf("live hash %q (%v), want %q", live, err, hash2)
	}
	if err := rt.Ready(); err != nil || ready.Load() != 2 {
		t.Errorf("after the reload: ready %v, OnReady %d", err, ready.Load())
	}
}
