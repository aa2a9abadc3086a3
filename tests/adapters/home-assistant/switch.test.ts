// The Home Assistant backend's switch against the emulator: states, service calls, the cut guard, the token,
// faults, bounds and serialisation.
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHomeAssistantSwitch, MAX_ANSWER_BYTES } from "../../../src/adapters/home-assistant/home-assistant-switch.ts";
import type { CallOptions } from "../../../src/domain/ports.ts";
import { startHomeAssistantEmulator, type HomeAssistantEmulator } from "../../harness/home-assistant/emulator.ts";
import { acceptAny, addressOf, failure } from "./support.ts";

const TIMEOUT_MS = 600;
const allow = (): Promise<boolean> => Promise.resolve(true);

describe("Home Assistant switch", () => {
  let ha: HomeAssistantEmulator;
  const ha$ = { get url() { return ha.url; }, get token() { return ha.token; } };
  const hub = createHomeAssistantSwitch({ timeoutMs: TIMEOUT_MS });
  const box = () => addressOf(ha$, "switch.box", { powerSensor: "sensor.box_power" });
  const helper = () => addressOf(ha$, "switch.helper");
  const services = (): string[] => ha.serviceCalls();

  before(async () => {
    ha = await startHomeAssistantEmulator({ switches: ["box", "helper", "other"], assumed: ["guess"], sensors: { box_power: 87.5, input_power: 3 } });
  });
  after(async () => {
    await ha.stop();
  });
  afterEach(async () => {
    ha.clearFaults();
    for (const name of ["box", "helper", "other"]) {
      await ha.setAvailable(name, true);
      await ha.setSwitch(name, false);
    }
    await ha.setAvailable("box_power", true);
    await ha.setWatts("box_power", 87.5);
    (ha.calls as unknown[]).length = 0;
  });

  describe("read", () => {
    it("reads on and off, with the sensor's watts", async () => {
      assert.deepEqual(await hub.read(box()), { on: false, watts: 87.5 });
      await ha.setSwitch("box", true);
      assert.deepEqual(await hub.read(box()), { on: true, watts: 87.5 });
      assert.deepEqual(await hub.read(helper()), { on: false });
      assert.deepEqual(services(), [], "a read calls no service");
    });

    it("fails every read of a switch whose state is only assumed, and so switches nothing through it", async () => {
      const guess = addressOf(ha$, "switch.guess");
      const read = await failure(hub.read(guess), "plug-bad-answer", ha.token);
      assert.match(read.message, /entity switch\.guess: the entity's state is only assumed in Home Assistant \(assumed_state\): it cannot tell whether the machine has power/);
      await failure(hub.turnOn(guess, { device: acceptAny }), "plug-bad-answer", ha.token);
      await failure(hub.turnOff(guess, allow, { device: acceptAny }), "plug-bad-answer", ha.token);
      await failure(hub.probe(guess), "plug-bad-answer", ha.token);
      assert.deepEqual(services(), []);
    });

    it("reads an input_number as the power sensor", async () => {
      assert.deepEqual(await hub.read(addressOf(ha$, "switch.box", { powerSensor: "input_number.input_power" })), { on: false, watts: 3 });
    });

    it("fails a read of an unavailable or unknown entity as unreachable, never as off", async () => {
      await ha.setAvailable("box", false);
      const unavailable = await failure(hub.read(box()), "plug-unreachable", ha.token);
      assert.match(unavailable.message, /^reading Home Assistant http:\/\/127\.0\.0\.1:\d+ entity switch\.box: the entity's state is unavailable in Home Assistant$/);
      ha.setState("switch.other", "unknown");
      assert.match((await failure(hub.read(addressOf(ha$, "switch.other")), "plug-unreachable", ha.token)).message, /state is unknown/);
      ha.setState("switch.other", "<script>ON</script>");
      const odd = await failure(hub.read(addressOf(ha$, "switch.other")), "plug-unreachable", ha.token);
      assert.match(odd.message, /state is neither on nor off/);
      assert.doesNotMatch(odd.message, /script/, "nothing from the wire in the message");
    });

    it("keeps a sensor's failure out of the read: no watts, the switch's state all the same", async () => {
      ha.setState("sensor.box_power", "n/a");
      assert.deepEqual(await hub.read(box()), { on: false });
      await ha.setAvailable("box_power", false);
      assert.deepEqual(await hub.read(box()), { on: false });
      const probe = await hub.probe(box());
      assert.equal(probe.state, "off");
      assert.equal(probe.watts, undefined);
      assert.equal(probe.sensorError, "sensor sensor.box_power: its state is unavailable");
    });

    it("fails an unknown entity as not found, saying so", async () => {
      const error = await failure(hub.read(addressOf(ha$, "switch.nowhere")), "plug-entity-not-found", ha.token);
      assert.match(error.message, /GET \/api\/states\/switch\.nowhere answered HTTP 404: Home Assistant has no such entity$/);
    });

    it("fails with a refused token as unauthorized, the token in no message", async () => {
      const wrong = "eyJhbGciOiJIUzI1NiJ9.wrong-token-value.sig";
      const error = await failure(hub.read(addressOf(ha$, "switch.box", { token: wrong })), "plug-unauthorized", wrong);
      assert.match(error.message, /answered HTTP 401: the token was refused/);
      assert.ok(ha.calls.every((c) => !c.authorized));
    });

    it("reports Home Assistant's version in the probe", async () => {
      const probe = await hub.probe(box());
      assert.deepEqual(probe, { state: "off", watts: 87.5, detail: "Home Assistant 2025.4.4, switch.turn_on/turn_off" });
    });
  });

  describe("turnOn and turnOff", () => {
    it("calls the switch service and confirms the state read back", async () => {
      assert.deepEqual(await hub.turnOn(box(), { device: acceptAny }), { on: true });
      assert.equal(ha.stateOf("switch.box"), "on");
      assert.deepEqual(await hub.turnOn(helper(), { device: acceptAny }), { on: true });
      assert.deepEqual(await hub.turnOff(helper(), allow, { device: acceptAny }), { on: false });
      assert.deepEqual(services(), ["switch.turn_on switch.box", "switch.turn_on switch.helper", "switch.turn_off switch.helper"]);
    });

    it("never asks the device check, of a command or a read: the entity id is the entity's address and its identity", async () => {
      let asked = false;
      const device = (): Promise<boolean> => Promise.resolve(!(asked = true));
      assert.deepEqual(await hub.turnOn(box(), { device }), { on: true });
      assert.deepEqual(await hub.turnOff(box(), allow, { device }), { on: false });
      assert.equal((await hub.read(box(), { device })).on, false);
      assert.equal(asked, false);
      assert.deepEqual(services(), ["switch.turn_on switch.box", "switch.turn_off switch.box"]);
    });

    it("sends nothing when the entity already is as asked", async () => {
      await ha.setSwitch("box", true);
      let asked = false;
      assert.deepEqual(await hub.turnOn(box(), { device: acceptAny }), { on: true });
      await ha.setSwitch("box", false);
      assert.deepEqual(await hub.turnOff(box(), () => { asked = true; return Promise.resolve(true); }, { device: acceptAny }), { on: false });
      assert.deepEqual(services(), []);
      assert.equal(asked, false, "no cut, no question");
    });

    it("asks the cut guard right before the service call, after reading the entity", async () => {
      await ha.setSwitch("box", true);
      const seenByGuard: string[] = [];
      await hub.turnOff(box(), () => {
        seenByGuard.push(...ha.calls.map((c) => `${c.method} ${c.path}`));
        return Promise.resolve(true);
      }, { device: acceptAny });
      assert.deepEqual(seenByGuard, ["GET /api/states/switch.box"]);
      assert.equal(ha.calls[1]?.path, "/api/services/switch/turn_off");
    });

    it("sends nothing when the cut guard refuses or fails, and says unsafe", async () => {
      await ha.setSwitch("box", true);
      const refused = await failure(hub.turnOff(box(), () => Promise.resolve(false), { device: acceptAny }), "unsafe", ha.token);
      assert.match(refused.message, /refused by the safety check; nothing was sent/);
      await failure(hub.turnOff(box(), () => Promise.reject(new Error("cluster unreachable")), { device: acceptAny }), "unsafe", ha.token);
      assert.deepEqual(services(), []);
      assert.equal(ha.stateOf("switch.box"), "on");
    });

    it("fails an unavailable entity's switch-on as unreachable, sending nothing", async () => {
      await ha.setAvailable("box", false);
      await failure(hub.turnOn(box(), { device: acceptAny }), "plug-unreachable", ha.token);
      assert.deepEqual(services(), []);
    });

    it("takes a service call whose answer was lost as unconfirmed, never as not done", async () => {
      ha.inject({ kind: "lost", method: "POST", times: 1 });
      const error = await failure(hub.turnOn(box(), { device: acceptAny }), "plug-unconfirmed", ha.token);
      assert.match(error.message, /connection dropped; the service call was sent and its outcome is unknown$/);
      assert.equal(ha.stateOf("switch.box"), "on", "Home Assistant did carry it out");
    });

    it("takes a 500, a dropped connection and no answer to a service call as unconfirmed", async () => {
      for (const kind of ["http500", "drop", "hang"] as const) {
        ha.inject({ kind, method: "POST", times: 1 });
        await failure(hub.turnOn(box(), { device: acceptAny }), "plug-unconfirmed", ha.token);
      }
      assert.equal(services().length, 3);
    });

    it("sends no service call with a token Home Assistant refuses", async () => {
      const wrong = "not-the-token";
      await failure(hub.turnOn(addressOf(ha$, "switch.box", { token: wrong }), { device: acceptAny }), "plug-unauthorized", wrong);
      assert.deepEqual(ha.calls.map((c) => c.method), ["GET"]);
      assert.equal(ha.stateOf("switch.box"), "off");
    });

    it("says unconfirmed when the entity does not come to the state asked within the timeout", async () => {
      // The entity's device drops off while the call is on its way: Home Assistant skips it, answers 200, and
      // the entity reads unavailable from then on.
      ha.inject({ kind: "slow", ms: 100, method: "POST", times: 1 });
      const call = hub.turnOn(box(), { device: acceptAny });
      await new Promise((resolve) => setTimeout(resolve, 50));
      await ha.setAvailable("box", false);
      const error = await failure(call, "plug-unconfirmed", ha.token);
      assert.match(error.message, new RegExp(`state not confirmed within ${TIMEOUT_MS} ms \\(the entity's state is unavailable in Home Assistant\\)$`));
    });
  });

  describe("faults and bounds", () => {
    it("fails a read that gets no answer within the timeout as unreachable", async () => {
      ha.inject({ kind: "hang", method: "GET" });
      const started = Date.now();
      const error = await failure(hub.read(box()), "plug-unreachable", ha.token);
      assert.match(error.message, new RegExp(`timed out after ${TIMEOUT_MS} ms$`));
      assert.ok(Date.now() - started < TIMEOUT_MS + 400);
    });

    it("waits out a slow answer within the timeout", async () => {
      ha.inject({ kind: "slow", ms: 150, method: "GET", times: 1 });
      assert.deepEqual(await hub.read(box()), { on: false, watts: 87.5 });
    });

    it("sends a read again once when its connection was dropped, and fails after a second drop", async () => {
      ha.inject({ kind: "drop", method: "GET", times: 1 });
      assert.deepEqual(await hub.read(helper()), { on: false });
      ha.inject({ kind: "drop", method: "GET", times: 2 });
      assert.match((await failure(hub.read(helper()), "plug-unreachable", ha.token)).message, /connection dropped$/);
    });

    it("fails a read answered with 500 as unreachable", async () => {
      ha.inject({ kind: "http500", method: "GET", times: 1 });
      assert.match((await failure(hub.read(helper()), "plug-unreachable", ha.token)).message, /answered HTTP 500 \(text\/plain, 26 bytes\)$/);
    });

    it("refuses an answer larger than its bound, declared or counted", async () => {
      for (const chunked of [false, true]) {
        ha.inject({ kind: "huge", bytes: MAX_ANSWER_BYTES, chunked, method: "GET", times: 1 });
        const error = await failure(hub.read(helper()), "plug-bad-answer", ha.token);
        assert.match(error.message, new RegExp(`with more than ${MAX_ANSWER_BYTES} bytes$`));
      }
      assert.deepEqual(await hub.read(helper()), { on: false }, "the next read is answered as usual");
    });

    it("fails as unreachable, saying so, when Home Assistant is not there", async () => {
      const closed = await startHomeAssistantEmulator({ switches: ["x"] });
      await closed.stop();
      const error = await failure(hub.read(addressOf(closed, "switch.x")), "plug-unreachable", closed.token);
      assert.match(error.message, /connection refused$/);
    });

    it("ends a call when the caller aborts it", async () => {
      ha.inject({ kind: "hang", method: "GET" });
      const controller = new AbortController();
      const options: CallOptions = { signal: controller.signal };
      const call = hub.read(box(), options);
      setTimeout(() => { controller.abort(new Error("shutdown")); }, 50);
      assert.match((await failure(call, "plug-unreachable", ha.token)).message, /aborted$/);
    });
  });

  describe("one call at a time per entity", () => {
    it("serialises calls to one entity, each bounded by its timeout including its wait", async () => {
      ha.inject({ kind: "slow", ms: 200, method: "GET", times: 1 });
      const results = await Promise.all([hub.read(helper()), hub.read(helper()), hub.turnOn(helper(), { device: acceptAny })]);
      assert.deepEqual(results, [{ on: false }, { on: false }, { on: true }]);
      assert.equal(ha.maxInFlight, 1);
    });

    it("sends a switch command at once while reads of other entities hold every pooled connection", async () => {
      const many = await startHomeAssistantEmulator({ switches: ["a", "b", "c", "d", "e"] });
      try {
        const at = (name: string) => addressOf(many, `switch.${name}`);
        await many.setSwitch("e", true);
        many.inject({ kind: "hang", method: "GET", times: 4 });
        const stuck = ["a", "b", "c", "d"].map((name) => failure(hub.read(at(name)), "plug-unreachable", many.token));
        await new Promise((resolve) => setTimeout(resolve, 50));
        const started = Date.now();
        assert.deepEqual(await hub.turnOff(at("e"), allow, { device: acceptAny }), { on: false });
        assert.ok(Date.now() - started < TIMEOUT_MS / 2, "the command did not wait for a pooled connection");
        await Promise.all(stuck);
      } finally {
        await many.stop();
      }
    });

    it("does not make other entities wait", async () => {
      ha.inject({ kind: "hang", method: "GET", times: 1 });
      const stuck = failure(hub.read(helper()), "plug-unreachable", ha.token);
      const started = Date.now();
      assert.deepEqual(await hub.read(addressOf(ha$, "switch.other")), { on: false });
      assert.ok(Date.now() - started < TIMEOUT_MS / 2, "the other entity was served at once");
      await stuck;
    });

    it("fails a call queued behind a stuck one at its own timeout, its wait included", async () => {
      ha.inject({ kind: "hang", method: "GET", times: 2 });
      const first = failure(hub.read(helper()), "plug-unreachable", ha.token);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = Date.now();
      const second = await failure(hub.read(helper()), "plug-unreachable", ha.token);
      assert.match(second.message, /timed out/);
      // Its own deadline, not the first call's plus a timeout of its own.
      assert.ok(Date.now() - started <= TIMEOUT_MS + 150, `${Date.now() - started} ms`);
      await first;
    });
  });
});
