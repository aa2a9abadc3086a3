import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION, mayCutPower } from "../../src/domain/index.ts";
import { freshVerdict } from "../../src/domain/safety.ts";
import { beginPowerOff, createContext, type PoolContext, type PowerOffJob } from "../../src/domain/state.ts";
import { PREFIX, World } from "../fakes/world.ts";
import { rejectsWith } from "../fakes/assertions.ts";

describe("mayCutPower()", () => {
  const world = (): World => new World({ groups: [{ id: "g", machines: ["m-1", "m-2"], hold: ["m-2"] }] });

  it("allows a machine no Node stands for", () => {
    const w = world();
    assert.deepEqual(mayCutPower(w.machine("m-1"), w.cluster, PREFIX), { allowed: true });
  });

  it("allows a registered machine whose Node carries the ToBeDeleted taint", () => {
    const w = world();
    w.registerTainted("m-1");
    assert.deepEqual(mayCutPower(w.machine("m-1"), w.cluster, PREFIX), { allowed: true });
  });

  it("refuses a registered machine without the taint", () => {
    const w = world();
    w.register("m-1");
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "registered-without-taint");
  });

  it("refuses a registered machine whose Node carries other taints, even cluster-autoscaler's deletion-candidate one", () => {
    // Only ToBeDeleted says CA has drained the Node; DeletionCandidate marks one it merely considers removing.
    const w = world();
    w.register("m-1", {
      taints: [
        { key: "DeletionCandidateOfClusterAutoscaler", value: "1", effect: "PreferNoSchedule" },
        { key: "node.kubernetes.io/unschedulable", value: "", effect: "NoSchedule" },
      ],
    });
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "registered-without-taint");
  });

  it("refuses when a Node carries the machine's name under a foreign providerID without the taint", () => {
    const w = world();
    w.cluster.addNode({ name: "m-1", providerID: "aws:///i-1" });
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "registered-without-taint");
  });

  it("refuses when any of two Nodes standing for the machine lacks the taint", () => {
    const w = world();
    w.cluster.addNode({ name: "elsewhere", providerID: PREFIX + "m-1" });
    w.cluster.taint("elsewhere");
    w.cluster.addNode({ name: "m-1", providerID: "aws:///i-1" });
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.match(verdict.allowed ? "" : verdict.detail, /node m-1 is registered without/);
  });

  it("refuses a machine held in the configuration or by annotation, even when tainted", () => {
    const w = world();
    assert.equal(mayCutPower(w.machine("m-2"), w.cluster, PREFIX).allowed, false);
    w.registerTainted("m-1");
    w.cluster.annotate("m-1", HOLD_ANNOTATION, "");
    const verdict = mayCutPower(w.machine("m-1"), w.cluster, PREFIX);
    assert.equal(verdict.allowed ? undefined : verdict.rule, "held");
    w.cluster.annotate("m-1", HOLD_ANNOTATION, "false");
    assert.equal(mayCutPower(w.machine("m-1"), w.cluster, PREFIX).allowed, true);
  });
});

// The last check of an unregistered cut runs at the plug, after the command's wait for its device: what changed
// during that wait is seen only there (cutUnregistered's own checks ran before it).
describe("the verdict at the plug for a machine cut unregistered", () => {
  async function switchedOn(): Promise<World> {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    return w;
  }

  it("keeps the power of a machine whose Node registered while the switch-off waited for the device", async () => {
    const w = await switchedOn();
    w.power.onCall = (c) => {
      if (c.op === "turnOff") w.register("worker-1");
    };
    await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "unsafe", /worker-1 registered meanwhile \(node worker-1\)/);
    assert.equal(w.power.callsOf("turnOff").length, 1, "refused at the plug, not before");
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.equal(w.reporter.of("refused").at(-1)?.rule, "registered-without-taint");
  });

  it("keeps the power when the Nodes claiming the machine cannot be read at the plug", async () => {
    const w = await switchedOn();
    w.cluster.failNext("nodesClaiming");
    await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "unsafe", /the Nodes of worker-1 could not be read/);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.equal(w.reporter.of("refused").at(-1)?.rule, "view-not-current");
    assert.deepEqual(w.reporter.of("plug-off"), []);
  });

  it("keeps the power of a machine whose power-on record ended while the switch-off waited for the device", async () => {
    // As when a refresh saw a Node (which ends the record) that is gone again by the time the plug is reached.
    const w = await switchedOn();
    w.power.onCall = (c) => {
      if (c.op === "turnOff") w.records.endPowerOn("worker-1");
    };
    await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "unsafe", /worker-1 was not switched on by plugpool/);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.equal(w.reporter.of("refused").at(-1)?.rule, "powered-outside");
  });
});

// The cycle's verdict stands on its own: it must not rely on its caller having watched the Node go NotReady.
describe("the verdict at the plug for a power cycle", () => {
  /** worker-1 registered, its shutdown asked 10 s ago under a job that has seen nothing of the Node since. */
  function asked(): { w: World; ctx: PoolContext; askedAt: number } {
    const w = new World();
    const deps = { clock: w.clock, power: w.power, cluster: w.cluster, lookup: w.cluster, teardown: w.cluster, records: w.records, reporter: w.reporter };
    const ctx = createContext(deps, w.config);
    w.register("worker-1");
    const askedAt = w.clock.now();
    const job = {
      node: "worker-1",
      facts: { shutdownRequested: askedAt },
      shutdownNodeUid: w.cluster.nodeNamed("worker-1")?.uid,
      shutdownNodeSeen: { notReadyAt: undefined, readyAgain: false },
    } as unknown as PowerOffJob;
    beginPowerOff(ctx, w.machine("worker-1"), job);
    w.clock.advance(10_000);
    return { w, ctx, askedAt };
  }

  it("allows the off of a machine whose Node went NotReady after the shutdown was asked and stays so", async () => {
    const { w, ctx } = asked();
    w.cluster.setReady("worker-1", false, w.clock.now() - 5000);
    assert.deepEqual(await freshVerdict(ctx, w.machine("worker-1"), "cycle"), { allowed: true });
  });

  it("refuses a Node Ready at the plug, though none of its NotReady was seen since the shutdown was asked", async () => {
    // NotReady and Ready again, both unseen: its Ready condition changed after the request, as a halt's would.
    const { w, ctx } = asked();
    w.cluster.setReady("worker-1", true, w.clock.now() - 5000);
    const verdict = await freshVerdict(ctx, w.machine("worker-1"), "cycle");
    assert.equal(verdict.allowed ? undefined : verdict.rule, "node-ready");
  });

  it("refuses a Node NotReady since before the shutdown was asked: not that shutdown's doing", async () => {
    const { w, ctx, askedAt } = asked();
    w.cluster.setReady("worker-1", false, askedAt - 60_000);
    const verdict = await freshVerdict(ctx, w.machine("worker-1"), "cycle");
    assert.equal(verdict.allowed ? undefined : verdict.rule, "registered-without-taint");
  });
});
