package nginx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
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
	// the caller pushes all routes, endpoints and certificates again (ReplaceRoutes, ReplaceEndpoints,
	// ReplaceCertificates).
	// It must return quickly: the start counts as answered, for Ready and for reloads, once it returned.
	OnReady func(starts uint64)
}

// Runtime bundles the NGINX process, its working directory and the status client, and applies
// configurations safely. Apply calls are serialized.
//
// The master's lifecycle (see phase) is owned by one goroutine, run: the Process's start, exit and
// give-up notifications, the per-start probe's answers and lost workers, Apply's reloads and
// replacements, the start timeout and Stop all reach it as events, and it changes the lifecycle only
// through lifecycle.next. Everyone else reads the snapshot it publishes.
type Runtime struct {
	cfg      RuntimeConfig
	timeouts lifecycleTimeouts
	paths    Paths
	proc     *Process
	client   *Client
	log      *zap.Logger

	// applyMu serializes Apply; mu guards the fields below and is never held while NGINX works, so
	// Ready and LiveHash answer at once during a long Apply. startOrReload holds it from the stopped
	// check through the fork, so that Stop cannot slip in between.
	applyMu sync.Mutex
	mu      sync.Mutex
	// liveHash and liveConf are the configuration NGINX is known to serve.
	liveHash string
	liveConf []byte
	// stopped is set by Stop: a later Apply must not start NGINX again.
	stopped bool

	// events carries events to run; runDone is closed when run ended (after Stop).
	events  chan request
	runDone chan struct{}
	// published is the lifecycle as run last published it.
	published atomic.Pointer[published]

	// stopCtx ends with Stop, and with it run and the per-start probes.
	stopCtx    context.Context
	stopCancel context.CancelFunc
}

// request is an event for run; reply receives the lifecycle after it, and the error of its action.
type request struct {
	e     event
	reply chan reply
}

type reply struct {
	state lifecycle
	err   error
}

// published is a lifecycle with a channel that run closes when it publishes the next one.
type published struct {
	state   lifecycle
	changed chan struct{}
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
		timeouts: lifecycleTimeouts{confirm: cfg.ConfirmTimeout, start: cfg.StartTimeout},
		events:   make(chan request), runDone: make(chan struct{})}
	r.published.Store(&published{changed: make(chan struct{})})
	r.stopCtx, r.stopCancel = context.WithCancel(context.Background())
	userOnStart, userOnExit := pc.OnStart, pc.OnExit
	pc.OnStart = func(starts uint64) {
		if userOnStart != nil {
			userOnStart(starts)
		}
		_, _ = r.send(event{kind: evStarted, starts: starts, at: time.Now()})
		go r.probe(starts)
	}
	pc.OnExit = func(err error) {
		if userOnExit != nil {
			userOnExit(err)
		}
		// The supervisor reports an exit before it starts the next master: Starts is the one that exited.
		_, _ = r.send(event{kind: evExited, starts: r.proc.Starts()})
	}
	pc.onGiveUp = func() { _, _ = r.send(event{kind: evGaveUp}) }
	r.proc = NewProcess(pc)
	go r.run()
	return r, nil
}

// run owns the lifecycle: it applies each event through lifecycle.next, publishes the result, and
// times the current start out when it does not answer in time.
func (r *Runtime) run() {
	defer close(r.runDone)
	var lc lifecycle
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var req request
		select {
		case req = <-r.events:
		case now := <-timer.C:
			req.e = event{kind: evTick, at: now}
		case <-r.stopCtx.Done():
			req.e = event{kind: evStopped}
		}
		var err error
		before := lc.phase
		if req.e.kind == evReplaced {
			err = r.replaceStuck(lc, req.e.starts)
		}
		if err == nil {
			lc = lc.next(req.e, r.timeouts)
		}
		if lc.phase != before {
			r.log.Debug("nginx lifecycle", zap.Uint64("starts", lc.starts), zap.Stringer("from", before), zap.Stringer("to", lc.phase))
		}
		// Waiters are woken by every event, not only by changes: what they wait for may depend on the
		// Process too (a replaced master's exit, say).
		close(r.published.Swap(&published{state: lc, changed: make(chan struct{})}).changed)
		if req.reply != nil {
			req.reply <- reply{state: lc, err: err}
		}
		if lc.stopped {
			timer.Stop()
			return
		}
		timer.Stop()
		if lc.phase == phaseStarting {
			timer.Reset(time.Until(lc.stuckAt))
		}
	}
}

