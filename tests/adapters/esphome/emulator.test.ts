// The plug emulator itself: it must behave as ESPHome's web_server does, or the adapter
// tests prove nothing.
import assert from "node:assert/strict";
import { connect } from "node:net";
import { describe, it } from "node:test";
import { emulatedObjectId, startPlugEmulator, type EmulatedPlug } from "../../harness/plug-emulator/index.ts";
import { emulate, eventually, timed } from "./support.ts";

/** Sends raw request text and returns all the socket received until the device closed it. */
function raw(plug: EmulatedPlug, request: string): Promise<string> {
  const { port } = new URL(plug.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    let received = "";
    socket.setTimeout(2000, () => {
      socket.destroy();
      reject(new Error(`no close within 2 s; got ${JSON.stringify(received)}`));
    });
    socket.on("data", (chunk) => (received += chunk.toString("utf8")));
    socket.on("close", () => {
      resolve(received);
    });
    socket.on("error", reject);
    socket.write(request);
  });
}

const get = (plug: EmulatedPlug, path: string, init: RequestInit = {}): Promise<Response> => fetch(plug.url + path, init);
const post = (plug: EmulatedPlug, path: string, init: RequestInit = {}): Promise<Response> => fetch(plug.url + path, { method: "POST", ...init });
const basic = (user: string, pass: string): string => `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}`;

