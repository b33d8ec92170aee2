//go:build integration

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ingress-reactor/ingress-reactor/app"
	"github.com/ingress-reactor/ingress-reactor/internal/ociimage"
	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// imageTar is what `make image` writes, relative to the repository root.
const imageTar = "bin/ingress-reactor-image.tar"

// capNetBindService is bit 10 of the capability sets in /proc/PID/status.
const capNetBindService = uint64(1) << 10

// netBindServiceXattr is security.capability as `setcap cap_net_bind_service=+ep` writes it.
var netBindServiceXattr = []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// enterImage mounts the unpacked root filesystem read-only in a private mount namespace, with a
// writable /tmp (the image's only declared writable path), /proc and the basic /dev nodes as a
// container runtime provides them, hands the standard output and error pipes to uid 101 as runc
// does (NGINX's access log reopens /dev/stdout), and runs the controller in it as uid/gid 101
// with no supplementary groups and a capability bounding set of NET_BIND_SERVICE (plus, in the
// file-capabilities mode, what the change of root and user needs). Its modes:
//
//   - file-caps: the process changes user with no capability left, and no_new_privs is off, so
//     the controller and NGINX get NET_BIND_SERVICE from their file capabilities alone.
//   - no-new-privs: as runc starts a Pod with allowPrivilegeEscalation: false and capabilities
//     {drop: [ALL], add: [NET_BIND_SERVICE]}: no_new_privs set, NET_BIND_SERVICE permitted before
//     the exec (setpriv holds it as an ambient capability, which the exec of a binary with file
//     capabilities clears, so NGINX, two execs later, has it only through its file capability).
//   - drop-all: capabilities {drop: [ALL]} and nothing added: the bounding set is empty.
const enterImage = `set -eu
root=$1; tmp=$2; mode=$3; shift 3
mount --bind "$root" "$root"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t tmpfs -o nosuid,mode=0755 dev "$root/dev"
for d in null zero random urandom; do touch "$root/dev/$d"; mount --bind "/dev/$d" "$root/dev/$d"; done
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"; ln -s /proc/self/fd/1 "$root/dev/stdout"; ln -s /proc/self/fd/2 "$root/dev/stderr"
mount --bind "$tmp" "$root/tmp"
mount -o remount,bind,ro "$root"
chown 101:101 /proc/self/fd/1 /proc/self/fd/2
case "$mode" in
file-caps)
	exec setpriv --bounding-set=-all,+net_bind_service,+sys_chroot,+setuid,+setgid -- \
		unshare --root="$root" --setgid=101 --setuid=101 /usr/bin/ingress-reactor "$@" ;;
no-new-privs)
	exec unshare --root="$root" /usr/bin/setpriv --reuid=101 --regid=101 --clear-groups \
		--bounding-set=-all,+net_bind_service --inh-caps=-all,+net_bind_service --ambient-caps=-all,+net_bind_service \
		--no-new-privs -- /usr/bin/ingress-reactor "$@" ;;
drop-all)
	exec unshare --root="$root" /usr/bin/setpriv --reuid=101 --regid=101 --clear-groups \
		--bounding-set=-all --inh-caps=-all --no-new-privs -- /usr/bin/ingress-reactor "$@" ;;
esac
echo "enter-image: unknown mode $mode" >&2; exit 2
`

