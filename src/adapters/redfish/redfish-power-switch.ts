// PowerSwitch over Redfish (a server's BMC): PowerState of the ComputerSystem to read, its ComputerSystem.Reset
// action to switch (ResetType On, ForceOff, GracefulShutdown), as DMTF's ComputerSystem schema defines them
// (https://redfish.dmtf.org/schemas/v1/ComputerSystem.json; PowerState and ResetType:
// https://redfish.dmtf.org/schemas/v1/Resource.json). What the system is: its UUID and SerialNumber, of the same
// resource, so a read that carries a device check costs no request more.
import type { PlugReading } from "../../domain/model.ts";
import type { CallOptions, CutGuard, DeviceCheck, DeviceIdentity, ReadOptions, SwitchOptions } from "../../domain/ports.ts";
import { isObject, sizeOf } from "../http-device/answer.ts";
import { createBoundedCall, readyToRead, readyToSend, type DeviceCall } from "../http-device/device-call.ts";
import { describeFailure, PlugFailure } from "../http-device/device-failure.ts";
import { neverSent, tlsFailure } from "./bmc-failure.ts";
import { createBmcHttp, type BmcAnswer, type BmcHttp, type BmcTarget, type Send } from "./bmc-http.ts";
import type { RedfishSystem } from "./redfish-system.ts";
import { pause } from "../cut-guard.ts";

/** PowerState values of DSP8010's Resource schema. */
export type PowerState = "On" | "Off" | "PoweringOn" | "PoweringOff" | "Paused";
const POWER_STATES: ReadonlySet<string> = new Set<PowerState>(["On", "Off", "PoweringOn", "PoweringOff", "Paused"]);

/** What `doctor` prints about one system. */
export interface RedfishProbe {
  readonly state: "on" | "off";
  readonly powerState: PowerState;
  /** The service root's RedfishVersion, when it has the shape of one. */
  readonly redfishVersion?: string;
  /** The managing BMC's FirmwareVersion, when it has the shape of one. */
  readonly firmwareVersion?: string;
  /** What the system says it is: `uuid <UUID> serial "<SerialNumber>"`. */
  readonly identity: DeviceIdentity;
}

export interface RedfishPowerSwitch {
  read(system: RedfishSystem, options?: ReadOptions): Promise<PlugReading>;
  turnOn(system: RedfishSystem, options: SwitchOptions): Promise<PlugReading>;
  turnOff(system: RedfishSystem, mayCut: CutGuard, options: SwitchOptions): Promise<PlugReading>;
  /**
   * Asks the BMC to have the OS shut down (Reset GracefulShutdown: an ACPI power-button press), the power staying
   * on. Resolves once the BMC accepted it, without waiting for Off: a shutdown takes the OS its own time. A system
   * already Off or PoweringOff gets nothing. `mayShutDown` is asked as `turnOff` asks `mayCut`: with the BMC's
   * slot held, after the state read and the device check, immediately before the Reset is sent.
   */
  shutdown(system: RedfishSystem, mayShutDown: CutGuard, options: SwitchOptions): Promise<void>;
  probe(system: RedfishSystem, options?: CallOptions): Promise<RedfishProbe>;
}

export interface RedfishPowerSwitchOptions {
  /** Bound on each public call, including its wait behind other requests to the same BMC. */
  readonly timeoutMs: number;
}

// The pause between read-backs after a Reset: a BMC takes about that long to answer a GET anyway.
const CONFIRM_POLL_MS = 500;

type Call = DeviceCall<BmcTarget>;

type ResetType = "On" | "ForceOff" | "GracefulShutdown";

/** What every call's work shares: the BMCs' HTTP client (their slots and sessions), and the bound on each call. */
interface Bmcs {
  readonly http: BmcHttp;
  readonly timeoutMs: number;
}

