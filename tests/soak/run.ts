// `npm run soak -- --minutes N [--seed S] [--machines M]`: builds plugpool, runs the soak (tests/soak/soak.ts) for N
// minutes and prints its summary. Exits 1 if the observer saw any violation.
import { randomInt } from "node:crypto";
import { parseArgs } from "node:util";
import { formatSummary, runSoak } from "./soak.ts";

function positive(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const number = Number(value);
  if (!Number.isFinite(number) || number <= 0) {
    console.error(`soak: --${name} must be a positive number, not "${value}"`);
    process.exit(2);
  }
  return number;
}

const { values } = parseArgs({
  options: { minutes: { type: "string" }, seed: { type: "string" }, machines: { type: "string" } },
});
const minutes = positive("minutes", values.minutes, 10);
const seed = Math.floor(positive("seed", values.seed, randomInt(1, 2 ** 31)));
const machines = Math.floor(positive("machines", values.machines, 8));

const result = await runSoak({ minutes, seed, machines });
console.log(formatSummary(result));
process.exitCode = result.violations.length === 0 ? 0 : 1;
