import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION, POWER_OFF_ANNOTATION } from "../../src/domain/index.ts";
import { World } from "../harness/fakes/world.ts";
import type { WorldOptions } from "../harness/fakes/world.ts";

const MINUTE = 60_000;

/** worker-1 registered and running, then its plug is found off by a refresh. */
async function lostPower(options: WorldOptions = {}, node: Parameters<World["register"]>[1] = {}): Promise<World> {
  const w = new World({ on: ["worker-1"], ...options });
  w.register("worker-1", node);
  await w.pool.refresh();
  w.power.set(w.machine("worker-1").power, false);
  w.wakes = 0;
  await w.pool.refresh();
  return w;
}

describe("power restore (a plug found off under a Node that should be running)", () => {
  it("wakes the runner, which switches the plug back on and reports it", async () => {
    const w = await lostPower();
    assert.equal(w.wakes, 1);
    assert.equal(await w.pool.reconcile(), undefined);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.deepEqual(w.reporter.of("power-restored"), [
      { type: "power-restored", machine: "worker-1", group: "workers", node: "worker-1" },
    ]);
    assert.deepEqual(
      w.reporter.of("unexpected-power").map((e) => e.detail),
      ["plug of worker-1 reads off under a Ready node; switching it back on"],
    );
    assert.deepEqual(w.pool.instances("workers"), [{ id: "k3s://worker-1", state: "running" }]);
  });

  it("restores a machine's power at most once per 10 minutes, answering the wait", async () => {
    const w = await lostPower();
    await w.pool.reconcile();
    w.clock.advance(MINUTE);
    w.power.set(w.machine("worker-1").power, false);
    w.wakes = 0;
    await w.pool.refresh();
    assert.equal(w.wakes, 0);
    assert.equal(await w.pool.reconcile(), 9 * MINUTE);
    assert.equal(w.power.callsOf("turnOn").length, 1);
    w.clock.advance(9 * MINUTE);
    assert.equal(await w.pool.reconcile(), undefined);
    assert.equal(w.power.callsOf("turnOn").length, 2);
  });

  it("also restores under a Node that already went NotReady (the usual sight after a plug reboot)", async () => {
    const w = await lostPower();
    w.cluster.setReady("worker-1", false);
    await w.pool.reconcile();
    assert.equal(w.reporter.of("power-restored").length, 1);
  });

  it("reports a failed restore and tries again after the interval", async () => {
    const w = await lostPower();
    w.power.failNext("turnOn");
    assert.equal(await w.pool.reconcile(), 10 * MINUTE);
    assert.equal(w.reporter.of("power-on-failed")[0]?.machine, "worker-1");
    w.clock.advance(10 * MINUTE);
    await w.pool.reconcile();
    assert.equal(w.reporter.of("power-restored").length, 1);
  });

  it("takes its plug-on from the inrush budget", async () => {
    const w = await lostPower({ scaleUp: { maxPowerOnsPerInterval: 1, powerOnIntervalMs: 10_000 } });
    w.clock.advance(10_000);
    await w.pool.increaseSize("workers", 1);
    assert.equal(await w.pool.reconcile(), 10_000);
    assert.equal(w.power.callsOf("turnOn").length, 1);
    w.clock.advance(10_000);
    await w.pool.reconcile();
    assert.equal(w.reporter.of("power-restored").length, 1);
  });

  describe("leaves the plug off", () => {
    const cases: [string, () => Promise<World>][] = [
      ["for a machine held in config", () => lostPower({ groups: [{ id: "workers", machines: ["worker-1"], hold: ["worker-1"] }] })],
      ["for a Node carrying the hold annotation", () => lostPower({}, { annotations: { [HOLD_ANNOTATION]: "true" } })],
      [
        "for a Node cluster-autoscaler is deleting (ToBeDeleted taint)",
        () => lostPower({}, { taints: [{ key: "ToBeDeletedByClusterAutoscaler", value: "1", effect: "NoSchedule" }] }),
      ],
      ["for a Node whose power-off is recorded", () => lostPower({}, { annotations: { [POWER_OFF_ANNOTATION]: "1" } })],
    ];
    for (const [what, world] of cases) {
      it(what, async () => {
        const w = await world();
        await w.pool.reconcile();
        assert.equal(w.power.callsOf("turnOn").length, 0);
        assert.equal(w.reporter.of("power-restored").length, 0);
      });
    }

  });

  it("waits until a power-off pod of the machine is gone (its power-off is resumed, then stopped by the untainted Node)", async () => {
    const w = await lostPower();
    w.cluster.addPod({ machine: "worker-1", nodeName: "worker-1", startedAt: 0, phase: "Succeeded", terminating: false });
    const podsAtTurnOn: number[] = [];
    w.power.onCall = (c) => {
      if (c.op === "turnOn") podsAtTurnOn.push(w.cluster.pods().length);
    };
    await w.drive();
    assert.equal(w.reporter.of("power-off-aborted").length, 1);
    assert.deepEqual(podsAtTurnOn, [0]);
    assert.equal(w.reporter.of("power-restored").length, 1);
  });

  it("never switches a plug off because of an unexpected state", async () => {
    const w = new World({ on: ["worker-2"] });
    w.register("worker-1");
    await w.pool.refresh();
    w.power.set(w.machine("worker-3").power, true);
    await w.pool.refresh();
    await w.drive();
    assert.equal(w.power.callsOf("turnOff").length, 0);
    assert.equal(w.reporter.of("unexpected-power").length + w.reporter.of("powered-outside").length, 3);
  });
});
