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

# No breaking change anywhere in the history of proto/: every commit that changed it is compared with its
# parent, so whatever the previous main was, the contract it served still holds. (A first commit has nothing
# to break.)
checked=0
for commit in $(git log --format=%H -- proto buf.yaml); do
  if git cat-file -e "$commit~1:buf.yaml" 2>/dev/null && git cat-file -e "$commit~1:proto" 2>/dev/null; then
    buf breaking "$root/.git#ref=$commit" --against "$root/.git#ref=$commit~1"
    checked=$((checked + 1))
  fi
done
echo "buf breaking: no breaking change in $checked change(s) of proto/"
