package nginx

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// master is one started NGINX master process as the Process supervises it. It is the seam between the
// lifecycle and the operating system: unit tests put a fake behind it and run without NGINX.
type master interface {
	// Pid is the master's process ID.
	Pid() int
	// Signal sends sig to the master alone (SIGHUP reloads, SIGQUIT stops gracefully).
	Signal(sig syscall.Signal) error
	// Kill sends SIGKILL to the master and every process of its group, its workers included.
	Kill() error
	// Wait blocks until the master exited and returns why.
	Wait() error
	// Tree describes the master's processes as they are now.
	Tree() processTree
}

// processTree is what the operating system shows of a master and its children.
type processTree struct {
	// Known is false when the tree could not be read (the master is gone, or /proc lacks children lists).
	Known bool
	// Loaded says the master has loaded its configuration: NGINX names itself "nginx: master process"
	// only then, right before it forks its workers.
	Loaded bool
	// Workers counts the worker processes of the current configuration, those still initializing
	// included (a fresh fork carries the master's title until it names itself); those of a previous
	// configuration, "shutting down", are not counted.
	Workers int
}

// workersLost says the master loaded its configuration and has no worker left: NGINX does not respawn
// a worker that exited with a fatal code, and a master without workers answers nothing.
func (t processTree) workersLost() bool { return t.Known && t.Loaded && t.Workers == 0 }

// launchFunc starts a master for cfg and returns it with a reader of its stderr.
type launchFunc func(cfg ProcessConfig) (master, io.ReadCloser, error)

// launchExec starts NGINX in the foreground, in its own process group.
func launchExec(cfg ProcessConfig) (master, io.ReadCloser, error) {
	cmd := exec.Command(cfg.Binary, "-p", cfg.Paths.Prefix, "-c", cfg.Paths.ConfFile(), "-e", "stderr")
	cmd.Dir = cfg.Paths.Prefix
	cmd.Stdout = cfg.Stdout
	// Workers inherit the pipe; WaitDelay keeps Wait from blocking on them if the master dies alone.
	cmd.WaitDelay = time.Second
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("nginx stderr pipe: %w", err)
	}
	cmd.Stderr = w
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group, so that workers left behind by a killed master can be killed with it.
		Setpgid: true,
		// If the controller dies, NGINX stops too instead of holding the ports.
		Pdeathsig: syscall.SIGTERM,
	}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, nil, fmt.Errorf("start %s: %w", cfg.Binary, err)
	}
	_ = w.Close()
	return execMaster{cmd: cmd}, r, nil
}

// execMaster is a master started by launchExec.
type execMaster struct{ cmd *exec.Cmd }

func (m execMaster) Pid() int { return m.cmd.Process.Pid }

func (m execMaster) Signal(sig syscall.Signal) error {
	if err := m.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal nginx %s: %w", sig, err)
	}
	return nil
}

func (m execMaster) Kill() error {
	if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill nginx's process group: %w", err)
	}
	return nil
}

func (m execMaster) Wait() error { return m.cmd.Wait() }

func (m execMaster) Tree() processTree { return readProcessTree("/proc", m.cmd.Process.Pid) }

// readProcessTree reads the tree of the master pid from the proc file system mounted at procDir.
func readProcessTree(procDir string, pid int) processTree {
	title, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return processTree{}
	}
	children, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
	if err != nil {
		return processTree{}
	}
	t := processTree{Known: true, Loaded: hasTitle(title, "nginx: master process")}
	for _, child := range strings.Fields(string(children)) {
		title, err := os.ReadFile(filepath.Join(procDir, child, "cmdline"))
		starting := hasTitle(title, "nginx: master process")
		serving := hasTitle(title, "nginx: worker process") && !bytes.Contains(title, []byte("shutting down"))
		if err == nil && (starting || serving) {
			t.Workers++
		}
	}
	return t
}

// hasTitle reports whether a /proc cmdline starts with title. NGINX overwrites its argument area
// with its title, padded with NULs.
func hasTitle(cmdline []byte, title string) bool {
	return bytes.HasPrefix(cmdline, []byte(title))
}
