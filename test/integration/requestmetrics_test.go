//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

const requestsMetric = "nginx_ingress_controller_requests"

// TestRequestMetrics sends requests of known statuses, methods and sizes to two Ingresses through the
// binary's NGINX and scrapes /metrics: ingress-nginx's counter and histograms with their labels and sums;
// a reload (a profile appears) and an NGINX crash neither reset nor double the counters; 10,000 distinct
// URIs under one Ingress path stay one series.
func TestRequestMetrics(t *testing.T) {
	f := harness.New(t)
	routingService(f, "web", f.StartBackend("web", false))
	down := f.StartBackend("down", false)
	f.CreateService("down", 80, down.Port) // no EndpointSlice: 503
	// /warm paths take the requests that wait for routes, so that the asserted series get only the
	// test's own requests.
	f.CreateIngress(f.Ingress("a", "a.metrics.test", prefixPath("/web", "web"), prefixPath("/down", "down"), prefixPath("/warm", "web")))
	f.CreateIngress(f.Ingress("b", "b.metrics.test", prefixPath("/", "web"), prefixPath("/warm", "web")))
	// One worker: a request that shows in the metrics proves that the worker added the ones before it.
	r := f.StartReactor("--worker-processes=1")
	r.WaitReady()
	r.WaitServedBy("a.metrics.test", "/warm", "web")
	r.WaitServedBy("b.metrics.test", "/warm", "web")

	labels := func(ingress, path, host, status, method string) map[string]string {
		return map[string]string{"namespace": f.Namespace, "ingress": ingress, "path": path, "host": host, "status": status, "method": method,
			"controller_class": f.ControllerClass, "controller_namespace": f.Namespace, "canary": ""}
	}
	aWeb := labels("a", "/web", "a.metrics.test", "200", "POST")
	aDown := labels("a", "/down", "a.metrics.test", "503", "GET")
	bRoot := labels("b", "/", "b.metrics.test", "200", "GET")
	aWeb["service"], aDown["service"], bRoot["service"] = "web", "down", "web"
	body := bytes.Repeat([]byte("x"), 500)
	var responseBytes atomic.Int64
	sendAll := func(n int) {
		t.Helper()
		for i := range n {
			resp := send(t, r, harness.Request{Method: http.MethodPost, Host: "a.metrics.test", Path: fmt.Sprintf("/web/%d", i), Body: body})
			if resp.Status != http.StatusOK {
				t.Fatalf("POST a.metrics.test/web: %s", resp)
			}
			responseBytes.Add(int64(len(resp.Body)))
			if resp := send(t, r, harness.Request{Host: "a.metrics.test", Path: "/down"}); resp.Status != http.StatusServiceUnavailable {
				t.Fatalf("GET a.metrics.test/down: %s, want 503", resp)
			}
			if resp := send(t, r, harness.Request{Host: "b.metrics.test", Path: fmt.Sprintf("/p/%d", i)}); resp.Status != http.StatusOK {
				t.Fatalf("GET b.metrics.test/p: %s", resp)
			}
		}
	}
	// waitCounts waits until the three series count want requests each and the undefined host's
	// requests are counted with empty labels.
	waitCounts := func(want float64) harness.Metrics {
		t.Helper()
		var m harness.Metrics
		r.Eventually(harness.DefaultTimeout, fmt.Sprintf("%g requests in each series", want), func() (bool, string) {
			var err error
			if m, err = r.Metrics(); err != nil {
				return false, err.Error()
			}
			ok := true
			for _, l := range []map[string]string{aWeb, aDown, bRoot} {
				if v, _ := m.Value(requestsMetric, l); v != want {
					ok = false
				}
			}
			return ok, m.Describe(requestsMetric)
		})
		return m
	}

	const n = 20
	sendAll(n)
	m := waitCounts(n)
	// Histograms: every series has as many observations as requests; the request sizes hold the bodies.
	for _, h := range []string{"request_duration_seconds", "request_size", "response_size", "bytes_sent"} {
		if c, _ := m.Value("nginx_ingress_controller_"+h+"_count", aWeb); c != n {
			t.Errorf("%s count %g, want %d", h, c, n)
		}
	}
	if s, _ := m.Value("nginx_ingress_controller_request_size_sum", aWeb); s < float64(n*len(body)) || s > float64(n*(len(body)+1000)) {
		t.Errorf("request_size sum %g, want %d bodies of %d bytes and their headers", s, n, len(body))
	}
	if s, _ := m.Value("nginx_ingress_controller_response_size_sum", aWeb); s < float64(responseBytes.Load()) || s > float64(responseBytes.Load()+n*1000) {
		t.Errorf("response_size sum %g, want the %d body bytes received and headers", s, responseBytes.Load())
	}
	if c, _ := m.Value("nginx_ingress_controller_connect_duration_seconds_count", aWeb); c != n {
		t.Errorf("connect_duration_seconds count %g, want %d (every POST reached the backend)", c, n)
	}
	if c, ok := m.Value("nginx_ingress_controller_connect_duration_seconds_count", aDown); ok && c != 0 {
		t.Errorf("connect_duration_seconds count %g for the 503s, which reached no upstream", c)
	}

	// A reload: a profile appears (proxy-buffer-size is a directive of a named location).
	reloads := r.MetricValue(harness.ReloadsMetric, map[string]string{"result": "success"})
	// ingress-nginx's names of the controller metrics that mean the same.
	if v, _ := m.Value("nginx_ingress_controller_success", map[string]string{"controller_class": f.ControllerClass}); v < 1 {
		t.Errorf("nginx_ingress_controller_success %g, want the successful applies (%s)", v, m.Describe("nginx_ingress_controller_success"))
	}
	if v, _ := m.Value("nginx_ingress_controller_config_last_reload_successful", nil); v != 1 {
		t.Errorf("nginx_ingress_controller_config_last_reload_successful %g, want 1", v)
	}
	// NGINX's processes: the master and its one worker; its stub_status counted our requests.
	if v, _ := m.Value("nginx_ingress_controller_nginx_process_num_procs", nil); v != 2 {
		t.Errorf("nginx_process_num_procs %g, want 2 (%s)", v, m.Describe("nginx_ingress_controller_nginx_process_num_procs"))
	}
	if v, _ := m.Value("nginx_ingress_controller_nginx_process_requests_total", nil); v < 3*n {
		t.Errorf("nginx_process_requests_total %g, want at least the %d requests sent", v, 3*n)
	}
	f.UpdateIngress("b", func(ing *networkingv1.Ingress) { annotate(ing, "proxy-buffer-size", "16k") })
	r.WaitMetric(harness.ReloadsMetric, map[string]string{"result": "success"}, fmt.Sprintf("> %g", reloads), func(v float64) bool { return v > reloads })
	r.WaitServedBy("b.metrics.test", "/warm/after-reload", "web")
	sendAll(n)
	waitCounts(2 * n)

	// An NGINX crash: the fresh NGINX starts with an empty dict; the counters go on from where they were.
	restarts := r.MetricValue(nginxRestartsMetric, nil)
	pid, err := r.NginxMasterPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill NGINX master %d: %v", pid, err)
	}
	r.WaitMetric(nginxRestartsMetric, nil, fmt.Sprintf(">= %g", restarts+1), func(v float64) bool { return v >= restarts+1 })
	r.WaitServedBy("a.metrics.test", "/warm/after-crash", "web")
	r.WaitServedBy("b.metrics.test", "/warm/after-crash", "web")
	sendAll(n)
	waitCounts(3 * n)

	// Nothing is counted twice: a later request, seen, proves the worker added everything before it.
	send(t, r, harness.Request{Host: "undefined.metrics.test", Path: "/sentinel"})
	undefined := map[string]string{"namespace": "", "ingress": "", "path": "", "host": "", "status": "404", "method": "GET"}
	r.WaitMetric(requestsMetric, undefined, ">= 1", func(v float64) bool { return v >= 1 })
	waitCounts(3 * n)

	// 10,000 distinct URIs under one path: one series more (GET on a's /web), not 10,000.
	series := r.MetricValue("ingress_reactor_request_metrics_series", nil)
	const uris = 10000
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < uris; i += 8 {
				resp, err := r.Do(harness.Request{Host: "a.metrics.test", Path: fmt.Sprintf("/web/u%d?q=%d", i, i)})
				if err != nil || resp.Status != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d of %d requests failed", failed.Load(), uris)
	}
	aGet := labels("a", "/web", "a.metrics.test", "200", "GET")
	r.WaitMetric(requestsMetric, aGet, fmt.Sprint(uris), func(v float64) bool { return v == uris })
	if got := r.MetricValue("ingress_reactor_request_metrics_series", nil); got != series+1 {
		t.Errorf("%g series after %d distinct URIs, want %g", got, uris, series+1)
	}
	m, err = r.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if fam := m[requestsMetric]; fam == nil || len(fam.GetMetric()) > 10 {
		t.Errorf("requests series: %s", m.Describe(requestsMetric))
	}

	// A deleted Ingress's series go, as in ingress-nginx; the other Ingress's stay.
	f.DeleteIngress("b")
	r.Eventually(harness.DefaultTimeout, "no series of the deleted Ingress", func() (bool, string) {
		m, err := r.Metrics()
		if err != nil {
			return false, err.Error()
		}
		_, found := m.Value(requestsMetric, map[string]string{"ingress": "b"})
		return !found, m.Describe(requestsMetric)
	})
	if v := r.MetricValue(requestsMetric, aWeb); v != 3*n {
		t.Errorf("Ingress a's POSTs: %g after b was deleted, want %d", v, 3*n)
	}
}
