#!/usr/bin/env bash
# Mutation testing, one source file at a time (all of stryker.config.json's `mutate` when none is named):
#   bash tests/repository/mutation/run.sh [src/domain/switching.ts ...]
# Each file keeps its own incremental record, so a run stopped part-way loses only the file it was on, and a
# file whose code and tests did not change is not tested again. Reports: reports/mutation/<file>.{json,html}.
# The property test runs at a fixed seed, so that a mutant is killed or not the same way every time.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PLUGPOOL_PROPERTY_RUNS=300 PLUGPOOL_PROPERTY_SEED=20260901
if [ "$#" -eq 0 ]; then
  mapfile -t files < <(node -e 'for (const f of JSON.parse(require("fs").readFileSync("stryker.config.json", "utf8")).mutate) console.log(f)')
else
  files=("$@")
fi
mkdir -p reports/mutation
for file in "${files[@]}"; do
  name="$(basename "$file" .ts)"
  npx stryker run --mutate "$file" --incrementalFile "reports/mutation/$name.incremental.json"
  cp reports/mutation/mutation.json "reports/mutation/$name.json"
  cp reports/mutation/mutation.html "reports/mutation/$name.html"
done
