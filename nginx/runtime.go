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
	// default 10s. A start that takes longer is still waited for (and reported through OnReady), with a
	// warning, within the bounds of a stuck start (see StartTimeout).
	ConfirmTimeout time.Duration
	// StartTimeout is how long a start may go without answering on its status server before it counts as
	// stuck, unless it is stuck sooner (see Runtime.Apply); default 30 ConfirmTimeouts, at least 5 minutes.
	// A master that loads a very large configuration answers late, and must not be killed for it; each
	// start replaced in a row for being silent doubles the next one's timeout (up to 16 times).
	StartTimeout time.Duration
	// OnReady is called, in its own goroutine, each time a freshly started NGINX answers on its status
	// server (the first start included), with the start count. A restarted NGINX has empty shared dicts:
	// the caller pushes all endpoints and certificates again (ReplaceEndpoints, ReplaceCertificates).
	// It must return quickly: the start counts as answered, for Ready and for reloads, once it returned.
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
	// answered is the last start that answered its health check (and whose OnReady returned): only that
	// master has installed its signal handlers, and only its shared dicts are being filled. answeredCh is
	// closed and replaced when it changes.
	answered   uint64
	answeredCh chan struct{}
	// slowRestarts counts the starts replaced in a row for not answering within the start timeout; each
	// doubles the timeout of the next (up to 16 times), so a configuration that simply loads slower than
	// the timeout gets the time it needs instead of being replaced again and again. An answer resets it.
	slowRestarts int
	// stopCtx ends with Stop, and with it the goroutines waiting for a start to answer.
	stopCtx    context.Context
	stopCancel context.CancelFunc
}

// ErrStopped is returned by Apply after Stop.
var ErrStopped = errors.New("nginx runtime is stopped")

// ApplyError says which step of Apply failed. Output carries NGINX's messages.
type ApplyError struct {
	// Stage is "write", "test", "start", "reload", "restart" or "confirm".
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
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = max(30*cfg.ConfirmTimeout, 5*time.Minute)
	}
	pc := cfg.Process.withDefaults()
	if err := pc.Paths.Prepare(); err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, paths: pc.Paths, client: NewClient(cfg.StatusPort, cfg.StatusToken), log: pc.Log,
		answeredCh: make(chan struct{})}
	r.stopCtx, r.stopCancel = context.WithCancel(context.Background())
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

// Ready returns nil once a configuration is live, NGINX is running, and its current start has answered
// and been reported through OnReady (for /readyz). A master started again after a crash is not ready
// before that: its shared dicts are empty until the caller pushed everything again.
func (r *Runtime) Ready() error {
	r.mu.Lock()
	live, answered := r.liveHash, r.answered
	r.mu.Unlock()
	if live == "" {
		return errors.New("no nginx configuration applied yet")
	}
	if !r.proc.Running() {
		return ErrNotRunning
	}
	if starts := r.proc.Starts(); answered != starts {
		return fmt.Errorf("nginx (start %d) has not answered on its status server yet", starts)
	}
	return nil
}

