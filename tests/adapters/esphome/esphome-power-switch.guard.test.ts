// The cut guard asked at the plug: with the device's slot held, right before the switch-off is sent.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import type { CutGuard } from "../../../src/domain/ports.ts";
import type { PlugEmulatorOptions } from "../../support/plug-emulator/index.ts";
import { addressOf, assertPlugError, emulate, eventually, requests, timed } from "./support.ts";

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
    const cutting = power.turnOff(relay, guard);
    await sleep(20);
    const later = power.read(relay);
    await Promise.all([busy, cutting, later]);

    assert.deepEqual(events.slice(0, 4), [
      "GET /switch/Relay answered",
      "guard asked; the device has seen GET /switch/Relay",
      "guard allows; the device has seen GET /switch/Relay",
      "POST /switch/Relay/turn_off answered",
    ]);
    // The read asked for meanwhile waited for the switch-off; the read-backs took their own turns.
    assert.deepEqual(requests(plug).slice(0, 3), ["GET /switch/Relay", "POST /switch/Relay/turn_off", "GET /switch/Relay"]);
    assert.equal(plug.maxConcurrency, 1);
    assert.equal(plug.state("Relay"), false);
  });

  it("sends nothing when the guard says no, and fails as unsafe", async (t) => {
    const { plug, power, relay } = await setup(t);
    const { error } = await timed(() => power.turnOff(relay, () => Promise.resolve(false)));
    assertPlugError(error, "unsafe", REFUSED);
    assert.deepEqual(plug.calls.filter((c) => c.method === "POST"), []);
    assert.equal(plug.state("Relay"), true);
  });

  it("sends nothing when the guard fails, and keeps only its code and message as the cause", async (t) => {
    const { plug, power, relay } = await setup(t);
    const failing: CutGuard = () => Promise.reject(Object.assign(new Error("apiserver said no"), { request: { headers: { authorization: "Bearer k8s-token" } } }));
    const { error } = await timed(() => power.turnOff(relay, failing));
    assertPlugError(error, "unsafe", REFUSED);
    assert.ok(!JSON.stringify(requests(plug)).includes("POST"));
    assert.doesNotMatch((error as Error & { cause: Error }).cause.message, /apiserver|k8s-token/);
  });

  it("frees the device after a refusal", async (t) => {
    const { power, relay } = await setup(t);
    await timed(() => power.turnOff(relay, () => Promise.resolve(false)));
    const { value, ms } = await timed(() => power.read(relay));
    assert.deepEqual(value, { on: true });
    assert.ok(ms < 500, `the read waited ${ms} ms`);
  });

  it("asks again before each sending: a first request answered 401 is sent again with credentials", async (t) => {
    const { plug, power, relay } = await setup(t, { version: "2026.7", platform: "esp32", auth: { type: "digest", username: "admin", password: "guard-pw" } });
    const seen: string[][] = [];
    assert.deepEqual(await power.turnOff(relay, () => Promise.resolve(seen.push(requests(plug)) > 0)), { on: false });
    assert.deepEqual(seen, [[], ["POST /switch/Relay/turn_off"]]);
    assert.deepEqual(plug.calls.slice(0, 2).map((c) => [c.method, c.auth, c.status]), [["POST", "none", 401], ["POST", "digest", 200]]);
  });

  it("counts the guard's time against the call's timeout and sends nothing when it runs out", async (t) => {
    const { plug, power, relay } = await setup(t, {}, 300);
    const slow: CutGuard = async (options) => {
      await sleep(5000, undefined, { signal: options?.signal });
      return true;
    };
    const { error, ms } = await timed(() => power.turnOff(relay, slow));
    assertPlugError(error, "plug-unreachable", /switch "Relay": timed out after 300 ms$/);
    assert.ok(ms < 600, `took ${ms} ms`);
    assert.deepEqual(plug.calls, []);
  });
});
