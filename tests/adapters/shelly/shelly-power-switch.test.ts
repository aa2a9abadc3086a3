// The Shelly power switch against the emulated device: each generation, with and without a password.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createShellyPowerSwitch } from "../../../src/adapters/shelly/shelly-power-switch.ts";
import type { Firmware, Gen } from "../../harness/shelly-emulator/index.ts";
import { acceptAny, addressOf, allowCut, emulate, rpcLog } from "./support.ts";

const VARIANTS: readonly { gen: Gen; firmware: Firmware }[] = [
  { gen: 2, firmware: "1.x" },
  { gen: 2, firmware: "2.x" },
  { gen: 3, firmware: "2.x" },
  { gen: 4, firmware: "2.x" },
];

describe("createShellyPowerSwitch()", () => {
  for (const { gen, firmware } of VARIANTS) {
    for (const password of [undefined, "pw-of-the-plug"]) {
      describe(`Gen${gen}, firmware ${firmware}, ${password === undefined ? "no password" : "a password"}`, () => {
        it("reads the output and, with measure, apower as watts", async (t) => {
          const d = await emulate(t, { gen, firmware, ...(password && { password }), switches: [{}, { output: true }] });
          d.setDraw(1, 312.5);
          const power = createShellyPowerSwitch({ timeoutMs: 2000 });
          assert.deepEqual(await power.read(addressOf(d, 1, { measure: true, ...(password && { password }) })), { on: true, watts: 312.5 });
          assert.deepEqual(await power.read(addressOf(d, 0, { ...(password && { password }) })), { on: false });
        });

        it("switches on and off and confirms each by reading back", async (t) => {
          const d = await emulate(t, { gen, firmware, ...(password && { password }) });
          d.setDraw(0, 95);
          const power = createShellyPowerSwitch({ timeoutMs: 2000 });
          const address = addressOf(d, 0, { measure: true, ...(password && { password }) });
          assert.deepEqual(await power.turnOn(address, { device: acceptAny }), { on: true, watts: 95 });
          assert.equal(d.output(0), true);
          assert.deepEqual(await power.turnOff(address, allowCut, { device: acceptAny }), { on: false, watts: 0 });
          assert.equal(d.output(0), false);
          const command = ["Shelly.GetDeviceInfo 200", "Switch.Set 200", "Switch.GetStatus 200"];
          // A Switch.Set sent again after a challenge hears the device again first.
          const answered = rpcLog(d).filter((l) => !l.endsWith("401"));
          assert.deepEqual(answered.filter((l, i) => l !== answered[i - 1]), [...command, ...command]);
        });

        it("probes generation, model, firmware and whether a password protects the device", async (t) => {
          const d = await emulate(t, { gen, firmware, ...(password && { password }) });
          const probe = await createShellyPowerSwitch({ timeoutMs: 2000 }).probe(addressOf(d, 0, { measure: true, ...(password && { password }) }));
          assert.equal(probe.gen, gen);
          assert.match(probe.model ?? "", /^S/u);
          assert.equal(probe.firmware, firmware === "1.x" ? "1.4.4" : "2.0.1");
          assert.equal(probe.auth, password === undefined ? "off" : "on");
          assert.equal(probe.state, "off");
          assert.equal(probe.watts, 0);
          assert.deepEqual(probe.identity, { id: `shelly ${d.id} mac ${d.mac}` });
        });
      });
    }
  }

  it("answers firmware 2.x's challenge once and reuses its nonce; firmware 1.x is asked each time", async (t) => {
    const newer = await emulate(t, { gen: 3, password: "pw" });
    const older = await emulate(t, { gen: 2, firmware: "1.x", password: "pw" });
    const power = createShellyPowerSwitch({ timeoutMs: 2000 });
    for (let i = 0; i < 3; i++) {
      await power.read(addressOf(newer, 0, { password: "pw" }));
      await power.read(addressOf(older, 0, { password: "pw" }));
    }
    assert.deepEqual(rpcLog(newer), ["Switch.GetStatus 401", "Switch.GetStatus 200", "Switch.GetStatus 200", "Switch.GetStatus 200"]);
    assert.equal(rpcLog(older).filter((l) => l.endsWith("401")).length, 3);
    assert.ok(newer.calls.slice(1).every((c) => c.auth === "header"));
  });

  it("answers a new challenge when the device forgot its nonce (a reboot, an hour gone by)", async (t) => {
    const d = await emulate(t, { gen: 4, password: "pw" });
    const power = createShellyPowerSwitch({ timeoutMs: 2000 });
    await power.read(addressOf(d, 0, { password: "pw" }));
    d.expireNonces();
    d.resetCalls();
    assert.deepEqual(await power.turnOn(addressOf(d, 0, { password: "pw" }), { device: acceptAny }), { on: true });
    assert.deepEqual(rpcLog(d), ["Shelly.GetDeviceInfo 200", "Switch.Set 401", "Shelly.GetDeviceInfo 200", "Switch.Set 200", "Switch.GetStatus 200"]);
  });

  it("sends no credentials to a device that never asks for them", async (t) => {
    const d = await emulate(t, { gen: 4 });
    const power = createShellyPowerSwitch({ timeoutMs: 2000 });
    await power.turnOn(addressOf(d, 0, { password: "not-for-this-device" }), { device: acceptAny });
    assert.ok(d.calls.every((c) => c.auth === "none"));
  });

  it("reads a switch flipped behind plugpool's back as it is", async (t) => {
    const d = await emulate(t);
    const power = createShellyPowerSwitch({ timeoutMs: 2000 });
    await power.turnOn(addressOf(d), { device: acceptAny });
    d.flip(0, false);
    assert.deepEqual(await power.read(addressOf(d)), { on: false });
  });

  it("reads the relay without watts when measure is set on an output without a meter, and says so in the probe", async (t) => {
    const d = await emulate(t, { switches: [{ metered: false, output: true }] });
    const power = createShellyPowerSwitch({ timeoutMs: 2000 });
    assert.deepEqual(await power.read(addressOf(d, 0, { measure: true })), { on: true });
    const probe = await power.probe(addressOf(d, 0, { measure: true }));
    assert.match(probe.sensorError ?? "", /without apower/u);
  });

  it("serialises calls to one device and lets two devices work side by side", async (t) => {
    const one = await emulate(t, { switches: [{}, {}, {}, {}] });
    const two = await emulate(t);
    await one.inject({ kind: "slow", ms: 60 });
    await two.inject({ kind: "slow", ms: 60 });
    const power = createShellyPowerSwitch({ timeoutMs: 3000 });
    const start = performance.now();
    await Promise.all([0, 1, 2, 3].map((id) => power.read(addressOf(one, id))).concat([power.read(addressOf(two))]));
    assert.equal(one.maxConcurrency, 1);
    assert.ok(performance.now() - start >= 4 * 55, "the four reads of one device took turns");
  });
});
