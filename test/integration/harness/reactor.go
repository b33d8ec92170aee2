//go:build integration

package harness

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Reactor is a running ingress-reactor process started by Fixture.StartReactor, with
// the ports and directories chosen for it.
type Reactor struct {
	*Process

	// HealthzPort serves /healthz, /readyz and /metrics.
	HealthzPort int
	// HTTPPort and HTTPSPort are NGINX's listeners.
	HTTPPort, HTTPSPort int
	// NginxStatusPort is NGINX's internal loopback port.
	NginxStatusPort int
	// NginxDir and SSLDir are the working directories given to the binary.
	NginxDir, SSLDir string
	// Args are the command-line arguments it was started with.
	Args []string

	t testing.TB
}

// StartReactor starts the ingress-reactor binary against the shared API server, scoped
// to the fixture's namespace and classes, on freshly allocated ports. extraArgs come
// last, so they override the defaults (the binary uses Go's flag package: the last
// value of a flag wins). The process is stopped with SIGTERM at the end of the test and
// must exit with code 0 then.
func (f *Fixture) StartReactor(extraArgs ...string) *Reactor {
	f.T.Helper()
	args := []string{
		"--kubeconfig=" + f.Env.KubeconfigPath,
		"--controller-class=" + f.ControllerClass,
		"--ingress-class=" + f.IngressClass,
		"--watch-namespace=" + f.Namespace,
		"--log-level=debug",
		"--log-format=console",
		"--update-status=false",
		"--election-id=ingress-reactor-" + f.ID,
	}
	return f.startReactor(append(args, extraArgs...), nil, "ingress-reactor-"+f.ID)
}

// StartReactorWith starts the binary with args as they are (for example a Helm chart's), followed only by
// the ports and directories the harness allocates, and POD_NAMESPACE set to the fixture's namespace and
// POD_NAME to pod. Nothing else of StartReactor's defaults applies: args must name --kubeconfig.
func (f *Fixture) StartReactorWith(pod string, args ...string) *Reactor {
	f.T.Helper()
	return f.startReactor(nil, args, pod)
}

// startReactor starts the binary with first, then the allocated ports and directories, then last.
func (f *Fixture) startReactor(first, last []string, pod string) *Reactor {
	f.T.Helper()
	dir, err := os.MkdirTemp("", "ir-") // short: NGINX may put sockets here
	if err != nil {
		f.T.Fatalf("reactor work dir: %v", err)
	}
	f.T.Cleanup(func() { _ = os.RemoveAll(dir) })
	// MkdirTemp makes it 0700; NGINX workers run as another user when the tests run as
	// root, and must reach the temp paths below it.
	if err := os.Chmod(dir, 0o755); err != nil {
		f.T.Fatalf("reactor work dir: %v", err)
	}

	r := &Reactor{
		HealthzPort:     FreePort(f.T),
		HTTPPort:        FreePort(f.T),
		HTTPSPort:       FreePort(f.T),
		NginxStatusPort: FreePort(f.T),
		NginxDir:        dir + "/nginx",
		SSLDir:          dir + "/ssl",
		t:               f.T,
	}
	ports := []string{
		"--healthz-port=" + strconv.Itoa(r.HealthzPort),
		"--http-port=" + strconv.Itoa(r.HTTPPort),
		"--https-port=" + strconv.Itoa(r.HTTPSPort),
		"--nginx-status-port=" + strconv.Itoa(r.NginxStatusPort),
		"--nginx-dir=" + r.NginxDir,
		"--ssl-dir=" + r.SSLDir,
	}
	if first != nil {
		// StartReactor's order: its defaults and the ports first, the caller's arguments last (they win).
		r.Args = append(append(append([]string{}, first[:1]...), ports...), first[1:]...)
	} else {
		// StartReactorWith's: the caller's arguments first, the allocated ports override theirs.
		r.Args = append(append([]string{}, last...), ports...)
	}
	env := []string{
		"POD_NAMESPACE=" + f.Namespace,
		"POD_NAME=" + pod,
		"KUBECONFIG=", // only --kubeconfig counts
	}
	r.Process = StartProcess(f.T, "ingress-reactor", f.Env.ReactorBinary, r.Args, env)
	return r
}