// replaceStuck kills the master of start number starts so that the supervisor starts NGINX again at
// once, if that start is (still) stuck in lc: one that answered just now is reloaded instead.
func (r *Runtime) replaceStuck(lc lifecycle, starts uint64) error {
	if lc.phase != phaseStuck || lc.starts != starts {
		return errNotStuck
	}
	r.log.Error("nginx start is stuck; starting nginx again with the new configuration",
		zap.Uint64("starts", starts), zap.String("reason", r.stuckReason(lc)))
	return r.proc.restart(starts)
}

// errNotStuck says that a start to replace is no longer stuck.
var errNotStuck = errors.New("nginx start is not stuck")

// send hands e to run and returns the lifecycle after it; it fails with ErrStopped once run ended.
func (r *Runtime) send(e event) (lifecycle, error) {
	req := request{e: e, reply: make(chan reply, 1)}
	select {
	case r.events <- req:
	case <-r.runDone:
		lc, _ := r.snapshot()
		return lc, ErrStopped
	}
	rep := <-req.reply
	return rep.state, rep.err
}

// snapshot returns the lifecycle as run last published it, and a channel closed when it changes.
func (r *Runtime) snapshot() (lifecycle, <-chan struct{}) {
	p := r.published.Load()
	return p.state, p.changed
}

