// The observe-only write ports of `serve --dry-run`: reads pass through, every change is told and refused,
// nothing reaches the real adapters' writes, and plugpool's records change in memory only.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ClusterView, Machine, NodeView, PowerOffPodView, PowerRecords, PowerSwitch } from "../../src/domain/index.ts";
import { createPool, POWER_OFF_ANNOTATION } from "../../src/domain/index.ts";
import { observeOnlyPowerSwitch, observeOnlyRecords, observeOnlyTeardown, type DryRunAction } from "../../src/app/observe-only.ts";
import { World } from "../harness/fakes/world.ts";

const machine: Machine = { name: "worker-1", group: "workers", index: 0, hold: false, power: { backend: "esphome", key: "p1 relay", label: "plug p1", measuresWatts: true } };

function plugs(): PowerSwitch & { writes: number } {
  const fake = {
    writes: 0,
    read: () => Promise.resolve({ on: true, watts: 80 }),
    turnOn: () => { fake.writes += 1; return Promise.resolve({ on: true }); },
    turnOff: () => { fake.writes += 1; return Promise.resolve({ on: false }); },
  };
  return fake;
}

function view(nodes: NodeView[] = [], pods: PowerOffPodView[] = []): ClusterView {
  return {
    nodeNamed: (name) => nodes.find((n) => n.name === name),
    nodesWithProviderID: () => [],
    nodesCreatedAfter: () => nodes,
    powerOffPod: (m) => pods.find((p) => p.machine === m),
    templateSlices: () => undefined,
    current: () => true,
  };
}

const node = (annotations: Record<string, string> = {}): NodeView =>
  ({ name: "worker-1", uid: "uid-1", providerID: "k3s://worker-1", ready: true, taints: [], annotations, labels: {} });

describe("observe-only ports (serve --dry-run)", () => {
  it("reads plugs, and tells and refuses a switch-on without sending it", async () => {
    const real = plugs();
    const told: DryRunAction[] = [];
    const power = observeOnlyPowerSwitch(real, [machine], (a) => told.push(a));
    assert.deepEqual(await power.read(machine.power), { on: true, watts: 80 });
    await assert.rejects(power.turnOn(machine.power, { device: () => Promise.resolve(true) }), { code: "unsafe", message: "dry run: the plug of worker-1 was not switched on" });
    assert.equal(real.writes, 0);
    assert.deepEqual(told.map((a) => [a.node, a.reason]), [["worker-1", "DryRunPowerOn"]]);
  });

  it("asks the check at the plug before a switch-off: a refusal is a refusal, an allowed cut is told and not made", async () => {
    const real = plugs();
    const told: DryRunAction[] = [];
    const power = observeOnlyPowerSwitch(real, [machine], (a) => told.push(a));
    await assert.rejects(power.turnOff(machine.power, () => Promise.resolve(false), { device: () => Promise.resolve(true) }), { code: "unsafe", message: /refused at the plug by the safety check/ });
    assert.equal(told.length, 0);
    await assert.rejects(power.turnOff(machine.power, () => Promise.resolve(true), { device: () => Promise.resolve(true) }), { message: "dry run: the plug of worker-1 was not switched off" });
    assert.deepEqual(told.map((a) => a.reason), ["DryRunPlugOff"]);
    assert.equal(real.writes, 0);
  });

  it("starts no power-off, and refuses a teardown step only when it would change what the view shows", async () => {
    const told: DryRunAction[] = [];
    const tell = (a: DryRunAction) => told.push(a);
    const quiet = observeOnlyTeardown(view(), tell);
    await assert.rejects(quiet.markPowerOff("worker-1", { startedAt: 1, pending: false }), { code: "cluster-refused" });
    assert.deepEqual(told.map((a) => a.reason), ["DryRunPowerOff"]);
    await quiet.clearPowerOffMark("worker-1");
    assert.equal(await quiet.deletePowerOffPod(machine), true);
    await quiet.deleteNode("worker-1", "uid-1");
    assert.equal(told.length, 1, "nothing to do is no action");

    const pod: PowerOffPodView = { machine: "worker-1", nodeName: "worker-1", startedAt: 1, phase: "Running", terminating: false };
    const earlier = observeOnlyTeardown(view([node({ [POWER_OFF_ANNOTATION]: "1" })], [pod]), tell);
    await assert.rejects(earlier.clearPowerOffMark("worker-1"), { code: "cluster-refused" });
    await assert.rejects(earlier.createPowerOffPod(machine, "worker-1", 1), { code: "cluster-refused" });
    await assert.rejects(earlier.deletePowerOffPod(machine), { code: "cluster-refused" });
    await assert.rejects(earlier.deleteNode("worker-1", "uid-1"), { code: "cluster-refused" });
    assert.deepEqual(told.slice(1).map((a) => a.reason), Array.from({ length: 4 }, () => "DryRunPowerOffStep"));
  });

  it("takes up a power-off an earlier run committed and tells the pod it would create, not a new power-off", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    w.registerTainted("worker-1");
    w.register("worker-2");
    w.cluster.annotate("worker-1", POWER_OFF_ANNOTATION, String(w.clock.now()));
    const told: DryRunAction[] = [];
    const tell = (action: DryRunAction): void => { told.push(action); };
    const pool = createPool(
      {
        clock: w.clock,
        power: observeOnlyPowerSwitch(w.power, w.machines(), tell),
        cluster: w.cluster,
        lookup: w.cluster,
        teardown: observeOnlyTeardown(w.cluster, tell),
        records: observeOnlyRecords(w.records),
        reporter: w.reporter,
      },
      w.config,
    );
    await pool.refresh();
    for (let i = 0; i < 8; i++) {
      const wait = await pool.reconcile();
      if (wait === undefined) break;
      w.clock.advance(wait);
    }
    assert.ok(!told.some((a) => a.reason === "DryRunPowerOff"), "not told as a power-off about to start");
    assert.ok(told.some((a) => /create the power-off pod/.test(a.message)), "the dry run gets to the pod it would create");
  });

  it("keeps changes to plugpool's records in memory, over the stored ones", async () => {
    const writes: string[] = [];
    const stored: PowerRecords = {
      powerOn: (m) => (m === "worker-1" ? { at: 5, why: "scale-up" } : undefined),
      recordPowerOn: (m) => { writes.push(m); return Promise.resolve(); },
      endPowerOn: (m) => { writes.push(m); },
      quarantine: (m) => (m === "worker-1" ? { until: 9, failures: 1 } : undefined),
      setQuarantine: (m) => { writes.push(m); },
      deviceIdentity: () => undefined,
      recordDeviceIdentity: (m) => { writes.push(m); return Promise.resolve(); },
      stored: (m) => { writes.push(m); return Promise.resolve(); },
    };
    const records = observeOnlyRecords(stored);
    assert.deepEqual(records.powerOn("worker-1"), { at: 5, why: "scale-up" });
    records.endPowerOn("worker-1");
    assert.equal(records.powerOn("worker-1"), undefined);
    await records.recordPowerOn("worker-2", { at: 7, why: "scale-up" });
    assert.deepEqual(records.powerOn("worker-2"), { at: 7, why: "scale-up" });
    records.setQuarantine("worker-1", undefined);
    records.setQuarantine("worker-2", { until: 11, failures: 2 });
    assert.equal(records.quarantine("worker-1"), undefined);
    assert.deepEqual(records.quarantine("worker-2"), { until: 11, failures: 2 });
    await records.stored("worker-1");
    assert.deepEqual(writes, []);
  });
});
