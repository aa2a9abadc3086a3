// PowerSwitch over the ESPHome web_server REST API (https://esphome.io/web-api/).
import type { PlugReading } from "../../domain/model.ts";
import type { CallOptions, CutGuard, DeviceCheck, DeviceIdentity } from "../../domain/ports.ts";
import { parseObject, sizeOf } from "../http-device/answer.ts";
import { createBoundedCall, readyToRead, readyToSend, type DeviceCall, type DeviceQuestion } from "../http-device/device-call.ts";
import { describeFailure, neverConnected, PlugFailure } from "../http-device/device-failure.ts";
import type { BackendSwitch } from "../power-backend.ts";
import type { EntityDomain, UrlStyle } from "./entity-path.ts";
import { createEntityRequests, type EntityRequests } from "./entity-request.ts";
import type { EsphomePlug } from "./plug.ts";
import { createPlugHttp, type AuthScheme, type Credentials, type PlugHttp, type PlugTarget, type Send } from "./plug-http.ts";
import { pause } from "../cut-guard.ts";
import { identify } from "./device-events.ts";

/** What `doctor` prints about one plug. */
export interface PlugProbe {
  readonly state: "on" | "off";
  /** The URL spelling the device answered to: entity name (2026.1+) or object_id (older firmware). */
  readonly urlStyle: UrlStyle;
  /** The scheme the device asked for: "none" when it never challenged. */
  readonly auth: AuthScheme;
  readonly watts?: number;
  /** Why the power sensor could not be read, when one is configured and failed. */
  readonly sensorError?: string;
  /** What the device says it is (the title of its /events ping). */
  readonly identity: DeviceIdentity;
}

export interface EsphomePowerSwitchOptions {
  /** Bound on each public call, including its wait behind other requests to the same device. */
  readonly timeoutMs: number;
  /** The credentials for a plug's device, if it has any; sent only once the device asks for them. Never logged. */
  readonly credentialsFor?: (plug: EsphomePlug) => Credentials | undefined;
  readonly fetch?: typeof fetch;
}

/** The ESPHome side of a power backend's switch: the PowerSwitch rules, for ESPHome plugs. */
export interface EsphomePowerSwitch extends Omit<BackendSwitch<EsphomePlug>, "probe"> {
  /** Reads the relay (and sensor) and reports how the device was reached; throws as `read` does. */
  probe(plug: EsphomePlug, options?: CallOptions): Promise<PlugProbe>;
}

// After a command returns 200 (queued, not done) the relay is read back this often until it matches.
const CONFIRM_POLL_MS = 100;

type Call = DeviceCall<PlugTarget>;

interface RelayReading {
  readonly on: boolean;
  /** The URL spelling the relay answered to. */
  readonly style: UrlStyle;
}

/** The relay and, for a plug with a power sensor, its watts or why they could not be read. */
interface FullReading extends RelayReading {
  readonly watts?: number;
  readonly sensorError?: string;
}

/** What every call of one switch shares: the devices' slots and auth, and the spellings their entities answered to. */
interface SwitchContext {
  readonly http: PlugHttp;
  readonly entities: EntityRequests;
  /** The bound on each call, as told when a command is not confirmed within it. */
  readonly timeoutMs: number;
}

export function createEsphomePowerSwitch(opts: EsphomePowerSwitchOptions): EsphomePowerSwitch {
  const ctx: SwitchContext = { http: createPlugHttp(opts), entities: createEntityRequests(), timeoutMs: opts.timeoutMs };
  const bounded = createBoundedCall<EsphomePlug, PlugTarget>({
    timeoutMs: opts.timeoutMs,
    target: (plug) => ({ url: plug.url, device: plug.device, credentials: opts.credentialsFor?.(plug) }),
    where: (plug, action) => `${action} plug ${safeUrl(plug.url)} switch ${JSON.stringify(plug.switch)}`,
    unsafe: "the switch-off was refused at the plug by the safety check",
    command: "the command",
  });
  return {
    read: (plug, options) => bounded(plug, "reading", options, (call) => readAll(ctx, plug, call, options?.device).then(plugReading)),
    turnOn: (plug, options) => bounded(plug, "turning on", options, (call) => command(ctx, plug, true, call, options.device)),
    turnOff: (plug, mayCut, options) => bounded(plug, "turning off", options, (call) => command(ctx, plug, false, call, options.device, mayCut)),
    probe: (plug, options) => bounded(plug, "probing", options, (call) => probe(ctx, plug, call)),
  };
}

/** The device asked what it is through `send`, and `check` asked with its answer. */
function question(send: Send, call: Call, check: DeviceCheck): DeviceQuestion {
  return { identify: () => identify(send, call.target.credentials), check };
}

/**
 * Reads one entity with the device's slot held for that read alone; with `device`, the device is first asked
 * what it is and `device` with its answer, in that slot.
 */
function readEntity(ctx: SwitchContext, plug: EsphomePlug, domain: EntityDomain, name: string, call: Call, device?: DeviceCheck) {
  const { entities } = ctx;
  return ctx.http.slot(call.target, call.signal, (send) =>
    device === undefined
      ? entities.request(send, plug, domain, name)
      : readyToRead(call, question(send, call, device)).then(() => entities.request(send, plug, domain, name)),
  );
}

