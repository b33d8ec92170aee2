//go:build integration

package harness

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// servedBy names who answered a response: the echoserver's name, or "status N" when
// something else (NGINX itself) answered.
func servedBy(resp *Response) string {
	if resp.Echo != nil {
		return resp.Echo.Name
	}
	return "status " + strconv.Itoa(resp.Status)
}

// WaitServedBy waits until a GET of path with Host host answers 200 from the backend
// named backend, and returns that response.
func (r *Reactor) WaitServedBy(host, path, backend string) *Response {
	r.t.Helper()
	var last *Response
	r.Eventually(DefaultTimeout, fmt.Sprintf("%s%s to be served by backend %q", host, path, backend), func() (bool, string) {
		resp, err := r.Get(host, path)
		if err != nil {
			return false, err.Error()
		}
		last = resp
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Name == backend, resp.String()
	})
	return last
}

// WaitNotRouted waits until a GET of path with Host host gets a 404 that NGINX itself
// answered (no backend), which is what a host or path that no Ingress routes gets.
func (r *Reactor) WaitNotRouted(host, path string) {
	r.t.Helper()
	r.Eventually(DefaultTimeout, fmt.Sprintf("%s%s to answer 404 from NGINX, not from a backend", host, path), func() (bool, string) {
		resp, err := r.Get(host, path)
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == http.StatusNotFound && resp.Echo == nil, resp.String()
	})
}

// Spread sends n GETs of path with Host host and counts who answered each (see
// servedBy: a backend name, or "status N" for answers that came from no backend).
func (r *Reactor) Spread(host, path string, n int) (map[string]int, error) {
	counts := map[string]int{}
	for range n {
		resp, err := r.Get(host, path)
		if err != nil {
			return counts, err
		}
		counts[servedBy(resp)]++
	}
	return counts, nil
}

// SpreadRequests is how many requests WaitSpread sends per attempt: enough for a
// round-robin over a few endpoints, spread over several NGINX workers, to reach each.
const SpreadRequests = 24

// WaitSpread waits until SpreadRequests consecutive GETs of path with Host host are
// all answered by the named backends, each of them at least once, and returns the
// counts of the last attempt. It is how a test sees that an endpoint set took effect:
// backends outside the set keep running, so a request that still reached one would
// show up under its name.
func (r *Reactor) WaitSpread(host, path string, backends ...string) map[string]int {
	r.t.Helper()
	want := slices.Sorted(slices.Values(backends))
	var last map[string]int
	r.Eventually(DefaultTimeout, fmt.Sprintf("%s%s to be served by exactly %v", host, path, want), func() (bool, string) {
		counts, err := r.Spread(host, path, SpreadRequests)
		if err != nil {
			return false, err.Error()
		}
		last = counts
		return slices.Equal(slices.Sorted(maps.Keys(counts)), want), fmt.Sprintf("%v", counts)
	})
	return last
}

// MetricValue scrapes /metrics and returns the value of name over the samples matching
// labels (see Metrics.Value); it fails the test when no sample matches.
func (r *Reactor) MetricValue(name string, labels map[string]string) float64 {
	r.t.Helper()
	m, err := r.Metrics()
	if err != nil {
		r.t.Fatalf("scrape /metrics: %v", err)
	}
	v, ok := m.Value(name, labels)
	if !ok {
		r.t.Fatalf("/metrics has no sample of %s matching %v; have %s", name, labels, m.Describe(name))
	}
	return v
}

