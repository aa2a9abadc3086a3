// Which Shelly a Switch.Set reaches: before every one, in its slot, the device is asked Shelly.GetDeviceInfo and
// the device check is asked with its id and MAC; the cut guard comes last. A read that carries a device check asks
// the same way, in the Switch.GetStatus's slot.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createShellyPowerSwitch } from "../../../src/adapters/shelly/shelly-power-switch.ts";
import type { CutGuard, DeviceCheck } from "../../../src/domain/ports.ts";
import type { EmulatedShelly } from "../../harness/shelly-emulator/index.ts";
import { lease, swap } from "../../harness/lease.ts";
import { acceptAny, addressOf, allowCut, assertPlugError, emulate, expectDevice, rpcLog, timed } from "./support.ts";

const identityOf = (d: EmulatedShelly): string => `shelly ${d.id} mac ${d.mac}`;
const sets = (d: EmulatedShelly): string[] => rpcLog(d).filter((l) => l.startsWith("Switch.Set"));
const statusReads = (d: EmulatedShelly): string[] => rpcLog(d).filter((l) => l.startsWith("Switch.GetStatus"));

describe("createShellyPowerSwitch() and the device behind the address", () => {
  it("switches a device that answers with the id and MAC expected", async (t) => {
    const d = await emulate(t, { password: "pw" });
    const device = expectDevice(identityOf(d));
    assert.deepEqual(await createShellyPowerSwitch({ timeoutMs: 2000 }).turnOn(addressOf(d, 0, { password: "pw" }), { device }), { on: true });
    assert.equal(d.output(0), true);
    assert.match(identityOf(d), /^shelly shellyplusplugs-a0dd6c[0-9a-f]{6} mac A0DD6C[0-9A-F]{6}$/u);
  });

  it("sends no Switch.Set to a device that answers as another, and fails as a device mismatch", async (t) => {
    const [expected, other] = [await emulate(t), await emulate(t)];
    other.flip(0, true);
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 2000 }).turnOff(addressOf(other), allowCut, { device: expectDevice(identityOf(expected)) }));
    assertPlugError(error, "device-mismatch", new RegExp(`^turning off Shelly http://127\\.0\\.0\\.1:\\d+ switch 0: the device answers as ${identityOf(other)}, not as the device expected there; nothing was sent$`, "u"));
    assert.deepEqual(rpcLog(other), ["Shelly.GetDeviceInfo 200"]);
    assert.equal(other.output(0), true);
  });

  it("asks the device check with the device's slot held: a read asked for meanwhile waits for the Switch.Set", async (t) => {
    const d = await emulate(t);
    const power = createShellyPowerSwitch({ timeoutMs: 2000 });
    const slow: DeviceCheck = async (seen) => {
      await sleep(100);
      return seen.id === identityOf(d);
    };
    const switching = power.turnOn(addressOf(d), { device: slow });
    await sleep(30);
    await Promise.all([switching, power.read(addressOf(d))]);
    assert.deepEqual(rpcLog(d).slice(0, 3), ["Shelly.GetDeviceInfo 200", "Switch.Set 200", "Switch.GetStatus 200"]);
  });

  it("asks the cut guard after the device check, last before the switch-off", async (t) => {
    const d = await emulate(t, { switches: [{ output: true }] });
    const order: string[] = [];
    const device: DeviceCheck = () => Promise.resolve(order.push(`device; seen ${rpcLog(d).join(", ")}`) > 0);
    const guard: CutGuard = () => Promise.resolve(order.push(`guard; seen ${rpcLog(d).join(", ")}`) > 0);
    await createShellyPowerSwitch({ timeoutMs: 2000 }).turnOff(addressOf(d), guard, { device });
    assert.deepEqual(order, ["device; seen Shelly.GetDeviceInfo 200", "guard; seen Shelly.GetDeviceInfo 200"]);
  });

  it("sends nothing when Shelly.GetDeviceInfo answers without an id and MAC", async (t) => {
    const d = await emulate(t);
    await d.inject({ kind: "http500", rpc: "Shelly.GetDeviceInfo" });
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 1000 }).turnOn(addressOf(d), { device: acceptAny }));
    assertPlugError(error, "plug-unreachable", /Shelly\.GetDeviceInfo answered HTTP 500$/u);
    assert.deepEqual(sets(d), []);
  });
});

