// How the Shelly power switch fails: each failure's code says whether the command may have been carried out,
// messages name the switch and never carry the password or anything the device sent.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it, type TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createShellyPowerSwitch, type ShellyAddress } from "../../../src/adapters/shelly/shelly-power-switch.ts";
import { createShellyRpc } from "../../../src/adapters/shelly/shelly-rpc.ts";
import type { CutGuard } from "../../../src/domain/ports.ts";
import { Secret } from "../../../src/adapters/secret.ts";
import { acceptAny, addressOf, allowCut, assertNoSecret, assertPlugError, emulate, rpcLog, timed } from "./support.ts";

const WHERE = String.raw`Shelly http://127\.0\.0\.1:\d+ switch \d`;

/** A plain server that answers every request with `answer`, for answers no Shelly gives. */
async function serve(t: TestContext, answer: (req: IncomingMessage, res: ServerResponse) => void): Promise<ShellyAddress> {
  const server = createServer(answer);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => { resolve(); }); }));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, device: `127.0.0.1:${port}`, switchId: 0, measure: false, password: new Secret("hunter2-plug") };
}

/** The JSON-RPC frame of a request. */
function frameOf(req: IncomingMessage): Promise<{ id: number; method: string }> {
  return new Promise((resolve) => {
    let body = "";
    req.on("data", (chunk: Buffer) => { body += chunk.toString(); });
    req.on("end", () => { resolve(JSON.parse(body) as { id: number; method: string }); });
  });
}

