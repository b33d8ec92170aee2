//go:build integration

package integration

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestHelmChartArgumentsStartTheController runs the binary with the arguments ingress-nginx's official chart
// passes by default (its _params.tpl with the default values, admission webhook on; the class names are the
// fixture's so that the test's Ingresses are ours, the webhook's files and port the test's): the controller
// starts, serves, and every one of those flags has its effect, so no Warning names a flag without effect.
func TestHelmChartArgumentsStartTheController(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	_, certFile, keyFile := webhookCerts(t)
	r := f.StartReactor(
		"--publish-service="+f.Namespace+"/ingress-nginx-controller",
		"--election-id=ingress-nginx-leader-"+f.ID,
		"--controller-class="+f.ControllerClass,
		"--ingress-class="+f.IngressClass,
		"--configmap="+f.Namespace+"/ingress-nginx-controller",
		"--validating-webhook=127.0.0.1:"+strconv.Itoa(harness.FreePort(t)),
		"--validating-webhook-certificate="+certFile,
		"--validating-webhook-key="+keyFile,
	)
	r.WaitReady()
	r.WaitLog("serving admission reviews")
	f.CreateIngress(f.Ingress("shop", "chart.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r.WaitServedBy("chart.example", "/", "web")
	if out := r.Output(); strings.Contains(out, "accepted without effect") {
		t.Errorf("a start-up Warning names flags without effect: %s", out)
	}
}
