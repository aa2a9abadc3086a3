// The Shelly emulator itself: it must behave as a Shelly Gen2+ device does, or the adapter tests prove nothing.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { describe, it, type TestContext } from "node:test";
import { startShellyEmulator, type EmulatedShelly, type ShellyEmulatorOptions } from "../../harness/shelly-emulator/index.ts";

async function emulate(t: TestContext, opts: ShellyEmulatorOptions = {}): Promise<EmulatedShelly> {
  const device = await startShellyEmulator(opts);
  t.after(() => device.close());
  return device;
}

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");

function challengeOf(res: Response): { realm: string; nonce: string; qop: string; algorithm: string } {
  const header = res.headers.get("www-authenticate") ?? "";
  const p = new Map([...header.matchAll(/(\w+)=(?:"([^"]*)"|([^\s,]+))/gu)].map((m): [string, string] => [m[1] ?? "", m[2] ?? m[3] ?? ""]));
  return { realm: p.get("realm") ?? "", nonce: p.get("nonce") ?? "", qop: p.get("qop") ?? "", algorithm: p.get("algorithm") ?? "" };
}

/** An RFC 7616 Authorization header, as any HTTP client computes it. */
function digest(challenge: { realm: string; nonce: string }, password: string, method: string, uri: string, nc = 1, user = "admin"): string {
  const ncHex = nc.toString(16).padStart(8, "0");
  const cnonce = randomBytes(8).toString("hex");
  const ha1 = sha256(`${user}:${challenge.realm}:${password}`);
  const response = sha256(`${ha1}:${challenge.nonce}:${ncHex}:${cnonce}:auth:${sha256(`${method}:${uri}`)}`);
  return `Digest username="${user}", realm="${challenge.realm}", nonce="${challenge.nonce}", uri="${uri}", algorithm=SHA-256, qop=auth, nc=${ncHex}, cnonce="${cnonce}", response="${response}"`;
}

const get = (d: EmulatedShelly, path: string, init: RequestInit = {}): Promise<Response> => fetch(d.url + path, init);
const frame = (d: EmulatedShelly, body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(`${d.url}/rpc`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json", ...headers } });

/** The outcome of a request that may get no answer: its Response, or the error code of the failure. */
async function outcome(pending: Promise<Response>): Promise<Response | string> {
  try {
    return await pending;
  } catch (error) {
    const cause = (error as { cause?: { code?: string; name?: string } }).cause;
    return cause?.code ?? cause?.name ?? (error as Error).name;
  }
}

describe("Shelly emulator", () => {
  describe("identity", () => {
    for (const gen of [2, 3, 4] as const) {
      it(`reports generation ${gen} in Shelly.GetDeviceInfo and /shelly`, async (t) => {
        const d = await emulate(t, { gen });
        const info = (await (await get(d, "/rpc/Shelly.GetDeviceInfo")).json()) as Record<string, unknown>;
        assert.equal(info.gen, gen);
        assert.equal(info.id, d.id);
        assert.equal(info.auth_en, false);
        assert.equal(typeof info.model, "string");
        assert.equal(typeof info.ver, "string");
        assert.equal("matter" in info, gen === 4);
        assert.deepEqual(await (await get(d, "/shelly")).json(), info);
      });
    }
  });

  describe("Switch.GetStatus", () => {
    it("reports a Gen2 metered output without freq or ret_aenergy", async (t) => {
      const d = await emulate(t, { gen: 2 });
      const status = (await (await get(d, "/rpc/Switch.GetStatus?id=0")).json()) as Record<string, unknown>;
      assert.deepEqual(Object.keys(status), ["id", "source", "output", "apower", "voltage", "current", "aenergy", "temperature"]);
    });

    it("adds freq and ret_aenergy from Gen3 on", async (t) => {
      const d = await emulate(t, { gen: 3 });
      const status = (await (await get(d, "/rpc/Switch.GetStatus?id=0")).json()) as Record<string, unknown>;
      assert.ok("freq" in status && "ret_aenergy" in status);
    });

    it("has no apower on an output without a meter", async (t) => {
      const d = await emulate(t, { switches: [{ metered: false }] });
      const status = (await (await get(d, "/rpc/Switch.GetStatus?id=0")).json()) as Record<string, unknown>;
      assert.equal(status.output, false);
      assert.ok(!("apower" in status));
    });

    it("shows the machine's draw as apower while the output is on, 0 while off", async (t) => {
      const d = await emulate(t, { switches: [{}, { output: true }] });
      d.setDraw(0, 87.5);
      d.setDraw(1, 240);
      const read = async (id: number) => ((await (await get(d, `/rpc/Switch.GetStatus?id=${id}`)).json()) as { apower: number }).apower;
      assert.equal(await read(0), 0);
      assert.equal(await read(1), 240);
    });
  });

  describe("Switch.Set", () => {
    it("switches over GET and answers was_on", async (t) => {
      const d = await emulate(t);
      const res = await get(d, "/rpc/Switch.Set?id=0&on=true");
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("connection"), "close");
      assert.deepEqual(await res.json(), { was_on: false });
      assert.equal(d.output(0), true);
    });

    it("switches over a JSON-RPC frame and answers in an envelope", async (t) => {
      const d = await emulate(t, { switches: [{}, {}] });
      const res = await frame(d, { jsonrpc: "2.0", id: 7, src: "plugpool", method: "Switch.Set", params: { id: 1, on: true } });
      assert.deepEqual(await res.json(), { id: 7, src: d.id, dst: "plugpool", result: { was_on: false } });
      assert.deepEqual([d.output(0), d.output(1)], [false, true]);
    });

    it("answers an unknown id with -105 (HTTP 500 over GET, an error frame with 200 over POST)", async (t) => {
      const d = await emulate(t);
      const res = await get(d, "/rpc/Switch.Set?id=3&on=true");
      assert.equal(res.status, 500);
      assert.deepEqual(await res.json(), { code: -105, message: "Bad id=3" });
      const posted = await frame(d, { id: 1, method: "Switch.GetStatus", params: { id: 3 } });
      assert.equal(posted.status, 200);
      assert.equal(((await posted.json()) as { error: { code: number } }).error.code, -105);
    });

    it("answers a missing or mistyped argument with -103 and does not switch", async (t) => {
      const d = await emulate(t);
      assert.equal(((await (await get(d, "/rpc/Switch.Set?id=0")).json()) as { code: number }).code, -103);
      assert.equal(((await (await get(d, "/rpc/Switch.Set?id=0&on=yes")).json()) as { code: number }).code, -103);
      assert.equal(d.output(0), false);
    });

    it("answers an unknown method with 404", async (t) => {
      const d = await emulate(t);
      const res = await get(d, "/rpc/Switch.Explode?id=0");
      assert.equal(res.status, 404);
      assert.deepEqual(await res.json(), { code: 404, message: "No handler for Switch.Explode" });
    });
  });

  describe("authentication", () => {
    it("challenges with SHA-256 Digest, realm the device id, and the challenge again in an error 401", async (t) => {
      const d = await emulate(t, { password: "s3cret" });
      const res = await frame(d, { id: 1, src: "x", method: "Switch.GetStatus", params: { id: 0 } });
      assert.equal(res.status, 401);
      const c = challengeOf(res);
      assert.deepEqual([c.realm, c.qop, c.algorithm], [d.id, "auth", "SHA-256"]);
      const body = (await res.json()) as { error: { code: number; message: string } };
      assert.equal(body.error.code, 401);
      assert.deepEqual(JSON.parse(body.error.message), { auth_type: "digest", nonce: Number(c.nonce), nc: 1, realm: d.id, algorithm: "SHA-256" });
    });

    it("leaves Shelly.GetDeviceInfo open and reports auth_en", async (t) => {
      const d = await emulate(t, { password: "s3cret" });
      const res = await get(d, "/rpc/Shelly.GetDeviceInfo");
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { auth_en: boolean }).auth_en, true);
    });

    it("accepts a right Authorization header and refuses a wrong password or user", async (t) => {
      const d = await emulate(t, { password: "s3cret", firmware: "2.x" });
      const uri = "/rpc/Switch.Set?id=0&on=true";
      const c = challengeOf(await get(d, uri));
      assert.equal(d.output(0), false);
      assert.equal((await get(d, uri, { headers: { authorization: digest(c, "wrong", "GET", uri, 1) } })).status, 401);
      assert.equal((await get(d, uri, { headers: { authorization: digest(c, "s3cret", "GET", uri, 2, "root") } })).status, 401);
      assert.equal(d.output(0), false);
      assert.equal((await get(d, uri, { headers: { authorization: digest(c, "s3cret", "GET", uri, 3) } })).status, 200);
      assert.equal(d.output(0), true);
    });

    it("accepts the auth object of a JSON-RPC frame", async (t) => {
      const d = await emulate(t, { password: "s3cret" });
      const c = challengeOf(await frame(d, { id: 1, method: "Switch.GetStatus", params: { id: 0 } }));
      const cnonce = 12345;
      const ha1 = sha256(`admin:${c.realm}:s3cret`);
      const response = sha256(`${ha1}:${c.nonce}:1:${cnonce}:auth:${sha256("dummy_method:dummy_uri")}`);
      const auth = { realm: c.realm, username: "admin", nonce: Number(c.nonce), cnonce, response, algorithm: "SHA-256" };
      const res = await frame(d, { id: 2, method: "Switch.GetStatus", params: { id: 0 }, auth });
      assert.equal(res.status, 200);
      assert.equal(d.calls.at(-1)?.auth, "frame");
    });

    it("takes each nonce once on firmware 1.x", async (t) => {
      const d = await emulate(t, { password: "s3cret", firmware: "1.x" });
      const uri = "/rpc/Switch.GetStatus?id=0";
      const c = challengeOf(await get(d, uri));
      assert.equal((await get(d, uri, { headers: { authorization: digest(c, "s3cret", "GET", uri, 1) } })).status, 200);
      assert.equal((await get(d, uri, { headers: { authorization: digest(c, "s3cret", "GET", uri, 2) } })).status, 401);
    });

    it("reuses a nonce with an increasing nc on firmware 2.x, and refuses a repeated nc", async (t) => {
      const d = await emulate(t, { password: "s3cret", firmware: "2.x" });
      const uri = "/rpc/Switch.GetStatus?id=0";
      const c = challengeOf(await get(d, uri));
      for (const nc of [1, 2, 3]) assert.equal((await get(d, uri, { headers: { authorization: digest(c, "s3cret", "GET", uri, nc) } })).status, 200);
      assert.equal((await get(d, uri, { headers: { authorization: digest(c, "s3cret", "GET", uri, 3) } })).status, 401);
      d.expireNonces();
      assert.equal((await get(d, uri, { headers: { authorization: digest(c, "s3cret", "GET", uri, 4) } })).status, 401);
    });

    it("refuses a header computed for another uri", async (t) => {
      const d = await emulate(t, { password: "s3cret", firmware: "2.x" });
      const c = challengeOf(await get(d, "/rpc/Switch.GetStatus?id=0"));
      const res = await get(d, "/rpc/Switch.Set?id=0&on=true", { headers: { authorization: digest(c, "s3cret", "GET", "/rpc/Switch.GetStatus?id=0") } });
      assert.equal(res.status, 401);
      assert.equal(d.output(0), false);
    });
  });

  describe("faults", () => {
    it("hang: the request is never answered", async (t) => {
      const d = await emulate(t);
      await d.inject({ kind: "hang", times: 1 });
      assert.equal(await outcome(get(d, "/rpc/Switch.GetStatus?id=0", { signal: AbortSignal.timeout(200) })), "TimeoutError");
      assert.equal((await get(d, "/rpc/Switch.GetStatus?id=0")).status, 200);
    });

    it("drop and http500: the device does not act", async (t) => {
      const d = await emulate(t);
      await d.inject({ kind: "drop", times: 1 });
      assert.equal(typeof (await outcome(get(d, "/rpc/Switch.Set?id=0&on=true"))), "string");
      await d.inject({ kind: "http500", times: 1 });
      assert.equal((await get(d, "/rpc/Switch.Set?id=0&on=true")).status, 500);
      assert.equal(d.output(0), false);
    });

    it("lost-answer: the device acts, then closes without answering", async (t) => {
      const d = await emulate(t);
      await d.inject({ kind: "lost-answer", rpc: "Switch.Set" });
      assert.equal(typeof (await outcome(get(d, "/rpc/Switch.Set?id=0&on=true"))), "string");
      assert.equal(d.output(0), true);
      assert.equal((await get(d, "/rpc/Switch.GetStatus?id=0")).status, 200, "other methods still answer");
    });

    it("stuck: Switch.Set answers but the output stays", async (t) => {
      const d = await emulate(t);
      await d.inject({ kind: "stuck" });
      assert.equal((await get(d, "/rpc/Switch.Set?id=0&on=true")).status, 200);
      assert.equal(d.output(0), false);
    });

    it("slow: answers after the delay", async (t) => {
      const d = await emulate(t);
      await d.inject({ kind: "slow", ms: 150, times: 1 });
      const start = performance.now();
      assert.equal((await get(d, "/rpc/Switch.GetStatus?id=0")).status, 200);
      assert.ok(performance.now() - start >= 140);
    });

    it("down: connections are refused until cleared", async (t) => {
      const d = await emulate(t);
      await d.inject({ kind: "down" });
      assert.equal(await outcome(get(d, "/rpc/Switch.GetStatus?id=0")), "ECONNREFUSED");
      await d.clearFaults();
      assert.equal((await get(d, "/rpc/Switch.GetStatus?id=0")).status, 200);
    });

    it("serves a handful of sockets at once and resets the next", async (t) => {
      const d = await emulate(t, { maxConnections: 2 });
      const { port } = new URL(d.url);
      const open = (): Promise<Socket> =>
        new Promise((resolve, reject) => {
          const s = connect(Number(port), "127.0.0.1", () => { resolve(s); });
          s.on("error", reject);
        });
      const held = [await open(), await open()];
      t.after(() => { for (const s of held) s.destroy(); });
      const third = await open();
      const closed = await new Promise<boolean>((resolve) => {
        third.on("close", () => { resolve(true); });
        third.on("error", () => undefined);
        setTimeout(() => { resolve(false); }, 1000);
      });
      assert.ok(closed, "the third socket is closed by the device");
    });
  });

  it("a flip behind plugpool's back shows in the status with its source", async (t) => {
    const d = await emulate(t);
    d.flip(0, true);
    const status = (await (await get(d, "/rpc/Switch.GetStatus?id=0")).json()) as { output: boolean; source: string };
    assert.deepEqual([status.output, status.source], [true, "button"]);
  });

  it("logs each call with its RPC method, params and credentials", async (t) => {
    const d = await emulate(t);
    await get(d, "/rpc/Switch.Set?id=0&on=false");
    await frame(d, { id: 1, method: "Switch.GetStatus", params: { id: 0 } });
    assert.deepEqual(
      d.calls.map((c) => [c.httpMethod, c.rpc, c.params, c.auth, c.status]),
      [["GET", "Switch.Set", { id: 0, on: false }, "none", 200], ["POST", "Switch.GetStatus", { id: 0 }, "none", 200]],
    );
  });
});
