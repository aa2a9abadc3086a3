// DeleteNodes and DecreaseTargetSize: which machines a scale-down may power off, what it refuses, and the exact
// answers cluster-autoscaler gets (their messages name the call and every machine that failed).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION, POWER_OFF_ANNOTATION, isPlugpoolError } from "../../src/domain/index.ts";
import type { ErrorCode } from "../../src/domain/index.ts";
import { World, deletingWorker1 } from "../harness/fakes/world.ts";

const LIMIT = { maxPowerOnsPerInterval: 2, powerOnIntervalMs: 10_000 };

/** The promise rejects with a PlugpoolError of exactly this code and message. */
async function rejectsExactly(promise: Promise<unknown>, code: ErrorCode, message: string): Promise<void> {
  await assert.rejects(promise, (e: unknown) => {
    assert.ok(isPlugpoolError(e), `expected a PlugpoolError, got ${String(e)}`);
    assert.deepEqual({ code: e.code, message: e.message }, { code, message });
    return true;
  });
}

function cut(w: World): string[] {
  return w.power.callsOf("turnOff").map((c) => c.control.key.replace(/^plug-/, ""));
}

/** worker-1 and worker-2 registered with the ToBeDeleted taint and running, worker-3 off. */
async function twoTainted(options: ConstructorParameters<typeof World>[0] = {}): Promise<World> {
  const w = new World({ on: ["worker-1", "worker-2"], ...options });
  w.registerTainted("worker-1");
  w.registerTainted("worker-2");
  await w.pool.refresh();
  return w;
}

describe("Pool.deleteNodes(): refusals and their answers", () => {
  it("names the one node asked for, and reports the min-size refusal on it", async () => {
    const w = await twoTainted({ groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], minSize: 2 }] });
    const message = 'deleting worker-1 from node group "workers": target size 2 - 1 would go below the minimum size 2';
    await rejectsExactly(w.pool.deleteNodes("workers", [w.ref("worker-1")]), "unsafe", message);
    assert.deepEqual(w.reporter.of("refused"), [{ type: "refused", machine: "worker-1", rule: "min-size", detail: message }]);
    assert.deepEqual(w.cluster.calls, []);
    assert.equal(w.pool.targetSize("workers"), 2);
  });

  it("counts the nodes asked for when there are several, naming the first in the refusal", async () => {
    const w = await twoTainted({ groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], minSize: 1 }] });
    const message = 'deleting 2 nodes from node group "workers": target size 2 - 2 would go below the minimum size 1';
    await rejectsExactly(w.pool.deleteNodes("workers", [w.ref("worker-2"), w.ref("worker-1")]), "unsafe", message);
    assert.deepEqual(w.reporter.of("refused"), [{ type: "refused", machine: "worker-2", rule: "min-size", detail: message }]);
  });

  it("refuses an empty call on a group already below its minimum size, naming no machine", async () => {
    const w = new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"], minSize: 1 }] });
    await w.pool.refresh();
    await rejectsExactly(
      w.pool.deleteNodes("workers", []),
      "unsafe",
      'deleting 0 nodes from node group "workers": target size 0 - 0 would go below the minimum size 1',
    );
    assert.deepEqual(w.reporter.of("refused"), []);
  });

  it("does not count a machine already being deleted towards the minimum size again", async () => {
    const w = new World({ on: ["worker-1", "worker-2", "worker-3"], groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], minSize: 1 }] });
    for (const name of ["worker-1", "worker-2", "worker-3"]) w.registerTainted(name);
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    assert.equal(w.pool.targetSize("workers"), 2);
    // 2 - 1 (worker-2 only) leaves the minimum.
    await w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]);
    assert.equal(w.pool.targetSize("workers"), 1);
    assert.deepEqual(
      w.reporter.of("power-off-started").map((e) => e.machine),
      ["worker-1", "worker-2"],
    );
    assert.deepEqual(w.reporter.of("refused"), []);
  });

  it("does not count a machine that is no instance towards the minimum size", async () => {
    const w = await twoTainted({ groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], minSize: 1 }] });
    await w.pool.deleteNodes("workers", [w.ref("worker-1"), w.fakeRef("worker-3")]);
    assert.equal(w.pool.targetSize("workers"), 1);
    assert.deepEqual(
      w.reporter.of("power-off-started").map((e) => e.machine),
      ["worker-1"],
    );
    assert.deepEqual(cut(w), []);
  });

  it("reports a held machine's refusal under the held rule", async () => {
    const w = await twoTainted();
    w.cluster.annotate("worker-2", HOLD_ANNOTATION, "maintenance");
    const message = 'deleting 2 nodes from node group "workers": worker-2 is held';
    await rejectsExactly(w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]), "unsafe", message);
    assert.deepEqual(w.reporter.of("refused"), [{ type: "refused", machine: "worker-2", rule: "held", detail: message }]);
    assert.deepEqual(w.cluster.calls, []);
  });

  it("leaves a power-off under way alone, even once its Node lost the taint, and starts no second one", async () => {
    const w = await deletingWorker1();
    w.cluster.untaint("worker-1");
    w.cluster.annotate("worker-1", HOLD_ANNOTATION, "maintenance");
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    assert.deepEqual(w.cluster.calls, [{ op: "markPowerOff", target: "worker-1" }]);
    assert.equal(w.reporter.of("power-off-started").length, 1);
    assert.deepEqual(w.reporter.of("refused"), []);
  });
});

