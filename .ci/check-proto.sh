#!/usr/bin/env bash
# Guards the wire contract in proto/: buf lint, gen/ matches what buf generates from proto/, and no
# breaking change (buf.yaml: FILE rules) against the previous commit. Run from anywhere in the repo.
set -euo pipefail

root="$(git rev-parse --show-toplevel)"
cd "$root"
. .ci/node-env.sh
# buf.gen.yaml names a local protoc-gen-es: use the one pinned in package.json.
export PATH="$root/node_modules/.bin:$PATH"

buf lint

buf generate
stale="$(git status --porcelain -- gen)"
if [ -n "$stale" ]; then
  printf '%s\n' "$stale" >&2
  echo "gen/ is stale: run npm run proto" >&2
  exit 1
fi

# The previous commit is the baseline; a history without one (or one without the workspace) has
# nothing to break.
if git cat-file -e HEAD~1:buf.yaml 2>/dev/null && git cat-file -e HEAD~1:proto 2>/dev/null; then
  buf breaking --against "$root/.git#ref=HEAD~1"
  echo "buf breaking: no breaking change since $(git rev-parse --short HEAD~1)"
else
  echo "buf breaking: skipped, no previous commit with buf.yaml and proto/"
fi
