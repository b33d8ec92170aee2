//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// chartKubeVersion is the Kubernetes version `helm template` renders for: the harness's API server's.
const chartKubeVersion = "1.36.3"

func chartDir(t *testing.T) string {
	return filepath.Join(harness.Shared().RepoRoot, "deploy", "chart", "ingress-reactor")
}

// helmBinary is HELM_BIN, or the helm that hack/build-helm.sh (run by `make deps-test`) builds.
func helmBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		bin = filepath.Join(harness.Shared().RepoRoot, ".cache", "helm", "bin", "helm")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm not found at %s: run hack/build-helm.sh (make deps-test does) or set HELM_BIN: %v", bin, err)
	}
	return bin
}

func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// helmTemplate renders the chart for release in namespace ns with the values files and --set flags.
func helmTemplate(t *testing.T, release, ns string, valuesFiles []string, set ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	args := []string{"template", release, chartDir(t), "--namespace", ns, "--kube-version", chartKubeVersion}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := yamlutil.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decode helm template output: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

// monitoringCRDs are stand-ins for the Prometheus operator's ServiceMonitor and PrometheusRule CRDs, whose
// full schemas are not in this repository: the API server checks apiVersion, kind and metadata of the
// chart's objects of these kinds, not their spec (preserve-unknown-fields).
const monitoringCRDs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: prometheusrules.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PrometheusRule, listKind: PrometheusRuleList, plural: prometheusrules, singular: prometheusrule}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

var monitoringCRDsOnce sync.Once

// chartApplier applies rendered objects with server-side apply and strict field validation.
type chartApplier struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
}

func newChartApplier(t *testing.T) *chartApplier {
	t.Helper()
	e := harness.Shared()
	dyn, err := dynamic.NewForConfig(e.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(e.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	a := &chartApplier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
	monitoringCRDsOnce.Do(func() {
		dec := yamlutil.NewYAMLOrJSONDecoder(strings.NewReader(monitoringCRDs), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				break
			}
			if err := a.apply(t.Context(), &unstructured.Unstructured{Object: m}); err != nil {
				t.Fatalf("monitoring CRDs: %v", err)
			}
		}
	})
	return a
}

func (a *chartApplier) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	var m *meta.RESTMapping
	var err error
	// A CRD created a moment ago is not in discovery yet.
	for i := 0; i < 50; i++ {
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			break
		}
		a.mapper.Reset()
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

func (a *chartApplier) apply(ctx context.Context, o *unstructured.Unstructured) error {
	ri, err := a.resource(o)
	if err != nil {
		return err
	}
	data, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager: "chart-test", FieldValidation: "Strict", Force: ptr.To(true),
	})
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// deleteClusterScoped removes what a release created outside its namespace (namespaces are not
// finalized in the harness, and other tests must not see these IngressClasses and roles).
func (a *chartApplier) deleteClusterScoped(objs []*unstructured.Unstructured) {
	for _, o := range objs {
		if o.GetNamespace() != "" {
			continue
		}
		ri, err := a.resource(o)
		if err != nil {
			continue
		}
		_ = ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
	}
}

// TestChartValuesApplyStrictly lints and renders the chart with every values file of its ci/ folder (the
// defaults, an ingress-nginx user's values file, a DaemonSet on the node's network, one namespace with
// namespaced rights) and creates every rendered object on the real API server with server-side apply and
// strict field validation: a misspelt or misplaced field fails the test.
func TestChartValuesApplyStrictly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir(t), "ci", "*-values.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("values files in ci/: %v %v", files, err)
	}
	a := newChartApplier(t)
	for i, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), "-values.yaml")
		t.Run(name, func(t *testing.T) {
			f := harness.New(t)
			if _, err := runHelm(t, "lint", "--strict", "--kube-version", chartKubeVersion, "--namespace", f.Namespace, "--values", file, chartDir(t)); err != nil {
				t.Fatal(err)
			}
			release := fmt.Sprintf("ci%d", i)
			// The test's own IngressClass name, so that releases of parallel subtests do not share one.
			// The webhook's Service has no endpoints here: Ignore keeps the ValidatingWebhookConfiguration
			// from blocking Ingresses of its class (or without one) in other tests meanwhile.
			objs, err := helmTemplate(t, release, f.Namespace, []string{file}, "controller.ingressClassResource.name=chart-"+f.ID,
				"controller.admissionWebhooks.failurePolicy=Ignore")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.deleteClusterScoped(objs) })
			kinds := map[string]int{}
			for _, o := range objs {
				// Objects the values place in other namespaces (none of the ci/ files do) would need them.
				if ns := o.GetNamespace(); ns != "" && ns != f.Namespace {
					t.Fatalf("%s %s is in namespace %s, not the release's %s", o.GetKind(), o.GetName(), ns, f.Namespace)
				}
				if err := a.apply(f.Ctx, o); err != nil {
					t.Error(err)
				}
				kinds[o.GetKind()]++
			}
			for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Service"} {
				if kinds[k] == 0 {
					t.Errorf("no %s rendered; got %v", k, kinds)
				}
			}
			if kinds["Deployment"]+kinds["DaemonSet"] == 0 {
				t.Errorf("no controller workload rendered; got %v", kinds)
			}
		})
	}
}

