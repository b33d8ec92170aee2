#!/usr/bin/env bash
# Usage: hack/build-image.sh OUT_DIR
#
# Builds the ingress-reactor image without a container engine (`make image`):
#   1. the static controller binary (CGO_ENABLED=0, -trimpath, version ldflags);
#   2. a Debian bookworm root filesystem from Debian's package repository with mmdebstrap
#      (variant minbase, the packages of hack/image-packages.txt, no recommends), the binary
#      copied in and hack/image-finish.sh applied (user 101, file capabilities, docs and caches
#      stripped, package manifest);
#   3. hack/mkimage: OUT_DIR/ingress-reactor-image.tar (an OCI image layout that is also a
#      docker-archive) and the same layout unpacked in OUT_DIR/ingress-reactor-oci/.
#
# The mirror is the one this machine's apt uses for bookworm (its sources.list or
# sources.list.d entries, read at run time); IMAGE_MIRROR_SOURCES overrides it with one
# sources.list line per entry. Downloaded packages are kept in .cache/image/debs, so a second
# build downloads only the package lists. Every time stamp is SOURCE_DATE_EPOCH (the last
# commit's time unless set), so two builds from the same commit and the same mirror state give
# the same image digest (docs/image.md). Needs root (mmdebstrap's root mode, setcap).
set -euo pipefail

log() { printf 'build-image: %s\n' "$*" >&2; }

out="${1:?usage: $0 OUT_DIR}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Resolved: .cache may be a symlink (worktrees share one), and /proc/self/mounts lists the real
# paths, which the check for mounts left behind below compares against.
cache="$(realpath -m "${repo}/.cache")/image"
go="${GO:-go}"

((EUID == 0)) || { log "needs root (mmdebstrap in root mode, setcap)"; exit 1; }

need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v setcap >/dev/null || need+=(libcap2-bin)
if ((${#need[@]} > 0)); then
	log "installing ${need[*]} from Debian"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"; then
		apt-get update
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
	fi
fi

export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "${repo}" log -1 --format=%ct)}"
version="${VERSION:-$(git -C "${repo}" describe --tags --always --dirty 2>/dev/null || echo dev)}"
commit="${COMMIT:-$(git -C "${repo}" rev-parse --short HEAD 2>/dev/null || echo unknown)}"

# The Debian bookworm entries apt is configured with here (main, updates, security).
sources="${IMAGE_MIRROR_SOURCES:-}"
if [[ -z "${sources}" ]]; then
	sources="$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' 2>/dev/null |
		awk '$2 ~ /^bookworm(-updates|-security)?$/ && $3 == "main" { print "deb " $1 " " $2 " main" }' | sort -u)"
fi
[[ -n "${sources}" ]] || { log "no Debian bookworm entry in this machine's apt sources; set IMAGE_MIRROR_SOURCES to sources.list lines"; exit 1; }
log "mirror entries:"$'\n'"${sources}"

mapfile -t packages < <(grep -v '^#' "${repo}/hack/image-packages.txt" | grep -v '^$')

work="${cache}/work"
# One build at a time per cache: a second one would remove the first one's tree under it.
mkdir -p "${cache}"
exec 9>"${cache}/lock"
flock -n 9 || { log "another image build holds ${cache}/lock; wait for it to finish"; exit 1; }
# mmdebstrap unmounts what it mounted in the chroot, even when it fails; a mount left behind
# by a killed build must not let rm reach the host's /dev or /proc.
if grep -q " ${work}/" /proc/self/mounts; then
	log "something is still mounted below ${work} (a killed build?); unmount it, then run again"
	exit 1
fi
rm -rf --one-file-system "${work}"
mkdir -p "${work}" "${cache}/debs" "${out}"

log "building the static binary (version ${version}, commit ${commit})"
(cd "${repo}" && CGO_ENABLED=0 "${go}" build -trimpath \
	-ldflags "-s -w -X main.version=${version} -X main.commit=${commit}" \
	-o "${work}/ingress-reactor" ./cmd/ingress-reactor)
(cd "${repo}" && "${go}" build -trimpath -o "${work}/mkimage" ./hack/mkimage)

log "building the root filesystem with mmdebstrap (SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH})"
# The setup and customize hooks keep the downloaded .deb files in .cache/image/debs (the
# pattern of mmdebstrap(1)'s examples); download/empty keeps them in the chroot until then.
# mmdebstrap copies this machine's /etc/resolv.conf and /etc/hostname into the tree (mmdebstrap(1),
# SOURCE_DATE_EPOCH): the last hook replaces them, so that the image carries neither the build
# machine's name servers nor its name (runtimes mount their own over both).
# merged-usr: the /usr symlinks made directly, as debootstrap and Docker's debian images do,
# rather than by the usrmerge package (which would bring perl into the image).
mmdebstrap --mode=root --variant=minbase --format=directory \
	--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
	--aptopt='APT::Install-Recommends "false"' \
	--include="$(IFS=,; echo "${packages[*]}")" \
	--skip=download/empty \
	--setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
	--setup-hook="sync-in '${cache}/debs' /var/cache/apt/archives/" \
	--customize-hook="sync-out /var/cache/apt/archives '${cache}/debs'" \
	--customize-hook="cp '${work}/ingress-reactor' \"\$1\"/usr/bin/ingress-reactor" \
	--customize-hook='setcap cap_net_bind_service=+ep "$1"/usr/sbin/nginx cap_net_bind_service=+ep "$1"/usr/bin/ingress-reactor' \
	--customize-hook="'${repo}/hack/image-finish.sh' \"\$1\"" \
	--customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
	--customize-hook=': >"$1"/etc/resolv.conf; echo localhost >"$1"/etc/hostname; chmod 0644 "$1"/etc/resolv.conf "$1"/etc/hostname' \
	bookworm "${work}/rootfs" - <<<"${sources}"

log "writing the image"
rm -rf "${out}/ingress-reactor-oci"
"${work}/mkimage" -rootfs "${work}/rootfs" -tar "${out}/ingress-reactor-image.tar" -layout "${out}/ingress-reactor-oci" \
	-version "${version}" -revision "${commit}" -tag "ingress-reactor:${version}"
