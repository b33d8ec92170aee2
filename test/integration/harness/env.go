//go:build integration

// Package harness runs integration tests against real components: a kube-apiserver and
// etcd (through controller-runtime's envtest, from binaries hack/build-kube-binaries.sh
// builds), the real ingress-reactor binary with real NGINX, and echoserver backends on
// TEST-NET-1 addresses inside the private network namespace hack/in-netns.sh creates.
//
// A test package calls Main from TestMain; the API server and the binaries are then
// shared by every test of the run. Each test calls New for a Fixture with its own
// namespace, IngressClass and controller class, so tests never see each other's objects.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ModulePath is the Go module of the repository under test; Main finds the repository
// root by walking up from the working directory to the go.mod that declares it.
const ModulePath = "github.com/ingress-reactor/ingress-reactor"

// Env is what a whole `go test` run shares: the API server, an admin client and
// kubeconfig, and the binaries built for this run.
type Env struct {
	// RepoRoot is the repository's top directory.
	RepoRoot string
	// WorkDir is a temporary directory for this run, removed at the end.
	WorkDir string
	// RESTConfig connects to the API server as a member of system:masters.
	RESTConfig *rest.Config
	// Client is a clientset for RESTConfig.
	Client kubernetes.Interface
	// KubeconfigPath is a kubeconfig file for the same admin user, for the binary.
	KubeconfigPath string
	// ReactorBinary is the ingress-reactor executable built for this run.
	ReactorBinary string
	// EchoserverBinary is the echoserver executable built for this run.
	EchoserverBinary string
	// APIServerLog is the file that collects kube-apiserver's and etcd's output.
	APIServerLog string

	testEnv *envtest.Environment
}

// env is set by Main before any test runs.
var env *Env

// Shared returns the run's Env. It panics when Main has not run, which is a mistake in
// the test package's TestMain.
func Shared() *Env {
	if env == nil {
		panic("harness: Main was not called from TestMain")
	}
	return env
}

// Main sets up the shared environment, runs the tests and tears everything down. It
// returns the exit code for os.Exit. Use it as:
//
//	func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
func Main(m *testing.M) int {
	// `go test -list` and friends must not pay for an API server.
	if !runsTests() {
		return m.Run()
	}
	e, err := setUp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration harness: %v\n", err)
		if e != nil {
			e.tearDown()
		}
		return 1
	}
	env = e
	code := m.Run()
	if err := e.tearDown(); err != nil {
		fmt.Fprintf(os.Stderr, "integration harness: tear down: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// runsTests reports whether this invocation will run tests (and not only
// list them).
func runsTests() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.list") {
			return false
		}
	}
	return true
}

func setUp() (*Env, error) {
	root, err := findRepoRoot()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "ingress-reactor-it-")
	if err != nil {
		return nil, fmt.Errorf("create work dir: %w", err)
	}
	e := &Env{RepoRoot: root, WorkDir: work}

	if err := e.buildBinaries(); err != nil {
		return e, err
	}
	if err := e.startAPIServer(); err != nil {
		return e, err
	}
	return e, nil
}

// findRepoRoot walks up from the working directory to the go.mod of ModulePath.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		// The whole first line: test/monitoring's module path starts with ModulePath too.
		first, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
		if err == nil && string(bytes.TrimSpace(first)) == "module "+ModulePath {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod for module %s above %s", ModulePath, dir)
		}
	}
}

