/**
 * A Home Assistant REST API emulator for fast tests: a node:http server on 127.0.0.1 (port 0) with the same
 * entities as the real Home Assistant that startHomeAssistant() configures, answering as Home Assistant
 * 2025.4 does (https://developers.home-assistant.io/docs/api/rest/ and
 * https://github.com/home-assistant/core/blob/2025.4.4/homeassistant/components/api/__init__.py);
 * tests/adapters/home-assistant/conformance.test.ts runs the same cases against both.
 *
 * Emulated: GET /api/, GET /api/config (version, state), GET /api/states/<entity_id> (404 with
 * {"message":"Entity not found."}), POST /api/services/<domain>/<service> for turn_on, turn_off and toggle of
 * switch, input_boolean and homeassistant, and input_number.set_value, answering the list of the states the
 * call changed (`[]` when nothing changed: already so, another domain's entity, an unknown or unavailable
 * entity); 400 for an unknown service or a body that is not a JSON object; 401 "401: Unauthorized" (text)
 * without the token or with another. Entity states are "on", "off", "unavailable" and, set by a test,
 * anything else ("unknown", a sensor's non-number).
 *
 * Faults at run time (`inject`, for `times` requests or until cleared, optionally POST or GET only): slow
 * (answers after `ms`), hang (never answers), drop (closes the connection unanswered), http500 (500
 * "500: Internal Server Error"), lost (carries the call out, then closes the connection unanswered), huge (a
 * 200 whose JSON body is `bytes` long). A call log keeps every request (method, path, body, whether it carried
 * the token, status), and the most requests in hand at once.
 *
 * Not emulated: websocket API, events, history, templates, other services and entities.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { HomeAssistantBackstage, HomeAssistantSetup } from "./backstage.ts";

export const emulatedVersion = "2025.4.4";

export type Fault =
  | ({ readonly kind: "slow"; readonly ms: number } & FaultScope)
  | ({ readonly kind: "hang" | "drop" | "http500" | "lost" } & FaultScope)
  /** Without a Content-Length when `chunked`, so that only counting finds the size. */
  | ({ readonly kind: "huge"; readonly bytes: number; readonly chunked?: boolean } & FaultScope);

interface FaultScope {
  /** How many requests it applies to; default: until cleared. */
  readonly times?: number;
  readonly method?: "GET" | "POST";
}

export interface CallRecord {
  readonly method: string;
  readonly path: string;
  readonly body: string;
  /** Whether it carried the right token. */
  readonly authorized: boolean;
  /** The status answered; undefined when the connection was closed unanswered or is still open. */
  status?: number;
}

export interface HomeAssistantEmulator extends HomeAssistantBackstage {
  readonly calls: readonly CallRecord[];
  /** The most requests it had in hand at once (arrived, not yet answered or closed). */
  readonly maxInFlight: number;
  /** Service calls only (POST /api/services/...), as `domain.service entity_id`. */
  serviceCalls(): string[];
  inject(fault: Fault): void;
  clearFaults(): void;
  /** Writes a raw state (e.g. "unknown", or a sensor's "n/a"), as an integration may report it. */
  setState(entityId: string, state: string): void;
  /** The state Home Assistant would show for the entity, or undefined when it has none. */
  stateOf(entityId: string): string | undefined;
}

interface EntityState {
  readonly entity_id: string;
  state: string;
  attributes: Record<string, unknown>;
  last_changed: string;
  last_reported: string;
  last_updated: string;
  context: { id: string; parent_id: null; user_id: string | null };
}

const UNAVAILABLE = "unavailable";
const userId = "5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e";

