#!/usr/bin/env bash
# Builds prometheus and promtool, which the monitoring tests run, from the module pinned in go.mod into
# ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/bin/<key>/, outside the repo. The key hashes go.mod and go.sum,
# so a version bump builds into a new folder; binaries already there are kept. Needs only Go and the module
# proxy. Prints the binaries' folder as its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/../go-tool.sh"
out="$(tool_dir "$here")"
require_go prometheus
cd "$here"
version="$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)"
# remove_all_sd leaves out the cloud service discoveries (AWS, Azure, GCE, Kubernetes...): the tests scrape
# static targets, and those SDKs are most of the build time
# (https://github.com/prometheus/prometheus/blob/main/plugins/plugin_aws.go). Without the builtinassets tag
# the web UI is not embedded (its assets are built by npm and are not in the Go module); the HTTP API, which
# the tests use, is unaffected (https://github.com/prometheus/prometheus/blob/main/web/ui/ui.go).
tags=remove_all_sd
ldflags="-s -w -X github.com/prometheus/common/version.Version=$version"

echo "prometheus: github.com/prometheus/prometheus $version -> $out" >&2

total_started=$SECONDS
build_tool "$out" promtool github.com/prometheus/prometheus/cmd/promtool "$ldflags" "$tags"
build_tool "$out" prometheus github.com/prometheus/prometheus/cmd/prometheus "$ldflags" "$tags"
echo "prometheus: ready in $((SECONDS - total_started))s" >&2
echo "$out"
