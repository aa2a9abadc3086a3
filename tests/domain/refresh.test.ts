import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { PowerControl, PlugReading, PowerSwitch } from "../../src/domain/index.ts";
import { PlugpoolError, createPool } from "../../src/domain/index.ts";
import { World } from "../harness/fakes/world.ts";

describe("Pool.refresh()", () => {
  it("sends every read at once and never fails because of a plug", async () => {
    const w = new World({ on: ["worker-2"], poweredByPlugpool: ["worker-2"] });
    w.power.setFault(w.machine("worker-1").power, "unreachable");
    const done = w.pool.refresh();
    assert.equal(w.power.callsOf("read").length, 3);
    await done;
    assert.deepEqual(
      w.pool.instances("workers").map((i) => i.id),
      ["k3s://worker-2"],
    );
  });

  it("answers when the call ends while a plug has not answered yet, without counting it as a failed read", async () => {
    const w = new World({ on: ["worker-2"], poweredByPlugpool: ["worker-2"] });
    await w.pool.refresh();
    // The read waits at its device until released: a refresh that waited for it would never answer.
    const release = w.power.holdNext("read");
    const controller = new AbortController();
    const done = w.pool.refresh({ signal: controller.signal });
    controller.abort();
    await done;
    assert.deepEqual(w.reporter.of("plug-read-failed"), [], "a read still out is no failure");
    release();
  });

  it("keeps the last state of a plug that cannot be read, and reports a failure once per message", async () => {
    const w = new World({ on: ["worker-1"], poweredByPlugpool: ["worker-1"] });
    await w.pool.refresh();
    w.power.setFault(w.machine("worker-1").power, "unreachable");
    await w.pool.refresh();
    await w.pool.refresh();
    assert.equal(w.pool.targetSize("workers"), 1);
    assert.equal(w.reporter.of("plug-read-failed").length, 1);
    w.power.setFault(w.machine("worker-1").power, undefined);
    w.power.failNext("read", new PlugpoolError("plug-unauthorized", "plug of worker-1 answered 401"));
    await w.pool.refresh();
    assert.deepEqual(
      w.reporter.of("plug-read-failed").map((e) => e.error),
      ["read of plug of worker-1: timed out", "plug of worker-1 answered 401"],
    );
  });

  it("marks a boot as failed when a plug switched on reads off again before the machine registered", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.power.set(w.machine("worker-1").power, false);
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), [
      {
        id: "k3s://worker-1",
        state: "creating",
        error: {
          code: "plug-off-while-booting",
          message: "plug of worker-1 reads off again before the machine registered",
        },
      },
    ]);
    assert.equal(w.pool.targetSize("workers"), 1);
  });

  it("forgets the wish once the machine registered, so a later plug-off is no boot failure", async () => {
    const w = new World();
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    w.register("worker-1");
    await w.pool.refresh();
    w.power.set(w.machine("worker-1").power, false);
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), [{ id: "k3s://worker-1", state: "running" }]);
    assert.deepEqual(
      w.reporter.of("unexpected-power").map((e) => e.detail),
      ["plug of worker-1 reads off under a Ready node; switching it back on"],
    );
    await w.pool.refresh();
    assert.equal(w.reporter.of("unexpected-power").length, 1);
    assert.equal(w.power.callsOf("turnOff").length, 0);
  });

  it("leaves a plug found on that plugpool did not switch on out of view, and reports it once per transition", async () => {
    const w = new World();
    await w.pool.refresh();
    w.power.set(w.machine("worker-3").power, true);
    await w.pool.refresh();
    await w.pool.refresh();
    assert.deepEqual(w.pool.instances("workers"), []);
    assert.deepEqual(w.pool.poweredOutside(), ["worker-3"]);
    assert.equal(w.reporter.of("powered-outside").length, 1);
    // Off and on again is a new transition.
    w.power.set(w.machine("worker-3").power, false);
    await w.pool.refresh();
    w.power.set(w.machine("worker-3").power, true);
    await w.pool.refresh();
    assert.equal(w.reporter.of("powered-outside").length, 2);
  });

  it("reports a Node named like a machine with a foreign providerID once per distinct value", async () => {
    const w = new World();
    w.cluster.addNode({ name: "worker-1", providerID: "aws:///i-1" });
    await w.pool.refresh();
    await w.pool.refresh();
    w.cluster.update("worker-1", () => ({ providerID: "aws:///i-2" }));
    await w.pool.refresh();
    assert.deepEqual(w.reporter.of("provider-id-mismatch"), [
      { type: "provider-id-mismatch", machine: "worker-1", providerID: "aws:///i-1", expected: "k3s://worker-1" },
      { type: "provider-id-mismatch", machine: "worker-1", providerID: "aws:///i-2", expected: "k3s://worker-1" },
    ]);
  });

  it("drops a reading that was overtaken by a switch answer", async () => {
    const w = new World();
    let answerRead: (r: PlugReading) => void = () => undefined;
    const slowReads: PowerSwitch = {
      read: (control: PowerControl) =>
        control.key.includes("worker-1")
          ? new Promise((resolve) => {
              answerRead = resolve;
            })
          : w.power.read(control),
      turnOn: (plug, options) => w.power.turnOn(plug, options),
      turnOff: (plug, mayCut, options) => w.power.turnOff(plug, mayCut, options),
    };
    const deps = {
      clock: w.clock,
      power: slowReads,
      cluster: w.cluster,
      lookup: w.cluster,
      teardown: w.cluster,
      records: w.records,
      reporter: w.reporter,
    };
    const pool = createPool(deps, w.config);
    const first = pool.refresh();
    answerRead({ on: false });
    await first;
    const second = pool.refresh();
    await pool.increaseSize("workers", 1);
    // The read was sent before the plug went on; applied now, it would look like a failed boot.
    answerRead({ on: false });
    await second;
    assert.deepEqual(pool.instances("workers"), [{ id: "k3s://worker-1", state: "creating" }]);
  });
});
