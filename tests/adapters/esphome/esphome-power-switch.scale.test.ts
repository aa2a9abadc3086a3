// Many devices at once, and one request at a time per device.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import { startPlugEmulator } from "../../harness/plug-emulator/index.ts";
import { acceptAny, addressOf, allowCut, assertPlugError, emulate, timed } from "./support.ts";

// Generous for one loopback request, but 50 parallel reads served by the same process on a busy
// 2-core machine were seen to take over a second. Live reads must stay under half of the timeout
// while the dead ones use all of it.
const TIMEOUT_MS = 4000;
const MARGIN_MS = 1000;

describe("createEsphomePowerSwitch() with many plugs", () => {
  it("reads 50 plugs in parallel within the timeout, live ones undelayed by 5 dead ones", async (t) => {
    const plugs = await Promise.all(
      Array.from({ length: 50 }, (_, i) => startPlugEmulator({ platform: i % 2 === 0 ? "esp32" : "esp8266", version: i % 3 === 0 ? "2025.12" : "2026.7" })),
    );
    t.after(() => Promise.all(plugs.map((p) => p.close())));
    const dead = new Set([3, 17, 24, 38, 49]);
    await Promise.all(plugs.map((p, i) => (dead.has(i) ? p.inject({ kind: "timeout" }) : Promise.resolve())));
    const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS });
    // One read beforehand loads fetch and the adapter's code paths, so the timings below are of reads only.
    const spare = await emulate(t);
    await power.read(addressOf(spare.url));

    // The reads are asked for in one pass, so each one's timeout counts from the pass: a dead plug's read ends
    // when the timeout has passed since the pass began, however long setting up the reads before it took.
    const pass = performance.now();
    const all = await timed(() => Promise.all(plugs.map((p) => timed(() => power.read(addressOf(p.url))).then((r) => ({ ...r, sincePass: performance.now() - pass })))));
    const results = all.value ?? [];

    assert.ok(all.ms < TIMEOUT_MS + MARGIN_MS, `all reads took ${all.ms} ms`);
    results.forEach((result, i) => {
      if (dead.has(i)) {
        assertPlugError(result.error, "plug-unreachable", /timed out after 4000 ms/);
        assert.ok(result.sincePass >= TIMEOUT_MS - 5, `dead plug ${i} failed ${result.sincePass} ms after the pass began`);
      } else {
        assert.deepEqual(result.value, { on: false }, `plug ${i}`);
        assert.ok(result.ms < TIMEOUT_MS / 2, `live plug ${i} took ${result.ms} ms`);
      }
    });
  });
});

describe("createEsphomePowerSwitch() per device", () => {
  const STRIP = ["Outlet 1", "Outlet 2", "Outlet 3", "Outlet 4"].map((name) => ({ name }));

  for (const platform of ["esp32", "esp8266"] as const) {
    it(`never has two requests in flight to one ${platform} strip, whatever its relays are asked`, async (t) => {
      const plug = await emulate(t, { platform, switches: STRIP, switchDelayMs: 15 });
      await plug.inject({ kind: "slow", ms: 5 }); // widen each request so overlaps would show
      const power = createEsphomePowerSwitch({ timeoutMs: 5000 });
      const at = (name: string) => addressOf(plug.url, name);

      const results = await Promise.all([
        power.turnOn(at("Outlet 1"), { device: acceptAny }),
        power.read(at("Outlet 2")),
        power.turnOn(at("Outlet 3"), { device: acceptAny }),
        power.read(at("Outlet 4")),
        power.turnOff(at("Outlet 2"), allowCut, { device: acceptAny }),
        power.read(at("Outlet 1")),
      ]);

      assert.equal(results.length, 6);
      assert.equal(plug.maxConcurrency, 1);
      assert.ok(plug.calls.length >= 8, `${plug.calls.length} requests`);
      assert.deepEqual([1, 2, 3, 4].map((n) => plug.state(`Outlet ${n}`)), [true, false, true, false]);
    });
  }

  it("queues by device, however its URL is spelled", async (t) => {
    const plug = await emulate(t, { platform: "esp8266", switches: STRIP });
    await plug.inject({ kind: "slow", ms: 20 });
    const power = createEsphomePowerSwitch({ timeoutMs: 5000 });
    const port = new URL(plug.url).port;
    const spellings = [`http://127.0.0.1:${port}`, `http://[::ffff:127.0.0.1]:${port}`, `http://[::ffff:7f00:1]:${port}/`];
    const addresses = spellings.map((url, i) => addressOf(url, `Outlet ${i + 1}`));
    assert.equal(new Set(addresses.map((a) => a.device)).size, 1);
    await Promise.all(addresses.flatMap((a) => [power.read(a), power.read(a)]));
    assert.equal(plug.calls.length, 6);
    assert.equal(plug.maxConcurrency, 1);
  });

  it("keeps serving other relays of a strip between the read-backs of a command", async (t) => {
    const plug = await emulate(t, { switches: STRIP, switchDelayMs: 1000 });
    const power = createEsphomePowerSwitch({ timeoutMs: 3000 });
    const switching = timed(() => power.turnOn(addressOf(plug.url, "Outlet 1"), { device: acceptAny }));
    const reading = await timed(() => power.read(addressOf(plug.url, "Outlet 2")));
    assert.deepEqual(reading.value, { on: false });
    assert.ok(reading.ms < 500, `read waited ${reading.ms} ms behind the command`);
    assert.deepEqual((await switching).value, { on: true });
  });
});
