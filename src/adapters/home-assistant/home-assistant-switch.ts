// The PowerSwitch rules over Home Assistant's REST API (https://developers.home-assistant.io/docs/api/rest/):
// read a switch entity's state, call switch.turn_on/turn_off, read it back until it shows the result.
import type { PlugReading } from "../../domain/model.ts";
import type { CallOptions, CutGuard } from "../../domain/ports.ts";
import { mediaType, parseObject, sizeOf } from "../http-device/answer.ts";
import { createBoundedCall, readyToSend, type DeviceCall } from "../http-device/device-call.ts";
import { describeFailure, neverConnected, PlugFailure } from "../http-device/device-failure.ts";
import { createDeviceQueue } from "../http-device/device-queue.ts";
import { createHttpClient, describeOrigin, resendDroppedGet, sendRequest } from "../http-device/http-client.ts";
import type { BackendProbe, BackendSwitch } from "../power-backend.ts";
import type { HomeAssistantEntity } from "./entity.ts";
import { pause } from "../cut-guard.ts";

/**
 * A state answer is about 400 bytes, a service call's list of changed states a few of those; GET /api/config,
 * read by `probe` only, lists every loaded integration, and is the largest answer taken.
 */
export const MAX_ANSWER_BYTES = 256 * 1024;

// A few connections per instance: calls are serialised per entity, and one instance serves every machine's.
const CONNECTIONS = 4;

// After a service call the entity is read back this often until it shows the result. Home Assistant answers a
// service call once the call is done, so a helper or a local switch shows it at the first read; a switch of a
// radio device shows it when the device reports back.
const CONFIRM_POLL_MS = 100;

// Statuses with which Home Assistant says it did not carry a call out: a bad request or unknown service (400),
// the token (401), permissions (403), a wrong path (404, 405). After any other answer, or none, a service call
// sent may have been carried out: the API shields a running call from the connection's loss
// (https://github.com/home-assistant/core/blob/2025.4.4/homeassistant/components/api/__init__.py).
const REFUSALS: ReadonlySet<number> = new Set([400, 401, 403, 404, 405]);

/** A call to one entity; its target is the entity's queue key. */
type Call = DeviceCall<string>;

export interface HomeAssistantSwitchOptions {
  /** Bound on each call, including its wait behind other calls to the same entity. */
  readonly timeoutMs: number;
}

/** What plugpool takes of an answer: its status, and its body for the adapter alone. */
interface HubAnswer {
  readonly status: number;
  readonly body: string;
  /** The declared media type when it looks like one, else "". */
  readonly contentType: string;
  readonly bytes: number;
}

