#!/usr/bin/env bash
# Installs the Redfish BMC emulator pinned in requirements.txt (sushy-tools' sushy-emulator) into a Python venv
# at ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/redfish/<key>/venv, outside the repo. The key is the first 16 hex
# digits of sha256(requirements.txt): a version bump installs into a new folder, and one already there is kept.
# tests/harness/redfish/index.ts derives the same folder. The venv is built beside its place and renamed into
# it once it works, so an interrupted install never leaves a venv that looks done; the tests run the emulator
# as `python -m`, which does not mind the rename (the venv's console scripts would). Wheels only: nothing is
# compiled. Prints the venv's python as its last line.
#
# Python: $PLUGPOOL_PYTHON if set, else the first of python3, python3.12, python3.11, python3.10 on PATH that is
# 3.10 (sushy-tools 2.2.0's Requires-Python) to 3.12 and can make a venv with pip (Debian's python3 cannot
# without its python3-venv package). 3.13 is left out: it dropped the cgi module WebOb 1.8 imports, and its venvs
# lack the setuptools pbr needs (pip check refuses both).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${PLUGPOOL_CACHE:-}"
cache="${cache:-$HOME/.cache/plugpool}"
key="$(sha256sum "$here/requirements.txt" | cut -c1-16)"
dir="$cache/redfish/$key"
python_in_venv="$dir/venv/bin/python"

if "$python_in_venv" -c 'import sushy_tools.emulator.main' 2>/dev/null; then
  echo "sushy-emulator: already installed" >&2
  echo "$python_in_venv"
  exit 0
fi

usable() {
  "$1" -c 'import sys, venv, ensurepip; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))' 2>/dev/null
}
python=""
if [ -n "${PLUGPOOL_PYTHON:-}" ]; then
  usable "$PLUGPOOL_PYTHON" || { echo "sushy-emulator: PLUGPOOL_PYTHON=$PLUGPOOL_PYTHON is not a Python 3.10 to 3.12 with venv and ensurepip" >&2; exit 1; }
  python="$PLUGPOOL_PYTHON"
else
  for candidate in python3 python3.12 python3.11 python3.10; do
    if command -v "$candidate" >/dev/null && usable "$candidate"; then python="$candidate"; break; fi
  done
  [ -n "$python" ] || { echo "sushy-emulator: needs a Python 3.10 to 3.12 with venv and ensurepip (or set PLUGPOOL_PYTHON)" >&2; exit 1; }
fi

started=$SECONDS
echo "sushy-emulator: installing $(grep -m1 '^sushy-tools==' "$here/requirements.txt") with $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])') -> $dir" >&2
mkdir -p "$cache/redfish"
tmp="$(mktemp -d "$cache/redfish/.$key.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: \
  -r "$here/requirements.txt" >&2
"$tmp/venv/bin/python" -m pip check >&2
"$tmp/venv/bin/python" -m sushy_tools.emulator.main --help >/dev/null
# Another install may have finished meanwhile: its venv is as good as this one and may be in use.
if ! "$python_in_venv" -c 'import sushy_tools.emulator.main' 2>/dev/null; then
  rm -rf "$dir"
  mv -T "$tmp" "$dir"
fi
echo "sushy-emulator: installed in $((SECONDS - started))s" >&2
echo "$python_in_venv"
