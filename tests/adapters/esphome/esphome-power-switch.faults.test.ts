// Every fault an ESPHome plug shows ends in a classified error, within the call's timeout.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import type { PlugEmulatorOptions } from "../../harness/plug-emulator/index.ts";
import { acceptAny, addressOf, allowCut, assertPlugError, emulate, requests, timed, withEvents } from "./support.ts";

const TIMEOUT_MS = 300;
const MARGIN_MS = 300; // scheduling slack on a loaded 2-core machine; the bound is still one timeout plus this
// For tests whose point is not the clock: a busy machine must not turn them into timeouts.
const RELAXED_MS = 2000;

async function setup(t: TestContext, opts: PlugEmulatorOptions = {}, timeoutMs = TIMEOUT_MS) {
  const plug = await emulate(t, { switchDelayMs: 10, ...opts });
  const power = createEsphomePowerSwitch({ timeoutMs });
  return { plug, power, relay: addressOf(plug.url) };
}

describe("createEsphomePowerSwitch() facing faults", () => {
  describe("a plug that accepts and never answers", () => {
    it("fails a read as unreachable once the timeout is up", async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject({ kind: "timeout" });
      const { error, ms } = await timed(() => power.read(relay));
      assertPlugError(error, "plug-unreachable", /^reading plug http:\/\/127\.0\.0\.1:\d+ switch "Relay": timed out after 300 ms$/);
      assert.ok(ms >= TIMEOUT_MS - 5 && ms < TIMEOUT_MS + MARGIN_MS, `took ${ms} ms`);
    });

    it("fails a switch command as unconfirmed once the timeout is up: the device may have carried it out", async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject({ kind: "timeout", method: "POST" });
      const { error, ms } = await timed(() => power.turnOff(relay, allowCut, { device: acceptAny }));
      assertPlugError(error, "plug-unconfirmed", /^turning off plug .* switch "Relay": timed out after 300 ms; the command was sent and its outcome is unknown$/);
      assert.ok(ms < TIMEOUT_MS + MARGIN_MS, `took ${ms} ms`);
    });
  });

  describe("a slow plug", () => {
    it("is read when it answers within the timeout", async (t) => {
      const { plug, power, relay } = await setup(t, {}, RELAXED_MS);
      await plug.inject({ kind: "slow", ms: 120 });
      assert.deepEqual(await power.read(relay), { on: false });
    });

    it("times out when it answers after the timeout", async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject({ kind: "slow", ms: 2000 });
      const { error, ms } = await timed(() => power.read(relay));
      assertPlugError(error, "plug-unreachable", /timed out after 300 ms/);
      assert.ok(ms < TIMEOUT_MS + MARGIN_MS, `took ${ms} ms`);
    });

    it("counts the wait behind another request to the same device against the timeout", async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject({ kind: "timeout", times: 1 });
      // The second read waits for the first one's whole timeout; it must not get a timeout of its own after that.
      const [first, second] = await Promise.all([timed(() => power.read(relay)), timed(() => power.read(relay))]);
      assertPlugError(first.error, "plug-unreachable", /timed out after 300 ms/);
      assertPlugError(second.error, "plug-unreachable", /timed out after 300 ms/);
      assert.ok(second.ms < TIMEOUT_MS + MARGIN_MS, `took ${second.ms} ms`);
      assert.equal(plug.calls.length, 1);
    });
  });

  describe("a plug answering HTTP 500", () => {
    it("fails the read as unreachable, naming the status, without retrying", async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject({ kind: "http500" });
      const { error, ms } = await timed(() => power.read(relay));
      assertPlugError(error, "plug-unreachable", /^reading plug .* switch "Relay": GET \/switch\/Relay answered HTTP 500 \(text\/plain, 21 bytes\)$/);
      assert.ok(ms < TIMEOUT_MS, `took ${ms} ms, as if it had waited for the timeout`);
      assert.equal(plug.calls.length, 1);
    });
  });

  describe("a dropped connection", () => {
    it("retries a read once and succeeds", async (t) => {
      const { plug, power, relay } = await setup(t, {}, RELAXED_MS);
      await plug.inject({ kind: "drop", times: 1 });
      assert.deepEqual(await power.read(relay), { on: false });
      assert.deepEqual(requests(plug), ["GET /switch/Relay", "GET /switch/Relay"]);
    });

    it("fails a read as unreachable when the retry is dropped too", async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject({ kind: "drop" });
      const { error, ms } = await timed(() => power.read(relay));
      assertPlugError(error, "plug-unreachable", /switch "Relay": connection dropped$/);
      assert.ok(ms < TIMEOUT_MS, `took ${ms} ms, as if it had waited for the timeout`);
      assert.equal(plug.calls.length, 2);
    });

    it("never re-sends a switch command, and fails it as unconfirmed", async (t) => {
      const { plug, power, relay } = await setup(t, {}, RELAXED_MS);
      await plug.inject({ kind: "drop", method: "POST", times: 1 });
      const { error } = await timed(() => power.turnOn(relay, { device: acceptAny }));
      assertPlugError(error, "plug-unconfirmed", /^turning on plug .* switch "Relay": connection dropped; the command was sent and its outcome is unknown$/);
      assert.deepEqual(requests(plug), ["GET /events", "POST /switch/Relay/turn_on"]);
      assert.equal(plug.state("Relay"), false);
    });
  });

  describe("a plug that cannot be read right after a command", () => {
    it("keeps reading back until the state shows", async (t) => {
      const { plug, power, relay } = await setup(t, {}, RELAXED_MS);
      await plug.inject({ kind: "drop", domain: "switch", method: "GET", times: 2 }); // the first read-back and its retry
      assert.deepEqual(await power.turnOn(relay, { device: acceptAny }), { on: true });
    });

    it("fails as unconfirmed, with the reason, when no read-back succeeds", async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject({ kind: "drop", domain: "switch", method: "GET" });
      const { error, ms } = await timed(() => power.turnOn(relay, { device: acceptAny }));
      assertPlugError(error, "plug-unconfirmed", /state not confirmed within 300 ms \(no read-back succeeded: connection dropped\)$/);
      assert.ok(ms < TIMEOUT_MS + MARGIN_MS, `took ${ms} ms`);
      assert.equal(plug.state("Relay"), true);
    });
  });

  describe("a relay that flips back by itself", () => {
    it("fails the command as unconfirmed once the timeout is up", async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject({ kind: "flap" });
      const { error, ms } = await timed(() => power.turnOn(relay, { device: acceptAny }));
      assertPlugError(error, "plug-unconfirmed", /switch "Relay": state not confirmed within 300 ms \(it still reads off\)$/);
      assert.ok(ms >= TIMEOUT_MS - 5 && ms < TIMEOUT_MS + MARGIN_MS, `took ${ms} ms`);
    });
  });

  describe("a plug that is down", () => {
    it("fails at once as unreachable with the connection refused", async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject({ kind: "down" });
      const { error, ms } = await timed(() => power.read(relay));
      assertPlugError(error, "plug-unreachable", /switch "Relay": connection refused$/);
      assert.ok(ms < TIMEOUT_MS, `took ${ms} ms, as if it had waited for the timeout`);
    });

    it("is read again once it is back", async (t) => {
      const { plug, power, relay } = await setup(t, {}, RELAXED_MS);
      await plug.inject({ kind: "down" });
      await timed(() => power.read(relay));
      await plug.clearFaults();
      assert.deepEqual(await power.read(relay), { on: false });
    });
  });

  describe("a plug that reboots", () => {
    it("reads the restore_mode state afterwards, over a new connection", async (t) => {
      const { plug, power, relay } = await setup(t, { switches: [{ name: "Relay", restoreMode: "ALWAYS_OFF" }] }, RELAXED_MS);
      await power.turnOn(relay, { device: acceptAny });
      await plug.inject({ kind: "reboot" });
      assert.deepEqual(await power.read(relay), { on: false });
    });

    it("is unreachable while it boots, within the timeout", async (t) => {
      const { plug, power, relay } = await setup(t);
      const rebooting = plug.inject({ kind: "reboot", bootMs: 1000 });
      const { error, ms } = await timed(() => power.read(relay));
      assertPlugError(error, "plug-unreachable", /connection refused|connection dropped/);
      assert.ok(ms < TIMEOUT_MS + MARGIN_MS, `took ${ms} ms`);
      await rebooting;
    });
  });

  describe("an unknown entity", () => {
    it("fails as entity-not-found, naming both URLs tried", async (t) => {
      const { plug, power } = await setup(t, { version: "2026.1" }, RELAXED_MS);
      const { error } = await timed(() => power.read(addressOf(plug.url, "Relay 9")));
      assertPlugError(error, "plug-entity-not-found", /switch "Relay 9": not found \(HTTP 404 for \/switch\/Relay%209 and \/switch\/relay_9\)$/);
    });
  });

  describe("an answer that is not a switch state", () => {
    it("fails as a bad answer", async () => {
      const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS, fetch: () => Promise.resolve(new Response("<html>captive portal</html>")) });
      const { error } = await timed(() => power.read(addressOf("http://10.0.0.5")));
      assertPlugError(error, "plug-bad-answer", /^reading plug http:\/\/10\.0\.0\.5 switch "Relay": GET \/switch\/Relay answered without a switch state \(text\/plain, 27 bytes\)$/);
    });

    it("fails an unexpected status as a bad answer", async () => {
      const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS, fetch: withEvents(() => Promise.resolve(new Response("", { status: 403 }))) });
      const { error } = await timed(() => power.turnOn(addressOf("http://10.0.0.5"), { device: acceptAny }));
      assertPlugError(error, "plug-bad-answer", /POST \/switch\/Relay\/turn_on answered HTTP 403 \(text\/plain, 0 bytes\)$/);
    });
  });

  describe("a caller that aborts", () => {
    it("rejects promptly, before the timeout", async (t) => {
      const { plug, relay } = await setup(t);
      const power = createEsphomePowerSwitch({ timeoutMs: 5000 });
      await plug.inject({ kind: "timeout" });
      const abort = new AbortController();
      setTimeout(() => {
        abort.abort();
      }, 50);
      const { error, ms } = await timed(() => power.read(relay, { signal: abort.signal }));
      assertPlugError(error, "plug-unreachable", /switch "Relay": aborted$/);
      assert.ok(ms < 50 + MARGIN_MS, `took ${ms} ms`);
    });

    it("rejects while waiting behind another request to the device", async (t) => {
      const { plug, relay } = await setup(t);
      const power = createEsphomePowerSwitch({ timeoutMs: 5000 });
      await plug.inject({ kind: "slow", ms: 400 });
      const first = power.read(relay);
      const { error, ms } = await timed(() => power.read(relay, { signal: AbortSignal.timeout(50) }));
      assertPlugError(error, "plug-unreachable", /aborted$/);
      assert.ok(ms < 50 + MARGIN_MS, `took ${ms} ms`);
      await first;
    });
  });
});

