/**
 * plug-emulator — one ESPHome device with `web_server`, as a node:http server on 127.0.0.1 (port 0).
 * Every behaviour below follows ESPHome's web_server and web_server_idf sources, the ESPAsyncWebServer
 * library and the web API docs (https://esphome.io/web-api/).
 *
 * Emulated:
 * - Version profiles: "2025.12" object_id URLs only (GET on an action URL executes it,
 *   trailing slash on GET reads the state, IDF does not URL-decode); "2026.1" names with object_id
 *   fallback (logged as a deprecation warning, see `warnings`) and `name_id` + legacy `id` in JSON
 *   (the 2026.1.3 – 2026.6 shape); "2026.7" names only. 2026.x: empty or surplus segments → 404
 *   `Not Found`, a two-segment GET is read as sub-device/entity (none exist here) → 404.
 * - Platform profiles: "esp32" (IDF backend): keep-alive, 405 for methods other than
 *   GET/POST/OPTIONS, 411 for a POST without Content-Length, socket closed without an answer for
 *   paths no handler claims, one request served at a time. "esp8266" (async backend): `Connection:
 *   close` on every answer, 404 `Not found` for other methods and unknown paths, requests not queued.
 * - Auth: none, or `{type, username, password}` with each backend's accepted schemes and
 *   challenge strings, including IDF Digest nonce slots (8, 5 min), the nc replay check, the uri
 *   check, `stale=true`, and the async backend's Basic failure from 54 bytes of `user:pass`.
 * - Several switches (multi-relay strips), each with `restore_mode` and an optional power
 *   sensor (`/sensor/<name>`, watts follow the relay or an attached machine).
 * - 200 means queued: an action applies `switchDelayMs` after the answer; publish deduplicates.
 * - Faults at run time (`inject`): timeout (accepts, never answers), slow (answers after `ms`),
 *   http500, drop (destroys the socket), flap (relay flips by itself), reboot (drops connections,
 *   refuses them for `bootMs`, outputs drop then restore_mode applies; `powerLoss` on esp8266 also
 *   loses the RTC-saved state), down (listener closed: connections refused). Hostile answers, of no
 *   real firmware: echo (the request's headers in the body and the Content-Type, as a proxy or
 *   captive portal may send them back), huge (a 400 MB body, streamed as the client takes it, with or
 *   without Content-Length), drip (a body of one byte every `ms`).
 * - A call log (method, raw path, auth scheme, Content-Length, status), a hook as each request arrives
 *   (`onRequest`), and the highest number of requests seen in flight at once (`maxConcurrency`).
 *
 * Not emulated: `/events` (SSE) and `?detail=all` bodies, sub-devices, interlock, `inverted`,
 * `assumed_state`, Origin checks, socket budgets/LRU purge, the 60 s flash write batching, latency
 * spikes other than the `slow` fault, the 15-minute API reboot_timeout (use `reboot`).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { createAuthGate, type AuthConfig, type Platform, type Version } from "./auth.ts";
import { createRelayBank, type AttachedMachine, type SwitchConfig } from "./relays.ts";
import { idFields, route } from "./routes.ts";

export type { AuthConfig, Platform, Version } from "./auth.ts";
export type { AttachedMachine, RestoreMode, SwitchConfig } from "./relays.ts";
export { emulatedObjectId } from "./routes.ts";

export interface PlugEmulatorOptions {
  readonly version?: Version; // default "2026.7"
  readonly platform?: Platform; // default "esp32"
  readonly auth?: AuthConfig;
  readonly switches?: readonly SwitchConfig[]; // default one switch "Relay"
  /** How long after the 200 an action takes effect (default 0: next turn of the event loop). */
  readonly switchDelayMs?: number;
  /** Listen on this port (default 0: any); lets a test "reflash" a device at the same URL. */
  readonly port?: number;
  /** Called as each request arrives, before any fault or answer: an observer sees a command reach the device. */
  readonly onRequest?: (record: Readonly<CallRecord>) => void;
  /** The friendly name, the `title` of the /events ping (default `plug-<port>`). */
  readonly name?: string;
  /** The first /events ping: with its data (default), without a data line ("bare"), or none at all. */
  readonly ping?: "title" | "bare" | "none";
}

