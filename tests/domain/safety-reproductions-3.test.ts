// Safety round 3b: sequences that broke the promise (a running machine never loses power by plugpool's hand),
// double-counted a machine or stranded it, replayed on the fakes. Each fails on the code as it was before its fix.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { World } from "../fakes/world.ts";
import { rejectsWith } from "../fakes/assertions.ts";

describe("safety reproductions, round 3b", () => {
  describe("3b-1: a machine plugpool switched on that registers under another name", () => {
    it("keeps its power while a Node of no machine, NotReady even, registered after the power-on exists", async () => {
      const w = new World();
      await w.pool.refresh();
      await w.pool.increaseSize("workers", 1);
      w.clock.advance(120_000);
      // A hostname typo: worker-1 booted and registered as wroker-1, not Ready yet.
      w.cluster.addNode({ name: "wroker-1", providerID: "k3s://wroker-1", ready: false });
      await w.pool.refresh();
      await rejectsWith(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), "unsafe", /wroker-1/);
      await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "unsafe", /wroker-1/);
      assert.ok(w.power.isOn(w.machine("worker-1").power));
      assert.equal(w.reporter.of("refused").at(-1)?.rule, "powered-outside");
      // Once that Node is gone, the power-on record licenses the cut again.
      w.cluster.removeNode("wroker-1");
      await w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]);
      assert.equal(w.power.isOn(w.machine("worker-1").power), false);
    });

    it("sees a Node of no machine that registers while the cut waits at the plug, and sends nothing", async () => {
      const w = new World();
      await w.pool.refresh();
      await w.pool.increaseSize("workers", 1);
      w.clock.advance(120_000);
      w.power.onCall = (c) => {
        if (c.op === "turnOff") w.cluster.addNode({ name: "wroker-1", providerID: "k3s://wroker-1", ready: false });
      };
      await rejectsWith(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), "unsafe", /wroker-1/);
      assert.equal(w.power.callsOf("turnOff").length, 1, "the cut was asked for");
      assert.ok(w.power.isOn(w.machine("worker-1").power), "and refused at the plug");
    });

    it("is cut when the only Node of no machine is older than the power-on, or when its power sensor reads standby", async () => {
      const w = new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"], sensors: ["worker-2"] }] });
      w.cluster.addNode({ name: "control-plane", providerID: "k3s://control-plane" });
      w.clock.advance(3_600_000);
      await w.pool.refresh();
      await w.pool.increaseSize("workers", 2);
      w.clock.advance(120_000);
      await w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]);
      assert.equal(w.power.isOn(w.machine("worker-1").power), false, "an old Node is no sign of worker-1");
      w.cluster.addNode({ name: "wroker-2", providerID: "k3s://wroker-2" });
      w.power.setWatts(w.machine("worker-2").power, 1);
      await w.pool.refresh();
      await w.pool.deleteNodes("workers", [w.fakeRef("worker-2")]);
      assert.equal(w.power.isOn(w.machine("worker-2").power), false, "standby draw: worker-2 is not running");
    });
  });
});