// TestImage runs the controller from the image that `make image` built: the layer unpacked as a
// container runtime would, the root filesystem read-only with only /tmp writable, uid 101 and only
// NET_BIND_SERVICE from the file capabilities, NGINX's default ports 80 and 443 and the binary's
// default NGINX and certificate directories. It serves an Ingress through the image's NGINX.
func TestImage(t *testing.T) {
	harness.RequireNetns(t)
	env := harness.Shared()
	archive := filepath.Join(env.RepoRoot, imageTar)
	if _, err := os.Stat(archive); errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s does not exist: the image is NOT tested by this run; `make test-image` (or `make image` first) builds and tests it", imageTar)
	}
	if os.Geteuid() != 0 {
		t.Skip("the image test needs root (unpacking with owners and file capabilities, mounts, chroot): the image is NOT tested by this run")
	}
	if uidMap, err := os.ReadFile("/proc/self/uid_map"); err == nil && !mapsImageIDs(string(uidMap)) {
		t.Skipf("root here is a user namespace's (hack/in-netns.sh without root) that cannot own files as the image's users or make its device nodes: the image is NOT tested by this run; run `make test-image` as root. uid_map: %s", strings.TrimSpace(string(uidMap)))
	}
	if start, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err != nil || strings.TrimSpace(string(start)) == "0" {
		t.Fatalf("ip_unprivileged_port_start is %q (%v): port 80 would not need NET_BIND_SERVICE, the test would prove nothing", start, err)
	}

	img := readImage(t, archive)
	if head, err := exec.Command("git", "-C", env.RepoRoot, "rev-parse", "HEAD").Output(); err == nil {
		if rev := img.Config.Config.Labels["org.opencontainers.image.revision"]; !builtFrom(rev, strings.TrimSpace(string(head))) {
			t.Skipf("%s was built from commit %s, not from HEAD %.12s: it holds another controller, so the image is NOT tested by this run; `make test-image` rebuilds and tests it", imageTar, rev, head)
		}
	}
	rootfs := t.TempDir()
	entries, err := img.UnpackLayer(rootfs)
	if err != nil {
		t.Fatalf("unpack the layer: %v", err)
	}
	checkLayerCapabilities(t, entries)
	checkNoBuildHostFiles(t, rootfs)
	// The image's "/" has no entry of its own; runtimes make it 0755 (TempDir is 0700).
	if err := os.Chmod(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, mode := range []struct{ name, noNewPrivs string }{{"file-caps", "0"}, {"no-new-privs", "1"}} {
		t.Run(mode.name, func(t *testing.T) { runFromImage(t, env, rootfs, mode.name, mode.noNewPrivs) })
	}

	// A Pod that drops every capability and adds none cannot start the image at all: the kernel
	// refuses to exec a binary whose file capability (with the effective bit) lies outside the
	// bounding set. docs/image.md tells operators to add NET_BIND_SERVICE; this keeps that true.
	t.Run("drop-all", func(t *testing.T) {
		tmp := t.TempDir()
		cmd := exec.Command("unshare", "--mount", "--propagation=private", "--", "sh", "-c", enterImage, "enter-image", rootfs, tmp, "drop-all", "--version")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Operation not permitted") {
			t.Errorf("with an empty bounding set the controller ran or failed otherwise (%v):\n%s", err, out)
		}
		cmd = exec.Command("unshare", "--mount", "--propagation=private", "--", "sh", "-c", enterImage, "enter-image", rootfs, tmp, "no-new-privs", "--version")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("with NET_BIND_SERVICE, --version failed (%v):\n%s", err, out)
		}
	})
}

