package nginx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// ErrNotRunning is returned when an operation needs the NGINX master and none is running.
var ErrNotRunning = errors.New("nginx is not running")

// ProcessConfig configures a supervised NGINX master process.
type ProcessConfig struct {
	// Binary is the nginx executable; default "nginx" (looked up in PATH).
	Binary string
	Paths  Paths
	// Log receives the Process's own events and, unless OnStderrLine is set, NGINX's stderr lines at the
	// level NGINX gave them. Default: no logging.
	Log *zap.Logger
	// OnStderrLine, when set, receives each line NGINX writes to stderr (its error log by default)
	// instead of Log.
	OnStderrLine func(line string)
	// Stdout receives NGINX's stdout (the access log when RenderConfig.AccessLog is "stdout").
	// Default os.Stdout.
	Stdout io.Writer

	// MinBackoff and MaxBackoff bound the delay before restarting NGINX after it died; defaults 100ms and 30s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// StableAfter is how long NGINX must run for a later crash to count as a new series; default 30s.
	StableAfter time.Duration
	// MaxFailures is how many quick deaths in a row the Process tolerates before it gives up and stays
	// stopped (Start may be called again); default 10.
	MaxFailures int

	// OnStart is called after each successful start of the master (the first one included), with the
	// start count (1 for the first). NGINX is not serving yet when it runs; it must return quickly.
	// It is called without locks held, so it may call the Process.
	OnStart func(starts uint64)
	// OnExit is called when the master exits without Stop having been called.
	OnExit func(err error)

	// launch starts a master; default launchExec. Tests put a fake master behind it.
	launch launchFunc
	// onGiveUp is called when the Process gives up restarting NGINX (see MaxFailures).
	onGiveUp func()
}

func (c ProcessConfig) withDefaults() ProcessConfig {
	if c.Binary == "" {
		c.Binary = "nginx"
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.StableAfter <= 0 {
		c.StableAfter = 30 * time.Second
	}
	if c.MaxFailures <= 0 {
		c.MaxFailures = 10
	}
	if c.launch == nil {
		c.launch = launchExec
	}
	return c
}

// Process runs NGINX in the foreground ("daemon off;" in the configuration) as a child, in its own
// process group, and restarts it with exponential backoff when it dies. Reload sends SIGHUP; Stop
// sends SIGQUIT (graceful) and SIGKILLs the group when the context ends first.
type Process struct {
	cfg  ProcessConfig
	tail *lineTail

	mu       sync.Mutex
	master   master
	running  bool
	stopping bool
	gaveUp   bool // NGINX died too often in a row and is no longer restarted
	starts   uint64
	restarts uint64
	lastErr  error
	wake     chan struct{} // closed by Stop to end a backoff wait
	done     chan struct{} // closed when the supervisor goroutine ends
	// readers are closed by the goroutines reading each master's stderr when they end: they log its last
	// lines after it exits, and Stop waits for them, so that nothing logs once Stop has returned.
	readers []chan struct{}

	// workersFailed is the last start whose master reported that a worker exited with a fatal code and
	// is not respawned.
	workersFailed uint64
	// restartAsked is set by restart: the master's next exit was asked for, and NGINX starts again at once.
	restartAsked bool
	// treeLostSince is when a look at the process tree of start treeLostStart first found its workers
	// lost; a later look confirms it (see workersLostLocked).
	treeLostSince time.Time
	treeLostStart uint64
}

// NewProcess returns a Process; nothing runs before Start.
func NewProcess(cfg ProcessConfig) *Process {
	return &Process{cfg: cfg.withDefaults(), tail: newLineTail(40)}
}

// Start starts NGINX on Paths.ConfFile() and supervises it. It returns once the master is forked (not
// once it serves) and fails if it is already supervised or cannot be executed.
func (p *Process) Start() error {
	p.mu.Lock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			p.mu.Unlock()
			return errors.New("nginx is already supervised")
		}
	}
	p.stopping = false
	p.gaveUp = false
	p.wake = make(chan struct{})
	p.done = make(chan struct{})
	m, err := p.startLocked()
	if err != nil {
		close(p.done)
		p.mu.Unlock()
		return err
	}
	starts := p.starts
	go p.supervise(m, p.wake, p.done)
	p.mu.Unlock()
	p.notifyStart(starts)
	return nil
}