// await returns the lifecycle once done accepts it; it fails when ctx ends or the Runtime stops first.
func (r *Runtime) await(ctx context.Context, done func(lifecycle) bool) (lifecycle, error) {
	for {
		lc, changed := r.snapshot()
		if lc.stopped {
			return lc, ErrStopped
		}
		if done(lc) {
			return lc, nil
		}
		select {
		case <-ctx.Done():
			return lc, ctx.Err()
		case <-changed:
		}
	}
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
	live := r.liveHash
	r.mu.Unlock()
	if live == "" {
		return errors.New("no nginx configuration applied yet")
	}
	lc, _ := r.snapshot()
	if lc.phase == phaseGone {
		return ErrNotRunning
	}
	if !lc.ready() {
		return fmt.Errorf("nginx (start %d) has not answered on its status server yet", lc.starts)
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
//   - ConfirmTimeout after it began, when its workers are lost: its master reported a worker that
//     exited fatally ("cannot be respawned"), or its process tree shows it loaded and without workers.
//     NGINX does not respawn such a worker, and a master with no workers left runs on without ever
//     answering;
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
	if _, err := r.waitSettled(ctx); err != nil {
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
	if how == "reload" {
		_, _ = r.send(event{kind: evReloadDone, starts: starts})
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
		r.mu.Unlock()
		starts = r.proc.Starts()
		if lc, _ := r.snapshot(); lc.phase == phaseServing && lc.starts == starts {
			// Only a master that answered reloads; reloadStart refuses one started since.
			err = r.proc.reloadStart(starts)
			if errors.Is(err, errStartChanged) || errors.Is(err, ErrNotRunning) {
				continue // it died since: start it, or wait for its successor
			}
			if err == nil {
				_, _ = r.send(event{kind: evReloadSent, starts: starts})
			}
			return "reload", starts, mark, err
		}
		lc, err := r.waitSettled(ctx)
		if err != nil {
			return "reload", starts, mark, err
		}
		if lc.phase != phaseStuck {
			continue
		}
		mark = r.proc.OutputMark()
		_, err = r.send(event{kind: evReplaced, starts: lc.starts})
		if errors.Is(err, errNotStuck) || errors.Is(err, errStartChanged) || errors.Is(err, ErrNotRunning) {
			continue // it answered after all, just now (reload it), or it died since
		}
		if err == nil {
			starts, err = r.waitRestarted(ctx, lc.starts)
		}
		return "restart", starts, mark, err
	}
}

// stuckReason says why the start of lc counts as stuck (see Apply).
func (r *Runtime) stuckReason(lc lifecycle) string {
	if lc.workersLost {
		return lc.reason + ": " + r.proc.ErrorsSince(0)
	}
	return lc.reason
}

// startTimeout is how long the next silent start may take before it counts as stuck: StartTimeout,
// doubled for each start replaced in a row for being silent.
func (r *Runtime) startTimeout() time.Duration {
	lc, _ := r.snapshot()
	return lc.startTimeout(r.timeouts)
}

// settled says no master is loading its configuration: none runs, or the current one answered or
// counts as stuck. A start the lifecycle has not heard of yet, or a master that was replaced and has
// not exited yet, is waited for.
func (r *Runtime) settled(lc lifecycle) bool {
	if lc.starts < r.proc.Starts() {
		return false
	}
	return lc.phase != phaseStarting && (lc.phase != phaseGone || !r.proc.Running())
}

// waitSettled returns once no master is loading its configuration (see settled): a SIGHUP before NGINX
// installed its signal handlers would kill it. It fails when ctx ends or the Runtime stops first.
func (r *Runtime) waitSettled(ctx context.Context) (lifecycle, error) {
	if lc, _ := r.snapshot(); !r.settled(lc) {
		r.log.Info("nginx is still loading its configuration; reloading once it answers", zap.Uint64("starts", lc.starts))
	}
	lc, err := r.await(ctx, r.settled)
	if err != nil && !errors.Is(err, ErrStopped) {
		err = fmt.Errorf("nginx (start %d) is still loading its configuration, and a reload now would kill it: %w", lc.starts, err)
	}
	return lc, err
}

// waitRestarted waits until the supervisor has started NGINX again after the stuck start number
// stopped was replaced, and returns the new start's number.
func (r *Runtime) waitRestarted(ctx context.Context, stopped uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ConfirmTimeout)
	defer cancel()
	lc, err := r.await(ctx, func(lc lifecycle) bool { return lc.starts > stopped || lc.gaveUp })
	switch {
	case errors.Is(err, ErrStopped):
		return 0, err
	case err != nil:
		return 0, fmt.Errorf("nginx was not started again after start %d was stopped: %w", stopped, err)
	case lc.starts <= stopped:
		return 0, fmt.Errorf("nginx keeps dying and is no longer restarted: %v", r.proc.Err())
	}
	return lc.starts, nil
}

// Alive returns an error when the current start has been stuck (see Apply) for three more
// ConfirmTimeouts: an Apply would have replaced it by then, so none is coming, and NGINX serves nothing.
// It fails the process's liveness check, so that the kubelet restarts the pod as a last resort.
func (r *Runtime) Alive() error {
	lc, _ := r.snapshot()
	if lc.phase != phaseStuck || time.Since(lc.stuckAt) < 3*r.cfg.ConfirmTimeout {
		return nil
	}
	return fmt.Errorf("nginx (start %d) is stuck since %s: %s", lc.starts, lc.stuckAt.Format(time.RFC3339), r.stuckReason(lc))
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
			if lc, _ := r.snapshot(); lc.ready() && lc.starts == starts {
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
	mark := r.proc.OutputMark()
	err := r.proc.reloadStart(starts)
	if err == nil {
		_, _ = r.send(event{kind: evReloadSent, starts: starts})
		err = r.confirm(ctx, liveHash, starts, mark)
		_, _ = r.send(event{kind: evReloadDone, starts: starts})
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

// probe asks NGINX started as start number starts for its health until it answers, however long its
// start takes, then calls OnReady and reports the answer to run. It reports lost workers (from NGINX's
// log or its process tree) on the way, and ends early when the master dies (a newer start is probed
// on its own) or the Runtime stops.
func (r *Runtime) probe(starts uint64) {
	began := time.Now()
	warned := false
	delay := 10 * time.Millisecond
	for {
		if r.proc.Starts() != starts || !r.proc.Running() {
			return
		}
		// Each question is bounded on its own: a master without workers accepts connections that nobody
		// answers, and the look at its workers below must still get its turn.
		ctx, cancel := context.WithTimeout(r.stopCtx, min(r.cfg.ConfirmTimeout, confirmPollRequest))
		err := r.client.Healthz(ctx)
		cancel()
		if err == nil {
			break
		}
		if r.proc.workersLost(starts) {
			_, _ = r.send(event{kind: evWorkersLost, starts: starts, at: time.Now()})
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
	_, _ = r.send(event{kind: evAnswered, starts: starts})
}

// Stop stops NGINX gracefully, killing it when ctx ends first. Apply fails with ErrStopped afterwards.
func (r *Runtime) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.stopCancel()
	<-r.runDone
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
