import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { HOLD_ANNOTATION } from "../../src/domain/index.ts";
import { World } from "../harness/fakes/world.ts";
import { rejectsWith, throwsWith } from "../harness/fakes/assertions.ts";

const FOUR = { groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3", "worker-4"] }] };

/** Lets `n` turns of the event loop pass: answers of devices in flight arrive. */
async function turns(n: number): Promise<void> {
  for (let t = n; t > 0; t--) await new Promise((r) => setImmediate(r));
}

/**
 * IncreaseSize by 1 whose call ends as its switch-on is sent, which then waits at its device (and fails, when
 * `fails`) until the returned function is called.
 */
async function answeredWhileSwitchingOn(w: World, fails = false): Promise<() => void> {
  const release = w.power.holdNext("turnOn");
  if (fails) w.power.failNext("turnOn");
  const controller = new AbortController();
  w.power.onCall = (c) => {
    if (c.op === "turnOn") controller.abort();
  };
  await w.pool.increaseSize("workers", 1, { signal: controller.signal });
  w.power.onCall = undefined;
  return release;
}

function turnedOn(w: World): string[] {
  return w.power.callsOf("turnOn").map((c) => c.control.key.replace(/^plug-/, ""));
}

describe("Pool.increaseSize()", () => {
  it("switches on the first plugs known off, in config order, and counts them as creating", async () => {
    const w = new World(FOUR);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 2);
    assert.deepEqual(turnedOn(w), ["worker-1", "worker-2"]);
    assert.equal(w.pool.targetSize("workers"), 2);
    assert.deepEqual(
      w.pool.instances("workers").map((i) => [i.id, i.state]),
      [
        ["k3s://worker-1", "creating"],
        ["k3s://worker-2", "creating"],
      ],
    );
    assert.deepEqual(
      w.reporter.of("powered-on").map((e) => e.machine),
      ["worker-1", "worker-2"],
    );
  });

  it("rejects a delta that is not positive, or that would pass the maximum size, naming the numbers", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 2);
    await rejectsWith(w.pool.increaseSize("workers", 0), "invalid-argument");
    await rejectsWith(w.pool.increaseSize("workers", 2), "invalid-argument", /target size 2 \+ 2 .* maximum size 3/);
    assert.equal(w.power.callsOf("turnOn").length, 2);
  });

  it("rejects an unknown group", async () => {
    const w = new World();
    await rejectsWith(w.pool.increaseSize("nope", 1), "node-group-not-found");
    throwsWith(() => w.pool.targetSize("nope"), "node-group-not-found");
  });

  it("skips a plug that fails and takes the next candidate in a further round", async () => {
    const w = new World(FOUR);
    await w.pool.refresh();
    w.power.setFault(w.machine("worker-1").power, "unreachable");
    await w.pool.increaseSize("workers", 2);
    assert.deepEqual(turnedOn(w), ["worker-1", "worker-2", "worker-3"]);
    assert.equal(w.pool.targetSize("workers"), 2);
    assert.equal(w.reporter.of("power-on-failed")[0]?.machine, "worker-1");
  });

  it("names the failed plugs and keeps those that went on when fewer than delta could be switched on", async () => {
    const w = new World();
    await w.pool.refresh();
    w.power.setFault(w.machine("worker-2").power, "unreachable");
    w.power.setFault(w.machine("worker-3").power, "unreachable");
    await rejectsWith(
      w.pool.increaseSize("workers", 3),
      "plug-unreachable",
      /switched on 1 of 3; worker-2: .*plug of worker-2.*; worker-3: /,
    );
    assert.equal(w.pool.targetSize("workers"), 1);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
  });

  it("never uses a plug that has not been read successfully", async () => {
    const w = new World();
    await rejectsWith(w.pool.increaseSize("workers", 1), "plug-unreachable", /never read successfully: worker-1/);
    assert.equal(w.power.callsOf("turnOn").length, 0);
  });

  it("passes over held, registered, powering-off and already-wanted machines", async () => {
    const w = new World({
      groups: [{ id: "workers", machines: ["held", "up", "pod", "ann", "free"], hold: ["held"] }],
    });
    await w.pool.refresh();
    w.cluster.addNode({ name: "up", providerID: "other://up" });
    w.cluster.addPod({ machine: "pod", nodeName: "pod", startedAt: 0, phase: "Succeeded", terminating: true });
    w.cluster.addNode({ name: "ann", annotations: { [HOLD_ANNOTATION]: "true" } });
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(turnedOn(w), ["free"]);
    await rejectsWith(w.pool.increaseSize("workers", 1), "unsafe", /no further machine is usable/);
  });

  it("answers when the call's signal aborts while a switch-on goes on, counting it as a creating instance", async () => {
    const w = new World();
    await w.pool.refresh();
    const release = await answeredWhileSwitchingOn(w);
    assert.equal(w.pool.targetSize("workers"), 1);
    assert.deepEqual(w.pool.instances("workers").map((i) => [i.id, i.state, i.error]), [["k3s://worker-1", "creating", undefined]]);
    assert.equal(w.power.isOn(w.machine("worker-1").power), false, "still switching");
    // The group is not stuck, and the machine underway is not taken again.
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(turnedOn(w), ["worker-1", "worker-2"]);
    release();
    await turns(5);
    assert.ok(w.power.isOn(w.machine("worker-1").power), "the switch-on went on past the call");
    assert.deepEqual(w.reporter.of("powered-on").map((e) => e.machine).toSorted(), ["worker-1", "worker-2"]);
  });

  it("shows a switch-on that fails after the call answered as an error on its instance, and quarantines the machine", async () => {
    const w = new World();
    await w.pool.refresh();
    const release = await answeredWhileSwitchingOn(w, true);
    release();
    await turns(5);
    const instances = w.pool.instances("workers");
    assert.deepEqual(instances.map((i) => [i.id, i.state, i.error?.code]), [["k3s://worker-1", "creating", "plug-on-failed"]]);
    assert.match(instances[0]?.error?.message ?? "", /switching on the plug of worker-1 failed: /);
    assert.deepEqual(w.reporter.of("quarantined").map((e) => e.machine), ["worker-1"]);
    assert.equal(w.records.powerOn("worker-1"), undefined, "nothing was switched on: no licence is left");
  });

  it("fails, naming both, when one switch-on failed and the other was still going when the call ended", async () => {
    const w = new World();
    await w.pool.refresh();
    // worker-1's switch-on waits at its device; worker-2's fails at once; no third machine is left to try.
    const release = w.power.holdNext("turnOn");
    w.power.failNext("turnOn");
    const controller = new AbortController();
    const call = w.pool.increaseSize("workers", 2, { signal: controller.signal });
    await turns(5);
    controller.abort();
    await rejectsWith(call, "plug-unreachable", /^increasing node group "workers" by 2: switched on 0 of 2; still switching on when the call ended \(they go on\): worker-1; worker-2: /);
    release();
    await turns(5);
    assert.ok(w.power.isOn(w.machine("worker-1").power));
    assert.equal(w.pool.targetSize("workers"), 1);
  });

  it("serialises concurrent calls on one group so each sees the target the one before left", async () => {
    const w = new World();
    await w.pool.refresh();
    const results = await Promise.allSettled([w.pool.increaseSize("workers", 2), w.pool.increaseSize("workers", 2)]);
    assert.deepEqual(
      results.map((r) => r.status),
      ["fulfilled", "rejected"],
    );
    assert.equal(w.pool.targetSize("workers"), 2);
  });

  it("tries a plug whose last read failed only after the healthy ones", async () => {
    const w = new World();
    await w.pool.refresh();
    w.power.setFault(w.machine("worker-1").power, "unreachable");
    await w.pool.refresh();
    w.power.setFault(w.machine("worker-1").power, undefined);
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(w.power.callsOf("turnOn").map((c) => c.control.key), ["plug-worker-2"]);
    await w.pool.increaseSize("workers", 2);
    assert.deepEqual(w.power.callsOf("turnOn").map((c) => c.control.key).toSorted(), ["plug-worker-1", "plug-worker-2", "plug-worker-3"]);
  });
});
