#!/usr/bin/env bash
# One entry point for working on plugpool on a fresh machine: it installs what is missing (Node 24 from the
# npm registry, npm packages, the Go-built Kubernetes binaries for the tests; all cached outside the repo)
# and then does what was asked.
#
#   bash scripts/dev.sh setup     install everything the tests need
#   bash scripts/dev.sh test      setup, then the whole test suite (npm test)
#   bash scripts/dev.sh lint      setup, then typecheck + eslint + buf lint
#   bash scripts/dev.sh sandbox   what the sandbox runs (Node, npm packages, the control plane and cluster-autoscaler;
#                                 with --backends also sushy-tools), then a local cluster with emulated plugs and
#                                 plugpool serving
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/node-env.sh

setup() {
  packages
  # The Python installs are mostly downloads: they run beside the Go builds, which keep both cores busy.
  beside bash tests/harness/home-assistant/install.sh
  beside bash tests/harness/redfish/install.sh
  bash tests/harness/control-plane/build.sh >/dev/null
  autoscaler
  bash tests/harness/helm/build.sh >/dev/null
  bash tests/harness/prometheus/build.sh >/dev/null
  await_beside
}

# `beside CMD...` starts CMD in the background (its messages still reach the terminal); `await_beside` waits for
# every one and fails the setup if any failed.
besides=()
beside() {
  "$@" >/dev/null &
  besides+=("$!:$*")
}
await_beside() {
  local entry failed=0
  for entry in "${besides[@]}"; do
    if ! wait "${entry%%:*}"; then
      echo "error: ${entry#*:} failed (see above)" >&2
      failed=1
    fi
  done
  besides=()
  return "$failed"
}

packages() {
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund
  fi
}

# The sandbox starts the control plane and cluster-autoscaler, and sushy-tools' Redfish emulator with --backends
# (its other devices are emulated in-process): someone trying plugpool waits for nothing else.
sandbox_setup() {
  packages
  local arg
  for arg in "$@"; do
    if [ "$arg" = "--backends" ]; then beside bash tests/harness/redfish/install.sh; fi
  done
  bash tests/harness/control-plane/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler >/dev/null
  autoscaler
  await_beside
}

autoscaler() {
  # The Go module proxy refuses k8s.io/autoscaler/cluster-autoscaler (403), so cluster-autoscaler builds from
  # its source archive in shared/vendor beside the repository, a clone of its repository
  # (PLUGPOOL_AUTOSCALER_GIT) or an earlier build in the cache. Where the archive ships, the scenarios with the
  # real cluster-autoscaler must run, so a failed build fails the setup; elsewhere they are skipped, and say so.
  local archive
  archive="$(autoscaler_archive)"
  if [ -n "$archive" ]; then
    if ! bash tests/harness/autoscaler/build.sh >/dev/null; then
      echo "error: cluster-autoscaler did not build although its source ships at $archive (see above)" >&2
      exit 1
    fi
  elif ! bash tests/harness/autoscaler/build.sh >/dev/null; then
    echo "notice: cluster-autoscaler is not available here (see tests/harness/autoscaler/build.sh);" \
      "the end-to-end scenarios that need it will be skipped" >&2
  fi
}

# The cluster-autoscaler source archive, as tests/harness/autoscaler/autoscaler.ts finds it; empty if none.
autoscaler_archive() {
  if [ -n "${PLUGPOOL_AUTOSCALER_ARCHIVE:-}" ]; then
    if [ -f "$PLUGPOOL_AUTOSCALER_ARCHIVE" ]; then echo "$PLUGPOOL_AUTOSCALER_ARCHIVE"; fi
    return 0
  fi
  compgen -G "../shared/vendor/cluster-autoscaler-*-externalgrpc-src.tar.gz" | sort | tail -1 || true
}

cmd="${1:-test}"
shift || true
case "$cmd" in
  setup) setup ;;
  test) setup; npm test -- "$@" ;;
  lint) setup; npm run lint ;;
  sandbox) sandbox_setup "$@"; npm run build; exec node scripts/sandbox.ts "$@" ;;
  *) echo "usage: scripts/dev.sh setup|test|lint|sandbox" >&2; exit 2 ;;
esac
