#!/usr/bin/env bash
# Installs the Debian NGINX packages the controller needs (nginx with the Lua and
# stream modules, lua-cjson) when any of them is missing. Idempotent: when all are
# installed it does nothing and needs no privileges.
#
# The controller runs its own unprivileged nginx processes; the distribution's
# service must not start and take port 80, so a policy-rc.d guard denies service
# starts for the duration of the install (and an existing guard is left alone).
set -euo pipefail

packages=(nginx libnginx-mod-http-lua libnginx-mod-stream lua-cjson)

log() { printf 'install-nginx: %s\n' "$*" >&2; }

missing=()
for p in "${packages[@]}"; do
	status="$(dpkg-query -W -f='${db:Status-Status}' "${p}" 2>/dev/null || true)"
	[[ "${status}" == installed ]] || missing+=("${p}")
done

if ((${#missing[@]} == 0)); then
	log "already installed: ${packages[*]} ($(nginx -v 2>&1 | sed 's/^nginx version: //'))"
	exit 0
fi

command -v apt-get >/dev/null || { log "missing ${missing[*]} and apt-get is not available; install them by hand"; exit 1; }

sudo=()
if ((EUID != 0)); then
	command -v sudo >/dev/null || { log "missing ${missing[*]}; run as root or install sudo"; exit 1; }
	sudo=(sudo)
fi

# Deny service starts while the packages install (exit code 101 = action forbidden,
# see invoke-rc.d(8)). Only remove the guard if this script put it there.
policy=/usr/sbin/policy-rc.d
if [[ ! -e "${policy}" ]]; then
	"${sudo[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' > ${policy} && chmod 0755 ${policy}"
	trap '"${sudo[@]}" rm -f "${policy}"' EXIT
fi

log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --no-upgrade "${packages[@]}"; then
	log "install failed; refreshing the package lists and retrying"
	"${sudo[@]}" apt-get update
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --no-upgrade "${packages[@]}"
fi

# A system nginx that got started anyway (for example by a pre-existing permissive
# policy) would hold port 80; stop it, since the controller runs its own.
if command -v systemctl >/dev/null && systemctl is-active --quiet nginx 2>/dev/null; then
	log "stopping the system nginx service started by the package"
	"${sudo[@]}" systemctl stop nginx || true
fi

log "installed: $(nginx -v 2>&1 | sed 's/^nginx version: //')"
