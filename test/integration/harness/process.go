//go:build integration

package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ingress-reactor/ingress-reactor/internal/freeport"
)

// Process is a child process started by a test: its combined output is captured, and
// it is stopped with SIGTERM when the test ends (see Stop).
type Process struct {
	// Name identifies the process in messages.
	Name string

	cmd  *exec.Cmd
	out  lockedBuffer
	done chan struct{}

	mu      sync.Mutex
	stopped bool // Stop was called
	exitErr error
}

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of stdout and stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// streamLogs reports whether INTEGRATION_LOGS=1 asks for process output on success too.
func streamLogs() bool { return os.Getenv("INTEGRATION_LOGS") == "1" }

// StartProcess starts bin with args and extra environment variables (added to this
// process's environment). When the test ends it is stopped as by Stop unless the test
// stopped it already; its output is attached to the test log if the test failed (or
// always with INTEGRATION_LOGS=1).
func StartProcess(t testing.TB, name, bin string, args, env []string) *Process {
	t.Helper()
	p := &Process{Name: name, done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	// Its own process group, so that helpers it starts (NGINX) can be found and killed
	// if it does not stop them; and it dies with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s (%s): %v", name, bin, err)
	}
	p.cmd = cmd
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if !stopped {
			if code := p.Stop(t); code != 0 {
				t.Errorf("%s exited with code %d after SIGTERM, want 0", name, code)
			}
		}
		if t.Failed() || streamLogs() {
			t.Logf("----- output of %s (%s) -----\n%s----- end of %s -----", name, cmd, p.Output(), name)
		}
	})
	return p
}

// Output returns everything the process wrote to stdout and stderr so far.
func (p *Process) Output() string { return p.out.String() }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// exitCode returns the exit code of an exited process, or -1 when a signal killed it.
func (p *Process) exitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitErr == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.exitErr, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// ExitDescription says how the process ended ("" while it runs), for messages.
func (p *Process) ExitDescription() string {
	select {
	case <-p.done:
	default:
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitErr == nil {
		return fmt.Sprintf("%s exited with code 0", p.Name)
	}
	return fmt.Sprintf("%s exited: %v", p.Name, p.exitErr)
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends SIGTERM and waits up to StopTimeout for the process to exit. If it does
// not, the process group is killed and the test fails. It also fails the test if the
// process had already exited on its own, or if it left processes behind in its process
// group. It returns the exit code (-1 when killed by a signal).
func (p *Process) Stop(t testing.TB) int {
	t.Helper()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()

	select {
	case <-p.done:
		t.Errorf("%s was not running when the test stopped it: %s", p.Name, p.ExitDescription())
		return p.exitCode()
	default:
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("send SIGTERM to %s: %v", p.Name, err)
	}
	select {
	case <-p.done:
	case <-time.After(StopTimeout):
		t.Errorf("%s did not exit within %s of SIGTERM; killing it", p.Name, StopTimeout)
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.done
	}
	// Anything still in the group (NGINX master or workers) outlived the process.
	if err := syscall.Kill(-p.Pid(), 0); err == nil {
		t.Errorf("%s left processes behind in its process group %d after exiting; killing them", p.Name, p.Pid())
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	}
	return p.exitCode()
}

// Wait waits up to timeout for the process to exit on its own and returns its exit
// code (-1 when killed by a signal). On timeout it kills the process and fails the test.
func (p *Process) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Errorf("%s did not exit within %s; killing it", p.Name, timeout)
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.done
	}
	return p.exitCode()
}

// FreePort returns a TCP port that is free on all interfaces and was not returned
// before in this run.
func FreePort(t testing.TB) int { t.Helper(); return freeport.Get(t) }