export function createRedfishPowerSwitch(opts: RedfishPowerSwitchOptions): RedfishPowerSwitch {
  const bmcs: Bmcs = { http: createBmcHttp(), timeoutMs: opts.timeoutMs };

  const bounded = createBoundedCall<RedfishSystem, BmcTarget>({
    timeoutMs: opts.timeoutMs,
    target: (system) => ({
      url: system.url,
      device: system.device,
      auth: system.auth,
      username: system.credentials.username,
      password: system.credentials.password,
      ...(system.ca !== undefined && { ca: system.ca.pem }),
    }),
    where: (system, action) => `${action} ${labelOf(system)}`,
    unsafe: "the power-off was refused at the BMC by the safety check",
    command: "the Reset",
    vendorFailure: tlsFailure,
  });

  return {
    read: (system, options) =>
      bounded(system, "reading", options, async (call) => ({ on: (await readAlone(bmcs, system, call, options?.device)) !== "Off" })),

    // PoweringOn counts as on, as a read says: the BMC has the power coming (and some refuse a second On).
    // Only Off counts as off: a system PoweringOff still has its power.
    turnOn: (system, options) =>
      bounded(system, "switching on", options, async (call) => {
        const poweredOn = (state: PowerState): boolean => state === "On" || state === "PoweringOn";
        const before = await reset(bmcs, system, "On", poweredOn, call, options.device);
        return before === undefined ? confirm(bmcs, system, true, poweredOn, call) : { on: true };
      }),

    turnOff: (system, mayCut, options) =>
      bounded(system, "switching off", options, async (call) => {
        const off = (state: PowerState): boolean => state === "Off";
        const before = await reset(bmcs, system, "ForceOff", off, call, options.device, mayCut);
        return before === undefined ? confirm(bmcs, system, false, off, call) : { on: false };
      }),

    shutdown: (system, mayShutDown, options) =>
      bounded(system, "shutting down", options, async (call) => {
        await reset(bmcs, system, "GracefulShutdown", (state) => state === "Off" || state === "PoweringOff", call, options.device, mayShutDown);
      }),

    probe: (system, options) => bounded(system, "probing", options, (call) => probeSystem(bmcs, system, call)),
  };
}

/** GETs a resource and returns its JSON object; any answer but 200 with one is a failure. */
async function getObject(send: Send, path: string): Promise<Record<string, unknown>> {
  const answer = await send({ method: "GET", path });
  if (answer.status !== 200) throw statusFailure("GET", path, answer);
  if (answer.json === undefined) throw new PlugFailure("plug-bad-answer", `GET ${path} answered HTTP 200 without a JSON object ${sizeOf(answer)}`);
  return answer.json;
}

async function readState(send: Send, system: RedfishSystem): Promise<{ state: PowerState; resource: Record<string, unknown> }> {
  const path = systemPath(system);
  const resource = await getObject(send, path);
  return { state: stateOf(resource, path), resource };
}

/**
 * Reads the state with the BMC's slot held for that read alone. With `device`, the system's identity, of the same
 * answer, is put to `device` first: a refusal takes no state from it.
 */
function readAlone(bmcs: Bmcs, system: RedfishSystem, call: Call, device?: DeviceCheck): Promise<PowerState> {
  if (device === undefined) return bmcs.http.slot(call.target, call.signal, async (send) => (await readState(send, system)).state);
  return bmcs.http.slot(call.target, call.signal, async (send) => {
    const path = systemPath(system);
    const resource = await getObject(send, path);
    await readyToRead(call, { identify: () => Promise.resolve(identityOf(resource, path, secretsOf(system))), check: device });
    return stateOf(resource, path);
  });
}

/**
 * In one slot of the BMC: reads the state and, unless it is already `done`, sends the Reset. Right before each
 * sending, with the slot held, the system's identity (from the resource just read, then read again before a
 * second sending) is put to `device`, then `mayCut`, when given, is asked, so nothing else reaches the BMC between
 * their yes and the request. Resolves with the state read when nothing was sent, else undefined.
 */