// LiveConfigHash asks NGINX's internal status server which configuration it runs.
func (r *Reactor) LiveConfigHash() (string, error) {
	token, err := r.StatusToken()
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/configuration/hash", r.NginxStatusPort), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set(statusTokenHeader, token)
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("ask NGINX for its configuration hash: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("ask NGINX for its configuration hash: status %d %q: %v", resp.StatusCode, b, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// statusTokenHeader carries the status server's token; spelled out, as the binary's users see it.
const statusTokenHeader = "X-Ingress-Reactor-Token"

// StatusToken reads the token every request to NGINX's status server must carry from the nginx.conf
// the controller wrote.
func (r *Reactor) StatusToken() (string, error) {
	conf, err := os.ReadFile(r.NginxDir + "/nginx.conf")
	if err != nil {
		return "", fmt.Errorf("read nginx.conf for the status token: %w", err)
	}
	m := regexp.MustCompile(`set \$ingress_reactor_token "([0-9a-f]+)";`).FindSubmatch(conf)
	if m == nil {
		return "", fmt.Errorf("nginx.conf has no status token")
	}
	return string(m[1]), nil
}

// Metric names the tests of the data plane read.
const (
	// ReloadsMetric counts attempts to apply a configuration, by result.
	ReloadsMetric = "ingress_reactor_reloads_total"
	// ConfigHashMetric is the live configuration's hash as a number (its first 52 bits).
	ConfigHashMetric = "ingress_reactor_config_hash"
)

// WaitConfigSettled waits until the controller has finished recording the configuration
// NGINX runs (its config-hash metric names the hash NGINX reports), and returns the
// reloads counter then. Call it once traffic shows the configuration a test wants: the
// reloader counts a reload only after confirming it live, so traffic alone can run ahead
// of the counter.
//
// Right after a reload a worker of the previous configuration may still accept a connection and
// answer the old hash, so the live hash counts only once several fresh connections in a row agree.
func (r *Reactor) WaitConfigSettled() float64 {
	r.t.Helper()
	return r.WaitConfigSettledWithin(DefaultTimeout)
}

// WaitConfigSettledWithin is WaitConfigSettled with its own bound, for configurations
// whose apply takes longer than DefaultTimeout (thousands of Ingresses).
func (r *Reactor) WaitConfigSettledWithin(timeout time.Duration) float64 {
	r.t.Helper()
	var reloads float64
	r.Eventually(timeout, "the config-hash metric to match the configuration NGINX runs", func() (bool, string) {
		live, err := r.LiveConfigHash()
		if err != nil {
			return false, err.Error()
		}
		for range 4 {
			again, err := r.LiveConfigHash()
			if err != nil {
				return false, err.Error()
			}
			if again != live {
				return false, fmt.Sprintf("NGINX answers both %s and %s: a previous configuration's workers are still accepting", live, again)
			}
		}
		m, err := r.Metrics()
		if err != nil {
			return false, err.Error()
		}
		got, _ := m.Value(ConfigHashMetric, nil)
		reloads, _ = m.Value(ReloadsMetric, nil)
		want, ok := hashNumber(live)
		if !ok {
			return false, fmt.Sprintf("NGINX reports hash %q, not hex", live)
		}
		return got == want, fmt.Sprintf("NGINX runs %s (%g), metric says %g", live, want, got)
	})
	return reloads
}

// hashNumber is the value the config-hash metric carries for a hex hash: its first 13
// hex digits (52 bits, which a float64 holds exactly).
func hashNumber(hash string) (float64, bool) {
	if len(hash) > 13 {
		hash = hash[:13]
	}
	n, err := strconv.ParseUint(hash, 16, 64)
	return float64(n), err == nil
}

// NginxPIDFile is where the NGINX master this reactor runs writes its PID.
func (r *Reactor) NginxPIDFile() string { return r.NginxDir + "/nginx.pid" }

// NginxMasterPID reads the NGINX master's PID from its PID file.
func (r *Reactor) NginxMasterPID() (int, error) {
	b, err := os.ReadFile(r.NginxPIDFile())
	if err != nil {
		return 0, fmt.Errorf("read NGINX PID file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("NGINX PID file %s holds %q, not a PID", r.NginxPIDFile(), b)
	}
	return pid, nil
}

// Events lists the Events in the fixture's namespace about the object of kind and name
// with the given type and reason (any when empty), oldest first.
func (f *Fixture) Events(kind, name, eventType, reason string) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}
	if eventType != "" {
		sel["type"] = eventType
	}
	if reason != "" {
		sel["reason"] = reason
	}
	list, err := f.Client.CoreV1().Events(f.Namespace).List(f.Ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("list Events of %s %s/%s: %w", kind, f.Namespace, name, err)
	}
	items := list.Items
	slices.SortStableFunc(items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	return items, nil
}

// WaitEvent waits for an Event of eventType and reason on the object of kind and name
// whose message contains every string in contains, and returns it. r bounds the wait
// by the reactor's life: it gives up at once when the reactor exited.
func (f *Fixture) WaitEvent(r *Reactor, kind, name, eventType, reason string, contains ...string) corev1.Event {
	f.T.Helper()
	var found corev1.Event
	r.Eventually(DefaultTimeout, fmt.Sprintf("a %s Event %q on %s %s whose message contains %q", eventType, reason, kind, name, contains), func() (bool, string) {
		evs, err := f.Events(kind, name, eventType, reason)
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, e := range evs {
			if containsAll(e.Message, contains) {
				found = e
				return true, e.Message
			}
			msgs = append(msgs, e.Message)
		}
		return false, fmt.Sprintf("%d such Events: %q", len(msgs), msgs)
	})
	return found
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
