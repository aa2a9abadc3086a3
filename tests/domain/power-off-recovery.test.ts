import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION, POWER_OFF_ANNOTATION } from "../../src/domain/index.ts";
import { World, deletingWorker1 } from "../harness/fakes/world.ts";

const deleting = deletingWorker1;

/** One pass of the runner in a cluster that behaves: a power-off pod shuts its node down, pods go when deleted. */
async function pass(w: World): Promise<number | undefined> {
  const wait = await w.pool.reconcile();
  for (const pod of w.cluster.pods()) {
    if (!pod.terminating && w.cluster.nodeNamed(pod.nodeName)?.ready === true) {
      w.cluster.setReady(pod.nodeName, false, w.clock.now());
    }
  }
  w.cluster.finishPodDeletion();
  if (wait !== undefined) w.clock.advance(wait);
  return wait;
}

describe("power-off abort", () => {
  it("keeps the power and undoes the pod and the annotation when the taint goes away", async () => {
    const w = await deleting();
    await w.pool.reconcile();
    w.cluster.untaint("worker-1");
    assert.equal(await w.pool.reconcile(), 1000);
    assert.deepEqual(w.reporter.of("refused").map((e) => e.rule), ["registered-without-taint"]);
    assert.equal(w.cluster.powerOffPod("worker-1")?.terminating, true);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], undefined);
    // Aborting is not deleting: the machine counts again.
    assert.equal(w.pool.instances("workers")[0]?.state, "running");
    assert.equal(w.pool.targetSize("workers"), 2);
    assert.equal(w.reporter.of("power-off-aborted").length, 0, "not over while the pod exists");

    w.cluster.finishPodDeletion();
    // Told at once; then the Node is watched as long as a shutdown is waited for (its pod may have halted the OS
    // late), and the runner goes idle.
    assert.equal(await w.pool.reconcile(), 5000);
    assert.equal(w.reporter.of("power-off-aborted").length, 1);
    assert.equal(await w.drive(100), undefined);
    assert.equal(w.power.callsOf("turnOff").length, 0);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("brings back a machine an earlier run's power-off pod halted, when the power-off it resumes is called off at once", async () => {
    const w = await deleting();
    await pass(w);
    assert.equal(w.cluster.nodeNamed("worker-1")?.ready, false, "the pod halted the OS");
    w.restart();
    w.cluster.untaint("worker-1");
    // The watch waits for the grace since the NotReady, polling every 5 s.
    for (let i = 0; i < 100 && (await pass(w)) !== undefined; i++);
    assert.deepEqual(w.reporter.of("refused").map((e) => e.rule), ["registered-without-taint"]);
    assert.deepEqual(w.reporter.of("revived"), [{ type: "revived", machine: "worker-1", node: "worker-1", how: "power-cycle" }]);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("refuses the plug-off itself when the taint goes away between the checks", async () => {
    const w = await deleting({
      groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], sensors: ["worker-1"] }],
    });
    await w.pool.reconcile();
    w.cluster.setReady("worker-1", false, w.clock.now());
    w.power.setWatts(w.machine("worker-1").power, 2);
    await w.pool.reconcile();
    // The next read is the grace step's last look, after check-taint has passed on this pass.
    w.power.onCall = (c) => {
      if (c.op === "read") w.cluster.untaint("worker-1");
    };
    w.clock.advance(10_000);
    await w.pool.reconcile();
    assert.equal(w.power.callsOf("turnOff").length, 0);
    assert.ok(w.reporter.events.some((e) => e.type === "power-off-step" && e.step === "plug-off" && e.outcome === "failed"));
  });

  it("keeps the power of a machine held meanwhile", async () => {
    const w = await deleting();
    await w.pool.reconcile();
    w.cluster.annotate("worker-1", HOLD_ANNOTATION, "true");
    await w.pool.reconcile();
    assert.deepEqual(w.reporter.of("refused").map((e) => e.rule), ["held"]);
    w.cluster.finishPodDeletion();
    w.clock.advance(1000);
    await w.pool.reconcile();
    assert.equal(w.reporter.of("power-off-aborted").length, 1);
    assert.equal(w.power.callsOf("turnOff").length, 0);
  });

  it("retries the undoing with backoff when a cluster write fails", async () => {
    const w = await deleting();
    await w.pool.reconcile();
    w.cluster.untaint("worker-1");
    w.cluster.failNext("deletePowerOffPod");
    assert.equal(await w.pool.reconcile(), 1000);
    assert.equal(w.cluster.powerOffPod("worker-1")?.terminating, false);
    w.clock.advance(1000);
    assert.equal(await w.pool.reconcile(), 1000);
    assert.equal(w.cluster.powerOffPod("worker-1")?.terminating, true);
  });
});