describe("createShellyPowerSwitch() failures", () => {
  it("a switch id the device does not have is plug-entity-not-found", async (t) => {
    const d = await emulate(t);
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 2000 }).read(addressOf(d, 3)));
    assertPlugError(error, "plug-entity-not-found", new RegExp(`^reading ${WHERE}: Switch.GetStatus answered RPC error -105 \\(no such switch id on the device\\)$`, "u"));
  });

  it("a device that never answers is plug-unreachable within the timeout", async (t) => {
    const d = await emulate(t);
    await d.inject({ kind: "hang" });
    const { error, ms } = await timed(() => createShellyPowerSwitch({ timeoutMs: 300 }).read(addressOf(d)));
    assertPlugError(error, "plug-unreachable", /: timed out after 300 ms$/u);
    assert.ok(ms < 1000, `took ${ms} ms`);
  });

  it("the timeout includes the wait behind another call to the device", async (t) => {
    const d = await emulate(t, { switches: [{}, {}] });
    await d.inject({ kind: "slow", ms: 400, times: 1 });
    // Two switches on one client (one queue per device): the first call outlasts the second's timeout.
    const rpc = createShellyRpc();
    const patient = createShellyPowerSwitch({ timeoutMs: 2000, rpc });
    const power = createShellyPowerSwitch({ timeoutMs: 250, rpc });
    const first = timed(() => patient.read(addressOf(d, 0)));
    const second = await timed(() => power.read(addressOf(d, 1)));
    assertPlugError(second.error, "plug-unreachable", /timed out after 250 ms$/u);
    assert.ok(second.ms < 1000, `took ${second.ms} ms`);
    await first;
    assert.deepEqual(rpcLog(d).map((l) => l.split(" ")[0]), ["Switch.GetStatus"], "the second read was never sent");
  });

  it("a device that is down is plug-unreachable, and a switch-on to it is known not done", async (t) => {
    const d = await emulate(t);
    await d.inject({ kind: "down" });
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 1000 }).turnOn(addressOf(d), { device: acceptAny }));
    assertPlugError(error, "plug-unreachable", new RegExp(`^turning on ${WHERE}: connection refused$`, "u"));
  });

  it("a Switch.Set whose answer was lost is plug-unconfirmed, though the device acted", async (t) => {
    const d = await emulate(t);
    d.flip(0, true);
    await d.inject({ kind: "lost-answer", rpc: "Switch.Set" });
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 1000 }).turnOff(addressOf(d), allowCut, { device: acceptAny }));
    assertPlugError(error, "plug-unconfirmed", /: connection dropped; Switch\.Set was sent and its outcome is unknown$/u);
    assert.equal(d.output(0), false);
    assert.deepEqual(rpcLog(d), ["Shelly.GetDeviceInfo 200", "Switch.Set -"], "nothing else is sent after a lost answer");
  });

  it("a Switch.Set that hangs is plug-unconfirmed", async (t) => {
    const d = await emulate(t);
    await d.inject({ kind: "hang", rpc: "Switch.Set" });
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 300 }).turnOn(addressOf(d), { device: acceptAny }));
    assertPlugError(error, "plug-unconfirmed", /timed out after 300 ms; Switch\.Set was sent/u);
  });

  it("an output that does not follow is plug-unconfirmed once the timeout passed", async (t) => {
    const d = await emulate(t);
    await d.inject({ kind: "stuck" });
    const { error, ms } = await timed(() => createShellyPowerSwitch({ timeoutMs: 400 }).turnOn(addressOf(d), { device: acceptAny }));
    assertPlugError(error, "plug-unconfirmed", /state not confirmed within 400 ms \(it still reads off\)/u);
    assert.ok(ms >= 380 && ms < 1200, `took ${ms} ms`);
    assert.ok(rpcLog(d).filter((l) => l.startsWith("Switch.GetStatus")).length >= 2, "it read back more than once");
  });

  it("an HTTP 500 on a read is plug-unreachable", async (t) => {
    const d = await emulate(t);
    await d.inject({ kind: "http500", times: 1 });
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 1000 }).read(addressOf(d)));
    assertPlugError(error, "plug-unreachable", /Switch\.GetStatus answered HTTP 500$/u);
  });

  it("a device with a password and none configured is plug-unauthorized, and nothing was switched", async (t) => {
    const d = await emulate(t, { password: "the-real-one" });
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 1000 }).turnOn(addressOf(d), { device: acceptAny }));
    assertPlugError(error, "plug-unauthorized", /: the device asks for a password and none is configured$/u);
    assert.equal(d.output(0), false);
  });

  for (const gen of [2, 4] as const) {
    it(`a wrong password (Gen${gen}) is plug-unauthorized after one answer to the challenge, and appears in no message`, async (t) => {
      const d = await emulate(t, { gen, password: "the-real-one" });
      const power = createShellyPowerSwitch({ timeoutMs: 1000 });
      const { error } = await timed(() => power.turnOn(addressOf(d, 0, { password: "wrong-pw-1234" }), { device: acceptAny }));
      assertPlugError(error, "plug-unauthorized", /: the device rejected the password$/u);
      assertNoSecret(error, ["wrong-pw-1234", "the-real-one"]);
      assert.deepEqual(rpcLog(d), ["Shelly.GetDeviceInfo 200", "Switch.Set 401", "Shelly.GetDeviceInfo 200", "Switch.Set 401"]);
      assert.equal(d.output(0), false);
    });
  }

  it("an RPC error frame is the device's refusal whatever HTTP status carries it", async (t) => {
    const address = await serve(t, (req, res) => {
      void frameOf(req).then((frame) => {
        if (frame.method === "Shelly.GetDeviceInfo") res.end(JSON.stringify({ id: frame.id, result: { id: "shellyplus1-a0dd6c000001", mac: "A0DD6C000001" } }));
        else res.writeHead(400, { "content-type": "application/json" }).end(`{"id":${frame.id},"src":"shellyplus1-x","error":{"code":-105,"message":"Bad id=0"}}`);
      });
    });
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 1000 }).turnOn({ ...address, password: undefined }, { device: acceptAny }));
    assertPlugError(error, "plug-entity-not-found", /: Switch\.Set answered RPC error -105 \(no such switch id on the device\)$/u);
  });

  it("a larger answer than any Shelly's is plug-bad-answer, unread", async (t) => {
    const address = await serve(t, (_req, res) => { res.end("x".repeat(64 * 1024)); });
    const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 1000 }).read(address));
    assertPlugError(error, "plug-bad-answer", /POST \/rpc answered HTTP 200 with more than 4096 bytes$/u);
  });

  it("never repeats what a device (or a proxy in front of it) sends back, credentials included", async (t) => {
    const address = await serve(t, (req, res) => {
      if (req.headers.authorization === undefined) {
        res.writeHead(401, { "www-authenticate": 'Digest qop="auth", realm="shellyplus1-x", nonce="1", algorithm=SHA-256' }).end();
        return;
      }
      const echo = JSON.stringify(req.headers);
      res.writeHead(400, { "content-type": "text/plain" }).end(`{"error":{"code":"${echo}","message":"${echo}"}} ${echo}`);
    });
    const power = createShellyPowerSwitch({ timeoutMs: 1000 });
    const calls: (() => Promise<unknown>)[] = [() => power.read(address), () => power.turnOn(address, { device: acceptAny }), () => power.probe(address)];
    for (const call of calls) {
      const { error } = await timed(call);
      assertPlugError(error, "plug-bad-answer", /answered HTTP 400|answered RPC error without a code/u);
      assertNoSecret(error, ["hunter2-plug", "Digest", "authorization", "response="]);
    }
  });

  describe("the cut guard", () => {
    it("a refusal sends nothing and is unsafe", async (t) => {
      const d = await emulate(t);
      d.flip(0, true);
      const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 1000 }).turnOff(addressOf(d), () => Promise.resolve(false), { device: acceptAny }));
      assertPlugError(error, "unsafe", new RegExp(`^turning off ${WHERE}: the switch-off was refused at the plug by the safety check$`, "u"));
      assert.deepEqual(rpcLog(d), ["Shelly.GetDeviceInfo 200"]);
      assert.equal(d.output(0), true);
    });

    it("a guard that fails is a refusal", async (t) => {
      const d = await emulate(t);
      d.flip(0, true);
      const { error } = await timed(() => createShellyPowerSwitch({ timeoutMs: 1000 }).turnOff(addressOf(d), () => Promise.reject(new Error("apiserver down")), { device: acceptAny }));
      assertPlugError(error, "unsafe", /refused at the plug/u);
      assert.deepEqual(rpcLog(d), ["Shelly.GetDeviceInfo 200"]);
    });

    it("is asked once the device is free, right before the switch-off goes out", async (t) => {
      const events: string[] = [];
      const d = await emulate(t, { switches: [{}, { output: true }], onRequest: (r) => events.push(`device got ${r.httpMethod} ${r.path}`) });
      await d.inject({ kind: "slow", ms: 150, times: 1 });
      const power = createShellyPowerSwitch({ timeoutMs: 2000 });
      const busy = power.read(addressOf(d, 0));
      await sleep(20);
      const seen = (): string => d.calls.map((c) => `${c.rpc} ${c.status === undefined ? "in flight" : "answered"}`).join(", ");
      const guard: CutGuard = async () => {
        events.push(`guard asked; the device has seen ${seen()}`);
        await sleep(50);
        events.push(`guard allows; the device has seen ${seen()}`);
        return true;
      };
      await Promise.all([busy, power.turnOff(addressOf(d, 1), guard, { device: acceptAny })]);
      assert.deepEqual(events.slice(0, 5), [
        "device got POST /rpc",
        "device got POST /rpc",
        "guard asked; the device has seen Switch.GetStatus answered, Shelly.GetDeviceInfo answered",
        "guard allows; the device has seen Switch.GetStatus answered, Shelly.GetDeviceInfo answered",
        "device got POST /rpc",
      ]);
      assert.deepEqual(rpcLog(d).slice(0, 3), ["Switch.GetStatus 200", "Shelly.GetDeviceInfo 200", "Switch.Set 200"]);
      assert.equal(d.output(1), false);
    });

    it("is asked again before a switch-off sent again after the device's challenge", async (t) => {
      const d = await emulate(t, { password: "pw", switches: [{ output: true }] });
      let asked = 0;
      await createShellyPowerSwitch({ timeoutMs: 2000 }).turnOff(addressOf(d, 0, { password: "pw" }), () => Promise.resolve(++asked > 0), { device: acceptAny });
      assert.equal(asked, 2);
      assert.deepEqual(rpcLog(d).slice(0, 4), ["Shelly.GetDeviceInfo 200", "Switch.Set 401", "Shelly.GetDeviceInfo 200", "Switch.Set 200"]);
    });
  });
});
