// The one place that decides where a machine is in its life: each phase, and which one wins when several apply.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { PoolContext } from "../../src/domain/context.ts";
import type { Machine } from "../../src/domain/model.ts";
import { aborted, newJob, newUndo, type PowerOffJob } from "../../src/domain/power-off-job.ts";
import { PlugpoolError } from "../../src/domain/errors.ts";
import {
  beginMarking,
  beginPowerOff,
  bootFailed,
  bootFailureCounted,
  bootFailuresCleared,
  commandSent,
  deviceMismatched,
  dropQueued,
  failedBootPoweredOutside,
  instanceOf,
  isOutOfView,
  endMarking,
  endPowerOff,
  lifecycleOf,
  powerOffOf,
  queuedPosition,
  queuePowerOn,
  readingArrived,
  readStarted,
  stateOf,
  switchAnswered,
  switchUnconfirmed,
  type Phase,
} from "../../src/domain/lifecycle.ts";
import { World } from "../harness/fakes/world.ts";

const JOB = { node: "worker-1", startedAt: 0, aborting: undefined } as unknown as PowerOffJob;

/** What plugpool remembers of the machine's plug, as a reading leaves it. */
function remember(ctx: PoolContext, machine: Machine, on: boolean): void {
  assert.deepEqual(readingArrived(ctx, machine, readStarted(ctx, machine), { on }), { on });
}

describe("lifecycleOf()", () => {
  const phaseOf = (ctx: PoolContext, w: World, name = "worker-1"): Phase => lifecycleOf(ctx, w.machine(name)).phase;

  it("is unknown before a read, then off, or powered-outside for a plug on that plugpool did not switch on", () => {
    const w = new World();
    const ctx = w.context();
    assert.equal(phaseOf(ctx, w), "unknown");
    remember(ctx, w.machine("worker-1"), false);
    assert.equal(phaseOf(ctx, w), "off");
    remember(ctx, w.machine("worker-1"), true);
    assert.equal(phaseOf(ctx, w), "powered-outside");
  });

  it("is booting while plugpool's power-on record stands and no Node claims the machine, then registered", () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    const ctx = w.context();
    remember(ctx, w.machine("worker-1"), true);
    assert.deepEqual(lifecycleOf(ctx, w.machine("worker-1")), { phase: "booting", since: w.clock.now() });
    w.register("worker-1");
    assert.equal(phaseOf(ctx, w), "registered");
  });

  it("ranks a power-off above a command in flight, that above a Node, that above the queue", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    remember(ctx, machine, false);
    queuePowerOn(ctx, w.machine("worker-2"));
    queuePowerOn(ctx, machine);
    assert.deepEqual(lifecycleOf(ctx, machine), { phase: "queued", position: 1 });
    w.register("worker-1");
    assert.equal(phaseOf(ctx, w), "registered", "a Node that registered meanwhile outranks the queue");
    commandSent(ctx, machine, "on");
    assert.deepEqual(lifecycleOf(ctx, machine), { phase: "switching", to: "on" });
    beginPowerOff(ctx, machine, JOB);
    assert.equal(phaseOf(ctx, w), "powering-off");
  });

  it("counts a Node matched by name only (another providerID) as registered: it may be the machine running", () => {
    const w = new World();
    const ctx = w.context();
    remember(ctx, w.machine("worker-2"), true);
    w.register("worker-2", { providerID: "k3s://someone-else" });
    assert.equal(phaseOf(ctx, w, "worker-2"), "registered");
  });
});