describe("plug emulator", () => {
  describe("object_id", () => {
    it("derives the reference's examples", () => {
      assert.equal(emulatedObjectId("Relay"), "relay");
      assert.equal(emulatedObjectId("Living Room Light"), "living_room_light");
      assert.equal(emulatedObjectId("Plug #1 (Kitchen)"), "plug__1__kitchen_");
    });
  });

  describe("version 2025.12", () => {
    it("answers object_id URLs with the legacy id only", async (t) => {
      const plug = await emulate(t, { version: "2025.12" });
      const res = await get(plug, "/switch/relay");
      assert.equal(res.status, 200);
      assert.equal(await res.text(), '{"id":"switch-relay","value":false,"state":"OFF"}');
    });

    it("answers a name URL with 404", async (t) => {
      const plug = await emulate(t, { version: "2025.12" });
      assert.equal((await get(plug, "/switch/Relay")).status, 404);
    });

    it("executes an action sent as GET", async (t) => {
      const plug = await emulate(t, { version: "2025.12" });
      assert.equal((await get(plug, "/switch/relay/turn_on")).status, 200);
      await eventually(() => plug.state("Relay"));
    });

    it("reads the state with a trailing slash", async (t) => {
      const plug = await emulate(t, { version: "2025.12" });
      assert.equal((await get(plug, "/switch/relay/")).status, 200);
    });
  });

  describe("version 2026.1", () => {
    it("answers name URLs with name_id and the legacy id", async (t) => {
      const plug = await emulate(t, { version: "2026.1", switches: [{ name: "Outlet 2" }] });
      const res = await get(plug, "/switch/Outlet%202");
      assert.equal(await res.text(), '{"name_id":"switch/Outlet 2","id":"switch-outlet_2","value":false,"state":"OFF"}');
    });

    it("decodes + as a space", async (t) => {
      const plug = await emulate(t, { version: "2026.1", switches: [{ name: "Outlet 2" }] });
      assert.equal((await get(plug, "/switch/Outlet+2")).status, 200);
    });

    it("falls back to the object_id and logs a deprecation warning", async (t) => {
      const plug = await emulate(t, { version: "2026.1" });
      assert.equal((await get(plug, "/switch/relay")).status, 200);
      assert.match(plug.warnings[0] ?? "", /^Deprecated URL format: \/switch\/relay - use entity name '\/switch\/Relay'/);
    });

    it("reads a GET on an action URL as sub-device/entity: 404, nothing done", async (t) => {
      const plug = await emulate(t, { version: "2026.1" });
      assert.equal((await get(plug, "/switch/Relay/turn_on")).status, 404);
      assert.equal(plug.state("Relay"), false);
    });

    it("answers empty segments with 404 Not Found", async (t) => {
      const plug = await emulate(t, { version: "2026.1" });
      const res = await get(plug, "/switch//Relay");
      assert.equal(res.status, 404);
      assert.equal(await res.text(), "Not Found");
    });

    it("answers an unknown action with 404", async (t) => {
      const plug = await emulate(t, { version: "2026.1" });
      assert.equal((await post(plug, "/switch/Relay/blink")).status, 404);
    });
  });

  describe("version 2026.7", () => {
    it("answers object_id URLs with 404", async (t) => {
      const plug = await emulate(t, { version: "2026.7" });
      assert.equal((await get(plug, "/switch/relay")).status, 404);
      assert.equal((await post(plug, "/switch/relay/turn_on")).status, 404);
    });
  });

  describe("platform esp32", () => {
    it("answers other methods with 405", async (t) => {
      const plug = await emulate(t, { platform: "esp32" });
      assert.equal((await get(plug, "/switch/Relay", { method: "PUT" })).status, 405);
    });

    it("answers a POST without Content-Length with 411", async (t) => {
      const plug = await emulate(t, { platform: "esp32" });
      const answer = await raw(plug, "POST /switch/Relay/turn_on HTTP/1.1\r\nHost: plug\r\nConnection: close\r\n\r\n");
      assert.match(answer, /^HTTP\/1\.1 411 /);
      assert.match(answer, /Client must specify Content-Length$/);
      assert.equal(plug.state("Relay"), false);
    });

    it("closes the socket without an answer for a path no handler claims", async (t) => {
      const plug = await emulate(t, { platform: "esp32" });
      assert.equal(await raw(plug, "GET /favicon.ico HTTP/1.1\r\nHost: plug\r\n\r\n"), "");
    });

    it("keeps the connection open", async (t) => {
      const plug = await emulate(t, { platform: "esp32" });
      assert.notEqual((await get(plug, "/switch/Relay")).headers.get("connection"), "close");
    });

    it("serves one request at a time", async (t) => {
      const plug = await emulate(t, { platform: "esp32" });
      await plug.inject({ kind: "slow", ms: 100 });
      const { ms } = await timed(() => Promise.all([get(plug, "/switch/Relay"), get(plug, "/switch/Relay")]));
      assert.ok(ms >= 195, `two slow requests done in ${ms} ms`);
    });
  });

  describe("platform esp8266", () => {
    it("answers other methods with 404 Not found", async (t) => {
      const plug = await emulate(t, { platform: "esp8266" });
      const res = await get(plug, "/switch/Relay", { method: "PUT" });
      assert.equal(res.status, 404);
      assert.equal(await res.text(), "Not found");
    });

    it("closes the connection after every answer", async (t) => {
      const plug = await emulate(t, { platform: "esp8266" });
      assert.equal((await get(plug, "/switch/Relay")).headers.get("connection"), "close");
    });

    it("accepts a POST without Content-Length", async (t) => {
      const plug = await emulate(t, { platform: "esp8266" });
      assert.match(await raw(plug, "POST /switch/Relay/turn_on HTTP/1.1\r\nHost: plug\r\n\r\n"), /^HTTP\/1\.1 200 /);
    });
  });

  describe("switching", () => {
    it("answers 200 before the relay changes, then changes it", async (t) => {
      const plug = await emulate(t, { switchDelayMs: 300 });
      assert.equal((await post(plug, "/switch/Relay/turn_on")).status, 200);
      assert.equal(await (await get(plug, "/switch/Relay")).text(), '{"name_id":"switch/Relay","id":"switch-relay","value":false,"state":"OFF"}');
      await eventually(() => plug.state("Relay"));
    });

    it("toggles", async (t) => {
      const plug = await emulate(t);
      await post(plug, "/switch/Relay/toggle");
      await eventually(() => plug.state("Relay"));
    });

    it("serves each relay of a strip on its own", async (t) => {
      const plug = await emulate(t, { switches: [{ name: "A" }, { name: "B" }] });
      await post(plug, "/switch/B/turn_on");
      await eventually(() => plug.state("B"));
      assert.equal(plug.state("A"), false);
    });

    it("tells an attached machine and reports its draw on the power sensor", async (t) => {
      const plug = await emulate(t, { switches: [{ name: "Relay", powerSensor: "Power" }] });
      const seen: boolean[] = [];
      plug.attachMachine("Relay", { powerChanged: (on) => seen.push(on), watts: () => 142.25 });
      await post(plug, "/switch/Relay/turn_on");
      await eventually(() => seen.length === 1);
      const sensor: unknown = await (await get(plug, "/sensor/Power")).json();
      assert.deepEqual(sensor, { name_id: "sensor/Power", id: "sensor-power", value: 142.3, state: "142.3 W" });
      assert.deepEqual(seen, [true]);
    });
  });

  describe("restore_mode on reboot", () => {
    const cases = [
      { mode: "ALWAYS_OFF", before: true, after: false },
      { mode: "ALWAYS_ON", before: false, after: true },
      { mode: "RESTORE_DEFAULT_OFF", before: true, after: true },
      { mode: "RESTORE_DEFAULT_ON", before: false, after: false },
      { mode: "RESTORE_INVERTED_DEFAULT_OFF", before: true, after: false },
      { mode: "DISABLED", before: true, after: false },
    ] as const;
    for (const { mode, before, after } of cases) {
      it(`boots ${mode} ${after ? "on" : "off"} after it was ${before ? "on" : "off"}`, async (t) => {
        const plug = await emulate(t, { switches: [{ name: "Relay", restoreMode: mode }] });
        plug.setState("Relay", before);
        await plug.inject({ kind: "reboot" });
        assert.equal(plug.state("Relay"), after);
      });
    }

    it("starts ALWAYS_ON on", async (t) => {
      const plug = await emulate(t, { switches: [{ name: "Relay", restoreMode: "ALWAYS_ON" }] });
      assert.equal(plug.state("Relay"), true);
    });

    it("loses the RTC-saved state of an esp8266 on power loss", async (t) => {
      const plug = await emulate(t, { platform: "esp8266", switches: [{ name: "Relay", restoreMode: "RESTORE_DEFAULT_OFF" }] });
      plug.setState("Relay", true);
      await plug.inject({ kind: "reboot", powerLoss: true });
      assert.equal(plug.state("Relay"), false);
    });

    it("cuts the machine's power while rebooting even when the relay comes back on", async (t) => {
      const plug = await emulate(t, { switches: [{ name: "Relay", restoreMode: "RESTORE_DEFAULT_OFF" }] });
      plug.setState("Relay", true);
      const seen: boolean[] = [];
      plug.attachMachine("Relay", { powerChanged: (on) => seen.push(on), watts: () => 0 });
      await plug.inject({ kind: "reboot" });
      assert.deepEqual(seen, [false, true]);
    });
  });

  describe("auth", () => {
    const account = { username: "admin", password: "pw" };

    it("challenges with Basic on esp32 and accepts Basic", async (t) => {
      const plug = await emulate(t, { platform: "esp32", version: "2026.1", auth: { type: "basic", ...account } });
      const denied = await get(plug, "/switch/Relay");
      assert.equal(denied.status, 401);
      assert.equal(denied.headers.get("www-authenticate"), 'Basic realm="Login Required"');
      assert.equal((await get(plug, "/switch/Relay", { headers: { authorization: basic("admin", "pw") } })).status, 200);
    });

    it("challenges with Digest (algorithm=MD5) and refuses Basic on esp32 2026.7 with digest", async (t) => {
      const plug = await emulate(t, { platform: "esp32", version: "2026.7", auth: { type: "digest", ...account } });
      const denied = await get(plug, "/switch/Relay", { headers: { authorization: basic("admin", "pw") } });
      assert.equal(denied.status, 401);
      assert.match(denied.headers.get("www-authenticate") ?? "", /^Digest realm="Login Required", qop="auth", algorithm=MD5, nonce="[0-9a-f]{32}", opaque="[0-9a-f]{32}"$/);
    });

    it("challenges with Digest but accepts Basic on esp8266 before 2026.7", async (t) => {
      const plug = await emulate(t, { platform: "esp8266", version: "2025.12", auth: { type: "basic", ...account } });
      const denied = await get(plug, "/switch/relay");
      assert.match(denied.headers.get("www-authenticate") ?? "", /^Digest realm="Login Required", qop="auth", nonce=/);
      assert.equal((await get(plug, "/switch/relay", { headers: { authorization: basic("admin", "pw") } })).status, 200);
    });

    it("fails Basic from 54 bytes of user:pass on esp8266", async (t) => {
      const long = { username: "u".repeat(20), password: "p".repeat(33) };
      const plug = await emulate(t, { platform: "esp8266", version: "2026.1", auth: { type: "basic", ...long } });
      assert.equal((await get(plug, "/switch/Relay", { headers: { authorization: basic(long.username, long.password) } })).status, 401);
    });

    it("refuses digest before 2026.7, where the option does not exist", async () => {
      await assert.rejects(startPlugEmulator({ version: "2026.1", auth: { type: "digest", ...account } }), /does not exist before ESPHome 2026\.7/);
    });
  });

  describe("faults", () => {
    it("never answers with timeout", async (t) => {
      const plug = await emulate(t);
      await plug.inject({ kind: "timeout" });
      const { error } = await timed(() => get(plug, "/switch/Relay", { signal: AbortSignal.timeout(100) }));
      assert.equal((error as Error).name, "TimeoutError");
    });

    it("drops the connection for the given number of requests", async (t) => {
      const plug = await emulate(t);
      await plug.inject({ kind: "drop", times: 1 });
      await assert.rejects(get(plug, "/switch/Relay"), /fetch failed/);
      assert.equal((await get(plug, "/switch/Relay")).status, 200);
    });

    it("limits a fault to one domain", async (t) => {
      const plug = await emulate(t, { switches: [{ name: "Relay", powerSensor: "Power" }] });
      await plug.inject({ kind: "http500", domain: "sensor" });
      assert.equal((await get(plug, "/switch/Relay")).status, 200);
      assert.equal((await get(plug, "/sensor/Power")).status, 500);
    });

    it("refuses connections while down and serves again once cleared", async (t) => {
      const plug = await emulate(t);
      await plug.inject({ kind: "down" });
      const { error } = await timed(() => get(plug, "/switch/Relay"));
      assert.equal(((error as Error).cause as { code?: string }).code, "ECONNREFUSED");
      await plug.clearFaults();
      assert.equal((await get(plug, "/switch/Relay")).status, 200);
    });

    it("echoes the request's headers in the body and the Content-Type", async (t) => {
      const plug = await emulate(t);
      await plug.inject({ kind: "echo", status: 500 });
      const res = await get(plug, "/switch/Relay", { headers: { authorization: basic("a", "echoed-pw") } });
      assert.equal(res.status, 500);
      assert.match(res.headers.get("content-type") ?? "", /^text\/plain; echo=.*Basic YTplY2hvZWQtcHc=/);
      assert.match(await res.text(), /Basic YTplY2hvZWQtcHc=/);
    });

    for (const chunked of [false, true]) {
      it(`streams a 400 MB body ${chunked ? "chunked" : "with its Content-Length"}, as fast as it is read`, async (t) => {
        const plug = await emulate(t);
        await plug.inject({ kind: "huge", chunked });
        const res = await get(plug, "/switch/Relay");
        assert.equal(res.headers.get("content-length"), chunked ? null : String(400 * 1024 * 1024));
        assert.equal(res.headers.get("transfer-encoding"), chunked ? "chunked" : null);
        const reader = (res.body as ReadableStream<Uint8Array>).getReader();
        const { value } = await reader.read();
        assert.ok((value?.byteLength ?? 0) > 0);
        await reader.cancel();
      });
    }

    it("drips its body one byte at a time", async (t) => {
      const plug = await emulate(t);
      await plug.inject({ kind: "drip", ms: 20 });
      const res = await get(plug, "/switch/Relay");
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const { ms } = await timed(async () => {
        for (let bytes = 0; bytes < 3; ) bytes += (await reader.read()).value?.byteLength ?? 0;
      });
      assert.ok(ms >= 40, `3 bytes in ${ms} ms`);
      await reader.cancel();
    });

    it("limits a fault to requests that carry credentials", async (t) => {
      const plug = await emulate(t, { auth: { type: "basic", username: "a", password: "b" } });
      await plug.inject({ kind: "http500", withAuth: true });
      assert.equal((await get(plug, "/switch/Relay")).status, 401);
      assert.equal((await get(plug, "/switch/Relay", { headers: { authorization: basic("a", "b") } })).status, 500);
    });

    it("flips a flapping relay by itself", async (t) => {
      const plug = await emulate(t);
      await plug.inject({ kind: "flap", everyMs: 10 });
      await eventually(() => plug.state("Relay"));
      await eventually(() => !plug.state("Relay"));
    });

    it("never shows the commanded state of a relay flapping back after each action", async (t) => {
      const plug = await emulate(t);
      const seen: boolean[] = [];
      plug.attachMachine("Relay", { powerChanged: (on) => seen.push(on), watts: () => 0 });
      await plug.inject({ kind: "flap" });
      await post(plug, "/switch/Relay/turn_on");
      await eventually(() => seen.length === 2);
      assert.deepEqual(seen, [true, false]);
      assert.equal(plug.state("Relay"), false);
    });
  });

  describe("records", () => {
    it("logs method, raw path, auth scheme, Content-Length and status", async (t) => {
      const plug = await emulate(t);
      await post(plug, "/switch/Relay/turn_on", { headers: { authorization: basic("a", "b") } });
      assert.deepEqual(plug.calls, [{ method: "POST", path: "/switch/Relay/turn_on", auth: "basic", contentLength: "0", status: 200 }]);
    });

    it("counts requests in flight at once", async (t) => {
      const plug = await emulate(t, { platform: "esp8266" });
      await plug.inject({ kind: "slow", ms: 50 });
      await Promise.all([get(plug, "/switch/Relay"), get(plug, "/switch/Relay")]);
      assert.equal(plug.maxConcurrency, 2);
    });
  });
});
