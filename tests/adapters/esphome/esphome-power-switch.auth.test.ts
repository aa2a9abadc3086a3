// Authentication as the devices ask for it, and credentials kept out of every error.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import type { Fault, PlugEmulatorOptions } from "../../harness/plug-emulator/index.ts";
import { acceptAny, addressOf, allowCut, assertNoSecret, assertPlugError, emulate, timed } from "./support.ts";

const USER = "ops";
const SECRET = "Zq7/only+here=pw";
const CREDENTIALS = { username: USER, password: SECRET };
// The password as it is, in a Basic header, and URL-encoded: none may show in an error.
const SECRETS = [SECRET, Buffer.from(`${USER}:${SECRET}`).toString("base64"), encodeURIComponent(SECRET)];

async function setup(t: TestContext, opts: PlugEmulatorOptions, credentials: { username: string; password: string } | null = CREDENTIALS) {
  const plug = await emulate(t, { switchDelayMs: 10, ...opts });
  const power = createEsphomePowerSwitch({ timeoutMs: 1000, ...(credentials ? { credentialsFor: () => credentials } : {}) });
  return { plug, power, relay: addressOf(plug.url) };
}

const digestDevice: PlugEmulatorOptions = { version: "2026.7", platform: "esp32", auth: { type: "digest", ...CREDENTIALS } };
const basicDevice: PlugEmulatorOptions = { version: "2026.7", platform: "esp32", auth: { type: "basic", ...CREDENTIALS } };

/** A fetch answering 401 with `challenge` until it gets a Digest header, then the relay's state; it logs each Authorization scheme. */
function challengingFetch(challenge: string, seen: string[]): typeof fetch {
  return (input, init) => {
    const header = new Request(input, init).headers.get("authorization");
    seen.push(header?.split(" ", 1)[0] ?? "none");
    if (header?.startsWith("Digest ") === true) return Promise.resolve(Response.json({ value: false }));
    return Promise.resolve(new Response("", { status: 401, headers: { "www-authenticate": challenge } }));
  };
}

