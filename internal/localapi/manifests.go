package localapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
		dir:     dir,
		tracker: client.Tracker(),
		log:     log,
		files:   map[string]map[objectRef]runtime.Object{},
		created: map[objectRef]metav1.Time{},
		done:    make(chan struct{}),
	}
}

// LoadAll (re)loads every manifest file in the directory.
func (l *Manifests) LoadAll() {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		l.log.Error("read manifests directory", zap.String("dir", l.dir), zap.Error(err))
		return
	}
	for _, e := range entries {
		if !e.IsDir() && isManifest(e.Name()) {
			l.Sync(filepath.Join(l.dir, e.Name()))
		}
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
		if _, existed := before[ref]; existed || l.owned(ref, path) {
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
		if _, kept := now[ref]; kept || l.owned(ref, path) {
			continue
		}
		if err := l.tracker.Delete(ref.GVR, ref.Namespace, ref.Name); err != nil {
			l.log.Error("delete local object", zap.String("path", path), zap.Stringer("object", ref), zap.Error(err))
		}
		delete(l.created, ref)
	}
	if len(now) == 0 {
		delete(l.files, path)
	} else {
		l.files[path] = now
	}
	l.log.Info("manifests loaded", zap.String("path", path), zap.Int("objects", len(now)), zap.Int("removed", countRemoved(before, now)))
}

// owned reports whether another file than path currently defines ref.
func (l *Manifests) owned(ref objectRef, path string) bool {
	for p, objs := range l.files {
		if p == path {
			continue
		}
		if _, ok := objs[ref]; ok {
			return true
		}
	}
	return false
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
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeManifests(data)
}

func decodeManifests(data []byte) ([]runtime.Object, error) {
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	decoder := scheme.Codecs.UniversalDeserializer()
	var objs []runtime.Object
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		json, err := utilyaml.ToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		obj, _, err := decoder.Decode(json, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if list, ok := obj.(*metav1.List); ok {
			return nil, fmt.Errorf("document %d: kind List is not supported (%d items); write one document per object", doc, len(list.Items))
		}
		if s, ok := obj.(*corev1.Secret); ok {
			mergeStringData(s)
		}
		objs = append(objs, obj)
	}
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
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	ns := m.GetNamespace()
	if ns == "" && namespaced(gvk.Kind) {
		ns = "default"
		m.SetNamespace(ns)
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
