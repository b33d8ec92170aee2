package certs

import (
	"crypto/tls"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func newTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := NewStore(filepath.Join(t.TempDir(), "ssl"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func stat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// dirNames lists the directory, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestNewStoreDirectoryMode(t *testing.T) {
	t.Run("creates missing directories with mode 0700", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "ssl")
		s, err := NewStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := mode(t, s.Dir()); got != fs.ModeDir|0o700 {
			t.Errorf("mode = %v, want drwx------", got)
		}
	})
	t.Run("tightens an existing directory to 0700", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ssl")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := NewStore(dir); err != nil {
			t.Fatal(err)
		}
		if got := mode(t, dir); got != fs.ModeDir|0o700 {
			t.Errorf("mode = %v, want drwx------", got)
		}
	})
	t.Run("rejects a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "ssl")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := NewStore(file); err == nil {
			t.Fatal("NewStore accepted a regular file")
		}
	})
	t.Run("rejects a nil certificate", func(t *testing.T) {
		if _, err := newTestStore(t).Write(nil); err == nil {
			t.Fatal("Write(nil) succeeded")
		}
	})
	t.Run("rejects an empty path", func(t *testing.T) {
		if _, err := NewStore(""); err == nil {
			t.Fatal("NewStore accepted an empty path")
		}
	})
}

func TestStoreWrite(t *testing.T) {
	s := newTestStore(t)
	c := mustCertificate(t, nn("shop", "shop-tls"), "shop.example.com")
	p, err := s.Write(c)
	if err != nil {
		t.Fatal(err)
	}
	want := Paths{Cert: filepath.Join(s.Dir(), "shop_shop-tls.pem"), Key: filepath.Join(s.Dir(), "shop_shop-tls.pem")}
	if p != want {
		t.Fatalf("Paths = %+v, want %+v", p, want)
	}
	if got := mode(t, p.Cert); got != 0o600 {
		t.Errorf("file mode = %v, want -rw-------", got)
	}
	if got := mode(t, s.Dir()); got != fs.ModeDir|0o700 {
		t.Errorf("dir mode = %v, want drwx------", got)
	}
	// NGINX reads the one file as ssl_certificate and ssl_certificate_key;
	// crypto/tls reading it twice is the closest check here.
	pair, err := tls.LoadX509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatalf("written file is not a key pair: %v", err)
	}
	if len(pair.Certificate) != 2 {
		t.Errorf("file holds %d certificates, want leaf and intermediate", len(pair.Certificate))
	}
	if got := dirNames(t, s.Dir()); !slices.Equal(got, []string{"shop_shop-tls.pem"}) {
		t.Errorf("directory holds %q", got)
	}
	if pp, err := s.Path(c.SecretKey); err != nil || pp.Cert != p.Cert || pp.CA != filepath.Join(s.Dir(), "shop_shop-tls_ca.pem") {
		t.Errorf("Path = %+v, %v", pp, err)
	}
}

