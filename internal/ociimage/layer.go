// Package ociimage writes and reads the single-layer container image that `make image` builds: a
// root filesystem directory packed into a deterministic layer, an OCI image layout that is also a
// docker-archive, and the reverse (unpacking a layer into a directory with owners, modes, links and
// file capabilities), which the image's integration test uses. The standard library and
// golang.org/x/sys (extended attributes, device numbers) only.
package ociimage

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CapabilityXattr is the extended attribute that holds a file's capabilities (setcap). It is the
// only extended attribute a layer carries: the image's binaries bind ports below 1024 through it.
const CapabilityXattr = "security.capability"

// paxXattrPrefix is how tar carries extended attributes (the SCHILY convention that containerd,
// Docker and GNU tar read).
const paxXattrPrefix = "SCHILY.xattr."

// Digest is "sha256:<hex>".
type Digest string

// Hex is the digest without its algorithm, as blob file names use it.
func (d Digest) Hex() string { return strings.TrimPrefix(string(d), "sha256:") }

func digestOf(h hash.Hash) Digest { return Digest("sha256:" + hex.EncodeToString(h.Sum(nil))) }

// LayerInfo describes a written layer: DiffID is the digest of the uncompressed tar (the image
// config's rootfs.diff_ids), Digest and Size those of the gzip blob (the manifest's layer).
type LayerInfo struct {
	DiffID Digest
	Digest Digest
	Size   int64
}

// WriteLayer packs the directory root into a gzip-compressed tar on w. The result depends only on
// the tree's names, contents, modes, owners, link targets and file capabilities: entries are in
// lexical order, every time stamp is mtime, user and group names are empty (numeric owners only),
// and the gzip header carries no name or time. FIFOs and sockets are refused.
func WriteLayer(root string, mtime time.Time, w io.Writer) (LayerInfo, error) {
	blob := sha256.New()
	counter := &countingWriter{w: io.MultiWriter(w, blob)}
	zw, err := gzip.NewWriterLevel(counter, gzip.BestCompression)
	if err != nil {
		return LayerInfo{}, err
	}
	diff := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(zw, diff))
	mtime = mtime.UTC().Truncate(time.Second)
	hardlinks := map[[2]uint64]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		return writeEntry(tw, p, filepath.ToSlash(rel), mtime, hardlinks)
	})
	if err != nil {
		return LayerInfo{}, err
	}
	if err := tw.Close(); err != nil {
		return LayerInfo{}, err
	}
	if err := zw.Close(); err != nil {
		return LayerInfo{}, err
	}
	return LayerInfo{DiffID: digestOf(diff), Digest: digestOf(blob), Size: counter.n}, nil
}

func writeEntry(tw *tar.Writer, p, name string, mtime time.Time, hardlinks map[[2]uint64]string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner information", p)
	}
	hdr := &tar.Header{
		Name:    name,
		Mode:    int64(fi.Mode().Perm()),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: mtime,
		Format:  tar.FormatPAX,
	}
	if fi.Mode()&fs.ModeSetuid != 0 {
		hdr.Mode |= 0o4000
	}
	if fi.Mode()&fs.ModeSetgid != 0 {
		hdr.Mode |= 0o2000
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case m&fs.ModeSymlink != 0:
		hdr.Typeflag = tar.TypeSymlink
		if hdr.Linkname, err = os.Readlink(p); err != nil {
			return err
		}
	case m&fs.ModeDevice != 0:
		hdr.Typeflag = tar.TypeBlock
		if m&fs.ModeCharDevice != 0 {
			hdr.Typeflag = tar.TypeChar
		}
		hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	case m.IsRegular():
		key := [2]uint64{st.Dev, st.Ino}
		if first, seen := hardlinks[key]; seen && st.Nlink > 1 {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			return tw.WriteHeader(hdr)
		}
		if st.Nlink > 1 {
			hardlinks[key] = name
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
	default:
		return fmt.Errorf("%s: unsupported file type %s", p, fi.Mode().Type())
	}
	if !fi.Mode().IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
		caps, err := getxattr(p, CapabilityXattr)
		if err != nil {
			return fmt.Errorf("%s: read %s: %w", p, CapabilityXattr, err)
		}
		if caps != nil {
			hdr.PAXRecords = map[string]string{paxXattrPrefix + CapabilityXattr: string(caps)}
		}
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// getxattr returns the attribute's value, or nil when the file has none.
func getxattr(p, attr string) ([]byte, error) {
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(p, attr, buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Entry is one file of a layer as read back: its tar header (PAXRecords hold extended attributes).
type Entry struct {
	Header *tar.Header
}

// Xattr returns the extended attribute attr that the entry carries, or nil.
func (e Entry) Xattr(attr string) []byte {
	v, ok := e.Header.PAXRecords[paxXattrPrefix+attr]
	if !ok {
		return nil
	}
	return []byte(v)
}

// Unpack extracts a gzip-compressed layer into dir (which must exist), with the layer's numeric
// owners, modes, symlinks, hard links, device nodes and file capabilities, and returns its entries
// in order. Names are confined to dir, but a symlink that the layer puts in a parent directory of a
// later entry is followed: use it for layers this repository built, not for untrusted ones. It needs
// root to set owners, devices and capabilities.
func Unpack(layer io.Reader, dir string) ([]Entry, error) {
	zr, err := gzip.NewReader(layer)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var entries []Entry
	type dirMode struct {
		path string
		mode int64
	}
	var dirs []dirMode
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		entries = append(entries, Entry{Header: hdr})
		clean := path.Clean("/" + hdr.Name)
		if clean == "/" {
			continue
		}
		target := filepath.Join(dir, filepath.FromSlash(clean))
		mode := os.FileMode(hdr.Mode & 0o777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, err
			}
			dirs = append(dirs, dirMode{target, hdr.Mode})
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", hdr.Name, err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return nil, err
			}
		case tar.TypeLink:
			if err := os.Link(filepath.Join(dir, filepath.FromSlash(path.Clean("/"+hdr.Linkname))), target); err != nil {
				return nil, err
			}
			continue
		case tar.TypeChar, tar.TypeBlock:
			kind := uint32(unix.S_IFCHR)
			if hdr.Typeflag == tar.TypeBlock {
				kind = unix.S_IFBLK
			}
			if err := unix.Mknod(target, kind|uint32(mode), int(unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor)))); err != nil {
				return nil, fmt.Errorf("%s: %w", hdr.Name, err)
			}
		default:
			return nil, fmt.Errorf("%s: unsupported tar entry type %q", hdr.Name, hdr.Typeflag)
		}
		if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeSymlink || hdr.Typeflag == tar.TypeDir {
			continue
		}
		// chown clears set-id bits and capabilities, so modes and the attribute come after it.
		if err := os.Chmod(target, mode|setidBits(hdr.Mode)); err != nil {
			return nil, err
		}
		if v := (Entry{Header: hdr}).Xattr(CapabilityXattr); v != nil {
			if err := unix.Setxattr(target, CapabilityXattr, v, 0); err != nil {
				return nil, fmt.Errorf("%s: set %s: %w", hdr.Name, CapabilityXattr, err)
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, os.FileMode(dirs[i].mode&0o777)|setidBits(dirs[i].mode)); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

func setidBits(mode int64) os.FileMode {
	var m os.FileMode
	if mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}