func (p *Process) startLocked() (master, error) {
	m, stderr, err := p.cfg.launch(p.cfg)
	if err != nil {
		return nil, err
	}
	p.master = m
	p.running = true
	p.starts++
	read := make(chan struct{})
	p.readers = append(slices.DeleteFunc(p.readers, isClosed), read)
	go func(starts uint64) {
		defer close(read)
		p.readStderr(stderr, starts)
	}(p.starts)
	p.cfg.Log.Info("nginx started", zap.Int("pid", m.Pid()), zap.Uint64("starts", p.starts))
	return m, nil
}

func (p *Process) notifyStart(starts uint64) {
	if p.cfg.OnStart != nil {
		p.cfg.OnStart(starts)
	}
}

// fatalWorkerExit is how a master reports a worker that exited with a fatal code (2, as after a failed
// worker initialization): it does not start another one, and when it was the last, the master runs on
// without workers and answers nothing.
const fatalWorkerExit = "and cannot be respawned"

func (p *Process) readStderr(r io.ReadCloser, starts uint64) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.tail.add(line)
		if strings.Contains(line, fatalWorkerExit) {
			p.mu.Lock()
			p.workersFailed = max(p.workersFailed, starts)
			p.mu.Unlock()
		}
		if p.cfg.OnStderrLine != nil {
			p.cfg.OnStderrLine(line)
			continue
		}
		logNginxLine(p.cfg.Log, line)
	}
}

// logNginxLine logs an NGINX error-log line at the level NGINX gave it.
func logNginxLine(log *zap.Logger, line string) {
	switch {
	case strings.Contains(line, "[emerg]"), strings.Contains(line, "[alert]"), strings.Contains(line, "[crit]"), strings.Contains(line, "[error]"):
		log.Error("nginx", zap.String("line", line))
	case strings.Contains(line, "[warn]"):
		log.Warn("nginx", zap.String("line", line))
	case strings.Contains(line, "[debug]"):
		log.Debug("nginx", zap.String("line", line))
	default:
		log.Info("nginx", zap.String("line", line))
	}
}

func (p *Process) supervise(m master, wake, done chan struct{}) {
	defer close(done)
	backoff := p.cfg.MinBackoff
	failures := 0
	for {
		started := time.Now()
		err := m.Wait()
		// Workers of a master that died abruptly keep the listening sockets: kill the whole group.
		_ = m.Kill()

		p.mu.Lock()
		p.running = false
		stopping, asked := p.stopping, p.restartAsked
		p.restartAsked = false
		if err == nil {
			err = errors.New("nginx exited")
		}
		p.lastErr = fmt.Errorf("%w; last output: %s", err, p.tail.String())
		p.mu.Unlock()
		if stopping {
			return
		}
		if asked {
			p.cfg.Log.Warn("nginx stopped to be started again", zap.Error(err))
		} else {
			p.cfg.Log.Error("nginx exited unexpectedly", zap.Error(err), zap.String("output", p.tail.String()))
		}
		if p.cfg.OnExit != nil {
			p.cfg.OnExit(err)
		}
		if time.Since(started) >= p.cfg.StableAfter {
			backoff, failures = p.cfg.MinBackoff, 0
		}
		for {
			// An asked-for restart counts too: a master that has to be replaced again and again gives up.
			failures++
			if failures > p.cfg.MaxFailures {
				p.cfg.Log.Error("nginx keeps dying; giving up until the next start", zap.Int("failures", failures-1))
				p.mu.Lock()
				p.gaveUp = true
				p.mu.Unlock()
				if p.cfg.onGiveUp != nil {
					p.cfg.onGiveUp()
				}
				return
			}
			delay := backoff
			if asked {
				delay, asked = 0, false
			}
			timer := time.NewTimer(delay)
			select {
			case <-wake:
				timer.Stop()
				return
			case <-timer.C:
			}
			backoff = min(2*backoff, p.cfg.MaxBackoff)
			p.mu.Lock()
			if p.stopping {
				p.mu.Unlock()
				return
			}
			var startErr error
			var next master
			next, startErr = p.startLocked()
			if startErr == nil {
				m = next
				p.restarts++
			} else {
				p.lastErr = startErr
			}
			starts := p.starts
			p.mu.Unlock()
			if startErr == nil {
				p.notifyStart(starts)
				break
			}
			p.cfg.Log.Error("restart nginx", zap.Error(startErr))
		}
	}
}

