import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { LIMITS, Model } from "./pool-model.ts";
import { op } from "./pool-ops.ts";

// Two walks per run: one from a fixed seed (reproducible), one from a fresh seed each time (printed, so a failure
// can be replayed with PLUGPOOL_PROPERTY_SEED). Together well over 10^5 steps.
const FIXED_SEED = 20_260_901;
const FRESH_SEED = Number(process.env.PLUGPOOL_PROPERTY_SEED ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env.PLUGPOOL_PROPERTY_RUNS ?? 1000);
const MAX_STEPS = 150;

async function walk(seed: number): Promise<{ runs: number; steps: number; seen: Map<string, number> }> {
  let runs = 0;
  let steps = 0;
  const seen = new Map<string, number>();
  const started = performance.now();
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...LIMITS),
      fc.integer({ min: 1, max: 2 ** 30 }),
      fc.array(op, { minLength: 1, maxLength: MAX_STEPS, size: "max" }),
      async (limit, latencySeed, ops) => {
        runs++;
        const model = await Model.create(limit, latencySeed);
        for (const [i, o] of ops.entries()) {
          steps++;
          await model.apply(o);
          model.check();
          assert.deepEqual(model.violations, [], `after step ${i}: ${JSON.stringify(o)}`);
        }
        await model.settle();
        assert.deepEqual(model.violations, [], "after settling");
        for (const e of model.w.reporter.events) seen.set(e.type, (seen.get(e.type) ?? 0) + 1);
      },
    ),
    { seed, numRuns: RUNS },
  );
  const ms = Math.round(performance.now() - started);
  console.log(`pool property: seed ${seed}, ${runs} runs, ${steps} steps, ${ms} ms`);
  // How deep the walks went: a property that never reaches a power-off proves little.
  console.log(`pool property events: ${[...seen].map(([type, n]) => `${type}=${n}`).join(" ")}`);
  return { runs, steps, seen };
}

function assertDeep({ seen }: { seen: Map<string, number> }): void {
  assert.ok((seen.get("power-off-finished") ?? 0) > RUNS / 4, "the walks finish power-offs");
  assert.ok((seen.get("power-off-aborted") ?? 0) > 0, "the walks abort power-offs");
  assert.ok((seen.get("power-on-queued") ?? 0) > RUNS / 4, "the walks queue plug-ons under the inrush limit");
  assert.ok((seen.get("quarantined") ?? 0) > RUNS / 8, "the walks quarantine machines after failed boots");
  assert.ok((seen.get("power-restored") ?? 0) > RUNS / 20, "the walks restore lost power");
  assert.ok((seen.get("powered-outside") ?? 0) > RUNS / 10, "the walks see machines powered outside plugpool");
  assert.ok((seen.get("device-mismatch") ?? 0) > RUNS / 10, "the walks meet devices behind swapped addresses");
}

describe("Pool (model-based)", () => {
  it("keeps every safety rule through long random interleavings of calls, events, faults, stale views and restarts (fixed seed)", async () => {
    assertDeep(await walk(FIXED_SEED));
  });

  it(`keeps every safety rule from a fresh seed (${FRESH_SEED}; replay with PLUGPOOL_PROPERTY_SEED=${FRESH_SEED})`, async () => {
    assertDeep(await walk(FRESH_SEED));
  });
});
