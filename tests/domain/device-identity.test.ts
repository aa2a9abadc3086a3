// A device is known by what it says it is, not by its address: before every switch command the device is asked,
// in the command's own slot, and a device that answers as another gets nothing.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { deviceCheck, deviceMismatchOf } from "../../src/domain/device-identity.ts";
import { World } from "../harness/fakes/world.ts";

/** worker-1 and worker-2, both switched on once by plugpool (so both devices are known), neither registered. */
async function bothKnown(): Promise<World> {
  const w = new World({ groups: [{ id: "workers", machines: ["worker-1", "worker-2", "worker-3"] }] });
  await w.pool.refresh();
  await w.pool.increaseSize("workers", 2);
  return w;
}

describe("device identity", () => {
  it("learns each device's identity at first contact, its first read, and stores it on the records", async () => {
    const w = new World();
    await w.pool.refresh();
    for (const m of w.machines()) assert.equal(w.records.deviceIdentity(m.name), w.power.identityOf(m.power));
    assert.deepEqual(w.reporter.of("device-learned").map((e) => e.machine), ["worker-1", "worker-2", "worker-3"]);
    // Known from then on: later reads are plain ones, and the switch commands are checked.
    await w.pool.refresh();
    assert.equal(w.reporter.of("device-learned").length, 3);
  });

  it("takes no reading from a device whose identity cannot be stored, so switches nothing through it", async () => {
    const w = new World();
    w.records.failNextIdentities(1);
    await w.pool.refresh();
    await w.pool.increaseSize("workers", 1);
    assert.equal(w.power.isOn(w.machine("worker-1").power), false);
    assert.equal(w.power.isOn(w.machine("worker-2").power), true);
    assert.equal(w.reporter.of("device-not-recorded").length, 1);
  });

  it("two addresses swapped: DeleteNodes of an unregistered machine reaches the other machine's device and cuts nothing", async () => {
    const w = await bothKnown();
    const [one, two] = [w.machine("worker-1").power, w.machine("worker-2").power];
    w.power.swapAddresses(one, two);
    const reached: string[] = [];
    w.power.onArrival = (a) => reached.push(`${a.op} ${a.device}`);
    await assert.rejects(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), { code: "unsafe", message: /device/ });
    assert.deepEqual(reached, []);
    assert.ok(w.power.isOn(one) && w.power.isOn(two), "both machines keep their power");
    const [mismatch] = w.reporter.of("device-mismatch");
    assert.equal(mismatch?.machine, "worker-1");
    assert.equal(mismatch.expected, w.power.identityOf(one));
    assert.equal(mismatch.seen, w.power.identityOf(two));
  });

  it("a machine whose device answered as another is held: no instance, never chosen, never powered off", async () => {
    const w = await bothKnown();
    const [one, two] = [w.machine("worker-1").power, w.machine("worker-2").power];
    w.power.swapAddresses(one, two);
    await assert.rejects(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]));
    assert.deepEqual(w.pool.instances("workers").map((i) => i.id), ["k3s://worker-2"]);
    assert.equal(w.pool.nodeGroupForNode(w.ref("worker-1")), undefined);
    await assert.rejects(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), { code: "unsafe", message: /held/ });
    assert.equal(w.reporter.of("device-mismatch").length, 1, "reported once per identity seen");
  });

  it("two addresses swapped mid power-off: the cut reaches no device, and the running machine behind the address keeps its power", async () => {
    const w = new World({ on: ["worker-1", "worker-2"] });
    const [one, two] = [w.machine("worker-1").power, w.machine("worker-2").power];
    // Both devices were met before (a restore, an earlier power-off): their identities are on the records.
    await w.records.recordDeviceIdentity("worker-1", w.power.identityOf(one));
    await w.records.recordDeviceIdentity("worker-2", w.power.identityOf(two));
    w.registerTainted("worker-1");
    w.register("worker-2");
    await w.pool.refresh();
    await w.pool.deleteNodes("workers", [w.ref("worker-1")]);
    await w.pool.reconcile();
    w.cluster.setReady("worker-1", false);
    w.power.swapAddresses(one, two);
    const reached: string[] = [];
    w.power.onArrival = (a) => reached.push(`${a.op} ${a.device}`);
    await w.drive();
    assert.deepEqual(reached, []);
    assert.ok(w.power.isOn(two), "worker-2, Ready and untainted, keeps its power");
    assert.equal(w.reporter.of("device-mismatch")[0]?.machine, "worker-1");
    assert.ok(w.reporter.of("power-off-aborted").some((e) => e.machine === "worker-1"));
  });

  it("across a restart: the identity learned before is kept with the records, so a swap found after the restart cuts nothing", async () => {
    const w = await bothKnown();
    const [one, two] = [w.machine("worker-1").power, w.machine("worker-2").power];
    w.power.swapAddresses(one, two);
    w.restart();
    await w.pool.refresh();
    const reached: string[] = [];
    w.power.onArrival = (a) => reached.push(`${a.op} ${a.device}`);
    await assert.rejects(w.pool.decreaseTargetSize("workers", -2));
    await assert.rejects(w.pool.deleteNodes("workers", [w.fakeRef("worker-2")]));
    assert.deepEqual(reached, []);
    assert.ok(w.power.isOn(one) && w.power.isOn(two));
  });

  it("a pinned identity wins over a learned one: a device that answers otherwise is refused at first contact, and pinning the new one accepts it", async () => {
    const pinned = new World({ groups: [{ id: "workers", machines: ["worker-1"], identities: { "worker-1": "device plug-worker-1-old" } }] });
    await pinned.pool.refresh();
    await assert.rejects(pinned.pool.increaseSize("workers", 1));
    assert.equal(pinned.power.isOn(pinned.machine("worker-1").power), false);
    assert.equal(pinned.records.deviceIdentity("worker-1"), undefined, "nothing learned over a pinned identity");
    const accepted = new World({ groups: [{ id: "workers", machines: ["worker-1"], identities: { "worker-1": "device plug-worker-1" } }] });
    await accepted.records.recordDeviceIdentity("worker-1", "device plug-worker-1-old");
    await accepted.pool.refresh();
    await accepted.pool.increaseSize("workers", 1);
    assert.ok(accepted.power.isOn(accepted.machine("worker-1").power));
  });

  it("met for the first time, a device that answers as another machine's known device is not learned, and its machine is held", async () => {
    const w = new World();
    const [one, two] = [w.machine("worker-1").power, w.machine("worker-2").power];
    // worker-1's device was met by an earlier run; worker-2's never was, and its address now reaches worker-1's.
    await w.records.recordDeviceIdentity("worker-1", w.power.identityOf(one));
    w.power.swapAddresses(one, two);
    await w.pool.refresh();
    assert.equal(w.records.deviceIdentity("worker-2"), undefined);
    assert.deepEqual(w.reporter.of("device-duplicate").map((e) => [e.machine, e.other]), [["worker-2", "worker-1"]]);
    assert.ok(!w.pool.instances("workers").some((i) => i.id === "k3s://worker-2"));
    const reached: string[] = [];
    w.power.onArrival = (a) => reached.push(`${a.op} ${a.device}`);
    await w.pool.increaseSize("workers", 1);
    assert.deepEqual(reached, ["turnOn plug-worker-3"], "worker-1's address reaches worker-2's device: refused; worker-2 is held");
  });

  it("a replaced device is a mismatch until its identity is pinned", async () => {
    const w = await bothKnown();
    const one = w.machine("worker-1").power;
    w.power.replaceDevice(one, "device replacement");
    await assert.rejects(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]));
    assert.ok(w.power.isOn(one));
    assert.equal(w.reporter.of("device-mismatch")[0]?.seen, "device replacement");
  });

  it("a device that restarted since plugpool switched it on licenses no cut: its relay may have come up off and been switched on by hand", async () => {
    const w = await bothKnown();
    const one = w.machine("worker-1").power;
    w.power.restartDevice(one, true);
    await assert.rejects(w.pool.deleteNodes("workers", [w.fakeRef("worker-1")]), { code: "unsafe" });
    assert.ok(w.power.isOn(one));
    assert.equal(w.reporter.of("device-restarted")[0]?.machine, "worker-1");
    assert.equal(w.records.powerOn("worker-1"), undefined, "plugpool's power-on record ended");
  });

  it("a device heard twice within one second (the same uptime) has not restarted, and a known device is not learned anew", async () => {
    const w = await bothKnown();
    assert.equal(w.reporter.of("device-restarted").length, 0);
    assert.ok(w.records.powerOn("worker-1"), "plugpool's power-on record kept");
    assert.equal(w.reporter.of("device-learned").length, 3, "learned at the first read only, confirmed at the switch-on");
  });

  it("tells once that a device met for the first time answers as another machine's, however often it is read", async () => {
    const w = new World();
    const [one, two] = [w.machine("worker-1").power, w.machine("worker-2").power];
    await w.records.recordDeviceIdentity("worker-1", w.power.identityOf(one));
    w.power.swapAddresses(one, two);
    await w.pool.refresh();
    await w.pool.refresh();
    assert.equal(w.power.callsOf("read").filter((c) => c.control.key === two.key).length, 2, "asked at each read");
    assert.equal(w.reporter.of("device-duplicate").length, 1);
  });

  describe("the check itself", () => {
    it("refuses a device met for the first time that answers as another machine's, and says which", async () => {
      const w = new World();
      const ctx = w.context();
      await w.records.recordDeviceIdentity("worker-1", "plug-a");
      const check = deviceCheck(ctx, w.machine("worker-2"));
      assert.equal(await check({ id: "plug-a" }), false);
      assert.deepEqual(deviceMismatchOf(ctx, w.machine("worker-2")), { expected: "a device of its own (worker-1's answers as plug-a)", seen: "plug-a" });
      assert.equal(w.records.deviceIdentity("worker-2"), undefined, "not learned");
    });

    it("refuses a known device that answers as another, tells it once per identity seen, and remembers what it saw", async () => {
      const w = new World();
      const ctx = w.context();
      await w.records.recordDeviceIdentity("worker-1", "plug-a");
      const check = deviceCheck(ctx, w.machine("worker-1"));
      assert.equal(await check({ id: "plug-b" }), false);
      assert.equal(await check({ id: "plug-b" }), false);
      assert.deepEqual(deviceMismatchOf(ctx, w.machine("worker-1")), { expected: "plug-a", seen: "plug-b" });
      assert.equal(await check({ id: "plug-c" }), false);
      assert.deepEqual(
        w.reporter.of("device-mismatch").map((e) => [e.expected, e.seen]),
        [["plug-a", "plug-b"], ["plug-a", "plug-c"]],
      );
      assert.equal(await check({ id: "plug-a" }), true, "the expected device goes ahead");
    });

    it("takes a device that stops telling its uptime for one that has not restarted", async () => {
      const w = new World();
      const ctx = w.context();
      await w.records.recordDeviceIdentity("worker-1", "plug-a");
      const check = deviceCheck(ctx, w.machine("worker-1"));
      assert.equal(await check({ id: "plug-a", uptimeSeconds: 500 }), true);
      assert.equal(await check({ id: "plug-a" }), true);
      assert.deepEqual(w.reporter.of("device-restarted"), []);
      assert.equal(await check({ id: "plug-a", uptimeSeconds: 10 }), true);
      assert.deepEqual(w.reporter.of("device-restarted"), [], "nothing to compare with: the uptime before was not told");
    });
  });
});