// Apply makes conf (with its hash, as returned by Render) the running configuration: it writes conf
// to a temp file next to nginx.conf, tests it with "nginx -t", renames it into place, starts NGINX or
// reloads it (SIGHUP), and waits until the status server reports hash.
//
// A master whose start has not answered yet cannot be reloaded: it may still be loading its
// configuration, and a SIGHUP would kill it. Apply waits for it until it answers or counts as stuck,
// then replaces a stuck master by a new start on conf (the supervisor starts NGINX again at once; it
// counts as a restart). A start counts as stuck
//   - ConfirmTimeout after it began, when its master reported a worker that exited fatally ("cannot be
//     respawned"): the master has loaded its configuration, and one with no workers left runs on
//     without ever answering;
//   - otherwise StartTimeout after it began: it may be a slow first load of a large configuration,
//     which must not be killed, nor killed again each time a configuration arrives.
//
// A configuration that fails the test never replaces the running one; one that NGINX fails to load is
// taken back out of nginx.conf, so a later restart uses the last good one. Errors are *ApplyError with
// NGINX's message. Applying the live hash again is a no-op while NGINX runs.
func (r *Runtime) Apply(ctx context.Context, conf []byte, hash string) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.mu.Lock()
	liveHash, liveConf := r.liveHash, r.liveConf
	r.mu.Unlock()
	if hash == liveHash && r.proc.Running() {
		return nil
	}
	// Wait before nginx.conf changes, so that a master started meanwhile still loads the last good one.
	// A stuck master is replaced once conf is in place (startOrReload).
	if _, _, err := r.waitLoaded(ctx); err != nil {
		return &ApplyError{Stage: "reload", Err: err}
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

	stage, starts, mark, err := r.startOrReload(ctx)
	how := stage
	if err == nil {
		stage = "confirm"
		err = r.confirm(ctx, hash, starts, mark)
	}
	if err != nil {
		r.restoreLive(liveConf)
		if how == "reload" && liveConf != nil && (r.proc.WorkersLostSince(mark) || r.proc.workersLost(starts)) {
			r.revert(ctx, liveHash, starts)
		}
		return &ApplyError{Stage: stage, Err: err}
	}
	r.mu.Lock()
	r.liveHash, r.liveConf = hash, conf
	r.mu.Unlock()
	// Kept-alive connections may lead to workers of the previous configuration, whose shared dicts a
	// reload can replace (a lua_shared_dict whose size changed): later pushes must reach the new workers.
	r.client.CloseIdleConnections()
	r.log.Info("nginx configuration live", zap.String("hash", hash))
	return nil
}

// startOrReload starts NGINX when no master runs, sends SIGHUP to the running master once its start
// has answered, or replaces a master that is stuck (see Apply), waiting for the current start within
// ctx. It returns the stage, the start to confirm, and the output mark from which NGINX's messages
// concern this attempt.
func (r *Runtime) startOrReload(ctx context.Context) (stage string, starts, mark uint64, err error) {
	for {
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return "reload", 0, 0, ErrStopped
		}
		mark = r.proc.OutputMark()
		if !r.proc.Running() {
			err = r.proc.Start()
			starts = r.proc.Starts()
			r.mu.Unlock()
			return "start", starts, mark, err
		}
		starts = r.proc.Starts()
		if r.answered == starts {
			err = r.proc.reloadStart(starts)
			r.mu.Unlock()
			if errors.Is(err, errStartChanged) || errors.Is(err, ErrNotRunning) {
				continue // it died since: start it, or wait for its successor
			}
			return "reload", starts, mark, err
		}
		r.mu.Unlock()
		stuck, reason, err := r.waitLoaded(ctx)
		if err != nil {
			return "reload", starts, mark, err
		}
		if stuck == 0 {
			continue
		}
		r.mu.Lock()
		if r.answered == stuck { // it answered after all, just now: reload it instead
			r.mu.Unlock()
			continue
		}
		r.log.Error("nginx start is stuck; starting nginx again with the new configuration",
			zap.Uint64("starts", stuck), zap.String("reason", reason))
		mark = r.proc.OutputMark()
		_, _, _, workersFailed := r.proc.startState()
		err = r.proc.restart(stuck)
		if err == nil && !workersFailed {
			r.slowRestarts++
		}
		r.mu.Unlock()
		if errors.Is(err, errStartChanged) || errors.Is(err, ErrNotRunning) {
			continue
		}
		if err == nil {
			starts, err = r.waitRestarted(ctx, stuck)
		}
		return "restart", starts, mark, err
	}
}

// stuckReason says why the current start, number starts, counts as stuck (see Apply), or returns ""
// while it does not (yet). stuckAt is when it does or will count as stuck; it is zero for a start
// that is not current, not running, or has answered.
func (r *Runtime) stuckReason(starts uint64) (reason string, stuckAt time.Time) {
	current, running, began, workersFailed := r.proc.startState()
	r.mu.Lock()
	answered := r.answered
	r.mu.Unlock()
	if current != starts || !running || answered == starts || began.IsZero() {
		return "", time.Time{}
	}
	timeout := r.startTimeout()
	stuckAt = began.Add(timeout)
	reason = fmt.Sprintf("it has not answered on its status server for %s", timeout)
	if workersFailed {
		stuckAt = began.Add(r.cfg.ConfirmTimeout)
		reason = fmt.Sprintf("its worker processes exited fatally and it has not answered for %s: %s",
			r.cfg.ConfirmTimeout, r.proc.ErrorsSince(0))
	}
	if time.Now().Before(stuckAt) {
		return "", stuckAt
	}
	return reason, stuckAt
}

