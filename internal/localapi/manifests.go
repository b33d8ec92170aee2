package localapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Manifests keeps the in-process API of local mode (a Clientset) in step with the YAML files in a directory.
// Every document of every *.yaml/*.yml/*.json file becomes an object; editing a file updates its objects,
// removing a document or a file deletes them. A file that does not parse changes nothing: the objects it
// produced before stay, and the error is logged with the file's path.
type Manifests struct {
	dir     string
	tracker interface {
		Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error
		Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error
		Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error
	}
	log *zap.Logger

	mu sync.Mutex
	// files maps a file path to the objects it holds now.
	files map[string]map[objectRef]runtime.Object
	// definedIn counts the files that define each object, so that a file's change can tell at once whether
	// another file still defines one of its objects.
	definedIn map[objectRef]int
	// created remembers when each object was first loaded, so updates keep their creationTimestamp.
	created map[objectRef]metav1.Time
	watcher *fsnotify.Watcher
	done    chan struct{}
	wg      sync.WaitGroup
}

// objectRef identifies one object of the local API.
type objectRef struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
}

func (r objectRef) String() string {
	return fmt.Sprintf("%s %s/%s", r.GVR.Resource, r.Namespace, r.Name)
}

// NewManifests prepares a loader for dir that writes into client.
func NewManifests(dir string, client *Clientset, log *zap.Logger) *Manifests {
	return &Manifests{
		dir:       dir,
		tracker:   client.Tracker(),
		log:       log,
		files:     map[string]map[objectRef]runtime.Object{},
		definedIn: map[objectRef]int{},
		created:   map[objectRef]metav1.Time{},
		done:      make(chan struct{}),
	}
}

// LoadAll (re)loads every manifest file in the directory. The files are decoded together, their
// documents spread over one goroutine per CPU, and then applied one file after the other in name order.
func (l *Manifests) LoadAll() {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		l.log.Error("read manifests directory", zap.String("dir", l.dir), zap.Error(err))
		return
	}
	var paths []string
	for _, e := range entries {
		if !e.IsDir() && isManifest(e.Name()) {
			paths = append(paths, filepath.Join(l.dir, e.Name()))
		}
	}
	files := readManifestFiles(paths)
	for i, f := range files {
		l.apply(paths[i], f.objs, f.err)
		files[i] = manifestFile{} // the store holds its own copies
	}
}

func isManifest(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Start watches the directory and applies file changes until Stop.
func (l *Manifests) Start() error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", l.dir, err)
	}
	if err := w.Add(l.dir); err != nil {
		_ = w.Close()
		return fmt.Errorf("watch %s: %w", l.dir, err)
	}
	l.watcher = w
	l.wg.Add(1)
	go l.watch()
	return nil
}

// Stop ends the file watch.
func (l *Manifests) Stop() {
	if l.watcher == nil {
		return
	}
	close(l.done)
	_ = l.watcher.Close()
	l.wg.Wait()
}

func (l *Manifests) watch() {
	defer l.wg.Done()
	// Editors write files in several steps; wait for a short quiet period before re-reading a file.
	const settle = 100 * time.Millisecond
	pending := map[string]bool{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-l.done:
			timer.Stop()
			return
		case ev, ok := <-l.watcher.Events:
			if !ok {
				return
			}
			if !isManifest(filepath.Base(ev.Name)) {
				continue
			}
			pending[ev.Name] = true
			timer.Reset(settle)
		case err, ok := <-l.watcher.Errors:
			if !ok {
				return
			}
			l.log.Error("manifest watch error", zap.Error(err))
		case <-timer.C:
			paths := make([]string, 0, len(pending))
			for p := range pending {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			clear(pending)
			for _, p := range paths {
				l.Sync(p)
			}
		}
	}
}

// Sync makes the local API hold exactly the objects that the file at path holds now.
func (l *Manifests) Sync(path string) {
	objs, err := readManifestFile(path)
	l.apply(path, objs, err)
}

