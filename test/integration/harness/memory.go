//go:build integration

package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Memory is the resident memory of one or more processes, in bytes, read from /proc.
type Memory struct {
	// RSS is the sum of VmRSS: a page shared by several of the processes counts once per process.
	RSS int64
	// PSS is the sum of the proportional set sizes (smaps_rollup), which split shared pages
	// between the processes that map them, so that each page counts once.
	PSS int64
	// PeakRSS is the sum of VmHWM, each process's highest RSS so far.
	PeakRSS int64
	// Anon is the anonymous part of RSS (RssAnon: heaps and stacks); the rest maps files, mostly the
	// executable and its libraries.
	Anon int64
	// Processes is how many processes were summed.
	Processes int
}

// String gives the sizes in MiB.
func (m Memory) String() string {
	const mib = 1 << 20
	return fmt.Sprintf("RSS %.0f MiB (anonymous %.0f), PSS %.0f MiB, peak RSS %.0f MiB (%d processes)",
		float64(m.RSS)/mib, float64(m.Anon)/mib, float64(m.PSS)/mib, float64(m.PeakRSS)/mib, m.Processes)
}

// errExited marks a read of a process that has exited (or is a zombie).
var errExited = errors.New("the process has exited")

// ProcessMemory sums the memory of the processes pids.
func ProcessMemory(pids ...int) (Memory, error) {
	var sum Memory
	for _, pid := range pids {
		m, err := processMemory(pid)
		if err != nil {
			return sum, err
		}
		sum.add(m)
	}
	return sum, nil
}

func processMemory(pid int) (Memory, error) {
	status, err := procFields(pid, "status", "VmRSS:", "VmHWM:", "RssAnon:")
	if err != nil {
		return Memory{}, err
	}
	rollup, err := procFields(pid, "smaps_rollup", "Pss:")
	if err != nil {
		return Memory{}, err
	}
	return Memory{RSS: status["VmRSS:"], PSS: rollup["Pss:"], PeakRSS: status["VmHWM:"], Anon: status["RssAnon:"], Processes: 1}, nil
}

func (m *Memory) add(o Memory) {
	m.RSS += o.RSS
	m.PSS += o.PSS
	m.PeakRSS += o.PeakRSS
	m.Anon += o.Anon
	m.Processes += o.Processes
}

// procFields reads the "Name: N kB" lines of /proc/<pid>/<file> named by keys, in bytes; it fails with
// errExited when the process is gone or a zombie.
func procFields(pid int, file string, keys ...string) (map[string]int64, error) {
	path := filepath.Join("/proc", strconv.Itoa(pid), file)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return nil, fmt.Errorf("read %s: %w", path, errExited)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[2] == "kB" && slices.Contains(keys, f[0]) {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
			}
			out[f[0]] = n << 10
		}
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			// A zombie's status has no memory lines, and its smaps_rollup is empty.
			return nil, fmt.Errorf("%s has no %s line: %w", path, k, errExited)
		}
	}
	return out, nil
}

// Children lists the processes whose parent is pid.
func Children(pid int) ([]int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []int
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// The command name in parentheses may hold spaces; the fields after the last ')' are
		// the state and then the parent's PID.
		rest := b[bytes.LastIndexByte(b, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out, nil
}

// NginxMemory sums the memory of the NGINX master this reactor runs and of its children (workers,
// workers of a previous configuration still draining, cache processes).
func (r *Reactor) NginxMemory() (Memory, error) {
	master, err := r.NginxMasterPID()
	if err != nil {
		return Memory{}, err
	}
	m, err := processMemory(master)
	if err != nil {
		return m, err
	}
	children, err := Children(master)
	if err != nil {
		return m, err
	}
	for _, pid := range children {
		c, err := processMemory(pid)
		if errors.Is(err, errExited) {
			continue // a worker of a previous configuration that exited meanwhile
		}
		if err != nil {
			return m, err
		}
		m.add(c)
	}
	return m, nil
}

// Memory reads the memory of the controller process alone (NGINX not included).
func (r *Reactor) Memory() (Memory, error) { return ProcessMemory(r.Pid()) }

// WaitNginxDrained waits until no NGINX worker of a previous configuration is still shutting down
// (NGINX retitles those "worker process is shutting down"), so that memory read next is the running
// configuration's alone.
func (r *Reactor) WaitNginxDrained(timeout time.Duration) {
	r.t.Helper()
	r.Eventually(timeout, "NGINX's workers of previous configurations to exit", func() (bool, string) {
		master, err := r.NginxMasterPID()
		if err != nil {
			return false, err.Error()
		}
		children, err := Children(master)
		if err != nil {
			return false, err.Error()
		}
		draining := 0
		for _, pid := range children {
			// An exiting worker (a zombie until the master reaps it) has no command line left.
			title, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			if err == nil && (len(title) == 0 || bytes.Contains(title, []byte("shutting down"))) {
				draining++
			}
		}
		return draining == 0, fmt.Sprintf("%d of NGINX's %d children shutting down", draining, len(children))
	})
}
