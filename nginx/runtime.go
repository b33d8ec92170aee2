package nginx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
)

// RuntimeConfig configures a Runtime.
type RuntimeConfig struct {
	// Process configures the supervised NGINX; its Paths must equal the RenderConfig's.
	Process ProcessConfig
	// StatusPort and StatusToken are RenderConfig's.
	StatusPort  int
	StatusToken string
	// ConfirmTimeout bounds the wait for a new configuration to go live after a reload or start;
	// default 10s.
	ConfirmTimeout time.Duration
	// OnReady is called, in its own goroutine, each time a freshly started NGINX answers on its status
	// server (the first start included), with the start count. A restarted NGINX has empty shared dicts:
	// the caller pushes all endpoints and certificates again (ReplaceEndpoints, ReplaceCertificates).
	OnReady func(starts uint64)
}

// Runtime bundles the NGINX process, its working directory and the status client, and applies
// configurations safely. Apply calls are serialized.
type Runtime struct {
	cfg    RuntimeConfig
	paths  Paths
	proc   *Process
	client *Client
	log    *zap.Logger

	// applyMu serializes Apply; mu guards the fields below and is never held while NGINX works, so
	// Ready and LiveHash answer at once during a long Apply.
	applyMu sync.Mutex
	mu      sync.Mutex
	// liveHash and liveConf are the configuration NGINX is known to serve.
	liveHash string
	liveConf []byte
	// stopped is set by Stop: a later Apply must not start NGINX again.
	stopped bool
}

// ErrStopped is returned by Apply after Stop.
var ErrStopped = errors.New("nginx runtime is stopped")

// ApplyError says which step of Apply failed. Output carries NGINX's messages.
type ApplyError struct {
	// Stage is "write", "test", "start", "reload" or "confirm".
	Stage string
	Err   error
}

// Error says which stage failed and why.
func (e *ApplyError) Error() string {
	return fmt.Sprintf("apply nginx configuration: %s: %v", e.Stage, e.Err)
}

// Unwrap returns the cause.
func (e *ApplyError) Unwrap() error { return e.Err }

// NewRuntime prepares the working directory (directories, Lua files) and returns a Runtime. NGINX
// starts at the first Apply.
func NewRuntime(cfg RuntimeConfig) (*Runtime, error) {
	if cfg.ConfirmTimeout <= 0 {
		cfg.ConfirmTimeout = 10 * time.Second
	}
	pc := cfg.Process.withDefaults()
	if err := pc.Paths.Prepare(); err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, paths: pc.Paths, client: NewClient(cfg.StatusPort, cfg.StatusToken), log: pc.Log}
	userOnStart := pc.OnStart
	pc.OnStart = func(starts uint64) {
		if userOnStart != nil {
			userOnStart(starts)
		}
		go r.waitReady(starts)
	}
	r.proc = NewProcess(pc)
	return r, nil
}

// Client returns the status-server client.
func (r *Runtime) Client() *Client { return r.client }

// Process returns the supervised NGINX process.
func (r *Runtime) Process() *Process { return r.proc }

// Paths returns the working directory layout.
func (r *Runtime) Paths() Paths { return r.paths }

// LiveHash returns the hash of the configuration NGINX was last confirmed to serve ("" before the first).
func (r *Runtime) LiveHash() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.liveHash
}

// Ready returns nil once a configuration is live and NGINX is running (for /readyz).
func (r *Runtime) Ready() error {
	r.mu.Lock()
	live := r.liveHash
	r.mu.Unlock()
	if live == "" {
		return errors.New("no nginx configuration applied yet")
	}
	if !r.proc.Running() {
		return ErrNotRunning
	}
	return nil
}

