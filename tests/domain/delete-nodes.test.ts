import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION, POWER_OFF_ANNOTATION } from "../../src/domain/index.ts";
import { World } from "../harness/fakes/world.ts";
import { rejectsWith } from "../harness/fakes/assertions.ts";

/** worker-1 and worker-2 registered and running, worker-3 off. */
async function running(options: ConstructorParameters<typeof World>[0] = {}): Promise<World> {
  const w = new World({ on: ["worker-1", "worker-2"], ...options });
  w.register("worker-1");
  w.register("worker-2");
  await w.pool.refresh();
  return w;
}

describe("Pool.deleteNodes()", () => {
  describe("for a registered node carrying the ToBeDeleted taint", () => {
    it("starts a power-off and returns before any of it has happened", async () => {
      const w = await running();
      w.cluster.taint("worker-1");
      await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
      assert.deepEqual(
        w.pool.instances("workers").map((i) => i.state),
        ["deleting", "running"],
      );
      assert.equal(w.pool.targetSize("workers"), 1);
      // Recorded on the Node as pending (a restart undoes it until the power-off commits it), and nothing more yet.
      assert.deepEqual(w.cluster.calls, [{ op: "markPowerOff", target: "worker-1" }]);
      assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], `${w.clock.now()};pending`);
      assert.equal(w.power.callsOf("turnOff").length, 0);
      assert.equal(w.wakes, 1);
      assert.deepEqual(w.reporter.of("power-off-started"), [
        { type: "power-off-started", machine: "worker-1", node: "worker-1", resumed: false },
      ]);
    });

    it("starts nothing and answers cluster-refused when the power-off cannot be recorded", async () => {
      const w = await running();
      w.cluster.taint("worker-1");
      w.cluster.failNext("markPowerOff");
      await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1")]), "cluster-refused", /worker-1/);
      assert.equal(w.pool.targetSize("workers"), 2);
      assert.equal(w.reporter.of("power-off-started").length, 0);
    });

    it("starts one power-off for concurrent and repeated calls", async () => {
      const w = await running();
      w.cluster.taint("worker-1");
      await Promise.all([
        w.pool.deleteNodes("workers", [w.ref("worker-1")]),
        w.pool.deleteNodes("workers", [w.ref("worker-1")]),
      ]);
      await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
      assert.equal(w.reporter.of("power-off-started").length, 1);
      assert.equal(w.pool.targetSize("workers"), 1);
    });
  });

  describe("refusals (all-or-nothing)", () => {
    it("refuses a registered node without the taint and leaves the others alone", async () => {
      const w = await running();
      w.cluster.taint("worker-1");
      await rejectsWith(
        w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]),
        "unsafe",
        /worker-2 is registered without the ToBeDeletedByClusterAutoscaler taint/,
      );
      assert.equal(w.reporter.of("power-off-started").length, 0);
      assert.equal(w.pool.targetSize("workers"), 2);
      assert.equal(w.reporter.of("refused")[0]?.rule, "registered-without-taint");
    });

    it("takes a taint written just before the call, which the view had not shown yet, once the view has caught up", async () => {
      const w = await running({ lagging: true });
      w.view?.sync();
      w.cluster.catchUpView = () => w.view?.sync();
      w.cluster.taint("worker-1");
      assert.equal(w.view?.nodeNamed("worker-1")?.taints.length, 0, "the view lags the taint");
      await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
      assert.deepEqual(w.cluster.calls.map((c) => c.op), ["viewCaughtUp", "markPowerOff"]);
      assert.equal(w.reporter.of("refused").length, 0);
      assert.equal(w.reporter.of("power-off-started").length, 1);
    });

    it("catches up for one Node of several whose taint the view has not shown yet", async () => {
      const w = await running({ lagging: true });
      w.cluster.taint("worker-1");
      w.view?.sync();
      w.cluster.catchUpView = () => w.view?.sync();
      w.cluster.taint("worker-2");
      await w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]);
      assert.equal(w.cluster.callsOf("viewCaughtUp").length, 1);
      assert.equal(w.reporter.of("power-off-started").length, 2);
    });

    it("refuses on the caught-up view a Node still without the taint, and on the view as it is when it cannot catch up", async () => {
      const w = await running({ lagging: true });
      w.view?.sync();
      w.cluster.catchUpView = () => w.view?.sync();
      await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1")]), "unsafe", /worker-1 is registered without the ToBeDeletedByClusterAutoscaler taint/);
      w.cluster.taint("worker-1");
      w.cluster.failNext("viewCaughtUp");
      await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1")]), "unsafe", /worker-1 is registered without the ToBeDeletedByClusterAutoscaler taint/);
      assert.equal(w.cluster.callsOf("markPowerOff").length, 0);
      assert.equal(w.reporter.of("refused").length, 2);
    });

    it("asks no catch-up of the view when every Node shows the taint", async () => {
      const w = await running();
      w.cluster.taint("worker-1");
      await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
      assert.equal(w.cluster.callsOf("viewCaughtUp").length, 0);
    });

    it("refuses a node carrying the machine's name under a foreign providerID without the taint", async () => {
      const w = new World({ on: ["worker-1"] });
      w.cluster.addNode({ name: "worker-1", providerID: "aws:///i-1" });
      await w.pool.refresh();
      await rejectsWith(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), "unsafe");
      assert.equal(w.power.callsOf("turnOff").length, 0);
    });

    it("refuses a held machine, by configuration or by annotation", async () => {
      const w = await running({ groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], hold: ["worker-2"] }] });
      w.cluster.taint("worker-1");
      w.cluster.taint("worker-2");
      await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-2")]), "unsafe", /worker-2 is held/);
      w.cluster.annotate("worker-1", HOLD_ANNOTATION, "maintenance");
      await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1")]), "unsafe", /worker-1 is held/);
      assert.equal(w.reporter.of("power-off-started").length, 0);
    });

    it("refuses to go below the minimum size", async () => {
      const w = await running({ groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], minSize: 1 }] });
      w.cluster.taint("worker-1");
      w.cluster.taint("worker-2");
      await rejectsWith(
        w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]),
        "unsafe",
        /target size 2 - 2 would go below the minimum size 1/,
      );
      await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
      // worker-1 is already deleting: asking again does not count it twice.
      await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1"), w.ref("worker-2")]), "unsafe");
      assert.equal(w.pool.targetSize("workers"), 1);
    });

    it("answers not found for a node that is not a machine of the group", async () => {
      const w = new World({ groups: [{ id: "a", machines: ["a-1"] }, { id: "b", machines: ["b-1"] }] });
      await rejectsWith(w.pool.deleteNodes("a", [w.ref("b-1")]), "instance-not-found", /b-1/);
      await rejectsWith(w.pool.deleteNodes("a", [{ name: "cp", providerID: "" }]), "instance-not-found");
    });

    it("refuses a machine whose power-off is being aborted", async () => {
      const w = await running();
      w.cluster.taint("worker-1");
      await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
      await w.pool.reconcile();
      w.cluster.untaint("worker-1");
      await w.pool.reconcile();
      w.cluster.taint("worker-1");
      await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1")]), "unsafe", /being aborted/);
    });
  });

  describe("for an unregistered (creating) instance", () => {
    it("switches its plug off at once and drops it from the target", async () => {
      const w = new World();
      await w.pool.refresh();
      await w.pool.increaseSize("workers", 2);
      await w.pool.deleteNodes("workers", [w.fakeRef("worker-2")]);
      assert.equal(w.power.isOn(w.machine("worker-2").power), false);
      assert.deepEqual(w.pool.instances("workers").map((i) => i.id), ["k3s://worker-1"]);
      assert.deepEqual(w.reporter.of("plug-off"), [{ type: "plug-off", machine: "worker-2", reason: "unregistered" }]);
    });

    it("spares every machine that registered meanwhile, tainted or not, and starts no power-off from a failed call", async () => {
      const w = new World();
      await w.pool.refresh();
      await w.pool.increaseSize("workers", 3);
      w.power.onCall = (c) => {
        if (c.op === "turnOff" && c.control.key.includes("worker-1")) {
          w.registerTainted("worker-2");
          w.register("worker-3");
        }
      };
      await rejectsWith(
        w.pool.deleteNodes("workers", ["worker-1", "worker-2", "worker-3"].map((n) => w.fakeRef(n))),
        "unsafe",
        /worker-3 registered meanwhile and keeps its power/,
      );
      assert.deepEqual(w.power.callsOf("turnOff").map((c) => c.control.key), ["plug-worker-1"]);
      assert.deepEqual(w.reporter.of("power-off-started").map((e) => e.machine), []);
      assert.ok(w.power.isOn(w.machine("worker-2").power));
      assert.ok(w.power.isOn(w.machine("worker-3").power));
    });

    it("answers plug-unreachable when the plug fails, and the instance stays", async () => {
      const w = new World();
      await w.pool.refresh();
      await w.pool.increaseSize("workers", 1);
      w.power.failNext("turnOff");
      await rejectsWith(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), "plug-unreachable", /worker-1/);
      assert.equal(w.pool.targetSize("workers"), 1);
    });

    it("does nothing for a machine that is no instance", async () => {
      const w = new World();
      await w.pool.refresh();
      await w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]);
      assert.equal(w.power.callsOf("turnOff").length, 0);
    });
  });
});