/**
 * Faults of requests: for `times` requests (default: until cleared), optionally one domain or method only, or
 * only requests that carry credentials (`withAuth`).
 */
interface RequestFaultScope {
  readonly times?: number;
  readonly domain?: "switch" | "sensor";
  readonly method?: "GET" | "POST";
  readonly withAuth?: boolean;
}
export type Fault =
  | ({ readonly kind: "timeout" } & RequestFaultScope)
  | ({ readonly kind: "slow"; readonly ms: number } & RequestFaultScope)
  | ({ readonly kind: "http500" } & RequestFaultScope)
  | ({ readonly kind: "drop" } & RequestFaultScope)
  | ({ readonly kind: "echo"; readonly status?: number } & RequestFaultScope)
  | ({ readonly kind: "huge"; readonly chunked?: boolean } & RequestFaultScope)
  | ({ readonly kind: "drip"; readonly ms: number } & RequestFaultScope)
  /** Every `everyMs`, or (omitted) straight after each applied action so the commanded state never shows. */
  | { readonly kind: "flap"; readonly switches?: readonly string[]; readonly everyMs?: number }
  | { readonly kind: "reboot"; readonly bootMs?: number; readonly powerLoss?: boolean }
  | { readonly kind: "down" };
type RequestFault = Extract<Fault, { kind: "timeout" | "slow" | "http500" | "drop" | "echo" | "huge" | "drip" }>;

export interface CallRecord {
  readonly method: string;
  /** The request-target as received (still percent-encoded). */
  readonly path: string;
  readonly auth: "none" | "basic" | "digest" | "other";
  readonly contentLength: string | undefined;
  /** Status answered; undefined when the request got no answer (timeout, drop, closed). */
  status: number | undefined;
}

export interface EmulatedPlug {
  /** Base URL, e.g. http://127.0.0.1:41234 (stays the same across reboot/down). */
  readonly url: string;
  readonly calls: readonly CallRecord[];
  /** Deprecation warnings the device would log (2026.1 object_id URLs). */
  readonly warnings: readonly string[];
  /** The highest number of requests in flight at once since start (or `resetCalls`). */
  readonly maxConcurrency: number;
  /** The friendly name the device tells in its /events ping. */
  readonly name: string;
  /** Whole seconds since the device (re)started. */
  readonly uptimeSeconds: number;
  /** The /events streams open now: a client that read what it needed and closed leaves none. */
  readonly openStreams: number;
  state(switchName: string): boolean;
  setState(switchName: string, on: boolean): void;
  attachMachine(switchName: string, machine: AttachedMachine | undefined): void;
  inject(fault: Fault): Promise<void>;
  /** Removes request faults and flapping and brings the listener back up. */
  clearFaults(): Promise<void>;
  /** Forgets Digest nonces (the next answer to an old nonce is `stale=true`). */
  expireNonces(): void;
  resetCalls(): void;
  close(): Promise<void>;
}

const BASE_HEADERS = { "access-control-allow-origin": "*", "accept-ranges": "none" };
const TEXT = { "content-type": "text/plain" };

/** An HTTP answer; `after` runs once it is sent (web_server defers actions to its main loop). */
interface Reply {
  readonly status: number;
  readonly body?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly after?: () => void;
}

/** The /events stream: it never ends by itself. */
interface EventStream {
  readonly stream: "events";
}

/** An answer whose body is written over time, until it ends or the client goes away. */
interface Streamed {
  readonly headers: Readonly<Record<string, string | number>>;
  write(res: ServerResponse): Promise<void>;
}

const HUGE_BYTES = 400 * 1024 * 1024;
const DRIP_BYTES = 1000;

