import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION } from "../../src/domain/index.ts";
import { World } from "../harness/fakes/world.ts";
import type { WorldOptions } from "../harness/fakes/world.ts";

const LIMIT = { maxPowerOnsPerInterval: 2, powerOnIntervalMs: 10_000 };
const FOUR = { groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3", "worker-4"] }], scaleUp: LIMIT };

function turnedOn(w: World): string[] {
  return w.power.callsOf("turnOn").map((c) => c.control.key.replace(/^plug-/, ""));
}

/** A world with the limit, plugs read, started one interval ago, and `delta` machines asked for. */
async function asked(delta: number, options: WorldOptions = FOUR): Promise<World> {
  const w = new World(options);
  w.clock.advance(LIMIT.powerOnIntervalMs);
  await w.pool.refresh();
  await w.pool.increaseSize("workers", delta);
  return w;
}

describe("inrush protection (scaleUp.maxPowerOnsPerInterval)", () => {
  describe("Pool.increaseSize()", () => {
    it("switches on as many as the limit allows at once and queues the rest as creating instances", async () => {
      const w = await asked(3);
      assert.deepEqual(turnedOn(w), ["worker-1", "worker-2"]);
      assert.equal(w.pool.targetSize("workers"), 3);
      assert.deepEqual(
        w.pool.instances("workers").map((i) => [i.id, i.state, i.error]),
        [
          ["k3s://worker-1", "creating", undefined],
          ["k3s://worker-2", "creating", undefined],
          ["k3s://worker-3", "creating", undefined],
        ],
      );
      assert.deepEqual(w.reporter.of("power-on-queued"), [{ type: "power-on-queued", machine: "worker-3", group: "workers" }]);
      assert.equal(w.wakes, 1);
    });

    it("counts the limit over a sliding window across the whole pool", async () => {
      const w = await asked(1, {
        groups: [
          { id: "workers", machines: ["worker-1", "worker-2"] },
          { id: "gpu", machines: ["gpu-1", "gpu-2"] },
        ],
        scaleUp: LIMIT,
      });
      w.clock.advance(6_000);
      await w.pool.increaseSize("gpu", 2);
      assert.deepEqual(turnedOn(w), ["worker-1", "gpu-1"]);
      assert.equal(await w.pool.reconcile(), 4_000);
      w.clock.advance(4_000);
      await w.pool.reconcile();
      assert.deepEqual(turnedOn(w), ["worker-1", "gpu-1", "gpu-2"]);
    });

    it("keeps the limit when two groups scale up at the same time", async () => {
      const w = new World({
        groups: [
          { id: "workers", machines: ["worker-1", "worker-2"] },
          { id: "gpu", machines: ["gpu-1", "gpu-2"] },
        ],
        scaleUp: { maxPowerOnsPerInterval: 3, powerOnIntervalMs: 10_000 },
      });
      w.clock.advance(10_000);
      await w.pool.refresh();
      await Promise.all([w.pool.increaseSize("workers", 2), w.pool.increaseSize("gpu", 2)]);
      assert.equal(w.power.callsOf("turnOn").length, 3);
      assert.equal(w.pool.targetSize("workers") + w.pool.targetSize("gpu"), 4);
    });

    it("waits one interval after the pool starts, so a restart cannot exceed the limit", async () => {
      const w = await asked(2);
      w.clock.advance(4_000);
      w.restart();
      await w.pool.refresh();
      await w.pool.increaseSize("workers", 1);
      assert.equal(turnedOn(w).length, 2);
      assert.equal(await w.pool.reconcile(), 10_000);
      w.clock.advance(10_000);
      await w.pool.reconcile();
      assert.deepEqual(turnedOn(w), ["worker-1", "worker-2", "worker-3"]);
    });

    it("switches everything on at once without a limit (the default)", async () => {
      const w = await asked(4, { groups: FOUR.groups });
      assert.equal(turnedOn(w).length, 4);
      assert.equal(w.reporter.of("power-on-queued").length, 0);
      assert.equal(w.wakes, 0);
    });
  });

  describe("Pool.reconcile() with machines queued", () => {
    it("switches them on in queue order as slots free, answering the wait until the next slot", async () => {
      const w = await asked(4);
      assert.equal(await w.pool.reconcile(), 10_000);
      assert.equal(turnedOn(w).length, 2);
      w.clock.advance(10_000);
      assert.equal(await w.pool.reconcile(), undefined);
      assert.deepEqual(turnedOn(w), ["worker-1", "worker-2", "worker-3", "worker-4"]);
      assert.deepEqual(
        w.pool.instances("workers").map((i) => i.state),
        ["creating", "creating", "creating", "creating"],
      );
      assert.deepEqual(
        w.reporter.of("powered-on").map((e) => e.machine),
        ["worker-1", "worker-2", "worker-3", "worker-4"],
      );
    });

    it("never switches on a machine whose power-off pod appeared: the power-off is resumed and the queue entry dropped", async () => {
      const w = await asked(3);
      w.cluster.addPod({ machine: "worker-3", nodeName: "worker-3", startedAt: 0, phase: "Succeeded", terminating: false });
      w.clock.advance(10_000);
      await w.drive();
      assert.equal(turnedOn(w).length, 2);
      assert.deepEqual(
        w.reporter.of("power-off-started").map((e) => [e.machine, e.resumed]),
        [["worker-3", true]],
      );
      assert.equal(w.cluster.pods().length, 0);
      assert.equal(w.pool.targetSize("workers"), 2);
    });

    it("drops a machine that came up by other means and registered, without a plug call; it runs", async () => {
      const w = await asked(3);
      w.power.set(w.machine("worker-3").power, true);
      w.register("worker-3");
      await w.pool.refresh();
      w.clock.advance(10_000);
      assert.equal(await w.pool.reconcile(), undefined);
      assert.equal(turnedOn(w).length, 2);
      assert.equal(w.pool.instances("workers")[2]?.state, "running");
    });

    it("drops a machine that became held, reporting the refusal", async () => {
      const w = await asked(3);
      w.cluster.addNode({ name: "worker-3", providerID: "other://worker-3", annotations: { [HOLD_ANNOTATION]: "true" } });
      w.clock.advance(10_000);
      await w.pool.reconcile();
      assert.equal(turnedOn(w).length, 2);
      assert.deepEqual(
        w.reporter.of("refused").map((e) => [e.machine, e.rule]),
        [["worker-3", "held"]],
      );
      assert.equal(w.pool.targetSize("workers"), 2);
    });

    it("drops a queued machine whose plug someone else switched on: not plugpool's to count or cut", async () => {
      const w = await asked(3);
      w.power.set(w.machine("worker-3").power, true);
      await w.pool.refresh();
      w.clock.advance(10_000);
      await w.pool.reconcile();
      assert.equal(turnedOn(w).length, 2);
      assert.equal(w.pool.targetSize("workers"), 2);
      await w.pool.refresh();
      assert.deepEqual(w.pool.poweredOutside(), ["worker-3"]);
    });

    it("turns a failed queued plug-on into a creating instance with an error, so cluster-autoscaler cleans up", async () => {
      const w = await asked(3);
      w.clock.advance(10_000);
      w.power.failNext("turnOn");
      assert.equal(await w.pool.reconcile(), undefined);
      const failed = w.pool.instances("workers")[2];
      assert.equal(failed?.state, "creating");
      assert.equal(failed.error?.code, "plug-on-failed");
      assert.match(failed.error.message, /^switching on the plug of worker-3 failed: turnOn .*timed out$/);
      assert.equal(w.reporter.of("power-on-failed")[0]?.machine, "worker-3");
    });
  });

  describe("dropping queued machines", () => {
    it("DecreaseTargetSize takes queued machines first, latest queued first, with no plug call", async () => {
      const w = await asked(4);
      await w.pool.decreaseTargetSize("workers", -2);
      assert.equal(w.power.callsOf("turnOff").length, 0);
      assert.equal(w.pool.targetSize("workers"), 2);
      w.clock.advance(10_000);
      assert.equal(await w.pool.reconcile(), undefined);
      assert.deepEqual(turnedOn(w), ["worker-1", "worker-2"]);
    });

    it("DecreaseTargetSize drops only the latest queued one when one suffices", async () => {
      const w = await asked(4);
      await w.pool.decreaseTargetSize("workers", -1);
      w.clock.advance(10_000);
      await w.pool.reconcile();
      assert.deepEqual(turnedOn(w), ["worker-1", "worker-2", "worker-3"]);
    });

    it("DeleteNodes of a queued machine drops it from the queue with no plug call", async () => {
      const w = await asked(3);
      await w.pool.deleteNodes("workers", [w.fakeRef("worker-3")]);
      assert.equal(w.power.callsOf("turnOff").length, 0);
      assert.equal(w.pool.targetSize("workers"), 2);
      w.clock.advance(10_000);
      await w.pool.reconcile();
      assert.equal(turnedOn(w).length, 2);
      assert.equal(w.reporter.of("quarantined").length, 0);
    });
  });
});
