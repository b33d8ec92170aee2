package localapi

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/internal/gen"
)

// BenchmarkLocalLoad measures local mode's start-up load: sets of an Ingress (one host, two Prefix paths,
// TLS), its Service, its EndpointSlice (two endpoints) and its TLS Secret are written as YAML files, then
// loaded by Manifests.LoadAll into a new Clientset, after which informers of the four kinds list and
// sync from it, as the controller's start does. Reported: load-ms/object (LoadAll alone) and
// total-ms/object (LoadAll plus informer sync), with the files laid out one per set or all in one file.
//
//	go test -run '^$' -bench LocalLoad -benchtime 1x ./internal/localapi/
//	LOCAL_LOAD_SETS=10000 go test -run '^$' -bench LocalLoad -benchtime 1x -timeout 30m ./internal/localapi/
func BenchmarkLocalLoad(b *testing.B) {
	sizes := []int{1000, 3000}
	if s := os.Getenv("LOCAL_LOAD_SETS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("LOCAL_LOAD_SETS=%q: want a positive number", s)
		}
		sizes = []int{n}
	}
	cert, err := certs.GenerateFakeDefault(time.Now())
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range sizes {
		for _, layout := range []string{"file-per-set", "one-file"} {
			b.Run(fmt.Sprintf("sets=%d/%s", n, layout), func(b *testing.B) {
				dir := b.TempDir()
				writeLoadSets(b, dir, n, layout == "one-file", cert)
				objects := 4 * n
				var load, total time.Duration
				for i := 0; i < b.N; i++ {
					l, t := loadOnce(b, dir, objects)
					load += l
					total += t
				}
				perObject := func(d time.Duration) float64 {
					return float64(d.Microseconds()) / 1000 / float64(b.N) / float64(objects)
				}
				b.ReportMetric(perObject(load), "load-ms/object")
				b.ReportMetric(perObject(total), "total-ms/object")
			})
		}
	}
}

// loadOnce loads dir into a new local API and waits for informers of the four kinds to hold want objects
// in all. It returns the time LoadAll took and the time until the informers had synced.
func loadOnce(b *testing.B, dir string, want int) (load, total time.Duration) {
	b.Helper()
	began := time.Now()
	cs := NewClientset()
	m := NewManifests(dir, cs, zap.NewNop())
	m.LoadAll()
	load = time.Since(began)

	stop := make(chan struct{})
	f := informers.NewSharedInformerFactory(cs, 0)
	stores := []cache.Store{
		f.Networking().V1().Ingresses().Informer().GetStore(),
		f.Core().V1().Services().Informer().GetStore(),
		f.Discovery().V1().EndpointSlices().Informer().GetStore(),
		f.Core().V1().Secrets().Informer().GetStore(),
	}
	f.Start(stop)
	for typ, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			b.Fatalf("informer %v did not sync", typ)
		}
	}
	total = time.Since(began)
	got := 0
	for _, s := range stores {
		got += len(s.ListKeys())
	}
	close(stop)
	f.Shutdown()
	if got != want {
		b.Fatalf("informers hold %d objects, want %d", got, want)
	}
	return load, total
}

// writeLoadSets writes n sets as YAML into dir: one file per set, or all in one file.
func writeLoadSets(b *testing.B, dir string, n int, oneFile bool, cert *certs.Certificate) {
	b.Helper()
	var all bytes.Buffer
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		host := name + ".bench.example.com"
		objs := []runtime.Object{
			gen.Ingress("bench", name, gen.Class("ingress-reactor"),
				gen.Rule(host, "/", gen.Backend(name, 80)), gen.Rule(host, "/api", gen.Backend(name, "http")),
				gen.TLS(name+"-tls", host)),
			gen.Service("bench", name, gen.Port("http", 80)),
			gen.EndpointSlice("bench", name+"-1", name, gen.SlicePort("http", 80),
				gen.Endpoint(fmt.Sprintf("10.%d.%d.1", i/250, i%250)), gen.Endpoint(fmt.Sprintf("10.%d.%d.2", i/250, i%250))),
			gen.Secret("bench", name+"-tls", gen.TLSData(cert.PEM(), cert.KeyPEM())),
		}
		var doc bytes.Buffer
		for _, obj := range objs {
			writeYAMLDoc(b, &doc, obj)
		}
		if oneFile {
			all.Write(doc.Bytes())
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), doc.Bytes(), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	if oneFile {
		if err := os.WriteFile(filepath.Join(dir, "all.yaml"), all.Bytes(), 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// writeYAMLDoc appends obj as one YAML document, with its apiVersion and kind, without the
// resourceVersion and UID gen sets (a manifest written by hand has neither).
func writeYAMLDoc(b *testing.B, w *bytes.Buffer, obj runtime.Object) {
	b.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		b.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	m := obj.(metav1.Object)
	m.SetResourceVersion("")
	m.SetUID("")
	out, err := yaml.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	w.WriteString("---\n")
	w.Write(out)
}