describe("createEsphomePowerSwitch() with a command that may have reached the device", () => {
  const posts = (plug: Awaited<ReturnType<typeof setup>>["plug"]) => requests(plug).filter((r) => r.startsWith("POST"));

  it("fails as unconfirmed when the switch-off is sent and never answered", async (t) => {
    const { plug, power, relay } = await setup(t);
    plug.setState("Relay", true);
    await plug.inject({ kind: "timeout", method: "POST" });
    const { error, ms } = await timed(() => power.turnOff(relay, allowCut, { device: acceptAny }));
    assertPlugError(error, "plug-unconfirmed", /^turning off plug .* switch "Relay": timed out after 300 ms; the command was sent and its outcome is unknown$/);
    assert.ok(ms < TIMEOUT_MS + MARGIN_MS, `took ${ms} ms`);
    assert.deepEqual(posts(plug), ["POST /switch/Relay/turn_off"]);
  });

  it("fails as unconfirmed when the connection drops under the switch-on", async (t) => {
    const { plug, power, relay } = await setup(t, {}, RELAXED_MS);
    await plug.inject({ kind: "drop", method: "POST" });
    const { error } = await timed(() => power.turnOn(relay, { device: acceptAny }));
    assertPlugError(error, "plug-unconfirmed", /switch "Relay": connection dropped; the command was sent and its outcome is unknown$/);
    assert.deepEqual(posts(plug), ["POST /switch/Relay/turn_on"]);
  });

  it("fails as unconfirmed when the switch-on is answered HTTP 500", async (t) => {
    const { plug, power, relay } = await setup(t, {}, RELAXED_MS);
    await plug.inject({ kind: "http500", method: "POST" });
    const { error } = await timed(() => power.turnOn(relay, { device: acceptAny }));
    assertPlugError(error, "plug-unconfirmed", /POST \/switch\/Relay\/turn_on answered HTTP 500 \(text\/plain, 21 bytes\); the command was sent and its outcome is unknown$/);
  });

  it("fails as unconfirmed when the command was accepted and no read-back answers", async (t) => {
    const { plug, power, relay } = await setup(t);
    await plug.inject({ kind: "timeout", domain: "switch", method: "GET" });
    const { error, ms } = await timed(() => power.turnOn(relay, { device: acceptAny }));
    assertPlugError(error, "plug-unconfirmed", /switch "Relay": state not confirmed within 300 ms \(no read-back succeeded\)$/);
    assert.ok(ms < TIMEOUT_MS + MARGIN_MS, `took ${ms} ms`);
    assert.equal(plug.state("Relay"), true);
  });

  it("fails as unconfirmed when the read-back is refused after the command was accepted", async () => {
    let calls = 0;
    const answers = () => (calls++ === 0 ? new Response("", { status: 200 }) : new Response("", { status: 403 }));
    const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS, fetch: withEvents(() => Promise.resolve(answers())) });
    const { error } = await timed(() => power.turnOn(addressOf("http://10.0.0.5"), { device: acceptAny }));
    assertPlugError(error, "plug-unconfirmed", /state not confirmed \(reading it back: GET \/switch\/Relay answered HTTP 403 \(text\/plain, 0 bytes\)\)$/);
  });

  it("keeps the code of a failure before anything was sent: connection refused", async (t) => {
    const { plug, power, relay } = await setup(t);
    await plug.inject({ kind: "down" });
    const { error } = await timed(() => power.turnOff(relay, allowCut, { device: acceptAny }));
    assertPlugError(error, "plug-unreachable", /switch "Relay": connection refused$/);
  });

  it("keeps the code of a failure before anything was sent: host not found", async () => {
    const lookupFailed = Object.assign(new Error("getaddrinfo ENOTFOUND plug.invalid"), { code: "ENOTFOUND" });
    const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS, fetch: () => Promise.reject(new TypeError("fetch failed", { cause: lookupFailed })) });
    const { error } = await timed(() => power.turnOn(addressOf("http://plug.invalid"), { device: acceptAny }));
    assertPlugError(error, "plug-unreachable", /switch "Relay": host not found$/);
  });

  it("keeps the code of a command the device refused: 404 for both spellings", async (t) => {
    const { plug, power } = await setup(t, { version: "2026.1" }, RELAXED_MS);
    const { error } = await timed(() => power.turnOn(addressOf(plug.url, "Relay 9"), { device: acceptAny }));
    assertPlugError(error, "plug-entity-not-found", /not found \(HTTP 404 for \/switch\/Relay%209\/turn_on and \/switch\/relay_9\/turn_on\)$/);
    assert.deepEqual(posts(plug), ["POST /switch/Relay%209/turn_on", "POST /switch/relay_9/turn_on"]);
  });

  it("keeps the code of a command the device refused: 405, 411", async () => {
    for (const status of [405, 411]) {
      const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS, fetch: withEvents(() => Promise.resolve(new Response("", { status }))) });
      const { error } = await timed(() => power.turnOff(addressOf("http://10.0.0.5"), allowCut, { device: acceptAny }));
      assertPlugError(error, "plug-bad-answer", new RegExp(`answered HTTP ${status} \\(text/plain, 0 bytes\\)$`));
    }
  });

  it("keeps the code of a command the device refused: credentials", async (t) => {
    const { plug, power, relay } = await setup(t, { auth: { type: "basic", username: "admin", password: "pw" } });
    const { error } = await timed(() => power.turnOn(relay, { device: acceptAny }));
    assertPlugError(error, "plug-unauthorized", /asks for credentials and none are configured$/);
    assert.equal(plug.state("Relay"), false);
  });
});