func TestStoreWriteCA(t *testing.T) {
	s := newTestStore(t)
	crt, key := leafPair(t, kindP256, pkcs8, "ca.example.com")
	k := nn("default", "mtls")
	withCA, err := ParsePEM(k, crt, key, pemCerts(sharedCA(t).root))
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Write(withCA)
	if err != nil {
		t.Fatal(err)
	}
	if p.CA != filepath.Join(s.Dir(), "default_mtls_ca.pem") {
		t.Fatalf("CA path = %q", p.CA)
	}
	if got := mode(t, p.CA); got != 0o600 {
		t.Errorf("CA file mode = %v, want -rw-------", got)
	}
	if b, err := os.ReadFile(p.CA); err != nil || string(b) != string(withCA.CAPEM) {
		t.Errorf("CA file content differs (err %v)", err)
	}
	// The Secret loses its ca.crt: the CA file goes away.
	without, err := ParsePEM(k, crt, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.Write(without)
	if err != nil {
		t.Fatal(err)
	}
	if p2.CA != "" {
		t.Errorf("Paths.CA = %q for a certificate without CA", p2.CA)
	}
	if _, err := os.Lstat(p.CA); !os.IsNotExist(err) {
		t.Errorf("stale CA file still there: %v", err)
	}
}

func TestStoreAtomicReplace(t *testing.T) {
	s := newTestStore(t)
	k := nn("default", "rotating")
	first := mustCertificate(t, k, "r.example.com")
	p, err := s.Write(first)
	if err != nil {
		t.Fatal(err)
	}
	before := stat(t, p.Cert)

	crt, key := leafPair(t, kindRSA2048, pkcs1, "r.example.com")
	second, err := ParsePEM(k, crt, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(second); err != nil {
		t.Fatal(err)
	}
	after := stat(t, p.Cert)
	// A new inode means the content arrived by rename: a reader holding the
	// old file saw only old content, a reader opening the path sees only new.
	if os.SameFile(before, after) {
		t.Error("file was rewritten in place, not replaced by rename")
	}
	if got, _ := os.ReadFile(p.Cert); string(got) != string(second.PEM()) {
		t.Error("file does not hold the new certificate")
	}
	if after.Mode() != 0o600 {
		t.Errorf("mode after replace = %v", after.Mode())
	}
	if got := dirNames(t, s.Dir()); !slices.Equal(got, []string{"default_rotating.pem"}) {
		t.Errorf("directory holds %q; temporary files left behind?", got)
	}
}

func TestStoreSkipsUnchanged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ssl")
	s, err := NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := mustCertificate(t, nn("default", "same"), "same.example.com")
	p, err := s.Write(c)
	if err != nil {
		t.Fatal(err)
	}
	first := stat(t, p.Cert)

	if _, err := s.Write(c); err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(first, stat(t, p.Cert)) {
		t.Error("unchanged certificate was rewritten")
	}

	// After a restart the store has no memory, and compares with the disk.
	restarted, err := NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Write(c); err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(first, stat(t, p.Cert)) {
		t.Error("unchanged certificate was rewritten after a restart")
	}

	// A file someone loosened to 0644 is replaced, not trusted.
	if err := os.Chmod(p.Cert, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Write(c); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, p.Cert); got != 0o600 {
		t.Errorf("mode = %v after rewrite, want -rw-------", got)
	}

	// A file deleted behind the store's back is written again.
	if err := os.Remove(p.Cert); err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Write(c); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p.Cert); err != nil || string(got) != string(c.PEM()) {
		t.Errorf("deleted file not restored (err %v)", err)
	}
}

func TestStoreRemove(t *testing.T) {
	s := newTestStore(t)
	crt, key := leafPair(t, kindP256, pkcs8, "rm.example.com")
	c, err := ParsePEM(nn("default", "rm"), crt, key, pemCerts(sharedCA(t).root))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(c); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(c.SecretKey); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, s.Dir()); len(got) != 0 {
		t.Errorf("files left after Remove: %q", got)
	}
	if err := s.Remove(c.SecretKey); err != nil {
		t.Errorf("removing a missing certificate: %v", err)
	}
	// Removing and writing again works: no stale "unchanged" record.
	if _, err := s.Write(c); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, s.Dir()); len(got) != 2 {
		t.Errorf("after rewrite the directory holds %q", got)
	}
}

