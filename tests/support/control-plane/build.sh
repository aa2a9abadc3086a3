#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries that the cluster-facing tests run (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, and kubectl) from the modules pinned in go.mod,
# into ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/bin/<key>/, outside the repo. The key hashes
# go.mod and go.sum, so a version bump builds into a new folder; binaries already there are kept.
# Needs only Go and the module proxy. Prints the binaries' folder as its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}"
# tests/support/control-plane.ts derives the same key: sha256(go.mod + go.sum), first 16 hex digits.
key="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)"
out="$cache/bin/$key"
mkdir -p "$out"

if ! command -v go >/dev/null; then
  echo "control plane: Go is needed to build the test binaries (go.mod asks for go 1.26)" >&2
  exit 1
fi
cd "$here"
# Static binaries build faster and need no C toolchain; none of these needs cgo.
export CGO_ENABLED=0
kube_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
minor="${kube_version#v1.}"
minor="${minor%%.*}"
# Kubernetes' own release build stamps these; without them /version reports v0.0.0-master.
version_pkg=k8s.io/component-base/version
kube_ldflags="-s -w -X $version_pkg.gitVersion=$kube_version -X $version_pkg.gitMajor=1"
kube_ldflags="$kube_ldflags -X $version_pkg.gitMinor=$minor -X $version_pkg.gitTreeState=clean"

echo "control plane: kubernetes $kube_version, etcd $etcd_version -> $out" >&2

build() {
  local name="$1" pkg="$2" ldflags="$3"
  if [ -x "$out/$name" ]; then
    echo "  $name: already built" >&2
    return
  fi
  echo "  $name: building $pkg ..." >&2
  local started=$SECONDS
  # Build beside the target and rename, so an interrupted build never leaves a binary that looks done.
  go build -trimpath -ldflags="$ldflags" -o "$out/.$name.tmp" "$pkg"
  mv -f "$out/.$name.tmp" "$out/$name"
  echo "  $name: built in $((SECONDS - started))s" >&2
}

total_started=$SECONDS
build etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kube_ldflags"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kube_ldflags"
# The tests' walkthrough of the README runs the commands a user types.
build kubectl k8s.io/kubernetes/cmd/kubectl "$kube_ldflags"
echo "control plane: ready in $((SECONDS - total_started))s" >&2
echo "$out"