describe("createShellyPowerSwitch() reading with a device check", () => {
  it("reads the output and draw of the device expected, asked Shelly.GetDeviceInfo first, once", async (t) => {
    const d = await emulate(t, { password: "pw", switches: [{ output: true }] });
    d.setDraw(0, 80);
    const device = expectDevice(identityOf(d));
    assert.deepEqual(await createShellyPowerSwitch({ timeoutMs: 2000 }).read(addressOf(d, 0, { measure: true, password: "pw" }), { device }), { on: true, watts: 80 });
    // Asked once: the slot is held from the device's answer until the state is read, the challenge's resend included.
    assert.deepEqual(rpcLog(d), ["Shelly.GetDeviceInfo 200", "Switch.GetStatus 401", "Switch.GetStatus 200"]);
    assert.equal(device.seen.length, 1);
  });

  it("reads no state of a device that answers as another, and fails as a device mismatch", async (t) => {
    const [expected, other] = [await emulate(t), await emulate(t)];
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 2000 }).read(addressOf(other), { device: expectDevice(identityOf(expected)) }));
    assertPlugError(error, "device-mismatch", new RegExp(`^reading Shelly http://127\\.0\\.0\\.1:\\d+ switch 0: the device answers as ${identityOf(other)}, not as the device expected there; no state was taken from it$`, "u"));
    assert.deepEqual(rpcLog(other), ["Shelly.GetDeviceInfo 200"]);
  });

  it("asks the device check with the device's slot held: a Switch.Set asked for meanwhile waits for the read", async (t) => {
    const d = await emulate(t);
    const power = createShellyPowerSwitch({ timeoutMs: 2000 });
    const slow: DeviceCheck = async (seen) => {
      await sleep(100);
      return seen.id === identityOf(d);
    };
    const reading = power.read(addressOf(d), { device: slow });
    await sleep(30);
    const switching = power.turnOn(addressOf(d), { device: acceptAny });
    assert.deepEqual(await reading, { on: false });
    await switching;
    assert.deepEqual(rpcLog(d).slice(0, 4), ["Shelly.GetDeviceInfo 200", "Switch.GetStatus 200", "Shelly.GetDeviceInfo 200", "Switch.Set 200"]);
  });

  it("asks nothing of what the device is for a plain read: a Refresh costs what it did", async (t) => {
    const d = await emulate(t);
    await createShellyPowerSwitch({ timeoutMs: 2000 }).read(addressOf(d));
    assert.deepEqual(rpcLog(d), ["Switch.GetStatus 200"]);
  });
});

describe("two Shelly addresses swap while plugpool runs", () => {
  it("sends no Switch.Set to the wrong device, before and after plugpool restarts", async (t: TestContext) => {
    const [first, second] = [await emulate(t), await emulate(t)];
    const [leaseA, leaseB] = [await lease(first.url), await lease(second.url)];
    t.after(() => Promise.all([leaseA.close(), leaseB.close()]));
    const at = (url: string) => ({ ...addressOf(first), url, device: new URL(url).host });
    const [worker1, worker2] = [at(leaseA.url), at(leaseB.url)];
    const [device1, device2] = [expectDevice(identityOf(first)), expectDevice(identityOf(second))];
    const power = createShellyPowerSwitch({ timeoutMs: 2000 });
    await power.turnOn(worker1, { device: device1 });
    await power.turnOn(worker2, { device: device2 });
    swap(leaseA, leaseB);
    first.resetCalls();
    second.resetCalls();
    for (const switches of [power, createShellyPowerSwitch({ timeoutMs: 2000 })]) {
      for (const [worker, device] of [[worker1, device1], [worker2, device2]] as const) {
        const { error } = await timed(() => switches.turnOff(worker, allowCut, { device }));
        assertPlugError(error, "device-mismatch", /nothing was sent$/u);
      }
    }
    assert.deepEqual([sets(first), sets(second)], [[], []]);
    assert.deepEqual([first.output(0), second.output(0)], [true, true]);
  });

  it("reads no state of the wrong device when the read is checked", async (t: TestContext) => {
    const [first, second] = [await emulate(t), await emulate(t)];
    const [leaseA, leaseB] = [await lease(first.url), await lease(second.url)];
    t.after(() => Promise.all([leaseA.close(), leaseB.close()]));
    const at = (url: string) => ({ ...addressOf(first), url, device: new URL(url).host });
    const [worker1, worker2] = [at(leaseA.url), at(leaseB.url)];
    const [device1, device2] = [expectDevice(identityOf(first)), expectDevice(identityOf(second))];
    const power = createShellyPowerSwitch({ timeoutMs: 2000 });
    assert.deepEqual(await power.read(worker1, { device: device1 }), { on: false });
    swap(leaseA, leaseB);
    first.resetCalls();
    second.resetCalls();
    for (const [worker, device] of [[worker1, device1], [worker2, device2]] as const) {
      const { error } = await timed(() => power.read(worker, { device }));
      assertPlugError(error, "device-mismatch", /no state was taken from it$/u);
    }
    assert.deepEqual([statusReads(first), statusReads(second)], [[], []]);
  });
});