describe("power-off after a restart", () => {
  it("undoes a power-off whose job had not committed its record before the restart: the machine keeps its power", async () => {
    const w = await deleting();
    w.restart();
    for (let i = 0; i < 10 && (await pass(w)) !== undefined; i++);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], undefined);
    assert.deepEqual(w.reporter.of("power-off-started").filter((e) => e.resumed), []);
  });

  // Uninterrupted, worker-1's plug goes off on the third pass, at t0 + 120 s, and the job ends on the fifth.
  for (let passes = 1; passes <= 4; passes++) {
    it(`resumes from what the cluster shows after ${passes} pass(es) and ends as without the restart`, async () => {
      const w = await deleting();
      const t0 = w.clock.now();
      let firstCut: number | undefined;
      w.power.onCall = (c) => {
        if (c.op === "turnOff") firstCut ??= w.clock.now();
      };
      for (let i = 0; i < passes; i++) await pass(w);
      w.restart();
      for (let i = 0; i < 10 && (await pass(w)) !== undefined; i++);

      assert.equal(firstCut, t0 + 120_000);
      assert.equal(w.power.isOn(w.machine("worker-1").power), false);
      assert.equal(w.cluster.nodeNamed("worker-1"), undefined);
      assert.deepEqual(w.cluster.pods(), []);
      assert.equal(w.cluster.callsOf("createPowerOffPod").length, 1);
      assert.deepEqual(w.pool.instances("workers"), [{ id: "k3s://worker-2", state: "running" }]);
      const resumed = w.reporter.of("power-off-started").filter((e) => e.resumed);
      assert.equal(resumed.length, passes < 4 ? 1 : 0);
      // After the fourth pass only the job's last look was missing: nothing is left to resume or report.
      assert.equal(w.reporter.of("power-off-finished").length, passes < 4 ? 1 : 0);
    });
  }

  it("does not take the terminating pod of an abort for a power-off to resume, and the power stays on", async () => {
    const w = await deleting();
    await w.pool.reconcile();
    w.cluster.untaint("worker-1");
    await w.pool.reconcile();
    w.restart();
    assert.equal(await w.pool.reconcile(), undefined);
    assert.equal(w.reporter.of("power-off-started").filter((e) => e.resumed).length, 0);
    w.cluster.finishPodDeletion();
    assert.equal(await w.pool.reconcile(), undefined);
    assert.equal(w.power.callsOf("turnOff").length, 0);
  });

  it("clears a leftover power-off annotation from a node that is no longer being deleted", async () => {
    const w = new World({ on: ["worker-1"] });
    w.register("worker-1", { annotations: { [POWER_OFF_ANNOTATION]: "12345" } });
    await w.pool.refresh();
    assert.equal(await w.pool.reconcile(), 0);
    assert.equal(await w.pool.reconcile(), undefined);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], undefined);
    assert.equal(w.power.callsOf("turnOff").length, 0);
  });

  for (const value of ["1800000000000;pending", "soon", "1800000000000;committed", ""]) {
    it(`undoes, and never resumes, a record that is not a committed one: ${JSON.stringify(value)} on a tainted node`, async () => {
      const w = new World({ on: ["worker-1"] });
      w.registerTainted("worker-1");
      w.cluster.annotate("worker-1", POWER_OFF_ANNOTATION, value);
      await w.pool.refresh();
      await w.drive(20);
      assert.deepEqual(w.reporter.of("power-off-started"), []);
      assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
      assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], undefined);
      assert.ok(w.power.isOn(w.machine("worker-1").power));
    });
  }

  it("resumes a committed record on a tainted node", async () => {
    const w = new World({ on: ["worker-1"] });
    w.registerTainted("worker-1");
    w.cluster.annotate("worker-1", POWER_OFF_ANNOTATION, "1800000000000");
    await w.pool.refresh();
    await w.pool.reconcile();
    assert.deepEqual(w.reporter.of("power-off-started"), [{ type: "power-off-started", machine: "worker-1", node: "worker-1", resumed: true }]);
  });
});
