package requestmetrics

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ProcessCollector exports ingress-nginx's nginx_ingress_controller_nginx_process_* metrics: the NGINX
// master and its workers read from /proc (summed), and NGINX's stub_status counters.
type ProcessCollector struct {
	// PIDFile is NGINX's pid file (the master's PID).
	PIDFile string
	// Status returns the body of NGINX's stub_status page; nil leaves the connection metrics out.
	Status func(ctx context.Context) ([]byte, error)
	// ConstLabels are ingress-nginx's constant labels.
	ConstLabels prometheus.Labels
	// Proc is /proc (tests use another root).
	Proc string
}

func (p *ProcessCollector) desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(Prefix+"nginx_process_"+name, help, labels, p.ConstLabels)
}

// Describe implements prometheus.Collector (unchecked: the set depends on what can be read).
func (p *ProcessCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (p *ProcessCollector) Collect(ch chan<- prometheus.Metric) {
	if s, ok := p.readProcesses(); ok {
		ch <- prometheus.MustNewConstMetric(p.desc("num_procs", "number of processes"), prometheus.GaugeValue, float64(s.procs))
		ch <- prometheus.MustNewConstMetric(p.desc("cpu_seconds_total", "Cpu usage in seconds"), prometheus.CounterValue, s.cpu)
		ch <- prometheus.MustNewConstMetric(p.desc("resident_memory_bytes", "number of bytes of memory in use"), prometheus.GaugeValue, s.rss)
		ch <- prometheus.MustNewConstMetric(p.desc("virtual_memory_bytes", "number of bytes of memory in use"), prometheus.GaugeValue, s.vsize)
		ch <- prometheus.MustNewConstMetric(p.desc("oldest_start_time_seconds", "start time in seconds since 1970/01/01"), prometheus.GaugeValue, s.oldest)
		if s.io {
			ch <- prometheus.MustNewConstMetric(p.desc("read_bytes_total", "number of bytes read"), prometheus.CounterValue, s.read)
			ch <- prometheus.MustNewConstMetric(p.desc("write_bytes_total", "number of bytes written"), prometheus.CounterValue, s.write)
		}
	}
	if p.Status == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, err := p.Status(ctx)
	if err != nil {
		return
	}
	st, err := ParseStubStatus(body)
	if err != nil {
		return
	}
	conns := p.desc("connections", "current number of client connections with state {active, reading, writing, waiting}", "state")
	for _, c := range []struct {
		state string
		v     float64
	}{{"active", st.Active}, {"reading", st.Reading}, {"writing", st.Writing}, {"waiting", st.Waiting}} {
		ch <- prometheus.MustNewConstMetric(conns, prometheus.GaugeValue, c.v, c.state)
	}
	total := p.desc("connections_total", "total number of connections with state {accepted, handled}", "state")
	ch <- prometheus.MustNewConstMetric(total, prometheus.CounterValue, st.Accepted, "accepted")
	ch <- prometheus.MustNewConstMetric(total, prometheus.CounterValue, st.Handled, "handled")
	ch <- prometheus.MustNewConstMetric(p.desc("requests_total", "total number of client requests"), prometheus.CounterValue, st.Requests)
}

type processSums struct {
	procs                   int
	cpu, rss, vsize, oldest float64
	read, write             float64
	io                      bool
}

// readProcesses sums the NGINX master and its children; false when NGINX is not running.
func (p *ProcessCollector) readProcesses() (processSums, bool) {
	proc := p.Proc
	if proc == "" {
		proc = "/proc"
	}
	raw, err := os.ReadFile(p.PIDFile)
	if err != nil {
		return processSums{}, false
	}
	master, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return processSums{}, false
	}
	boot := bootTime(proc)
	pids := []int{master}
	entries, _ := os.ReadDir(proc)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == master {
			continue
		}
		if st, ok := readStat(proc, pid); ok && st.ppid == master {
			pids = append(pids, pid)
		}
	}
	var s processSums
	s.io = true
	for _, pid := range pids {
		st, ok := readStat(proc, pid)
		if !ok {
			if pid == master {
				return processSums{}, false
			}
			continue
		}
		s.procs++
		s.cpu += st.cpu
		s.rss += st.rss
		s.vsize += st.vsize
		if start := boot + st.start; s.oldest == 0 || start < s.oldest {
			s.oldest = start
		}
		r, w, ok := readIO(proc, pid)
		s.read += r
		s.write += w
		s.io = s.io && ok
	}
	return s, true
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

type procStat struct {
	ppid            int
	cpu, rss, vsize float64
	start           float64 // seconds after boot
}

// readStat reads /proc/<pid>/stat: fields after the command name (which may hold spaces and parentheses).
func readStat(proc string, pid int) (procStat, bool) {
	raw, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(raw[i+1:]))
	// f[0] is field 3 (state): ppid 4, utime 14, stime 15, starttime 22, vsize 23, rss 24.
	if len(f) < 22 {
		return procStat{}, false
	}
	num := func(field int) float64 {
		v, _ := strconv.ParseFloat(f[field-3], 64)
		return v
	}
	return procStat{ppid: int(num(4)), cpu: (num(14) + num(15)) / clockTicks, start: num(22) / clockTicks,
		vsize: num(23), rss: num(24) * float64(os.Getpagesize())}, true
}

func readIO(proc string, pid int) (read, write float64, ok bool) {
	f, err := os.Open(filepath.Join(proc, strconv.Itoa(pid), "io"))
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
		switch k {
		case "rchar":
			read = n
		case "wchar":
			write = n
		}
	}
	return read, write, sc.Err() == nil
}

func bootTime(proc string) float64 {
	raw, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n
		}
	}
	return 0
}

// StubStatus is NGINX's stub_status page.
type StubStatus struct {
	Active, Accepted, Handled, Requests, Reading, Writing, Waiting float64
}

// ParseStubStatus parses the body of NGINX's stub_status page.
func ParseStubStatus(b []byte) (StubStatus, error) {
	var s StubStatus
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		return s, fmt.Errorf("stub_status: %d lines, want 4", len(lines))
	}
	if _, err := fmt.Sscanf(lines[0], "Active connections: %g", &s.Active); err != nil {
		return s, fmt.Errorf("stub_status: %w", err)
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(lines[2]), "%g %g %g", &s.Accepted, &s.Handled, &s.Requests); err != nil {
		return s, fmt.Errorf("stub_status: %w", err)
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(lines[3]), "Reading: %g Writing: %g Waiting: %g", &s.Reading, &s.Writing, &s.Waiting); err != nil {
		return s, fmt.Errorf("stub_status: %w", err)
	}
	return s, nil
}
