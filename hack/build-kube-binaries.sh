#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy into a git-ignored cache
# folder (default: <repo>/.cache/kube/bin) for the integration tests (envtest reads
# them through KUBEBUILDER_ASSETS). Does nothing when both binaries are already there
# at the pinned versions.
#
# Neither module can be built with `go install pkg@version` because their go.mod files
# carry replace directives, so each is built from a throwaway module in a temp dir
# that requires it and replaces the in-repo (staging) modules with published versions.
#
# A cold build takes about 5 minutes on 2 cores and a few GB of Go build cache.
#
# Environment:
#   KUBE_BIN_DIR   where to put the binaries (default <repo>/.cache/kube/bin)
#   FORCE=1        rebuild even if the stamp says the binaries are current
set -euo pipefail

KUBE_VERSION=v1.36.3       # newest k8s.io/kubernetes that builds here (v1.34.5 lacks staging modules)
STAGING_VERSION=v0.36.3    # k8s.io/* staging modules matching KUBE_VERSION
ETCD_VERSION=v3.5.35
ETCD_V2_VERSION=v2.305.35  # go.etcd.io/etcd/client/v2 uses this numbering for the same release

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${KUBE_BIN_DIR:-${repo_root}/.cache/kube/bin}"
stamp_file="${bin_dir}/VERSIONS"
want_stamp="kube-apiserver ${KUBE_VERSION}
etcd ${ETCD_VERSION}"

log() { printf 'build-kube-binaries: %s\n' "$*" >&2; }

if [[ "${FORCE:-0}" != 1 && -x "${bin_dir}/kube-apiserver" && -x "${bin_dir}/etcd" && -f "${stamp_file}" ]] &&
	[[ "$(cat "${stamp_file}")" == "${want_stamp}" ]]; then
	log "kube-apiserver ${KUBE_VERSION} and etcd ${ETCD_VERSION} already in ${bin_dir}"
	exit 0
fi

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off

work="$(mktemp -d "${TMPDIR:-/tmp}/kube-binaries.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
mkdir -p "${bin_dir}"

# module_init DIR NAME: a throwaway module.
module_init() {
	mkdir -p "$1"
	(cd "$1" && go mod init "$2" >/dev/null 2>&1)
}

build_kube_apiserver() {
	local dir="${work}/kube" start=${SECONDS}
	log "building kube-apiserver ${KUBE_VERSION}"
	module_init "${dir}" kubebinaries.local/kube
	# kubernetes' own go.mod names its staging modules at v0.0.0 and replaces them with
	# in-repo paths; read it from the module cache and pin each to the published release.
	local gomod
	gomod="$(cd "${dir}" && go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" |
		sed -n 's/^[[:space:]]*"GoMod":[[:space:]]*"\(.*\)",\{0,1\}$/\1/p')"
	[[ -f "${gomod}" ]] || { log "could not locate go.mod of k8s.io/kubernetes@${KUBE_VERSION}"; return 1; }
	local staging
	staging="$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "${gomod}" | sort -u)"
	[[ -n "${staging}" ]] || { log "no v0.0.0 k8s.io modules found in ${gomod}"; return 1; }
	local args=(-require "k8s.io/kubernetes@${KUBE_VERSION}") m
	for m in ${staging}; do
		args+=(-replace "${m}=${m}@${STAGING_VERSION}")
	done
	(cd "${dir}" && go mod edit "${args[@]}")
	log "replaced $(wc -w <<<"${staging}") staging modules with ${STAGING_VERSION}"
	printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' >"${dir}/tools.go"
	(cd "${dir}" && go mod tidy >/dev/null)
	local pkg=k8s.io/component-base/version
	(cd "${dir}" && go build -trimpath -o "${bin_dir}/kube-apiserver.new" \
		-ldflags "-s -w -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=36" \
		k8s.io/kubernetes/cmd/kube-apiserver)
	mv "${bin_dir}/kube-apiserver.new" "${bin_dir}/kube-apiserver"
	log "kube-apiserver built in $((SECONDS - start)) s"
}

build_etcd() {
	local dir="${work}/etcd" start=${SECONDS}
	log "building etcd ${ETCD_VERSION}"
	module_init "${dir}" kubebinaries.local/etcd
	local args=(-require "go.etcd.io/etcd/server/v3@${ETCD_VERSION}") m
	for m in api/v3 client/pkg/v3 client/v3 pkg/v3 raft/v3; do
		args+=(-replace "go.etcd.io/etcd/${m}=go.etcd.io/etcd/${m}@${ETCD_VERSION}")
	done
	args+=(-replace "go.etcd.io/etcd/client/v2=go.etcd.io/etcd/client/v2@${ETCD_V2_VERSION}")
	(cd "${dir}" && go mod edit "${args[@]}")
	printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"${dir}/tools.go"
	(cd "${dir}" && go mod tidy >/dev/null)
	(cd "${dir}" && go build -trimpath -o "${bin_dir}/etcd.new" \
		-ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}" \
		go.etcd.io/etcd/server/v3)
	mv "${bin_dir}/etcd.new" "${bin_dir}/etcd"
	log "etcd built in $((SECONDS - start)) s"
}

rm -f "${stamp_file}"
build_etcd
build_kube_apiserver

# Both binaries must report the pinned versions before the stamp is written. The
# output is captured first: `binary | grep -q` under pipefail fails whenever grep
# exits at the first match while the binary is still writing (SIGPIPE).
etcd_version="$("${bin_dir}/etcd" --version)"
grep -q "^etcd Version: ${ETCD_VERSION#v}\$" <<<"${etcd_version}" ||
	{ log "etcd does not report ${ETCD_VERSION}: ${etcd_version}"; exit 1; }
apiserver_version="$("${bin_dir}/kube-apiserver" --version)"
grep -qx "Kubernetes ${KUBE_VERSION}" <<<"${apiserver_version}" ||
	{ log "kube-apiserver does not report ${KUBE_VERSION}: ${apiserver_version}"; exit 1; }
printf '%s\n' "${want_stamp}" >"${stamp_file}"
log "done: $(du -sh "${bin_dir}" | cut -f1) in ${bin_dir}"
