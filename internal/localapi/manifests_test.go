package localapi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const twoServices = `
apiVersion: v1
kind: Service
metadata:
  name: a
  namespace: demo
spec:
  ports: [{port: 80}]
---
# a comment-only document is skipped
---
apiVersion: v1
kind: Service
metadata:
  name: b
spec:
  ports: [{port: 81}]
`

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func serviceNames(t *testing.T, cs *Clientset) map[string]string {
	t.Helper()
	list, err := cs.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range list.Items {
		got[s.Namespace+"/"+s.Name] = s.ResourceVersion
	}
	return got
}

func TestLocalManifestsFollowFileChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.yaml")
	writeFile(t, path, twoServices)
	cs := NewClientset()
	l := NewManifests(dir, cs, zaptest.NewLogger(t))

	l.LoadAll()
	got := serviceNames(t, cs)
	if len(got) != 2 || got["demo/a"] == "" || got["default/b"] == "" {
		t.Fatalf("after load: want demo/a and default/b (namespace defaulted), got %v", got)
	}
	firstRV := got["demo/a"]

	// Edit: b is removed, a is updated with a new resourceVersion and keeps its creation time.
	before, _ := cs.CoreV1().Services("demo").Get(context.Background(), "a", metav1.GetOptions{})
	writeFile(t, path, "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: demo}\nspec:\n  ports: [{port: 8080}]\n")
	l.Sync(path)
	got = serviceNames(t, cs)
	if len(got) != 1 || got["demo/a"] == "" {
		t.Fatalf("after edit: want only demo/a, got %v", got)
	}
	if got["demo/a"] == firstRV {
		t.Fatalf("after edit: resourceVersion did not change (%s)", firstRV)
	}
	after, _ := cs.CoreV1().Services("demo").Get(context.Background(), "a", metav1.GetOptions{})
	if after.Spec.Ports[0].Port != 8080 {
		t.Fatalf("after edit: want port 8080, got %d", after.Spec.Ports[0].Port)
	}
	if !after.CreationTimestamp.Equal(&before.CreationTimestamp) {
		t.Fatalf("creationTimestamp changed on update: %v -> %v", before.CreationTimestamp, after.CreationTimestamp)
	}

	// An invalid file changes nothing.
	writeFile(t, path, "apiVersion: v1\nkind: Service\nmetadata: {name: [broken\n")
	l.Sync(path)
	if got2 := serviceNames(t, cs); len(got2) != 1 || got2["demo/a"] != got["demo/a"] {
		t.Fatalf("invalid file changed objects: before %v, after %v", got, got2)
	}

	// An unknown kind is an error for the whole file too.
	writeFile(t, path, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
	l.Sync(path)
	if got2 := serviceNames(t, cs); len(got2) != 1 {
		t.Fatalf("file with unknown kind changed objects: %v", got2)
	}

	// Deleting the file deletes its objects.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	l.Sync(path)
	if got := serviceNames(t, cs); len(got) != 0 {
		t.Fatalf("after delete: want no services, got %v", got)
	}
}

func TestLocalManifestsDuplicateObjectRejected(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dup.yaml")
	doc := "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: demo}\n"
	writeFile(t, path, doc+"---\n"+doc)
	cs := NewClientset()
	NewManifests(dir, cs, zaptest.NewLogger(t)).LoadAll()
	if got := serviceNames(t, cs); len(got) != 0 {
		t.Fatalf("file defining an object twice must load nothing, got %v", got)
	}
}

// A name or namespace the API server would refuse (not one path segment; a namespace not a DNS label)
// makes the file invalid, as on a real cluster, and the good files still load.
func TestLocalManifestsInvalidNameRejected(t *testing.T) {
	for name, meta := range map[string]string{
		"slash in name":    "{name: web/1, namespace: demo}",
		"percent in name":  "{name: 'web%1', namespace: demo}",
		"dot-dot name":     "{name: '..', namespace: demo}",
		"slash in ns":      "{name: web, namespace: a/b}",
		"upper-case ns":    "{name: web, namespace: Demo}",
		"underscore in ns": "{name: web, namespace: my_ns}",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "bad.yaml"), "apiVersion: v1\nkind: Service\nmetadata: "+meta+"\nspec: {ports: [{port: 80}]}\n")
			writeFile(t, filepath.Join(dir, "good.yaml"), twoServices)
			cs := NewClientset()
			NewManifests(dir, cs, zaptest.NewLogger(t)).LoadAll()
			got := serviceNames(t, cs)
			if len(got) != 2 || got["demo/a"] == "" || got["default/b"] == "" {
				t.Fatalf("want only the good file's demo/a and default/b, got %v", got)
			}
		})
	}
}

