#!/usr/bin/env bash
# Builds the helm CLI pinned in go.mod (helm.sh/helm/v3/cmd/helm) into
# ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/bin/<key>/, outside the repo. The key hashes go.mod and go.sum,
# so a version bump builds into a new folder; a binary already there is kept. Needs only Go and the module
# proxy. tests/deploy/helm.test.ts renders cluster-autoscaler's official chart with it. Prints the binary's
# path as its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/../go-tool.sh"
out="$(tool_dir "$here")"
binary="$out/helm"

if [ -x "$binary" ]; then
  echo "helm: already built" >&2
  echo "$binary"
  exit 0
fi
require_go helm
cd "$here"
helm_version="$(go list -m -f '{{.Version}}' helm.sh/helm/v3)"
# Helm's own Makefile stamps its version and the Kubernetes version its client-go speaks (the default
# .Capabilities.KubeVersion): https://github.com/helm/helm/blob/v3.22.0/Makefile
client_go="$(go list -m -f '{{.Version}}' k8s.io/client-go)"
client_go="${client_go#v}"
kube_major="$((${client_go%%.*} + 1))"
kube_minor="$(echo "$client_go" | cut -d. -f2)"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
ldflags="$ldflags -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags="$ldflags -X helm.sh/helm/v3/$pkg.k8sVersionMajor=$kube_major -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$kube_minor"
done

echo "helm $helm_version -> $out" >&2
build_tool "$out" helm helm.sh/helm/v3/cmd/helm "$ldflags"
echo "$binary"
