//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestLocalModeServesExamplesAndFollowsFiles: the demo behind `make run` — examples/local loaded into the
// in-process API, echo backends on 127.0.0.1:9001 and :9002 — routes through real NGINX, follows an edit of
// a manifest, and keeps serving when a manifest becomes invalid.
func TestLocalModeServesExamplesAndFollowsFiles(t *testing.T) {
	harness.RequireNetns(t) // the demo's backend ports are fixed; the namespace keeps them private
	env := harness.Shared()
	dir := t.TempDir()
	for _, name := range []string{"demo.yaml", "ingress.yaml"} {
		data, err := os.ReadFile(filepath.Join(env.RepoRoot, "examples/local", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	harness.StartProcess(t, "demo-web", env.EchoserverBinary, []string{"--listen=127.0.0.1:9001", "--name=demo-web"}, nil)
	harness.StartProcess(t, "demo-api", env.EchoserverBinary, []string{"--listen=127.0.0.1:9002", "--name=demo-api"}, nil)

	work, err := os.MkdirTemp("", "ingress-reactor-local-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	if err := os.Chmod(work, 0o755); err != nil { // NGINX's workers must reach their temp paths
		t.Fatal(err)
	}
	healthz, httpPort := harness.FreePort(t), harness.FreePort(t)
	p := harness.StartProcess(t, "ingress-reactor (local)", env.ReactorBinary, []string{
		"--local-manifests=" + dir,
		"--healthz-host=127.0.0.1", "--healthz-port=" + strconv.Itoa(healthz),
		"--http-port=" + strconv.Itoa(httpPort), "--https-port=" + strconv.Itoa(harness.FreePort(t)),
		"--nginx-status-port=" + strconv.Itoa(harness.FreePort(t)),
		"--nginx-dir=" + filepath.Join(work, "nginx"), "--ssl-dir=" + filepath.Join(work, "ssl"),
		"--log-format=console",
	}, []string{"POD_NAME=", "POD_NAMESPACE="})

	servedBy := func(path, want string) func() (bool, string) {
		return func() (bool, string) {
			select {
			case <-p.Exited():
				return false, "the controller exited: " + p.ExitDescription()
			default:
			}
			resp, err := harness.DoRequest(httpPort, harness.Request{Host: "demo.localhost", Path: path})
			if err != nil {
				return false, err.Error()
			}
			if resp.Echo == nil || resp.Echo.Name != want {
				return false, resp.String()
			}
			return true, "served by " + want
		}
	}
	harness.Eventually(t, harness.DefaultTimeout, "demo.localhost/ served by demo-web", servedBy("/", "demo-web"))
	harness.Eventually(t, harness.DefaultTimeout, "demo.localhost/api served by demo-api", servedBy("/api", "demo-api"))

	// Edit: /api moves to /v2.
	ingressFile := filepath.Join(dir, "ingress.yaml")
	data, err := os.ReadFile(ingressFile)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "path: /api", "path: /v2", 1)
	if edited == string(data) {
		t.Fatal("examples/local/ingress.yaml no longer routes /api; update this test")
	}
	if err := os.WriteFile(ingressFile, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, harness.DefaultTimeout, "demo.localhost/v2 served by demo-api after the edit", servedBy("/v2", "demo-api"))
	harness.Eventually(t, harness.DefaultTimeout, "demo.localhost/api falls back to / after the edit", servedBy("/api", "demo-web"))

	// An invalid file is reported with its path and changes nothing.
	if err := os.WriteFile(ingressFile, []byte("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, harness.DefaultTimeout, "the invalid manifest reported with its path", func() (bool, string) {
		out := p.Output()
		return strings.Contains(out, "invalid manifest file") && strings.Contains(out, ingressFile), fmt.Sprintf("%d bytes of log", len(out))
	})
	if ok, seen := servedBy("/v2", "demo-api")(); !ok {
		t.Fatalf("after an invalid manifest: want /v2 still served by demo-api, got %s", seen)
	}
}
