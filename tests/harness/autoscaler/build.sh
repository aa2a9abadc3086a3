#!/usr/bin/env bash
# Builds the cluster-autoscaler pinned in go.mod, with only its externalgrpc cloud provider (build
# tag externalgrpc: no other cloud's SDK is compiled), into
# ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/bin/<key>/, outside the repo. The key hashes go.mod and
# go.sum, so a version bump builds into a new folder; a binary already there is kept. Needs Go and
# the module proxy. Prints the binary's path as its last line.
#
# Beside it, cluster-autoscaler-dra-<key>: the same source with dra-template.patch applied, so that it reads the
# DRA ResourceSlices of a template (https://github.com/kubernetes/autoscaler/pull/10303, not in any release). The
# patched file goes to the compiler through -overlay, so the source folder stays as released and, with the plain
# build's Go cache warm, only the packages that change compile again. The key hashes the patch, so a change to it
# builds a new binary.
#
# Where the module proxy does not serve k8s.io/autoscaler/cluster-autoscaler (it refuses it on the
# project's machines), set PLUGPOOL_AUTOSCALER_GIT to a git clone of the kubernetes/autoscaler
# repository that has the commit named by go.mod's pseudo-version: that commit's cluster-autoscaler
# folder (with the apis module inside it) is exported into the cache and stands in for the two
# downloads; every other module still comes from go.mod and go.sum.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/../go-tool.sh"
cache="${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}"
out="$(tool_dir "$here")"
binary="$out/cluster-autoscaler"
dra_patch="$here/dra-template.patch"
# autoscalerBinaryPath() in autoscaler.ts derives the same name.
dra_binary="$out/cluster-autoscaler-dra-$(sha256sum <"$dra_patch" | cut -c1-16)"
module=k8s.io/autoscaler/cluster-autoscaler
# Its version as go.mod states it, in a one-line require or in a require block.
version="$(awk -v m="$module" '$1 == "require" && $2 == m { print $3 } $1 == m { print $2 }' "$here/go.mod" | head -1)"
commit="${version##*-}"

if [ -x "$binary" ] && [ -x "$dra_binary" ]; then
  echo "cluster-autoscaler $version: already built, as released and with dra-template.patch" >&2
  echo "$binary"
  exit 0
fi
mkdir -p "$out"
cd "$here"

# The source archive that ships beside the repository (shared/vendor, one folder above the clone): the
# cluster-autoscaler module cut down to what this build compiles. Used whenever no clone is named.
archive="${PLUGPOOL_AUTOSCALER_ARCHIVE:-$here/../../../../shared/vendor/cluster-autoscaler-1.36.1-externalgrpc-src.tar.gz}"

# Points the two modules at the source in $1 through a copy of go.mod (-modfile reads the go.sum beside it).
modflags=()
use_source() {
  local modfile="$1/tool.mod"
  cp go.mod "$modfile"
  cp go.sum "$1/tool.sum"
  go mod edit -replace="$module=$1/cluster-autoscaler" -replace="$module/apis=$1/cluster-autoscaler/apis" "$modfile"
  modflags=(-modfile="$modfile")
}

if [ -z "${PLUGPOOL_AUTOSCALER_GIT:-}" ] && [ -f "$archive" ]; then
  src="$cache/src/autoscaler-archive-$commit"
  if [ ! -d "$src/cluster-autoscaler" ]; then
    rm -rf "$src.tmp"
    mkdir -p "$src.tmp"
    tar -xzf "$archive" -C "$src.tmp" --strip-components=1
    mv "$src.tmp" "$src"
  fi
  use_source "$src"
  echo "cluster-autoscaler $version: source from $archive" >&2
elif [ -n "${PLUGPOOL_AUTOSCALER_GIT:-}" ]; then
  src="$cache/src/autoscaler-$commit"
  if [ ! -d "$src/cluster-autoscaler" ]; then
    if ! git -C "$PLUGPOOL_AUTOSCALER_GIT" cat-file -e "$commit^{commit}" 2>/dev/null; then
      echo "cluster-autoscaler: $PLUGPOOL_AUTOSCALER_GIT has no commit $commit" >&2
      exit 1
    fi
    rm -rf "$src.tmp"
    mkdir -p "$src.tmp"
    git -C "$PLUGPOOL_AUTOSCALER_GIT" archive "$commit" cluster-autoscaler | tar -x -C "$src.tmp"
    mv "$src.tmp" "$src"
  fi
  use_source "$src"
  echo "cluster-autoscaler $version: source from $PLUGPOOL_AUTOSCALER_GIT" >&2
fi

# build OUTPUT [FLAGS...]: builds the module into OUTPUT. Static binary: builds faster and needs no C toolchain.
# Built beside the target and renamed, so an interrupted build never leaves a binary that looks done.
build() {
  local output="$1" started=$SECONDS
  local partial="$out/.$(basename "$output").tmp"
  shift
  echo "cluster-autoscaler $version -> $output" >&2
  if ! CGO_ENABLED=0 go build "${modflags[@]}" "$@" -tags externalgrpc -trimpath -ldflags="-s -w" \
    -o "$partial" "$module"; then
    [ ${#modflags[@]} -eq 0 ] &&
      echo "cluster-autoscaler: if $module could not be downloaded, set PLUGPOOL_AUTOSCALER_GIT (see the top of $0)" >&2
    exit 1
  fi
  mv -f "$partial" "$output"
  echo "cluster-autoscaler: $(basename "$output") built in $((SECONDS - started))s" >&2
}

[ -x "$binary" ] || build "$binary"

if [ ! -x "$dra_binary" ]; then
  # The patch applied to a copy of the one file it changes, in a folder of its own (no git repository around it:
  # git apply then patches files as patch(1) would).
  pkg="$(go list "${modflags[@]}" -tags externalgrpc -f '{{.Dir}}' "$module/cloudprovider/externalgrpc")"
  patched="$(mktemp -d "$out/.dra-template.XXXXXX")"
  trap 'rm -rf "$patched"' EXIT
  file=cloudprovider/externalgrpc/externalgrpc_node_group.go
  mkdir -p "$patched/$(dirname "$file")"
  cp "$pkg/$(basename "$file")" "$patched/$file"
  chmod u+w "$patched/$file"
  GIT_CEILING_DIRECTORIES="$out" git -C "$patched" apply "$dra_patch"
  printf '{"Replace": {"%s": "%s"}}\n' "$pkg/$(basename "$file")" "$patched/$file" >"$patched/overlay.json"
  build "$dra_binary" -overlay="$patched/overlay.json"
fi
echo "$binary"
