//go:build integration

package integration

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// soak runs TestFaultSoak: minutes long, so not part of make test (see docs/benchmarks-faults.md).
var soak = flag.Bool("soak", false, "run the fault and churn soak (TestFaultSoak), about 4 minutes")

// steadyLoad sends keep-alive POSTs to host through NGINX from workers clients at a bounded rate until
// stopped, and counts what failed: transport errors (a connection closed under a request, refused) and
// answers other than 200 from the backend.
type steadyLoad struct {
	sent, transport, status atomic.Int64
	lastErr                 atomic.Value
	stop                    chan struct{}
	wg                      sync.WaitGroup
}

func startLoad(port int, host string, workers int, every time.Duration) *steadyLoad {
	l := &steadyLoad{stop: make(chan struct{})}
	for range workers {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     time.Minute,
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		}}
		l.wg.Go(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-t.C:
				}
				req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(port)+"/soak", bytes.NewReader([]byte(`{"n":1}`)))
				req.Host = host
				l.sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					l.transport.Add(1)
					l.lastErr.Store(err.Error())
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					l.status.Add(1)
					l.lastErr.Store(fmt.Sprintf("status %d", resp.StatusCode))
				}
			}
		})
	}
	return l
}

// finish stops the load and returns its counts.
func (l *steadyLoad) finish() (sent, transport, status int64, last string) {
	close(l.stop)
	l.wg.Wait()
	last, _ = l.lastErr.Load().(string)
	return l.sent.Load(), l.transport.Load(), l.status.Load(), last
}

// TestFaultSoak runs faults and churn under steady keep-alive load (50 POSTs/s from 5 clients) and
// reports, per phase, the requests that failed and the reloads: 2,000 Ingress changes in 2 minutes;
// NGINX killed with SIGKILL; a 30 s API-server outage; etcd frozen (SIGSTOP) for 20 s; SIGTERM during the
// shutdown grace period. Bounded in time and rate; run with
// `make soak` (see docs/benchmarks-faults.md for the last results).
func TestFaultSoak(t *testing.T) {
	if !*soak {
		t.Skip("the soak runs only with -soak (make soak); see docs/benchmarks-faults.md")
	}
	f := harness.New(t)
	routingService(f, "web", f.StartBackend("web", false))
	proxy := f.StartAPIProxy()
	r := f.StartReactor("--kubeconfig="+proxy.Kubeconfig, "--shutdown-grace-period=15s")
	r.WaitReady()
	f.CreateIngress(f.Ingress("steady", "soak.example", harness.IngressBackend{Service: "web", Port: 80}))
	r.WaitServedBy("soak.example", "/", "web")
	reloads := func() float64 { return r.MetricValue(harness.ReloadsMetric, map[string]string{"result": "success"}) }
	report := func(phase string, began time.Time, l *steadyLoad, reloadsBefore float64) {
		sent, transport, status, last := l.finish()
		took := time.Since(began)
		n := reloads() - reloadsBefore
		t.Logf("%s: %d requests, %d failed in transport, %d with a status other than 200 (last: %q); %g reloads in %s (%.2f/s)",
			phase, sent, transport, status, last, n, took.Round(time.Second), n/took.Seconds())
	}

	// Churn: 2,000 changes in 2 minutes (create, update, delete of 40 Ingresses in turn).
	began, before := time.Now(), reloads()
	load := startLoad(r.HTTPPort, "soak.example", 5, 100*time.Millisecond)
	api := f.Client.NetworkingV1().Ingresses(f.Namespace)
	ctx := context.Background()
	tick := time.NewTicker(60 * time.Millisecond)
	for i := range 2000 {
		<-tick.C
		name := fmt.Sprintf("churn-%d", i%40)
		var err error
		switch (i / 40) % 3 {
		case 0:
			_, err = api.Create(ctx, f.Ingress(name, name+".example", harness.IngressBackend{Service: "web", Port: 80}), metav1.CreateOptions{})
		case 1:
			ing := f.Ingress(name, name+".example", harness.IngressBackend{Path: "/v" + strconv.Itoa(i), Service: "web", Port: 80})
			cur, gerr := api.Get(ctx, name, metav1.GetOptions{})
			if gerr == nil {
				ing.ResourceVersion = cur.ResourceVersion
				_, err = api.Update(ctx, ing, metav1.UpdateOptions{})
			} else {
				err = gerr
			}
		case 2:
			err = api.Delete(ctx, name, metav1.DeleteOptions{})
		}
		if err != nil {
			t.Errorf("change %d: %v", i, err)
		}
	}
	tick.Stop()
	report("churn (2,000 changes in 2 min)", began, load, before)

	// NGINX killed: the supervisor restarts it; requests in the gap fail.
	began, before = time.Now(), reloads()
	load = startLoad(r.HTTPPort, "soak.example", 5, 100*time.Millisecond)
	time.Sleep(2 * time.Second)
	pid, err := r.NginxMasterPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill NGINX's process group: %v", err)
	}
	r.WaitServedBy("soak.example", "/", "web")
	time.Sleep(5 * time.Second)
	report("NGINX SIGKILL", began, load, before)

	// API-server outage: 30 s without the API server; NGINX keeps serving, changes resume at once.
	began, before = time.Now(), reloads()
	load = startLoad(r.HTTPPort, "soak.example", 5, 100*time.Millisecond)
	proxy.Down()
	time.Sleep(30 * time.Second)
	proxy.Up()
	returned := time.Now()
	f.CreateIngress(f.Ingress("after-outage", "after.example", harness.IngressBackend{Service: "web", Port: 80}))
	r.WaitServedBy("after.example", "/", "web")
	t.Logf("an Ingress created as the API server returned was served %s later", time.Since(returned).Round(10*time.Millisecond))
	report("API-server outage (30 s)", began, load, before)

	// etcd frozen: the API server stays up but cannot read or write, so its watches stall and its calls
	// hang; NGINX keeps serving, and changes resume once etcd runs again.
	etcd, err := f.Env.EtcdPID()
	if err != nil {
		t.Fatal(err)
	}
	thaw := func() { _ = syscall.Kill(etcd, syscall.SIGCONT) }
	t.Cleanup(thaw) // never leave the run's etcd stopped
	began, before = time.Now(), reloads()
	load = startLoad(r.HTTPPort, "soak.example", 5, 100*time.Millisecond)
	if err := syscall.Kill(etcd, syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze etcd: %v", err)
	}
	time.Sleep(20 * time.Second)
	thaw()
	thawed := time.Now()
	f.CreateIngress(f.Ingress("after-freeze", "after-freeze.example", harness.IngressBackend{Service: "web", Port: 80}))
	r.WaitServedBy("after-freeze.example", "/", "web")
	t.Logf("an Ingress created as etcd ran again was served %s later", time.Since(thawed).Round(10*time.Millisecond))
	report("etcd frozen (20 s)", began, load, before)

	// SIGTERM: during --shutdown-grace-period readiness fails and NGINX keeps serving, so a load balancer
	// can stop sending before anything stops.
	began, before = time.Now(), reloads()
	load = startLoad(r.HTTPPort, "soak.example", 5, 100*time.Millisecond)
	if err := r.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	report("SIGTERM (the first 10 s of a 15 s grace period)", began, load, before)
}
