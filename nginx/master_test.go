package nginx

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// fakeMaster stands in for an NGINX master: it records signals, exits when killed or (unless it ignores
// it) on SIGQUIT, and shows the process tree a test sets.
type fakeMaster struct {
	pid    int
	stderr *io.PipeWriter
	exited chan struct{}
	once   sync.Once

	mu      sync.Mutex
	err     error
	signals []syscall.Signal // sent while it ran
	// groupKilled says its group was killed after it exited, as workers left behind hold the ports.
	groupKilled bool
	tree        processTree
	ignoreQuit  bool
}

func (m *fakeMaster) Pid() int { return m.pid }

func (m *fakeMaster) Signal(sig syscall.Signal) error {
	m.mu.Lock()
	m.signals = append(m.signals, sig)
	ignore := m.ignoreQuit
	m.mu.Unlock()
	if sig == syscall.SIGQUIT && !ignore {
		m.exit(nil)
	}
	return nil
}

func (m *fakeMaster) Kill() error {
	m.mu.Lock()
	select {
	case <-m.exited:
		m.groupKilled = true
	default:
		m.signals = append(m.signals, syscall.SIGKILL)
	}
	m.mu.Unlock()
	m.exit(errors.New("signal: killed"))
	return nil
}

func (m *fakeMaster) Wait() error {
	<-m.exited
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func (m *fakeMaster) Tree() processTree {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tree
}

// exit ends the master with err (nil: a clean exit); only the first call counts.
func (m *fakeMaster) exit(err error) {
	m.once.Do(func() {
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
		_ = m.stderr.Close()
		close(m.exited)
	})
}

// log writes a line to the master's stderr.
func (m *fakeMaster) log(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(m.stderr, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (m *fakeMaster) setTree(tree processTree) {
	m.mu.Lock()
	m.tree = tree
	m.mu.Unlock()
}

func (m *fakeMaster) sent() []syscall.Signal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]syscall.Signal(nil), m.signals...)
}

// fakeLauncher launches fakeMasters; setup, when set, prepares each before the Process sees it. With
// failAfter set, launches after that many fail.
type fakeLauncher struct {
	setup     func(m *fakeMaster)
	failAfter int

	mu      sync.Mutex
	masters []*fakeMaster
}

func (l *fakeLauncher) launch(ProcessConfig) (master, io.ReadCloser, error) {
	l.mu.Lock()
	if l.failAfter > 0 && len(l.masters) >= l.failAfter {
		l.mu.Unlock()
		return nil, nil, errors.New("start nginx: exec format error")
	}
	r, w := io.Pipe()
	m := &fakeMaster{pid: 1000 + len(l.masters), stderr: w, exited: make(chan struct{}),
		tree: processTree{Known: true, Loaded: true, Workers: 2}}
	l.masters = append(l.masters, m)
	l.mu.Unlock()
	if l.setup != nil {
		l.setup(m)
	}
	return m, r, nil
}

// master returns the nth master launched (1 for the first), or nil.
func (l *fakeLauncher) master(n int) *fakeMaster {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n < 1 || n > len(l.masters) {
		return nil
	}
	return l.masters[n-1]
}

// fakeProcess returns a Process on fake masters; cfg's zero fields get the tests' defaults.
func fakeProcess(t *testing.T, cfg ProcessConfig, l *fakeLauncher) *Process {
	t.Helper()
	cfg.launch = l.launch
	if cfg.Log == nil {
		cfg.Log = zaptest.NewLogger(t)
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff = time.Millisecond, 4*time.Millisecond
	}
	p := NewProcess(cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
	})
	return p
}

