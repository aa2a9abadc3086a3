import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { World } from "../harness/fakes/world.ts";
import type { WorldOptions } from "../harness/fakes/world.ts";
import { rejectsWith } from "../harness/fakes/assertions.ts";

const MINUTE = 60_000;

function turnedOn(w: World): string[] {
  return w.power.callsOf("turnOn").map((c) => c.control.key.replace(/^plug-/, ""));
}

/** Switches worker-1 on through IncreaseSize, then cluster-autoscaler drops it unregistered. */
async function failedBoot(w: World, how: "delete" | "decrease" = "delete"): Promise<void> {
  await w.pool.increaseSize("workers", 1);
  if (how === "delete") await w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]);
  else await w.pool.decreaseTargetSize("workers", -1);
}

async function readWorld(options: WorldOptions = {}): Promise<World> {
  const w = new World(options);
  await w.pool.refresh();
  return w;
}

describe("boot-failure quarantine", () => {
  it("quarantines a machine cluster-autoscaler deleted unregistered for 10 minutes by default, and lists it", async () => {
    const w = await readWorld();
    await failedBoot(w);
    const until = w.clock.now() + 10 * MINUTE;
    assert.deepEqual(w.reporter.of("quarantined"), [
      {
        type: "quarantined",
        machine: "worker-1",
        group: "workers",
        until,
        failures: 1,
        reason: "cluster-autoscaler dropped it before it registered",
      },
    ]);
    assert.deepEqual(w.pool.quarantine(), [{ machine: "worker-1", group: "workers", until, failures: 1 }]);
  });

  it("quarantines one that DecreaseTargetSize removed unregistered", async () => {
    const w = await readWorld();
    await failedBoot(w, "decrease");
    assert.deepEqual(
      w.pool.quarantine().map((q) => q.machine),
      ["worker-1"],
    );
  });

  it("skips a quarantined machine in later scale-ups, and uses it again once the quarantine is over", async () => {
    const w = await readWorld();
    await failedBoot(w);
    w.clock.advance(5 * MINUTE);
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(turnedOn(w), ["worker-1", "worker-2"]);
    await w.pool.decreaseTargetSize("workers", -1);
    w.clock.advance(5 * MINUTE);
    assert.deepEqual(
      w.pool.quarantine().map((q) => q.machine),
      ["worker-2"],
    );
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(turnedOn(w), ["worker-1", "worker-2", "worker-1"]);
  });

  it("quarantines a boot failure as soon as it is seen, and counts it once when cluster-autoscaler then drops it", async () => {
    const w = await readWorld();
    await w.pool.increaseSize("workers", 1);
    w.power.set(w.machine("worker-1").power, false);
    await w.pool.refresh();
    assert.deepEqual(
      w.reporter.of("quarantined").map((e) => [e.failures, e.reason]),
      [[1, "plug of worker-1 reads off again before the machine registered"]],
    );
    await w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]);
    assert.equal(w.reporter.of("quarantined").length, 1);
    assert.equal(w.pool.quarantine()[0]?.failures, 1);
  });

  it("doubles the back-off on each failure in a row, up to the maximum", async () => {
    const w = await readWorld({ quarantine: { initialMs: MINUTE, maxMs: 3 * MINUTE } });
    const backOffs: number[] = [];
    for (let i = 0; i < 4; i++) {
      const start = w.clock.now();
      await failedBoot(w);
      backOffs.push((w.pool.quarantine()[0]?.until ?? 0) - start);
      w.clock.advance(3 * MINUTE);
    }
    assert.deepEqual(backOffs, [MINUTE, 2 * MINUTE, 3 * MINUTE, 3 * MINUTE]);
    assert.deepEqual(
      w.reporter.of("quarantined").map((e) => e.failures),
      [1, 2, 3, 4],
    );
  });

  it("starts counting again after the machine registered once", async () => {
    const w = await readWorld({ quarantine: { initialMs: MINUTE, maxMs: 60 * MINUTE } });
    await failedBoot(w);
    w.clock.advance(MINUTE);
    await failedBoot(w);
    assert.equal(w.pool.quarantine()[0]?.failures, 2);
    w.clock.advance(2 * MINUTE);
    await w.pool.increaseSize("workers", 1);
    w.register("worker-1");
    await w.pool.refresh();
    assert.deepEqual(w.pool.quarantine(), []);
    // Later the machine is gone again (its Node removed, its plug off), and its next boot fails.
    w.cluster.removeNode("worker-1");
    w.power.set(w.machine("worker-1").power, false);
    await w.pool.refresh();
    await failedBoot(w);
    assert.deepEqual(w.pool.quarantine(), [{ machine: "worker-1", group: "workers", until: w.clock.now() + MINUTE, failures: 1 }]);
  });

  it("ends a quarantine when the machine registers meanwhile (it was switched on by hand and works)", async () => {
    const w = await readWorld({ on: [] });
    await failedBoot(w);
    w.power.set(w.machine("worker-1").power, true);
    w.register("worker-1");
    await w.pool.refresh();
    assert.deepEqual(w.pool.quarantine(), []);
  });

  it("is off with an initial back-off of 0", async () => {
    const w = await readWorld({ quarantine: { initialMs: 0, maxMs: 0 } });
    await failedBoot(w);
    assert.equal(w.reporter.of("quarantined").length, 0);
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(turnedOn(w), ["worker-1", "worker-1"]);
  });

  it("does not count a machine that was never switched on (queued, then dropped)", async () => {
    const w = await readWorld({ scaleUp: { maxPowerOnsPerInterval: 1, powerOnIntervalMs: 10_000 } });
    await w.pool.increaseSize("workers", 2);
    await w.pool.deleteNodes("workers", [w.fakeRef("worker-2")]);
    assert.deepEqual(w.pool.quarantine(), []);
  });

  it("does not count a registered machine's power-off", async () => {
    const w = await readWorld({ on: ["worker-1"] });
    w.registerTainted("worker-1");
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    await w.pool.reconcile();
    w.cluster.setReady("worker-1", false, w.clock.now());
    await w.drive(200);
    assert.equal(w.reporter.of("power-off-finished").length, 1);
    assert.deepEqual(w.pool.quarantine(), []);
  });

  it("names the quarantined machines when they leave too few usable ones", async () => {
    const w = await readWorld({ groups: [{ id: "workers", machines: ["worker-1", "worker-2"] }] });
    await w.pool.increaseSize("workers", 2);
    await w.pool.deleteNodes("workers", [w.fakeRef("worker-1"), w.fakeRef("worker-2")]);
    await rejectsWith(
      w.pool.increaseSize("workers", 1),
      "unsafe",
      /switched on 0 of 1; quarantined after failed boots: worker-1, worker-2; no further machine is usable/,
    );
  });
});
