// The Home Assistant backend's switch against the real Home Assistant: the cases whose outcome depends on how
// Home Assistant itself behaves (states, services per domain, unavailable entities, the token, the sensor).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHomeAssistantSwitch } from "../../../src/adapters/home-assistant/home-assistant-switch.ts";
import { homeAssistantMissing, startHomeAssistant, type RunningHomeAssistant } from "../../harness/home-assistant/index.ts";
import { acceptAny, addressOf, failure } from "./support.ts";

describe("Home Assistant switch against the real Home Assistant", { skip: homeAssistantMissing() }, () => {
  let ha: RunningHomeAssistant;
  const hub = createHomeAssistantSwitch({ timeoutMs: 5000 });
  const allow = (): Promise<boolean> => Promise.resolve(true);
  const ha$ = { get url() { return ha.url; }, get token() { return ha.token; } };

  before(async () => {
    ha = await startHomeAssistant({ switches: ["box", "away", "guarded"], assumed: ["guess"], sensors: { box_power: 120.5 } });
  });
  after(async () => {
    await ha.stop();
  });

  it("switches a switch entity on and off, reading it and its power sensor", async () => {
    const box = addressOf(ha$, "switch.box", { powerSensor: "sensor.box_power" });
    assert.deepEqual(await hub.read(box), { on: false, watts: 120.5 });
    assert.deepEqual(await hub.turnOn(box, { device: acceptAny }), { on: true });
    assert.deepEqual(await hub.read(box), { on: true, watts: 120.5 });
    assert.deepEqual(await hub.turnOff(box, allow, { device: acceptAny }), { on: false });
    await ha.setWatts("box_power", 3.5);
    assert.deepEqual(await hub.read(box), { on: false, watts: 3.5 });
  });

  it("takes no reading from an optimistic switch, whose off says nothing of the machine's power", async () => {
    const guess = addressOf(ha$, "switch.guess");
    // Its relay (the helper) switched on by hand: the switch still says off.
    await ha.setSwitch("guess", true);
    assert.match((await failure(hub.read(guess), "plug-bad-answer", ha.token)).message, /only assumed in Home Assistant \(assumed_state\)/);
    await failure(hub.turnOff(guess, allow, { device: acceptAny }), "plug-bad-answer", ha.token);
    await failure(hub.turnOn(guess, { device: acceptAny }), "plug-bad-answer", ha.token);
  });

  it("sees a change made behind its back", async () => {
    await ha.setSwitch("box", true);
    assert.deepEqual(await hub.read(addressOf(ha$, "switch.box")), { on: true });
    await ha.setSwitch("box", false);
  });

  it("fails on an unavailable entity: its read as unreachable, never off; its switch-on sending nothing", async () => {
    await ha.setAvailable("away", false);
    const away = addressOf(ha$, "switch.away");
    assert.match((await failure(hub.read(away), "plug-unreachable", ha.token)).message, /state is unavailable in Home Assistant$/);
    await failure(hub.turnOn(away, { device: acceptAny }), "plug-unreachable", ha.token);
    await ha.setAvailable("away", true);
    assert.deepEqual(await hub.read(away), { on: false }, "the switch-on never reached the helper");
  });

  it("keeps an unavailable sensor out of the read", async () => {
    await ha.setAvailable("box_power", false);
    const box = addressOf(ha$, "switch.box", { powerSensor: "sensor.box_power" });
    assert.deepEqual(await hub.read(box), { on: false });
    assert.equal((await hub.probe(box)).sensorError, "sensor sensor.box_power: its state is unavailable");
    await ha.setAvailable("box_power", true);
  });

  it("leaves the entity on when the cut guard refuses", async () => {
    const guarded = addressOf(ha$, "switch.guarded");
    await hub.turnOn(guarded, { device: acceptAny });
    await failure(hub.turnOff(guarded, () => Promise.resolve(false), { device: acceptAny }), "unsafe", ha.token);
    assert.deepEqual(await hub.read(guarded), { on: true });
  });

  it("fails with a wrong token as unauthorized, and an unknown entity as not found", async () => {
    const wrong = `${ha.token.slice(0, -4)}AAAA`;
    await failure(hub.read(addressOf(ha$, "switch.box", { token: wrong })), "plug-unauthorized", wrong);
    await failure(hub.read(addressOf(ha$, "switch.nowhere")), "plug-entity-not-found", ha.token);
  });

  it("tells Home Assistant's version in the probe", async () => {
    const probe = await hub.probe(addressOf(ha$, "switch.box", { powerSensor: "sensor.box_power" }));
    assert.equal(probe.detail, "Home Assistant 2025.4.4, switch.turn_on/turn_off");
    assert.equal(probe.state, "off");
  });
});
