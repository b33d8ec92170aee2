#!/usr/bin/env bash
# Usage: hack/in-netns.sh CMD [ARGS...]
#
# Runs CMD inside a private network namespace whose only interface is its own
# loopback, brought up and given 192.0.2.0/24 (TEST-NET-1), so that any 192.0.2.x
# address can be bound. The integration tests put their backends there because the
# API server rejects loopback addresses in EndpointSlices. Nothing leaves the
# namespace: it has no route to any other interface.
#
# As root this uses `unshare --net`; otherwise it tries a user namespace mapped to
# root (`unshare --user --map-root-user --net`), which needs unprivileged user
# namespaces to be enabled.
#
# Inside, IN_NETNS=1 is exported so tests can tell where they run.
set -euo pipefail

if (($# == 0)); then
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
fi

if [[ "${IN_NETNS:-}" == 1 && "${1:-}" != --inner ]]; then
	# Already inside (nested make or script): run directly.
	exec "$@"
fi

if [[ "$1" == --inner ]]; then
	shift
	ip link set lo up
	ip addr add 192.0.2.0/24 dev lo 2>/dev/null || grep -q '192\.0\.2\.0/24' <<<"$(ip addr show dev lo)" || {
		echo "in-netns: could not add 192.0.2.0/24 to lo" >&2
		exit 1
	}
	export IN_NETNS=1
	exec "$@"
fi

command -v unshare >/dev/null || { echo "in-netns: unshare (util-linux) is required" >&2; exit 1; }
command -v ip >/dev/null || { echo "in-netns: ip (iproute2) is required" >&2; exit 1; }

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
if ((EUID == 0)); then
	exec unshare --net -- "${self}" --inner "$@"
fi
if unshare --user --map-root-user --net -- true 2>/dev/null; then
	exec unshare --user --map-root-user --net -- "${self}" --inner "$@"
fi
echo "in-netns: need root, or unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), to create a network namespace" >&2
exit 1