// TestChartRefusesValuesWithoutEquivalent: ingress-nginx values this chart cannot honour stop the install
// with the reason, while the same keys at ingress-nginx's defaults pass.
func TestChartRefusesValuesWithoutEquivalent(t *testing.T) {
	for _, c := range []struct {
		set, want string
	}{
		{"controller.image.image=ingress-nginx/controller", "ingress-nginx's controller image"},
		{"controller.image.chroot=true", "controller.image.chroot"},
		{"controller.kind=Both", `controller.kind "Both"`},
		{"controller.keda.enabled=true", "controller.keda.enabled"},
		{"controller.customTemplate.configMapName=tmpl", "controller.customTemplate"},
		{"controller.maxmindLicenseKey=k", "GeoIP2"},
		{"controller.service.internal.enabled=true", "controller.service.internal.enabled"},
		{"controller.scope.namespaceSelector=team=a", "--watch-namespace-selector"},
		{"controller.enableTopologyAwareRouting=true", "enableTopologyAwareRouting"},
		{"controller.networkPolicy.enabled=true", "NetworkPolicy"},
		{"controller.terminationGracePeriodSeconds=20", "terminationGracePeriodSeconds 20"},
		{"defaultBackend.autoscaling.enabled=true", "defaultBackend.autoscaling.enabled"},
	} {
		_, err := helmTemplate(t, "refuse", "ns", nil, c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: want a failure naming %q, got %v", c.set, c.want, err)
		}
	}
	// ingress-nginx's defaults for the same keys.
	if _, err := helmTemplate(t, "defaults", "ns", nil,
		"controller.image.chroot=false", "controller.kind=Deployment", "controller.keda.enabled=false",
		"controller.customTemplate.configMapName=", "controller.maxmindLicenseKey=", "controller.service.internal.enabled=false",
		"controller.scope.namespaceSelector=", "controller.enableTopologyAwareRouting=false", "controller.networkPolicy.enabled=false",
		"controller.terminationGracePeriodSeconds=300", "defaultBackend.autoscaling.enabled=false"); err != nil {
		t.Errorf("ingress-nginx's defaults refused: %v", err)
	}
}

// chartRelease is the chart's default release applied into a fixture's namespace, with the controller's
// arguments and RBAC objects at hand.
type chartRelease struct {
	f           *harness.Fixture
	a           *chartApplier
	objs        []*unstructured.Unstructured
	args        []string
	class       string
	sa          string
	clusterRole *unstructured.Unstructured
	role        *unstructured.Unstructured
	kubeconfig  string
}

