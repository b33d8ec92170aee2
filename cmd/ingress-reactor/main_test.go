package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runAsMain makes the test binary act as ingress-reactor when re-executed by runBinary.
const runAsMain = "INGRESS_REACTOR_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runBinary runs main with args in a child process and returns its stderr and exit code.
func runBinary(t *testing.T, args ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), runAsMain+"=1", "KUBECONFIG=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stderr.String(), 0
	case errors.As(err, &exit):
		return stderr.String(), exit.ExitCode()
	default:
		t.Fatalf("run %s: %v", exe, err)
		return "", 0
	}
}

// A failure while the application is built names its cause in one line; fx's chain of internal
// constructors appears only at debug level.
func TestStartFailurePrintsTheCauseInOneLine(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil { // NGINX's workers must reach --nginx-dir
			t.Fatal(err)
		}
	}
	base := []string{
		"--kubeconfig=/nonexistent/kubeconfig",
		"--nginx-dir=" + filepath.Join(dir, "nginx"), "--ssl-dir=" + filepath.Join(dir, "ssl"),
		"--http-port=1", "--https-port=2", "--healthz-port=3" /* never bound: building fails first */, "--log-format=console",
	}
	fxInternals := []string{"go.uber.org/fx", "could not build arguments", "received non-nil error", "failed to build", ".init.func"}

	out, code := runBinary(t, base...)
	if code == 0 {
		t.Fatalf("exit code 0 after a start-up failure; output:\n%s", out)
	}
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.Contains(line, "\tINFO\t") {
			problems = append(problems, line)
		}
		for _, s := range fxInternals {
			if strings.Contains(line, s) {
				t.Errorf("output names fx internals (%q):\n%s", s, line)
			}
		}
	}
	if len(problems) != 1 {
		t.Fatalf("want exactly one line that is not an info log, got %d:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	if want := "ingress-reactor: start-up failed: load kubeconfig /nonexistent/kubeconfig"; !strings.HasPrefix(problems[0], want) {
		t.Errorf("error line = %q, want it to start with %q", problems[0], want)
	}

	// At debug level the chain is still there for whoever debugs the wiring.
	out, _ = runBinary(t, append(base, "--log-level=debug")...)
	if !strings.Contains(out, "dependency chain") || !strings.Contains(out, "could not build arguments") {
		t.Errorf("the dependency chain is missing at debug level:\n%s", out)
	}
}
