package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ingress-reactor/ingress-reactor/internal/ociimage"
)

func TestRunRecordsPackagesInLabels(t *testing.T) {
	rootfs := t.TempDir()
	manifest := filepath.Join(rootfs, manifestFile)
	if err := os.MkdirAll(filepath.Dir(manifest), 0o755); err != nil {
		t.Fatal(err)
	}
	pkgs := "ca-certificates\t20230311+deb12u1\tall\nlua-cjson\t2.1.0+dfsg-2.2\tamd64\nnginx\t1.22.1-9+deb12u11\tamd64\n"
	if err := os.WriteFile(manifest, []byte(pkgs), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	layout := filepath.Join(t.TempDir(), "oci")
	if err := run(rootfs, layout, "", "v1.2.3", "abc1234", "ingress-reactor:v1.2.3"); err != nil {
		t.Fatal(err)
	}
	img, err := ociimage.ReadLayout(layout)
	if err != nil {
		t.Fatal(err)
	}
	labels := img.Config.Config.Labels
	for k, want := range map[string]string{
		"io.ingress-reactor.packages":       "ca-certificates=20230311+deb12u1,lua-cjson=2.1.0+dfsg-2.2,nginx=1.22.1-9+deb12u11",
		"io.ingress-reactor.nginx.version":  "1.22.1-9+deb12u11",
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.revision": "abc1234",
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
	} {
		if labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, labels[k], want)
		}
		if img.Manifest.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, img.Manifest.Annotations[k], want)
		}
	}
	if img.Config.Architecture != "amd64" || img.Config.Created != "2023-11-14T22:13:20Z" || img.Config.Config.User != "101:101" {
		t.Errorf("config: architecture %q created %q user %q", img.Config.Architecture, img.Config.Created, img.Config.Config.User)
	}
	if img.Name != "docker.io/library/ingress-reactor:v1.2.3" {
		t.Errorf("image name %q", img.Name)
	}
}

func TestRunRefusesWithoutEpochOrNginx(t *testing.T) {
	rootfs := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if err := run(rootfs, filepath.Join(t.TempDir(), "oci"), "", "v", "c", "ingress-reactor:v"); err == nil {
		t.Error("built without SOURCE_DATE_EPOCH")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	manifest := filepath.Join(rootfs, manifestFile)
	if err := os.MkdirAll(filepath.Dir(manifest), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, []byte("lua-cjson\t2.1.0\tamd64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(rootfs, filepath.Join(t.TempDir(), "oci"), "", "v", "c", "ingress-reactor:v"); err == nil {
		t.Error("built an image whose package manifest has no nginx")
	}
}

// The config names the platform as runtimes match it (GOARCH names), not as Debian does.
func TestRunNamesTheOCIPlatform(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	for debArch, want := range map[string][2]string{"amd64": {"amd64", ""}, "ppc64el": {"ppc64le", ""}, "armhf": {"arm", "v7"}, "i386": {"386", ""}} {
		rootfs := t.TempDir()
		manifest := filepath.Join(rootfs, manifestFile)
		if err := os.MkdirAll(filepath.Dir(manifest), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(manifest, []byte("nginx\t1.22.1-9\t"+debArch+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		layout := filepath.Join(t.TempDir(), "oci")
		if err := run(rootfs, layout, "", "v", "c", "ingress-reactor:v"); err != nil {
			t.Fatal(err)
		}
		img, err := ociimage.ReadLayout(layout)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]string{img.Config.Architecture, img.Config.Variant}; got != want {
			t.Errorf("Debian %s: config architecture/variant %q, want %q", debArch, got, want)
		}
	}
}
