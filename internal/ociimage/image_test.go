package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netBindServiceCap is what `setcap cap_net_bind_service=+ep` stores: VFS_CAP_REVISION_2 with the
// effective flag, permitted bit 10, nothing inheritable.
var netBindServiceCap = []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// makeRootFS builds a small tree with every kind of entry the image has: directories (one sticky),
// regular files (one set-uid, one with a file capability when root), a symlink and a hard link.
func makeRootFS(t *testing.T, withCaps bool) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "usr/sbin"), 0o755))
	must(os.Mkdir(filepath.Join(root, "tmp"), 0o755))
	must(os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky))
	must(os.WriteFile(filepath.Join(root, "usr/bin/ingress-reactor"), []byte("controller"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/sbin/nginx"), []byte("nginx"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/bin/su"), []byte("su"), 0o755))
	must(os.Chmod(filepath.Join(root, "usr/bin/su"), 0o755|os.ModeSetuid))
	must(os.Symlink("usr/bin", filepath.Join(root, "bin")))
	must(os.Link(filepath.Join(root, "usr/sbin/nginx"), filepath.Join(root, "usr/sbin/nginx-link")))
	if withCaps {
		must(unix.Setxattr(filepath.Join(root, "usr/sbin/nginx"), CapabilityXattr, netBindServiceCap, 0))
		must(os.Lchown(filepath.Join(root, "tmp"), 101, 101))
	}
	must(os.Chtimes(filepath.Join(root, "usr/bin/ingress-reactor"), time.Now(), time.Now()))
	return root
}

