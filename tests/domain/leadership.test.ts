// One acting plugpool: a pool given a Leadership acts only while it says so, and asks it right before every
// irreversible act, so leadership lost between a check and the act still stops the act.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Arrival } from "../harness/fakes/power-switch.ts";
import { FakeLeadership } from "../harness/fakes/leadership.ts";
import { World, deletingWorker1, type WorldOptions } from "../harness/fakes/world.ts";
import { rejectsWith, throwsWith } from "../harness/fakes/assertions.ts";
import { actingCheck, actingGuard, actingOnly, poolThrough, whileActing } from "../../src/domain/leadership.ts";
import type { Pool, PoolDeps } from "../../src/domain/index.ts";

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

/** The pool's ports of `w`, as a pool is built over them. */
function depsOf(w: World): PoolDeps {
  return { clock: w.clock, power: w.power, cluster: w.cluster, lookup: w.cluster, teardown: w.cluster, records: w.records, reporter: w.reporter };
}

describe("actingGuard() and actingCheck()", () => {
  it("pass a refusal of the guard or check on as it is, without asking the leadership: the device is not blamed on a lost lease", async () => {
    const leadership = new FakeLeadership(false, OTHER);
    assert.equal(await actingGuard(leadership, "switching off plug of worker-1", () => Promise.resolve(false))(), false);
    assert.equal(await actingCheck(leadership, "switching on plug of worker-1", () => Promise.resolve(false))({ id: "a" }), false);
    assert.equal(leadership.asked, 0);
  });

  it("ask the leadership after an allowed guard or accepted check, and name the act in the refusal", async () => {
    const leadership = new FakeLeadership(false, OTHER);
    await rejectsWith(
      actingGuard(leadership, "switching off plug of worker-1", () => Promise.resolve(true))(),
      "not-leader",
      new RegExp(`^switching off plug of worker-1: refused, this plugpool is not the acting one \\(the acting plugpool is ${OTHER}\\)$`),
    );
    await rejectsWith(
      actingCheck(leadership, "switching on plug of worker-1", () => Promise.resolve(true))({ id: "a" }),
      "not-leader",
      /^switching on plug of worker-1: refused/,
    );
  });

  it("hand the call's options and the device's answer to the check they wrap", async () => {
    const leadership = new FakeLeadership();
    const signal = new AbortController().signal;
    const asked: unknown[] = [];
    assert.equal(await actingGuard(leadership, "x", (options) => (asked.push(options), Promise.resolve(true)))({ signal }), true);
    assert.equal(await actingCheck(leadership, "x", (seen, options) => (asked.push(seen, options), Promise.resolve(true)))({ id: "a" }, { signal }), true);
    assert.deepEqual(asked, [{ signal }, { id: "a" }, { signal }]);
    assert.equal(leadership.asked, 2);
  });
});

describe("actingOnly() names what it refused", () => {
  it("each cluster write, record write and switch command, in its refusal", async () => {
    const w = new World({
      groups: [{ id: "workers", machines: ["worker-1", "worker-2"], shutsDown: ["worker-1"], backends: { "worker-1": "redfish" } }],
      on: ["worker-1"],
    });
    const deps = actingOnly(depsOf(w), new FakeLeadership(false, OTHER));
    const machine = w.machine("worker-1");
    const yes = (): Promise<boolean> => Promise.resolve(true);
    await rejectsWith(deps.teardown.markPowerOff("worker-1", { startedAt: 1, pending: true }), "not-leader", /^recording the power-off on Node worker-1: refused/);
    await rejectsWith(deps.teardown.clearPowerOffMark("worker-1"), "not-leader", /^clearing the power-off record on Node worker-1: refused/);
    await rejectsWith(deps.teardown.createPowerOffPod(machine, "worker-1", 1), "not-leader", /^creating the power-off pod of worker-1: refused/);
    await rejectsWith(deps.teardown.deletePowerOffPod(machine), "not-leader", /^deleting the power-off pod of worker-1: refused/);
    await rejectsWith(deps.teardown.deleteNode("worker-1", "uid-1"), "not-leader", /^deleting Node worker-1: refused/);
    await rejectsWith(deps.records.recordPowerOn("worker-1", { at: 1, why: "scale-up" }), "not-leader", /^recording the power-on of worker-1: refused/);
    throwsWith(
      () => {
        deps.records.setQuarantine("worker-1", { until: 2, failures: 1 });
      },
      "not-leader",
      /^recording the quarantine of worker-1: refused/,
    );
    await rejectsWith(deps.records.recordDeviceIdentity("worker-1", "dev-1"), "not-leader", /^recording the device identity of worker-1: refused/);
    await rejectsWith(deps.records.stored("worker-1"), "not-leader", /^storing the records of worker-1: refused/);
    await rejectsWith(deps.power.turnOn(machine.power, { device: yes }), "not-leader", new RegExp(`^switching on ${machine.power.label}: refused`));
    await rejectsWith(deps.power.turnOff(machine.power, yes, { device: yes }), "not-leader", new RegExp(`^switching off ${machine.power.label}: refused`));
    assert.ok(deps.power.shutdown !== undefined);
    await rejectsWith(deps.power.shutdown(machine.power, yes, { device: yes }), "not-leader", new RegExp(`^shutting down through ${machine.power.label}: refused`));
    assert.deepEqual(w.cluster.calls, []);
    assert.equal(w.records.deviceIdentity("worker-1"), undefined);
    assert.equal(w.records.quarantine("worker-1"), undefined);
  });

  it("passes every act on to the port while acting, and the records' reads whatever the leadership", async () => {
    const w = new World({ on: ["worker-1"] });
    const leadership = new FakeLeadership();
    const deps = actingOnly(depsOf(w), leadership);
    deps.records.setQuarantine("worker-1", { until: 2, failures: 1 });
    await deps.records.recordDeviceIdentity("worker-1", "dev-1");
    w.records.stallWrites();
    deps.records.setQuarantine("worker-2", { until: 3, failures: 2 });
    w.records.resumeWrites();
    await deps.records.stored("worker-2");
    leadership.lose(OTHER);
    assert.deepEqual(deps.records.quarantine("worker-1"), { until: 2, failures: 1 });
    assert.deepEqual(deps.records.quarantine("worker-2"), { until: 3, failures: 2 });
    assert.equal(deps.records.deviceIdentity("worker-1"), "dev-1");
  });

  it("offers no shutdown when the switch has none", () => {
    const w = new World();
    const power = { read: w.power.read.bind(w.power), turnOn: w.power.turnOn.bind(w.power), turnOff: w.power.turnOff.bind(w.power) };
    const deps = actingOnly({ ...depsOf(w), power }, new FakeLeadership());
    assert.equal("shutdown" in deps.power, false);
  });
});