describe("createEsphomePowerSwitch() authentication", () => {
  it("never sends Basic to a Digest device, across three plugpool starts", async (t) => {
    const plug = await emulate(t, { ...digestDevice, switchDelayMs: 10 });
    for (let start = 1; start <= 3; start++) {
      plug.resetCalls();
      const power = createEsphomePowerSwitch({ timeoutMs: 1000, credentialsFor: () => CREDENTIALS });
      const relay = addressOf(plug.url);
      await power.read(relay);
      await power.turnOn(relay, { device: acceptAny });
      await power.turnOff(relay, allowCut, { device: acceptAny });
      const schemes = plug.calls.map((c) => c.auth);
      assert.deepEqual(schemes.slice(0, 2), ["none", "digest"], `start ${start}`);
      assert.deepEqual(new Set(schemes.slice(1)), new Set(["digest"]), `start ${start}: ${schemes.join(", ")}`);
    }
  });

  it("sends no credentials until a Basic device asks, then Basic up front", async (t) => {
    const { plug, power, relay } = await setup(t, basicDevice);
    await power.read(relay);
    await power.turnOn(relay, { device: acceptAny });
    assert.deepEqual(plug.calls.map((c) => [c.method, c.path, c.auth, c.status]).slice(0, 4), [
      ["GET", "/switch/Relay", "none", 401],
      ["GET", "/switch/Relay", "basic", 200],
      ["GET", "/events", "basic", 200],
      ["POST", "/switch/Relay/turn_on", "basic", 200],
    ]);
    assert.equal(plug.state("Relay"), true);
    assert.equal((await power.probe(relay)).auth, "basic");
  });

  it("never sends credentials to a device without auth", async (t) => {
    const { plug, power, relay } = await setup(t, {});
    await power.read(relay);
    await power.turnOn(relay, { device: acceptAny });
    await power.turnOff(relay, allowCut, { device: acceptAny });
    assert.deepEqual(new Set(plug.calls.map((c) => c.auth)), new Set(["none"]));
    assert.equal((await power.probe(relay)).auth, "none");
  });

  it("answers a Digest challenge and keeps using Digest with the same nonce", async (t) => {
    const { plug, power, relay } = await setup(t, digestDevice);
    await power.read(relay);
    await power.read(relay);
    assert.deepEqual(plug.calls.map((c) => [c.auth, c.status]), [["none", 401], ["digest", 200], ["digest", 200]]);
  });

  it("chooses Digest when a device offers it among several challenges", async () => {
    const seen: string[] = [];
    const challenge = 'Basic realm="Login Required", Digest realm="Login Required", qop="auth", nonce="abc", opaque="xyz"';
    const power = createEsphomePowerSwitch({ timeoutMs: 1000, credentialsFor: () => CREDENTIALS, fetch: challengingFetch(challenge, seen) });
    assert.deepEqual(await power.read(addressOf("http://10.0.0.5")), { on: false });
    assert.deepEqual(seen, ["none", "Digest"]);
  });

  it("sends no Basic to a device that offers a Digest it cannot answer, even beside Basic", async () => {
    const seen: string[] = [];
    const challenge = 'Digest realm="r", nonce="n", algorithm=SHA-512-256, Basic realm="r"';
    const power = createEsphomePowerSwitch({ timeoutMs: 1000, credentialsFor: () => CREDENTIALS, fetch: challengingFetch(challenge, seen) });
    const { error } = await timed(() => power.read(addressOf("http://10.0.0.5")));
    assertPlugError(error, "plug-unauthorized", /asks for credentials in a way plugpool does not answer/);
    assert.deepEqual(seen, ["none"]);
  });

  it("uses each plug's own credentials", async (t) => {
    const other = { username: "second", password: "another-pw" };
    const first = await emulate(t, basicDevice);
    const second = await emulate(t, { ...digestDevice, auth: { type: "digest", ...other } });
    const byDevice = new Map([[addressOf(first.url).device, CREDENTIALS], [addressOf(second.url).device, other]]);
    const power = createEsphomePowerSwitch({ timeoutMs: 1000, credentialsFor: (plug) => byDevice.get(plug.device) });
    assert.deepEqual(await power.read(addressOf(first.url)), { on: false });
    assert.deepEqual(await power.read(addressOf(second.url)), { on: false });
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
    await power.turnOn(relay, { device: acceptAny });
    await plug.inject({ kind: "reboot" });
    assert.deepEqual(await power.turnOn(relay, { device: acceptAny }), { on: true });
  });

  it("uses Digest with an ESP8266 that offers it, where Basic fails for long credentials", async (t) => {
    const long = { username: "administrator", password: "a-very-long-password-of-fifty-characters!!" };
    const { plug, power, relay } = await setup(t, { version: "2026.1", platform: "esp8266", auth: { type: "basic", ...long } }, long);
    const probe = await power.probe(relay);
    assert.equal(probe.auth, "digest");
    assert.deepEqual(plug.calls.map((c) => c.auth), ["none", "digest", "digest"]);
  });

  it("fails as unauthorized when the credentials are wrong", async (t) => {
    const { power, relay } = await setup(t, { version: "2026.7", auth: { type: "basic", username: USER, password: "other" } });
    const { error } = await timed(() => power.read(relay));
    assertPlugError(error, "plug-unauthorized", /^reading plug .* switch "Relay": the plug rejected the credentials$/);
  });

  it("fails as unauthorized when Digest credentials are wrong, with nothing switched", async (t) => {
    const { plug, power, relay } = await setup(t, { ...digestDevice, auth: { type: "digest", username: USER, password: "other" } });
    const { error } = await timed(() => power.turnOn(relay, { device: acceptAny }));
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
  it("says a 401 without WWW-Authenticate names no scheme, rather than blaming one it did not offer", async () => {
    const fetch: typeof globalThis.fetch = () => Promise.resolve(new Response("", { status: 401 }));
    const power = createEsphomePowerSwitch({ timeoutMs: 1000, fetch, credentialsFor: () => CREDENTIALS });
    const error: unknown = await power.read(addressOf("http://plug.test")).catch((e: unknown) => e);
    assertPlugError(error, "plug-unauthorized", /answers 401 without saying which credentials it wants/);
  });

  const devices: Record<string, PlugEmulatorOptions> = {
    Basic: basicDevice,
    Digest: digestDevice,
  };
  type Call = () => Promise<unknown>;
  // Every error path, each with credentials configured and sent.
  const paths: { name: string; prepare: (t: TestContext, device: PlugEmulatorOptions) => Promise<Call> }[] = [
    { name: "timeout", prepare: (t, device) => faulted(t, device, { kind: "timeout" }) },
    { name: "HTTP 500", prepare: (t, device) => faulted(t, device, { kind: "http500" }) },
    { name: "dropped connection", prepare: (t, device) => faulted(t, device, { kind: "drop" }) },
    { name: "connection refused", prepare: (t, device) => faulted(t, device, { kind: "down" }) },
    { name: "request headers echoed in a 200", prepare: (t, device) => faulted(t, device, { kind: "echo" }) },
    { name: "request headers echoed in a 500", prepare: (t, device) => faulted(t, device, { kind: "echo", status: 500 }) },
    { name: "request headers echoed in a 401", prepare: (t, device) => faulted(t, device, { kind: "echo", status: 401 }) },
    { name: "request headers echoed to a switch-on", prepare: (t, device) => faulted(t, device, { kind: "echo" }, "turnOn") },
    { name: "request headers echoed to a switch-off", prepare: (t, device) => faulted(t, device, { kind: "echo" }, "turnOff") },
    { name: "switch-on timed out", prepare: (t, device) => faulted(t, device, { kind: "timeout", method: "POST" }, "turnOn") },
    { name: "switch-off dropped", prepare: (t, device) => faulted(t, device, { kind: "drop", method: "POST" }, "turnOff") },
    { name: "unconfirmed state", prepare: (t, device) => faulted(t, device, { kind: "flap" }, "turnOn") },
    { name: "huge answer", prepare: (t, device) => faulted(t, device, { kind: "huge", chunked: true }) },
    { name: "dripping answer", prepare: (t, device) => faulted(t, device, { kind: "drip", ms: 200 }) },
    {
      name: "unknown entity",
      prepare: async (t, device) => {
        const { power, plug } = await setup(t, device);
        return () => power.read(addressOf(plug.url, "Nope"));
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
      name: "bad JSON",
      prepare: () => {
        const echo: typeof fetch = (input, init) => Promise.resolve(new Response(`{"value": ${JSON.stringify(new Request(input, init).headers.get("authorization"))}`));
        const power = createEsphomePowerSwitch({ timeoutMs: 300, credentialsFor: () => CREDENTIALS, fetch: echo });
        return Promise.resolve(() => power.read(addressOf("http://10.0.0.5")));
      },
    },
    {
      name: "abort",
      prepare: async (t, device) => {
        const { power, plug, relay } = await setup(t, device);
        await power.read(relay);
        await plug.inject({ kind: "timeout" });
        return () => power.read(relay, { signal: AbortSignal.timeout(20) });
      },
    },
  ];

  async function faulted(t: TestContext, device: PlugEmulatorOptions, fault: Fault, call: "read" | "turnOn" | "turnOff" = "read"): Promise<Call> {
    const { power, plug, relay } = await setup(t, device);
    await power.read(relay); // settle the auth scheme first, so the failing request carries it
    await plug.inject(fault);
    if (call === "turnOff") return () => power.turnOff(relay, allowCut, { device: acceptAny });
    return call === "turnOn" ? () => power.turnOn(relay, { device: acceptAny }) : () => power.read(relay);
  }

  for (const [scheme, device] of Object.entries(devices)) {
    for (const path of paths) {
      it(`never carry the credentials (${scheme} device, ${path.name})`, async (t) => {
        const call = await path.prepare(t, device);
        const { error } = await timed(call);
        assert.ok(error !== undefined, "the call should fail");
        assertNoSecret(error, SECRETS);
        assert.doesNotMatch((error as Error).message, /authorization|user-agent|\{/iu, "nothing the device sent is in the message");
      });
    }
  }
});
