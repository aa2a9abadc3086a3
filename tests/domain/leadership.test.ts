// One acting plugpool: a pool given a Leadership acts only while it says so, and asks it right before every
// irreversible act, so leadership lost between a check and the act still stops the act.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Arrival } from "../fakes/power-switch.ts";
import { FakeLeadership } from "../fakes/leadership.ts";
import { World, deletingWorker1, type WorldOptions } from "../fakes/world.ts";
import { rejectsWith, throwsWith } from "../fakes/assertions.ts";
import { actingOnly } from "../../src/domain/leadership.ts";

const OTHER = "plugpool-7f9c-b_1a2b3c";

/** Every switch command that reached a plug, as `op machine`. */
function arrivals(w: World): string[] {
  const seen: string[] = [];
  w.power.onArrival = (a: Arrival) => seen.push(`${a.op} ${a.control.key.replace(/^plug-/, "")}`);
  return seen;
}

/** worker-1's power-off driven up to the pass that cuts it (pod created, Node NotReady, grace over). */
async function atTheCut(options: WorldOptions): Promise<World> {
  const w = await deletingWorker1(options);
  await w.pool.reconcile();
  w.cluster.setReady("worker-1", false, w.clock.now());
  await w.pool.reconcile();
  w.clock.advance(120_000);
  return w;
}