// runFromImage runs the controller from rootfs as enterImage's mode says and serves an Ingress
// through it on port 80.
func runFromImage(t *testing.T, env *harness.Env, rootfs, mode, noNewPrivs string) {
	tmp := t.TempDir()
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "kubeconfig"), kubeconfig, 0o644); err != nil {
		t.Fatal(err)
	}

	f := harness.New(t)
	web := f.StartBackend("web", false)
	f.CreateService("web", 80, web.Port)
	f.ServeBackends("web", web)
	// The binary's defaults for the ports and directories, given explicitly because the harness
	// passes its own (the last value of a flag wins).
	def := app.DefaultConfig()
	f.ReactorWrapper = []string{"unshare", "--mount", "--propagation=private", "--", "sh", "-c", enterImage, "enter-image", rootfs, tmp, mode}
	r := f.StartReactor("--kubeconfig=/tmp/kubeconfig", "--nginx-dir="+def.NginxDir, "--ssl-dir="+def.SSLDir,
		"--http-port="+strconv.Itoa(def.HTTPPort), "--https-port="+strconv.Itoa(def.HTTPSPort))
	r.HTTPPort, r.HTTPSPort = def.HTTPPort, def.HTTPSPort
	if !strings.HasPrefix(def.NginxDir, "/tmp/") || def.HTTPPort != 80 {
		t.Fatalf("the binary's defaults changed (--nginx-dir %s, --http-port %d): update the image's writable paths and this test", def.NginxDir, def.HTTPPort)
	}
	r.WaitReady()
	f.CreateIngress(f.Ingress("shop", "shop.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))
	resp := r.WaitServedBy("shop.example", "/cart?x=1", "web")
	if resp.Echo.Host != "shop.example" || resp.Echo.URI != "/cart?x=1" {
		t.Errorf("backend saw host %q and URI %q, want shop.example and /cart?x=1", resp.Echo.Host, resp.Echo.URI)
	}

	// Every process of the container: the controller and NGINX's master and workers run as
	// 101 with exactly NET_BIND_SERVICE, permitted and effective, none ambient.
	procs := processTree(t, r.Pid())
	var nginx int
	for _, pid := range procs {
		st := procStatus(t, pid)
		if st["Uid"] != "101\t101\t101\t101" || st["Gid"] != "101\t101\t101\t101" || st["Groups"] != "" {
			t.Errorf("process %d (%s) has Uid %q Gid %q Groups %q, want 101 everywhere and no groups", pid, st["Name"], st["Uid"], st["Gid"], st["Groups"])
		}
		for _, set := range []string{"CapPrm", "CapEff"} {
			v, err := strconv.ParseUint(st[set], 16, 64)
			if err != nil || v != capNetBindService {
				t.Errorf("process %d (%s) has %s %s, want only NET_BIND_SERVICE (%016x)", pid, st["Name"], set, st[set], capNetBindService)
			}
		}
		if st["CapAmb"] != "0000000000000000" || st["NoNewPrivs"] != noNewPrivs {
			t.Errorf("process %d (%s) has CapAmb %s NoNewPrivs %s, want none ambient and NoNewPrivs %s", pid, st["Name"], st["CapAmb"], st["NoNewPrivs"], noNewPrivs)
		}
		if st["Name"] == "nginx" {
			nginx++
		}
	}
	if nginx < 2 {
		t.Errorf("found %d nginx processes below the controller (%v), want a master and workers", nginx, procs)
	}

	// Everything the controller wrote is under /tmp: nginx.conf under the default --nginx-dir.
	if _, err := os.Stat(filepath.Join(tmp, strings.TrimPrefix(def.NginxDir, "/tmp/"), "nginx.conf")); err != nil {
		t.Errorf("nginx.conf is not under the default --nginx-dir in /tmp: %v", err)
	}
	if out := r.Output(); strings.Contains(out, `"user" directive`) || strings.Contains(out, "[emerg]") {
		t.Errorf("NGINX complained:\n%s", out)
	}
}

// readImage extracts the image tar and reads it back, every digest checked, and checks the
// config that a runtime reads.
func readImage(t *testing.T, archive string) *ociimage.Image {
	t.Helper()
	layout := t.TempDir()
	if err := ociimage.ExtractArchive(archive, layout); err != nil {
		t.Fatalf("extract %s: %v", archive, err)
	}
	img, err := ociimage.ReadLayout(layout)
	if err != nil {
		t.Fatalf("read the image: %v", err)
	}
	c := img.Config.Config
	if c.User != "101:101" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/bin/ingress-reactor" {
		t.Errorf("config runs %v as %q, want /usr/bin/ingress-reactor as 101:101", c.Entrypoint, c.User)
	}
	if _, ok := c.Volumes["/tmp"]; !ok || len(c.Volumes) != 1 {
		t.Errorf("config declares volumes %v, want /tmp only", c.Volumes)
	}
	pkgs := c.Labels["io.ingress-reactor.packages"]
	for _, p := range []string{"nginx=", "libnginx-mod-http-lua=", "libnginx-mod-stream=", "lua-cjson=", "ca-certificates="} {
		if !strings.HasPrefix(pkgs, p) && !strings.Contains(pkgs, ","+p) {
			t.Errorf("label io.ingress-reactor.packages does not record %s...: %.200s", p, pkgs)
		}
	}
	if len(img.Docker) != 1 || len(img.Docker[0].RepoTags) != 1 {
		t.Errorf("the tar is not a docker-archive with one tag: %+v", img.Docker)
	}
	return img
}

