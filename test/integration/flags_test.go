//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestHelmChartArgumentsStartTheController runs the binary with the arguments ingress-nginx's official chart
// passes by default (its _params.tpl with the default values, admission webhook on; the class names are the
// fixture's so that the test's Ingresses are ours): the controller starts, serves, and logs one Warning
// naming the flags without effect.
func TestHelmChartArgumentsStartTheController(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	r := f.StartReactor(
		"--publish-service="+f.Namespace+"/ingress-nginx-controller",
		"--election-id=ingress-nginx-leader-"+f.ID,
		"--controller-class="+f.ControllerClass,
		"--ingress-class="+f.IngressClass,
		"--configmap="+f.Namespace+"/ingress-nginx-controller",
		"--validating-webhook=:8443",
		"--validating-webhook-certificate=/usr/local/certificates/cert",
		"--validating-webhook-key=/usr/local/certificates/key",
	)
	r.WaitReady()
	line := r.WaitLog("ingress-nginx flags accepted without effect")
	for _, name := range []string{"--validating-webhook", "--validating-webhook-certificate", "--validating-webhook-key"} {
		if !strings.Contains(line, name+" (") {
			t.Errorf("the start-up Warning does not name %s: %s", name, line)
		}
	}
	f.CreateIngress(f.Ingress("shop", "chart.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	r.WaitServedBy("chart.example", "/", "web")
}
