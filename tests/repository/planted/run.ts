// Plants each bug of plants.ts in a copy of the repository and runs the domain's safety tests there (or the tests the
// plant names): every plant must make them fail. Prints a table; exits non-zero when a plant survives (or does not
// apply).
//   node tests/repository/planted/run.ts            all plants
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PLANTS, type Plant } from "./plants.ts";

const root = join(import.meta.dirname, "..", "..", "..");
const SUITE = [
  "tests/domain/pool.property.test.ts",
  "tests/domain/safety-reproductions.test.ts",
  "tests/domain/safety-reproductions-cluster.test.ts",
  "tests/domain/safety-reproductions-3.test.ts",
  "tests/domain/power-off-recovery.test.ts",
  "tests/domain/revival.test.ts",
  "tests/domain/safety.test.ts",
  "tests/domain/device-identity.test.ts",
  "tests/domain/leadership.test.ts",
];

export interface PlantResult {
  readonly name: string;
  readonly caught: boolean;
  readonly detail: string;
}

export function runPlant(plant: Plant): PlantResult {
  const dir = mkdtempSync(join(tmpdir(), "plugpool-plant-"));
  try {
    for (const part of ["src", "tests", "gen", "package.json"]) cpSync(join(root, part), join(dir, part), { recursive: true });
    symlinkSync(join(root, "node_modules"), join(dir, "node_modules"));
    for (const edit of plant.edits) {
      const path = join(dir, edit.file);
      const text = readFileSync(path, "utf8");
      if (!text.includes(edit.find)) return { name: plant.name, caught: false, detail: `does not apply to ${edit.file}` };
      writeFileSync(path, text.replace(edit.find, edit.replace));
    }
    // The fixed seed only, so a plant is judged the same way every time.
    const run = spawnSync(process.execPath, ["--test", "--test-reporter=spec", ...(plant.suite ?? SUITE)], {
      cwd: dir,
      encoding: "utf8",
      // Without the parent's test context, so the suite runs as its own test run even under `node --test`.
      env: { ...withoutTestContext(process.env), PLUGPOOL_PROPERTY_SEED: "20260901", PLUGPOOL_PROPERTY_RUNS: "600" },
      timeout: 300_000,
    });
    const passed = Number(/^ℹ pass (\d+)/m.exec(run.stdout)?.[1] ?? 0);
    const failed = Number(/^ℹ fail (\d+)/m.exec(run.stdout)?.[1] ?? 0);
    if (passed + failed === 0) return { name: plant.name, caught: false, detail: `the suite ran no test (exit ${String(run.status)})` };
    const caught = run.status !== 0 && failed > 0;
    return { name: plant.name, caught, detail: caught ? `${failed} failing` : `suite passed (exit ${String(run.status)})` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const results = PLANTS.map(runPlant);
  for (const r of results) console.log(`${r.caught ? "caught  " : "SURVIVED"}  ${r.name}: ${r.detail}`);
  process.exitCode = results.every((r) => r.caught) ? 0 : 1;
}

function withoutTestContext(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const rest = { ...env };
  delete rest.NODE_TEST_CONTEXT;
  return rest;
}
