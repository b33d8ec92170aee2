package certs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// File modes of the ssl directory and the files in it.
const (
	// DirMode is the mode the ssl directory is created with and kept at.
	DirMode fs.FileMode = 0o700
	// FileMode is the mode of every certificate file.
	FileMode fs.FileMode = 0o600
)

const (
	pemSuffix    = ".pem"
	caSuffix     = "_ca"
	tempPrefix   = ".tmp-"
	hashedMarker = "_sha256-"
	maxFileName  = 255 // NAME_MAX on Linux file systems
	lockStripes  = 32
	separator    = "_"
)

// Paths are the files that hold one certificate.
type Paths struct {
	// Cert holds the chain followed by the private key; NGINX reads it for
	// ssl_certificate.
	Cert string
	// Key is the file for ssl_certificate_key. It is the same file as Cert:
	// one rename replaces certificate and key together.
	Key string
	// CA holds the Secret's ca.crt. Write and Paths returned by Write set it
	// only when the certificate has a CA; Path always sets it.
	CA string
}

// Store keeps certificates as files in one directory (--ssl-dir). It is safe
// for concurrent use. The directory belongs to the controller: Prune removes
// any file whose name has the form of a Secret's certificate file.
type Store struct {
	dir string

	// mu is held for reading by Write and Remove and for writing by Prune,
	// so that Prune sees a directory no one is writing to.
	mu sync.RWMutex
	// stripes serialise work on the files of one key.
	stripes [lockStripes]sync.Mutex

	hashMu sync.Mutex
	// written maps a file name to the SHA-256 of what this Store last
	// wrote there or found there, to skip rewriting unchanged content.
	written map[string][sha256.Size]byte
}

// NewStore opens the ssl directory, creating it with mode 0700 if needed and
// setting an existing directory's mode to 0700.
func NewStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("ssl directory: empty path")
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("ssl directory %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("ssl directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("ssl directory %s: not a directory", dir)
	}
	if fi.Mode().Perm() != DirMode {
		if err := os.Chmod(dir, DirMode); err != nil {
			return nil, fmt.Errorf("ssl directory %s: set mode %o: %w", dir, DirMode, err)
		}
	}
	return &Store{dir: dir, written: make(map[string][sha256.Size]byte)}, nil
}

// Dir returns the directory the store writes to.
func (s *Store) Dir() string { return s.dir }

// Path returns the files for key without touching the disk. It fails when
// key is not a valid Secret namespace and name (or, with an empty namespace,
// not a valid name), which is what keeps file names inside the directory.
//
// The file names are "<namespace>_<name>.pem" and "<namespace>_<name>_ca.pem",
// or "<name>.pem" for an empty namespace. When such a name would be longer
// than 255 bytes, "<name>" is replaced by "_sha256-" and the hex SHA-256 of
// "<namespace>/<name>".
func (s *Store) Path(key types.NamespacedName) (Paths, error) {
	base, err := fileBase(key)
	if err != nil {
		return Paths{}, err
	}
	return s.paths(base, true), nil
}

func (s *Store) paths(base string, withCA bool) Paths {
	p := Paths{Cert: filepath.Join(s.dir, base+pemSuffix)}
	p.Key = p.Cert
	if withCA {
		p.CA = filepath.Join(s.dir, base+caSuffix+pemSuffix)
	}
	return p
}

