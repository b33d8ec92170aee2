package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// buildScriptRepo lays out a copy of hack/build-image.sh in a scratch repository whose .cache is a
// symlink (as in this project's worktrees) and puts stubs of the tools it calls first on PATH, so
// that running it can reach nothing outside the scratch directories. It returns the script, the
// real cache directory and the environment to run it with.
func buildScriptRepo(t *testing.T) (script, realCache string, env []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("hack/build-image.sh refuses to run without root: its guards are not tested by this run")
	}
	repo := t.TempDir()
	realCache = t.TempDir()
	stubs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"build-image.sh", "image-packages.txt"} {
		data, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, "hack", name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(realCache, filepath.Join(repo, ".cache")); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"mmdebstrap", "setcap", "go", "apt-get"} {
		stub := "#!/bin/sh\necho \"stub " + tool + " called\" >&2\nexit 97\n"
		if err := os.WriteFile(filepath.Join(stubs, tool), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "GO=go", "SOURCE_DATE_EPOCH=1700000000",
		"VERSION=v0", "COMMIT=c0", "IMAGE_MIRROR_SOURCES=deb file:///nonexistent bookworm main")
	return filepath.Join(repo, "hack", "build-image.sh"), realCache, env
}

// A mount left below the work directory by a killed build (found through the .cache symlink)
// stops the build before it removes anything.
func TestBuildImageRefusesMountsLeftBehind(t *testing.T) {
	script, realCache, env := buildScriptRepo(t)
	proc := filepath.Join(realCache, "image", "work", "rootfs", "proc")
	if err := os.MkdirAll(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation=private", "--", "sh", "-c",
		`mount -t tmpfs leftover "$1" && touch "$1/kept" && bash "$2" "$3"; rc=$?; test -e "$1/kept" || echo "the mounted tree was emptied"; exit $rc`,
		"sh", proc, script, t.TempDir())
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "still mounted below") || strings.Contains(string(out), "emptied") || strings.Contains(string(out), "stub ") {
		t.Errorf("with a mount below the work directory the build did not stop at once (%v):\n%s", err, out)
	}
}

// A second build on the same cache stops while the first holds it, and leaves its tree alone.
func TestBuildImageOneAtATime(t *testing.T) {
	script, realCache, env := buildScriptRepo(t)
	work := filepath.Join(realCache, "image", "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "first-build"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(realCache, "image", "lock"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, t.TempDir())
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another image build") || strings.Contains(string(out), "stub ") {
		t.Errorf("a second build ran while the first held the cache (%v):\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(work, "first-build")); err != nil {
		t.Errorf("the second build removed the first one's work directory: %v", err)
	}
}

// `docker build -f deploy/Dockerfile .` must not send what `make image` leaves in the checkout: its
// root filesystem under .cache (root-only files, device nodes) and the image under bin.
func TestDockerContextExcludesImageBuild(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", ".dockerignore"))
	if err != nil {
		t.Fatalf("no .dockerignore: %v", err)
	}
	var patterns []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimPrefix(line, "/"))
		}
	}
	for _, p := range []string{".cache/image/work/rootfs/etc/shadow", "bin/ingress-reactor-image.tar"} {
		excluded := false
		for _, pat := range patterns {
			// Docker excludes a directory's contents when the directory matches.
			for dir := p; dir != "."; dir = filepath.Dir(dir) {
				if ok, _ := filepath.Match(pat, dir); ok {
					excluded = true
				}
			}
		}
		if !excluded {
			t.Errorf(".dockerignore (%v) does not exclude %s", patterns, p)
		}
	}
}
