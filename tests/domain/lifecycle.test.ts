// The one place that decides where a machine is in its life: each phase, and which one wins when several apply.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  beginMarking,
  beginPowerOff,
  dropQueued,
  endMarking,
  endPowerOff,
  queuePowerOn,
  stateOf,
  type PoolContext,
  type PowerOffJob,
} from "../../src/domain/state.ts";
import { lifecycleOf, type Phase } from "../../src/domain/lifecycle.ts";
import { World } from "../harness/fakes/world.ts";

const JOB = { node: "worker-1", startedAt: 0, aborting: undefined } as unknown as PowerOffJob;

describe("lifecycleOf()", () => {
  const phaseOf = (ctx: PoolContext, w: World, name = "worker-1"): Phase => lifecycleOf(ctx, w.machine(name)).phase;

  it("is unknown before a read, then off, or powered-outside for a plug on that plugpool did not switch on", () => {
    const w = new World();
    const ctx = w.context();
    assert.equal(phaseOf(ctx, w), "unknown");
    stateOf(ctx, w.machine("worker-1")).power.plug = "off";
    assert.equal(phaseOf(ctx, w), "off");
    stateOf(ctx, w.machine("worker-1")).power.plug = "on";
    assert.equal(phaseOf(ctx, w), "powered-outside");
  });

  it("is booting while plugpool's power-on record stands and no Node claims the machine, then registered", () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    const ctx = w.context();
    stateOf(ctx, w.machine("worker-1")).power.plug = "on";
    assert.deepEqual(lifecycleOf(ctx, w.machine("worker-1")), { phase: "booting", since: w.clock.now() });
    w.register("worker-1");
    assert.equal(phaseOf(ctx, w), "registered");
  });

  it("ranks a power-off above a command in flight, that above a Node, that above the queue", () => {
    const w = new World();
    const ctx = w.context();
    const machine = w.machine("worker-1");
    const st = stateOf(ctx, machine);
    st.power.plug = "off";
    ctx.memory.nextQueued = 3;
    queuePowerOn(ctx, machine);
    assert.deepEqual(lifecycleOf(ctx, machine), { phase: "queued", position: 3 });
    w.register("worker-1");
    assert.equal(phaseOf(ctx, w), "registered", "a Node that registered meanwhile outranks the queue");
    st.power.command = "on";
    assert.deepEqual(lifecycleOf(ctx, machine), { phase: "switching", to: "on" });
    beginPowerOff(ctx, machine, JOB);
    assert.equal(phaseOf(ctx, w), "powering-off");
  });

  it("counts a Node matched by name only (another providerID) as registered: it may be the machine running", () => {
    const w = new World();
    const ctx = w.context();
    stateOf(ctx, w.machine("worker-2")).power.plug = "on";
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
    dropQueued(st);
    endMarking(st);
    assert.equal(st.plan.kind, "powering-off", "only its own end ends a power-off");
    endPowerOff(st);
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
    endMarking(st);
    assert.deepEqual(st.plan, { kind: "marking", writes: 1 });
    beginPowerOff(ctx, machine, JOB);
    endMarking(st);
    assert.equal(st.plan.kind, "powering-off");
  });
});