export async function startHomeAssistantEmulator(setup: HomeAssistantSetup, options: { readonly token?: string } = {}): Promise<HomeAssistantEmulator> {
  const token = options.token ?? `emulated.${Math.random().toString(36).slice(2)}.token`;
  const states = new Map<string, EntityState>();
  const calls: CallRecord[] = [];
  let faults: { fault: Fault; left: number }[] = [];
  let contextCounter = 0;
  const newContext = (user: string | null): EntityState["context"] => ({
    id: `01EMU${String(++contextCounter).padStart(21, "0")}`, parent_id: null, user_id: user,
  });

  /** Writes a state as Home Assistant's state machine does: unchanged state and attributes change nothing. */
  function write(entityId: string, state: string, user: string | null, changed?: EntityState[]): void {
    const now = new Date().toISOString();
    const old = states.get(entityId);
    if (old === undefined) return;
    if (old.state === state) return;
    Object.assign(old, { state, last_changed: now, last_reported: now, last_updated: now, context: newContext(user) });
    changed?.push(structuredClone(old));
  }
  function add(entityId: string, state: string, attributes: Record<string, unknown>): void {
    const now = new Date().toISOString();
    states.set(entityId, {
      entity_id: entityId, state, attributes, last_changed: now, last_reported: now, last_updated: now, context: newContext(null),
    });
  }
  const reachable = (name: string): boolean => states.get(`input_boolean.${name}_reachable`)?.state === "on";
  // What each optimistic switch was last asked: its state, whatever its helper does.
  const assumed = new Map((setup.assumed ?? []).map((name) => [name, "off"]));
  // The template entities follow their helpers, as the templates in startHomeAssistant's configuration do.
  function follow(name: string, user: string | null, changed?: EntityState[]): void {
    const asked = assumed.get(name);
    if (asked !== undefined) {
      write(`switch.${name}`, reachable(name) ? asked : UNAVAILABLE, user, changed);
      return;
    }
    const helper = states.has(`input_boolean.${name}`) ? `input_boolean.${name}` : `input_number.${name}`;
    const mirror = helper.startsWith("input_boolean.") ? `switch.${name}` : `sensor.${name}`;
    write(mirror, reachable(name) ? (states.get(helper)?.state ?? UNAVAILABLE) : UNAVAILABLE, user, changed);
  }

  for (const name of setup.switches) {
    add(`input_boolean.${name}`, "off", { editable: false, friendly_name: name });
    add(`switch.${name}`, "off", { friendly_name: name });
  }
  for (const [name, watts] of Object.entries(setup.sensors ?? {})) {
    add(`input_number.${name}`, pythonFloat(watts), {
      initial: watts, editable: false, min: 0, max: 100_000, step: 0.1, mode: "box", unit_of_measurement: "W", friendly_name: name,
    });
    add(`sensor.${name}`, pythonFloat(watts), { state_class: "measurement", unit_of_measurement: "W", device_class: "power", friendly_name: name });
  }
  for (const name of assumed.keys()) {
    add(`input_boolean.${name}`, "off", { editable: false, friendly_name: name });
    add(`switch.${name}`, "off", { assumed_state: true, friendly_name: name });
  }
  const flagged = [...setup.switches, ...assumed.keys(), ...Object.keys(setup.sensors ?? {})];
  for (const name of flagged) {
    add(`input_boolean.${name}_reachable`, "on", { editable: false, friendly_name: `${name} reachable` });
  }
  const mirrored = new Map<string, string>([
    ...setup.switches.map((n) => [`input_boolean.${n}`, n] as const),
    ...Object.keys(setup.sensors ?? {}).map((n) => [`input_number.${n}`, n] as const),
    ...flagged.map((n) => [`input_boolean.${n}_reachable`, n] as const),
  ]);

  /** Carries a service call out; the changed states, or undefined for an unknown service. */
  function callService(domain: string, service: string, data: Record<string, unknown>, user: string): EntityState[] | undefined {
    const toggles = ["turn_on", "turn_off", "toggle"];
    const known = (["switch", "input_boolean", "homeassistant"].includes(domain) && toggles.includes(service))
      || (domain === "input_number" && service === "set_value");
    if (!known) return undefined;
    const ids = typeof data.entity_id === "string" ? data.entity_id.split(",").map((s) => s.trim())
      : Array.isArray(data.entity_id) ? data.entity_id.filter((s): s is string => typeof s === "string") : [];
    const changed: EntityState[] = [];
    for (const id of ids) {
      const entity = states.get(id);
      const entityDomain = id.split(".")[0] ?? "";
      // homeassistant.turn_on hands each entity to its own domain's service; a domain's own service only
      // touches that domain's entities. Unknown and unavailable entities are skipped without an error.
      if (entity === undefined || entity.state === UNAVAILABLE) continue;
      if (domain !== "homeassistant" && entityDomain !== domain) continue;
      if (entityDomain === "input_number") {
        const value = Number(data.value);
        if (Number.isFinite(value)) write(id, pythonFloat(value), user, changed);
      } else if (entityDomain === "switch" || entityDomain === "input_boolean") {
        const target = service === "turn_on" ? "on" : service === "turn_off" ? "off" : entity.state === "on" ? "off" : "on";
        // A template switch acts on its helper, whose change the switch then follows; an optimistic one takes the
        // state it was asked.
        write(entityDomain === "switch" ? `input_boolean.${id.slice("switch.".length)}` : id, target, user, changed);
        const optimistic = id.slice("switch.".length);
        if (entityDomain === "switch" && assumed.has(optimistic)) {
          assumed.set(optimistic, target);
          follow(optimistic, user, changed);
          continue;
        }
      } else {
        continue;
      }
      const name = mirrored.get(entityDomain === "switch" ? `input_boolean.${id.slice("switch.".length)}` : id);
      if (name !== undefined) follow(name, user, changed);
    }
    return changed;
  }

  function takeFault(method: string): Fault | undefined {
    const entry = faults.find(({ fault }) => fault.method === undefined || fault.method === method);
    if (entry === undefined) return undefined;
    entry.left -= 1;
    if (entry.left <= 0) faults = faults.filter((f) => f !== entry);
    return entry.fault;
  }

  let inFlight = 0;
  let maxInFlight = 0;
  const sockets = new Set<Socket>();
  const lifetime = new AbortController();
  const server = createServer((req, res) => {
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    res.once("close", () => {
      inFlight -= 1;
    });
    handle(req, res).catch(() => {
      res.destroy();
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    const method = req.method ?? "GET";
    const path = req.url ?? "/";
    const authorized = req.headers.authorization === `Bearer ${token}`;
    const record: CallRecord = { method, path, body, authorized };
    calls.push(record);
    const fault = takeFault(method);
    if (fault?.kind === "hang") return;
    if (fault?.kind === "drop") {
      res.destroy();
      return;
    }
    if (fault?.kind === "slow") await sleep(fault.ms, undefined, { signal: lifetime.signal }).catch(() => undefined);
    if (fault?.kind === "http500") {
      reply(res, record, 500, "500: Internal Server Error");
    } else if (!authorized) {
      reply(res, record, 401, "401: Unauthorized");
    } else {
      const answer = route(method, path, body);
      if (fault?.kind === "lost") res.destroy();
      else if (fault?.kind === "huge") huge(res, record, fault.bytes, fault.chunked === true);
      else reply(res, record, answer.status, answer.body);
    }
  }

  function route(method: string, path: string, body: string): { status: number; body: unknown } {
    const notFound = { status: 404, body: "404: Not Found" };
    if (path === "/api/" && method === "GET") return { status: 200, body: { message: "API running." } };
    if (path === "/api/config" && method === "GET") {
      return { status: 200, body: { version: emulatedVersion, state: "RUNNING", location_name: "plugpool test", time_zone: "UTC" } };
    }
    const state = /^\/api\/states\/([^/?]+)$/.exec(path);
    if (state !== null && method === "GET") {
      const entity = states.get(decodeURIComponent(state[1] ?? ""));
      return entity === undefined ? { status: 404, body: { message: "Entity not found." } } : { status: 200, body: entity };
    }
    const service = /^\/api\/services\/([^/?]+)\/([^/?]+)$/.exec(path);
    if (service !== null && method === "POST") {
      let data: unknown;
      try {
        data = body === "" ? {} : JSON.parse(body);
      } catch {
        return { status: 400, body: { message: "Data should be valid JSON." } };
      }
      if (typeof data !== "object" || data === null || Array.isArray(data)) return { status: 400, body: "400: Bad Request" };
      const changed = callService(service[1] ?? "", service[2] ?? "", data as Record<string, unknown>, userId);
      return changed === undefined ? { status: 400, body: "400: Bad Request" } : { status: 200, body: changed };
    }
    return method === "GET" || method === "POST" ? notFound : { status: 405, body: "405: Method Not Allowed" };
  }

  function reply(res: ServerResponse, record: CallRecord, status: number, body: unknown): void {
    record.status = status;
    const text = typeof body === "string" ? body : JSON.stringify(body);
    res.writeHead(status, { "content-type": typeof body === "string" ? "text/plain; charset=utf-8" : "application/json" });
    res.end(text);
  }

  function huge(res: ServerResponse, record: CallRecord, bytes: number, chunked: boolean): void {
    const text = JSON.stringify({ padding: "x".repeat(bytes) });
    if (!chunked) {
      reply(res, record, 200, JSON.parse(text));
      return;
    }
    record.status = 200;
    res.writeHead(200, { "content-type": "application/json" });
    for (let at = 0; at < text.length; at += 1024) res.write(text.slice(at, at + 1024));
    res.end();
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const behindTheBack = (entityId: string, state: string): void => {
    if (!states.has(entityId)) throw new Error(`no entity ${entityId}`);
    write(entityId, state, null);
    const name = mirrored.get(entityId);
    if (name !== undefined) follow(name, null);
  };

  return {
    url,
    token,
    calls,
    get maxInFlight() {
      return maxInFlight;
    },
    serviceCalls: () => calls.filter((c) => c.method === "POST" && c.path.startsWith("/api/services/")).map((c) => {
      const entity = (JSON.parse(c.body || "{}") as { entity_id?: unknown }).entity_id;
      return `${c.path.slice("/api/services/".length).replace("/", ".")} ${String(entity)}`;
    }),
    setSwitch: async (name, on) => {
      behindTheBack(`input_boolean.${name}`, on ? "on" : "off");
      await Promise.resolve();
    },
    setWatts: async (name, watts) => {
      behindTheBack(`input_number.${name}`, pythonFloat(watts));
      await Promise.resolve();
    },
    setAvailable: async (name, available) => {
      behindTheBack(`input_boolean.${name}_reachable`, available ? "on" : "off");
      await Promise.resolve();
    },
    setState: (entityId, state) => {
      if (!states.has(entityId)) throw new Error(`no entity ${entityId}`);
      write(entityId, state, null);
    },
    stateOf: (entityId) => states.get(entityId)?.state,
    inject: (fault) => {
      faults.push({ fault, left: fault.times ?? Number.POSITIVE_INFINITY });
    },
    clearFaults: () => {
      faults = [];
    },
    stop: async () => {
      lifetime.abort();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => { resolve(); }));
    },
  };
}

/** A number as Python's str(float) writes it, as Home Assistant's input_number states are: 42 → "42.0". */
function pythonFloat(value: number): string {
  return Number.isInteger(value) ? `${value}.0` : String(value);
}