// apply makes the local API hold exactly objs for the file at path, or, when reading it failed with err,
// logs that and changes nothing (a file that no longer exists holds no objects).
func (l *Manifests) apply(path string, objs []runtime.Object, err error) {
	if errors.Is(err, os.ErrNotExist) {
		objs, err = nil, nil
	}
	if err != nil {
		l.log.Error("invalid manifest file; keeping the objects loaded before", zap.String("path", path), zap.Error(err))
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.files[path]
	now := make(map[objectRef]runtime.Object, len(objs))
	for _, obj := range objs {
		ref, err := refOf(obj)
		if err != nil {
			l.log.Error("invalid manifest object; keeping the objects loaded before", zap.String("path", path), zap.Error(err))
			return
		}
		if _, dup := now[ref]; dup {
			l.log.Error("invalid manifest file: object defined twice; keeping the objects loaded before", zap.String("path", path), zap.Stringer("object", ref))
			return
		}
		now[ref] = obj
	}
	for ref, obj := range now {
		m, _ := meta.Accessor(obj)
		// The local API hands out resourceVersions; one copied into a file from a cluster means nothing here.
		m.SetResourceVersion("")
		created, seen := l.created[ref]
		if !seen {
			created = metav1.NewTime(time.Now().Truncate(time.Second))
			l.created[ref] = created
		}
		m.SetCreationTimestamp(created)
		if m.GetUID() == "" {
			m.SetUID(types.UID(fmt.Sprintf("local-%s-%s-%s", ref.GVR.Resource, ref.Namespace, ref.Name)))
		}
		if _, existed := before[ref]; existed || l.definedElsewhere(ref, before) {
			if err := l.tracker.Update(ref.GVR, obj, ref.Namespace); err != nil {
				l.log.Error("update local object", zap.String("path", path), zap.Stringer("object", ref), zap.Error(err))
			}
			continue
		}
		if err := l.tracker.Create(ref.GVR, obj, ref.Namespace); err != nil {
			l.log.Error("create local object", zap.String("path", path), zap.Stringer("object", ref), zap.Error(err))
			continue
		}
	}
	for ref := range before {
		if _, kept := now[ref]; kept || l.definedElsewhere(ref, before) {
			continue
		}
		if err := l.tracker.Delete(ref.GVR, ref.Namespace, ref.Name); err != nil {
			l.log.Error("delete local object", zap.String("path", path), zap.Stringer("object", ref), zap.Error(err))
		}
		delete(l.created, ref)
	}
	for ref := range before {
		if _, kept := now[ref]; !kept {
			if l.definedIn[ref]--; l.definedIn[ref] == 0 {
				delete(l.definedIn, ref)
			}
		}
	}
	for ref := range now {
		if _, had := before[ref]; !had {
			l.definedIn[ref]++
		}
	}
	if len(now) == 0 {
		delete(l.files, path)
	} else {
		l.files[path] = now
	}
	l.log.Info("manifests loaded", zap.String("path", path), zap.Int("objects", len(now)), zap.Int("removed", countRemoved(before, now)))
}

// definedElsewhere reports whether a file other than the one that held before (its objects until now)
// defines ref.
func (l *Manifests) definedElsewhere(ref objectRef, before map[objectRef]runtime.Object) bool {
	n := l.definedIn[ref]
	if _, ok := before[ref]; ok {
		n--
	}
	return n > 0
}

func countRemoved(before, now map[objectRef]runtime.Object) int {
	n := 0
	for ref := range before {
		if _, ok := now[ref]; !ok {
			n++
		}
	}
	return n
}

// readManifestFile decodes every document of a YAML or JSON file into typed objects.
func readManifestFile(path string) ([]runtime.Object, error) {
	f := readManifestFiles([]string{path})[0]
	return f.objs, f.err
}

// manifestFile is what a manifest file decodes to: its objects in document order, or the error of its
// first document that failed.
type manifestFile struct {
	objs []runtime.Object
	err  error
}

// readManifestFiles reads and decodes files, one result per path. Decoding YAML is most of the cost of
// loading a large directory, so the documents of all files are decoded by one goroutine per CPU.
func readManifestFiles(paths []string) []manifestFile {
	out := make([]manifestFile, len(paths))
	docs := make([][]manifestDoc, len(paths))
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			out[i].err = err
			continue
		}
		docs[i] = splitManifests(data)
	}
	decodeParallel(docs)
	for i := range paths {
		if out[i].err != nil {
			continue
		}
		out[i] = collect(docs[i])
	}
	return out
}

// manifestDoc is one document of a manifest file and, once decoded, its object or error.
type manifestDoc struct {
	num int // 1-based position in the file, for errors
	raw []byte
	obj runtime.Object
	err error
}