describe("a pool with a Leadership", () => {
  describe("while passive", () => {
    it("answers every call of cluster-autoscaler's with not-leader naming the acting instance, and sends nothing", async () => {
      const leadership = new FakeLeadership(false, OTHER);
      const w = new World({ on: ["worker-1"], leadership });
      w.registerTainted("worker-1");
      const named = new RegExp(`the acting plugpool is ${OTHER}`);
      throwsWith(() => w.pool.nodeGroups(), "not-leader", named);
      throwsWith(() => w.pool.nodeGroupForNode(w.ref("worker-1")), "not-leader", named);
      throwsWith(() => w.pool.targetSize("workers"), "not-leader", named);
      throwsWith(() => w.pool.instances("workers"), "not-leader", named);
      throwsWith(() => w.pool.template("workers"), "not-leader", named);
      throwsWith(() => w.pool.gpuLabel(), "not-leader", named);
      throwsWith(() => w.pool.gpuTypes(), "not-leader", named);
      await rejectsWith(w.pool.refresh(), "not-leader", named);
      await rejectsWith(w.pool.increaseSize("workers", 1), "not-leader", named);
      await rejectsWith(w.pool.deleteNodes("workers", [w.ref("worker-1")]), "not-leader", named);
      await rejectsWith(w.pool.decreaseTargetSize("workers", -1), "not-leader", named);
      assert.deepEqual(w.power.calls, []);
      assert.deepEqual(w.cluster.calls, []);
    });

    it("says so when no instance is known to act", () => {
      const w = new World({ leadership: new FakeLeadership(false) });
      throwsWith(() => w.pool.nodeGroups(), "not-leader", /no other plugpool is known to act/);
    });

    it("runs no pass and takes no note of the cluster: a power-off recorded by the acting instance is left to it", async () => {
      const leadership = new FakeLeadership();
      const w = await deletingWorker1({ leadership });
      leadership.lose(OTHER);
      const before = { power: w.power.calls.length, cluster: w.cluster.calls.length };
      assert.equal(await w.pool.reconcile(), undefined);
      w.pool.clusterChanged();
      assert.deepEqual({ power: w.power.calls.length, cluster: w.cluster.calls.length }, before);
      assert.equal(w.cluster.powerOffPod("worker-1"), undefined);
    });
  });

  describe("when the leadership is lost between a check and the act", () => {
    it("refuses the cut at the plug, in the device's slot: the plug keeps its power", async () => {
      const leadership = new FakeLeadership();
      const w = await atTheCut({ leadership });
      const seen = arrivals(w);
      w.power.onCall = (call) => {
        if (call.op === "turnOff") leadership.lose(OTHER);
      };
      await w.pool.reconcile();
      assert.equal(w.power.callsOf("turnOff").length, 1, "the command was queued while acting");
      assert.deepEqual(seen, []);
      assert.ok(w.power.isOn(w.machine("worker-1").power));
    });

    it("cuts as before while it still acts at the plug", async () => {
      const leadership = new FakeLeadership();
      const w = await atTheCut({ leadership });
      const seen = arrivals(w);
      await w.pool.reconcile();
      assert.deepEqual(seen, ["turnOff worker-1"]);
    });

    it("refuses an OS shutdown through the control in its slot", async () => {
      const leadership = new FakeLeadership();
      const bmc: WorldOptions = {
        groups: [{ id: "workers", machines: ["worker-1", "worker-2"], shutsDown: ["worker-1"], backends: { "worker-1": "redfish" } }],
        leadership,
      };
      const w = await deletingWorker1(bmc);
      w.power.onCall = (call) => {
        if (call.op === "shutdown") leadership.lose(OTHER);
      };
      await w.pool.reconcile();
      assert.equal(w.power.callsOf("shutdown").length, 1);
      assert.deepEqual(w.power.shutdownsAccepted, []);
    });

    it("switches no plug on once IncreaseSize's record of the power-on went out after the leadership was lost, and ends that record", async () => {
      const leadership = new FakeLeadership();
      const w = new World({ leadership });
      await w.pool.refresh();
      const seen = arrivals(w);
      w.records.onWrite = (op) => {
        if (op === "recordPowerOn") leadership.lose(OTHER);
      };
      await assert.rejects(w.pool.increaseSize("workers", 1), /worker-1: switching on plug of worker-1: refused, this plugpool is not the acting one/);
      // Refused in the device's slot, right before the command: nothing reached a plug.
      assert.deepEqual(seen, []);
      // A record left standing would license the next instance to cut a machine switched on by hand.
      assert.equal(w.records.powerOn("worker-1"), undefined, "no licence left for the next instance");
    });

    it("creates no power-off pod in a pass that began while acting, once the leadership went during it", async () => {
      const leadership = new FakeLeadership();
      const w = await deletingWorker1({ leadership });
      w.cluster.onCall = (call) => {
        if (call.op === "markPowerOff") leadership.lose(OTHER);
      };
      await w.pool.reconcile();
      assert.equal(w.cluster.callsOf("markPowerOff").length, 2, "the pass committed the record, then lost the leadership");
      assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    });
  });

  describe("actingOnly()", () => {
    it("refuses every cluster write and record write but an end of a power-on while not acting, and lets reads through", async () => {
      const w = new World({ on: ["worker-1"] });
      w.registerTainted("worker-1");
      const leadership = new FakeLeadership(false, OTHER);
      const deps = actingOnly(
        { clock: w.clock, power: w.power, cluster: w.cluster, lookup: w.cluster, teardown: w.cluster, records: w.records, reporter: w.reporter },
        leadership,
      );
      const machine = w.machine("worker-1");
      await rejectsWith(deps.teardown.markPowerOff("worker-1", { startedAt: 1, pending: true }), "not-leader");
      await rejectsWith(deps.teardown.clearPowerOffMark("worker-1"), "not-leader");
      await rejectsWith(deps.teardown.createPowerOffPod(machine, "worker-1", 1), "not-leader");
      await rejectsWith(deps.teardown.deletePowerOffPod(machine), "not-leader");
      await rejectsWith(deps.teardown.deleteNode("worker-1", "uid-1"), "not-leader");
      await rejectsWith(deps.records.recordPowerOn("worker-1", { at: 1, why: "scale-up" }), "not-leader");
      throwsWith(() => {
        deps.records.setQuarantine("worker-1", { until: 2, failures: 1 });
      }, "not-leader");
      await rejectsWith(deps.power.turnOn(machine.power, { device: () => Promise.resolve(true) }), "not-leader");
      await rejectsWith(deps.power.turnOff(machine.power, () => Promise.resolve(true), { device: () => Promise.resolve(true) }), "not-leader");
      assert.deepEqual(w.cluster.calls, []);
      assert.ok(w.power.isOn(machine.power));
      assert.equal(deps.records.powerOn("worker-1"), undefined);
      assert.deepEqual(await deps.power.read(machine.power), { on: true });
    });
  });
});