func installChart(t *testing.T, f *harness.Fixture) *chartRelease {
	t.Helper()
	a := newChartApplier(t)
	class := "chart-" + f.ID
	// The webhook needs no rights of its own (it reads the informers' caches); TestAdmissionWebhook tests it.
	objs, err := helmTemplate(t, "rbac", f.Namespace, nil, "controller.admissionWebhooks.enabled=false",
		"controller.ingressClassResource.name="+class, "controller.ingressClass="+class,
		"controller.ingressClassResource.controllerValue=k8s.io/"+class)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.deleteClusterScoped(objs) })
	rel := &chartRelease{f: f, a: a, objs: objs, class: class}
	for _, o := range objs {
		if err := a.apply(f.Ctx, o); err != nil {
			t.Fatal(err)
		}
		switch o.GetKind() {
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			rel.args = args
			rel.sa, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
		case "ClusterRole":
			rel.clusterRole = o
		case "Role":
			rel.role = o
		}
	}
	if rel.args == nil || rel.sa == "" || rel.clusterRole == nil || rel.role == nil {
		t.Fatalf("the chart rendered no Deployment with args, ServiceAccount, ClusterRole or Role: %d objects", len(objs))
	}
	// A load balancer's address on the chart's Service (no cloud provider here), for the controller to publish.
	svcName := strings.TrimPrefix(argValue(rel.args, "--publish-service"), f.Namespace+"/")
	patch := []byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.44"}]}}}`)
	if _, err := f.Client.CoreV1().Services(f.Namespace).Patch(f.Ctx, svcName, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("load balancer address on Service %s: %v", svcName, err)
	}
	// The controller authenticates as the chart's ServiceAccount: RBAC grants it exactly the chart's rules.
	rel.kubeconfig = f.Env.AddUser(t, "system:serviceaccount:"+f.Namespace+":"+rel.sa,
		"system:serviceaccounts", "system:serviceaccounts:"+f.Namespace, "system:authenticated")
	return rel
}

func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// start runs the binary with the chart's arguments as the chart's ServiceAccount (ports and directories
// are the harness's; --shutdown-grace-period is dropped to keep the test short).
func (rel *chartRelease) start() *harness.Reactor {
	args := append([]string{"--kubeconfig=" + rel.kubeconfig, "--log-format=console"}, rel.args...)
	args = append(args, "--shutdown-grace-period=0s")
	return rel.f.StartReactorWith("chart-pod-"+rel.f.ID, args...)
}

var forbidden = regexp.MustCompile(`(?i)forbidden`)