// TestProcessOnFakeMaster: the supervisor's answers to what a master does, without NGINX.
func TestProcessOnFakeMaster(t *testing.T) {
	t.Run("a crash is restarted and reported", func(t *testing.T) {
		var starts, exits atomic.Int32
		l := &fakeLauncher{}
		p := fakeProcess(t, ProcessConfig{OnStart: func(uint64) { starts.Add(1) }, OnExit: func(error) { exits.Add(1) }}, l)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		l.master(1).exit(errors.New("segfault"))
		eventually(t, "the restart", 10*time.Second, func() bool { return p.Starts() == 2 && p.Running() })
		first := l.master(1)
		first.mu.Lock()
		groupKilled := first.groupKilled
		first.mu.Unlock()
		if !groupKilled {
			t.Error("the crashed master's group was not killed: its workers would keep the ports")
		}
		if p.Restarts() != 1 || starts.Load() != 2 || exits.Load() != 1 || p.PID() != l.master(2).Pid() {
			t.Errorf("restarts %d, OnStart %d, OnExit %d, pid %d: want one restart on the second master", p.Restarts(), starts.Load(), exits.Load(), p.PID())
		}
		if err := p.Err(); err == nil || !strings.Contains(err.Error(), "segfault") {
			t.Errorf("Err() = %v, want the crash", err)
		}
	})
	t.Run("quick deaths in a row: gives up", func(t *testing.T) {
		l := &fakeLauncher{setup: func(m *fakeMaster) { m.exit(errors.New("exit status 1")) }}
		p := fakeProcess(t, ProcessConfig{MaxFailures: 2}, l)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "give up", 10*time.Second, func() bool { return p.GaveUp() })
		if p.Starts() != 3 || p.Running() {
			t.Errorf("starts %d, running %v: want 1 start + 2 restarts, then down", p.Starts(), p.Running())
		}
	})
	t.Run("reload signals the current master only", func(t *testing.T) {
		l := &fakeLauncher{}
		p := fakeProcess(t, ProcessConfig{}, l)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := p.reloadStart(2); !errors.Is(err, errStartChanged) {
			t.Errorf("reload of another start: %v, want errStartChanged", err)
		}
		if err := p.reloadStart(1); err != nil {
			t.Fatal(err)
		}
		if got := l.master(1).sent(); len(got) != 1 || got[0] != syscall.SIGHUP {
			t.Errorf("signals %v, want one SIGHUP", got)
		}
	})
	t.Run("restart replaces the master at once", func(t *testing.T) {
		l := &fakeLauncher{}
		p := fakeProcess(t, ProcessConfig{MinBackoff: time.Hour}, l)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := p.restart(1); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the next start", 10*time.Second, func() bool { return p.Starts() == 2 && p.Running() })
		if got := l.master(1).sent(); len(got) != 1 || got[0] != syscall.SIGKILL {
			t.Errorf("signals to the replaced master %v, want SIGKILL of its group", got)
		}
	})
	for name, tc := range map[string]struct {
		ignoreQuit bool
		wantErr    bool
		want       []syscall.Signal
	}{
		"stop: SIGQUIT ends it":                     {want: []syscall.Signal{syscall.SIGQUIT}},
		"stop: SIGQUIT ignored, killed at deadline": {ignoreQuit: true, wantErr: true, want: []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL}},
	} {
		t.Run(name, func(t *testing.T) {
			l := &fakeLauncher{setup: func(m *fakeMaster) { m.ignoreQuit = tc.ignoreQuit }}
			p := fakeProcess(t, ProcessConfig{}, l)
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ignoreQuit {
				cancel() // the deadline has passed: the graceful stop gets no time
			}
			defer cancel()
			if err := p.Stop(ctx); (err != nil) != tc.wantErr {
				t.Errorf("Stop: %v, want error %v", err, tc.wantErr)
			}
			got := l.master(1).sent()
			if strings.Join(signalNames(got), ",") != strings.Join(signalNames(tc.want), ",") || p.Running() || p.Restarts() != 0 {
				t.Errorf("signals %v, running %v, restarts %d; want %v and stopped", got, p.Running(), p.Restarts(), tc.want)
			}
		})
	}
}

func signalNames(sigs []syscall.Signal) []string {
	out := make([]string, len(sigs))
	for i, s := range sigs {
		out[i] = s.String()
	}
	return out
}

