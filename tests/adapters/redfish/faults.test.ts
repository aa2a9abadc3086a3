// The Redfish backend's failures that sushy-emulator cannot show: lost and late answers, BMC errors, hostile
// answers, sessions (login, token, expiry), one request at a time per BMC, and aborts. The BMC is a small
// node:http server in the test (plain http on loopback, which the backend accepts for tests and tunnels).
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { redfishBackend } from "../../../src/adapters/redfish/backend.ts";
import { MAX_ANSWER_BYTES } from "../../../src/adapters/redfish/bmc-http.ts";
import type { RedfishSystem } from "../../../src/adapters/redfish/redfish-system.ts";
import type { CutGuard, DeviceCheck } from "../../../src/domain/ports.ts";
import { lease, swap } from "../../harness/lease.ts";
import { acceptAny, addressOf, assertFailure, expectDevice, failureOf } from "./support.ts";

const LOGIN = { username: "operator", password: "s3cret-pw" };
const BASIC = `Basic ${Buffer.from(`${LOGIN.username}:${LOGIN.password}`).toString("base64")}`;
const SECRETS = [LOGIN.password, BASIC.slice(6)];
const RESET = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset";

interface Seen {
  readonly method: string;
  readonly path: string;
  readonly authorization: string | undefined;
  readonly token: string | undefined;
  readonly body: string;
}

type Handler = (request: Seen, res: ServerResponse, req: IncomingMessage) => void | Promise<void>;

interface FakeBmc {
  readonly url: string;
  readonly seen: Seen[];
  /** The most requests seen in flight at once. */
  readonly maxInFlight: () => number;
  power: string;
  /** The UUID each system answers with. */
  readonly uuids: Readonly<Record<"1" | "2", string>>;
  handle: Handler;
  /** Closes the listener: new connections are refused, open ones are served to their end. */
  stopListening(): void;
}