describe("Pool.deleteNodes(): a call that fails leaves nothing behind", () => {
  it("answers cluster-refused naming every node whose power-off could not be recorded, and undoes every record", async () => {
    const w = await twoTainted();
    w.cluster.failNext("markPowerOff");
    w.cluster.failNext("markPowerOff");
    await rejectsExactly(
      w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]),
      "cluster-refused",
      'deleting 2 nodes from node group "workers": ' +
        "worker-1: recording the power-off: markPowerOff: the apiserver said no; " +
        "worker-2: recording the power-off: markPowerOff: the apiserver said no",
    );
    assert.deepEqual(w.reporter.of("power-off-started"), []);
    await w.drive();
    assert.deepEqual(w.reporter.of("power-off-aborted"), [
      { type: "power-off-aborted", machine: "worker-1", reason: 'deleting 2 nodes from node group "workers" failed' },
      { type: "power-off-aborted", machine: "worker-2", reason: 'deleting 2 nodes from node group "workers" failed' },
    ]);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.ok(w.power.isOn(w.machine("worker-2").power));
    assert.equal(w.pool.targetSize("workers"), 2);
  });

  it("answers unsafe for a queued machine that registered while the call's records were written", async () => {
    const w = new World({ on: ["worker-1"], scaleUp: { ...LIMIT, maxPowerOnsPerInterval: 1 } });
    w.clock.advance(LIMIT.powerOnIntervalMs);
    w.registerTainted("worker-1");
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 2);
    // worker-2 switched on, worker-3 queued (plugpool switched nothing on for it).
    assert.deepEqual(
      w.power.callsOf("turnOn").map((c) => c.control.key),
      ["plug-worker-2"],
    );
    w.cluster.onCall = (c) => {
      if (c.op === "markPowerOff") w.register("worker-3");
    };
    await rejectsExactly(
      w.pool.deleteNodes("workers", [w.ref("worker-1"), w.fakeRef("worker-3")]),
      "unsafe",
      'deleting 2 nodes from node group "workers": worker-3 registered meanwhile and keeps its power',
    );
    assert.deepEqual(w.reporter.of("power-off-started"), []);
    assert.deepEqual(cut(w), []);
  });

  it("succeeds, leaving it alone, when a machine that was no instance registers while the call's records are written", async () => {
    const w = new World({ on: ["worker-1"] });
    w.registerTainted("worker-1");
    await w.pool.refresh();
    w.cluster.onCall = (c) => {
      if (c.op === "markPowerOff") w.register("worker-3");
    };
    await w.pool.deleteNodes("workers", [w.ref("worker-1"), w.fakeRef("worker-3")]);
    assert.deepEqual(
      w.reporter.of("power-off-started").map((e) => e.machine),
      ["worker-1"],
    );
    assert.deepEqual(cut(w), []);
    assert.deepEqual(
      w.pool.instances("workers").map((i) => [i.id, i.state]),
      [
        ["k3s://worker-1", "deleting"],
        ["k3s://worker-3", "running"],
      ],
    );
  });

  it("answers plug-unreachable when the switch-off of an unregistered instance was not confirmed", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.power.loseNextAnswer("turnOff");
    await rejectsExactly(
      w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]),
      "plug-unreachable",
      'deleting k3s://worker-1 from node group "workers": worker-1: the switch-off was not confirmed (the plug may be off): ' +
        "turnOff of plug of worker-1: sent, but its answer was lost",
    );
    assert.deepEqual(cut(w), ["worker-1"]);
    assert.deepEqual(w.reporter.of("plug-off"), []);
  });

  it("leaves the record of a machine whose power-off never started to the runner's undo when the call breaks off", async () => {
    const w = await twoTainted();
    // Reporting worker-1's start throws: worker-2's power-off, recorded as pending, is never started.
    w.reporter.onReport = (e) => {
      if (e.type === "power-off-started" && e.machine === "worker-1") throw new Error("the reporter broke");
    };
    await assert.rejects(w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]), /the reporter broke/);
    w.reporter.onReport = undefined;
    assert.match(w.cluster.nodeNamed("worker-2")?.annotations[POWER_OFF_ANNOTATION] ?? "", /;pending$/);
    await w.drive();
    assert.deepEqual(w.reporter.of("power-off-aborted"), [
      { type: "power-off-aborted", machine: "worker-2", reason: "its DeleteNodes did not succeed" },
    ]);
    assert.equal(w.cluster.nodeNamed("worker-2")?.annotations[POWER_OFF_ANNOTATION], undefined);
    assert.ok(w.power.isOn(w.machine("worker-2").power));
  });

  it("answers internal, naming the call, when a port throws something that is not an Error", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    // The machine registers as its plug is asked to cut: the plug refuses, and reporting that refusal throws.
    w.power.onCall = (c) => {
      if (c.op === "turnOff") w.register("worker-1");
    };
    w.reporter.onReport = (e) => {
      if (e.type === "refused") throw "the reporter broke"; // eslint-disable-line @typescript-eslint/only-throw-error
    };
    await rejectsExactly(
      w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]),
      "internal",
      'deleting k3s://worker-1 from node group "workers": the reporter broke',
    );
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });
});