// Reads are chained, not awaited, where nothing needs a loop or a catch (see ../http-device/started.ts).
function readRelay(ctx: SwitchContext, plug: EsphomePlug, call: Call, device?: DeviceCheck): Promise<RelayReading> {
  return readEntity(ctx, plug, "switch", plug.switch, call, device).then(({ answer, path, style }) => {
    const data = parseObject(answer.body);
    const on = typeof data?.value === "boolean" ? data.value : data?.state === "ON" ? true : data?.state === "OFF" ? false : undefined;
    if (on === undefined) throw new PlugFailure("plug-bad-answer", `GET ${path} answered without a switch state ${sizeOf(answer)}`);
    return { on, style };
  });
}

async function readWatts(ctx: SwitchContext, plug: EsphomePlug, sensor: string, call: Call): Promise<number> {
  const { answer, path } = await readEntity(ctx, plug, "sensor", sensor, call);
  const value = parseObject(answer.body)?.value;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new PlugFailure("plug-bad-answer", `GET ${path} answered without a value ${sizeOf(answer)}`);
  }
  return value;
}

/**
 * The relay reading plus the sensor's watts, or the sensor's failure (which never fails the read). `device`, when
 * given, is asked in the relay's slot; the sensor is read in a slot of its own.
 */
function readAll(ctx: SwitchContext, plug: EsphomePlug, call: Call, device?: DeviceCheck): Promise<FullReading> {
  const sensor = plug.powerSensor;
  const relay = readRelay(ctx, plug, call, device);
  if (sensor === undefined) return relay;
  return relay.then(async ({ on, style }) => {
    try {
      return { on, style, watts: await readWatts(ctx, plug, sensor, call) };
    } catch (error) {
      if (call.callerSignal?.aborted === true) throw error;
      return { on, style, sensorError: `sensor ${JSON.stringify(sensor)}: ${describeFailure(error, call).detail}` };
    }
  });
}

/** What `read` returns of a full reading. */
function plugReading({ on, watts }: FullReading): PlugReading {
  return watts === undefined ? { on } : { on, watts };
}

async function probe(ctx: SwitchContext, plug: EsphomePlug, call: Call): Promise<PlugProbe> {
  const { http } = ctx;
  const { on, style, watts, sensorError } = await readAll(ctx, plug, call);
  const identity = await http.slot(call.target, call.signal, (send) => identify(send, call.target.credentials));
  return {
    state: on ? "on" : "off",
    urlStyle: style,
    auth: http.authScheme(plug.device),
    identity,
    ...(watts === undefined ? {} : { watts }),
    ...(sensorError === undefined ? {} : { sensorError }),
  };
}

async function command(ctx: SwitchContext, plug: EsphomePlug, on: boolean, call: Call, device: DeviceCheck, mayCut?: CutGuard): Promise<PlugReading> {
  await sendCommand(ctx, plug, on, call, device, mayCut);
  return confirm(ctx, plug, on, call);
}

/**
 * Sends the command in one slot of the device: right before each sending, with the slot held, the device is
 * asked what it is and `device` is asked with its answer, then `mayCut`, when given, so nothing else reaches the
 * device between their yes and the request.
 */
async function sendCommand(ctx: SwitchContext, plug: EsphomePlug, on: boolean, call: Call, device: DeviceCheck, mayCut?: CutGuard): Promise<void> {
  try {
    await ctx.http.slot(call.target, call.signal, (sender) => {
      const confirmation = question(sender, call, device);
      const beforeSend = (): Promise<void> => readyToSend(call, confirmation, mayCut);
      return ctx.entities.request(sender, plug, "switch", plug.switch, on ? "turn_on" : "turn_off", beforeSend);
    });
  } catch (error) {
    if ((error instanceof PlugFailure && error.refused) || neverConnected(error)) call.commandSent = false;
    throw error;
  }
}

/** Reads the relay back (each read in its own slot, so other relays of a strip are served between) until it shows `on`. */
async function confirm(ctx: SwitchContext, plug: EsphomePlug, on: boolean, call: Call): Promise<PlugReading> {
  let lastState: boolean | undefined;
  let lastProblem = "";
  for (;;) {
    try {
      lastState = (await readRelay(ctx, plug, call)).on;
      if (lastState === on) return { on };
    } catch (error) {
      // Unreachable moments (a reboot, a dropped socket) are waited out until the deadline; a 404,
      // bad credentials or a bad answer end the wait.
      const failure = describeFailure(error, call);
      if (failure.code !== "plug-unreachable") throw new PlugFailure("plug-unconfirmed", `state not confirmed (reading it back: ${failure.detail})`);
      if (!call.signal.aborted) lastProblem = `: ${failure.detail}`;
    }
    if (!(await pause(CONFIRM_POLL_MS, call.signal))) break;
  }
  const seen = lastState === undefined ? `no read-back succeeded${lastProblem}` : `it still reads ${lastState ? "on" : "off"}`;
  throw new PlugFailure("plug-unconfirmed", `state not confirmed within ${ctx.timeoutMs} ms (${seen})`);
}

/** The plug URL without any user:password part, for messages. */
function safeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = "";
    parsed.password = "";
    return parsed.href.replace(/\/$/u, "");
  } catch {
    return "(invalid URL)";
  }
}
