// PowerSwitch over the local RPC of Shelly Gen2+ devices (Plus, Pro, Gen3, Gen4): Switch.Set to switch,
// Switch.GetStatus to read `output` and `apower`
// (https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Switch), Shelly.GetDeviceInfo for doctor
// (https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Shelly#shellygetdeviceinfo).
import { isPlugpoolError, PlugpoolError } from "../../domain/errors.ts";
import type { PlugReading } from "../../domain/model.ts";
import type { CallOptions, CutGuard } from "../../domain/ports.ts";
import type { Secret } from "../secret.ts";
import { createShellyRpc, ShellyFailure, type RpcTarget, type ShellyRpc } from "./shelly-rpc.ts";
import { askGuard, CutRefused, pause } from "../cut-guard.ts";

/** One switch of one Shelly device, as its config section names it. */
export interface ShellyAddress {
  /** Base URL of the device, normalised (no trailing slash). */
  readonly url: string;
  /** The physical device (host and port): the key of its queue. */
  readonly device: string;
  /** The Switch component's id (0 for the first output). */
  readonly switchId: number;
  /** Report `apower` as the machine's draw. */
  readonly measure: boolean;
  /** User "admin"'s password, used only once the device asks for credentials. */
  readonly password?: Secret;
  /** The file the password was read from, when the section named one (never the value). */
  readonly passwordFile?: string;
}

/** What `doctor` prints about one Shelly switch. */
export interface ShellyProbe {
  readonly state: "on" | "off";
  readonly watts?: number;
  /** Why the draw could not be read, when `measure` is set. */
  readonly sensorError?: string;
  /** From Shelly.GetDeviceInfo, when it answered with them. */
  readonly gen?: number;
  readonly model?: string;
  readonly firmware?: string;
  /** Whether the device protects its RPC with a password (its `auth_en`, else whether it asked). */
  readonly auth: "on" | "off";
}

export interface ShellyPowerSwitch {
  read(address: ShellyAddress, options?: CallOptions): Promise<PlugReading>;
  turnOn(address: ShellyAddress, options?: CallOptions): Promise<PlugReading>;
  turnOff(address: ShellyAddress, mayCut: CutGuard, options?: CallOptions): Promise<PlugReading>;
  probe(address: ShellyAddress, options?: CallOptions): Promise<ShellyProbe>;
}

// After Switch.Set the output is read back this often until it shows the state asked for.
const CONFIRM_POLL_MS = 100;

/** The reason of every deadline's abort: made once, since a device that never answers is no exception. */
const TIMED_OUT: Error = new DOMException("the Shelly call timed out", "TimeoutError");

interface Call {
  readonly signal: AbortSignal;
  readonly deadline: AbortSignal;
  readonly callerSignal: AbortSignal | undefined;
  readonly target: RpcTarget;
  /** A Switch.Set was handed to the transport and not refused: from here on its outcome may be unknown. */
  sent: boolean;
}

const NETWORK: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "host unreachable",
  ETIMEDOUT: "connection timed out",
  ECONNRESET: "connection dropped",
  EPIPE: "connection dropped",
};
// Failures that prove the request never left: no connection was made.
const NEVER_CONNECTED: ReadonlySet<string> = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN"]);

const identifier = (text: unknown): string | undefined => (typeof text === "string" && /^[A-Za-z_][A-Za-z0-9_]{0,63}$/u.test(text) ? text : undefined);

function codeOf(error: unknown): string | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = identifier((e as { code?: unknown }).code);
    if (code !== undefined) return code;
  }
  return undefined;
}