// Reload asks the running master to load the configuration file again (SIGHUP). NGINX installs its
// signal handlers only after it has loaded its configuration: until then SIGHUP kills the master, so
// call Reload only on a master that has answered requests (Runtime does).
func (p *Process) Reload() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return ErrNotRunning
	}
	return p.signalReloadLocked()
}

// errStartChanged says that the master to reload is no longer the running one.
var errStartChanged = errors.New("nginx was started again")

// reloadStart is Reload for the master of start number starts only: a master started since (after a
// crash) may still be loading its configuration, and a SIGHUP would kill it.
func (p *Process) reloadStart(starts uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.isCurrentLocked(starts); err != nil {
		return err
	}
	return p.signalReloadLocked()
}

// isCurrentLocked returns nil when the running master is that of start number starts.
func (p *Process) isCurrentLocked(starts uint64) error {
	if !p.running {
		return ErrNotRunning
	}
	if p.starts != starts {
		return errStartChanged
	}
	return nil
}

// restart kills the master of start number starts and its workers (its process group), so that the
// supervisor starts NGINX again at once, on the configuration file as it is then; it counts as a restart.
// It is for a master that cannot be reloaded: one that never answered.
func (p *Process) restart(starts uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.isCurrentLocked(starts); err != nil {
		return err
	}
	p.restartAsked = true
	if err := p.master.Kill(); err != nil {
		p.restartAsked = false
		return fmt.Errorf("restart nginx: %w", err)
	}
	return nil
}

// workersLost reports whether the master of start number starts runs on without workers (see
// workersLostLocked); false once another start runs.
func (p *Process) workersLost(starts uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts == starts && p.workersLostLocked()
}

// treeSettle is how long a look at the process tree must keep finding a loaded master without workers
// before it counts: NGINX names itself master a moment before it forks its workers.
const treeSettle = 100 * time.Millisecond

// workersLostLocked reports whether the current master has no worker left that it will respawn: it
// reported a worker that exited fatally (see fatalWorkerExit), or its process tree shows it loaded and
// without workers in two looks treeSettle apart (the log line may be lost, or filtered by error_log).
func (p *Process) workersLostLocked() bool {
	if p.workersFailed == p.starts {
		return true
	}
	if !p.running || !p.master.Tree().workersLost() {
		p.treeLostSince = time.Time{}
		return false
	}
	if p.treeLostSince.IsZero() || p.treeLostStart != p.starts {
		p.treeLostSince, p.treeLostStart = time.Now(), p.starts
		return false
	}
	return time.Since(p.treeLostSince) >= treeSettle
}

func (p *Process) signalReloadLocked() error {
	if err := p.master.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("reload nginx: %w", err)
	}
	return nil
}

// Stop stops NGINX gracefully (SIGQUIT: open requests finish) and waits for it. When ctx ends first,
// the process group is killed. Stop on a Process that is not running returns nil.
func (p *Process) Stop(ctx context.Context) error {
	p.mu.Lock()
	if p.done == nil {
		p.mu.Unlock()
		return nil
	}
	done := p.done
	if !p.stopping {
		p.stopping = true
		close(p.wake)
	}
	var m master
	if p.running {
		m = p.master
		_ = m.Signal(syscall.SIGQUIT)
	}
	p.mu.Unlock()

	select {
	case <-done:
		p.waitReaders(ctx)
		return nil
	case <-ctx.Done():
	}
	if m != nil {
		_ = m.Kill()
	}
	<-done
	return fmt.Errorf("nginx did not stop gracefully, killed: %w", ctx.Err())
}

