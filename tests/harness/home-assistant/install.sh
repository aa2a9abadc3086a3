#!/usr/bin/env bash
# Installs the real Home Assistant (PyPI `homeassistant`, every package pinned in requirements.txt beside this
# script) into a venv at ${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}/home-assistant/<key>/, outside the repo. The
# key is the first 16 hex digits of sha256(requirements.txt), which names the Python version too, so a version
# bump installs into a new folder; homeAssistantVenv() in tests/harness/home-assistant/index.ts derives the
# same folder. Fast when it is there already. Prints the venv's folder as its last line. The venv is built
# under another name and renamed, so its scripts' first lines name a folder that is gone: run Home Assistant
# as `<venv>/bin/python -m homeassistant`.
#
# Needs pyenv's Python of that version (PLUGPOOL_HOME_ASSISTANT_PYTHON overrides its path) and PyPI. Without
# that Python it installs nothing and says so: the tests against the real Home Assistant then say they skip.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
requirements="$here/requirements.txt"
key="$(sha256sum <"$requirements" | cut -c1-16)"
cache="${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}"
out="$cache/home-assistant/$key"
python_version="$(sed -n 's/^# python \([0-9.]*\)$/\1/p' "$requirements")"
python="${PLUGPOOL_HOME_ASSISTANT_PYTHON:-${PYENV_ROOT:-$HOME/.pyenv}/versions/$python_version/bin/python3}"

if [ -x "$out/bin/python" ]; then
  echo "home assistant: already installed" >&2
  echo "$out"
  exit 0
fi
if [ ! -x "$python" ]; then
  echo "notice: home assistant: Python $python_version not found at $python; nothing installed," \
    "the tests against the real Home Assistant will be skipped" >&2
  exit 0
fi

echo "home assistant: installing $(grep '^homeassistant==' "$requirements") -> $out" >&2
started=$SECONDS
# Installed beside the target and renamed, so an interrupted install never leaves a venv that looks done.
# uv fetches in parallel (a minute cold, where pip takes more than two); its cache is thrown away with the
# build folder, and copy mode keeps the venv free of links into it.
tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$(dirname "$out")"
"$python" -m venv "$tmp"
"$tmp/bin/pip" install --quiet --no-cache-dir "$(grep '^uv==' "$requirements")" >&2
UV_CACHE_DIR="$tmp/.uv-cache" "$tmp/bin/uv" pip install --quiet --no-config --no-deps --link-mode copy \
  --python "$tmp/bin/python" -r "$requirements" >&2
rm -rf "$tmp/.uv-cache"
rm -rf "$out"
mv "$tmp" "$out"
echo "home assistant: installed in $((SECONDS - started))s" >&2
echo "$out"
