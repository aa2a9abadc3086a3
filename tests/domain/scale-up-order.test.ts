import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ScaleUpOrder } from "../../src/domain/index.ts";
import { World } from "../harness/fakes/world.ts";

const S = 1000;
const MACHINES = ["worker-1", "worker-2", "worker-3", "worker-4"];

function world(order: ScaleUpOrder | undefined, idleWatts: Record<string, number> = {}, on: string[] = []): World {
  return new World({
    groups: [{ id: "workers", machines: MACHINES, idleWatts }],
    ...(order && { scaleUp: { maxPowerOnsPerInterval: 0, powerOnIntervalMs: 10_000, order } }),
    on,
    poweredByPlugpool: on,
  });
}

function turnedOn(w: World): string[] {
  return w.power.callsOf("turnOn").map((c) => c.control.key.replace(/^plug-/, ""));
}

/** Has each machine's plug on (switched by hand) for that many minutes, read once a minute, then off. */
async function use(w: World, minutes: Readonly<Record<string, number>>): Promise<void> {
  const longest = Math.max(...Object.values(minutes));
  for (const name of Object.keys(minutes)) w.power.set(w.machine(name).power, true);
  await w.pool.refresh();
  for (let minute = 1; minute <= longest + 1; minute++) {
    w.clock.advance(60 * S);
    for (const [name, m] of Object.entries(minutes)) if (minute > m) w.power.set(w.machine(name).power, false);
    await w.pool.refresh();
  }
}

describe("scale-up order", () => {
  it("is config order by default, whatever the machines' use and idle draw", async () => {
    const w = world(undefined, { "worker-1": 90, "worker-2": 10 });
    await use(w, { "worker-1": 30 });
    await w.pool.increaseSize("workers", 2);
    assert.deepEqual(turnedOn(w), ["worker-1", "worker-2"]);
  });

  it("least-used switches on the machines with the fewest seconds powered on first, ties in config order", async () => {
    const w = world("least-used");
    await use(w, { "worker-1": 30, "worker-2": 10, "worker-4": 20 });
    assert.deepEqual(
      w.pool.usage().map((u) => [u.machine, u.plug]),
      MACHINES.map((m) => [m, "off"]),
    );
    await w.pool.increaseSize("workers", 3);
    assert.deepEqual(turnedOn(w), ["worker-3", "worker-2", "worker-4"]);
  });

  it("least-used after a restart starts every machine at zero seconds: config order until it has seen use", async () => {
    const w = world("least-used");
    await use(w, { "worker-1": 30 });
    w.restart();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(turnedOn(w), ["worker-1"]);
  });

  it("efficient switches on the lowest idleWatts first, ties in config order, machines without it last", async () => {
    const w = world("efficient", { "worker-2": 40, "worker-3": 25, "worker-4": 25 });
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 4);
    assert.deepEqual(turnedOn(w), ["worker-3", "worker-4", "worker-2", "worker-1"]);
  });

  it("tries plugs whose last read failed last, before any order", async () => {
    const w = world("efficient", { "worker-1": 10, "worker-2": 20, "worker-3": 30, "worker-4": 40 });
    await w.pool.refresh();
    w.power.setFault(w.machine("worker-1").power, "unreachable");
    await w.pool.refresh();
    w.power.setFault(w.machine("worker-1").power, undefined);
    await w.pool.increaseSize("workers", 2);
    assert.deepEqual(turnedOn(w), ["worker-2", "worker-3"]);
  });

  it("least-used takes the next machine in its order in a further round when a plug fails", async () => {
    const w = world("least-used");
    await use(w, { "worker-1": 5, "worker-2": 3, "worker-3": 4 });
    w.power.failNext("turnOn");
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(turnedOn(w), ["worker-4", "worker-2"]);
  });
});