// checkLayerCapabilities: exactly the two binaries that bind ports carry NET_BIND_SERVICE, as a
// PAX xattr record of the layer, and nothing else carries a capability.
func checkLayerCapabilities(t *testing.T, entries []ociimage.Entry) {
	t.Helper()
	want := map[string]bool{"usr/sbin/nginx": true, "usr/bin/ingress-reactor": true}
	for _, e := range entries {
		caps := e.Xattr(ociimage.CapabilityXattr)
		switch {
		case want[e.Header.Name]:
			if !bytes.Equal(caps, netBindServiceXattr) {
				t.Errorf("%s carries capability %x, want cap_net_bind_service=ep (%x)", e.Header.Name, caps, netBindServiceXattr)
			}
			delete(want, e.Header.Name)
		case caps != nil:
			t.Errorf("%s carries capability %x; only the controller and nginx should", e.Header.Name, caps)
		}
	}
	if len(want) > 0 {
		t.Errorf("the layer lacks %v", want)
	}
}

// builtFrom reports whether the image's revision label (the short hash `make image` records) names
// the commit head.
func builtFrom(revision, head string) bool {
	return len(revision) >= 7 && strings.HasPrefix(head, revision)
}

// mapsImageIDs reports whether a /proc/self/uid_map maps every id the image's files and user have
// (0 through 101 and beyond: the initial namespace's identity map does; `unshare --map-root-user`'s
// single line "0 <uid> 1" does not).
func mapsImageIDs(uidMap string) bool {
	for _, line := range strings.Split(uidMap, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		inside, err1 := strconv.ParseUint(f[0], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 == nil && err2 == nil && inside == 0 && count > 65535 {
			return true
		}
	}
	return false
}

// checkNoBuildHostFiles: mmdebstrap copies the build machine's /etc/resolv.conf and /etc/hostname
// into the tree; the image must carry fixed ones instead (not the builder's name servers and name,
// and the same bytes whichever machine builds it).
func checkNoBuildHostFiles(t *testing.T, rootfs string) {
	t.Helper()
	for name, want := range map[string]string{"etc/resolv.conf": "", "etc/hostname": "localhost\n"} {
		got, err := os.ReadFile(filepath.Join(rootfs, name))
		if err != nil || string(got) != want {
			t.Errorf("the image's /%s holds %q (%v), want %q", name, got, err, want)
		}
		if fi, err := os.Stat(filepath.Join(rootfs, name)); err == nil && fi.Mode().Perm() != 0o644 {
			t.Errorf("the image's /%s has mode %v, want 0644", name, fi.Mode())
		}
	}
}

// processTree returns pid and every descendant of it.
func processTree(t *testing.T, pid int) []int {
	t.Helper()
	children := map[int][]int{}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue // exited meanwhile
		}
		// The command name is in parentheses and may hold spaces; the parent follows the state.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 {
			if ppid, err := strconv.Atoi(fields[1]); err == nil {
				children[ppid] = append(children[ppid], p)
			}
		}
	}
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree
}

// procStatus reads /proc/PID/status into a map of field to value.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}