// exercise makes the controller use every right the chart grants: serve an Ingress (Ingresses,
// IngressClasses, Services, EndpointSlices, Secrets, ConfigMaps), publish its status (leases, ingresses/status),
// record a Warning Event for a rejected one (events), and stop as the last replica, which looks for its
// sibling pods and clears the status (pods). It returns the output and whether everything worked.
func (rel *chartRelease) exercise(t *testing.T, host string) (output string, worked bool, why string) {
	t.Helper()
	f := rel.f
	r := rel.start()
	deadline := time.Now().Add(40 * time.Second)
	why = "did not become ready"
	for time.Now().Before(deadline) {
		if forbidden.MatchString(r.Output()) {
			why = "a request was forbidden"
			break
		}
		if ok, _ := r.Ready(); !ok {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		why = "did not serve " + host
		if resp, err := r.Get(host, "/"); err != nil || resp.Echo == nil || resp.Echo.Name != "web" {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		why = "did not publish the status of " + host
		ing, err := f.Client.NetworkingV1().Ingresses(f.Namespace).Get(f.Ctx, host, metav1.GetOptions{})
		if err != nil || len(ing.Status.LoadBalancer.Ingress) == 0 || ing.Status.LoadBalancer.Ingress[0].IP != "192.0.2.44" {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		why = "recorded no Warning Event for the rejected Ingress"
		evs, err := f.Client.CoreV1().Events(f.Namespace).List(f.Ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bad-" + host})
		if err != nil || !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Type == corev1.EventTypeWarning }) {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		why = ""
		break
	}
	code := r.Stop(t)
	out := r.Output()
	if why == "" && code != 0 {
		why = fmt.Sprintf("exit code %d", code)
	}
	if why == "" && forbidden.MatchString(out) {
		why = "a request was forbidden"
	}
	if why == "" {
		// The last replica clears the addresses it published.
		ing, err := f.Client.NetworkingV1().Ingresses(f.Namespace).Get(f.Ctx, host, metav1.GetOptions{})
		if err != nil || len(ing.Status.LoadBalancer.Ingress) != 0 {
			why = fmt.Sprintf("the status was not cleared at shutdown (%v)", err)
		}
	}
	return out, why == "", why
}

// TestChartRBACIsExactlySufficient starts the binary with the chart's default arguments, authenticated as
// the chart's ServiceAccount with only the chart's RBAC, and shows that it serves, publishes status,
// records Events and shuts down with no request forbidden; then removes each rule of the chart's
// ClusterRole and Role in turn and shows that something fails without it.
func TestChartRBACIsExactlySufficient(t *testing.T) {
	f := harness.New(t)
	rel := installChart(t, f)
	web := f.StartBackend("web", false)
	routingService(f, "web", web)
	hosts := 0
	ingress := func() string {
		hosts++
		host := fmt.Sprintf("rbac%d.chart.example", hosts)
		ing := f.Ingress(host, host, harness.IngressBackend{Path: "/", Service: "web", Port: 80})
		ing.Spec.IngressClassName = ptr.To(rel.class)
		f.CreateIngress(ing)
		bad := f.Ingress("bad-"+host, "bad-"+host, harness.IngressBackend{Path: "/", Service: "web", Port: 80})
		bad.Spec.IngressClassName = ptr.To(rel.class)
		bad.Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "lots"}
		f.CreateIngress(bad)
		return host
	}

	out, ok, why := rel.exercise(t, ingress())
	if !ok {
		t.Fatalf("with the chart's RBAC the controller failed: %s\n%s", why, tail(out, 40))
	}

	for _, role := range []*unstructured.Unstructured{rel.clusterRole, rel.role} {
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		for i := range rules {
			rule, _ := yaml.Marshal(rules[i])
			label := fmt.Sprintf("%s rule %d: %s", role.GetKind(), i, strings.ReplaceAll(strings.TrimSpace(string(rule)), "\n", " "))
			cut := role.DeepCopy()
			_ = unstructured.SetNestedSlice(cut.Object, append(slices.Clone(rules[:i]), rules[i+1:]...), "rules")
			if err := rel.a.apply(f.Ctx, cut); err != nil {
				t.Fatal(err)
			}
			// RBAC changes reach the authorizer through an informer: wait until the right is gone.
			waitRuleGone(t, rel, rules[i].(map[string]any), role.GetNamespace())
			_, ok, why := rel.exercise(t, ingress())
			if ok {
				t.Errorf("%s: the controller worked without it; the rule is not needed", label)
			} else {
				t.Logf("without %s: %s", label, why)
			}
			if err := rel.a.apply(f.Ctx, role); err != nil {
				t.Fatal(err)
			}
			waitRuleBack(t, rel, rules[i].(map[string]any), role.GetNamespace())
		}
	}
}

// ruleAllowed asks the API server (SubjectAccessReview) whether the chart's ServiceAccount may use the
// rule's first verb on its first resource.
func ruleAllowed(t *testing.T, rel *chartRelease, rule map[string]any, ns string) bool {
	t.Helper()
	groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
	resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
	verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
	res, sub, _ := strings.Cut(resources[0], "/")
	if ns == "" {
		ns = rel.f.Namespace
	}
	allowed, err := harness.Shared().CanI(rel.f.Ctx, "system:serviceaccount:"+rel.f.Namespace+":"+rel.sa,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + rel.f.Namespace, "system:authenticated"},
		schema.GroupResource{Group: groups[0], Resource: res}, sub, verbs[0], ns)
	if err != nil {
		t.Fatal(err)
	}
	return allowed
}

func waitRuleGone(t *testing.T, rel *chartRelease, rule map[string]any, ns string) {
	t.Helper()
	waitRule(t, rel, rule, ns, false)
}

func waitRuleBack(t *testing.T, rel *chartRelease, rule map[string]any, ns string) {
	t.Helper()
	waitRule(t, rel, rule, ns, true)
}

func waitRule(t *testing.T, rel *chartRelease, rule map[string]any, ns string, want bool) {
	t.Helper()
	harness.Eventually(t, harness.DefaultTimeout, fmt.Sprintf("the rule %v to be allowed=%v", rule, want), func() (bool, string) {
		got := ruleAllowed(t, rel, rule, ns)
		return got == want, fmt.Sprintf("allowed=%v", got)
	})
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// TestChartManifestIsCurrent: deploy/ingress-reactor.yaml is the chart's defaults as hack/gen-manifest.sh
// renders them (`make manifests` rewrites it).
func TestChartManifestIsCurrent(t *testing.T) {
	root := harness.Shared().RepoRoot
	cmd := exec.Command(filepath.Join(root, "hack", "gen-manifest.sh"))
	cmd.Env = append(os.Environ(), "HELM_BIN="+helmBinary(t))
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/gen-manifest.sh: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(root, "deploy", "ingress-reactor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("deploy/ingress-reactor.yaml is not the chart's current defaults: run make manifests")
	}
}

// TestChartWebhookCertificateFitsTogether: with the chart's defaults the admission webhook's pieces agree.
// The certificate Helm makes is valid for the webhook Service's DNS name, its key matches, it chains to the
// ValidatingWebhookConfiguration's caBundle, and the controller reads it where the Secret is mounted.
func TestChartWebhookCertificateFitsTogether(t *testing.T) {
	objs, err := helmTemplate(t, "hook", "edge", nil)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() == "Service" && !strings.HasSuffix(o.GetName(), "-admission") {
			continue
		}
		byKind[o.GetKind()] = o
	}
	secret, vwc, svc, deploy := byKind["Secret"], byKind["ValidatingWebhookConfiguration"], byKind["Service"], byKind["Deployment"]
	if secret == nil || vwc == nil || svc == nil || deploy == nil {
		t.Fatalf("want the webhook's Secret, ValidatingWebhookConfiguration and Service and the Deployment; got %v", slices.Collect(maps.Keys(byKind)))
	}
	data := func(k string) []byte {
		v, _, _ := unstructured.NestedString(secret.Object, "data", k)
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			t.Fatalf("Secret %s data %s: %v", secret.GetName(), k, err)
		}
		return b
	}
	webhooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	hook := webhooks[0].(map[string]any)
	caBundle, _, _ := unstructured.NestedString(hook, "clientConfig", "caBundle")
	svcName, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "name")
	if svcName != svc.GetName() {
		t.Errorf("the webhook calls Service %q, the chart's is %q", svcName, svc.GetName())
	}
	ca, err := base64.StdEncoding.DecodeString(caBundle)
	if err != nil || !bytes.Equal(ca, data("ca.crt")) {
		t.Fatalf("caBundle is not the Secret's ca.crt (%v)", err)
	}
	pair, err := tls.X509KeyPair(data("tls.crt"), data("tls.key"))
	if err != nil {
		t.Fatalf("the Secret's certificate and key: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("caBundle holds no certificate")
	}
	// The API server calls <service>.<namespace>.svc.
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: svc.GetName() + ".edge.svc", Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate does not verify for %s.edge.svc: %v", svc.GetName(), err)
	}
	// The controller's flags name files of the Secret's volume.
	spec := deploy.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	container := spec["containers"].([]any)[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(container, "args")
	certFile, keyFile := argValue(args, "--validating-webhook-certificate"), argValue(args, "--validating-webhook-key")
	mounts, _, _ := unstructured.NestedSlice(container, "volumeMounts")
	volumes, _, _ := unstructured.NestedSlice(spec, "volumes")
	var mountPath string
	for _, m := range mounts {
		if m.(map[string]any)["name"] == "webhook-cert" {
			mountPath = m.(map[string]any)["mountPath"].(string)
		}
	}
	var items []any
	for _, v := range volumes {
		if v.(map[string]any)["name"] == "webhook-cert" {
			sec := v.(map[string]any)["secret"].(map[string]any)
			if sec["secretName"] != secret.GetName() {
				t.Errorf("the volume mounts Secret %v, the certificate is in %s", sec["secretName"], secret.GetName())
			}
			items = sec["items"].([]any)
		}
	}
	want := map[string]string{"tls.crt": certFile, "tls.key": keyFile}
	for _, it := range items {
		m := it.(map[string]any)
		if p := filepath.Join(mountPath, m["path"].(string)); p != want[m["key"].(string)] {
			t.Errorf("Secret key %v is mounted at %s; the flag names %s", m["key"], p, want[m["key"].(string)])
		}
		delete(want, m["key"].(string))
	}
	if len(want) != 0 || argValue(args, "--validating-webhook") != ":8443" {
		t.Errorf("not mounted: %v; --validating-webhook=%q", want, argValue(args, "--validating-webhook"))
	}
}
