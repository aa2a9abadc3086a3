// The pool's memory of each machine: which plan it has under way, and the transitions between plans.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PlugpoolError } from "../../src/domain/errors.ts";
import {
  beginMarking,
  beginPowerOff,
  endMarking,
  endPowerOff,
  jobOf,
  queuedPosition,
  queuePowerOn,
  stateOf,
  withGroupLock,
  type PowerOffJob,
} from "../../src/domain/state.ts";
import { World } from "../harness/fakes/world.ts";

const JOB = { node: "worker-1", startedAt: 0 } as unknown as PowerOffJob;

describe("a machine's plan", () => {
  it("has a power-off job only while powering off, and a queue position only while queued", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    const st = stateOf(ctx, machine);
    assert.equal(jobOf(st), undefined);
    assert.equal(queuedPosition(st), undefined);
    queuePowerOn(ctx, machine);
    assert.equal(queuedPosition(st), 0);
    assert.equal(jobOf(st), undefined, "a queued plug-on is no power-off");
    beginPowerOff(ctx, machine, JOB);
    assert.equal(jobOf(st), JOB);
    assert.equal(queuedPosition(st), undefined, "the power-off dropped the queued plug-on");
  });

  it("stays marking until every write DeleteNodes began has settled", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    const st = stateOf(ctx, machine);
    beginMarking(ctx, machine);
    beginMarking(ctx, machine);
    endMarking(st);
    assert.deepEqual(st.plan, { kind: "marking", writes: 1 });
    endMarking(st);
    assert.deepEqual(st.plan, { kind: "none" });
  });

  it("keeps a queued plug-on when a power-off that is not under way is ended", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    queuePowerOn(ctx, machine);
    endPowerOff(stateOf(ctx, machine));
    assert.equal(queuedPosition(stateOf(ctx, machine)), 0);
  });

  it("refuses a transition its plan does not allow, naming the machine and the plan", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    beginPowerOff(ctx, machine, JOB);
    assert.throws(() => { beginMarking(ctx, machine); }, (error: unknown) => {
      assert.ok(error instanceof PlugpoolError);
      assert.equal(error.code, "internal");
      assert.equal(error.message, 'cannot record a power-off for worker-1: its plan is "powering-off"');
      return true;
    });
  });
});

describe("the pool's lookups", () => {
  it("refuses a node group that is not configured, naming it", async () => {
    const w = new World();
    const ctx = w.context();
    let ran = false;
    assert.throws(
      () => withGroupLock(ctx, "gpus", () => { ran = true; return Promise.resolve(); }),
      (error: unknown) => error instanceof PlugpoolError && error.code === "node-group-not-found" && error.message === 'node group "gpus" is not configured',
    );
    assert.equal(ran, false);
    assert.equal(await withGroupLock(ctx, "workers", () => Promise.resolve("held")), "held");
  });

  it("refuses a machine it was not configured with, naming it", () => {
    const w = new World();
    const ctx = w.context();
    const stranger = { ...w.machine("worker-1"), name: "stranger" };
    assert.throws(
      () => stateOf(ctx, stranger),
      (error: unknown) => error instanceof PlugpoolError && error.code === "internal" && error.message === 'machine "stranger" has no state',
    );
  });
});