func TestWriteLayerIsDeterministic(t *testing.T) {
	root := makeRootFS(t, os.Geteuid() == 0)
	epoch := time.Unix(1700000000, 0)
	var first, second bytes.Buffer
	a, err := WriteLayer(root, epoch, &first)
	if err != nil {
		t.Fatal(err)
	}
	// A touched file (new mtime) and a second walk must not change a byte.
	if err := os.Chtimes(filepath.Join(root, "usr/sbin/nginx"), time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	b, err := WriteLayer(root, epoch, &second)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatalf("two layers of the same tree differ: %+v vs %+v", a, b)
	}
	if a.Size != int64(first.Len()) {
		t.Errorf("Size = %d, blob has %d bytes", a.Size, first.Len())
	}
	c, err := WriteLayer(root, epoch.Add(time.Second), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DiffID == a.DiffID {
		t.Error("another SOURCE_DATE_EPOCH gave the same layer: mtimes are not the epoch")
	}
}

func TestLayerHeaders(t *testing.T) {
	root := makeRootFS(t, false)
	epoch := time.Unix(1700000000, 0)
	var buf bytes.Buffer
	if _, err := WriteLayer(root, epoch, &buf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := Unpack(&buf, dir)
	if os.Geteuid() != 0 && err != nil {
		t.Skipf("unpacking needs root (chown): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		typ  byte
		mode int64
		link string
	}{
		{"bin", tar.TypeSymlink, 0o777, "usr/bin"},
		{"tmp/", tar.TypeDir, 0o1777, ""},
		{"usr/", tar.TypeDir, 0o755, ""},
		{"usr/bin/", tar.TypeDir, 0o755, ""},
		{"usr/bin/ingress-reactor", tar.TypeReg, 0o755, ""},
		{"usr/bin/su", tar.TypeReg, 0o4755, ""},
		{"usr/sbin/", tar.TypeDir, 0o755, ""},
		{"usr/sbin/nginx", tar.TypeReg, 0o755, ""},
		{"usr/sbin/nginx-link", tar.TypeLink, 0o755, "usr/sbin/nginx"},
	}
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(entries), len(want))
	}
	for i, w := range want {
		h := entries[i].Header
		if h.Name != w.name || h.Typeflag != w.typ || h.Mode != w.mode || h.Linkname != w.link {
			t.Errorf("entry %d = %q type %q mode %o link %q, want %q type %q mode %o link %q",
				i, h.Name, h.Typeflag, h.Mode, h.Linkname, w.name, w.typ, w.mode, w.link)
		}
		if !h.ModTime.Equal(epoch) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v owner names %q/%q, want the epoch and no names", h.Name, h.ModTime, h.Uname, h.Gname)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("unpacked /tmp has mode %v, want sticky 0777", fi.Mode())
	}
	if data, err := os.ReadFile(filepath.Join(dir, "usr/sbin/nginx-link")); err != nil || string(data) != "nginx" {
		t.Errorf("hard link reads %q, %v", data, err)
	}
}

func TestCapabilityRoundTrip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting security.capability needs root (CAP_SETFCAP); the xattr round trip is not tested here")
	}
	root := makeRootFS(t, true)
	layout := filepath.Join(t.TempDir(), "layout")
	tarPath := filepath.Join(t.TempDir(), "image.tar")
	opts := Options{RootFS: root, Created: time.Unix(1700000000, 0), Name: "ingress-reactor:test", Architecture: "amd64",
		Config: ContainerConfig{User: "101:101", Labels: map[string]string{"a": "b"}}, CreatedBy: "test"}
	desc, err := Build(opts, layout, tarPath)
	if err != nil {
		t.Fatal(err)
	}
	againPath := filepath.Join(t.TempDir(), "again.tar")
	again, err := Build(opts, filepath.Join(t.TempDir(), "layout"), againPath)
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := os.ReadDir(filepath.Join(layout, "blobs", "sha256"))
	if err != nil || len(blobs) != 3 {
		t.Fatalf("layout has blobs %v (%v), want the layer, config and manifest", blobs, err)
	}
	for _, b := range blobs {
		fi, err := b.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("blob %s has mode %v, want 0644 like the tar's entries", b.Name(), fi.Mode())
		}
	}
	if desc.Digest != again.Digest {
		t.Fatalf("two builds: manifests %s and %s", desc.Digest, again.Digest)
	}
	tarA, errA := os.ReadFile(tarPath)
	tarB, errB := os.ReadFile(againPath)
	if errA != nil || errB != nil || !bytes.Equal(tarA, tarB) {
		t.Fatalf("two builds wrote different image tars (%v, %v)", errA, errB)
	}

	extracted := t.TempDir()
	if err := ExtractArchive(tarPath, extracted); err != nil {
		t.Fatal(err)
	}
	img, err := ReadLayout(extracted)
	if err != nil {
		t.Fatal(err)
	}
	if img.ManifestDigest != desc.Digest || img.Name != "docker.io/library/ingress-reactor:test" || img.Config.Config.User != "101:101" {
		t.Errorf("read back %s %q user %q", img.ManifestDigest, img.Name, img.Config.Config.User)
	}
	if len(img.Docker) != 1 || img.Docker[0].RepoTags[0] != "ingress-reactor:test" || img.Docker[0].Config != "blobs/sha256/"+img.Manifest.Config.Digest.Hex() {
		t.Errorf("docker manifest.json = %+v", img.Docker)
	}
	rootfs := t.TempDir()
	entries, err := img.UnpackLayer(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	var carried bool
	for _, e := range entries {
		if e.Header.Name == "usr/sbin/nginx" {
			carried = bytes.Equal(e.Xattr(CapabilityXattr), netBindServiceCap)
		} else if e.Xattr(CapabilityXattr) != nil {
			t.Errorf("%s carries a capability it does not have", e.Header.Name)
		}
	}
	if !carried {
		t.Error("the layer does not carry nginx's security.capability as a PAX record")
	}
	got := make([]byte, 64)
	n, err := unix.Getxattr(filepath.Join(rootfs, "usr/sbin/nginx"), CapabilityXattr, got)
	if err != nil || !bytes.Equal(got[:n], netBindServiceCap) {
		t.Errorf("unpacked nginx has capability %x (%v), want %x", got[:max(n, 0)], err, netBindServiceCap)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(rootfs, "tmp"), &st); err != nil || st.Uid != 101 || st.Gid != 101 {
		t.Errorf("unpacked /tmp owner %d:%d (%v), want 101:101", st.Uid, st.Gid, err)
	}
}
