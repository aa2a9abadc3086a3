import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { LIMITS, Model } from "./pool-model.ts";
import { op } from "./pool-ops.ts";

// A fixed seed keeps runs reproducible; set PLUGPOOL_PROPERTY_SEED to explore others.
const SEED = Number(process.env.PLUGPOOL_PROPERTY_SEED ?? 20_260_901);
const RUNS = Number(process.env.PLUGPOOL_PROPERTY_RUNS ?? 200);
const MAX_STEPS = 150;

describe("Pool (model-based)", () => {
  it("keeps every safety rule through long random interleavings of calls, events, faults and restarts", async () => {
    let runs = 0;
    let steps = 0;
    const seen = new Map<string, number>();
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...LIMITS), fc.array(op, { minLength: 1, maxLength: MAX_STEPS, size: "max" }), async (limit, ops) => {
        runs++;
        const model = await Model.create(limit);
        for (const [i, o] of ops.entries()) {
          steps++;
          await model.apply(o);
          model.check();
          assert.deepEqual(model.violations, [], `after step ${i}: ${JSON.stringify(o)}`);
        }
        await model.settle();
        assert.deepEqual(model.violations, [], "after settling");
        for (const e of model.w.reporter.events) seen.set(e.type, (seen.get(e.type) ?? 0) + 1);
      }),
      { seed: SEED, numRuns: RUNS },
    );
    const ms = Math.round(performance.now() - started);
    console.log(`pool property: seed ${SEED}, ${runs} runs, ${steps} steps, ${ms} ms`);
    // How deep the walks went: a property that never reaches a power-off proves little.
    console.log(`pool property events: ${[...seen].map(([type, n]) => `${type}=${n}`).join(" ")}`);
    assert.ok((seen.get("power-off-finished") ?? 0) > RUNS / 2, "the walks finish power-offs");
    assert.ok((seen.get("power-off-aborted") ?? 0) > 0, "the walks abort power-offs");
    assert.ok((seen.get("power-on-queued") ?? 0) > RUNS / 4, "the walks queue plug-ons under the inrush limit");
    assert.ok((seen.get("quarantined") ?? 0) > RUNS / 4, "the walks quarantine machines after failed boots");
    assert.ok((seen.get("power-restored") ?? 0) > RUNS / 10, "the walks restore lost power");
  });
});
