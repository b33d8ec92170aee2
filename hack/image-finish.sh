#!/usr/bin/env bash
# Usage: hack/image-finish.sh ROOT
#
# The last step of both image builds (hack/build-image.sh on a mmdebstrap root filesystem, and
# deploy/Dockerfile with ROOT=/): the controller's user, the removal of what a running
# controller never reads, and the package manifest. The caller has already installed the
# packages of hack/image-packages.txt and /usr/bin/ingress-reactor, and set the file capability.
#
#   - user and group "ingress-reactor", uid/gid 101, no login, no password (written directly so
#     that no "last changed" date depends on the day of the build);
#   - removed: documentation except the copyright files, manual pages, info, locales, apt's
#     package lists and caches, logs, debconf and dpkg backups, ldconfig's aux cache, and
#     Debian's default NGINX site (the controller writes its own nginx.conf under /tmp);
#   - /usr/share/ingress-reactor/packages.txt: "name<TAB>version<TAB>architecture" of every
#     installed package, sorted; hack/mkimage copies it into the image's labels.
set -euo pipefail

root="${1:?usage: $0 ROOT}"
root="${root%/}"
uid=101
name=ingress-reactor

fail() { printf 'image-finish: %s\n' "$*" >&2; exit 1; }

[[ -x "${root}/usr/bin/ingress-reactor" ]] || fail "${root}/usr/bin/ingress-reactor is missing"

if ! grep -q "^${name}:" "${root}/etc/passwd"; then
	if cut -d: -f3 "${root}/etc/passwd" | grep -qx "${uid}" || cut -d: -f3 "${root}/etc/group" | grep -qx "${uid}"; then
		fail "uid or gid ${uid} is taken in ${root}/etc/passwd or group"
	fi
	echo "${name}:x:${uid}:${uid}:ingress-reactor:/nonexistent:/usr/sbin/nologin" >>"${root}/etc/passwd"
	echo "${name}:x:${uid}:" >>"${root}/etc/group"
	[[ -e "${root}/etc/shadow" ]] && echo "${name}:!:::::::" >>"${root}/etc/shadow"
	[[ -e "${root}/etc/gshadow" ]] && echo "${name}:!::" >>"${root}/etc/gshadow"
fi

# Documentation: keep each package's copyright file (the licences travel with the binaries).
find "${root}/usr/share/doc" -mindepth 1 -depth \( -type f -o -type l \) ! -name copyright -delete
find "${root}/usr/share/doc" -mindepth 1 -depth -type d -empty -delete
rm -rf "${root}"/usr/share/man/* "${root}"/usr/share/info/* "${root}"/usr/share/lintian \
	"${root}"/usr/share/locale/* "${root}"/var/lib/apt/lists/* "${root}"/var/cache/apt/*.bin \
	"${root}"/var/cache/apt/archives/partial "${root}"/var/cache/debconf/*-old "${root}"/var/lib/dpkg/*-old \
	"${root}"/var/cache/ldconfig/aux-cache "${root}"/etc/nginx/sites-enabled/default
find "${root}/var/log" -type f -delete

mkdir -p "${root}/usr/share/ingress-reactor"
dpkg-query --admindir="${root}/var/lib/dpkg" -W -f '${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\n' |
	awk -F'\t' '$1 ~ /^ii/ { print $2 "\t" $3 "\t" $4 }' | LC_ALL=C sort >"${root}/usr/share/ingress-reactor/packages.txt"
