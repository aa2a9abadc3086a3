// Answers are read within a bound on size and on time: a huge or endless body costs neither memory nor more
// than the call's timeout, and the device is free for the next request afterwards.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { gzipSync } from "node:zlib";
import type { AddressInfo } from "node:net";
import { describe, it, type TestContext } from "node:test";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import type { Fault } from "../../harness/plug-emulator/index.ts";
import { acceptAny, addressOf, allowCut, assertPlugError, emulate, timed } from "./support.ts";

const TIMEOUT_MS = 1000;
const SLACK_MS = 300; // scheduling slack on a loaded 2-core machine
const MAX_RSS_GROWTH_MB = 20;

const mb = (bytes: number): number => Math.round((bytes / 2 ** 20) * 10) / 10;

async function setup(t: TestContext) {
  const plug = await emulate(t, { switchDelayMs: 10 });
  const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS });
  const relay = addressOf(plug.url);
  await power.read(relay); // loads the code paths, so the memory measured is the answer's
  return { plug, power, relay };
}

/** A device answering every request with the relay's state JSON, padded with spaces to `bytes`; its base URL. */
async function answering(t: TestContext, bytes: number): Promise<string> {
  const json = '{"value":true}';
  const server = createServer((_req, res) => res.end(json + " ".repeat(bytes - json.length)));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("createEsphomePowerSwitch() bounds on an answer", () => {
  for (const { how, fault } of [
    { how: "declared in Content-Length", fault: { kind: "huge" } },
    { how: "sent chunked", fault: { kind: "huge", chunked: true } },
  ] as { how: string; fault: Fault }[]) {
    it(`refuses a 400 MB body ${how} after at most 4 KiB, within the timeout and without the memory`, async (t) => {
      const { plug, power, relay } = await setup(t);
      await plug.inject(fault);
      const before = process.memoryUsage().rss;
      const { error, ms } = await timed(() => power.read(relay));
      const after = process.memoryUsage().rss;
      console.log(`huge body ${how}: refused after ${ms.toFixed(0)} ms; RSS ${mb(before)} -> ${mb(after)} MB (+${mb(after - before)} MB)`);
      assertPlugError(error, "plug-bad-answer", /switch "Relay": GET \/switch\/Relay answered HTTP 200 with more than 4096 bytes$/);
      assert.ok(ms < TIMEOUT_MS + SLACK_MS, `took ${ms} ms`);
      assert.ok(after - before < MAX_RSS_GROWTH_MB * 2 ** 20, `RSS grew by ${mb(after - before)} MB`);
    });
  }

  it("gives up on a body that drips in at the deadline, and frees the device for the next request", async (t) => {
    const { plug, power, relay } = await setup(t);
    await plug.inject({ kind: "drip", ms: 200, times: 1 });
    const { error, ms } = await timed(() => power.read(relay));
    console.log(`dripping body: given up after ${ms.toFixed(0)} ms (timeout ${TIMEOUT_MS} ms)`);
    assertPlugError(error, "plug-unreachable", /switch "Relay": timed out after 1000 ms$/);
    assert.ok(ms >= TIMEOUT_MS - 5 && ms < TIMEOUT_MS + SLACK_MS, `took ${ms} ms`);
    const next = await timed(() => power.read(relay));
    assert.deepEqual(next.value, { on: false });
    assert.ok(next.ms < 500, `the next read took ${next.ms} ms`);
  });

  it("fails a switch-off whose answer drips as unconfirmed at the deadline", async (t) => {
    const { plug, power, relay } = await setup(t);
    plug.setState("Relay", true);
    await plug.inject({ kind: "drip", ms: 200, method: "POST" });
    const { error, ms } = await timed(() => power.turnOff(relay, allowCut, { device: acceptAny }));
    assertPlugError(error, "plug-unconfirmed", /timed out after 1000 ms; the command was sent and its outcome is unknown$/);
    assert.ok(ms < TIMEOUT_MS + SLACK_MS, `took ${ms} ms`);
  });

  it("reads a body of exactly 4 KiB and refuses one byte more", async (t) => {
    const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS });
    assert.deepEqual(await power.read(addressOf(await answering(t, 4096))), { on: true });
    const larger = addressOf(await answering(t, 4097));
    const { error } = await timed(() => power.read(larger));
    assertPlugError(error, "plug-bad-answer", /answered HTTP 200 with more than 4096 bytes$/);
  });

  it("asks for answers uncompressed, and refuses a gzip body that inflates past 4 KiB though it is smaller on the wire", async (t) => {
    const json = '{"value":true}';
    const bomb = gzipSync(json + " ".repeat(2 ** 20), { level: 9 });
    const asked: (string | undefined)[] = [];
    const server = createServer((req, res) => {
      asked.push(req.headers["accept-encoding"]);
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip", "content-length": bomb.byteLength });
      res.end(bomb);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    t.after(() => new Promise((resolve) => server.close(resolve)));
    assert.ok(bomb.byteLength < 4096, `${bomb.byteLength} bytes compressed`);
    const relay = addressOf(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const { error } = await timed(() => createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS }).read(relay));
    assertPlugError(error, "plug-bad-answer", /GET \/switch\/Relay answered HTTP 200 with more than 4096 bytes$/);
    assert.deepEqual(asked, ["identity"]);
  });
});
