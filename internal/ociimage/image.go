package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Media types of the OCI image specification.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Descriptor points at a blob (OCI image specification, descriptor).
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      Digest            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ContainerConfig is the runtime part of the image config: how a runtime starts the container.
type ContainerConfig struct {
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Volumes      map[string]struct{} `json:"Volumes,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
}

// History is one entry of the config's history.
type History struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
	Comment   string `json:"comment,omitempty"`
}

// RootFS lists the layers' uncompressed digests.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []Digest `json:"diff_ids"`
}

// Config is the image configuration blob.
type Config struct {
	Created      string          `json:"created"`
	Architecture string          `json:"architecture"`
	Variant      string          `json:"variant,omitempty"`
	OS           string          `json:"os"`
	Config       ContainerConfig `json:"config"`
	RootFS       RootFS          `json:"rootfs"`
	History      []History       `json:"history"`
}

// Manifest is the image manifest blob.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Index is index.json of an image layout.
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// DockerManifest is one entry of a docker-archive's manifest.json.
type DockerManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// Options describe the image Build writes.
type Options struct {
	// RootFS is the directory that becomes the image's only layer.
	RootFS string
	// Created is every time stamp: the config's, the history's and every file's mtime.
	Created time.Time
	// Name is the image reference without a registry, "ingress-reactor:v1.2.3".
	Name string
	// Architecture and Variant are the OCI platform's (GOARCH names: amd64, arm64, arm v7).
	Architecture string
	Variant      string
	Config       ContainerConfig
	// Annotations go on the manifest (the labels stay in Config).
	Annotations map[string]string
	// CreatedBy is the history entry's description of how the layer was made.
	CreatedBy string
}

// Build writes the image as an OCI image layout in layoutDir (which must not exist) and, when tarPath
// is not empty, as one tar holding that layout plus a docker-archive manifest.json, loadable by
// `docker load`, `ctr images import` and `kind load image-archive`. It returns the manifest's
// descriptor. The same Options and root filesystem give byte-identical output.
func Build(opts Options, layoutDir, tarPath string) (Descriptor, error) {
	blobs := filepath.Join(layoutDir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return Descriptor{}, err
	}
	tmp, err := os.CreateTemp(blobs, ".layer-*")
	if err != nil {
		return Descriptor{}, err
	}
	layer, err := WriteLayer(opts.RootFS, opts.Created, tmp)
	if err == nil {
		// CreateTemp makes the file 0600; the layout's blobs are readable by all, as the tar says.
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return Descriptor{}, fmt.Errorf("write layer: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(blobs, layer.Digest.Hex())); err != nil {
		return Descriptor{}, err
	}
	created := opts.Created.UTC().Format(time.RFC3339)
	cfg := Config{
		Created: created, Architecture: opts.Architecture, Variant: opts.Variant, OS: "linux", Config: opts.Config,
		RootFS:  RootFS{Type: "layers", DiffIDs: []Digest{layer.DiffID}},
		History: []History{{Created: created, CreatedBy: opts.CreatedBy}},
	}
	cfgDesc, err := writeJSONBlob(blobs, MediaTypeConfig, cfg)
	if err != nil {
		return Descriptor{}, err
	}
	manifest := Manifest{
		SchemaVersion: 2, MediaType: MediaTypeManifest, Config: cfgDesc,
		Layers:      []Descriptor{{MediaType: MediaTypeLayer, Digest: layer.Digest, Size: layer.Size}},
		Annotations: opts.Annotations,
	}
	manDesc, err := writeJSONBlob(blobs, MediaTypeManifest, manifest)
	if err != nil {
		return Descriptor{}, err
	}
	_, tag, _ := strings.Cut(opts.Name, ":")
	manDesc.Annotations = map[string]string{
		"io.containerd.image.name":          "docker.io/library/" + opts.Name,
		"org.opencontainers.image.ref.name": tag,
	}
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
	}
	if files["index.json"], err = json.Marshal(Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{manDesc}}); err != nil {
		return Descriptor{}, err
	}
	docker := []DockerManifest{{
		Config:   "blobs/sha256/" + cfgDesc.Digest.Hex(),
		RepoTags: []string{opts.Name},
		Layers:   []string{"blobs/sha256/" + layer.Digest.Hex()},
	}}
	if files["manifest.json"], err = json.Marshal(docker); err != nil {
		return Descriptor{}, err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(layoutDir, name), data, 0o644); err != nil {
			return Descriptor{}, err
		}
	}
	if tarPath != "" {
		if err := writeLayoutTar(layoutDir, tarPath, opts.Created); err != nil {
			return Descriptor{}, fmt.Errorf("write %s: %w", tarPath, err)
		}
	}
	return manDesc, nil
}

func writeJSONBlob(blobs, mediaType string, v any) (Descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return Descriptor{}, err
	}
	d := Descriptor{MediaType: mediaType, Digest: Digest(fmt.Sprintf("sha256:%x", sha256.Sum256(data))), Size: int64(len(data))}
	return d, os.WriteFile(filepath.Join(blobs, d.Digest.Hex()), data, 0o644)
}

// writeLayoutTar packs the layout directory (regular files and directories only) in lexical order
// with fixed owners, modes and times.
func writeLayoutTar(layoutDir, tarPath string, mtime time.Time) error {
	f, err := os.Create(tarPath)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(layoutDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(layoutDir, p)
		if err != nil || rel == "." {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime.UTC().Truncate(time.Second), Mode: 0o644, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Image is an image read back from a layout, every blob checked against its digest.
type Image struct {
	Dir            string
	Name           string // io.containerd.image.name of index.json
	ManifestDigest Digest
	Manifest       Manifest
	Config         Config
	Docker         []DockerManifest // manifest.json, when the layout is also a docker-archive
}

// ExtractArchive unpacks an image tar (as Build writes it) into dir, refusing anything but plain
// files and directories inside dir.
func ExtractArchive(tarPath, dir string) error {
	f, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("%s: not a local name", hdr.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected entry type %q in an image archive", hdr.Name, hdr.Typeflag)
		}
	}
}

// ReadLayout reads the single image of an OCI image layout, checking the digest and size of every
// blob it names (the layer's compressed digest and its uncompressed diff ID included).
func ReadLayout(dir string) (*Image, error) {
	var index Index
	if err := readJSON(filepath.Join(dir, "index.json"), &index); err != nil {
		return nil, err
	}
	if len(index.Manifests) != 1 {
		return nil, fmt.Errorf("index.json: want one manifest, have %d", len(index.Manifests))
	}
	img := &Image{Dir: dir, Name: index.Manifests[0].Annotations["io.containerd.image.name"], ManifestDigest: index.Manifests[0].Digest}
	if err := img.readBlobJSON(index.Manifests[0], &img.Manifest); err != nil {
		return nil, err
	}
	if err := img.readBlobJSON(img.Manifest.Config, &img.Config); err != nil {
		return nil, err
	}
	if len(img.Manifest.Layers) != len(img.Config.RootFS.DiffIDs) {
		return nil, fmt.Errorf("manifest has %d layers, config %d diff IDs", len(img.Manifest.Layers), len(img.Config.RootFS.DiffIDs))
	}
	for i, l := range img.Manifest.Layers {
		if err := img.checkLayer(l, img.Config.RootFS.DiffIDs[i]); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
		if err := readJSON(filepath.Join(dir, "manifest.json"), &img.Docker); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// BlobPath is where the blob with digest d lives in the layout.
func (img *Image) BlobPath(d Digest) string {
	return filepath.Join(img.Dir, "blobs", "sha256", d.Hex())
}

func (img *Image) readBlobJSON(d Descriptor, v any) error {
	data, err := os.ReadFile(img.BlobPath(d.Digest))
	if err != nil {
		return err
	}
	if got := Digest(fmt.Sprintf("sha256:%x", sha256.Sum256(data))); got != d.Digest || int64(len(data)) != d.Size {
		return fmt.Errorf("blob %s: content has digest %s and size %d, want size %d", d.Digest, got, len(data), d.Size)
	}
	return json.Unmarshal(data, v)
}

func (img *Image) checkLayer(d Descriptor, diffID Digest) error {
	f, err := os.Open(img.BlobPath(d.Digest))
	if err != nil {
		return err
	}
	defer f.Close()
	blob := sha256.New()
	counter := &countingWriter{w: blob}
	zr, err := gzip.NewReader(io.TeeReader(f, counter))
	if err != nil {
		return fmt.Errorf("layer %s: %w", d.Digest, err)
	}
	diff := sha256.New()
	if _, err := io.Copy(diff, zr); err != nil {
		return fmt.Errorf("layer %s: %w", d.Digest, err)
	}
	if _, err := io.Copy(counter, f); err != nil {
		return err
	}
	if got := digestOf(blob); got != d.Digest || counter.n != d.Size {
		return fmt.Errorf("layer %s: blob has digest %s and size %d, want size %d", d.Digest, got, counter.n, d.Size)
	}
	if got := digestOf(diff); got != diffID {
		return fmt.Errorf("layer %s: uncompressed digest %s, config says %s", d.Digest, got, diffID)
	}
	return nil
}

func readJSON(name string, v any) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// UnpackLayer extracts the image's only layer into dir (see Unpack).
func (img *Image) UnpackLayer(dir string) ([]Entry, error) {
	if len(img.Manifest.Layers) != 1 {
		return nil, fmt.Errorf("want one layer, have %d", len(img.Manifest.Layers))
	}
	f, err := os.Open(img.BlobPath(img.Manifest.Layers[0].Digest))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Unpack(f, dir)
}
