// Which device a switch command reaches: before every command, in the command's slot, the plug's /events stream
// is read up to its first ping and the device check is asked with the name it gives; the cut guard comes last. A
// read that carries a device check hears the name the same way, in the relay read's slot.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import type { CutGuard, DeviceCheck } from "../../../src/domain/ports.ts";
import { PlugpoolError } from "../../../src/domain/errors.ts";
import type { EmulatedPlug, PlugEmulatorOptions } from "../../harness/plug-emulator/index.ts";
import { lease, swap } from "../../harness/lease.ts";
import { acceptAny, addressOf, allowCut, assertPlugError, emulate, eventually, expectDevice, requests, timed } from "./support.ts";

async function setup(t: TestContext, opts: PlugEmulatorOptions = {}, timeoutMs = 1000) {
  const plug = await emulate(t, { switchDelayMs: 10, ...opts });
  const power = createEsphomePowerSwitch({ timeoutMs, credentialsFor: () => ({ username: "admin", password: "identity-pw" }) });
  return { plug, power, relay: addressOf(plug.url) };
}

const posts = (plug: EmulatedPlug): string[] => requests(plug).filter((r) => r.startsWith("POST"));

describe("createEsphomePowerSwitch() and the device behind the address", () => {
  it("switches a device that answers with the name expected", async (t) => {
    const { plug, power, relay } = await setup(t, { name: "plug-worker-1" });
    const device = expectDevice('name "plug-worker-1"');
    assert.deepEqual(await power.turnOn(relay, { device }), { on: true });
    assert.equal(plug.state("Relay"), true);
    assert.equal(device.seen.length, 1);
  });

  for (const platform of ["esp32", "esp8266"] as const) {
    it(`sends nothing to a device that answers as another, and fails as a device mismatch (${platform})`, async (t) => {
      const { plug, power, relay } = await setup(t, { platform, name: "plug-worker-2" });
      plug.setState("Relay", true);
      const { error } = await timed(() => power.turnOff(relay, allowCut, { device: expectDevice('name "plug-worker-1"') }));
      assertPlugError(error, "device-mismatch", /^turning off plug http:\/\/127\.0\.0\.1:\d+ switch "Relay": the device answers as name "plug-worker-2", not as the device expected there; nothing was sent$/);
      assert.deepEqual(requests(plug), ["GET /events"]);
      assert.equal(plug.state("Relay"), true);
      await eventually(() => plug.openStreams === 0);
    });
  }

  it("sends nothing when the device check fails, and keeps none of its text", async (t) => {
    const { plug, power, relay } = await setup(t);
    const failing: DeviceCheck = () => Promise.reject(new Error("apiserver said no: Bearer k8s-token"));
    const { error } = await timed(() => power.turnOn(relay, { device: failing }));
    assertPlugError(error, "device-mismatch", /the device answers as name "plug-\d+", which could not be checked against the device expected there; nothing was sent$/);
    assert.deepEqual(posts(plug), []);
    assert.doesNotMatch(String((error as Error).cause), /k8s-token/);
  });

  it("passes on a device check or cut guard that finds this instance no longer acting, sending nothing", async (t) => {
    const { plug, power, relay } = await setup(t);
    plug.setState("Relay", true);
    const passive = () => Promise.reject(new PlugpoolError("not-leader", "switching off worker-1: another plugpool acts (plugpool-b_1)"));
    const checked = await timed(() => power.turnOn(relay, { device: passive }));
    assertPlugError(checked.error, "not-leader", /: switching off worker-1: another plugpool acts \(plugpool-b_1\); nothing was sent$/);
    const guarded = await timed(() => power.turnOff(relay, passive, { device: acceptAny }));
    assertPlugError(guarded.error, "not-leader", /another plugpool acts \(plugpool-b_1\); nothing was sent$/);
    assert.deepEqual(posts(plug), []);
    assert.equal(plug.state("Relay"), true);
  });

  it("caps the name a message shows", async (t) => {
    const { power, relay } = await setup(t, { name: "x".repeat(250) });
    const { error } = await timed(() => power.turnOn(relay, { device: () => Promise.resolve(false) }));
    assertPlugError(error, "device-mismatch", /answers as name "x{114}…, not as/);
  });

  it("asks the device check with the device's slot held: a read asked for meanwhile waits for the command", async (t) => {
    const { plug, power, relay } = await setup(t);
    const slow: DeviceCheck = async (seen) => {
      await sleep(100);
      return seen.id === `name "${plug.name}"`;
    };
    const switching = power.turnOn(relay, { device: slow });
    await eventually(() => plug.calls.length === 1);
    const reading = power.read(relay);
    await Promise.all([switching, reading]);
    assert.deepEqual(requests(plug).slice(0, 3), ["GET /events", "POST /switch/Relay/turn_on", "GET /switch/Relay"]);
  });

  it("asks the cut guard after the device check, last before the switch-off", async (t) => {
    const { plug, power, relay } = await setup(t);
    plug.setState("Relay", true);
    const order: string[] = [];
    const device: DeviceCheck = () => Promise.resolve(order.push(`device; seen ${requests(plug).join(", ")}`) > 0);
    const guard: CutGuard = () => Promise.resolve(order.push(`guard; seen ${requests(plug).join(", ")}`) > 0);
    assert.deepEqual(await power.turnOff(relay, guard, { device }), { on: false });
    assert.deepEqual(order, ["device; seen GET /events", "guard; seen GET /events"]);
  });

  it("does not ask the cut guard when the device answers as another", async (t) => {
    const { power, relay } = await setup(t);
    let asked = false;
    const guard: CutGuard = () => Promise.resolve((asked = true));
    const { error } = await timed(() => power.turnOff(relay, guard, { device: () => Promise.resolve(false) }));
    assertPlugError(error, "device-mismatch", /nothing was sent$/);
    assert.equal(asked, false);
  });

  it("reads no identity for a read: reads stay as cheap as they were", async (t) => {
    const { plug, power, relay } = await setup(t);
    await power.read(relay);
    assert.deepEqual(requests(plug), ["GET /switch/Relay"]);
  });
});

describe("createEsphomePowerSwitch() reading with a device check", () => {
  it("reads the relay of the device expected, its name heard first in the read's slot", async (t) => {
    const { plug, power, relay } = await setup(t, { name: "plug-worker-1" });
    plug.setState("Relay", true);
    const device = expectDevice('name "plug-worker-1"');
    assert.deepEqual(await power.read(relay, { device }), { on: true });
    assert.deepEqual(requests(plug), ["GET /events", "GET /switch/Relay"]);
    assert.equal(device.seen.length, 1);
  });

  it("reads the sensor after the checked relay, as a plain read does", async (t) => {
    const plug = await emulate(t, { name: "plug-worker-1", switches: [{ name: "Relay", powerSensor: "Power", watts: 40 }] });
    plug.setState("Relay", true);
    const power = createEsphomePowerSwitch({ timeoutMs: 1000 });
    assert.deepEqual(await power.read(addressOf(plug.url, "Relay", "Power"), { device: expectDevice('name "plug-worker-1"') }), { on: true, watts: 40 });
    assert.deepEqual(requests(plug), ["GET /events", "GET /switch/Relay", "GET /sensor/Power"]);
  });

  for (const platform of ["esp32", "esp8266"] as const) {
    it(`reads no state of a device that answers as another, and fails as a device mismatch (${platform})`, async (t) => {
      const { plug, power, relay } = await setup(t, { platform, name: "plug-worker-2" });
      const { error } = await timed(() => power.read(relay, { device: expectDevice('name "plug-worker-1"') }));
      assertPlugError(error, "device-mismatch", /^reading plug http:\/\/127\.0\.0\.1:\d+ switch "Relay": the device answers as name "plug-worker-2", not as the device expected there; no state was taken from it$/);
      assert.deepEqual(requests(plug), ["GET /events"]);
      await eventually(() => plug.openStreams === 0);
    });
  }

  it("reads no state when the device check fails", async (t) => {
    const { plug, power, relay } = await setup(t);
    const { error } = await timed(() => power.read(relay, { device: () => Promise.reject(new Error("apiserver down")) }));
    assertPlugError(error, "device-mismatch", /which could not be checked against the device expected there; no state was taken from it$/);
    assert.deepEqual(requests(plug), ["GET /events"]);
  });

  it("asks the device check with the device's slot held: a command asked for meanwhile waits for the read", async (t) => {
    const { plug, power, relay } = await setup(t);
    const slow: DeviceCheck = async (seen) => {
      await sleep(100);
      return seen.id === `name "${plug.name}"`;
    };
    const reading = power.read(relay, { device: slow });
    await eventually(() => plug.calls.length === 1);
    const switching = power.turnOn(relay, { device: acceptAny });
    assert.deepEqual(await reading, { on: false });
    await switching;
    assert.deepEqual(requests(plug).slice(0, 4), ["GET /events", "GET /switch/Relay", "GET /events", "POST /switch/Relay/turn_on"]);
  });
});

describe("createEsphomePowerSwitch() reading /events", () => {
  for (const platform of ["esp32", "esp8266"] as const) {
    it(`fails within the deadline, sending nothing, when the stream never sends a ping (${platform})`, async (t) => {
      const { plug, power, relay } = await setup(t, { platform, ping: "none" }, 300);
      const { error, ms } = await timed(() => power.turnOn(relay, { device: acceptAny }));
      assertPlugError(error, "plug-unreachable", /switch "Relay": timed out after 300 ms$/);
      assert.ok(ms < 500, `took ${ms} ms`);
      assert.deepEqual(requests(plug), ["GET /events"]);
      await eventually(() => plug.openStreams === 0);
    });
  }

  it("fails as a bad answer, sending nothing, when the first ping has no data", async (t) => {
    const { plug, power, relay } = await setup(t, { ping: "bare" });
    let asked = false;
    const { error } = await timed(() => power.turnOn(relay, { device: () => Promise.resolve((asked = true)) }));
    assertPlugError(error, "plug-bad-answer", /GET \/events opened with a ping without data: the device does not tell its name, so no switch command is sent to it$/);
    assert.equal(asked, false);
    assert.deepEqual(posts(plug), []);
  });

  it("refuses a name that holds the password, as an answer that echoes the request would", async (t) => {
    const { plug, power, relay } = await setup(t, { name: "plug identity-pw", auth: { type: "basic", username: "admin", password: "identity-pw" } });
    const { error } = await timed(() => power.turnOn(relay, { device: acceptAny }));
    assertPlugError(error, "plug-bad-answer", /GET \/events opened with a ping without a title plugpool can use/);
    assert.doesNotMatch((error as Error).message, /identity-pw/);
    assert.deepEqual(posts(plug), []);
  });

  it("answers a challenge on /events as on any other path", async (t) => {
    const { plug, power, relay } = await setup(t, { version: "2026.7", platform: "esp32", auth: { type: "digest", username: "admin", password: "identity-pw" } });
    assert.deepEqual(await power.turnOn(relay, { device: expectDevice(`name "${plug.name}"`) }), { on: true });
    assert.deepEqual(plug.calls.slice(0, 3).map((c) => [c.path, c.auth, c.status]), [["/events", "none", 401], ["/events", "digest", 200], ["/switch/Relay/turn_on", "digest", 200]]);
  });

  it("tells the uptime, which starts again when the device reboots", async (t) => {
    const { plug, power, relay } = await setup(t);
    await sleep(1100);
    const before = (await power.probe(relay)).identity.uptimeSeconds ?? -1;
    await plug.inject({ kind: "reboot" });
    const after = (await power.probe(relay)).identity.uptimeSeconds ?? -1;
    assert.ok(before >= 1 && after === 0, `uptime ${before} s, then ${after} s after the reboot`);
  });
});

describe("two plug addresses swap while plugpool runs", () => {
  async function swapped(t: TestContext) {
    const [plugA, plugB] = [await emulate(t, { name: "plug-worker-1" }), await emulate(t, { name: "plug-worker-2" })];
    const [leaseA, leaseB] = [await lease(plugA.url), await lease(plugB.url)];
    t.after(() => Promise.all([leaseA.close(), leaseB.close()]));
    const [worker1, worker2] = [addressOf(leaseA.url), addressOf(leaseB.url)];
    const [device1, device2] = [expectDevice('name "plug-worker-1"'), expectDevice('name "plug-worker-2"')];
    return { plugA, plugB, leaseA, leaseB, worker1, worker2, device1, device2 };
  }

  it("sends no switch command to the wrong device", async (t) => {
    const { plugA, plugB, leaseA, leaseB, worker1, worker2, device1, device2 } = await swapped(t);
    const power = createEsphomePowerSwitch({ timeoutMs: 1000 });
    assert.deepEqual(await power.turnOn(worker1, { device: device1 }), { on: true });
    assert.deepEqual(await power.turnOn(worker2, { device: device2 }), { on: true });
    swap(leaseA, leaseB);
    plugA.resetCalls();
    plugB.resetCalls();
    for (const [worker, device] of [[worker1, device1], [worker2, device2]] as const) {
      const { error } = await timed(() => power.turnOff(worker, allowCut, { device }));
      assertPlugError(error, "device-mismatch", /nothing was sent$/);
    }
    assert.deepEqual([posts(plugA), posts(plugB)], [[], []]);
    assert.deepEqual([plugA.state("Relay"), plugB.state("Relay")], [true, true]);
  });

  it("sends no switch command to the wrong device after plugpool restarts", async (t) => {
    const { plugA, plugB, leaseA, leaseB, worker1, device1 } = await swapped(t);
    await createEsphomePowerSwitch({ timeoutMs: 1000 }).turnOn(worker1, { device: device1 });
    swap(leaseA, leaseB);
    const restarted = createEsphomePowerSwitch({ timeoutMs: 1000 });
    const { error } = await timed(() => restarted.turnOff(worker1, allowCut, { device: device1 }));
    assertPlugError(error, "device-mismatch", /answers as name "plug-worker-2"/);
    assert.deepEqual([posts(plugA), posts(plugB)], [["POST /switch/Relay/turn_on"], []]);
  });

  it("reads no state of the wrong device when the read is checked", async (t) => {
    const { plugA, plugB, leaseA, leaseB, worker1, worker2, device1, device2 } = await swapped(t);
    const power = createEsphomePowerSwitch({ timeoutMs: 1000 });
    assert.deepEqual(await power.read(worker1, { device: device1 }), { on: false });
    swap(leaseA, leaseB);
    plugA.resetCalls();
    plugB.resetCalls();
    for (const [worker, device] of [[worker1, device1], [worker2, device2]] as const) {
      const { error } = await timed(() => power.read(worker, { device }));
      assertPlugError(error, "device-mismatch", /^reading plug .*: the device answers as name "plug-worker-\d", not as the device expected there; no state was taken from it$/);
    }
    assert.deepEqual([requests(plugA), requests(plugB)], [["GET /events"], ["GET /events"]]);
  });
});
