// Command mkimage packs the root filesystem that hack/build-image.sh made into the ingress-reactor
// image: an OCI image layout directory and the same layout as one tar that is also a docker-archive.
// Every time stamp is SOURCE_DATE_EPOCH, so the same root filesystem gives the same digest.
//
//	mkimage -rootfs DIR -layout DIR -tar FILE -version V -revision C -tag NAME:TAG
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ingress-reactor/ingress-reactor/internal/ociimage"
)

// manifestFile is the package manifest that hack/image-finish.sh writes into the root filesystem.
const manifestFile = "usr/share/ingress-reactor/packages.txt"

func main() {
	var (
		rootfs   = flag.String("rootfs", "", "root filesystem directory")
		layout   = flag.String("layout", "", "OCI image layout directory to write (must not exist)")
		tarPath  = flag.String("tar", "", "image tar to write (OCI layout + docker-archive)")
		version  = flag.String("version", "dev", "controller version (label org.opencontainers.image.version)")
		revision = flag.String("revision", "unknown", "source revision (label org.opencontainers.image.revision)")
		tag      = flag.String("tag", "ingress-reactor:dev", "image name and tag, without a registry")
	)
	flag.Parse()
	if err := run(*rootfs, *layout, *tarPath, *version, *revision, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(rootfs, layout, tarPath, version, revision, tag string) error {
	if rootfs == "" || layout == "" {
		return fmt.Errorf("-rootfs and -layout are required")
	}
	epoch, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return fmt.Errorf("SOURCE_DATE_EPOCH must be set to a Unix time: %w", err)
	}
	created := time.Unix(epoch, 0).UTC()
	pkgs, err := readPackages(filepath.Join(rootfs, manifestFile))
	if err != nil {
		return err
	}
	debArch := pkgs.version("nginx", 2)
	if debArch == "" {
		return fmt.Errorf("%s does not list nginx", manifestFile)
	}
	platform, ok := ociPlatforms[debArch]
	if !ok {
		return fmt.Errorf("no OCI platform known for the Debian architecture %q", debArch)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "ingress-reactor",
		"org.opencontainers.image.description": "Kubernetes ingress controller driving Debian's NGINX; runs as uid 101 with only NET_BIND_SERVICE",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
		"org.opencontainers.image.base.name":   "debian:bookworm (mmdebstrap, minbase)",
		"io.ingress-reactor.nginx.version":     pkgs.version("nginx", 1),
		"io.ingress-reactor.packages":          pkgs.label(),
		"io.ingress-reactor.packages.file":     "/" + manifestFile,
		"io.ingress-reactor.user":              "101:101",
		"io.ingress-reactor.capabilities":      "NET_BIND_SERVICE (file capability on /usr/bin/ingress-reactor and /usr/sbin/nginx)",
		"io.ingress-reactor.writable-paths":    "/tmp",
	}
	desc, err := ociimage.Build(ociimage.Options{
		RootFS:       rootfs,
		Created:      created,
		Name:         tag,
		Architecture: platform[0],
		Variant:      platform[1],
		CreatedBy:    "hack/build-image.sh: mmdebstrap bookworm minbase + hack/image-packages.txt + hack/image-finish.sh",
		Config: ociimage.ContainerConfig{
			User:         "101:101",
			Entrypoint:   []string{"/usr/bin/ingress-reactor"},
			Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			ExposedPorts: map[string]struct{}{"80/tcp": {}, "443/tcp": {}, "10254/tcp": {}},
			Volumes:      map[string]struct{}{"/tmp": {}},
			WorkingDir:   "/",
			Labels:       labels,
		},
		Annotations: labels,
	}, layout, tarPath)
	if err != nil {
		return err
	}
	fmt.Printf("image %s\nmanifest %s\n", tag, desc.Digest)
	return nil
}

// ociPlatforms maps Debian's architecture names to the OCI config's architecture (Go's GOARCH) and
// variant, which runtimes match against their platform: Debian says i386, armhf, ppc64el where
// Go and OCI say 386, arm v7, ppc64le.
var ociPlatforms = map[string][2]string{
	"amd64":    {"amd64", ""},
	"arm64":    {"arm64", "v8"},
	"armhf":    {"arm", "v7"},
	"armel":    {"arm", "v5"},
	"i386":     {"386", ""},
	"ppc64el":  {"ppc64le", ""},
	"s390x":    {"s390x", ""},
	"mips64el": {"mips64le", ""},
	"riscv64":  {"riscv64", ""},
}

// packages are the lines of the manifest file: name, version, architecture.
type packages [][3]string

func readPackages(name string) (packages, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("package manifest: %w", err)
	}
	defer f.Close()
	var out packages
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s: bad line %q", name, sc.Text())
		}
		out = append(out, [3]string{fields[0], fields[1], fields[2]})
	}
	return out, sc.Err()
}

// version returns column col (1 version, 2 architecture) of package name, or "".
func (p packages) version(name string, col int) string {
	for _, l := range p {
		if l[0] == name {
			return l[col]
		}
	}
	return ""
}

// label is "name=version" of every package, comma-separated, in the manifest's (sorted) order.
func (p packages) label() string {
	parts := make([]string, len(p))
	for i, l := range p {
		parts[i] = l[0] + "=" + l[1]
	}
	return strings.Join(parts, ",")
}