func TestStorePrune(t *testing.T) {
	s := newTestStore(t)
	crt, key := leafPair(t, kindP256, pkcs8, "p.example.com")
	for _, k := range []types.NamespacedName{nn("a", "kept"), nn("b", "gone"), nn("b", "gone.too"), nn("c", strings.Repeat("l", 253))} {
		c, err := ParsePEM(k, crt, key, pemCerts(sharedCA(t).root))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(c); err != nil {
			t.Fatal(err)
		}
	}
	fake, err := GenerateFakeDefault(testNow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(fake); err != nil {
		t.Fatal(err)
	}
	// Files the store did not make, and a temporary file from a crash.
	for _, name := range []string{"dhparam.pem", "README", "notes_a.txt", ".tmp-123456"} {
		if err := os.WriteFile(filepath.Join(s.Dir(), name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	longPaths, _ := s.Path(nn("c", strings.Repeat("l", 253)))
	longFile := filepath.Base(longPaths.Cert)
	if len(longFile) > 255 || !strings.HasPrefix(longFile, "c__sha256-") {
		t.Fatalf("long name became %q", longFile)
	}

	removed, err := s.Prune(map[types.NamespacedName]struct{}{nn("a", "kept"): {}, nn("c", strings.Repeat("l", 253)): {}, nn("Not Valid", "x"): {}})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	wantRemoved := []string{".tmp-123456", "b_gone.pem", "b_gone.too.pem", "b_gone.too_ca.pem", "b_gone_ca.pem"}
	if !slices.Equal(removed, wantRemoved) {
		t.Errorf("removed %q, want %q", removed, wantRemoved)
	}
	want := []string{"README", "a_kept.pem", "a_kept_ca.pem", longFile, strings.TrimSuffix(longFile, ".pem") + "_ca.pem", "default-fake-certificate.pem", "dhparam.pem", "notes_a.txt"}
	slices.Sort(want)
	if got := dirNames(t, s.Dir()); !slices.Equal(got, want) {
		t.Errorf("directory holds %q, want %q", got, want)
	}

	// Dropping the last references removes the long-named files too.
	removed, err = s.Prune(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 4 {
		t.Errorf("second prune removed %q, want the 4 remaining secret files", removed)
	}
}

func TestStoreRejectsUnsafeKeys(t *testing.T) {
	keys := map[string]types.NamespacedName{
		"parent namespace":            nn("..", "x"),
		"dot namespace":               nn(".", "x"),
		"traversal in name":           nn("default", "../../etc/passwd"),
		"slash in name":               nn("default", "a/b"),
		"dot-dot name":                nn("default", ".."),
		"absolute name":               nn("default", "/etc/shadow"),
		"underscore in namespace":     nn("a_b", "c"),
		"underscore in name":          nn("default", "x_y"),
		"upper case":                  nn("Default", "x"),
		"NUL byte":                    nn("default", "x\x00y"),
		"space":                       nn("default", "x y"),
		"empty name":                  nn("default", ""),
		"empty key":                   nn("", ""),
		"namespace too long":          nn(strings.Repeat("n", 64), "x"),
		"name too long":               nn("default", strings.Repeat("n", 254)),
		"dots in namespace":           nn("a.b", "x"),
		"controller name too long":    nn("", strings.Repeat("n", 249)),
		"controller name traversal":   nn("", "../x"),
		"name starting with a hyphen": nn("default", "-x"),
	}
	for name, key := range keys {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			s, err := NewStore(filepath.Join(root, "ssl"))
			if err != nil {
				t.Fatal(err)
			}
			c := mustCertificate(t, key, "x.example.com")
			if p, err := s.Write(c); err == nil {
				t.Fatalf("Write accepted key %q: %+v", key, p)
			}
			if _, err := s.Path(key); err == nil {
				t.Errorf("Path accepted key %q", key)
			}
			if err := s.Remove(key); err == nil {
				t.Errorf("Remove accepted key %q", key)
			}
			if got := dirNames(t, root); !slices.Equal(got, []string{"ssl"}) {
				t.Errorf("files appeared outside the ssl dir: %q", got)
			}
			if got := dirNames(t, s.Dir()); len(got) != 0 {
				t.Errorf("files appeared in the ssl dir: %q", got)
			}
		})
	}
}

// TestStoreConcurrentWrites runs writers on distinct and shared keys; run
// with -race. Each file must end whole, 0600, holding one of the versions.
func TestStoreConcurrentWrites(t *testing.T) {
	s := newTestStore(t)
	shared := nn("default", "shared")
	versions := []*Certificate{
		mustCertificate(t, shared, "v1.example.com"),
		mustCertificate(t, shared, "v2.example.com"),
	}
	var own [8][8]*Certificate
	for w := range own {
		for i := range own[w] {
			own[w][i] = mustCertificate(t, nn("default", fmt.Sprintf("w%d-%d", w, i)), "x.example.com")
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 128)
	for w := range 8 {
		wg.Go(func() {
			for i := range 8 {
				if _, err := s.Write(own[w][i]); err != nil {
					errs <- err
				}
				if _, err := s.Write(versions[(w+i)%2]); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	names := dirNames(t, s.Dir())
	if len(names) != 65 {
		t.Errorf("directory holds %d files, want 65", len(names))
	}
	p, _ := s.Path(shared)
	got, err := os.ReadFile(p.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(versions[0].PEM()) && string(got) != string(versions[1].PEM()) {
		t.Error("shared file holds neither version whole")
	}
	for _, n := range names {
		if m := mode(t, filepath.Join(s.Dir(), n)); m != 0o600 {
			t.Errorf("%s has mode %v", n, m)
		}
	}
}