// startTimeout is StartTimeout, doubled for each start replaced in a row for being silent (slowRestarts).
func (r *Runtime) startTimeout() time.Duration {
	r.mu.Lock()
	n := r.slowRestarts
	r.mu.Unlock()
	return r.cfg.StartTimeout << min(n, 4)
}

// waitLoaded returns once no master runs or the running one has answered its health check (so it has
// loaded its configuration and installed its signal handlers), or with the number of the current start
// and why once that counts as stuck (see Apply). It fails when ctx ends or the Runtime stops first.
func (r *Runtime) waitLoaded(ctx context.Context) (stuck uint64, reason string, err error) {
	logged := false
	for {
		r.mu.Lock()
		answered, changed := r.answered, r.answeredCh
		r.mu.Unlock()
		starts := r.proc.Starts()
		if !r.proc.Running() || answered == starts {
			return 0, "", nil
		}
		if reason, _ := r.stuckReason(starts); reason != "" {
			return starts, reason, nil
		}
		if !logged {
			r.log.Info("nginx is still loading its configuration; reloading once it answers", zap.Uint64("starts", starts))
			logged = true
		}
		// The timer notices a master that dies while loading, and one that becomes stuck.
		timer := time.NewTimer(confirmPollMax)
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0, "", fmt.Errorf("nginx (start %d) is still loading its configuration, and a reload now would kill it: %w", starts, ctx.Err())
		case <-r.stopCtx.Done():
			timer.Stop()
			return 0, "", ErrStopped
		case <-changed:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// waitRestarted waits until the supervisor has started NGINX again after restart stopped start number
// stopped, and returns the new start's number.
func (r *Runtime) waitRestarted(ctx context.Context, stopped uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ConfirmTimeout)
	defer cancel()
	for {
		if starts := r.proc.Starts(); starts > stopped {
			return starts, nil
		}
		if r.proc.GaveUp() {
			return 0, fmt.Errorf("nginx keeps dying and is no longer restarted: %v", r.proc.Err())
		}
		timer := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0, fmt.Errorf("nginx was not started again after start %d was stopped: %w", stopped, ctx.Err())
		case <-r.stopCtx.Done():
			timer.Stop()
			return 0, ErrStopped
		case <-timer.C:
		}
	}
}

// Alive returns an error when the current start has been stuck (see Apply) for three more
// ConfirmTimeouts: an Apply would have replaced it by then, so none is coming, and NGINX serves nothing.
// It fails the process's liveness check, so that the kubelet restarts the pod as a last resort.
func (r *Runtime) Alive() error {
	starts := r.proc.Starts()
	reason, stuckAt := r.stuckReason(starts)
	if reason == "" || time.Since(stuckAt) < 3*r.cfg.ConfirmTimeout {
		return nil
	}
	return fmt.Errorf("nginx (start %d) is stuck since %s: %s", starts, stuckAt.Format(time.RFC3339), reason)
}

// confirmPollMax bounds the interval between polls of the config hash: polls are cheap, and each
// interval adds to the time a structure change takes to be reported live.
const confirmPollMax = 50 * time.Millisecond

// confirmPollRequest bounds one question to the status server while confirming; NGINX answers it from
// memory, in well under a millisecond when it can answer at all.
const confirmPollRequest = 2 * time.Second