describe("a machine's plan", () => {
  it("holds one thing at a time: a power-off drops a queued plug-on, and a second power-off or a queue on top of it is refused", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    const st = stateOf(ctx, machine);
    queuePowerOn(ctx, machine);
    assert.throws(() => {
      queuePowerOn(ctx, machine);
    }, /cannot queue a plug-on for worker-1: its plan is "queued"/);
    beginPowerOff(ctx, machine, JOB);
    assert.deepEqual(st.plan, { kind: "powering-off", job: JOB });
    assert.throws(() => {
      beginPowerOff(ctx, machine, JOB);
    }, /cannot start a second power-off for worker-1/);
    assert.throws(() => {
      beginMarking(ctx, machine);
    }, /cannot record a power-off for worker-1/);
    dropQueued(ctx, machine);
    endMarking(ctx, machine);
    assert.equal(st.plan.kind, "powering-off", "only its own end ends a power-off");
    endPowerOff(ctx, machine);
    assert.deepEqual(st.plan, { kind: "none" });
  });

  it("stays marking until every power-off record being written has settled, and yields to a power-off started meanwhile", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    const st = stateOf(ctx, machine);
    queuePowerOn(ctx, machine);
    beginMarking(ctx, machine);
    beginMarking(ctx, machine);
    assert.deepEqual(st.plan, { kind: "marking", writes: 2 }, "marking drops the queued plug-on");
    endMarking(ctx, machine);
    assert.deepEqual(st.plan, { kind: "marking", writes: 1 });
    beginPowerOff(ctx, machine, JOB);
    endMarking(ctx, machine);
    assert.equal(st.plan.kind, "powering-off");
  });

  it("has a power-off job only while powering off, and a queue position only while queued", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    assert.equal(powerOffOf(ctx, machine), undefined);
    assert.equal(queuedPosition(ctx, machine), undefined);
    queuePowerOn(ctx, machine);
    assert.equal(queuedPosition(ctx, machine), 0);
    assert.equal(powerOffOf(ctx, machine), undefined, "a queued plug-on is no power-off");
    beginPowerOff(ctx, machine, JOB);
    assert.equal(powerOffOf(ctx, machine), JOB);
    assert.equal(queuedPosition(ctx, machine), undefined, "the power-off dropped the queued plug-on");
  });

  it("keeps a queued plug-on when a power-off that is not under way is ended", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    queuePowerOn(ctx, machine);
    endPowerOff(ctx, machine);
    assert.equal(queuedPosition(ctx, machine), 0);
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

describe("the Instance cluster-autoscaler sees", () => {
  it("is none for a switch-off in flight of a machine without a Node whose power-off is being undone", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    beginPowerOff(ctx, machine, newUndo(0, { nodes: [], reason: "its DeleteNodes failed", quiet: false }));
    commandSent(ctx, machine, "off");
    assert.equal(instanceOf(ctx, machine), undefined);
    commandSent(ctx, machine, "on");
    assert.deepEqual(instanceOf(ctx, machine), { id: "k3s://worker-1", state: "creating" }, "a switch-on in flight is the instance it is about to be");
  });

  it("keeps a held machine in view while its power-off runs (it stops at its next step), and out of view once it is stopped", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    const job = newJob("worker-1", 0);
    beginPowerOff(ctx, machine, job);
    deviceMismatched(ctx, machine, { expected: "device plug-worker-1", seen: "device other" });
    assert.equal(isOutOfView(ctx, machine), false);
    assert.deepEqual(instanceOf(ctx, machine), { id: "k3s://worker-1", state: "deleting" });
    aborted(job, { step: "grace", reason: "held" });
    assert.equal(isOutOfView(ctx, machine), true);
    assert.equal(instanceOf(ctx, machine), undefined);
  });

  it("is none for a restore in flight under a Node that claims the machine by name only", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-2");
    w.register("worker-2", { providerID: "k3s://someone-else" });
    commandSent(ctx, machine, "on");
    assert.equal(instanceOf(ctx, machine), undefined);
  });
});

describe("what plugpool remembers of a machine's power and boots", () => {
  it("drops a reading started before a lost answer and a later one, however the versions add up", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    const started = readStarted(ctx, machine);
    switchUnconfirmed(ctx, machine);
    switchAnswered(ctx, machine, { on: true });
    assert.equal(readingArrived(ctx, machine, started, { on: false }), undefined);
    assert.equal(stateOf(ctx, machine).power.plug, "on");
  });

  it("forgets a failed boot once its plug reads on without plugpool's power-on record, and only then", () => {
    const failure = { code: "plug-off-while-booting", message: "read off" };
    const recorded = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    const outside = new World({ on: ["worker-1"] });
    for (const [w, on, kept] of [[recorded, true, true], [outside, false, true], [outside, true, false]] as const) {
      const ctx = w.context();
      const machine = w.machine("worker-1");
      bootFailed(ctx, machine, failure);
      remember(ctx, machine, on);
      failedBootPoweredOutside(ctx, machine);
      assert.deepEqual(stateOf(ctx, machine).boot.failure, kept ? failure : undefined);
    }
  });

  it("clears failed boots counted without a quarantine, and says whether there were any", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    assert.equal(bootFailuresCleared(ctx, machine), false);
    assert.equal(bootFailureCounted(ctx, machine), 1);
    assert.equal(bootFailuresCleared(ctx, machine), true);
    assert.equal(stateOf(ctx, machine).boot.failures, 0);
  });
});
