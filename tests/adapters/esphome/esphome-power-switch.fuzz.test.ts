// Property tests of what the adapter makes of a plug's answers, whatever they are: any status, headers, body,
// chunking or early end. Every call ends within its timeout, as a reading or a PlugpoolError with a plug-*
// code, and nothing of what the device sent reaches the error.
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { inspect } from "node:util";
import fc from "fast-check";
import { createEsphomePowerSwitch } from "../../../src/adapters/esphome/esphome-power-switch.ts";
import { isPlugpoolError } from "../../../src/domain/errors.ts";
import type { PlugReading } from "../../../src/domain/model.ts";
import { acceptAny, addressOf, allowCut, renderings, timed } from "./support.ts";

const TIMEOUT_MS = 150;
const SLACK_MS = 400; // generous: a busy 2-core machine, and fast-check's own work between runs
const MARKER = "Mk7-from-the-wire";
const CREDENTIALS = { username: "fuzz", password: "Fz9-pw" };
const operations = ["read", "probe", "turnOn", "turnOff"] as const;
type Operation = (typeof operations)[number];

/** Asserts one call's outcome: a reading, or a plug failure that holds nothing the device sent. Counts it in `tally`. */
function assertOutcome(outcome: { value?: unknown; error?: unknown; ms: number }, operation: Operation, tally: Map<string, number>): void {
  const kind = isPlugpoolError(outcome.error) ? outcome.error.code : outcome.error === undefined ? "reading" : "other";
  tally.set(kind, (tally.get(kind) ?? 0) + 1);
  assert.ok(outcome.ms < TIMEOUT_MS + SLACK_MS, `${operation} took ${outcome.ms} ms`);
  if (outcome.error === undefined) {
    const value = outcome.value as PlugReading & { state?: string };
    assert.equal(typeof (operation === "probe" ? value.state : value.on), operation === "probe" ? "string" : "boolean");
    return;
  }
  assert.ok(isPlugpoolError(outcome.error), `not a PlugpoolError: ${inspect(outcome.error)}`);
  assert.match(outcome.error.code, /^plug-/);
  for (const text of renderings(outcome.error)) {
    for (const secret of [MARKER, CREDENTIALS.password, Buffer.from(`${CREDENTIALS.username}:${CREDENTIALS.password}`).toString("base64")]) {
      assert.ok(!text.includes(secret), `the error holds ${secret}: ${text}`);
    }
  }
}

function call(operation: Operation, power: ReturnType<typeof createEsphomePowerSwitch>, url: string) {
  const relay = addressOf(url, "Relay", "Power");
  const calls: Record<Operation, () => Promise<unknown>> = {
    read: () => power.read(relay),
    probe: () => power.probe(relay),
    turnOn: () => power.turnOn(relay, { device: acceptAny }),
    turnOff: () => power.turnOff(relay, allowCut, { device: acceptAny }),
  };
  return timed<unknown>(calls[operation]);
}