// TestLocalManifestsObjectInTwoFiles: an object defined by two files stays while either defines it, and
// goes when neither does.
func TestLocalManifestsObjectInTwoFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	shared := "apiVersion: v1\nkind: Service\nmetadata: {name: shared, namespace: demo}\nspec:\n  ports: [{port: %d}]\n"
	writeFile(t, a, fmt.Sprintf(shared, 80))
	writeFile(t, b, fmt.Sprintf(shared, 81)+"---\napiVersion: v1\nkind: Service\nmetadata: {name: only-b, namespace: demo}\n")
	cs := NewClientset()
	l := NewManifests(dir, cs, zaptest.NewLogger(t))
	l.LoadAll()
	if got := serviceNames(t, cs); len(got) != 2 || got["demo/shared"] == "" || got["demo/only-b"] == "" {
		t.Fatalf("after load: want demo/shared and demo/only-b, got %v", got)
	}

	writeFile(t, b, "apiVersion: v1\nkind: Service\nmetadata: {name: only-b, namespace: demo}\n")
	l.Sync(b)
	if got := serviceNames(t, cs); len(got) != 2 || got["demo/shared"] == "" {
		t.Fatalf("after b dropped it: a still defines demo/shared, got %v", got)
	}

	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	l.Sync(a)
	if got := serviceNames(t, cs); len(got) != 1 || got["demo/only-b"] == "" {
		t.Fatalf("after a was removed: want only demo/only-b, got %v", got)
	}
}

// TestLocalManifestsLargeFileFirstErrorWins: documents decoded in parallel still report the first bad
// document of the file, and such a file loads nothing.
func TestLocalManifestsLargeFileFirstErrorWins(t *testing.T) {
	var docs []string
	for i := range 400 {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: demo}\n", i))
	}
	docs[250] = "apiVersion: v1\nkind: Service\nmetadata: {name: [broken\n"
	docs[300] = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "big.yaml"), strings.Join(docs, "---\n"))
	_, err := readManifestFile(filepath.Join(dir, "big.yaml"))
	if err == nil || !strings.HasPrefix(err.Error(), "document 251:") {
		t.Fatalf("want the error of document 251, got %v", err)
	}
	cs := NewClientset()
	NewManifests(dir, cs, zaptest.NewLogger(t)).LoadAll()
	if got := serviceNames(t, cs); len(got) != 0 {
		t.Fatalf("a file with a bad document must load nothing, got %d objects", len(got))
	}
}

func TestExamplesLocalLoad(t *testing.T) {
	cs := NewClientset()
	NewManifests("../../examples/local", cs, zaptest.NewLogger(t)).LoadAll()
	ctx := context.Background()
	ings, err := cs.NetworkingV1().Ingresses("demo").List(ctx, metav1.ListOptions{})
	if err != nil || len(ings.Items) == 0 {
		t.Fatalf("examples/local: want Ingresses in namespace demo, got %v (err %v)", ings, err)
	}
	slices, err := cs.DiscoveryV1().EndpointSlices("demo").List(ctx, metav1.ListOptions{})
	if err != nil || len(slices.Items) != 2 {
		t.Fatalf("examples/local: want 2 EndpointSlices, got %d (err %v)", len(slices.Items), err)
	}
}

func TestDeployManifestsParse(t *testing.T) {
	objs, err := readManifestFile("../../deploy/ingress-reactor.yaml")
	if err != nil {
		t.Fatalf("deploy/ingress-reactor.yaml: %v", err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetObjectKind().GroupVersionKind().Kind]++
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "IngressClass", "Deployment", "ConfigMap", "PodDisruptionBudget"} {
		if kinds[k] != 1 {
			t.Errorf("deploy manifest: want one %s, got %d", k, kinds[k])
		}
	}
	// The controller's Service and its metrics Service.
	if kinds["Service"] != 2 {
		t.Errorf("deploy manifest: want two Services, got %d", kinds["Service"])
	}
}

// TestLocalSecretStringData: a Secret written with stringData has those keys in data, as the API server
// stores it (the TLS code reads data only).
func TestLocalSecretStringData(t *testing.T) {
	objs, err := decodeManifests([]byte(`
apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: demo}
type: kubernetes.io/tls
data:
  tls.key: b2xk
stringData:
  tls.crt: "-----BEGIN CERTIFICATE-----"
  tls.key: "new"
`))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := objs[0].(*corev1.Secret)
	if !ok {
		t.Fatalf("decoded %T", objs[0])
	}
	if string(s.Data["tls.crt"]) != "-----BEGIN CERTIFICATE-----" || string(s.Data["tls.key"]) != "new" || s.StringData != nil {
		t.Errorf("data %q, stringData %v: want stringData merged into data, winning over data", s.Data, s.StringData)
	}
}
