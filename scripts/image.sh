#!/usr/bin/env bash
# Builds plugpool's container image from the Containerfile with podman or docker, whichever has a working
# engine (podman first). The tag defaults to ghcr.io/plugpool/plugpool:<version from package.json>.
#
#   npm run image                       # or: bash scripts/image.sh
#   npm run image -- registry.lan/plugpool:0.1.0
#   CONTAINER_ENGINE=docker npm run image
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' package.json)
tag="${1:-ghcr.io/plugpool/plugpool:${version}}"

engine=""
problems=()
for candidate in ${CONTAINER_ENGINE:-podman docker}; do
  if ! command -v "$candidate" >/dev/null 2>&1; then
    problems+=("$candidate: not installed")
  elif ! "$candidate" info >/dev/null 2>&1; then
    problems+=("$candidate: installed, but its engine does not answer ('$candidate info' fails)")
  else
    engine="$candidate"
    break
  fi
done

if [ -z "$engine" ]; then
  echo "image: no container engine available, so no image was built:" >&2
  printf '  %s\n' "${problems[@]}" >&2
  echo "Install podman (or start the Docker engine) and run this again." >&2
  exit 1
fi

echo "image: building $tag with $engine" >&2
exec "$engine" build --file Containerfile --tag "$tag" .
