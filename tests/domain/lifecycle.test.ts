// The one place that decides where a machine is in its life: each phase, and which one wins when several apply.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createContext, stateOf, type PoolContext, type PowerOffJob } from "../../src/domain/state.ts";
import { lifecycleOf, type Phase } from "../../src/domain/lifecycle.ts";
import { World } from "../fakes/world.ts";

/** A domain context over a world's fakes, whose memory the test sets by hand. */
function contextOf(w: World): PoolContext {
  const deps = { clock: w.clock, power: w.power, cluster: w.cluster, lookup: w.cluster, teardown: w.cluster, records: w.records, reporter: w.reporter };
  return createContext(deps, w.config);
}

const JOB = { node: "worker-1", startedAt: 0, aborting: undefined } as unknown as PowerOffJob;

describe("lifecycleOf()", () => {
  const phaseOf = (ctx: PoolContext, w: World, name = "worker-1"): Phase => lifecycleOf(ctx, w.machine(name)).phase;

  it("is unknown before a read, then off, or powered-outside for a plug on that plugpool did not switch on", () => {
    const w = new World();
    const ctx = contextOf(w);
    assert.equal(phaseOf(ctx, w), "unknown");
    stateOf(ctx, w.machine("worker-1")).plug = "off";
    assert.equal(phaseOf(ctx, w), "off");
    stateOf(ctx, w.machine("worker-1")).plug = "on";
    assert.equal(phaseOf(ctx, w), "powered-outside");
  });

  it("is booting while plugpool's power-on record stands and no Node claims the machine, then registered", () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    const ctx = contextOf(w);
    stateOf(ctx, w.machine("worker-1")).plug = "on";
    assert.deepEqual(lifecycleOf(ctx, w.machine("worker-1")), { phase: "booting", since: w.clock.now() });
    w.register("worker-1");
    assert.equal(phaseOf(ctx, w), "registered");
  });

  it("ranks a power-off above a command in flight, that above a Node, that above the queue", () => {
    const w = new World();
    const ctx = contextOf(w);
    const st = stateOf(ctx, w.machine("worker-1"));
    st.plug = "off";
    st.queued = 3;
    assert.deepEqual(lifecycleOf(ctx, w.machine("worker-1")), { phase: "queued", position: 3 });
    w.register("worker-1");
    assert.equal(phaseOf(ctx, w), "registered", "a Node that registered meanwhile outranks the queue");
    st.switching = "on";
    assert.deepEqual(lifecycleOf(ctx, w.machine("worker-1")), { phase: "switching", to: "on" });
    st.job = JOB;
    assert.equal(phaseOf(ctx, w), "powering-off");
  });

  it("counts a Node matched by name only (another providerID) as registered: it may be the machine running", () => {
    const w = new World();
    const ctx = contextOf(w);
    stateOf(ctx, w.machine("worker-2")).plug = "on";
    w.register("worker-2", { providerID: "k3s://someone-else" });
    assert.equal(phaseOf(ctx, w, "worker-2"), "registered");
  });
});