describe("createEsphomePowerSwitch() with a power sensor", () => {
  const sensorStrip = { switches: [{ name: "Relay", powerSensor: "Power" }] };

  it("reads the watts of an attached machine while the relay is on", async (t) => {
    const { plug, power } = await setup(t, sensorStrip, RELAXED_MS);
    plug.attachMachine("Relay", { watts: () => 87.5 });
    const relay = addressOf(plug.url, "Relay", "Power");
    plug.setState("Relay", true);
    assert.deepEqual(await power.read(relay), { on: true, watts: 87.5 });
    plug.setState("Relay", false);
    assert.deepEqual(await power.read(relay), { on: false, watts: 0 });
  });

  it("reads the sensor, not the switch, when both entities have the same name", async (t) => {
    const { plug, power } = await setup(t, { switches: [{ name: "Power", powerSensor: "Power" }] }, RELAXED_MS);
    plug.attachMachine("Power", { watts: () => 87.5 });
    plug.setState("Power", true);
    const relay = addressOf(plug.url, "Power", "Power");
    assert.deepEqual(await power.read(relay), { on: true, watts: 87.5 });
    // Again, now that each entity's requests are made and kept.
    assert.deepEqual(await power.read(relay), { on: true, watts: 87.5 });
  });

  it("returns the relay state without watts when the sensor fails", async (t) => {
    const { plug, power } = await setup(t, sensorStrip, RELAXED_MS);
    await plug.inject({ kind: "http500", domain: "sensor" });
    assert.deepEqual(await power.read(addressOf(plug.url, "Relay", "Power")), { on: false });
  });

  it("returns the relay state without watts when the sensor does not exist", async (t) => {
    const { plug, power } = await setup(t, sensorStrip, RELAXED_MS);
    assert.deepEqual(await power.read(addressOf(plug.url, "Relay", "Energy")), { on: false });
  });

  it("reports the sensor failure in a probe", async (t) => {
    const { plug, power } = await setup(t, sensorStrip, RELAXED_MS);
    await plug.inject({ kind: "http500", domain: "sensor" });
    const probe = await power.probe(addressOf(plug.url, "Relay", "Power"));
    assert.equal(probe.state, "off");
    assert.equal(probe.sensorError, 'sensor "Power": GET /sensor/Power answered HTTP 500 (text/plain, 21 bytes)');
  });

  it("reports the watts in a probe", async (t) => {
    const { plug, power } = await setup(t, sensorStrip, RELAXED_MS);
    plug.setState("Relay", true);
    const probe = await power.probe(addressOf(plug.url, "Relay", "Power"));
    assert.deepEqual(probe, { state: "on", urlStyle: "name", auth: "none", watts: 25, identity: { id: `name "${plug.name}"`, uptimeSeconds: plug.uptimeSeconds } });
  });
});