// confirm polls the status server until it reports hash and start number starts has been reported
// through OnReady. It gives up early when NGINX dies or logs that it cannot load the configuration.
func (r *Runtime) confirm(ctx context.Context, hash string, starts, mark uint64) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ConfirmTimeout)
	defer cancel()
	delay := 10 * time.Millisecond
	var last string
	var lastErr error
	for {
		// Each question is bounded on its own: a master without workers accepts connections that nobody
		// answers, and the checks below must still get their turn.
		pollCtx, cancelPoll := context.WithTimeout(ctx, confirmPollRequest)
		got, err := r.client.ConfigHash(pollCtx)
		cancelPoll()
		if err == nil && got == hash {
			r.mu.Lock()
			answered := r.answered
			r.mu.Unlock()
			if answered == starts {
				return nil
			}
		}
		if ctx.Err() == nil {
			last, lastErr = got, err
		}
		if r.proc.Starts() != starts || !r.proc.Running() {
			return fmt.Errorf("nginx exited while loading the configuration (%v): %s", r.proc.Err(), r.proc.ErrorsSince(mark))
		}
		// A master that cannot load a configuration logs [emerg]: at a reload it keeps the old one, at a
		// start it exits. Either way this configuration will not go live.
		if r.proc.EmergencySince(mark) {
			return fmt.Errorf("nginx refused the configuration: %s", r.proc.ErrorsSince(mark))
		}
		// Workers that die at start-up with this configuration are not respawned: it will not go live.
		if r.proc.WorkersLostSince(mark) || r.proc.workersLost(starts) {
			return fmt.Errorf("nginx's workers exited with the configuration and cannot be respawned: %s", r.proc.ErrorsSince(mark))
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

// revert reloads the last good configuration, which restoreLive put back into nginx.conf, after a reload
// whose new workers all exited fatally: the master stopped the previous workers and runs on without any,
// serving nothing, until it is given a configuration whose workers live.
func (r *Runtime) revert(ctx context.Context, liveHash string, starts uint64) {
	r.mu.Lock()
	mark := r.proc.OutputMark()
	err := r.proc.reloadStart(starts)
	r.mu.Unlock()
	if err == nil {
		err = r.confirm(ctx, liveHash, starts, mark)
	}
	if err != nil {
		r.log.Error("the new configuration's workers exited, and returning to the last good configuration failed", zap.String("hash", liveHash), zap.Error(err))
		return
	}
	r.log.Warn("the new configuration's workers exited; the last good configuration is live again", zap.String("hash", liveHash))
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

// readyPollMax bounds the interval between health checks of a start that is slower than ConfirmTimeout.
const readyPollMax = time.Second

// waitReady waits until NGINX started as start number starts answers its health check, however long
// its start takes, then calls OnReady and records the start as answered. It ends early when the master
// dies (a newer start reports for itself) or the Runtime stops.
func (r *Runtime) waitReady(starts uint64) {
	began := time.Now()
	warned := false
	delay := 10 * time.Millisecond
	for {
		if r.proc.Starts() != starts || !r.proc.Running() {
			return
		}
		ctx, cancel := context.WithTimeout(r.stopCtx, r.cfg.ConfirmTimeout)
		err := r.client.Healthz(ctx)
		cancel()
		if err == nil {
			break
		}
		pollMax := confirmPollMax
		if time.Since(began) >= r.cfg.ConfirmTimeout {
			if !warned {
				r.log.Warn("nginx has not answered on its status server yet; still waiting",
					zap.Uint64("starts", starts), zap.Duration("after", r.cfg.ConfirmTimeout), zap.Error(err))
				warned = true
			}
			pollMax = readyPollMax
		}
		timer := time.NewTimer(delay)
		select {
		case <-r.stopCtx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		delay = min(2*delay, pollMax)
	}
	if r.proc.Starts() != starts {
		return // it died while answering; the newer start reports
	}
	if warned {
		r.log.Info("nginx answers after a slow start", zap.Uint64("starts", starts), zap.Duration("took", time.Since(began)))
	}
	if r.cfg.OnReady != nil {
		r.cfg.OnReady(starts)
	}
	r.mu.Lock()
	if starts > r.answered {
		r.answered = starts
		r.slowRestarts = 0
		close(r.answeredCh)
		r.answeredCh = make(chan struct{})
	}
	r.mu.Unlock()
}

// Stop stops NGINX gracefully, killing it when ctx ends first. Apply fails with ErrStopped afterwards.
func (r *Runtime) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.stopCancel()
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
