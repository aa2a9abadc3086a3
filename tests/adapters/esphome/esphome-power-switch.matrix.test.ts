// The adapter against every emulated firmware profile: version × platform × auth.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import { startPlugEmulator, type Platform, type Version } from "../../harness/plug-emulator/index.ts";
import { acceptAny, addressOf, allowCut, emulate, eventually, expectDevice, requests } from "./support.ts";

type AuthProfile = "none" | "basic" | "digest";

const PROFILES: { version: Version; platform: Platform; auth: AuthProfile }[] = [];
for (const version of ["2025.12", "2026.1", "2026.7"] as const) {
  for (const platform of ["esp32", "esp8266"] as const) {
    // `auth.type: digest` exists from 2026.7 only.
    for (const auth of version === "2026.7" ? (["none", "basic", "digest"] as const) : (["none", "basic"] as const)) {
      PROFILES.push({ version, platform, auth });
    }
  }
}

const CREDENTIALS = { username: "admin", password: "matrix-pw" };
const STRIP = [{ name: "Relay" }, { name: "Outlet +2 Kitchen" }];

/** The scheme the device asks for: Digest wherever it offers it (the ESP8266 does before 2026.7), else Basic. */
function expectedScheme(version: Version, platform: Platform, auth: AuthProfile): string {
  if (auth === "none") return "none";
  return auth === "digest" || (platform === "esp8266" && version !== "2026.7") ? "digest" : "basic";
}

for (const { version, platform, auth } of PROFILES) {
  describe(`createEsphomePowerSwitch() with ESPHome ${version} on ${platform}, auth ${auth}`, () => {
    async function setup(t: TestContext) {
      const plug = await emulate(t, {
        version,
        platform,
        switches: STRIP,
        switchDelayMs: 20,
        ...(auth === "none" ? {} : { auth: { type: auth, ...CREDENTIALS } }),
      });
      const power = createEsphomePowerSwitch({ timeoutMs: 2000, ...(auth === "none" ? {} : { credentialsFor: () => CREDENTIALS }) });
      return { plug, power, relay: addressOf(plug.url, "Relay"), outlet: addressOf(plug.url, "Outlet +2 Kitchen") };
    }

    it("reads the relay state", async (t) => {
      const { plug, power, relay } = await setup(t);
      plug.setState("Relay", true);
      assert.deepEqual(await power.read(relay), { on: true });
      plug.setState("Relay", false);
      assert.deepEqual(await power.read(relay), { on: false });
    });

    it("turns the relay on and resolves once it reads on", async (t) => {
      const { plug, power, relay } = await setup(t);
      const device = expectDevice(`name "${plug.name}"`);
      assert.deepEqual(await power.turnOn(relay, { device }), { on: true });
      // Asked before each sending: twice where the first URL spelling is answered 404 (2025.12).
      assert.deepEqual(new Set(device.seen.map((seen) => Object.keys(seen).join())), new Set([version === "2025.12" ? "id" : "id,uptimeSeconds"]));
      assert.equal(plug.state("Relay"), true);
      assert.equal(plug.state("Outlet +2 Kitchen"), false);
      const posts = plug.calls.filter((c) => c.method === "POST");
      assert.ok(posts.length >= 1 && posts.every((c) => c.path.endsWith("/turn_on") && c.contentLength === "0"));
    });

    it("turns the relay off and resolves once it reads off", async (t) => {
      const { plug, power, relay } = await setup(t);
      plug.setState("Relay", true);
      assert.deepEqual(await power.turnOff(relay, allowCut, { device: acceptAny }), { on: false });
      assert.equal(plug.state("Relay"), false);
      assert.ok(!requests(plug).some((r) => r.includes("toggle")));
    });

    it("switches and reads a relay whose name has spaces and a plus", async (t) => {
      const { plug, power, outlet } = await setup(t);
      assert.deepEqual(await power.turnOn(outlet, { device: acceptAny }), { on: true });
      assert.equal(plug.state("Outlet +2 Kitchen"), true);
      assert.equal(plug.state("Relay"), false);
      assert.deepEqual(await power.read(outlet), { on: true });
    });

    it("goes straight to the URL form that worked before", async (t) => {
      const { plug, power, outlet } = await setup(t);
      await power.read(outlet);
      const working = plug.calls.filter((c) => c.status === 200).at(-1)?.path;
      const expected = version === "2025.12" ? "/switch/outlet__2_kitchen" : "/switch/Outlet%20%2B2%20Kitchen";
      assert.equal(working, expected);
      plug.resetCalls();
      await power.read(outlet);
      assert.deepEqual(requests(plug), [`GET ${expected}`]);
    });

    it("reports the URL form, auth scheme and the device's name in a probe", async (t) => {
      const { plug, power, outlet } = await setup(t);
      const { identity, ...probe } = await power.probe(outlet);
      assert.deepEqual(probe, {
        state: "off",
        urlStyle: version === "2025.12" ? "object_id" : "name",
        auth: expectedScheme(version, platform, auth),
      });
      assert.equal(identity.id, `name "${plug.name}"`);
    });

    it("reads /events only up to its first ping, closes it, and then sends the command", async (t) => {
      const { plug, power, relay } = await setup(t);
      await power.turnOn(relay, { device: acceptAny });
      plug.resetCalls();
      // The stream never ends by itself: the call ends only because the adapter stopped at the ping.
      assert.deepEqual(await power.turnOff(relay, allowCut, { device: expectDevice(`name "${plug.name}"`) }), { on: false });
      assert.equal(requests(plug)[0], "GET /events");
      assert.match(requests(plug)[1] ?? "", /^POST \/switch\/\S+\/turn_off$/);
      await eventually(() => plug.openStreams === 0);
    });
  });
}

describe("createEsphomePowerSwitch() across a firmware upgrade", () => {
  it("moves from the remembered object_id to the name once the object_id gives 404", async (t) => {
    const old = await startPlugEmulator({ version: "2025.12", switches: [{ name: "Outlet 2" }] });
    const plug = addressOf(old.url, "Outlet 2");
    const power = createEsphomePowerSwitch({ timeoutMs: 2000 });
    await power.read(plug);
    await old.close();
    const upgraded = await emulate(t, { version: "2026.7", switches: [{ name: "Outlet 2" }], port: Number(new URL(old.url).port) });
    upgraded.setState("Outlet 2", true);

    assert.deepEqual(await power.read(plug), { on: true });
    assert.deepEqual(requests(upgraded), ["GET /switch/outlet_2", "GET /switch/Outlet%202"]);
    upgraded.resetCalls();
    await power.read(plug);
    assert.deepEqual(requests(upgraded), ["GET /switch/Outlet%202"]);
  });
});
