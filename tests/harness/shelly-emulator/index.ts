/**
 * shelly-emulator — one Shelly Gen2+ device (Plus/Pro, Gen3, Gen4) serving its local RPC over HTTP, as a node:http
 * server on 127.0.0.1 (port 0). Written from Shelly's API docs
 * (https://shelly-api-docs.shelly.cloud/gen2/General/RPCProtocol, .../General/Authentication,
 * .../General/CommonErrors, .../ComponentsAndServices/Switch) and the HTTP RPC channel of Mongoose OS the firmware
 * grew from
 * (https://github.com/mongoose-os-libs/rpc-common/blob/master/src/mg_rpc/mg_rpc_channel_http.c).
 *
 * Emulated:
 * - `GET /rpc/<Method>?k=v` and `POST /rpc/<Method>` (JSON params): the result alone with 200; an error as
 *   `{code, message}` with HTTP 404 (no such method) or 500 (any other). `POST /rpc` with a JSON-RPC 2.0
 *   frame: `{id, src, dst, result}` or `{id, src, dst, error}`, with 200 (401 for the challenge). `GET /shelly`:
 *   device info.
 *   Every answer closes its connection (`Connection: close`).
 * - Shelly.GetDeviceInfo (id, mac, gen, model, fw, auth_en; never protected): the MAC follows from the port, so
 *   every emulated device answers as another. To have another device answer at an address, put it behind a
 *   lease (../lease.ts). Shelly.GetStatus, Switch.GetStatus (output,
 *   and apower, voltage, current, aenergy on metered outputs; Gen3+ add freq and ret_aenergy), Switch.Set
 *   ({was_on}), Switch.Toggle; -103 for missing or mistyped arguments, -105 for an unknown switch id, 404
 *   for an unknown method.
 * - Digest auth when a password is set (see auth.ts), with the 401 challenge in `WWW-Authenticate` and as
 *   an error 401 whose message holds the challenge as JSON; firmware 1.x (a nonce per request) or 2.x
 *   (nonce reuse with nc).
 * - A handful of sockets at once (`maxConnections`, default 4): more are reset as they arrive.
 * - Faults (`inject`): slow, hang (never answers), drop (closes without acting), http500 (without acting),
 *   lost-answer (acts, then closes without answering), stuck (Switch.Set answers but the output stays), down
 *   (listener closed). A switch flipped behind plugpool's back (`flip`), a machine's draw (`setDraw`).
 * - A call log (HTTP method, path, RPC method, params, how credentials came, status).
 *
 * Not emulated: WebSocket, MQTT and UDP channels, notifications, schedules, scripts, webhooks, timers
 * (`toggle_after` is accepted and ignored), overpower protection, energy counting, reboots.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { createAuthGate, type AuthGate, type Firmware } from "./auth.ts";
import { createDevice, RpcError, type Gen, type SwitchOptions } from "./device.ts";

export type { Firmware } from "./auth.ts";
export type { Gen, SwitchOptions } from "./device.ts";

export interface ShellyEmulatorOptions {
  readonly gen?: Gen; // default 2
  /** Default: "1.x" for Gen2, "2.x" for Gen3 and Gen4. */
  readonly firmware?: Firmware;
  /** Enables authentication with this password (user "admin"). */
  readonly password?: string;
  /** Default: one metered switch, off. */
  readonly switches?: readonly SwitchOptions[];
  readonly maxConnections?: number;
  /** Listen on this port (default 0: any). */
  readonly port?: number;
  /** Called as each request arrives, before any fault or answer. */
  readonly onRequest?: (record: Readonly<ShellyCall>) => void;
}

interface FaultScope {
  /** How many requests it strikes (default: until cleared). */
  readonly times?: number;
  /** Only requests for this RPC method. */
  readonly rpc?: string;
}
export type ShellyFault =
  | ({ readonly kind: "slow"; readonly ms: number } & FaultScope)
  | ({ readonly kind: "hang" } & FaultScope)
  | ({ readonly kind: "drop" } & FaultScope)
  | ({ readonly kind: "http500" } & FaultScope)
  | ({ readonly kind: "lost-answer" } & FaultScope)
  | ({ readonly kind: "stuck" } & FaultScope)
  | { readonly kind: "down" };
type RequestFault = Exclude<ShellyFault, { kind: "down" }>;