// TestProcessWorkersLostFromTree: a master that loaded its configuration and has no worker left counts
// as having lost its workers from its process tree alone, with no log line saying so, once a second look
// confirms it; a master still loading, or with workers, does not.
func TestProcessWorkersLostFromTree(t *testing.T) {
	tests := map[string]struct {
		tree processTree
		log  string
		want bool
	}{
		"loaded, workers":               {tree: processTree{Known: true, Loaded: true, Workers: 2}},
		"loading: no workers yet":       {tree: processTree{Known: true}},
		"tree unknown":                  {tree: processTree{}},
		"loaded, no workers":            {tree: processTree{Known: true, Loaded: true}, want: true},
		"logged, tree unknown":          {tree: processTree{}, log: "[alert] worker process 8 exited with fatal code 2 and cannot be respawned", want: true},
		"loaded, workers, other alerts": {tree: processTree{Known: true, Loaded: true, Workers: 1}, log: "[alert] something else"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := &fakeLauncher{setup: func(m *fakeMaster) { m.tree = tc.tree }}
			// The line is handed over, not logged: a log call after the test ended would race with it.
			var read atomic.Bool
			p := fakeProcess(t, ProcessConfig{OnStderrLine: func(string) { read.Store(true) }}, l)
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.log != "" {
				l.master(1).log(t, tc.log)
				eventually(t, "the line to be read", 5*time.Second, read.Load)
			}
			if p.workersLost(1) && !strings.Contains(tc.log, fatalWorkerExit) {
				t.Fatal("workers lost at the first look at the tree")
			}
			if tc.want {
				eventually(t, "workers lost", 5*time.Second, func() bool { return p.workersLost(1) })
			} else {
				settled := time.Now().Add(treeSettle)
				eventually(t, "a second look", 5*time.Second, func() bool { p.workersLost(1); return time.Now().After(settled) })
				if p.workersLost(1) {
					t.Error("workers lost")
				}
			}
			if p.workersLost(2) {
				t.Error("workers lost for a start that is not the current one")
			}
		})
	}
	t.Run("workers back between looks", func(t *testing.T) {
		l := &fakeLauncher{setup: func(m *fakeMaster) { m.tree = processTree{Known: true, Loaded: true} }}
		p := fakeProcess(t, ProcessConfig{}, l)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		p.workersLost(1)
		l.master(1).setTree(processTree{Known: true, Loaded: true, Workers: 1})
		p.workersLost(1)
		l.master(1).setTree(processTree{Known: true, Loaded: true})
		if p.workersLost(1) {
			t.Error("a look that found workers did not reset the first look")
		}
	})
}

// TestReadProcessTree reads process trees from a made-up /proc.
func TestReadProcessTree(t *testing.T) {
	const master = "nginx: master process nginx -p /x\x00\x00\x00"
	tests := map[string]struct {
		procs    map[string]string // pid -> cmdline
		children string            // the master's (pid 10) children, "" for no children file
		want     processTree
	}{
		"loaded with workers": {procs: map[string]string{"10": master, "11": "nginx: worker process\x00\x00", "12": "nginx: worker process\x00"}, children: "11 12 ",
			want: processTree{Known: true, Loaded: true, Workers: 2}},
		"reloading: old workers shutting down, new one forked": {procs: map[string]string{"10": master, "11": "nginx: worker process is shutting down\x00", "13": master}, children: "11 13",
			want: processTree{Known: true, Loaded: true, Workers: 1}},
		"workers lost: only old workers and a cache manager": {procs: map[string]string{"10": master, "11": "nginx: worker process is shutting down\x00", "14": "nginx: cache manager process\x00"}, children: "11 14",
			want: processTree{Known: true, Loaded: true}},
		"loading its configuration": {procs: map[string]string{"10": "nginx\x00-p\x00/x\x00", "15": "sleep\x000.05\x00"}, children: "15\n",
			want: processTree{Known: true}},
		"child gone while reading": {procs: map[string]string{"10": master}, children: "16",
			want: processTree{Known: true, Loaded: true}},
		"no children list": {procs: map[string]string{"10": master}},
		"master gone":      {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for pid, cmdline := range tc.procs {
				writeTestFile(t, filepath.Join(dir, pid, "cmdline"), cmdline)
			}
			if tc.children != "" {
				writeTestFile(t, filepath.Join(dir, "10", "task", "10", "children"), tc.children)
			}
			if got := readProcessTree(dir, 10); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func writeTestFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestExecMasterTree: the process tree of a real NGINX shows its workers, and shows them lost when
// every worker exits fatally at start.
func TestExecMasterTree(t *testing.T) {
	requireNginx(t)
	for name, fatal := range map[string]bool{"workers serve": false, "workers exit fatally": true} {
		t.Run(name, func(t *testing.T) {
			paths, cfg := startConfig(t)
			conf := mustRender(t, Model{}, cfg)
			if fatal {
				conf = fatalWorkers(t, conf)
			}
			writeTestFile(t, paths.ConfFile(), string(conf))
			pc := ProcessConfig{Paths: paths}.withDefaults()
			m, stderr, err := launchExec(pc)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			var outMu sync.Mutex
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := stderr.Read(buf)
					outMu.Lock()
					out.Write(buf[:n])
					outMu.Unlock()
					if err != nil {
						return
					}
				}
			}()
			t.Cleanup(func() { _ = m.Kill(); _ = m.Wait() })
			// A fatal exit is judged once the master said so, when the last worker may be gone.
			eventually(t, "the tree to show the workers", 30*time.Second, func() bool {
				outMu.Lock()
				said := strings.Contains(out.String(), fatalWorkerExit)
				outMu.Unlock()
				tree := m.Tree()
				if fatal {
					return said && tree.workersLost()
				}
				return tree.Loaded && tree.Workers > 0 && !tree.workersLost()
			})
		})
	}
}
