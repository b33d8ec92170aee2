//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// Source address annotations of ingress-nginx, spelled out as their owners write them.
const (
	annotationWhitelist = "nginx.ingress.kubernetes.io/whitelist-source-range"
	annotationAllowlist = "nginx.ingress.kubernetes.io/allowlist-source-range"
	annotationDenylist  = "nginx.ingress.kubernetes.io/denylist-source-range"
)

// otherClient is a second client address: a TEST-NET-1 address of the test's network namespace, so
// NGINX sees a client that is not 127.0.0.1.
const otherClient = "192.0.2.250"

// getFrom sends GET path with Host host to NGINX's HTTP port from the local address from, and
// returns the status and the name of the echoserver that answered ("" when NGINX answered itself).
func getFrom(r *harness.Reactor, from, host, path string) (int, string, error) {
	dialer := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	target := net.JoinHostPort(from, strconv.Itoa(r.HTTPPort)) // NGINX listens on every address
	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, target)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+target+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s%s from %s: %w", host, path, from, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	var echo struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(body, &echo)
	return resp.StatusCode, echo.Name, nil
}

// TestRoutingSourceRanges: the source address annotations of ingress-nginx restrict who is served.
// cert-manager's HTTP-01 challenge Ingress (whitelist-source-range "0.0.0.0/0,::/0") is served; an
// allowlist admits only its addresses, a denylist refuses its own, both per client address as NGINX
// sees it; refused requests get 403 from NGINX; an entry that is not an address rejects the Ingress
// alone with a Warning Event naming the annotation and the entry.
func TestRoutingSourceRanges(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	r := f.StartReactor()
	r.WaitReady()

	withAnnotations := func(ing *networkingv1.Ingress, kv ...string) *networkingv1.Ingress {
		ing.Annotations = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			ing.Annotations[kv[i]] = kv[i+1]
		}
		return ing
	}
	const challenge = "/.well-known/acme-challenge/4Q2uZkP0vYbq"
	// What cert-manager's HTTP-01 solver creates, annotation and path type included.
	f.CreateIngress(withAnnotations(f.Ingress("cm-acme-http-solver", "acme.example",
		harness.IngressBackend{Path: challenge, PathType: networkingv1.PathTypeImplementationSpecific, Service: "web", Port: 80}),
		annotationWhitelist, "0.0.0.0/0,::/0"))
	f.CreateIngress(withAnnotations(f.Ingress("loopback-only", "loopback.example", harness.IngressBackend{Service: "web", Port: 80}),
		annotationAllowlist, "127.0.0.1"))
	f.CreateIngress(withAnnotations(f.Ingress("internal", "internal.example", harness.IngressBackend{Service: "web", Port: 80}),
		annotationAllowlist, "10.0.0.0/8"))
	f.CreateIngress(withAnnotations(f.Ingress("no-testnet", "no-testnet.example", harness.IngressBackend{Service: "web", Port: 80}),
		annotationDenylist, "192.0.2.0/24"))
	f.CreateIngress(withAnnotations(f.Ingress("bad-range", "bad-range.example", harness.IngressBackend{Service: "web", Port: 80}),
		annotationWhitelist, "10.0.0.0/8, not-an-address"))

	r.WaitServedBy("acme.example", challenge, "web")
	r.WaitServedBy("loopback.example", "/", "web")
	r.WaitServedBy("no-testnet.example", "/", "web")
	f.WaitEvent(r, "Ingress", "bad-range", corev1.EventTypeWarning, reasonRejected, annotationWhitelist, `"not-an-address"`)
	r.Eventually(harness.DefaultTimeout, "internal.example to answer 403", func() (bool, string) {
		status, backend, err := getFrom(r, "127.0.0.1", "internal.example", "/")
		if err != nil {
			return false, err.Error()
		}
		return status == http.StatusForbidden && backend == "", fmt.Sprintf("status %d from %q", status, backend)
	})
	r.WaitConfigSettled()

	for _, tc := range []struct {
		from, host, path string
		status           int
	}{
		{"127.0.0.1", "acme.example", challenge, http.StatusOK},
		{otherClient, "acme.example", challenge, http.StatusOK},
		{"127.0.0.1", "loopback.example", "/", http.StatusOK},
		{otherClient, "loopback.example", "/", http.StatusForbidden},
		{"127.0.0.1", "internal.example", "/x", http.StatusForbidden},
		{otherClient, "internal.example", "/", http.StatusForbidden},
		{"127.0.0.1", "no-testnet.example", "/", http.StatusOK},
		{otherClient, "no-testnet.example", "/", http.StatusForbidden},
	} {
		status, backend, err := getFrom(r, tc.from, tc.host, tc.path)
		if err != nil {
			t.Fatal(err)
		}
		wantBackend := ""
		if tc.status == http.StatusOK {
			wantBackend = "web"
		}
		if status != tc.status || backend != wantBackend {
			t.Errorf("GET %s%s from %s: %d from %q, want %d from %q", tc.host, tc.path, tc.from, status, backend, tc.status, wantBackend)
		}
	}
	requireNotRouted(t, r, "bad-range.example", "/")
	r.WaitMetric(ingressesRejected, nil, "== 1", func(v float64) bool { return v == 1 })
}