export interface ShellyCall {
  readonly httpMethod: string;
  /** The request-target as received. */
  readonly path: string;
  /** The RPC method called, once the request was read ("" for /shelly and unknown paths). */
  rpc: string;
  params: Readonly<Record<string, unknown>>;
  /** How credentials came: an Authorization header, an `auth` object in the frame, or none. */
  auth: "none" | "header" | "frame";
  /** Status answered; undefined when the request got no answer. */
  status: number | undefined;
}

export interface EmulatedShelly {
  readonly url: string;
  /** The device id (`<model>-<mac>`): also its Digest realm. With `mac`, what the device says it is. */
  readonly id: string;
  /** The MAC address, 12 upper-case hex digits as Shelly.GetDeviceInfo gives it. */
  readonly mac: string;
  readonly calls: readonly ShellyCall[];
  /** The highest number of requests in flight at once since start (or `resetCalls`). */
  readonly maxConcurrency: number;
  output(switchId: number): boolean;
  /** Switches an output as a person at the button (or a schedule, a script) would: behind plugpool's back. */
  flip(switchId: number, on: boolean): void;
  /** What the machine on this output draws while it is on (watts). */
  setDraw(switchId: number, watts: number): void;
  inject(fault: ShellyFault): Promise<void>;
  /** Removes request faults and brings the listener back up. */
  clearFaults(): Promise<void>;
  expireNonces(): void;
  resetCalls(): void;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 4096;

type Answer = { readonly status: number; readonly body: unknown; readonly headers?: Record<string, string> } | "close" | "silence";

/** A query value as the device reads it: JSON where it parses (numbers, booleans, quoted strings), else text. */
function queryValue(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on("end", () => {
      resolve(bytes > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks).toString("utf8"));
    });
    req.on("error", () => {
      resolve(undefined);
    });
  });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

