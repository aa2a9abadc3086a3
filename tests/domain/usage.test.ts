import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { World } from "../harness/fakes/world.ts";

const S = 1000;

const METERED = {
  groups: [
    {
      id: "workers",
      machines: ["worker-1", "worker-2", "worker-3"],
      sensors: ["worker-1"],
      idleWatts: { "worker-1": 30, "worker-2": 45 },
    },
  ],
};

function usageOf(w: World, machine: string) {
  const u = w.pool.usage().find((x) => x.machine === machine);
  assert.ok(u, machine);
  return u;
}

describe("Pool.usage()", () => {
  it("knows nothing of a plug before its first reading", () => {
    const w = new World(METERED);
    assert.deepEqual(usageOf(w, "worker-1"), {
      machine: "worker-1",
      group: "workers",
      plug: "unknown",
      poweredOnSeconds: 0,
      poweredOffSeconds: 0,
      energyUsedKwh: 0,
      energyAvoidedKwh: 0,
    });
  });

  it("adds up time on and off, energy used from the sensor and energy avoided from idleWatts between readings", async () => {
    const w = new World({ ...METERED, on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    w.power.setWatts(w.machine("worker-1").power, 120);
    await w.pool.refresh();
    w.clock.advance(60 * S);
    await w.pool.refresh();
    w.clock.advance(60 * S);
    await w.pool.refresh();
    const one = usageOf(w, "worker-1");
    assert.equal(one.plug, "on");
    assert.equal(one.watts, 120);
    assert.equal(one.poweredOnSeconds, 120);
    assert.equal(one.poweredOffSeconds, 0);
    assert.equal(one.energyUsedKwh, (120 * 120) / 3_600_000);
    assert.equal(one.energyAvoidedKwh, 0);
    const two = usageOf(w, "worker-2");
    assert.equal(two.plug, "off");
    assert.equal(two.poweredOffSeconds, 120);
    assert.equal(two.energyAvoidedKwh, (45 * 120) / 3_600_000);
    // No sensor: no watts and no energy used; no idleWatts: no energy avoided. Unknown, not zero.
    assert.equal("watts" in two || "energyUsedKwh" in two, false);
    assert.equal("energyAvoidedKwh" in usageOf(w, "worker-3"), false);
  });

  it("counts a plug plugpool switched on as on from the moment the plug answered", async () => {
    const w = new World(METERED);
    await w.pool.refresh();
    w.clock.advance(30 * S);
    await w.pool.increaseSize("workers", 1);
    w.clock.advance(10 * S);
    await w.pool.refresh();
    const u = usageOf(w, "worker-1");
    assert.equal(u.poweredOffSeconds, 30);
    assert.equal(u.poweredOnSeconds, 10);
  });

  it("spans failed reads rather than counting them as no draw", async () => {
    const w = new World({ ...METERED, on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    await w.pool.refresh();
    w.power.setFault(w.machine("worker-1").power, "unreachable");
    w.clock.advance(30 * S);
    await w.pool.refresh();
    w.power.setFault(w.machine("worker-1").power, undefined);
    w.clock.advance(30 * S);
    await w.pool.refresh();
    assert.equal(usageOf(w, "worker-1").energyUsedKwh, (80 * 60) / 3_600_000);
  });

  it("starts from zero after a restart", async () => {
    const w = new World({ ...METERED, on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    await w.pool.refresh();
    w.clock.advance(60 * S);
    await w.pool.refresh();
    assert.equal(usageOf(w, "worker-1").poweredOnSeconds, 60);
    w.restart();
    await w.pool.refresh();
    assert.equal(usageOf(w, "worker-1").poweredOnSeconds, 0);
  });
});

describe("boot time", () => {
  it("reports booted with the time from the plug-on to the Node turning Ready, once", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    const on = w.clock.now();
    w.clock.advance(40 * S);
    w.register("worker-1", { ready: false });
    w.pool.clusterChanged();
    assert.deepEqual(w.reporter.of("booted"), []);
    w.clock.advance(20 * S);
    w.cluster.setReady("worker-1", true, on + 55 * S);
    w.pool.clusterChanged();
    await w.pool.refresh();
    w.pool.clusterChanged();
    assert.deepEqual(w.reporter.of("booted"), [
      { type: "booted", machine: "worker-1", group: "workers", node: "worker-1", durationMs: 55 * S },
    ]);
  });

  it("notices a Ready Node at Refresh too", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.clock.advance(70 * S);
    w.register("worker-1");
    await w.pool.refresh();
    assert.deepEqual(w.reporter.of("booted").map((e) => e.durationMs), [70 * S]);
  });

  it("reports nothing for a machine plugpool did not switch on, nor for a boot that ended with the plug off", async () => {
    const w = new World({ on: ["worker-1"] });
    w.register("worker-1");
    await w.pool.refresh();
    w.pool.clusterChanged();
    await w.pool.increaseSize("workers", 1);
    w.power.set(w.machine("worker-2").power, false);
    await w.pool.refresh();
    w.power.set(w.machine("worker-2").power, true);
    await w.pool.refresh();
    w.register("worker-2");
    w.pool.clusterChanged();
    assert.deepEqual(w.reporter.of("booted"), []);
  });

  it("reports nothing for a Ready condition older than the plug-on", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.register("worker-1", { readyChangedAt: w.clock.now() - S });
    w.pool.clusterChanged();
    assert.deepEqual(w.reporter.of("booted"), []);
  });

  it("takes a Ready time within the second before the plug-on (its whole-second resolution) as a boot of 0 s", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.register("worker-1", { readyChangedAt: w.clock.now() - 400 });
    w.pool.clusterChanged();
    assert.deepEqual(w.reporter.of("booted").map((e) => e.durationMs), [0]);
  });

  it("times a boot that straddles a restart from plugpool's record of the power-on", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    const recorded = w.records.powerOn("worker-1")?.at;
    assert.ok(recorded !== undefined);
    w.clock.advance(30 * S);
    w.restart();
    w.clock.advance(30 * S);
    w.register("worker-1");
    w.pool.clusterChanged();
    assert.deepEqual(w.reporter.of("booted").map((e) => e.durationMs), [w.clock.now() - recorded]);
  });
});