/**
 * A Pool that answers every call with its name and arguments, and notes them in `log`, so that a test sees which
 * pool a call reached.
 */
function recordingPool(tag: string, log: unknown[][] = []): Pool {
  return new Proxy({} as Pool, {
    get:
      (_, name) =>
      (...args: unknown[]) => {
        const call = [tag, String(name), ...args];
        log.push(call);
        return call;
      },
  });
}

describe("poolThrough()", () => {
  const calls = (pool: Pool): Record<string, () => unknown> => ({
    nodeGroups: () => pool.nodeGroups(),
    nodeGroupForNode: () => pool.nodeGroupForNode({ name: "n", providerID: "p" }),
    targetSize: () => pool.targetSize("g"),
    increaseSize: () => pool.increaseSize("g", 1),
    deleteNodes: () => pool.deleteNodes("g", []),
    decreaseTargetSize: () => pool.decreaseTargetSize("g", -1),
    instances: () => pool.instances("g"),
    template: () => pool.template("g"),
    gpuLabel: () => pool.gpuLabel(),
    gpuTypes: () => pool.gpuTypes(),
    refresh: () => pool.refresh(),
  });

  it("names each call of cluster-autoscaler's when it asks for the pool to hand it to", async () => {
    const asked: string[] = [];
    const pool = poolThrough(
      (what) => (asked.push(what), recordingPool("ca")),
      () => undefined,
      () => undefined,
    );
    for (const call of Object.values(calls(pool))) await call();
    assert.deepEqual(asked, [
      "listing node groups",
      "finding a node's group",
      "reading a target size",
      "increasing a group's size",
      "deleting nodes",
      "decreasing a target size",
      "listing instances",
      "building a template node",
      "reading the GPU label",
      "listing GPU types",
      "refreshing",
    ]);
  });

  it("hands each call to its own pool with its arguments, and answers with that pool's answer", async () => {
    const log: unknown[][] = [];
    const pool = poolThrough(
      () => recordingPool("ca", log),
      () => recordingPool("work", log),
      () => recordingPool("reports"),
    );
    await pool.increaseSize("g", 1);
    assert.deepEqual(pool.nodeGroupForNode({ name: "n", providerID: "p" }), ["ca", "nodeGroupForNode", { name: "n", providerID: "p" }]);
    assert.deepEqual(await pool.reconcile(), ["work", "reconcile", undefined]);
    pool.clusterChanged();
    assert.deepEqual(log, [
      ["ca", "increaseSize", "g", 1, undefined],
      ["ca", "nodeGroupForNode", { name: "n", providerID: "p" }],
      ["work", "reconcile", undefined],
      ["work", "clusterChanged"],
    ]);
    assert.deepEqual(pool.quarantine(), ["reports", "quarantine"]);
    assert.deepEqual(pool.poweredOutside(), ["reports", "poweredOutside"]);
    assert.deepEqual(pool.deviceMismatches(), ["reports", "deviceMismatches"]);
    assert.deepEqual(pool.usage(), ["reports", "usage"]);
  });

  it("skips the work and reports nothing when there is no pool", async () => {
    const pool = poolThrough(
      () => recordingPool("ca"),
      () => undefined,
      () => undefined,
    );
    assert.equal(await pool.reconcile(), undefined);
    assert.doesNotThrow(() => {
      pool.clusterChanged();
    });
    assert.deepEqual(pool.quarantine(), []);
    assert.deepEqual(pool.poweredOutside(), []);
    assert.deepEqual(pool.deviceMismatches(), []);
    assert.deepEqual(pool.usage(), []);
  });
});

describe("whileActing()", () => {
  it("reports on memory while passive: the quarantine, the machines powered outside, the mismatches and the usage", () => {
    const pool = whileActing(recordingPool("pool"), new FakeLeadership(false, OTHER));
    assert.deepEqual(pool.quarantine(), ["pool", "quarantine"]);
    assert.deepEqual(pool.poweredOutside(), ["pool", "poweredOutside"]);
    assert.deepEqual(pool.deviceMismatches(), ["pool", "deviceMismatches"]);
    assert.deepEqual(pool.usage(), ["pool", "usage"]);
  });

  it("hands the runner's work and cluster changes to the pool while acting", async () => {
    const log: unknown[][] = [];
    const pool = whileActing(recordingPool("pool", log), new FakeLeadership());
    assert.deepEqual(await pool.reconcile(), ["pool", "reconcile", undefined]);
    pool.clusterChanged();
    assert.deepEqual(log, [["pool", "reconcile", undefined], ["pool", "clusterChanged"]]);
  });
});
