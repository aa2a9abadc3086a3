#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries that the cluster-facing tests run (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, and kubectl) from the modules pinned in go.mod,
# into ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/bin/<key>/, outside the repo. The key hashes
# go.mod and go.sum, so a version bump builds into a new folder; binaries already there are kept.
# Needs only Go and the module proxy. Prints the binaries' folder as its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/../go-tool.sh"
out="$(tool_dir "$here")"
require_go "control plane"
cd "$here"
kube_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
minor="${kube_version#v1.}"
minor="${minor%%.*}"
# Kubernetes' own release build stamps these; without them /version reports v0.0.0-master.
version_pkg=k8s.io/component-base/version
kube_ldflags="-s -w -X $version_pkg.gitVersion=$kube_version -X $version_pkg.gitMajor=1"
kube_ldflags="$kube_ldflags -X $version_pkg.gitMinor=$minor -X $version_pkg.gitTreeState=clean"

echo "control plane: kubernetes $kube_version, etcd $etcd_version -> $out" >&2

total_started=$SECONDS
build_tool "$out" etcd go.etcd.io/etcd/server/v3 "-s -w"
build_tool "$out" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
build_tool "$out" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kube_ldflags"
build_tool "$out" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kube_ldflags"
# The tests' walkthrough of the README runs the commands a user types.
build_tool "$out" kubectl k8s.io/kubernetes/cmd/kubectl "$kube_ldflags"
echo "control plane: ready in $((SECONDS - total_started))s" >&2
echo "$out"