export function createHomeAssistantSwitch(opts: HomeAssistantSwitchOptions): BackendSwitch<HomeAssistantEntity> {
  const reads = createHttpClient();
  // A command's requests (its read first, the service call, the read-backs) take connections of their own: with
  // the pool's connections all busy with reads (a Refresh reads every entity at once), a switch-off would wait for
  // one after the safety check said yes.
  const commandClient = createHttpClient({ apart: true });
  /** The calls that switch. */
  const commands = new WeakSet<Call>();
  // One call at a time per entity: a read-back and the next command of the same machine never cross. The
  // instance itself serves many requests at once.
  const queue = createDeviceQueue();

  const calls = createBoundedCall<HomeAssistantEntity, string>({
    timeoutMs: opts.timeoutMs,
    target: (address) => `${address.instance} ${address.entity}`,
    where: (address, action) => `${action} Home Assistant ${address.url} entity ${address.entity}`,
    unsafe: "the switch-off was refused by the safety check; nothing was sent",
    command: "the service call",
  });

  /** One call with the entity's slot held throughout. */
  function bounded<T>(address: HomeAssistantEntity, action: string, options: CallOptions | undefined, work: (call: Call) => Promise<T>): Promise<T> {
    return calls(address, action, options, (call) => queue.run(call.target, call.signal, () => work(call)));
  }

  async function send(address: HomeAssistantEntity, call: Call, method: "GET" | "POST", path: string, json?: unknown): Promise<HubAnswer> {
    const url = new URL(path, address.url);
    describeOrigin(url, { maxBytes: MAX_ANSWER_BYTES, connections: CONNECTIONS });
    const command = commands.has(call);
    const headers = { authorization: `Bearer ${address.token.reveal()}`, accept: "application/json", ...(command && { connection: "close" }) };
    const request = { url, method, headers, json, signal: call.signal, what: `${method} ${path}` };
    const answer = await resendDroppedGet(method, call.signal, () => sendRequest(command ? commandClient : reads, request));
    return { status: answer.status, body: answer.text, contentType: mediaType(answer.headers.get("content-type")), bytes: answer.bytes };
  }

  /** The state object of an entity; throws for any answer but 200 with one. */
  async function readState(address: HomeAssistantEntity, entity: string, call: Call): Promise<Record<string, unknown>> {
    const path = `/api/states/${entity}`;
    const answer = await send(address, call, "GET", path);
    if (answer.status !== 200) throw statusFailure(answer, "GET", path);
    const state = parseObject(answer.body);
    if (state?.entity_id !== entity || typeof state.state !== "string") {
      throw new PlugFailure("plug-bad-answer", `GET ${path} answered without the entity's state ${sizeOf(answer)}`);
    }
    return state;
  }

  /** on or off; an entity Home Assistant cannot tell the state of is a failed read, never off. */
  async function readSwitch(address: HomeAssistantEntity, call: Call): Promise<boolean> {
    const { state, attributes } = await readState(address, address.entity, call);
    // An assumed state is what Home Assistant last asked of the device, not what the device reports (an optimistic
    // template switch, a radio switch that never answers; `assumed_state` in
    // https://developers.home-assistant.io/docs/core/entity/#generic-properties): its "off" says nothing of the
    // machine's power, and plugpool would trust it over a Ready Node.
    if ((attributes as { assumed_state?: unknown } | undefined)?.assumed_state === true) {
      throw new PlugFailure("plug-bad-answer", "the entity's state is only assumed in Home Assistant (assumed_state): it cannot tell whether the machine has power; use a switch that reports its relay");
    }
    if (state === "on") return true;
    if (state === "off") return false;
    const told = state === "unavailable" || state === "unknown" ? state : "neither on nor off";
    throw new PlugFailure("plug-unreachable", `the entity's state is ${told} in Home Assistant`);
  }

  async function readWatts(address: HomeAssistantEntity, sensor: string, call: Call): Promise<number> {
    const { state, attributes } = await readState(address, sensor, call);
    const unit = (attributes as { unit_of_measurement?: unknown } | undefined)?.unit_of_measurement;
    const factor = unit === "W" ? 1 : unit === "kW" ? 1000 : undefined;
    if (factor === undefined) throw new PlugFailure("plug-bad-answer", "its unit_of_measurement is not W (or kW)");
    const value = typeof state === "string" && /^-?\d+(\.\d+)?(e[+-]?\d+)?$/iu.test(state) ? Number(state) * factor : Number.NaN;
    if (!Number.isFinite(value)) {
      const told = state === "unavailable" || state === "unknown" ? state : "not a number";
      throw new PlugFailure("plug-bad-answer", `its state is ${told}`);
    }
    return value;
  }

  /** The switch's state plus the sensor's watts, or the sensor's failure (which never fails the read). */
  async function readAll(address: HomeAssistantEntity, call: Call): Promise<{ on: boolean; watts?: number; sensorError?: string }> {
    const on = await readSwitch(address, call);
    if (address.powerSensor === undefined) return { on };
    try {
      return { on, watts: await readWatts(address, address.powerSensor, call) };
    } catch (error) {
      if (call.signal.aborted) throw error;
      return { on, sensorError: `sensor ${address.powerSensor}: ${describeFailure(error, call).detail}` };
    }
  }

  /**
   * Reads the entity, and when it is not yet as asked calls `switch.turn_on` or `switch.turn_off`. `mayCut`, when
   * given, is asked right before the call is sent, with the entity's slot held. The device check of the switch
   * options is never asked: an entity id is the entity's address and its identity at once, and Home Assistant
   * itself keeps it bound to the device it names (a replaced plug gets a new entity, or the old id only once
   * someone gives it to the new one).
   */
  async function command(address: HomeAssistantEntity, on: boolean, call: Call, mayCut?: CutGuard): Promise<PlugReading> {
    commands.add(call);
    if ((await readSwitch(address, call)) === on) return { on };
    await readyToSend(call, "address is identity", mayCut);
    const path = `/api/services/switch/${on ? "turn_on" : "turn_off"}`;
    let answer: HubAnswer;
    try {
      answer = await send(address, call, "POST", path, { entity_id: address.entity });
    } catch (error) {
      if (neverConnected(error)) call.commandSent = false;
      throw error;
    }
    if (answer.status !== 200) {
      if (REFUSALS.has(answer.status)) call.commandSent = false;
      throw statusFailure(answer, "POST", path);
    }
    return confirm(address, on, call);
  }

  async function confirm(address: HomeAssistantEntity, on: boolean, call: Call): Promise<PlugReading> {
    let last = "no read-back succeeded";
    for (;;) {
      try {
        const now = await readSwitch(address, call);
        if (now === on) return { on };
        last = `it still reads ${now ? "on" : "off"}`;
      } catch (error) {
        // Unreachable moments (the device reporting unavailable, a dropped connection) are waited out until
        // the deadline; the token refused, the entity gone or a bad answer end the wait.
        const seen = describeFailure(error, call);
        if (seen.code !== "plug-unreachable") throw new PlugFailure("plug-unconfirmed", `state not confirmed (reading it back: ${seen.detail})`);
        if (!call.signal.aborted) last = seen.detail;
      }
      if (!(await pause(CONFIRM_POLL_MS, call.signal))) break;
    }
    throw new PlugFailure("plug-unconfirmed", `state not confirmed within ${opts.timeoutMs} ms (${last})`);
  }

  /** Home Assistant's version from GET /api/config, when it answers one that looks like a version. */
  async function version(address: HomeAssistantEntity, call: Call): Promise<string | undefined> {
    try {
      const answer = await send(address, call, "GET", "/api/config");
      const found = answer.status === 200 ? parseObject(answer.body)?.version : undefined;
      return typeof found === "string" && /^\d{4}\.\d{1,2}\.\d{1,3}(?:[a-z]{1,5}\d{0,3})?$/u.test(found) ? found : undefined;
    } catch (error) {
      if (call.signal.aborted) throw error;
      return undefined;
    }
  }

  return {
    // A read's device check, like a command's, is never asked: the entity id is the identity (see `command`).
    read: (address, options) =>
      bounded(address, "reading", options, async (call) => {
        const { on, watts } = await readAll(address, call);
        return watts === undefined ? { on } : { on, watts };
      }),
    turnOn: (address, options) => bounded(address, "turning on", options, (call) => command(address, true, call)),
    turnOff: (address, mayCut, options) => bounded(address, "turning off", options, (call) => command(address, false, call, mayCut)),
    probe: (address, options) =>
      bounded(address, "probing", options, async (call): Promise<BackendProbe> => {
        const { on, watts, sensorError } = await readAll(address, call);
        const release = await version(address, call);
        return {
          state: on ? "on" : "off",
          detail: `Home Assistant ${release ?? "(version not told)"}, switch.turn_on/turn_off`,
          ...(watts === undefined ? {} : { watts }),
          ...(sensorError === undefined ? {} : { sensorError }),
        };
      }),
  };
}

/** A status that is not 200, as a failure: what it means, never what the answer said. */
function statusFailure(answer: HubAnswer, method: string, path: string): PlugFailure {
  const refused = REFUSALS.has(answer.status);
  const what = `${method} ${path} answered HTTP ${answer.status}`;
  if (answer.status === 401 || answer.status === 403) {
    return new PlugFailure("plug-unauthorized", `${what}: the token was refused (check it and its user's rights)`, { refused });
  }
  if (answer.status === 404 && path.startsWith("/api/states/")) {
    return new PlugFailure("plug-entity-not-found", `${what}: Home Assistant has no such entity`, { refused });
  }
  // 5xx: Home Assistant or a proxy in front of it is in trouble, worth retrying later.
  return new PlugFailure(answer.status >= 500 ? "plug-unreachable" : "plug-bad-answer", `${what} ${sizeOf(answer)}`, { refused });
}
