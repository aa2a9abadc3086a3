import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Pool } from "../../src/domain/index.ts";
import { startPowerOffLoop } from "../../src/app/power-off-loop.ts";
import { createLogger } from "../../src/app/logger.ts";

const logger = createLogger({ silent: true });

/** A pool whose runPowerOffs answers from a script and records overlap. */
function scriptedPool(answers: (number | undefined | Error)[]) {
  const state = { runs: 0, active: 0, maxActive: 0 };
  const pool = {
    runPowerOffs: async () => {
      state.runs++;
      state.active++;
      state.maxActive = Math.max(state.maxActive, state.active);
      await Promise.resolve();
      state.active--;
      const answer = answers.shift();
      if (answer instanceof Error) throw answer;
      return answer;
    },
  } as unknown as Pool;
  return { pool, state };
}

const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("startPowerOffLoop()", () => {
  it("runs at once, then again after the wait the domain asked for", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const { pool, state } = scriptedPool([1500, undefined]);
    const loop = startPowerOffLoop(pool, logger);
    await flush();
    assert.equal(state.runs, 1);
    t.mock.timers.tick(1499);
    await flush();
    assert.equal(state.runs, 1);
    t.mock.timers.tick(1);
    await flush();
    assert.equal(state.runs, 2);
    await loop.stop();
  });

  it("still looks every 30 s when idle, and 5 s after a failed run", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const { pool, state } = scriptedPool([undefined, new Error("apiserver down"), undefined]);
    const loop = startPowerOffLoop(pool, logger);
    await flush();
    t.mock.timers.tick(30_000);
    await flush();
    assert.equal(state.runs, 2);
    t.mock.timers.tick(5_000);
    await flush();
    assert.equal(state.runs, 3);
    await loop.stop();
  });

  it("never overlaps runs: a wake during a run causes exactly one more run", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const { pool, state } = scriptedPool([undefined, undefined, undefined]);
    const loop = startPowerOffLoop(pool, logger);
    loop.wake();
    loop.wake();
    await flush();
    await flush();
    assert.equal(state.maxActive, 1);
    assert.equal(state.runs, 2);
    await loop.stop();
  });

  it("schedules nothing after stop", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const { pool, state } = scriptedPool([1000, 1000]);
    const loop = startPowerOffLoop(pool, logger);
    await flush();
    await loop.stop();
    loop.wake();
    t.mock.timers.tick(60_000);
    await flush();
    assert.equal(state.runs, 1);
  });
});