/** Code and detail of what ended a call, in plugpool's words; the cause keeps only an error's name and code. */
function describe(error: unknown, call: Call): { code: ShellyFailure["code"]; detail: string; cause?: Error } {
  if (call.callerSignal?.aborted === true) return { code: "plug-unreachable", detail: "aborted" };
  if (error instanceof ShellyFailure) return { code: error.code, detail: error.message };
  if (call.deadline.aborted) return { code: "plug-unreachable", detail: "timed out" };
  const code = codeOf(error);
  const name = (error instanceof Error ? identifier(error.name) : undefined) ?? typeof error;
  const cause = Object.assign(new Error(code === undefined ? name : `${name} ${code}`), code === undefined ? {} : { code });
  if (code?.startsWith("HPE_") === true) return { code: "plug-bad-answer", detail: "the answer was not valid HTTP", cause };
  if (/socket hang up/iu.test(error instanceof Error ? error.message : "")) return { code: "plug-unreachable", detail: "connection dropped", cause };
  const known = code === undefined ? undefined : NETWORK[code];
  return { code: "plug-unreachable", detail: known ?? `request failed (${code ?? name})`, cause };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

export function createShellyPowerSwitch(opts: { readonly timeoutMs: number; readonly rpc?: ShellyRpc }): ShellyPowerSwitch {
  const rpc = opts.rpc ?? createShellyRpc();

  /** Runs one public call under its deadline; every failure leaves as a PlugpoolError made here alone. */
  async function bounded<T>(address: ShellyAddress, action: string, options: CallOptions | undefined, work: (call: Call) => Promise<T>): Promise<T> {
    const deadline = new AbortController();
    const callerSignal = options?.signal;
    const timer = setTimeout(() => { deadline.abort(TIMED_OUT); }, opts.timeoutMs);
    const signal = callerSignal ? AbortSignal.any([deadline.signal, callerSignal]) : deadline.signal;
    const target = { url: address.url, device: address.device, password: address.password };
    const call: Call = { signal, deadline: deadline.signal, callerSignal, target, sent: false };
    try {
      return await work(call);
    } catch (error) {
      throw failure(address, action, error, call);
    } finally {
      clearTimeout(timer);
    }
  }

  function failure(address: ShellyAddress, action: string, error: unknown, call: Call): PlugpoolError {
    const where = `${action} Shelly ${address.url} switch ${address.switchId}`;
    if (error instanceof CutRefused) {
      const guardError = isPlugpoolError(error.cause) ? { cause: new PlugpoolError(error.cause.code, error.cause.message) } : undefined;
      return new PlugpoolError("unsafe", `${where}: the switch-off was refused at the plug by the safety check`, guardError);
    }
    const { code, detail, cause } = describe(error, call);
    const timing = detail === "timed out" ? ` after ${opts.timeoutMs} ms` : "";
    if (call.sent) {
      return new PlugpoolError("plug-unconfirmed", `${where}: ${detail}${timing}; Switch.Set was sent and its outcome is unknown`, cause && { cause });
    }
    return new PlugpoolError(code, `${where}: ${detail}${timing}`, cause && { cause });
  }

  async function status(address: ShellyAddress, call: Call): Promise<{ on: boolean; watts?: number; sensorError?: string }> {
    const result = await rpc.call(call.target, { method: "Switch.GetStatus", params: { id: address.switchId } }, call.signal);
    const output = isObject(result) ? result.output : undefined;
    if (typeof output !== "boolean") throw new ShellyFailure("plug-bad-answer", "Switch.GetStatus answered without a boolean output", false);
    if (!address.measure) return { on: output };
    const apower = isObject(result) ? result.apower : undefined;
    if (typeof apower === "number" && Number.isFinite(apower)) return { on: output, watts: apower };
    return { on: output, sensorError: "Switch.GetStatus answered without apower (an output without a power meter?)" };
  }

  async function confirm(address: ShellyAddress, on: boolean, call: Call): Promise<PlugReading> {
    let last: boolean | undefined;
    for (;;) {
      try {
        const read = await status(address, call);
        last = read.on;
        if (read.on === on) return read.watts === undefined ? { on } : { on, watts: read.watts };
      } catch (error) {
        // A moment without an answer (a busy device, a dropped socket) is waited out until the deadline.
        if (describe(error, call).code !== "plug-unreachable") throw error;
      }
      if (!(await pause(CONFIRM_POLL_MS, call.signal))) break;
    }
    const seen = last === undefined ? "no read-back answered" : `it still reads ${last ? "on" : "off"}`;
    throw new ShellyFailure("plug-unreachable", `state not confirmed within ${opts.timeoutMs} ms (${seen})`, false);
  }

  async function command(address: ShellyAddress, on: boolean, call: Call, mayCut?: CutGuard): Promise<PlugReading> {
    const beforeSend = async (): Promise<void> => {
      call.sent = false; // sent again only after the device refused it (401)
      if (mayCut) await askGuard(mayCut, call.signal);
      call.signal.throwIfAborted();
      call.sent = true;
    };
    try {
      await rpc.call(call.target, { method: "Switch.Set", params: { id: address.switchId, on }, beforeSend }, call.signal);
    } catch (error) {
      const code = codeOf(error);
      if ((error instanceof ShellyFailure && error.refused) || (code !== undefined && NEVER_CONNECTED.has(code))) call.sent = false;
      throw error;
    }
    return confirm(address, on, call);
  }

  return {
    read: (address, options) =>
      bounded(address, "reading", options, async (call) => {
        const { on, watts } = await status(address, call);
        return watts === undefined ? { on } : { on, watts };
      }),
    turnOn: (address, options) => bounded(address, "turning on", options, (call) => command(address, true, call)),
    turnOff: (address, mayCut, options) => bounded(address, "turning off", options, (call) => command(address, false, call, mayCut)),
    probe: (address, options) =>
      bounded(address, "probing", options, async (call) => {
        const info = await rpc.call(call.target, { method: "Shelly.GetDeviceInfo", params: {} }, call.signal);
        const read = await status(address, call);
        const fields = isObject(info) ? info : {};
        const gen = typeof fields.gen === "number" && Number.isInteger(fields.gen) ? fields.gen : undefined;
        // Model and version are the device's own text: shown only when they look like Shelly's identifiers.
        const model = typeof fields.model === "string" ? fields.model : undefined;
        const firmware = typeof fields.ver === "string" ? fields.ver : undefined;
        const authEn = typeof fields.auth_en === "boolean" ? fields.auth_en : undefined;
        const safe = (text: string | undefined): text is string => text !== undefined && /^[A-Za-z0-9._+-]{1,40}$/u.test(text);
        return {
          state: read.on ? "on" : "off",
          ...(read.watts === undefined ? {} : { watts: read.watts }),
          ...(read.sensorError === undefined ? {} : { sensorError: read.sensorError }),
          ...(gen === undefined ? {} : { gen }),
          ...(safe(model) ? { model } : {}),
          ...(safe(firmware) ? { firmware } : {}),
          auth: (authEn ?? rpc.authAsked(address.device)) ? "on" : "off",
        };
      }),
  };
}
