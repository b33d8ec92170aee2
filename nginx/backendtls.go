package nginx

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteBackendTLSFiles writes the backend TLS files of a build (Build.BackendTLS) into BackendTLSDir
// under paths.Prefix, the directory of nginx.conf, before NGINX loads a configuration that names them:
// each file atomically (a temporary file renamed over it), mode 0600 in a 0700 directory. A file that
// exists is not written again: its name holds a hash of its content. Then it removes the files of
// every stem that is neither in files nor in keep (the stems of the configuration NGINX may still
// load, such as the previous one), and returns the stems it wrote, for the caller's next keep.
func WriteBackendTLSFiles(paths Paths, files []*BackendTLSFiles, keep map[string]struct{}) (map[string]struct{}, error) {
	dir := filepath.Join(paths.Prefix, BackendTLSDir)
	if len(files) == 0 && len(keep) == 0 {
		// Nothing to write, and nothing to keep: remove what an earlier configuration left, if anything.
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return map[string]struct{}{}, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("backend TLS directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("backend TLS directory: %w", err)
	}
	now := make(map[string]struct{}, len(files))
	for _, f := range files {
		now[f.Stem] = struct{}{}
		if f.certAndKey != nil {
			if err := writeFileOnce(dir, filepath.Join(paths.Prefix, f.CertFile()), f.certAndKey); err != nil {
				return nil, fmt.Errorf("write backend TLS certificate %s: %w", f.Stem, err)
			}
		}
		if f.ca != nil {
			if err := writeFileOnce(dir, filepath.Join(paths.Prefix, f.CAFile()), f.ca); err != nil {
				return nil, fmt.Errorf("write backend TLS CA %s: %w", f.Stem, err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("backend TLS directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		stem := strings.TrimSuffix(strings.TrimSuffix(name, ".pem"), "-ca")
		if strings.HasPrefix(name, ".tmp-") {
			stem = "" // a temporary file a stopped write left
		}
		_, current := now[stem]
		_, kept := keep[stem]
		if !current && !kept {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
				return nil, fmt.Errorf("remove backend TLS file: %w", err)
			}
		}
	}
	return now, nil
}

// writeFileOnce writes content to path through a temporary file in dir, unless path already holds it.
func writeFileOnce(dir, path string, content []byte) (err error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	tmp, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err = tmp.Write(content); err != nil {
		_ = tmp.Close()
		return err
	}
	if err = tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
