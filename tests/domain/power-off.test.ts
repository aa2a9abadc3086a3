import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { POWER_OFF_ANNOTATION } from "../../src/domain/index.ts";
import { World, deletingWorker1, plugOffAndOnAgainMidPowerOff, type WorldOptions } from "../harness/fakes/world.ts";

const deleting = deletingWorker1;

function steps(w: World): string[] {
  return w.reporter.of("power-off-step").map((e) => `${e.step} ${e.outcome}: ${e.detail}`);
}

describe("the power-off saga", () => {
  it("walks the steps in order, each advanced by the clock, and finishes with the Node deleted", async () => {
    const w = await deleting();
    const t0 = w.clock.now();
    const plug = w.machine("worker-1").power;

    assert.equal(await w.pool.reconcile(), 5000);
    assert.deepEqual(w.cluster.pods(), [
      { machine: "worker-1", nodeName: "worker-1", startedAt: t0, phase: "Pending", terminating: false },
    ]);
    assert.equal(w.cluster.nodeNamed("worker-1")?.annotations[POWER_OFF_ANNOTATION], String(t0));

    w.clock.advance(3000);
    w.cluster.setReady("worker-1", false, w.clock.now());
    assert.equal(await w.pool.reconcile(), 120_000);
    w.clock.advance(119_999);
    assert.equal(await w.pool.reconcile(), 1);
    assert.ok(w.power.isOn(plug));

    w.clock.advance(1);
    assert.equal(await w.pool.reconcile(), 1000);
    assert.equal(w.power.isOn(plug), false);
    assert.deepEqual(w.reporter.of("plug-off"), [
      { type: "plug-off", machine: "worker-1", reason: "power-off", graceEnded: "elapsed" },
    ]);
    assert.equal(w.cluster.powerOffPod("worker-1")?.terminating, true);
    assert.equal(w.pool.instances("workers")[0]?.state, "deleting");

    w.clock.advance(1000);
    assert.equal(await w.pool.reconcile(), 1000);
    // Asked of the apiserver on every pass until it says the pod is gone.
    assert.equal(w.cluster.callsOf("deletePowerOffPod").length, 2);
    assert.ok(w.cluster.nodeNamed("worker-1"), "the Node stays until its power-off pod is gone");

    w.cluster.finishPodDeletion();
    w.clock.advance(1000);
    assert.equal(await w.pool.reconcile(), 1000);
    assert.equal(w.cluster.nodeNamed("worker-1"), undefined);
    w.clock.advance(1000);
    assert.equal(await w.pool.reconcile(), undefined);

    assert.deepEqual(w.pool.instances("workers"), [{ id: "k3s://worker-2", state: "running" }]);
    assert.deepEqual(w.reporter.of("power-off-finished"), [
      { type: "power-off-finished", machine: "worker-1", durationMs: 126_000 },
    ]);
    assert.deepEqual(
      w.reporter
        .of("power-off-step")
        .filter((e) => e.outcome === "done")
        .map((e) => [e.step, e.durationMs]),
      [
        ["check-taint", 0],
        ["power-off-pod", 0],
        ["await-not-ready", 3000],
        ["grace", 120_000],
        ["plug-off", 0],
        ["remove-pod", 2000],
        ["delete-node", 1000],
      ],
    );
    assert.deepEqual(w.cluster.callsOf("createPowerOffPod").length, 1);
  });

  describe("of a machine whose power control shuts the OS down itself (a BMC)", () => {
    const bmc: WorldOptions = {
      groups: [{ id: "workers", machines: ["worker-1", "worker-2"], shutsDown: ["worker-1"], backends: { "worker-1": "redfish" } }],
    };

    it("asks the control instead of creating a power-off pod, then waits for NotReady and the grace before the cut", async () => {
      const w = await deletingWorker1(bmc);
      await w.pool.reconcile();
      assert.deepEqual(w.power.shutdownsAccepted, ["plug-worker-1"]);
      assert.deepEqual(w.cluster.callsOf("createPowerOffPod"), []);
      assert.ok(w.power.isOn(w.machine("worker-1").power), "a shutdown request leaves the power on");
      assert.match(steps(w).find((s) => s.startsWith("power-off-pod done")) ?? "", /OS shutdown of worker-1 requested through plug of worker-1/);

      w.clock.advance(3000);
      w.cluster.setReady("worker-1", false, w.clock.now());
      await w.drive(125);
      assert.equal(w.power.isOn(w.machine("worker-1").power), false);
      assert.equal(w.power.shutdownsAccepted.length, 1, "asked once");
      assert.equal(w.cluster.nodeNamed("worker-1"), undefined);
      assert.equal(w.reporter.of("power-off-finished").length, 1);
    });

    it("asks nothing when the Node lost CA's taint: the same verdicts as before a power-off pod", async () => {
      const w = await deletingWorker1(bmc);
      w.cluster.untaint("worker-1");
      await w.drive(30);
      assert.deepEqual(w.power.shutdownsAccepted, []);
      assert.ok(w.power.isOn(w.machine("worker-1").power));
      assert.equal(w.reporter.of("power-off-aborted").length, 1);
    });

    it("keeps the power when the OS does not go down after the request (the default)", async () => {
      const w = await deletingWorker1(bmc);
      await w.drive(400);
      assert.equal(w.power.shutdownsAccepted.length, 1);
      assert.equal(w.power.callsOf("turnOff").length, 0);
      assert.match(w.reporter.of("power-off-aborted")[0]?.reason ?? "", /did not go NotReady within 300000 ms.*keep-power/);
    });
  });

  it("keeps the power when the node does not go NotReady in time (the default), and says why", async () => {
    const w = await deleting();
    await w.drive(200);
    assert.equal(w.power.callsOf("turnOff").length, 0);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.match(w.reporter.of("power-off-aborted")[0]?.reason ?? "", /did not go NotReady within 300000 ms.*keep-power/);
    assert.deepEqual(w.cluster.pods(), []);
  });

  it("cuts after the timeout only when configured to, reports the hard cut, and counts the grace from the timeout", async () => {
    const w = await deletingWorker1({ powerOff: { onShutdownTimeout: "cut" } });
    const t0 = w.clock.now();
    let cutAt: number | undefined;
    w.power.onArrival = (c) => {
      if (c.op === "turnOff") cutAt = w.clock.now();
    };
    await w.drive(200);
    assert.equal(cutAt, t0 + 300_000 + 120_000);
    assert.equal(w.reporter.of("hard-cut").length, 1);
    assert.ok(steps(w).some((s) => s.startsWith("await-not-ready done:") && s.includes("hard cut")));
  });

  it("skips the power-off pod for a node already NotReady and counts the grace from when it went", async () => {
    const w = await deleting();
    const t0 = w.clock.now();
    w.cluster.setReady("worker-1", false, t0 - 100_000);
    assert.equal(await w.pool.reconcile(), 20_000);
    assert.equal(w.cluster.callsOf("createPowerOffPod").length, 0);
    assert.ok(steps(w).includes("power-off-pod done: node already NotReady"));
  });

  it("creates no pod and skips the wait for NotReady when a fresh reading says the plug is off, and still cuts it to be sure once the Node shows NotReady", async () => {
    const w = await deleting();
    w.power.set(w.machine("worker-1").power, false);
    await w.pool.refresh();
    assert.equal(await w.pool.reconcile(), 120_000);
    assert.equal(w.cluster.callsOf("createPowerOffPod").length, 0);
    assert.ok(steps(w).includes("await-not-ready done: plug reads off"));
    w.cluster.setReady("worker-1", false, w.clock.now());
    w.clock.advance(120_000);
    await w.pool.reconcile();
    assert.equal(w.power.callsOf("turnOff").length, 1);
  });

  it("waits on a plug read off and then unreadable, its Node Ready, as one that may have power: the power-off ends at its deadline", async () => {
    const w = await plugOffAndOnAgainMidPowerOff();
    const plug = w.machine("worker-1").power;
    w.power.setFault(plug, "unreachable");
    await w.drive(200);
    assert.ok(w.power.isOn(plug));
    assert.match(w.reporter.of("power-off-aborted")[0]?.reason ?? "", /did not go NotReady within 300000 ms/);
  });

  it("takes a plug read off again, while its Node still shows Ready, for known off: nothing is sent and the power-off ends", async () => {
    const w = await deleting();
    w.power.set(w.machine("worker-1").power, false);
    await w.pool.refresh();
    await w.pool.reconcile();
    await w.drive(50);
    assert.equal(w.power.callsOf("turnOff").length, 0);
    assert.equal(w.cluster.nodeNamed("worker-1"), undefined, "the Node is deleted");
    assert.equal(w.reporter.of("power-off-finished").length, 1);
  });

  it("does not take a plug remembered off for a shutdown: one switched on again by hand gets its power-off pod and keeps its power while its Node stays Ready", async () => {
    const w = await deleting();
    const plug = w.machine("worker-1").power;
    w.power.set(plug, false);
    await w.pool.refresh();
    w.power.set(plug, true);
    await w.drive(200);
    // Only a reading taken now says the machine has no power: this one says on, so the OS gets its power-off pod
    // and, its Node staying Ready, keeps its power.
    assert.equal(w.cluster.callsOf("createPowerOffPod").length, 1);
    assert.equal(w.power.callsOf("turnOff").length, 0);
    assert.ok(w.power.isOn(plug));
    assert.match(w.reporter.of("power-off-aborted")[0]?.reason ?? "", /did not go NotReady/);
  });

  describe("with a power sensor", () => {
    const sensor: WorldOptions = {
      groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"], sensors: ["worker-1"] }],
    };

    it("cuts once the draw has stayed at standby for the window, before the grace ends", async () => {
      const w = await deleting(sensor);
      const plug = w.machine("worker-1").power;
      w.power.setWatts(plug, 60);
      await w.pool.reconcile();
      w.cluster.setReady("worker-1", false, w.clock.now());
      assert.equal(await w.pool.reconcile(), 2000);
      w.clock.advance(2000);
      w.power.setWatts(plug, 3);
      assert.equal(await w.pool.reconcile(), 2000);
      w.clock.advance(9000);
      assert.equal(await w.pool.reconcile(), 1000);
      w.clock.advance(1000);
      assert.equal(await w.pool.reconcile(), 1000);
      assert.equal(w.power.isOn(plug), false);
      assert.deepEqual(w.reporter.of("plug-off"), [
        { type: "plug-off", machine: "worker-1", reason: "power-off", watts: 3, graceEnded: "standby" },
      ]);
    });

    it("starts the standby window over when the draw rises again", async () => {
      const w = await deleting(sensor);
      const plug = w.machine("worker-1").power;
      w.power.setWatts(plug, 3);
      await w.pool.reconcile();
      w.cluster.setReady("worker-1", false, w.clock.now());
      await w.pool.reconcile();
      w.clock.advance(8000);
      w.power.setWatts(plug, 40);
      await w.pool.reconcile();
      w.power.setWatts(plug, 3);
      w.clock.advance(2000);
      await w.pool.reconcile();
      w.clock.advance(8000);
      await w.pool.reconcile();
      assert.ok(w.power.isOn(plug), "standby has held for 8 s only");
    });

    for (const [draw, how] of [[60, "stays high"], [-500, "reads below -1 W (a faulty sensor: unknown, never standby)"]] as const) {
      it(`never waits longer than the grace when the draw ${how}`, async () => {
        const w = await deleting(sensor);
        w.power.setWatts(w.machine("worker-1").power, draw);
        const t0 = w.clock.now();
        let cutAt: number | undefined;
        w.power.onCall = (c) => {
          if (c.op === "turnOff") cutAt = w.clock.now();
        };
        await w.pool.reconcile();
        w.cluster.setReady("worker-1", false, t0);
        await w.drive(200);
        assert.equal(cutAt, t0 + 120_000);
        assert.equal(w.reporter.of("plug-off")[0]?.graceEnded, "elapsed");
        const shown = draw < 0 ? "?" : String(draw);
        assert.ok(w.reporter.of("power-off-step").some((e) => e.outcome === "waiting" && e.detail === `grace, drawing ${shown} W`));
      });
    }

    it("takes a slightly negative draw for 0 W, a sensor's offset at no load: the standby ends the grace", async () => {
      const w = await deleting(sensor);
      w.power.setWatts(w.machine("worker-1").power, -0.4);
      await w.pool.reconcile();
      w.cluster.setReady("worker-1", false, w.clock.now());
      await w.drive(200);
      assert.equal(w.reporter.of("plug-off")[0]?.graceEnded, "standby");
    });
  });

  it("retries a failing plug-off with a doubling backoff while the instance stays deleting", async () => {
    const w = await deleting({ powerOff: { graceMs: 0 } });
    w.cluster.setReady("worker-1", false, w.clock.now());
    for (let i = 0; i < 3; i++) w.power.failNext("turnOff");
    assert.equal(await w.pool.reconcile(), 1000);
    w.clock.advance(999);
    assert.equal(await w.pool.reconcile(), 1, "no attempt before the backoff has passed");
    assert.equal(w.power.callsOf("turnOff").length, 1);
    w.clock.advance(1);
    assert.equal(await w.pool.reconcile(), 2000);
    w.clock.advance(2000);
    assert.equal(await w.pool.reconcile(), 4000);
    assert.equal(w.pool.instances("workers")[0]?.state, "deleting");
    w.clock.advance(4000);
    assert.equal(await w.pool.reconcile(), 1000);
    assert.equal(w.power.callsOf("turnOff").length, 4);
    assert.equal(w.power.isOn(w.machine("worker-1").power), false);
  });

  it("retries a failing cluster write with backoff", async () => {
    const w = await deleting();
    w.cluster.failNext("createPowerOffPod");
    assert.equal(await w.pool.reconcile(), 1000);
    assert.equal(w.cluster.powerOffPod("worker-1"), undefined);
    w.clock.advance(1000);
    assert.equal(await w.pool.reconcile(), 5000);
    assert.ok(w.cluster.powerOffPod("worker-1"));
    assert.match(steps(w).find((s) => s.includes("failed")) ?? "", /power-off-pod failed: .*retrying in 1000 ms/);
  });

  it("answers undefined when no power-off is in progress", async () => {
    const w = new World();
    assert.equal(await w.pool.reconcile(), undefined);
  });
});
