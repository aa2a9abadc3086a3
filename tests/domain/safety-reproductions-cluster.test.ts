// Ways the cluster side of a power-off could break the promise (issue 36, sequences 6 and 7), replayed on the
// fakes: the Node the power-off deletes, and the record of a power-on that a crash must not bring back.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { World, PREFIX } from "../harness/fakes/world.ts";

/** worker-1 registered, drained and asked to be deleted; its Node goes NotReady once the power-off pod exists. */
async function poweringOff(w: World): Promise<void> {
  w.view?.sync();
  await w.pool.refresh();
  await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
  await w.pool.reconcile();
  w.cluster.setReady("worker-1", false, w.clock.now());
  w.view?.sync();
}

/** Runs the power-off runner until `until` holds (at most `passes` passes), the view left as it is. */
async function driveUntil(w: World, until: () => boolean, passes = 200): Promise<void> {
  for (let i = 0; i < passes && !until(); i++) {
    const wait = await w.pool.reconcile();
    if (wait === undefined) return;
    w.clock.advance(wait);
    w.cluster.finishPodDeletion();
  }
}

describe("safety reproductions: the cluster side", () => {
  it("6a: a Node registered anew (another uid), Ready and untainted, after the cut while the view lags is not deleted", async () => {
    const w = new World({ on: ["worker-1"], lagging: true });
    w.registerTainted("worker-1");
    await poweringOff(w);
    await driveUntil(w, () => w.cluster.callsOf("deleteNode").length > 0);
    assert.equal(w.power.isOn(w.machine("worker-1").power), false, "cut");
    assert.equal(w.cluster.nodeNamed("worker-1"), undefined, "the drained Node is deleted");
    // Someone switches the machine on again and its kubelet registers it anew; the view still shows the old Node.
    w.power.set(w.machine("worker-1").power, true);
    const anew = w.cluster.addNode({ name: "worker-1", providerID: `${PREFIX}worker-1`, readyChangedAt: w.clock.now() });
    await w.drive(100);
    assert.ok(w.cluster.nodeNamed("worker-1") !== undefined, "the Node registered anew is still there");
    assert.equal(w.cluster.nodeNamed("worker-1")?.uid, anew.uid);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("6b: the drained Node Ready and untainted again after the cut, while the view still shows it NotReady, is not deleted", async () => {
    const w = new World({ on: ["worker-1"], lagging: true });
    w.registerTainted("worker-1");
    await poweringOff(w);
    // Right after the cut, as the power-off pod goes: the machine is switched on by hand, its Node reports Ready
    // and a restarted cluster-autoscaler removes its taint. The view shows none of it.
    w.cluster.onCall = (c) => {
      if (c.op !== "deletePowerOffPod" || w.power.isOn(w.machine("worker-1").power)) return;
      w.power.set(w.machine("worker-1").power, true);
      w.cluster.setReady("worker-1", true, w.clock.now());
      w.cluster.untaint("worker-1");
    };
    await w.drive(100);
    assert.equal(w.power.callsOf("turnOff").length, 1, "cut once");
    assert.ok(w.cluster.nodeNamed("worker-1") !== undefined, "the Ready, untainted Node is still there");
    assert.deepEqual(w.cluster.callsOf("deleteNode"), []);
    assert.equal(w.reporter.of("node-deleted").length, 0);
  });

  it("7: the Node whose registration ended a power-on record is deleted only once that end is stored, so a crash brings no licence back", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    assert.ok(w.records.powerOn("worker-1") !== undefined, "plugpool's power-on is recorded");
    // The apiserver refuses the records' writes from here on: the end of the record, at the registration, stays out.
    w.records.stallWrites();
    w.registerTainted("worker-1");
    await poweringOff(w);
    assert.equal(w.records.powerOn("worker-1"), undefined, "ended in memory");
    await w.drive(200);
    assert.equal(w.power.isOn(w.machine("worker-1").power), false, "cut");
    assert.ok(w.cluster.nodeNamed("worker-1") !== undefined, "the Node, evidence of the registration, is kept");
    assert.equal(w.reporter.of("node-deleted").length, 0);

    // plugpool is killed; the record stands on the cluster, and so does the Node that ends it again.
    w.records.crash();
    w.restart();
    await w.pool.refresh();
    w.records.resumeWrites();
    await w.drive(200);
    assert.equal(w.cluster.nodeNamed("worker-1"), undefined, "deleted once the end was stored");
    w.records.crash();
    w.restart();
    assert.equal(w.records.powerOn("worker-1"), undefined, "no licence after a second kill");

    // Switched on by hand, it runs with no Node: powered outside plugpool, never cut.
    const cuts = w.power.callsOf("turnOff").length;
    w.power.set(w.machine("worker-1").power, true);
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]).catch(() => undefined);
    await w.pool.decreaseTargetSize("workers", -1).catch(() => undefined);
    await w.drive(50);
    assert.equal(w.power.callsOf("turnOff").length, cuts, "not cut");
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });
});
