// PowerSwitch over the local RPC of Shelly Gen2+ devices (Plus, Pro, Gen3, Gen4): Switch.Set to switch,
// Switch.GetStatus to read `output` and `apower`
// (https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Switch), Shelly.GetDeviceInfo for what the
// device is, its `id` and `mac`, before every switch command and every read that carries a device check, and for
// doctor (https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Shelly#shellygetdeviceinfo).
import type { PlugReading } from "../../domain/model.ts";
import type { CallOptions, CutGuard, DeviceCheck, DeviceIdentity, ReadOptions, SwitchOptions } from "../../domain/ports.ts";
import { isObject } from "../http-device/answer.ts";
import { createBoundedCall, readyToRead, readyToSend, type DeviceCall, type DeviceQuestion } from "../http-device/device-call.ts";
import { describeFailure, neverConnected, PlugFailure, type VendorFailure } from "../http-device/device-failure.ts";
import type { Secret } from "../secret.ts";
import { createShellyRpc, type InSlot, type RpcTarget, type ShellyRpc } from "./shelly-rpc.ts";
import { pause } from "../cut-guard.ts";

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
  /** What the device says it is: `shelly <id> mac <MAC>`. */
  readonly identity: DeviceIdentity;
}

export interface ShellyPowerSwitch {
  read(address: ShellyAddress, options?: ReadOptions): Promise<PlugReading>;
  turnOn(address: ShellyAddress, options: SwitchOptions): Promise<PlugReading>;
  turnOff(address: ShellyAddress, mayCut: CutGuard, options: SwitchOptions): Promise<PlugReading>;
  probe(address: ShellyAddress, options?: CallOptions): Promise<ShellyProbe>;
}

// After Switch.Set the output is read back this often until it shows the state asked for.
const CONFIRM_POLL_MS = 100;

type Call = DeviceCall<RpcTarget>;

/** An answer Node's HTTP parser refused: the device (or what answers in its place) does not speak HTTP. */
const httpParseFailure: VendorFailure = (code) => (code.startsWith("HPE_") ? { code: "plug-bad-answer", detail: "the answer was not valid HTTP" } : undefined);

/** What every call's work shares: the devices' RPC client (their queues and digest sessions), and the bound on each call. */
interface Shellies {
  readonly rpc: ShellyRpc;
  readonly timeoutMs: number;
}

export function createShellyPowerSwitch(opts: { readonly timeoutMs: number; readonly rpc?: ShellyRpc }): ShellyPowerSwitch {
  const shellies: Shellies = { rpc: opts.rpc ?? createShellyRpc(), timeoutMs: opts.timeoutMs };

  const bounded = createBoundedCall<ShellyAddress, RpcTarget>({
    timeoutMs: opts.timeoutMs,
    target: (address) => ({ url: address.url, device: address.device, password: address.password }),
    where: (address, action) => `${action} Shelly ${address.url} switch ${address.switchId}`,
    unsafe: "the switch-off was refused at the plug by the safety check",
    command: "Switch.Set",
    vendorFailure: httpParseFailure,
  });

  return {
    read: (address, options) =>
      bounded(address, "reading", options, async (call) => {
        const { on, watts } = await status(shellies, address, call, options?.device);
        return watts === undefined ? { on } : { on, watts };
      }),
    turnOn: (address, options) => bounded(address, "turning on", options, (call) => command(shellies, address, true, call, options.device)),
    turnOff: (address, mayCut, options) =>
      bounded(address, "turning off", options, (call) => command(shellies, address, false, call, options.device, mayCut)),
    probe: (address, options) => bounded(address, "probing", options, (call) => probeSwitch(shellies, address, call)),
  };
}

/**
 * Switch.GetStatus; with `device`, first in the same slot, the device is asked what it is (Shelly.GetDeviceInfo)
 * and `device` with its answer: once, as the slot is held until the state is read (a 401 makes a second sending).
 */