func decodeManifests(data []byte) ([]runtime.Object, error) {
	docs := [][]manifestDoc{splitManifests(data)}
	decodeParallel(docs)
	f := collect(docs[0])
	return f.objs, f.err
}

// splitManifests cuts a file into its documents, leaving out empty and comment-only ones. A document
// that cannot be read ends the list, carrying the error.
func splitManifests(data []byte) []manifestDoc {
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	var docs []manifestDoc
	for num := 1; ; num++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			return append(docs, manifestDoc{num: num, err: err})
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		docs = append(docs, manifestDoc{num: num, raw: raw})
	}
}

// minParallelDocs is the number of documents below which decoding stays on the calling goroutine.
const minParallelDocs = 64

// decodeParallel decodes every document of files in place.
func decodeParallel(files [][]manifestDoc) {
	var all []*manifestDoc
	for _, docs := range files {
		for i := range docs {
			if docs[i].err == nil {
				all = append(all, &docs[i])
			}
		}
	}
	workers := min(goruntime.GOMAXPROCS(0), (len(all)+minParallelDocs-1)/minParallelDocs)
	if workers <= 1 {
		for _, d := range all {
			d.obj, d.err = decodeManifest(d.raw)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(all) {
					return
				}
				all[i].obj, all[i].err = decodeManifest(all[i].raw)
			}
		})
	}
	wg.Wait()
}

// collect gathers a file's decoded documents: its objects, or the error of the first document that failed.
func collect(docs []manifestDoc) manifestFile {
	objs := make([]runtime.Object, 0, len(docs))
	for _, d := range docs {
		if d.err != nil {
			return manifestFile{err: fmt.Errorf("document %d: %w", d.num, d.err)}
		}
		objs = append(objs, d.obj)
	}
	return manifestFile{objs: objs}
}

// decodeManifest decodes one YAML or JSON document into a typed object.
func decodeManifest(raw []byte) (runtime.Object, error) {
	json, err := utilyaml.ToJSON(raw)
	if err != nil {
		return nil, err
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(json, nil, nil)
	if err != nil {
		return nil, err
	}
	if list, ok := obj.(*metav1.List); ok {
		return nil, fmt.Errorf("kind List is not supported (%d items); write one document per object", len(list.Items))
	}
	if s, ok := obj.(*corev1.Secret); ok {
		mergeStringData(s)
	}
	return obj, nil
}

func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

func refOf(obj runtime.Object) (objectRef, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	m, err := meta.Accessor(obj)
	if err != nil {
		return objectRef{}, fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	if m.GetName() == "" {
		return objectRef{}, fmt.Errorf("%s without metadata.name", gvk.Kind)
	}
	// What the API server refuses for every kind: a name or namespace that is not one path segment
	// ("/" and "%" in it, "." or ".."). Modules rely on it (the endpoints module joins a Service's
	// EndpointSlice names with "/").
	if errs := content.IsPathSegmentName(m.GetName()); len(errs) > 0 {
		return objectRef{}, fmt.Errorf("%s %q: metadata.name %s", gvk.Kind, m.GetName(), strings.Join(errs, "; "))
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	ns := m.GetNamespace()
	if ns == "" && namespaced(gvk.Kind) {
		ns = "default"
		m.SetNamespace(ns)
	}
	if errs := validation.IsDNS1123Label(ns); ns != "" && len(errs) > 0 {
		return objectRef{}, fmt.Errorf("%s %q: metadata.namespace %q: %s", gvk.Kind, m.GetName(), ns, strings.Join(errs, "; "))
	}
	return objectRef{GVR: gvr, Namespace: ns, Name: m.GetName()}, nil
}

// namespaced reports whether objects of kind live in a namespace; the local API knows the kinds a demo uses.
func namespaced(kind string) bool {
	switch kind {
	case "Namespace", "IngressClass", "Node", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass":
		return false
	}
	return true
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }

// mergeStringData does what the API server does on write: stringData entries go into data (winning over
// a data entry of the same key) and stringData itself is not stored.
func mergeStringData(s *corev1.Secret) {
	if len(s.StringData) == 0 {
		return
	}
	if s.Data == nil {
		s.Data = make(map[string][]byte, len(s.StringData))
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}
