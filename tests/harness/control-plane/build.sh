#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries that the cluster-facing tests run (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, and kubectl) from the modules pinned in go.mod,
# into ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/bin/<key>/, outside the repo. The key hashes
# go.mod and go.sum, so a version bump builds into a new folder; binaries already there are kept.
# Needs only Go and the module proxy. Prints the binaries' folder as its last line.
#
#   build.sh                 all five
#   build.sh NAME...         only these (the sandbox starts no kubectl, so it does not wait for one)
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

# kubectl: the tests' walkthrough of the README runs the commands a user types.
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
total_started=$SECONDS
for name in "${wanted[@]}"; do
  case "$name" in
    etcd) build_tool "$out" etcd go.etcd.io/etcd/server/v3 "-s -w" ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubectl)
      build_tool "$out" "$name" "k8s.io/kubernetes/cmd/$name" "$kube_ldflags" ;;
    *) echo "control plane: no binary named $name (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)" >&2; exit 2 ;;
  esac
done
echo "control plane: ready in $((SECONDS - total_started))s" >&2
echo "$out"