// Apply makes conf (with its hash, as returned by Render) the running configuration: it writes conf
// to a temp file next to nginx.conf, tests it with "nginx -t", renames it into place, starts NGINX or
// reloads it (SIGHUP), and waits until the status server reports hash. A configuration that fails the
// test never replaces the running one; one that NGINX fails to load is taken back out of nginx.conf,
// so a later restart uses the last good one. Errors are *ApplyError with NGINX's message.
// Applying the live hash again is a no-op while NGINX runs.
func (r *Runtime) Apply(ctx context.Context, conf []byte, hash string) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.mu.Lock()
	liveHash, liveConf := r.liveHash, r.liveConf
	r.mu.Unlock()
	if hash == liveHash && r.proc.Running() {
		return nil
	}

	tmp, err := writeTemp(r.paths.ConfFile(), conf)
	if err != nil {
		return &ApplyError{Stage: "write", Err: err}
	}
	defer os.Remove(tmp) // no-op after the rename
	if err := Test(ctx, r.proc.cfg.Binary, r.paths, tmp); err != nil {
		return &ApplyError{Stage: "test", Err: err}
	}
	if err := os.Rename(tmp, r.paths.ConfFile()); err != nil {
		return &ApplyError{Stage: "write", Err: err}
	}

	starts := r.proc.Starts()
	mark := r.proc.OutputMark()
	stage := "reload"
	r.mu.Lock()
	switch {
	case r.stopped:
		err = ErrStopped
	case r.proc.Running():
		err = r.proc.Reload()
	default:
		stage = "start"
		err = r.proc.Start()
		starts = r.proc.Starts()
	}
	r.mu.Unlock()
	if err == nil {
		stage = "confirm"
		err = r.confirm(ctx, hash, starts, mark)
	}
	if err != nil {
		r.restoreLive(liveConf)
		return &ApplyError{Stage: stage, Err: err}
	}
	r.mu.Lock()
	r.liveHash, r.liveConf = hash, conf
	r.mu.Unlock()
	r.log.Info("nginx configuration live", zap.String("hash", hash))
	return nil
}

// confirmPollMax bounds the interval between polls of the config hash: polls are cheap, and each
// interval adds to the time a structure change takes to be reported live.
const confirmPollMax = 50 * time.Millisecond

// confirm polls the status server until it reports hash. It gives up early when NGINX dies.
func (r *Runtime) confirm(ctx context.Context, hash string, starts, mark uint64) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ConfirmTimeout)
	defer cancel()
	delay := 10 * time.Millisecond
	var last string
	var lastErr error
	for {
		got, err := r.client.ConfigHash(ctx)
		if err == nil && got == hash {
			return nil
		}
		if ctx.Err() == nil {
			last, lastErr = got, err
		}
		if r.proc.Starts() != starts || !r.proc.Running() {
			return fmt.Errorf("nginx exited while loading the configuration: %s", r.proc.ErrorsSince(mark))
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			detail := fmt.Sprintf("still serving %q", last)
			if lastErr != nil {
				detail = lastErr.Error()
			}
			return fmt.Errorf("configuration %s not live after %s (%s); nginx errors: %s", hash, r.cfg.ConfirmTimeout, detail, r.proc.ErrorsSince(mark))
		case <-timer.C:
		}
		delay = min(2*delay, confirmPollMax)
	}
}

// restoreLive puts the last confirmed configuration back into nginx.conf after a failed load.
func (r *Runtime) restoreLive(liveConf []byte) {
	if liveConf == nil {
		return
	}
	if err := writeFileAtomic(r.paths.ConfFile(), liveConf, 0o600); err != nil {
		r.log.Error("restore last good nginx configuration", zap.Error(err))
	}
}

// waitReady calls OnReady once NGINX started as start number starts answers, bounded by ConfirmTimeout.
func (r *Runtime) waitReady(starts uint64) {
	if r.cfg.OnReady == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ConfirmTimeout)
	defer cancel()
	delay := 10 * time.Millisecond
	for {
		if r.proc.Starts() != starts {
			return // a newer start will report
		}
		if err := r.client.Healthz(ctx); err == nil {
			r.cfg.OnReady(starts)
			return
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			r.log.Error("nginx did not answer on its status server after start", zap.Uint64("starts", starts))
			return
		case <-timer.C:
		}
		delay = min(2*delay, confirmPollMax)
	}
}

// Stop stops NGINX gracefully, killing it when ctx ends first. Apply fails with ErrStopped afterwards.
func (r *Runtime) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.client.CloseIdleConnections()
	return r.proc.Stop(ctx)
}

// writeTemp writes data to a new 0600 file next to name and returns its path.
func writeTemp(name string, data []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create temp config: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("write temp config: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("write temp config: %w", err)
	}
	return f.Name(), nil
}
