package app

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCompatGathererAddsIngressNginxNames: the controller metrics that mean the same as ingress-nginx's
// are served under its names too, with its label names and constant labels.
func TestCompatGathererAddsIngressNginxNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ingress_reactor_reloads_total", Help: "h"}, []string{"result"})
	reloads.WithLabelValues("success").Add(3)
	reloads.WithLabelValues("failure").Add(1)
	expiry := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ingress_reactor_ssl_expire_time_seconds", Help: "h"}, []string{"namespace", "secret", "host"})
	expiry.WithLabelValues("web", "tls", "a.example.com").Set(1.9e9)
	last := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ingress_reactor_last_reload_success", Help: "h"})
	last.Set(1)
	// ingress-nginx's "name" is the Lease's name, the same on every replica, not the replica's identity.
	leader := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ingress_reactor_leader", Help: "h", ConstLabels: prometheus.Labels{"identity": "pod-1", "lease": "ingress-reactor-leader"}})
	leader.Set(1)
	reg.MustRegister(reloads, expiry, last, leader)

	g := compatGatherer{g: reg, constLabels: map[string]string{"controller_class": "k8s.io/ingress-nginx"}}
	const want = `# HELP nginx_ingress_controller_config_last_reload_successful Alias of ingress_reactor_last_reload_success under ingress-nginx's name
# TYPE nginx_ingress_controller_config_last_reload_successful gauge
nginx_ingress_controller_config_last_reload_successful{controller_class="k8s.io/ingress-nginx"} 1
# HELP nginx_ingress_controller_errors Alias of ingress_reactor_reloads_total under ingress-nginx's name
# TYPE nginx_ingress_controller_errors counter
nginx_ingress_controller_errors{controller_class="k8s.io/ingress-nginx"} 1
# HELP nginx_ingress_controller_leader_election_status Alias of ingress_reactor_leader under ingress-nginx's name
# TYPE nginx_ingress_controller_leader_election_status gauge
nginx_ingress_controller_leader_election_status{controller_class="k8s.io/ingress-nginx",name="ingress-reactor-leader"} 1
# HELP nginx_ingress_controller_ssl_expire_time_seconds Alias of ingress_reactor_ssl_expire_time_seconds under ingress-nginx's name
# TYPE nginx_ingress_controller_ssl_expire_time_seconds gauge
nginx_ingress_controller_ssl_expire_time_seconds{controller_class="k8s.io/ingress-nginx",host="a.example.com",namespace="web",secret_name="tls"} 1.9e+09
# HELP nginx_ingress_controller_success Alias of ingress_reactor_reloads_total under ingress-nginx's name
# TYPE nginx_ingress_controller_success counter
nginx_ingress_controller_success{controller_class="k8s.io/ingress-nginx"} 3
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "nginx_ingress_controller_config_last_reload_successful",
		"nginx_ingress_controller_errors", "nginx_ingress_controller_success", "nginx_ingress_controller_leader_election_status", "nginx_ingress_controller_ssl_expire_time_seconds"); err != nil {
		t.Error(err)
	}
	// Ours stay.
	if n, err := testutil.GatherAndCount(g, "ingress_reactor_reloads_total"); err != nil || n != 2 {
		t.Errorf("ingress_reactor_reloads_total: %d series, %v", n, err)
	}
}