// waitReaders waits, within ctx, until the stderr readers have logged the last lines of the masters
// that exited. A reader whose pipe another process still holds open is left behind when ctx ends.
func (p *Process) waitReaders(ctx context.Context) {
	p.mu.Lock()
	readers := slices.Clone(p.readers)
	p.mu.Unlock()
	for _, read := range readers {
		select {
		case <-read:
		case <-ctx.Done():
			return
		}
	}
}

// isClosed says whether c is closed.
func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Running says whether the master is alive.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

// PID returns the master's PID, or 0 when it is not running.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return 0
	}
	return p.master.Pid()
}

// Starts counts successful starts, the first one included.
func (p *Process) Starts() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Restarts counts starts after NGINX died unexpectedly.
func (p *Process) Restarts() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// GaveUp reports whether NGINX died more than MaxFailures times in a row and is no longer restarted
// (until the next Start).
func (p *Process) GaveUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gaveUp
}

// Err returns why NGINX last exited, with its last output; nil if it never exited.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// RecentOutput returns NGINX's last stderr lines.
func (p *Process) RecentOutput() string { return p.tail.String() }

// OutputMark returns a position in NGINX's stderr for ErrorsSince.
func (p *Process) OutputMark() uint64 { return p.tail.mark() }

// ErrorsSince returns NGINX's error lines ([emerg], [alert], [crit], [error]) written after mark,
// without timestamps, joined by "; " (at most the last 40 lines are kept).
func (p *Process) ErrorsSince(mark uint64) string {
	var errs []string
	for _, line := range p.tail.since(mark) {
		if strings.Contains(line, "[emerg]") || strings.Contains(line, "[alert]") || strings.Contains(line, "[crit]") || strings.Contains(line, "[error]") {
			errs = append(errs, line)
		}
	}
	return cleanNginxOutput(strings.Join(errs, "\n"))
}

// EmergencySince reports whether NGINX logged an [emerg] line after mark. A master logs one when it
// cannot load a configuration: at a reload it keeps the previous one, at a start it exits.
func (p *Process) EmergencySince(mark uint64) bool {
	for _, line := range p.tail.since(mark) {
		if strings.Contains(line, "[emerg]") {
			return true
		}
	}
	return false
}

// WorkersLostSince reports whether NGINX's master logged, after mark, that a worker exited fatally and
// is not respawned (see fatalWorkerExit).
func (p *Process) WorkersLostSince(mark uint64) bool {
	for _, line := range p.tail.since(mark) {
		if strings.Contains(line, fatalWorkerExit) {
			return true
		}
	}
	return false
}

// lineTail keeps the last lines written, for error messages.
type lineTail struct {
	mu    sync.Mutex
	lines []string
	total uint64 // lines ever added
}

func newLineTail(n int) *lineTail { return &lineTail{lines: make([]string, n)} }

func (t *lineTail) add(line string) {
	t.mu.Lock()
	t.lines[t.total%uint64(len(t.lines))] = line
	t.total++
	t.mu.Unlock()
}

// mark returns a position for since.
func (t *lineTail) mark() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// since returns the kept lines added after mark, oldest first.
func (t *lineTail) since(mark uint64) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := uint64(len(t.lines))
	first := max(mark, t.total-min(t.total, n))
	out := make([]string, 0, t.total-first)
	for i := first; i < t.total; i++ {
		out = append(out, t.lines[i%n])
	}
	return out
}

// String returns the kept lines, oldest first.
func (t *lineTail) String() string { return strings.Join(t.since(0), "\n") }