const servers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()));
});

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** A BMC with systems "1" and "2" whose Reset applies at once; `handle` can be replaced per test. */
async function fakeBmc(): Promise<FakeBmc> {
  let inFlight = 0;
  let most = 0;
  const bmc: FakeBmc = {
    url: "",
    seen: [],
    maxInFlight: () => most,
    power: "On",
    uuids: { "1": randomUUID(), "2": randomUUID() },
    stopListening: () => { server.close(); },
    handle: (request, res) => {
      if (request.method === "GET" && /^\/redfish\/v1\/Systems\/[12]$/u.test(request.path)) {
        const id = request.path.endsWith("1") ? "1" : "2";
        json(res, 200, { Id: id, UUID: bmc.uuids[id], PowerState: bmc.power });
      } else if (request.method === "POST" && request.path.endsWith("/Actions/ComputerSystem.Reset")) {
        const type = (JSON.parse(request.body) as { ResetType: string }).ResetType;
        bmc.power = type === "On" ? "On" : "Off";
        res.writeHead(204).end();
      } else {
        json(res, 404, { error: { message: "not here" } });
      }
    },
  };
  const server = createServer((req, res) => {
    inFlight++;
    most = Math.max(most, inFlight);
    res.once("close", () => { inFlight--; });
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.once("end", () => {
      const token = req.headers["x-auth-token"];
      const request: Seen = {
        method: req.method ?? "",
        path: req.url ?? "",
        authorization: req.headers.authorization,
        token: typeof token === "string" ? token : undefined,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      bmc.seen.push(request);
      void bmc.handle(request, res, req);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(() => new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => { resolve(); });
  }));
  return Object.assign(bmc, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

/** Answers POSTs with `post`, everything else as before. */
function onPost(bmc: FakeBmc, post: Handler): void {
  const base = bmc.handle;
  bmc.handle = async (request, res, req) => {
    if (request.method === "POST") await post(request, res, req);
    else await base(request, res, req);
  };
}

const systemOf = (bmc: FakeBmc, id = "1", section: Record<string, unknown> = {}): RedfishSystem => addressOf({ url: bmc.url, system: id, ...section }, LOGIN);
const allow = () => Promise.resolve(true);
const posts = (bmc: FakeBmc) => bmc.seen.filter((s) => s.method === "POST");

async function timed<T>(work: () => Promise<T>): Promise<number> {
  const started = performance.now();
  await work().catch(() => undefined);
  return performance.now() - started;
}

describe("redfishBackend faults", () => {
  describe("lost and late answers", () => {
    it("fails a ForceOff whose connection dropped before the answer as plug-unconfirmed", async () => {
      const bmc = await fakeBmc();
      onPost(bmc, (_request, _res, req) => { req.socket.destroy(); });
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).turnOff(systemOf(bmc), allow, { device: acceptAny }));
      assertFailure(error, "plug-unconfirmed", /^switching off BMC http:\/\/127\.0\.0\.1:\d+ system "1": connection dropped; the Reset was sent and its outcome is unknown$/, SECRETS);
      assert.equal(posts(bmc).length, 1);
    });

    it("fails a Reset never answered as plug-unconfirmed once the call's time is up", async () => {
      const bmc = await fakeBmc();
      bmc.power = "Off";
      onPost(bmc, () => undefined);
      const started = performance.now();
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 300 }).turnOn(systemOf(bmc), { device: acceptAny }));
      assertFailure(error, "plug-unconfirmed", /: timed out after 300 ms; the Reset was sent and its outcome is unknown$/);
      assert.ok(performance.now() - started < 1000);
    });

    it("fails a read never answered as plug-unreachable, within the timeout", async () => {
      const bmc = await fakeBmc();
      bmc.handle = () => undefined;
      const power = redfishBackend.create({ timeoutMs: 300 });
      const elapsed = await timed(() => power.read(systemOf(bmc)));
      assertFailure(await failureOf(() => power.read(systemOf(bmc))), "plug-unreachable", /: timed out after 300 ms$/);
      assert.ok(elapsed >= 290 && elapsed < 1000, `${elapsed} ms`);
    });

    it("counts the wait behind another call to the BMC in the timeout, and then sends nothing", async () => {
      const bmc = await fakeBmc();
      bmc.handle = () => undefined;
      const power = redfishBackend.create({ timeoutMs: 400 });
      const started = performance.now();
      const first = failureOf(() => power.read(systemOf(bmc, "1")));
      const second = failureOf(async () => {
        try {
          return await power.turnOff(systemOf(bmc, "2"), allow, { device: acceptAny });
        } finally {
          assert.ok(performance.now() - started < 700, "the second call ended at its own deadline, not 400 ms after the first");
        }
      });
      const [a, b] = await Promise.all([first, second]);
      assert.equal(a.code, "plug-unreachable");
      assertFailure(b, "plug-unreachable", /system "2": timed out after 400 ms$/);
      assert.deepEqual(bmc.seen.map((s) => s.path), ["/redfish/v1/Systems/1"]);
    });

    it("fails an On the BMC took but never shows as plug-unconfirmed once the call's time is up", async () => {
      const bmc = await fakeBmc();
      bmc.power = "Off";
      onPost(bmc, (_request, res) => { res.writeHead(204).end(); });
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 700 }).turnOn(systemOf(bmc), { device: acceptAny }));
      assertFailure(error, "plug-unconfirmed", /^switching on BMC .* system "1": state not confirmed within 700 ms \(PowerState still Off\); the Reset was sent and its outcome is unknown$/);
      assert.equal(posts(bmc).length, 1);
    });

    it("fails a ForceOff after which the system stays PoweringOff as plug-unconfirmed", async () => {
      const bmc = await fakeBmc();
      onPost(bmc, (_request, res) => {
        bmc.power = "PoweringOff";
        res.writeHead(204).end();
      });
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 1200 }).turnOff(systemOf(bmc), allow, { device: acceptAny }));
      assertFailure(error, "plug-unconfirmed", /: state not confirmed within 1200 ms \(PowerState still PoweringOff\); the Reset was sent and its outcome is unknown$/);
    });
    it("fails a ForceOff whose connection was refused as plug-unreachable: it never left", async () => {
      const bmc = await fakeBmc();
      const base = bmc.handle;
      bmc.handle = async (request, res, req) => {
        await base(request, res, req);
        bmc.stopListening(); // after the state read, before the ForceOff's new connection
      };
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).turnOff(systemOf(bmc), allow, { device: acceptAny }));
      assertFailure(error, "plug-unreachable", /^switching off BMC .* system "1": connection refused$/);
      assert.deepEqual(posts(bmc), []);
    });
  });

  describe("answers to a Reset", () => {
    it("fails a GracefulShutdown whose answer was lost as plug-unconfirmed", async () => {
      const bmc = await fakeBmc();
      onPost(bmc, (_request, _res, req) => { req.socket.destroy(); });
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).shutdown(systemOf(bmc), allow, { device: acceptAny }));
      assertFailure(error, "plug-unconfirmed", /^shutting down BMC .* system "1": connection dropped; the Reset was sent and its outcome is unknown$/);
      assert.deepEqual(posts(bmc).map((s) => JSON.parse(s.body) as unknown), [{ ResetType: "GracefulShutdown" }]);
    });


    it("takes 202 Accepted (a task runs it) as taken, and confirms by reading", async () => {
      const bmc = await fakeBmc();
      onPost(bmc, (_request, res) => {
        bmc.power = "Off";
        json(res, 202, {}, { location: "/redfish/v1/TaskService/Tasks/1" });
      });
      assert.deepEqual(await redfishBackend.create({ timeoutMs: 2000 }).turnOff(systemOf(bmc), allow, { device: acceptAny }), { on: false });
    });

    it("fails a Reset answered 500 as plug-unconfirmed: the BMC may have started it", async () => {
      const bmc = await fakeBmc();
      onPost(bmc, (_request, res) => { json(res, 500, {}); });
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).turnOff(systemOf(bmc), allow, { device: acceptAny }));
      assertFailure(error, "plug-unconfirmed", /: POST \/redfish\/v1\/Systems\/1\/Actions\/ComputerSystem\.Reset \(ResetType ForceOff\) answered HTTP 500 \(2 bytes\); the Reset was sent/);
    });

    for (const status of [400, 409]) {
      it(`fails a Reset answered ${status} as plug-bad-answer: the BMC did not do it`, async () => {
        const bmc = await fakeBmc();
        onPost(bmc, (_request, res) => { json(res, status, { error: "no" }); });
        const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).turnOff(systemOf(bmc), allow, { device: acceptAny }));
        assertFailure(error, "plug-bad-answer", new RegExp(`: POST ${RESET.replace(/\./gu, "\\.")} \\(ResetType ForceOff\\) answered HTTP ${status} \\(14 bytes\\)$`, "u"));
      });
    }

    it("fails a Reset refused with 403 as plug-unauthorized (the account lacks the privilege)", async () => {
      const bmc = await fakeBmc();
      onPost(bmc, (_request, res) => { json(res, 403, {}); });
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).turnOff(systemOf(bmc), allow, { device: acceptAny }));
      assertFailure(error, "plug-unauthorized", /: the account may not do this \(POST .* answered HTTP 403\)$/);
    });
  });

  describe("what the BMC sends", () => {
    it("refuses an answer larger than its bound without keeping it", async () => {
      const bmc = await fakeBmc();
      bmc.handle = (_request, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(`{"PowerState":"On","x":"${"a".repeat(MAX_ANSWER_BYTES)}"}`);
      };
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).read(systemOf(bmc)));
      assertFailure(error, "plug-bad-answer", new RegExp(`: GET /redfish/v1/Systems/1 answered HTTP 200 with more than ${MAX_ANSWER_BYTES} bytes$`, "u"));
    });

    it("never repeats what the BMC sent, not even the credentials it echoes", async () => {
      const bmc = await fakeBmc();
      bmc.handle = (request, res) => {
        res.statusMessage = `echo ${request.authorization ?? ""}`;
        json(res, 500, { error: { message: `you sent ${request.authorization ?? ""}` } }, { "x-echo": request.authorization ?? "" });
      };
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).read(systemOf(bmc)));
      assertFailure(error, "plug-unreachable", /: GET \/redfish\/v1\/Systems\/1 answered HTTP 500 \(\d+ bytes\)$/, [...SECRETS, "echo", "you sent"]);
    });

    it("shows in doctor only values shaped as versions", async () => {
      const bmc = await fakeBmc();
      bmc.handle = (request, res) => {
        if (request.path === "/redfish/v1/") json(res, 200, { RedfishVersion: `1.6.0 ${request.authorization ?? ""}` });
        else if (request.path === "/redfish/v1/Managers/bmc") json(res, 200, { FirmwareVersion: "7.00.00.171" });
        else json(res, 200, { PowerState: "Off", UUID: bmc.uuids["1"], SerialNumber: `CN7 ${LOGIN.password}`, Links: { ManagedBy: [{ "@odata.id": "/redfish/v1/Managers/bmc" }] } });
      };
      const probe = await redfishBackend.create({ timeoutMs: 2000 }).probe(systemOf(bmc));
      assert.deepEqual(probe, {
        state: "off",
        detail: "Redfish version not shown; BMC firmware 7.00.00.171; PowerState Off; basic auth; plain http (loopback)",
        // A serial number holding the password is not the system's own: it is left out.
        identity: { id: `uuid ${bmc.uuids["1"]}` },
      });
    });

    it("still probes when the account may not read the BMC's manager", async () => {
      const bmc = await fakeBmc();
      bmc.handle = (request, res) => {
        if (request.path.startsWith("/redfish/v1/Managers/")) json(res, 403, {});
        else if (request.path === "/redfish/v1/") json(res, 200, { RedfishVersion: "1.17.0" });
        else json(res, 200, { PowerState: "On", UUID: bmc.uuids["1"], SerialNumber: "CN7475145G0127", Links: { ManagedBy: [{ "@odata.id": "/redfish/v1/Managers/1" }] } });
      };
      const probe = await redfishBackend.create({ timeoutMs: 2000 }).probe(systemOf(bmc));
      assert.deepEqual(probe, {
        state: "on",
        detail: "Redfish 1.17.0; BMC firmware not shown; PowerState On; basic auth; plain http (loopback)",
        identity: { id: `uuid ${bmc.uuids["1"]} serial "CN7475145G0127"` },
      });
    });
  });

  describe("the system behind the address", () => {
    it("sends the Reset to a system that answers with the UUID expected", async () => {
      const bmc = await fakeBmc();
      const device = expectDevice(`uuid ${bmc.uuids["1"]}`);
      assert.deepEqual(await redfishBackend.create({ timeoutMs: 2000 }).turnOff(systemOf(bmc), allow, { device }), { on: false });
      assert.equal(posts(bmc).length, 1);
      assert.equal(device.seen.length, 1);
    });

    it("sends no Reset to a system that answers as another, and fails as a device mismatch", async () => {
      const bmc = await fakeBmc();
      for (const work of [
        (check: DeviceCheck) => redfishBackend.create({ timeoutMs: 2000 }).turnOff(systemOf(bmc), allow, { device: check }),
        (check: DeviceCheck) => redfishBackend.create({ timeoutMs: 2000 }).shutdown(systemOf(bmc), allow, { device: check }),
      ]) {
        const error = await failureOf(() => work(expectDevice(`uuid ${bmc.uuids["2"]}`)));
        assertFailure(error, "device-mismatch", new RegExp(`^\\w+ \\w+ BMC http://127\\.0\\.0\\.1:\\d+ system "1": the device answers as uuid ${bmc.uuids["1"]}, not as the device expected there; nothing was sent$`), SECRETS);
      }
      assert.deepEqual(posts(bmc), []);
      assert.equal(bmc.power, "On");
    });

    it("asks the device check after the state read and before the cut guard, with the BMC's slot held", async () => {
      const bmc = await fakeBmc();
      const power = redfishBackend.create({ timeoutMs: 3000 });
      const order: string[] = [];
      const seen = (): string => bmc.seen.map((r) => `${r.method} ${r.path}`).join(", ");
      let other: Promise<unknown> = Promise.resolve();
      const device: DeviceCheck = async () => {
        order.push(`device; seen ${seen()}`);
        other = power.read(systemOf(bmc, "2"));
        await sleep(50);
        return true;
      };
      const guard: CutGuard = () => Promise.resolve(order.push(`guard; seen ${seen()}`) > 0);
      await power.turnOff(systemOf(bmc, "1"), guard, { device });
      await other;
      assert.deepEqual(order, ["device; seen GET /redfish/v1/Systems/1", "guard; seen GET /redfish/v1/Systems/1"]);
      assert.deepEqual(bmc.seen.slice(0, 3).map((r) => `${r.method} ${r.path}`), ["GET /redfish/v1/Systems/1", `POST ${RESET}`, "GET /redfish/v1/Systems/2"]);
    });

    it("sends nothing to a system that tells neither its UUID nor its serial number", async () => {
      const bmc = await fakeBmc();
      bmc.handle = (request, res) => {
        if (request.method === "GET") json(res, 200, { Id: "1", PowerState: "On", UUID: null });
        else res.writeHead(204).end();
      };
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).turnOff(systemOf(bmc), allow, { device: acceptAny }));
      assertFailure(error, "plug-bad-answer", /GET \/redfish\/v1\/Systems\/1 answered without a UUID or SerialNumber plugpool can use$/);
      assert.deepEqual(posts(bmc), []);
    });

    it("sends no Reset to the wrong system when two BMC addresses swap, before and after plugpool restarts", async (t) => {
      const [first, second] = [await fakeBmc(), await fakeBmc()];
      const [leaseA, leaseB] = [await lease(first.url), await lease(second.url)];
      t.after(() => Promise.all([leaseA.close(), leaseB.close()]));
      const [worker1, worker2] = [systemOf({ ...first, url: leaseA.url }), systemOf({ ...second, url: leaseB.url })];
      const [device1, device2] = [expectDevice(`uuid ${first.uuids["1"]}`), expectDevice(`uuid ${second.uuids["1"]}`)];
      const power = redfishBackend.create({ timeoutMs: 2000 });
      first.power = second.power = "Off";
      await power.turnOn(worker1, { device: device1 });
      await power.turnOn(worker2, { device: device2 });
      swap(leaseA, leaseB);
      const before = [posts(first).length, posts(second).length];
      for (const switches of [power, redfishBackend.create({ timeoutMs: 2000 })]) {
        for (const [worker, device] of [[worker1, device1], [worker2, device2]] as const) {
          assertFailure(await failureOf(() => switches.turnOff(worker, allow, { device })), "device-mismatch", /nothing was sent$/);
        }
      }
      assert.deepEqual([posts(first).length, posts(second).length], before);
      assert.deepEqual([first.power, second.power], ["On", "On"]);
    });
  });

  describe("a read that carries a device check", () => {
    const gets = (bmc: FakeBmc): string[] => bmc.seen.map((r) => `${r.method} ${r.path}`);

    it("reads the state of the system expected from the one GET that tells its UUID, as a plain read makes it", async () => {
      const bmc = await fakeBmc();
      const power = redfishBackend.create({ timeoutMs: 2000 });
      const device = expectDevice(`uuid ${bmc.uuids["1"]}`);
      assert.deepEqual(await power.read(systemOf(bmc), { device }), { on: true });
      assert.equal(device.seen.length, 1);
      assert.deepEqual(await power.read(systemOf(bmc)), { on: true });
      assert.deepEqual(gets(bmc), ["GET /redfish/v1/Systems/1", "GET /redfish/v1/Systems/1"]);
    });

    it("takes no state from a system that answers as another, and fails as a device mismatch", async () => {
      const bmc = await fakeBmc();
      bmc.power = "Off";
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).read(systemOf(bmc), { device: expectDevice(`uuid ${bmc.uuids["2"]}`) }));
      assertFailure(error, "device-mismatch", new RegExp(`^reading BMC http://127\\.0\\.0\\.1:\\d+ system "1": the device answers as uuid ${bmc.uuids["1"]}, not as the device expected there; no state was taken from it$`), SECRETS);
      assert.deepEqual(gets(bmc), ["GET /redfish/v1/Systems/1"]);
    });

    it("checks the system before its state: another system's unknown PowerState is a device mismatch", async () => {
      const bmc = await fakeBmc();
      bmc.power = "Rebooting";
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).read(systemOf(bmc), { device: expectDevice(`uuid ${bmc.uuids["2"]}`) }));
      assertFailure(error, "device-mismatch", /no state was taken from it$/, SECRETS);
    });

    it("reads no state of a system that tells neither its UUID nor its serial number", async () => {
      const bmc = await fakeBmc();
      bmc.handle = (_request, res) => { json(res, 200, { Id: "1", PowerState: "Off" }); };
      let asked = false;
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).read(systemOf(bmc), { device: () => Promise.resolve((asked = true)) }));
      assertFailure(error, "plug-bad-answer", /GET \/redfish\/v1\/Systems\/1 answered without a UUID or SerialNumber plugpool can use$/, SECRETS);
      assert.equal(asked, false);
    });

    it("asks the device check with the BMC's slot held: a call asked for meanwhile waits for the read", async () => {
      const bmc = await fakeBmc();
      const power = redfishBackend.create({ timeoutMs: 3000 });
      let other: Promise<unknown> = Promise.resolve();
      let seenByCheck: string[] = [];
      const device: DeviceCheck = async () => {
        other = power.turnOff(systemOf(bmc, "2"), allow, { device: acceptAny });
        await sleep(50);
        seenByCheck = gets(bmc);
        return true;
      };
      assert.deepEqual(await power.read(systemOf(bmc, "1"), { device }), { on: true });
      await other;
      assert.deepEqual(seenByCheck, ["GET /redfish/v1/Systems/1"]);
    });

    it("reads nothing more of the wrong system when two BMC addresses swap", async (t) => {
      const [first, second] = [await fakeBmc(), await fakeBmc()];
      const [leaseA, leaseB] = [await lease(first.url), await lease(second.url)];
      t.after(() => Promise.all([leaseA.close(), leaseB.close()]));
      const [worker1, worker2] = [systemOf({ ...first, url: leaseA.url }), systemOf({ ...second, url: leaseB.url })];
      const [device1, device2] = [expectDevice(`uuid ${first.uuids["1"]}`), expectDevice(`uuid ${second.uuids["1"]}`)];
      const power = redfishBackend.create({ timeoutMs: 2000 });
      assert.deepEqual(await power.read(worker1, { device: device1 }), { on: true });
      swap(leaseA, leaseB);
      first.seen.length = 0;
      second.seen.length = 0;
      for (const [worker, device] of [[worker1, device1], [worker2, device2]] as const) {
        assertFailure(await failureOf(() => power.read(worker, { device })), "device-mismatch", /no state was taken from it$/);
      }
      assert.deepEqual([gets(first), gets(second)], [["GET /redfish/v1/Systems/1"], ["GET /redfish/v1/Systems/1"]]);
    });
  });

  describe("one request at a time per BMC", () => {
    it("serialises calls to systems of one BMC, in the order they were made", async () => {
      const bmc = await fakeBmc();
      const base = bmc.handle;
      bmc.handle = async (request, res, req) => {
        await sleep(30);
        await base(request, res, req);
      };
      const power = redfishBackend.create({ timeoutMs: 3000 });
      await Promise.all([power.read(systemOf(bmc, "1")), power.read(systemOf(bmc, "2")), power.turnOff(systemOf(bmc, "2"), allow, { device: acceptAny }), power.read(systemOf(bmc, "1"))]);
      assert.equal(bmc.maxInFlight(), 1);
      assert.deepEqual(bmc.seen.map((s) => `${s.method} ${s.path}`).slice(0, 4), [
        "GET /redfish/v1/Systems/1",
        "GET /redfish/v1/Systems/2",
        "GET /redfish/v1/Systems/2",
        "POST /redfish/v1/Systems/2/Actions/ComputerSystem.Reset",
      ]);
    });

    it("asks the guard with the BMC's slot held: nothing reaches the BMC between its yes and the ForceOff", async () => {
      const bmc = await fakeBmc();
      const power = redfishBackend.create({ timeoutMs: 3000 });
      let other: Promise<unknown> = Promise.resolve();
      const guard = async (): Promise<boolean> => {
        other = power.read(systemOf(bmc, "2"));
        await sleep(50);
        return true;
      };
      await power.turnOff(systemOf(bmc, "1"), guard, { device: acceptAny });
      await other;
      assert.deepEqual(bmc.seen.slice(0, 3).map((s) => `${s.method} ${s.path}`), ["GET /redfish/v1/Systems/1", `POST ${RESET}`, "GET /redfish/v1/Systems/2"]);
    });

    it("stops waiting and sends nothing when the caller aborts", async () => {
      const bmc = await fakeBmc();
      bmc.handle = () => undefined;
      const power = redfishBackend.create({ timeoutMs: 3000 });
      const first = new AbortController();
      const busy = failureOf(() => power.read(systemOf(bmc, "1"), { signal: first.signal }));
      const waiting = new AbortController();
      const queued = failureOf(() => power.turnOff(systemOf(bmc, "2"), allow, { signal: waiting.signal, device: acceptAny }));
      await sleep(50);
      waiting.abort(new Error("shutting down"));
      assertFailure(await queued, "plug-unreachable", /system "2": aborted$/);
      first.abort(new Error("shutting down"));
      assert.equal((await busy).code, "plug-unreachable");
      assert.deepEqual(bmc.seen.map((s) => s.path), ["/redfish/v1/Systems/1"]);
    });
  });

  describe("auth: session", () => {
    /** A BMC whose sessions each get a new token; `valid` says which tokens it still takes. */
    async function sessionBmc(valid: (token: string) => boolean = () => true) {
      const bmc = await fakeBmc();
      const base = bmc.handle;
      let issued = 0;
      bmc.handle = (request, res, req) => {
        if (request.method === "POST" && request.path === "/redfish/v1/SessionService/Sessions") {
          const login = JSON.parse(request.body) as { UserName?: string; Password?: string };
          if (login.UserName !== LOGIN.username || login.Password !== LOGIN.password) {
            json(res, 401, {});
            return;
          }
          issued++;
          json(res, 201, { Id: String(issued) }, { "x-auth-token": `token-${issued}`, location: `/redfish/v1/SessionService/Sessions/${issued}` });
          return;
        }
        if (request.token === undefined || !valid(request.token)) json(res, 401, {});
        else void base(request, res, req);
      };
      return bmc;
    }

    it("logs in once, then sends the session's X-Auth-Token and never the credentials", async () => {
      const bmc = await sessionBmc();
      const power = redfishBackend.create({ timeoutMs: 2000 });
      const system = systemOf(bmc, "1", { auth: "session" });
      await power.read(system);
      await power.read(systemOf(bmc, "2", { auth: "session" }));
      await power.turnOff(system, allow, { device: acceptAny });
      assert.deepEqual(bmc.seen.map((s) => `${s.method} ${s.path} ${s.token ?? "-"}`), [
        "POST /redfish/v1/SessionService/Sessions -",
        "GET /redfish/v1/Systems/1 token-1",
        "GET /redfish/v1/Systems/2 token-1",
        "GET /redfish/v1/Systems/1 token-1",
        `POST ${RESET} token-1`,
        "GET /redfish/v1/Systems/1 token-1",
      ]);
      assert.ok(bmc.seen.every((s) => s.authorization === undefined));
    });

    it("logs in again once when the session has ended, asking the guard again before the ForceOff is re-sent", async () => {
      let expired = "";
      const bmc = await sessionBmc((token) => token !== expired);
      const power = redfishBackend.create({ timeoutMs: 2000 });
      const system = systemOf(bmc, "1", { auth: "session" });
      await power.read(system);
      let asked = 0;
      const guard = (): Promise<boolean> => {
        asked++;
        if (asked === 1) expired = "token-1"; // the session ends between the read and the ForceOff
        return Promise.resolve(true);
      };
      assert.deepEqual(await power.turnOff(system, guard, { device: acceptAny }), { on: false });
      assert.equal(asked, 2);
      assert.deepEqual(bmc.seen.slice(2).map((s) => `${s.method} ${s.path} ${s.token ?? "-"}`), [
        "GET /redfish/v1/Systems/1 token-1",
        `POST ${RESET} token-1`,
        "POST /redfish/v1/SessionService/Sessions -",
        // The system is heard again before the Reset goes again.
        "GET /redfish/v1/Systems/1 token-2",
        `POST ${RESET} token-2`,
        "GET /redfish/v1/Systems/1 token-2",
      ]);
    });

    it("fails as plug-unauthorized when a fresh session's token is refused too, without a third login", async () => {
      const bmc = await sessionBmc(() => false);
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).read(systemOf(bmc, "1", { auth: "session" })));
      assertFailure(error, "plug-unauthorized", /: the BMC rejected the credentials \(GET \/redfish\/v1\/Systems\/1 answered HTTP 401\)$/, [...SECRETS, "token-1"]);
      assert.equal(bmc.seen.filter((s) => s.path.startsWith("/redfish/v1/SessionService")).length, 1);
    });

    it("fails as plug-unauthorized when the login is refused, naming neither the user nor the password", async () => {
      const bmc = await sessionBmc();
      const wrong = addressOf({ url: bmc.url, system: "1", auth: "session" }, { username: "intruder", password: "guess-pw" });
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).read(wrong));
      assertFailure(error, "plug-unauthorized", /: the BMC refused the session login \(POST \/redfish\/v1\/SessionService\/Sessions\) with HTTP 401/, ["intruder", "guess-pw"]);
    });

    it("fails a login answered without a token as plug-bad-answer", async () => {
      const bmc = await fakeBmc();
      bmc.handle = (_request, res) => { json(res, 201, {}); };
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).read(systemOf(bmc, "1", { auth: "session" })));
      assertFailure(error, "plug-bad-answer", /: the session login \(POST \/redfish\/v1\/SessionService\/Sessions\) answered HTTP 201 without an X-Auth-Token$/);
    });

    it("says to use auth: basic when the BMC has no session service", async () => {
      const bmc = await fakeBmc();
      const error = await failureOf(() => redfishBackend.create({ timeoutMs: 2000 }).read(systemOf(bmc, "1", { auth: "session" })));
      assertFailure(error, "plug-bad-answer", /: the BMC has no Redfish session service \(the session login .* answered HTTP 404\); use auth: basic$/);
    });
  });
});
