import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Pool } from "../../src/domain/index.ts";
import { STALLED_PASS_MS, reconcilerLiveness, startReconciler } from "../../src/app/reconciler.ts";
import { startOpsServer } from "../../src/app/ops-server.ts";
import { createMetrics } from "../../src/app/metrics.ts";
import { createLogger } from "../../src/app/logger.ts";

const logger = createLogger({ silent: true });

/** A pool whose reconcile answers from a script and records overlap. */
function scriptedPool(answers: (number | undefined | Error)[]) {
  const state = { runs: 0, active: 0, maxActive: 0 };
  const pool = {
    reconcile: async () => {
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

describe("startReconciler()", () => {
  it("runs at once, then again after the wait the domain asked for", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const { pool, state } = scriptedPool([1500, undefined]);
    const loop = startReconciler(pool, logger);
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
    const loop = startReconciler(pool, logger);
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
    const loop = startReconciler(pool, logger);
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
    const loop = startReconciler(pool, logger);
    await flush();
    await loop.stop();
    loop.wake();
    t.mock.timers.tick(60_000);
    await flush();
    assert.equal(state.runs, 1);
  });
});

/** A pool whose passes hang until the test lets the current one end. */
function hangingPool() {
  let finish = (): void => undefined;
  const pool = {
    reconcile: () =>
      new Promise<undefined>((resolve) => {
        finish = () => {
          resolve(undefined);
        };
      }),
  } as unknown as Pool;
  return {
    pool,
    finish: () => {
      finish();
    },
  };
}

describe("the reconciler's watchdog", () => {
  it("records when a pass ended, and how long the pass in progress has been running", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const clock = { ms: 1_000, now: () => clock.ms };
    const { pool, finish } = hangingPool();
    const loop = startReconciler(pool, logger, clock);
    assert.equal(loop.lastProgress(), undefined);
    clock.ms = 61_000;
    assert.equal(loop.stalledFor(clock.now()), 60_000);
    finish();
    await flush();
    assert.equal(loop.lastProgress(), 61_000);
    assert.equal(loop.stalledFor(clock.now() + 10_000), 0, "nothing runs between passes");
    clock.ms = 91_000;
    t.mock.timers.tick(30_000);
    await flush();
    assert.equal(loop.stalledFor(92_000), 1_000);
    finish();
    await loop.stop();
  });

  it("names a pass running for longer than the bound (5 minutes unless told) as a liveness problem", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    assert.equal(STALLED_PASS_MS, 300_000);
    const clock = { ms: 0, now: () => clock.ms };
    const { pool, finish } = hangingPool();
    const loop = startReconciler(pool, logger, clock);
    assert.deepEqual(reconcilerLiveness(loop, STALLED_PASS_MS), []);
    assert.deepEqual(reconcilerLiveness(loop, STALLED_PASS_MS + 1_000), ["power-off pass running for 301 s (more than 300 s)"]);
    assert.deepEqual(reconcilerLiveness(loop, 2_500, 2_000), ["power-off pass running for 3 s (more than 2 s)"]);
    finish();
    await flush();
    assert.deepEqual(reconcilerLiveness(loop, STALLED_PASS_MS * 10), []);
    await loop.stop();
  });

  it("turns /healthz unhealthy while a pass hangs past the bound, and healthy again once it ends", async () => {
    const clock = { ms: 0, now: () => clock.ms };
    const { pool, finish } = hangingPool();
    const loop = startReconciler(pool, logger, clock);
    const ops = await startOpsServer({
      host: "127.0.0.1",
      port: 0,
      registry: createMetrics().registry,
      readiness: () => [],
      liveness: () => reconcilerLiveness(loop, clock.now(), 2_000),
    });
    try {
      const healthz = () => fetch(`http://127.0.0.1:${ops.port}/healthz`);
      assert.equal((await healthz()).status, 200);
      clock.ms = 3_000;
      const unhealthy = await healthz();
      assert.equal(unhealthy.status, 503);
      assert.equal(await unhealthy.text(), "unhealthy: power-off pass running for 3 s (more than 2 s)\n");
      finish();
      await flush();
      assert.equal((await healthz()).status, 200);
    } finally {
      await loop.stop();
      await ops.close();
    }
  });
});