/** Resolves once the response may take more (or is gone). */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/** 400 MB in 64 KiB pieces, each written only once the socket took the last: never in memory at once. */
async function writeHuge(res: ServerResponse): Promise<void> {
  const piece = Buffer.alloc(64 * 1024, "x");
  for (let sent = 0; sent < HUGE_BYTES; sent += piece.length) {
    if (res.destroyed) return;
    if (!res.write(piece)) await drained(res);
  }
  res.end();
}

const json = (data: unknown): Reply => ({ status: 200, body: JSON.stringify(data), headers: { "content-type": "application/json" } });

function authKind(header: string | undefined): CallRecord["auth"] {
  const scheme = header?.split(" ", 1)[0]?.toLowerCase();
  if (scheme === undefined) return "none";
  return scheme === "basic" || scheme === "digest" ? scheme : "other";
}

export async function startPlugEmulator(opts: PlugEmulatorOptions = {}): Promise<EmulatedPlug> {
  const version = opts.version ?? "2026.7";
  const platform = opts.platform ?? "esp32";
  const bank = createRelayBank(opts.switches ?? [{ name: "Relay" }]);
  const gate = createAuthGate(opts.auth, version, platform);
  const lifetime = new AbortController();
  let faults: { fault: RequestFault; left: number }[] = [];
  let calls: CallRecord[] = [];
  const warnings: string[] = [];
  let inFlight = 0;
  let maxConcurrency = 0;
  let serial: Promise<void> = Promise.resolve();
  let listening = false;
  let openStreams = 0;
  let bootedAt = performance.now();
  const uptimeSeconds = (): number => Math.floor((performance.now() - bootedAt) / 1000);

  function send(res: ServerResponse, answer: Reply): void {
    const { status, body = "", headers = {} } = answer;
    const contentType = body !== "" || platform === "esp32" ? { "content-type": "text/html" } : {};
    const close = platform === "esp8266" ? { connection: "close" } : {};
    res.writeHead(status, { ...BASE_HEADERS, ...contentType, ...close, ...headers, "content-length": Buffer.byteLength(body) });
    res.end(body);
  }

  function takeFault({ method, path, auth }: CallRecord): RequestFault | undefined {
    const entry = faults.find(
      ({ fault }) =>
        (fault.domain === undefined || path.startsWith(`/${fault.domain}/`)) &&
        (fault.method === undefined || fault.method === method) &&
        (fault.withAuth !== true || auth !== "none"),
    );
    if (!entry) return undefined;
    entry.left -= 1;
    if (entry.left <= 0) faults = faults.filter((f) => f !== entry);
    return entry.fault;
  }

  /** One byte every `ms`, up to DRIP_BYTES, while the client stays. */
  async function drip(res: ServerResponse, ms: number): Promise<void> {
    for (let sent = 0; sent < DRIP_BYTES; sent++) {
      await sleep(ms, undefined, { signal: lifetime.signal });
      if (res.destroyed) return;
      res.write("x");
    }
    res.end();
  }

  function hostile(fault: Extract<RequestFault, { kind: "echo" | "huge" | "drip" }>, req: IncomingMessage): Reply | Streamed {
    switch (fault.kind) {
      case "echo": {
        const seen = JSON.stringify(req.headers);
        return { status: fault.status ?? 200, body: `${seen}\n${req.rawHeaders.join("\n")}`, headers: { "content-type": `text/plain; echo=${seen}` } };
      }
      case "huge":
        return { headers: fault.chunked === true ? TEXT : { ...TEXT, "content-length": HUGE_BYTES }, write: writeHuge };
      case "drip":
        return { headers: { ...TEXT, "content-length": DRIP_BYTES }, write: (res) => drip(res, fault.ms) };
    }
  }

  /** What the device does with a request: a reply, a streamed reply, closing the socket, or nothing at all. */
  async function answerFor(req: IncomingMessage, record: CallRecord): Promise<Reply | Streamed | EventStream | "close" | "silence"> {
    const fault = takeFault(record);
    if (fault?.kind === "timeout") return "silence";
    if (fault?.kind === "drop") return "close";
    if (fault?.kind === "slow") await sleep(fault.ms, undefined, { signal: lifetime.signal });
    if (fault?.kind === "http500") return { status: 500, body: "Internal Server Error", headers: TEXT };
    if (fault?.kind === "echo" || fault?.kind === "huge" || fault?.kind === "drip") return hostile(fault, req);

    const method = req.method ?? "";
    if (method !== "GET" && method !== "POST") {
      if (platform === "esp8266") return { status: 404, body: "Not found", headers: TEXT };
      return method === "OPTIONS" ? "close" : { status: 405, body: "Specified method is invalid for this resource" };
    }
    if (platform === "esp32" && method === "POST" && record.contentLength === undefined) {
      return { status: 411, body: "Client must specify Content-Length" };
    }
    const outcome = route(bank, method, record.path, version, platform, (w) => warnings.push(w));
    if (outcome.kind === "unhandled") return platform === "esp32" ? "close" : { status: 404, body: "Not found", headers: TEXT };
    const verdict = gate?.check(req) ?? { ok: true };
    if (!verdict.ok) return verdict;

    switch (outcome.kind) {
      case "index":
        return { status: 200, body: "<!DOCTYPE html><html><body>ESPHome web_server</body></html>" };
      case "events":
        return { stream: "events" };
      case "state": {
        const { name } = outcome.relay.config;
        const on = outcome.relay.on;
        return json({ ...idFields("switch", name, version), value: on, state: on ? "ON" : "OFF" });
      }
      case "sensor": {
        const watts = Math.round(bank.watts(outcome.relay) * 10) / 10;
        const name = outcome.relay.config.powerSensor ?? "";
        return json({ ...idFields("sensor", name, version), value: watts, state: `${watts.toFixed(1)} W` });
      }
      case "action": {
        const { relay, action } = outcome;
        return { status: 200, after: () => { bank.defer(relay, action, opts.switchDelayMs ?? 0); } };
      }
      case "not-found":
        return { status: 404 };
      case "malformed":
        return { status: 404, body: "Not Found", headers: TEXT };
    }
  }

  /** The events that open a stream, one write each, framed as the platform's server frames them. */
  function openingEvents(): string[] {
    const eol = platform === "esp32" ? "\r\n" : "\n";
    const event = (type: string, data: unknown, retry = ""): string =>
      `${retry}id: ${Math.floor(performance.now())}${eol}event: ${type}${eol}${data === undefined ? "" : `data: ${JSON.stringify(data)}${eol}`}${eol}`;
    const config = { title: name(), comment: "", ota: true, log: true, lang: "en", ...(version !== "2025.12" && { uptime: uptimeSeconds() }) };
    const ping = opts.ping === "none" ? "" : event("ping", opts.ping === "bare" ? undefined : config, `retry: 30000${eol}`);
    const states = bank.relays.map((relay) => event("state", { ...idFields("switch", relay.config.name, version), value: relay.on, state: relay.on ? "ON" : "OFF" }));
    return [ping, ...states].filter((piece) => piece !== "");
  }

  /** Starts an /events stream; it stays open until the client (or a reboot) closes it. */
  function openStream(res: ServerResponse, record: CallRecord): void {
    // The async server writes the stream raw (no chunked framing); IDF chunks it.
    if (platform === "esp8266") res.useChunkedEncodingByDefault = false;
    res.writeHead(200, { ...BASE_HEADERS, "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    record.status = 200;
    openStreams += 1;
    res.once("close", () => { openStreams -= 1; });
    res.flushHeaders();
    // IDF opens every stream with an empty line, a chunk of its own; the events follow from the main loop.
    if (platform === "esp32") res.write("\r\n");
    setImmediate(() => {
      for (const piece of openingEvents()) if (!res.destroyed) res.write(piece);
    });
  }

  /** What the device did with a request; "detached": an /events stream that goes on beside other requests. */
  async function handle(req: IncomingMessage, res: ServerResponse, record: CallRecord): Promise<"detached" | undefined> {
    const answer = await answerFor(req, record);
    if (answer === "silence" || res.destroyed) return undefined;
    if (answer === "close") {
      req.socket.destroy();
      return undefined;
    }
    if ("stream" in answer) {
      openStream(res, record);
      return "detached";
    }
    if ("write" in answer) {
      res.writeHead(200, { ...BASE_HEADERS, ...answer.headers });
      res.flushHeaders();
      await answer.write(res);
      return undefined;
    }
    const { after } = answer;
    if (after) res.once("finish", after);
    send(res, answer);
    return undefined;
  }

  const server = createServer((req, res) => {
    res.sendDate = false;
    const record: CallRecord = {
      method: req.method ?? "",
      path: req.url ?? "",
      auth: authKind(req.headers.authorization),
      contentLength: req.headers["content-length"],
      status: undefined,
    };
    calls.push(record);
    opts.onRequest?.(record);
    inFlight += 1;
    maxConcurrency = Math.max(maxConcurrency, inFlight);
    const closed = new Promise<void>((resolve) => {
      res.once("close", () => {
        inFlight -= 1;
        if (res.writableFinished) record.status = res.statusCode;
        resolve();
      });
    });
    const run = async (): Promise<void> => {
      const served = await handle(req, res, record).catch(() => req.socket.destroy());
      // A stream is served beside the requests that follow it, as IDF's httpd hands its socket to the stream.
      if (served !== "detached") await closed;
    };
    // The IDF httpd is one task: it serves requests strictly one after another.
    if (platform === "esp32") serial = serial.then(run);
    else void run();
  });
  server.keepAliveTimeout = 0; // IDF has no idle timeout; undici closes idle sockets itself

  async function up(port: number): Promise<void> {
    if (listening) return;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    listening = true;
  }
  async function down(): Promise<void> {
    if (!listening) return;
    listening = false;
    const closedDown = new Promise<void>((resolve) => {
      server.close(() => {
        resolve();
      });
    });
    server.closeAllConnections();
    await closedDown;
  }

  await up(opts.port ?? 0);
  const port = (server.address() as AddressInfo).port;
  const name = (): string => opts.name ?? `plug-${port}`;

  return {
    url: `http://127.0.0.1:${port}`,
    get calls() {
      return calls;
    },
    warnings,
    get maxConcurrency() {
      return maxConcurrency;
    },
    name: name(),
    get uptimeSeconds() {
      return uptimeSeconds();
    },
    get openStreams() {
      return openStreams;
    },
    state: (relay) => bank.get(relay).on,
    setState(relay, on) {
      bank.set(bank.get(relay), on);
    },
    attachMachine(relay, machine) {
      bank.get(relay).machine = machine;
    },
    async inject(fault) {
      switch (fault.kind) {
        case "down":
          await down();
          return;
        case "reboot":
          await down();
          bank.reboot(fault.powerLoss === true && platform === "esp8266");
          gate?.expireNonces();
          bootedAt = performance.now();
          await sleep(fault.bootMs ?? 0);
          await up(port);
          return;
        case "flap":
          bank.flap((fault.switches ?? bank.relays.map((r) => r.config.name)).map((n) => bank.get(n)), fault.everyMs);
          return;
        default:
          faults.push({ fault, left: fault.times ?? Infinity });
      }
    },
    async clearFaults() {
      faults = [];
      bank.flap(undefined);
      await up(port);
    },
    expireNonces() {
      gate?.expireNonces();
    },
    resetCalls() {
      calls = [];
      maxConcurrency = inFlight;
    },
    async close() {
      lifetime.abort();
      bank.stop();
      await down();
    },
  };
}