async function status(
  shellies: Shellies,
  address: ShellyAddress,
  call: Call,
  device?: DeviceCheck,
): Promise<{ on: boolean; watts?: number; sensorError?: string }> {
  const request = { method: "Switch.GetStatus", params: { id: address.switchId } };
  let asked: Promise<void> | undefined;
  const checked = device === undefined ? request : { ...request, beforeSend: (inSlot: InSlot) => (asked ??= readyToRead(call, question(inSlot, device))) };
  const result = await shellies.rpc.call(call.target, checked, call.signal);
  const output = isObject(result) ? result.output : undefined;
  if (typeof output !== "boolean") throw new PlugFailure("plug-bad-answer", "Switch.GetStatus answered without a boolean output");
  if (!address.measure) return { on: output };
  const apower = isObject(result) ? result.apower : undefined;
  if (typeof apower === "number" && Number.isFinite(apower)) return { on: output, watts: apower };
  return { on: output, sensorError: "Switch.GetStatus answered without apower (an output without a power meter?)" };
}

async function confirm(shellies: Shellies, address: ShellyAddress, on: boolean, call: Call): Promise<PlugReading> {
  let last: boolean | undefined;
  for (;;) {
    try {
      const read = await status(shellies, address, call);
      last = read.on;
      if (read.on === on) return read.watts === undefined ? { on } : { on, watts: read.watts };
    } catch (error) {
      // A moment without an answer (a busy device, a dropped socket) is waited out until the deadline.
      if (describeFailure(error, call).code !== "plug-unreachable") throw error;
    }
    if (!(await pause(CONFIRM_POLL_MS, call.signal))) break;
  }
  const seen = last === undefined ? "no read-back answered" : `it still reads ${last ? "on" : "off"}`;
  throw new PlugFailure("plug-unreachable", `state not confirmed within ${shellies.timeoutMs} ms (${seen})`);
}

/**
 * Switch.Set in one slot of the device: right before each sending, with the slot held, the device is asked what
 * it is (Shelly.GetDeviceInfo) and `device` with its answer, then `mayCut`, when given.
 */
async function command(
  shellies: Shellies,
  address: ShellyAddress,
  on: boolean,
  call: Call,
  device: DeviceCheck,
  mayCut?: CutGuard,
): Promise<PlugReading> {
  const beforeSend = (inSlot: InSlot): Promise<void> => readyToSend(call, question(inSlot, device), mayCut);
  try {
    await shellies.rpc.call(call.target, { method: "Switch.Set", params: { id: address.switchId, on }, beforeSend }, call.signal);
  } catch (error) {
    if ((error instanceof PlugFailure && error.refused) || neverConnected(error)) call.commandSent = false;
    throw error;
  }
  return confirm(shellies, address, on, call);
}

/** What the device says it is (Shelly.GetDeviceInfo), then the switch's state and draw. */
async function probeSwitch(shellies: Shellies, address: ShellyAddress, call: Call): Promise<ShellyProbe> {
  const info = await shellies.rpc.call(call.target, DEVICE_INFO, call.signal);
  const identity = identityOf(info);
  const read = await status(shellies, address, call);
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
    auth: (authEn ?? shellies.rpc.authAsked(address.device)) ? "on" : "off",
    identity,
  };
}

const DEVICE_INFO = { method: "Shelly.GetDeviceInfo", params: {} } as const;

/** The device asked what it is (Shelly.GetDeviceInfo) through `inSlot`, and `check` asked with its answer. */
function question(inSlot: InSlot, check: DeviceCheck): DeviceQuestion {
  return { identify: async () => identityOf(await inSlot(DEVICE_INFO)), check };
}

/**
 * `shelly <id> mac <MAC>` from a Shelly.GetDeviceInfo result: its `id` (model and MAC, e.g. shellyplusplugs-
 * a0dd6c123456) and `mac`, both of the shapes Shelly gives them; throws `plug-bad-answer` without them.
 */
function identityOf(info: unknown): DeviceIdentity {
  const id = isObject(info) ? info.id : undefined;
  const mac = isObject(info) ? info.mac : undefined;
  if (typeof id !== "string" || !/^[A-Za-z0-9-]{1,64}$/u.test(id) || typeof mac !== "string" || !/^[0-9A-Fa-f]{12}$/u.test(mac)) {
    throw new PlugFailure("plug-bad-answer", "Shelly.GetDeviceInfo answered without the device's id and mac");
  }
  return { id: `shelly ${id} mac ${mac.toUpperCase()}` };
}