const summary = (tally: Map<string, number>): string => [...tally].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k} ${n}`).join(", ");

const printable = (maxLength: number) => fc.string({ unit: "binary-ascii", maxLength }).map((s) => s.replace(/[^\x20-\x7e]/gu, ""));
const withMarker = (text: fc.Arbitrary<string>) => fc.tuple(text, fc.boolean()).map(([t, mark]) => (mark ? `${t}${MARKER}` : t));
/** `value` in one case of four, else null. */
const rarely = <T>(value: fc.Arbitrary<T>): fc.Arbitrary<T | null> => fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: value });
const stateBodies = fc.constantFrom(
  '{"name_id":"switch/Relay","id":"switch-relay","value":true,"state":"ON"}',
  '{"value":false}',
  '{"state":"OFF"}',
  '{"value":12.5,"state":"12.5 W"}',
  "{}",
  "[]",
  "null",
  "",
);

describe("createEsphomePowerSwitch() with arbitrary answers (fast-check)", () => {
  it("from an injected fetch: any status, headers, body, chunking, early end or failure", async () => {
    let runs = 0;
    let calls = 0;
    const tally = new Map<string, number>();
    const answer = fc.record({
      status: fc.oneof({ weight: 3, arbitrary: fc.constantFrom(200, 200, 200, 401, 404, 500) }, { weight: 1, arbitrary: fc.integer({ min: 200, max: 599 }) }),
      contentType: fc.option(withMarker(printable(60))),
      contentLength: rarely(fc.oneof(fc.nat().map(String), withMarker(printable(12)))),
      challenge: fc.option(withMarker(fc.oneof(printable(200), fc.constant('Digest realm="r", qop="auth", nonce="n"'), fc.constant('Basic realm="r"')))),
      body: fc.oneof(
        { weight: 3, arbitrary: stateBodies },
        { weight: 1, arbitrary: withMarker(printable(300)) },
        { weight: 1, arbitrary: fc.uint8Array({ maxLength: 20_000 }).map((b) => Buffer.from(b).toString("latin1")) },
      ),
      chunks: fc.array(fc.integer({ min: 1, max: 5000 }), { maxLength: 6 }),
      breaksAfter: rarely(fc.nat({ max: 6 })),
      delayMs: rarely(fc.constantFrom(5, 40)),
      rejects: rarely(fc.constantFrom("network", "abort", "other")),
    });
    type Answer = typeof answer extends fc.Arbitrary<infer A> ? A : never;

    const respond = (a: Answer): Promise<Response> => {
      if (a.rejects === "network") return Promise.reject(new TypeError("fetch failed", { cause: Object.assign(new Error(MARKER), { code: "ECONNRESET" }) }));
      if (a.rejects === "abort") return Promise.reject(new DOMException(MARKER, "AbortError"));
      if (a.rejects === "other") return Promise.reject(new Error(MARKER));
      const bytes = Buffer.from(a.body, "latin1");
      const cuts = a.chunks.map((c, i) => a.chunks.slice(0, i + 1).reduce((s, n) => s + n, 0)).filter((c) => c < bytes.length);
      const pieces = [0, ...cuts].map((start, i) => bytes.subarray(start, [...cuts, bytes.length][i]));
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (a.delayMs !== null) await sleep(a.delayMs);
          if (a.breaksAfter !== null && sent >= a.breaksAfter) {
            controller.error(new TypeError(MARKER));
            return;
          }
          const piece = pieces[sent++];
          if (piece === undefined) controller.close();
          else controller.enqueue(new Uint8Array(piece));
        },
      });
      const headers = new Headers();
      if (a.contentType !== null) headers.set("content-type", a.contentType);
      if (a.contentLength !== null) headers.set("content-length", a.contentLength);
      if (a.challenge !== null) headers.set("www-authenticate", a.challenge);
      return Promise.resolve(new Response(body, { status: a.status, headers }));
    };

    await fc.assert(
      fc.asyncProperty(fc.array(answer, { minLength: 1, maxLength: 4 }), fc.constantFrom(...operations), fc.boolean(), async (answers, operation, withCredentials) => {
        runs += 1;
        let next = 0;
        const fetch: typeof globalThis.fetch = () => {
          calls += 1;
          return respond(answers[Math.min(next++, answers.length - 1)] as Answer);
        };
        const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS, fetch, ...(withCredentials && { credentialsFor: () => CREDENTIALS }) });
        assertOutcome(await call(operation, power, "http://10.0.0.5"), operation, tally);
      }),
      { numRuns: 300 },
    );
    console.log(`fuzz (injected fetch): ${runs} runs, ${calls} answers; outcomes: ${summary(tally)}`);
  });

  describe("from a local TCP server writing arbitrary bytes", () => {
    let server: Server;
    let url = "";
    let reply: { head: string; body: string; end: "close" | "destroy" | "hang" } = { head: "", body: "", end: "close" };
    let requests = 0;

    before(async () => {
      server = createServer((socket: Socket) => {
        let received = "";
        socket.on("error", () => undefined);
        socket.on("data", (chunk) => {
          received += chunk.toString("latin1");
          if (!received.includes("\r\n\r\n")) return;
          requests += 1;
          const { head, body, end } = reply;
          socket.write(head + body, "latin1");
          if (end === "close") socket.end();
          else if (end === "destroy") socket.destroy();
        });
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => {
      server.close();
    });

    it("any status line, headers, chunk framing and ending", async () => {
      let runs = 0;
      const tally = new Map<string, number>();
      const statusLine = fc.oneof(
        { weight: 4, arbitrary: fc.integer({ min: 100, max: 999 }).map((s) => `HTTP/1.1 ${s} X\r\n`) },
        { weight: 1, arbitrary: printable(40).map((s) => `${s}\r\n`) },
      );
      const header = fc.oneof(
        fc.tuple(fc.stringMatching(/^[A-Za-z-]{1,16}$/u), withMarker(printable(40))).map(([k, v]) => `${k}: ${v}\r\n`),
        fc.nat().map((n) => `Content-Length: ${n}\r\n`),
        fc.constant("Transfer-Encoding: chunked\r\n"),
        fc.constant("Content-Type: application/json\r\n"),
        withMarker(printable(80)).map((v) => `WWW-Authenticate: ${v}\r\n`),
      );
      const chunked = fc
        .array(fc.tuple(fc.oneof(fc.nat({ max: 5000 }).map((n) => n.toString(16)), printable(6)), withMarker(printable(100))), { maxLength: 4 })
        .map((chunks) => `${chunks.map(([size, data]) => `${size}\r\n${data}\r\n`).join("")}0\r\n\r\n`);
      const body = fc.oneof(stateBodies, withMarker(printable(500)), chunked);
      const end = fc.oneof({ weight: 8, arbitrary: fc.constantFrom("close" as const, "destroy" as const) }, { weight: 1, arbitrary: fc.constant("hang" as const) });
      const arbitraryAnswer = fc
        .tuple(statusLine, fc.array(header, { maxLength: 6 }), body)
        .map(([status, headers, text]) => ({ head: `${status}${headers.join("")}\r\n`, body: text }));
      // Also answers an HTTP client takes, so that the adapter's own reading of them is exercised.
      const wellFormedAnswer = fc
        .tuple(fc.constantFrom(200, 200, 401, 404, 500), stateBodies, fc.option(withMarker(printable(80))))
        .map(([status, text, challenge]) => ({
          head: `HTTP/1.1 ${status} X\r\nContent-Type: application/json\r\nContent-Length: ${text.length}\r\n${challenge === null ? "" : `WWW-Authenticate: ${challenge}\r\n`}\r\n`,
          body: text,
        }));
      const answer = fc.oneof(arbitraryAnswer, wellFormedAnswer);

      await fc.assert(
        fc.asyncProperty(answer, end, fc.constantFrom(...operations), async (generated, ending, operation) => {
          runs += 1;
          reply = { ...generated, end: ending };
          const power = createEsphomePowerSwitch({ timeoutMs: TIMEOUT_MS, credentialsFor: () => CREDENTIALS });
          assertOutcome(await call(operation, power, url), operation, tally);
        }),
        { numRuns: 150 },
      );
      console.log(`fuzz (raw TCP answers): ${runs} runs, ${requests} requests served; outcomes: ${summary(tally)}`);
    });
  });
});