// HealthzURL is the URL of path on the healthz port.
func (r *Reactor) HealthzURL(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", r.HealthzPort, path)
}

// Eventually is harness.Eventually that gives up at once, with the reason, when the
// process has exited.
func (r *Reactor) Eventually(timeout time.Duration, what string, cond func() (ok bool, seen string)) {
	r.t.Helper()
	seen, ok := poll(timeout, r.ExitDescription, cond)
	if !ok {
		r.t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, seen)
	}
}

// Measure polls cond every interval, without Eventually's growing back-off (which would
// round a measured wait up), and returns how long after since cond first held. It fails
// the test after timeout, or at once when the process has exited.
func (r *Reactor) Measure(since time.Time, timeout, interval time.Duration, what string, cond func() (ok bool, seen string)) time.Duration {
	r.t.Helper()
	seen, ok := pollBetween(timeout, interval, interval, r.ExitDescription, cond)
	took := time.Since(since)
	if !ok {
		r.t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, seen)
	}
	return took
}

// Ready is a condition for Eventually and Measure: /readyz answers 200.
func (r *Reactor) Ready() (bool, string) {
	code, body, err := r.GetHealthz("/readyz")
	if err != nil {
		return false, err.Error()
	}
	return code == http.StatusOK, fmt.Sprintf("status %d: %s", code, body)
}

// GetHealthz fetches path from the healthz port and returns the status code and body.
func (r *Reactor) GetHealthz(path string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(r.HealthzURL(path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}

// WaitReady waits until /readyz answers 200.
func (r *Reactor) WaitReady() {
	r.t.Helper()
	r.Eventually(DefaultTimeout, "/readyz to return 200", r.Ready)
}

// Metrics scrapes /metrics.
func (r *Reactor) Metrics() (Metrics, error) {
	return ScrapeMetrics(r.HealthzURL("/metrics"))
}

// WaitMetric waits until the value of metric name over the samples matching labels
// (see Metrics.Value) satisfies cond; want describes cond for the failure message.
func (r *Reactor) WaitMetric(name string, labels map[string]string, want string, cond func(float64) bool) float64 {
	r.t.Helper()
	var got float64
	r.Eventually(DefaultTimeout, fmt.Sprintf("metric %s%v %s", name, labels, want), func() (bool, string) {
		m, err := r.Metrics()
		if err != nil {
			return false, err.Error()
		}
		v, ok := m.Value(name, labels)
		if !ok {
			return false, "no matching sample; have " + m.Describe(name)
		}
		got = v
		return cond(v), m.Describe(name)
	})
	return got
}

// WaitLog waits until the process output contains substr and returns the first line
// that contains it.
func (r *Reactor) WaitLog(substr string) string {
	r.t.Helper()
	var line string
	r.Eventually(DefaultTimeout, fmt.Sprintf("a log line containing %q", substr), func() (bool, string) {
		out := r.Output()
		i := strings.Index(out, substr)
		if i < 0 {
			return false, fmt.Sprintf("%d bytes of output without it", len(out))
		}
		start := strings.LastIndexByte(out[:i], '\n') + 1
		end := strings.IndexByte(out[i:], '\n')
		if end < 0 {
			end = len(out) - i
		}
		line = out[start : i+end]
		return true, line
	})
	return line
}

// SaveHeapProfile writes the controller's heap profile, taken after a garbage collection, to file. The
// controller must run with --profiling.
func (r *Reactor) SaveHeapProfile(file string) error {
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get(r.HealthzURL("/debug/pprof/heap?gc=1"))
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: status %d (is --profiling set?)", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return os.WriteFile(file, b, 0o600)
}