async function reset(
  bmcs: Bmcs,
  system: RedfishSystem,
  type: ResetType,
  done: (state: PowerState) => boolean,
  call: Call,
  device: DeviceCheck,
  mayCut?: CutGuard,
): Promise<PowerState | undefined> {
  const path = `${systemPath(system)}/Actions/ComputerSystem.Reset`;
  try {
    return await bmcs.http.slot(call.target, call.signal, async (send) => {
      const { state, resource } = await readState(send, system);
      if (done(state)) return state;
      let fresh: Record<string, unknown> | undefined = resource;
      const identify = async (): Promise<DeviceIdentity> => {
        const read = fresh ?? (await getObject(send, systemPath(system)));
        fresh = undefined;
        return identityOf(read, systemPath(system), secretsOf(system));
      };
      const beforeSend = (): Promise<void> => readyToSend(call, { identify, check: device }, mayCut);
      const answer = await send({ method: "POST", path, body: { ResetType: type }, beforeSend });
      // 200 (with a message), 202 (a task runs it) and 204 all mean the BMC took it.
      if (answer.status < 200 || answer.status > 299) throw statusFailure("POST", path, answer, ` (ResetType ${type})`);
      return undefined;
    });
  } catch (error) {
    if ((error instanceof PlugFailure && error.refused) || neverSent(error)) call.commandSent = false;
    throw error;
  }
}

/**
 * Reads the state back (each read in its own slot, so other systems of the BMC are served between) until it
 * is one that `reached` accepts.
 */
async function confirm(bmcs: Bmcs, system: RedfishSystem, on: boolean, reached: (state: PowerState) => boolean, call: Call): Promise<PlugReading> {
  let lastState: PowerState | undefined;
  let lastProblem = "";
  for (;;) {
    try {
      lastState = await readAlone(bmcs, system, call);
      if (reached(lastState)) return { on };
    } catch (error) {
      // Unreachable moments are waited out until the deadline; a 404, bad credentials or a bad answer end the wait.
      const failure = describeFailure(error, call);
      if (failure.code !== "plug-unreachable") {
        throw new PlugFailure("plug-bad-answer", `state not confirmed (reading it back: ${failure.detail})`);
      }
      if (!call.signal.aborted) lastProblem = `: ${failure.detail}`;
    }
    if (!(await pause(CONFIRM_POLL_MS, call.signal))) break;
  }
  const seen = lastState === undefined ? `no read-back succeeded${lastProblem}` : `PowerState still ${lastState}`;
  throw new PlugFailure("plug-unreachable", `state not confirmed within ${bmcs.timeoutMs} ms (${seen})`);
}

/**
 * In one slot of the BMC: the System's state and identity, the service root's RedfishVersion and its manager's
 * FirmwareVersion, each shown only when it has the shape of a version and contains none of the credentials.
 */
function probeSystem(bmcs: Bmcs, system: RedfishSystem, call: Call): Promise<RedfishProbe> {
  return bmcs.http.slot(call.target, call.signal, async (send) => {
    const { state, resource } = await readState(send, system);
    const redfishVersion = await optionalField(send, "/redfish/v1/", "RedfishVersion", REDFISH_VERSION);
    const manager = managerPath(resource);
    const firmwareVersion = manager === undefined ? undefined : await optionalField(send, manager, "FirmwareVersion", FIRMWARE_VERSION);
    const identity = identityOf(resource, systemPath(system), secretsOf(system));
    const secrets = secretsOf(system);
    const shown = (value: string | undefined): string | undefined =>
      value !== undefined && !secrets.some((s) => s !== "" && value.includes(s)) ? value : undefined;
    const redfish = shown(redfishVersion);
    const firmware = shown(firmwareVersion);
    return {
      state: state === "Off" ? "off" : "on",
      powerState: state,
      identity,
      ...(redfish !== undefined && { redfishVersion: redfish }),
      ...(firmware !== undefined && { firmwareVersion: firmware }),
    };
  });
}

// Values from the BMC shown by doctor only when they have the shape of a version: nothing else it sent is shown.
const REDFISH_VERSION = /^\d{1,3}\.\d{1,3}\.\d{1,3}$/u;
const FIRMWARE_VERSION = /^[0-9][0-9A-Za-z.\-_ ()]{0,39}$/u;

/**
 * A string field of a resource when it has `shape`; undefined when the resource or the field is not there, or the
 * BMC refused it (an account may read its systems but not its managers). The call's other failures end the probe.
 */
