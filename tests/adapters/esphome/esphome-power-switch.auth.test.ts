// Authentication as the devices ask for it, and credentials kept out of every error.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import type { PlugEmulatorOptions } from "../../support/plug-emulator/index.ts";
import { assertNoSecret, assertPlugError, emulate, timed } from "./support.ts";

const USER = "ops";
const SECRET = "Zq7-only-here-pw";
const CREDENTIALS = { username: USER, password: SECRET };
const SECRETS = [SECRET, Buffer.from(`${USER}:${SECRET}`).toString("base64")];

async function setup(t: TestContext, opts: PlugEmulatorOptions, credentials: { username: string; password: string } | null = CREDENTIALS) {
  const plug = await emulate(t, { switchDelayMs: 10, ...opts });
  const power = createEsphomePowerSwitch({ timeoutMs: 1000, ...(credentials ? { credentials } : {}) });
  return { plug, power, relay: { url: plug.url, switch: "Relay" } };
}

const digestDevice: PlugEmulatorOptions = { version: "2026.7", platform: "esp32", auth: { type: "digest", ...CREDENTIALS } };

describe("createEsphomePowerSwitch() authentication", () => {
  it("sends Basic up front, so a Basic device answers the first request", async (t) => {
    const { plug, power, relay } = await setup(t, { version: "2026.1", auth: { type: "basic", ...CREDENTIALS } });
    await power.read(relay);
    assert.deepEqual(plug.calls.map((c) => [c.auth, c.status]), [["basic", 200]]);
  });

  it("answers a Digest challenge and keeps using Digest with the same nonce", async (t) => {
    const { plug, power, relay } = await setup(t, digestDevice);
    await power.read(relay);
    await power.read(relay);
    assert.deepEqual(plug.calls.map((c) => [c.auth, c.status]), [["basic", 401], ["digest", 200], ["digest", 200]]);
  });

  it("takes the new nonce when the device answers stale=true", async (t) => {
    const { plug, power, relay } = await setup(t, digestDevice);
    await power.read(relay);
    plug.expireNonces();
    plug.resetCalls();
    assert.deepEqual(await power.read(relay), { on: false });
    assert.deepEqual(plug.calls.map((c) => [c.auth, c.status]), [["digest", 401], ["digest", 200]]);
  });

  it("re-sends a dropped read to a Digest device with a fresh Authorization", async (t) => {
    const { plug, power, relay } = await setup(t, digestDevice);
    await power.read(relay);
    await plug.inject({ kind: "drop", times: 1 });
    plug.resetCalls();
    assert.deepEqual(await power.read(relay), { on: false });
    assert.deepEqual(plug.calls.map((c) => [c.auth, c.status]), [["digest", undefined], ["digest", 200]]);
  });

  it("keeps working with a Digest device after it reboots", async (t) => {
    const { plug, power, relay } = await setup(t, digestDevice);
    await power.turnOn(relay);
    await plug.inject({ kind: "reboot" });
    assert.deepEqual(await power.turnOn(relay), { on: true });
  });

  it("falls back to Digest on an ESP8266 that fails Basic for long credentials", async (t) => {
    const long = { username: "administrator", password: "a-very-long-password-of-fifty-characters!!" };
    const { plug, power, relay } = await setup(t, { version: "2026.1", platform: "esp8266", auth: { type: "basic", ...long } }, long);
    const probe = await power.probe(relay);
    assert.equal(probe.auth, "digest");
    assert.deepEqual(plug.calls.map((c) => c.auth), ["basic", "digest"]);
  });

  it("fails as unauthorized when the credentials are wrong", async (t) => {
    const { power, relay } = await setup(t, { version: "2026.7", auth: { type: "basic", username: USER, password: "other" } });
    const { error } = await timed(() => power.read(relay));
    assertPlugError(error, "plug-unauthorized", /^reading plug .* switch "Relay": the plug rejected the credentials$/);
  });

  it("fails as unauthorized when Digest credentials are wrong", async (t) => {
    const { plug, power, relay } = await setup(t, { ...digestDevice, auth: { type: "digest", username: USER, password: "other" } });
    const { error } = await timed(() => power.turnOn(relay));
    assertPlugError(error, "plug-unauthorized", /rejected the credentials$/);
    assert.equal(plug.state("Relay"), false);
  });

  it("fails as unauthorized when the device wants credentials and none are configured", async (t) => {
    const { power, relay } = await setup(t, { auth: { type: "basic", ...CREDENTIALS } }, null);
    const { error } = await timed(() => power.read(relay));
    assertPlugError(error, "plug-unauthorized", /asks for credentials and none are configured$/);
  });
});

describe("createEsphomePowerSwitch() errors", () => {
  type Fault = Parameters<Awaited<ReturnType<typeof setup>>["plug"]["inject"]>[0];
  const devices: Record<string, PlugEmulatorOptions> = {
    Basic: { version: "2026.7", platform: "esp8266", auth: { type: "basic", ...CREDENTIALS } },
    Digest: digestDevice,
  };
  // Every error path, each with credentials configured and sent.
  const paths: { name: string; prepare: (t: TestContext, device: PlugEmulatorOptions) => Promise<() => Promise<unknown>> }[] = [
    { name: "timeout", prepare: (t, device) => faulted(t, device, { kind: "timeout" }) },
    { name: "HTTP 500", prepare: (t, device) => faulted(t, device, { kind: "http500" }) },
    { name: "dropped connection", prepare: (t, device) => faulted(t, device, { kind: "drop" }) },
    { name: "connection refused", prepare: (t, device) => faulted(t, device, { kind: "down" }) },
    { name: "unconfirmed state", prepare: (t, device) => faulted(t, device, { kind: "flap" }, "turnOn") },
    {
      name: "unknown entity",
      prepare: async (t, device) => {
        const { power, plug } = await setup(t, device);
        return () => power.read({ url: plug.url, switch: "Nope" });
      },
    },
    {
      name: "rejected credentials",
      prepare: async (t, device) => {
        const { power, relay } = await setup(t, { ...device, auth: { type: device.auth?.type ?? "basic", username: USER, password: "x" } });
        return () => power.read(relay);
      },
    },
    {
      name: "bad answer",
      prepare: () => {
        const power = createEsphomePowerSwitch({ timeoutMs: 300, credentials: CREDENTIALS, fetch: () => Promise.resolve(new Response("{}")) });
        return Promise.resolve(() => power.read({ url: "http://10.0.0.5", switch: "Relay" }));
      },
    },
    {
      name: "abort",
      prepare: async (t, device) => {
        const { power, plug, relay } = await setup(t, device);
        await plug.inject({ kind: "timeout" });
        return () => power.read(relay, { signal: AbortSignal.timeout(20) });
      },
    },
  ];

  async function faulted(t: TestContext, device: PlugEmulatorOptions, fault: Fault, call: "read" | "turnOn" = "read") {
    const { power, plug, relay } = await setup(t, device);
    await power.read(relay); // settle the auth scheme first, so the failing request carries it
    await plug.inject(fault);
    return () => power[call](relay);
  }

  for (const [scheme, device] of Object.entries(devices)) {
    for (const path of paths) {
      it(`never carry the credentials (${scheme} device, ${path.name})`, async (t) => {
        const call = await path.prepare(t, device);
        const { error } = await timed(call);
        assert.ok(error !== undefined, "the call should fail");
        assertNoSecret(error, SECRETS);
      });
    }
  }
});