// Write stores c atomically and returns where it is. Files whose content is
// unchanged are not rewritten. A CA file left from an earlier version of the
// Secret is removed when c has no CA.
func (s *Store) Write(c *Certificate) (Paths, error) {
	if c == nil {
		return Paths{}, errors.New("write certificate: nil certificate")
	}
	base, err := fileBase(c.SecretKey)
	if err != nil {
		return Paths{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	stripe := s.stripe(base)
	stripe.Lock()
	defer stripe.Unlock()

	all := s.paths(base, true)
	content := c.PEM()
	certChanged, err := s.writeIfChanged(all.Cert, content)
	clear(content)
	if err != nil {
		return Paths{}, fmt.Errorf("write certificate %s: %w", c.SecretKey, err)
	}
	var caChanged bool
	if len(c.CAPEM) > 0 {
		caChanged, err = s.writeIfChanged(all.CA, c.CAPEM)
	} else {
		caChanged, err = s.removeFile(all.CA)
	}
	if err != nil {
		return Paths{}, fmt.Errorf("write certificate %s: %w", c.SecretKey, err)
	}
	if certChanged || caChanged {
		if err := syncDir(s.dir); err != nil {
			return Paths{}, fmt.Errorf("write certificate %s: %w", c.SecretKey, err)
		}
	}
	return s.paths(base, len(c.CAPEM) > 0), nil
}

// Remove deletes the files of key. Files that do not exist are not an error.
func (s *Store) Remove(key types.NamespacedName) error {
	base, err := fileBase(key)
	if err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	stripe := s.stripe(base)
	stripe.Lock()
	defer stripe.Unlock()

	p := s.paths(base, true)
	var removed bool
	for _, name := range []string{p.Cert, p.CA} {
		ok, err := s.removeFile(name)
		if err != nil {
			return fmt.Errorf("remove certificate %s: %w", key, err)
		}
		removed = removed || ok
	}
	if removed {
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("remove certificate %s: %w", key, err)
		}
	}
	return nil
}

// Prune removes the files of every Secret not in keep, and temporary files
// left by an interrupted write. Files whose names are not of the form Store
// gives to a Secret's files, including those of keys with an empty namespace
// such as FakeDefaultKey, are left alone. It returns the base names of the
// files it removed. Keys in keep that are not valid are ignored: no file can
// exist for them.
func (s *Store) Prune(keep map[types.NamespacedName]struct{}) ([]string, error) {
	keepBases := make(map[string]struct{}, len(keep))
	for key := range keep {
		if base, err := fileBase(key); err == nil {
			keepBases[base] = struct{}{}
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("prune ssl directory %s: %w", s.dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, tempPrefix) {
			base, ok := secretFileBase(name)
			if !ok {
				continue
			}
			if _, kept := keepBases[base]; kept {
				continue
			}
		}
		ok, err := s.removeFile(filepath.Join(s.dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			removed = append(removed, name)
		}
	}
	if len(removed) > 0 {
		if err := syncDir(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("prune ssl directory %s: %w", s.dir, err)
	}
	return removed, nil
}

func (s *Store) stripe(base string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(base))
	return &s.stripes[h.Sum32()%lockStripes]
}

// writeIfChanged makes path hold content with mode 0600, unless it already
// does. It reports whether it wrote. The caller syncs the directory.
func (s *Store) writeIfChanged(path string, content []byte) (bool, error) {
	sum := sha256.Sum256(content)
	if s.unchanged(path, content, sum) {
		return false, nil
	}
	if err := writeAtomic(s.dir, path, content); err != nil {
		return false, err
	}
	s.hashMu.Lock()
	s.written[path] = sum
	s.hashMu.Unlock()
	return true, nil
}

// unchanged reports whether path is a 0600 regular file holding content.
// When this Store wrote the file it trusts its record and only checks the
// file's type, mode and size; otherwise (after a restart) it reads the file.
func (s *Store) unchanged(path string, content []byte, sum [sha256.Size]byte) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != FileMode || fi.Size() != int64(len(content)) {
		return false
	}
	s.hashMu.Lock()
	known, ok := s.written[path]
	s.hashMu.Unlock()
	if ok {
		return known == sum
	}
	onDisk, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(onDisk, content) {
		clear(onDisk)
		return false
	}
	clear(onDisk)
	s.hashMu.Lock()
	s.written[path] = sum
	s.hashMu.Unlock()
	return true
}

// removeFile deletes path and forgets it; a missing file is not an error.
func (s *Store) removeFile(path string) (bool, error) {
	s.hashMu.Lock()
	delete(s.written, path)
	s.hashMu.Unlock()
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// writeAtomic replaces path with content: a temporary file in dir is
// written with mode 0600, fsynced and renamed over path. The temporary file
// is removed on failure.
func writeAtomic(dir, path string, content []byte) (err error) {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	// CreateTemp already uses 0600; set it explicitly so the key is never
	// readable by others, whatever CreateTemp does in the future.
	if err = f.Chmod(FileMode); err != nil {
		return err
	}
	if _, err = f.Write(content); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// syncDir makes renames and removals in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}

// fileBase derives the file name stem for key, validating both parts so the
// name cannot contain a separator, "..", or anything but [a-z0-9.-].
func fileBase(key types.NamespacedName) (string, error) {
	if errs := validation.IsDNS1123Subdomain(key.Name); len(errs) > 0 {
		return "", fmt.Errorf("certificate key %q: invalid name: %s", key.String(), strings.Join(errs, "; "))
	}
	longest := len(caSuffix) + len(pemSuffix)
	if key.Namespace == "" {
		if len(key.Name)+longest > maxFileName {
			return "", fmt.Errorf("certificate key %q: name too long for a file name", key.String())
		}
		return key.Name, nil
	}
	if errs := validation.IsDNS1123Label(key.Namespace); len(errs) > 0 {
		return "", fmt.Errorf("certificate key %q: invalid namespace: %s", key.String(), strings.Join(errs, "; "))
	}
	base := key.Namespace + separator + key.Name
	if len(base)+longest > maxFileName {
		sum := sha256.Sum256([]byte(key.Namespace + "/" + key.Name))
		base = key.Namespace + separator + hashedMarker + hex.EncodeToString(sum[:])
	}
	return base, nil
}

// secretFileBase returns the stem of a file Store writes for a Secret (one
// with a namespace), and whether name is such a file.
func secretFileBase(name string) (string, bool) {
	stem, ok := strings.CutSuffix(name, pemSuffix)
	if !ok {
		return "", false
	}
	stem = strings.TrimSuffix(stem, caSuffix)
	ns, rest, ok := strings.Cut(stem, separator)
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 {
		return "", false
	}
	// Secret names cannot start with "_", so a rest that does is a hashed name.
	if sum, hashed := strings.CutPrefix(rest, hashedMarker); hashed {
		if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
			return "", false
		}
		return stem, true
	}
	if len(validation.IsDNS1123Subdomain(rest)) > 0 {
		return "", false
	}
	return stem, true
}
