#!/usr/bin/env bash
# Builds prometheus and promtool, which the monitoring tests run, from the module pinned in go.mod into
# ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/bin/<key>/, outside the repo. The key hashes go.mod and go.sum,
# so a version bump builds into a new folder; binaries already there are kept. Needs only Go and the module
# proxy. Prints the binaries' folder as its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}"
# tests/support/prometheus.ts derives the same key: sha256(go.mod + go.sum), first 16 hex digits.
key="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)"
out="$cache/bin/$key"
mkdir -p "$out"

if ! command -v go >/dev/null; then
  echo "prometheus: Go is needed to build prometheus and promtool" >&2
  exit 1
fi
cd "$here"
export CGO_ENABLED=0
version="$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)"
# remove_all_sd leaves out the cloud service discoveries (AWS, Azure, GCE, Kubernetes...): the tests scrape
# static targets, and those SDKs are most of the build time
# (https://github.com/prometheus/prometheus/blob/main/plugins/plugin_aws.go). Without the builtinassets tag
# the web UI is not embedded (its assets are built by npm and are not in the Go module); the HTTP API, which
# the tests use, is unaffected (https://github.com/prometheus/prometheus/blob/main/web/ui/ui.go).
tags=remove_all_sd
ldflags="-s -w -X github.com/prometheus/common/version.Version=$version"

echo "prometheus: github.com/prometheus/prometheus $version -> $out" >&2

build() {
  local name="$1" pkg="$2"
  if [ -x "$out/$name" ]; then
    echo "  $name: already built" >&2
    return
  fi
  echo "  $name: building $pkg ..." >&2
  local started=$SECONDS
  # Build beside the target and rename, so an interrupted build never leaves a binary that looks done.
  go build -trimpath -tags "$tags" -ldflags="$ldflags" -o "$out/.$name.tmp" "$pkg"
  mv -f "$out/.$name.tmp" "$out/$name"
  echo "  $name: built in $((SECONDS - started))s" >&2
}

total_started=$SECONDS
build promtool github.com/prometheus/prometheus/cmd/promtool
build prometheus github.com/prometheus/prometheus/cmd/prometheus
echo "prometheus: ready in $((SECONDS - total_started))s" >&2
echo "$out"
