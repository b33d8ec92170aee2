#!/usr/bin/env bash
# Prints deploy/ingress-reactor.yaml: the Helm chart's defaults rendered for a release named
# ingress-reactor in namespace ingress-reactor, after the Namespace itself. `make manifests` writes it;
# TestChartManifestIsCurrent keeps the file equal to this output.
#
# Environment:
#   HELM_BIN   helm to use (default <repo>/.cache/helm/bin/helm, built by hack/build-helm.sh)
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
helm="${HELM_BIN:-${repo_root}/.cache/helm/bin/helm}"
kube_version="$(sed -n 's/^KUBE_VERSION=\(v[0-9.]*\).*/\1/p' "${repo_root}/hack/build-kube-binaries.sh")"
cat <<'HEADER'
# ingress-reactor in a cluster, without Helm: the chart's defaults (deploy/chart/ingress-reactor), rendered
# by hack/gen-manifest.sh (`make manifests`); do not edit by hand.
#   kubectl apply --server-side -f deploy/ingress-reactor.yaml
# The image (ingress-reactor:<appVersion>) is built by `make image` (docs/image.md).
apiVersion: v1
kind: Namespace
metadata:
  name: ingress-reactor
  labels:
    pod-security.kubernetes.io/enforce: restricted
HEADER
"${helm}" template ingress-reactor "${repo_root}/deploy/chart/ingress-reactor" \
	--namespace ingress-reactor --kube-version "${kube_version}"
