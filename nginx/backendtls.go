package nginx

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// WriteBackendTLSFiles writes the backend TLS files of a build (Build.BackendTLS) into BackendTLSDir
// under paths.Prefix, the directory of nginx.conf, before NGINX loads a configuration that names them:
// each file atomically (a temporary file renamed over it), mode 0600 in a 0700 directory. A file that
// exists is not written again: its name holds a hash of its content. Then it removes the files of
// every stem that is neither in files nor in keep (the stems of the configuration NGINX may still
// load, such as the previous one) nor named by nginx.conf on disk or a configuration being tested
// (stemsOnDisk), and returns the stems it wrote, for the caller's next keep.
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
	named, err := stemsOnDisk(paths)
	if err != nil {
		return nil, err
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
		_, onDisk := named[stem]
		if !current && !kept && !onDisk {
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

// backendTLSName finds the stems that a configuration file names.
var backendTLSName = regexp.MustCompile(BackendTLSDir + `/([A-Za-z0-9._-]+?)(?:-ca)?\.pem`)

// stemsOnDisk returns the stems named by nginx.conf as installed and by the configurations being tested
// next to it (".nginx.conf.tmp-*", the runtime's writeTemp). The installed file is the one NGINX starts
// on after a crash, and the runtime puts the last good configuration back into it after a failed
// reload: after failed reloads it may be older than the two configurations the caller keeps.
func stemsOnDisk(paths Paths) (map[string]struct{}, error) {
	out := map[string]struct{}{}
	conf := paths.ConfFile()
	files, err := filepath.Glob(filepath.Join(filepath.Dir(conf), "."+filepath.Base(conf)+".tmp-*"))
	if err != nil {
		return nil, err
	}
	for _, f := range append(files, conf) {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("backend TLS files named by %s: %w", f, err)
		}
		for _, m := range backendTLSName.FindAllSubmatch(b, -1) {
			out[string(m[1])] = struct{}{}
		}
	}
	return out, nil
}