export async function startShellyEmulator(opts: ShellyEmulatorOptions = {}): Promise<EmulatedShelly> {
  const gen = opts.gen ?? 2;
  const firmware = opts.firmware ?? (gen === 2 ? "1.x" : "2.x");
  const lifetime = new AbortController();
  let faults: { fault: RequestFault; left: number }[] = [];
  let calls: ShellyCall[] = [];
  let inFlight = 0;
  let maxConcurrency = 0;
  let listening = false;
  const server = createServer();
  server.maxConnections = opts.maxConnections ?? 4;
  await up(opts.port ?? 0);
  const port = (server.address() as AddressInfo).port;
  const mac = `A0DD6C${port.toString(16).padStart(6, "0")}`.toUpperCase();
  const device = createDevice({ gen, mac, firmware, authEnabled: opts.password !== undefined, switches: opts.switches ?? [{}] });
  const gate: AuthGate | undefined = opts.password === undefined ? undefined : createAuthGate(device.id, opts.password, firmware);

  function takeFault(rpc: string): RequestFault | undefined {
    const entry = faults.find(({ fault }) => fault.rpc === undefined || fault.rpc === rpc);
    if (!entry) return undefined;
    entry.left -= 1;
    if (entry.left <= 0) faults = faults.filter((f) => f !== entry);
    return entry.fault;
  }

  /** The request as an RPC call: method, params, frame (for POST /rpc), or why it is not one. */
  async function parse(req: IncomingMessage): Promise<{ rpc: string; params: Record<string, unknown>; frame?: Record<string, unknown> } | Answer> {
    const url = new URL(req.url ?? "/", "http://device");
    const method = req.method ?? "";
    if (method === "GET" && url.pathname === "/shelly") return { rpc: "Shelly.GetDeviceInfo", params: {} };
    const named = /^\/rpc\/([A-Za-z0-9_.]+)$/u.exec(url.pathname)?.[1];
    if (named !== undefined && method === "GET") {
      return { rpc: named, params: Object.fromEntries([...url.searchParams].map(([k, v]) => [k, queryValue(v)])) };
    }
    if ((named !== undefined || url.pathname === "/rpc") && method === "POST") {
      const body = await readBody(req);
      let data: unknown;
      try {
        data = body === undefined || body === "" ? {} : (JSON.parse(body) as unknown);
      } catch {
        data = undefined;
      }
      if (!isObject(data)) return { status: 400, body: "Invalid request" };
      if (named !== undefined) return { rpc: named, params: data };
      if (typeof data.method !== "string") return { status: 400, body: "Invalid request" };
      return { rpc: data.method, params: isObject(data.params) ? data.params : {}, frame: data };
    }
    return { status: 404, body: "Not Found" };
  }

  async function answerFor(req: IncomingMessage, record: ShellyCall): Promise<Answer> {
    const parsed = await parse(req);
    if (typeof parsed === "string" || "status" in parsed) return parsed;
    const { rpc, params, frame } = parsed;
    record.rpc = rpc;
    record.params = params;
    if (req.headers.authorization !== undefined) record.auth = "header";
    else if (frame?.auth !== undefined) record.auth = "frame";

    const fault = takeFault(rpc);
    if (fault?.kind === "hang") return "silence";
    if (fault?.kind === "drop") return "close";
    if (fault?.kind === "slow") await sleep(fault.ms, undefined, { signal: lifetime.signal });
    if (fault?.kind === "http500") return { status: 500, body: "Internal Server Error" };

    const reply = (status: number, result: unknown, error?: RpcError, headers?: Record<string, string>): Answer => {
      if (frame === undefined) return { status, body: error ? { code: error.code, message: error.message } : result, ...(headers && { headers }) };
      const envelope = { id: frame.id ?? null, src: device.id, ...(typeof frame.src === "string" ? { dst: frame.src } : {}) };
      // A frame's answer is a 200 whatever it says, but for the challenge.
      return { status: status === 401 ? 401 : 200, body: error ? { ...envelope, error: { code: error.code, message: error.message } } : { ...envelope, result }, ...(headers && { headers }) };
    };

    if (gate && rpc !== "Shelly.GetDeviceInfo") {
      const verdict = gate.check(req, frame?.auth);
      if (!verdict.ok) return reply(401, undefined, new RpcError(401, verdict.challenge.message), { "www-authenticate": verdict.challenge.header });
    }
    let result: unknown;
    try {
      result = device.call(rpc, params, "HTTP_in", fault?.kind === "stuck");
    } catch (error) {
      if (!(error instanceof RpcError)) throw error;
      return reply(error.code === 404 ? 404 : 500, undefined, error);
    }
    if (fault?.kind === "lost-answer") return "close";
    return reply(200, result);
  }

  function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = typeof body === "string" ? body : JSON.stringify(body);
    const type = typeof body === "string" ? "text/plain" : "application/json";
    res.writeHead(status, { server: "ShellyHTTP/1.0.0", "content-type": type, connection: "close", ...headers, "content-length": Buffer.byteLength(text) });
    res.end(text);
  }

  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    res.sendDate = false;
    const record: ShellyCall = { httpMethod: req.method ?? "", path: req.url ?? "", rpc: "", params: {}, auth: "none", status: undefined };
    calls.push(record);
    opts.onRequest?.(record);
    inFlight += 1;
    maxConcurrency = Math.max(maxConcurrency, inFlight);
    res.once("close", () => {
      inFlight -= 1;
      if (res.writableFinished) record.status = res.statusCode;
    });
    answerFor(req, record).then(
      (answer) => {
        if (answer === "silence" || res.destroyed) return;
        if (answer === "close") req.socket.destroy();
        else send(res, answer.status, answer.body, answer.headers);
      },
      () => req.socket.destroy(),
    );
  });

  async function up(listenPort: number): Promise<void> {
    if (listening) return;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(listenPort, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    listening = true;
  }
  async function down(): Promise<void> {
    if (!listening) return;
    listening = false;
    const closed = new Promise<void>((resolve) => {
      server.close(() => {
        resolve();
      });
    });
    server.closeAllConnections();
    await closed;
  }

  const switchAt = (n: number) => {
    const s = device.switches.get(n);
    if (!s) throw new Error(`the emulated device has no switch ${n}`);
    return s;
  };

  return {
    url: `http://127.0.0.1:${port}`,
    id: device.id,
    mac,
    get calls() {
      return calls;
    },
    get maxConcurrency() {
      return maxConcurrency;
    },
    output: (n) => switchAt(n).output,
    flip(n, on) {
      const s = switchAt(n);
      s.output = on;
      s.source = "button";
    },
    setDraw(n, watts) {
      switchAt(n).draw = watts;
    },
    async inject(fault) {
      if (fault.kind === "down") await down();
      else faults.push({ fault, left: fault.times ?? Infinity });
    },
    async clearFaults() {
      faults = [];
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
      await down();
    },
  };
}