describe("Pool.decreaseTargetSize(): answers and choices", () => {
  it("rejects a positive delta, telling the decrease as cluster-autoscaler asked it", async () => {
    const w = new World();
    await rejectsExactly(
      w.pool.decreaseTargetSize("workers", 2),
      "invalid-argument",
      'decreasing the target size of node group "workers" by -2: delta must be a negative integer, got 2',
    );
    await rejectsExactly(
      w.pool.decreaseTargetSize("workers", -1.5),
      "invalid-argument",
      'decreasing the target size of node group "workers" by 1.5: delta must be a negative integer, got -1.5',
    );
  });

  it("says how many unregistered instances exist when asked for more", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    await rejectsExactly(
      w.pool.decreaseTargetSize("workers", -2),
      "invalid-argument",
      'decreasing the target size of node group "workers" by 2: only 1 unregistered instances exist; registered nodes are never removed this way',
    );
    assert.deepEqual(cut(w), []);
  });

  it("takes a queued instance before any switched-on one, and switches nothing off for it", async () => {
    const w = new World({ scaleUp: LIMIT });
    w.clock.advance(LIMIT.powerOnIntervalMs);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 3);
    await w.pool.decreaseTargetSize("workers", -1);
    assert.deepEqual(cut(w), []);
    assert.deepEqual(
      w.pool.instances("workers").map((i) => i.id),
      ["k3s://worker-1", "k3s://worker-2"],
    );
    assert.equal(await w.pool.reconcile(), undefined);
    assert.deepEqual(
      w.power.callsOf("turnOn").map((c) => c.control.key),
      ["plug-worker-1", "plug-worker-2"],
    );
  });

  it("takes the latest powered first even when it comes earlier in config order", async () => {
    const w = new World({ on: ["worker-2"], poweredByPlugpool: ["worker-2"] });
    await w.pool.refresh();
    w.clock.advance(1000);
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(
      w.pool.instances("workers").map((i) => [i.id, i.state]),
      [
        ["k3s://worker-1", "creating"],
        ["k3s://worker-2", "creating"],
      ],
    );
    await w.pool.decreaseTargetSize("workers", -1);
    assert.deepEqual(cut(w), ["worker-1"]);
    assert.deepEqual(
      w.pool.instances("workers").map((i) => i.id),
      ["k3s://worker-2"],
    );
  });

  it("does not count a queued machine that a Node under another providerID claims", async () => {
    const w = new World({ scaleUp: LIMIT });
    w.clock.advance(LIMIT.powerOnIntervalMs);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 3);
    w.cluster.addNode({ name: "worker-3", providerID: "aws:///i-3" });
    // Still a creating instance (queued), but registered in the safety sense: the switched-on worker-2 goes instead.
    assert.equal(w.pool.targetSize("workers"), 3);
    await w.pool.decreaseTargetSize("workers", -1);
    assert.deepEqual(cut(w), ["worker-2"]);
  });

  it("does not count a machine whose plug-on is still in flight after its scale-up answered", async () => {
    const w = new World();
    await w.pool.refresh();
    const plug = w.machine("worker-1").power;
    w.power.setFault(plug, "hang");
    const controller = new AbortController();
    w.power.onCall = (c) => {
      if (c.op === "turnOn") controller.abort();
    };
    // Answered with the switch-on counted as underway.
    await w.pool.increaseSize("workers", 1, { signal: controller.signal });
    w.power.onCall = undefined;
    w.power.setFault(plug, undefined);
    assert.deepEqual(
      w.pool.instances("workers").map((i) => [i.id, i.state]),
      [["k3s://worker-1", "creating"]],
    );
    await rejectsExactly(
      w.pool.decreaseTargetSize("workers", -1),
      "invalid-argument",
      'decreasing the target size of node group "workers" by 1: only 0 unregistered instances exist; registered nodes are never removed this way',
    );
    assert.deepEqual(cut(w), []);
  });

  it("answers plug-unreachable naming every plug that failed", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 2);
    w.power.failNext("turnOff");
    w.power.failNext("turnOff");
    await rejectsExactly(
      w.pool.decreaseTargetSize("workers", -2),
      "plug-unreachable",
      'decreasing the target size of node group "workers" by 2: worker-2: turnOff of (next): timed out; worker-1: turnOff of (next): timed out',
    );
    assert.deepEqual(cut(w), ["worker-2", "worker-1"]);
    assert.equal(w.pool.targetSize("workers"), 2);
  });

  it("names both a machine refused at its plug and one that failed", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 2);
    w.power.failNext("turnOff");
    w.power.onCall = (c) => {
      if (c.op === "turnOff" && c.control.key === "plug-worker-1") w.register("worker-1");
    };
    const detail = "worker-1 registered meanwhile (node worker-1) and keeps its power";
    await rejectsExactly(
      w.pool.decreaseTargetSize("workers", -2),
      "unsafe",
      `decreasing the target size of node group "workers" by 2: ${detail}; worker-2: turnOff of (next): timed out`,
    );
    assert.deepEqual(w.reporter.of("refused"), [{ type: "refused", machine: "worker-1", rule: "registered-without-taint", detail }]);
    assert.deepEqual(cut(w), ["worker-2", "worker-1"]);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });
});
