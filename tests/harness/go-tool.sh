# Sourced by the build.sh of each Go tool module under tests/harness: where the module's binaries go, and how
# one is built. Binaries live outside the repo, in ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/bin/<key>/, where
# the key is the first 16 hex digits of sha256(go.mod + go.sum): a version bump builds into a new folder, and
# binaries already there are kept. toolBinaryDir() in tests/harness/control-plane/index.ts derives the same folder.

# Prints the binaries' folder of the tool module in $1.
tool_dir() {
  local key
  key="$(cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-16)"
  echo "${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/bin/$key"
}

# Exits with a message naming $1 when Go is missing.
require_go() {
  if ! command -v go >/dev/null; then
    echo "$1: Go is needed to build the test binaries (see go.mod for its version)" >&2
    exit 1
  fi
}

# build_tool DIR NAME PACKAGE LDFLAGS [TAGS]: builds PACKAGE into DIR/NAME unless it is there already.
# Static (no cgo: faster, no C toolchain), and built beside the target and renamed, so an interrupted build
# never leaves a binary that looks done.
build_tool() {
  local dir="$1" name="$2" pkg="$3" ldflags="$4" tags="${5:-}"
  if [ -x "$dir/$name" ]; then
    echo "  $name: already built" >&2
    return
  fi
  echo "  $name: building $pkg ..." >&2
  local started=$SECONDS
  mkdir -p "$dir"
  CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags="$ldflags" -o "$dir/.$name.tmp" "$pkg"
  mv -f "$dir/.$name.tmp" "$dir/$name"
  echo "  $name: built in $((SECONDS - started))s" >&2
}