// buildBinaries builds ingress-reactor and echoserver into the work dir. Set
// INTEGRATION_RACE=1 to build the controller with the race detector.
func (e *Env) buildBinaries() error {
	bin := filepath.Join(e.WorkDir, "bin")
	e.ReactorBinary = filepath.Join(bin, "ingress-reactor")
	e.EchoserverBinary = filepath.Join(bin, "echoserver")
	reactorArgs := []string{"build", "-o", e.ReactorBinary}
	if os.Getenv("INTEGRATION_RACE") == "1" {
		reactorArgs = append(reactorArgs, "-race")
	}
	reactorArgs = append(reactorArgs, "./cmd/ingress-reactor")
	for _, args := range [][]string{reactorArgs, {"build", "-o", e.EchoserverBinary, "./cmd/echoserver"}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = e.RepoRoot
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// assetsDir is where envtest finds kube-apiserver and etcd: KUBEBUILDER_ASSETS when
// set, else the cache hack/build-kube-binaries.sh fills.
func (e *Env) assetsDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(e.RepoRoot, ".cache", "kube", "bin")
}

func (e *Env) startAPIServer() error {
	assets := e.assetsDir()
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return fmt.Errorf("%s not found in %s: run hack/build-kube-binaries.sh (or set KUBEBUILDER_ASSETS): %w", b, assets, err)
		}
	}
	e.APIServerLog = filepath.Join(e.WorkDir, "control-plane.log")
	logFile, err := os.Create(e.APIServerLog)
	if err != nil {
		return fmt.Errorf("create control plane log: %w", err)
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	api := te.ControlPlane.GetAPIServer()
	api.Out, api.Err = logFile, logFile
	// The private network namespace has no default route, from which kube-apiserver
	// would otherwise derive the address it advertises; and the "kubernetes" Service's
	// endpoints need no reconciling in tests (loopback is not a valid endpoint address).
	api.Configure().Set("advertise-address", "127.0.0.1")
	api.Configure().Set("endpoint-reconciler-type", "none")
	// envtest's default range (a /24) runs out at 254 Services; scale tests create thousands.
	api.Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	te.ControlPlane.Etcd = &envtest.Etcd{Out: logFile, Err: logFile}
	e.testEnv = te

	if _, err := te.Start(); err != nil {
		return fmt.Errorf("start kube-apiserver and etcd from %s (their output: %s): %w", assets, e.APIServerLog, err)
	}
	user, err := te.AddUser(envtest.User{Name: "ingress-reactor-it", Groups: []string{"system:masters"}}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return fmt.Errorf("add admin user: %w", err)
	}
	e.RESTConfig = user.Config()
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig for admin user: %w", err)
	}
	e.KubeconfigPath = filepath.Join(e.WorkDir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	e.Client, err = kubernetes.NewForConfig(e.RESTConfig)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.Client.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("API server version: %w", err)
	}
	if _, err := e.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("API server not usable: %w", err)
	}
	return nil
}

func (e *Env) tearDown() error {
	var errs []error
	if e.testEnv != nil {
		if err := e.testEnv.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop API server: %w", err))
		}
	}
	if os.Getenv("INTEGRATION_KEEP") == "1" {
		fmt.Fprintf(os.Stderr, "integration harness: kept %s\n", e.WorkDir)
	} else if err := os.RemoveAll(e.WorkDir); err != nil {
		errs = append(errs, fmt.Errorf("remove work dir: %w", err))
	}
	return errors.Join(errs...)
}

// EtcdPID returns the PID of the etcd that envtest started for this run: the test process's child
// named etcd.
func (e *Env) EtcdPID() (int, error) {
	kids, err := Children(os.Getpid())
	if err != nil {
		return 0, err
	}
	for _, pid := range kids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(comm)) == "etcd" {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no etcd among the children %v of this process", kids)
}

// AddUser makes a user of the API server authenticated by a client certificate, with the given name and
// groups and no rights but those RBAC gives that name or those groups (a ServiceAccount's are
// system:serviceaccount:<namespace>:<name> in system:serviceaccounts and system:serviceaccounts:<namespace>).
// It returns the path of a kubeconfig file for it.
func (e *Env) AddUser(t testing.TB, name string, groups ...string) string {
	t.Helper()
	user, err := e.testEnv.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 100, Burst: 200})
	if err != nil {
		t.Fatalf("add API user %s: %v", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig for %s: %v", name, err)
	}
	f, err := os.CreateTemp(e.WorkDir, "kubeconfig-")
	if err != nil {
		t.Fatalf("kubeconfig for %s: %v", name, err)
	}
	defer f.Close()
	if _, err := f.Write(kubeconfig); err != nil {
		t.Fatalf("kubeconfig for %s: %v", name, err)
	}
	return f.Name()
}

// CanI asks the API server, with a SubjectAccessReview, whether user (in groups) may use verb on resource
// (and subresource) in namespace ns.
func (e *Env) CanI(ctx context.Context, user string, groups []string, resource schema.GroupResource, subresource, verb, ns string) (bool, error) {
	sar, err := e.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: resource.Group, Resource: resource.Resource, Subresource: subresource,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview for %s: %w", user, err)
	}
	return sar.Status.Allowed, nil
}
