// The cut guard asked at the plug: with the device's slot held, right before the switch-off is sent.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import type { CutGuard, DeviceCheck } from "../../../src/domain/ports.ts";
import type { PlugEmulatorOptions } from "../../harness/plug-emulator/index.ts";
import { acceptAny, addressOf, assertPlugError, emulate, eventually, expectDevice, requests, timed } from "./support.ts";

const REFUSED = /^turning off plug http:\/\/127\.0\.0\.1:\d+ switch "Relay": the switch-off was refused at the plug by the safety check$/;

// The ESP8266 profile serves requests side by side, so any one-at-a-time order seen below is the adapter's.
async function setup(t: TestContext, opts: PlugEmulatorOptions = {}, timeoutMs = 2000, fetch?: typeof globalThis.fetch) {
  const plug = await emulate(t, { platform: "esp8266", switchDelayMs: 10, ...opts });
  plug.setState("Relay", true);
  const power = createEsphomePowerSwitch({ timeoutMs, credentialsFor: () => ({ username: "admin", password: "guard-pw" }), ...(fetch && { fetch }) });
  return { plug, power, relay: addressOf(plug.url) };
}

/** fetch that logs "<METHOD> <path> answered" once the adapter has read an answer to its end. */
function tracedFetch(events: string[]): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const response = await fetch(request);
    const done = `${request.method} ${new URL(request.url).pathname} answered`;
    const body = response.body?.pipeThrough(new TransformStream({ flush: () => void events.push(done) }));
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

describe("createEsphomePowerSwitch() turnOff with a cut guard", () => {
  it("asks the guard once the device is free, and sends the switch-off only after it allowed it", async (t) => {
    const events: string[] = [];
    const { plug, power, relay } = await setup(t, {}, 2000, tracedFetch(events));
    await plug.inject({ kind: "slow", ms: 150, times: 1 });
    const busy = power.read(relay);
    await eventually(() => plug.calls.length === 1);
    const guard: CutGuard = async () => {
      events.push(`guard asked; the device has seen ${requests(plug).join(", ")}`);
      await sleep(100); // a guard that takes its time, as a read of the apiserver does
      events.push(`guard allows; the device has seen ${requests(plug).join(", ")}`);
      return true;
    };
    const cutting = power.turnOff(relay, guard, { device: acceptAny });
    await sleep(20);
    const later = power.read(relay);
    await Promise.all([busy, cutting, later]);

    // The stream of GET /events is cut at its first ping, never read to an end.
    assert.deepEqual(events.slice(0, 4), [
      "GET /switch/Relay answered",
      "guard asked; the device has seen GET /switch/Relay, GET /events",
      "guard allows; the device has seen GET /switch/Relay, GET /events",
      "POST /switch/Relay/turn_off answered",
    ]);
    // The read asked for meanwhile waited for the switch-off; the read-backs took their own turns.
    assert.deepEqual(requests(plug).slice(0, 4), ["GET /switch/Relay", "GET /events", "POST /switch/Relay/turn_off", "GET /switch/Relay"]);
    assert.equal(plug.maxConcurrency, 1);
    assert.equal(plug.state("Relay"), false);
  });

  it("sends nothing when the guard says no, and fails as unsafe", async (t) => {
    const { plug, power, relay } = await setup(t);
    const { error } = await timed(() => power.turnOff(relay, () => Promise.resolve(false), { device: acceptAny }));
    assertPlugError(error, "unsafe", REFUSED);
    assert.deepEqual(plug.calls.filter((c) => c.method === "POST"), []);
    assert.equal(plug.state("Relay"), true);
  });

  it("sends nothing when the guard fails, and keeps only its code and message as the cause", async (t) => {
    const { plug, power, relay } = await setup(t);
    const failing: CutGuard = () => Promise.reject(Object.assign(new Error("apiserver said no"), { request: { headers: { authorization: "Bearer k8s-token" } } }));
    const { error } = await timed(() => power.turnOff(relay, failing, { device: acceptAny }));
    assertPlugError(error, "unsafe", REFUSED);
    assert.ok(!JSON.stringify(requests(plug)).includes("POST"));
    assert.doesNotMatch((error as Error & { cause: Error }).cause.message, /apiserver|k8s-token/);
  });

  it("frees the device after a refusal", async (t) => {
    const { power, relay } = await setup(t);
    await timed(() => power.turnOff(relay, () => Promise.resolve(false), { device: acceptAny }));
    const { value, ms } = await timed(() => power.read(relay));
    assert.deepEqual(value, { on: true });
    assert.ok(ms < 500, `the read waited ${ms} ms`);
  });

  it("asks the device and the guard again before each sending: a switch-off answered 401 is sent again", async (t) => {
    let expire = (): void => undefined;
    const { plug, power, relay } = await setup(t, {
      version: "2026.7",
      platform: "esp32",
      auth: { type: "digest", username: "admin", password: "guard-pw" },
      // The device forgets its nonces as the first switch-off arrives: it answers 401 stale, and the switch-off goes again.
      onRequest: (call) => { if (call.method === "POST") expire(); },
    });
    expire = () => {
      expire = () => undefined;
      plug.expireNonces();
    };
    const order: string[] = [];
    const device = expectDevice(`name "${plug.name}"`);
    const checked: DeviceCheck = (seen) => {
      order.push(`device asked; the device has seen ${requests(plug).join(", ")}`);
      return device(seen);
    };
    const guard: CutGuard = () => Promise.resolve(order.push("guard asked") > 0);
    assert.deepEqual(await power.turnOff(relay, guard, { device: checked }), { on: false });
    assert.deepEqual(order, [
      "device asked; the device has seen GET /events, GET /events",
      "guard asked",
      "device asked; the device has seen GET /events, GET /events, POST /switch/Relay/turn_off, GET /events",
      "guard asked",
    ]);
    assert.deepEqual(plug.calls.slice(0, 5).map((c) => [c.method, c.path, c.auth, c.status]), [
      ["GET", "/events", "none", 401],
      ["GET", "/events", "digest", 200],
      ["POST", "/switch/Relay/turn_off", "digest", 401],
      ["GET", "/events", "digest", 200],
      ["POST", "/switch/Relay/turn_off", "digest", 200],
    ]);
  });

  it("counts the guard's time against the call's timeout and sends nothing when it runs out", async (t) => {
    const { plug, power, relay } = await setup(t, {}, 300);
    const slow: CutGuard = async (options) => {
      await sleep(5000, undefined, { signal: options?.signal });
      return true;
    };
    const { error, ms } = await timed(() => power.turnOff(relay, slow, { device: acceptAny }));
    assertPlugError(error, "plug-unreachable", /switch "Relay": timed out after 300 ms$/);
    assert.ok(ms < 600, `took ${ms} ms`);
    assert.deepEqual(requests(plug), ["GET /events"]);
  });
});