async function optionalField(send: Send, path: string, field: string, shape: RegExp): Promise<string | undefined> {
  let answer: BmcAnswer;
  try {
    answer = await send({ method: "GET", path });
  } catch (error) {
    if (error instanceof PlugFailure && error.refused) return undefined;
    throw error;
  }
  const value = answer.status === 200 ? answer.json?.[field] : undefined;
  return typeof value === "string" && shape.test(value) ? value : undefined;
}

/** The path of the System's first manager (Links.ManagedBy), when it is one under /redfish/v1/Managers/. */
function managerPath(resource: Record<string, unknown>): string | undefined {
  const links = resource.Links;
  const managedBy = isObject(links) ? links.ManagedBy : undefined;
  const first: unknown = Array.isArray(managedBy) ? managedBy[0] : undefined;
  const id = isObject(first) ? first["@odata.id"] : undefined;
  return typeof id === "string" && /^\/redfish\/v1\/Managers\/[A-Za-z0-9._~%-]{1,128}$/u.test(id) ? id : undefined;
}

/** The PowerState of a System resource; a state the BMC cannot tell (none, null, or one this client does not know) is a failed read, never "off". */
function stateOf(resource: Record<string, unknown>, path: string): PowerState {
  const state = resource.PowerState;
  if (typeof state !== "string" || !POWER_STATES.has(state)) {
    throw new PlugFailure("plug-bad-answer", `GET ${path} answered without a PowerState plugpool knows`);
  }
  return state as PowerState;
}

// A UUID as the schema has it (8-4-4-4-12 hex digits), or an Id-like token as some emulators give; a serial number
// is free text, taken when it is short and printable.
const UUID = /^[A-Za-z0-9._-]{1,64}$/u;
const SERIAL = /^[\x20-\x7e]{1,64}$/u;

/**
 * `uuid <UUID> serial "<SerialNumber>"` (either part alone when the system has only that one) of a System
 * resource. Throws `plug-bad-answer` when it has neither, or a serial number that contains one of `secrets`.
 */
function identityOf(resource: Record<string, unknown>, path: string, secrets: readonly string[]): DeviceIdentity {
  const { UUID: uuid, SerialNumber: serial } = resource;
  const parts = [
    typeof uuid === "string" && UUID.test(uuid) ? `uuid ${uuid}` : undefined,
    typeof serial === "string" && SERIAL.test(serial.trim()) && !secrets.some((s) => s !== "" && serial.includes(s)) ? `serial ${JSON.stringify(serial.trim())}` : undefined,
  ].filter((part) => part !== undefined);
  if (parts.length === 0) throw new PlugFailure("plug-bad-answer", `GET ${path} answered without a UUID or SerialNumber plugpool can use`);
  return { id: parts.join(" ") };
}

function secretsOf(system: RedfishSystem): string[] {
  return [system.credentials.username.reveal(), system.credentials.password.reveal()];
}

function systemPath(system: RedfishSystem): string {
  return `/redfish/v1/Systems/${encodeURIComponent(system.system)}`;
}

/** What a status other than the expected one means, in plugpool's words. */
function statusFailure(method: string, path: string, answer: BmcAnswer, suffix = ""): PlugFailure {
  const what = `${method} ${path}${suffix} answered HTTP ${answer.status}`;
  const { status } = answer;
  if (status === 404) return new PlugFailure("plug-entity-not-found", `not found (${what})`, { refused: true });
  if (status === 403) return new PlugFailure("plug-unauthorized", `the account may not do this (${what})`, { refused: true });
  if (status >= 300 && status <= 399) {
    return new PlugFailure("plug-bad-answer", `${what}, a redirect, which is not followed: give the system's Id as /redfish/v1/Systems lists it`, { refused: true });
  }
  // 5xx: the BMC is in trouble, worth retrying later; a 4xx is an answer that it did not do it.
  if (status >= 500) return new PlugFailure("plug-unreachable", `${what} ${sizeOf(answer)}`);
  return new PlugFailure("plug-bad-answer", `${what} ${sizeOf(answer)}`, { refused: status >= 400 });
}

/** "BMC https://10.0.0.5 system "1"": what and where, for messages. */
export function labelOf(system: RedfishSystem): string {
  return `BMC ${system.url} system ${JSON.stringify(system.system)}`;
}
