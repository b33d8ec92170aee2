package requestmetrics

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const stubStatus = `Active connections: 3 
server accepts handled requests
 10 9 42 
Reading: 0 Writing: 1 Waiting: 2 
`

func TestParseStubStatus(t *testing.T) {
	s, err := ParseStubStatus([]byte(stubStatus))
	if err != nil || s != (StubStatus{Active: 3, Accepted: 10, Handled: 9, Requests: 42, Reading: 0, Writing: 1, Waiting: 2}) {
		t.Errorf("%+v, %v", s, err)
	}
	if _, err := ParseStubStatus([]byte("Active connections: x\n")); err == nil {
		t.Error("a broken page parsed")
	}
}

// TestProcessCollector reads this test process as if it were NGINX's master: its /proc entries are real.
func TestProcessCollector(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "nginx.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&ProcessCollector{PIDFile: pidFile, Status: func(context.Context) ([]byte, error) { return []byte(stubStatus), nil }})
	for name, ok := range map[string]func(float64) bool{
		"num_procs":                 func(v float64) bool { return v >= 1 },
		"resident_memory_bytes":     func(v float64) bool { return v > 1<<20 },
		"virtual_memory_bytes":      func(v float64) bool { return v > 1<<20 },
		"oldest_start_time_seconds": func(v float64) bool { return v > 1.7e9 },
		"requests_total":            func(v float64) bool { return v == 42 },
	} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() != Prefix+"nginx_process_"+name {
				continue
			}
			found = true
			m := mf.GetMetric()[0]
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			if !ok(v) {
				t.Errorf("%s = %g", name, v)
			}
		}
		if !found {
			t.Errorf("no %s", name)
		}
	}
	want := `# HELP nginx_ingress_controller_nginx_process_connections_total total number of connections with state {accepted, handled}
# TYPE nginx_ingress_controller_nginx_process_connections_total counter
nginx_ingress_controller_nginx_process_connections_total{state="accepted"} 10
nginx_ingress_controller_nginx_process_connections_total{state="handled"} 9
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), Prefix+"nginx_process_connections_total"); err != nil {
		t.Error(err)
	}
	// Without NGINX (no pid file), nothing of the processes.
	if err := os.Remove(pidFile); err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.GatherAndCount(reg, Prefix+"nginx_process_num_procs"); n != 0 {
		t.Errorf("%d num_procs series without NGINX", n)
	}
}
