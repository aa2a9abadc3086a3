import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { World } from "../harness/fakes/world.ts";
import { rejectsWith } from "../harness/fakes/assertions.ts";

const FOUR = { groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3", "worker-4"] }] };

function cut(w: World): string[] {
  return w.power.callsOf("turnOff").map((c) => c.control.key.replace(/^plug-/, ""));
}

describe("Pool.decreaseTargetSize()", () => {
  it("rejects a delta that is not negative", async () => {
    const w = new World();
    await rejectsWith(w.pool.decreaseTargetSize("workers", 0), "invalid-argument");
    await rejectsWith(w.pool.decreaseTargetSize("workers", 1), "invalid-argument");
  });

  it("switches off the latest powered unregistered instances first", async () => {
    const w = new World(FOUR);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.clock.advance(1000);
    await w.pool.increaseSize("workers", 1);
    w.clock.advance(1000);
    await w.pool.increaseSize("workers", 1);
    await w.pool.decreaseTargetSize("workers", -2);
    assert.deepEqual(cut(w), ["worker-3", "worker-2"]);
    assert.equal(w.pool.targetSize("workers"), 1);
  });

  it("breaks ties by taking the later machine in config order first", async () => {
    const w = new World(FOUR);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 3);
    await w.pool.decreaseTargetSize("workers", -1);
    assert.deepEqual(cut(w), ["worker-3"]);
  });

  it("never touches a registered node, and changes nothing when too few unregistered instances exist", async () => {
    const w = new World({ on: ["worker-1"] });
    w.register("worker-1");
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    await rejectsWith(w.pool.decreaseTargetSize("workers", -2), "invalid-argument", /only 1 unregistered/);
    assert.deepEqual(cut(w), []);
    await w.pool.decreaseTargetSize("workers", -1);
    assert.deepEqual(cut(w), ["worker-2"]);
    assert.deepEqual(
      w.pool.instances("workers").map((i) => i.state),
      ["running"],
    );
  });

  it("does not count a machine registered under a foreign providerID as unregistered", async () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    w.cluster.addNode({ name: "worker-1", providerID: "aws:///i-1" });
    await w.pool.refresh();
    // Registered in the safety sense (its name), so neither an instance to remove nor one to cut.
    assert.equal(w.pool.instances("workers")[0], undefined);
    await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "invalid-argument");
    assert.deepEqual(cut(w), []);
  });

  it("spares one that registered meanwhile and names it in the error", async () => {
    const w = new World(FOUR);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 2);
    w.power.onCall = (c) => {
      if (c.op === "turnOff") w.register("worker-1");
    };
    await rejectsWith(w.pool.decreaseTargetSize("workers", -2), "unsafe", /worker-1 registered meanwhile and keeps its power/);
    assert.deepEqual(cut(w), ["worker-2"]);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("spares one that registered meanwhile even with the ToBeDeleted taint", async () => {
    const w = new World(FOUR);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 2);
    w.power.onCall = (c) => {
      if (c.op === "turnOff") w.registerTainted("worker-1");
    };
    await rejectsWith(w.pool.decreaseTargetSize("workers", -2), "unsafe", /worker-1 registered meanwhile and keeps its power/);
    assert.deepEqual(cut(w), ["worker-2"]);
    assert.equal(w.reporter.of("power-off-started").length, 0);
  });

  it("is bounded by the call's signal when a plug never answers", async () => {
    const w = new World(FOUR);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.power.setFault(w.machine("worker-1").power, "hang");
    const controller = new AbortController();
    w.power.onCall = () => {
      controller.abort();
    };
    await rejectsWith(w.pool.decreaseTargetSize("workers", -1, { signal: controller.signal }), "cancelled");
  });

  it("answers plug-unreachable naming a plug that failed", async () => {
    const w = new World(FOUR);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.power.failNext("turnOff");
    await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "plug-unreachable", /worker-1/);
    assert.equal(w.pool.targetSize("workers"), 1);
  });
});
