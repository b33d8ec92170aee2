//go:build integration

package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// apiReachableMetric is 1 while the controller reaches the API server, 0 during an outage.
const apiReachableMetric = "ingress_reactor_kube_api_reachable"

// TestAPIServerOutageResumesPromptly: the controller's connection to the API server goes away for 30 s
// (refused, open watches cut) while the API server itself keeps taking writes. The loss and the return
// are logged and shown by the reachable metric, NGINX keeps serving what it had, and an Ingress created
// right when the connection returns is served within a few seconds. Before, client-go's reflector
// backoff held it back 47 to 61 s and nothing was logged.
func TestAPIServerOutageResumesPromptly(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	proxy := f.StartAPIProxy()
	r := f.StartReactor("--kubeconfig=" + proxy.Kubeconfig)
	r.WaitReady()
	f.CreateIngress(f.Ingress("before", "before.example", harness.IngressBackend{Service: "web", Port: 80}))
	r.WaitServedBy("before.example", "/", "web")
	r.WaitMetric(apiReachableMetric, nil, "= 1", func(v float64) bool { return v == 1 })

	proxy.Down()
	r.WaitLog("lost the connection to the Kubernetes API server")
	r.WaitMetric(apiReachableMetric, nil, "= 0", func(v float64) bool { return v == 0 })
	// Long enough for the reflectors' exponential backoff to reach its 30 s cap had they seen each
	// failed attempt; the data plane keeps serving meanwhile.
	time.Sleep(30 * time.Second)
	r.WaitServedBy("before.example", "/", "web")

	proxy.Up()
	f.CreateIngress(f.Ingress("after", "after.example", harness.IngressBackend{Service: "web", Port: 80}))
	r.Eventually(8*time.Second, "an Ingress created as the API server returned to be served (the old backoff took 20 s or more)", func() (bool, string) {
		resp, err := r.Get("after.example", "/")
		if err != nil {
			return false, err.Error()
		}
		return resp.Status == http.StatusOK && resp.Echo != nil && resp.Echo.Name == "web", resp.String()
	})
	r.WaitLog("the Kubernetes API server answers again")
	r.WaitMetric(apiReachableMetric, nil, "= 1", func(v float64) bool { return v == 1 })
}
