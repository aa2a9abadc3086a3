// The device behind the RPC channel: its identity (Shelly.GetDeviceInfo), its Switch components and the
// methods plugpool may call, with the results and error objects of the docs:
// https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Switch,
// https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Shelly,
// https://shelly-api-docs.shelly.cloud/gen2/General/CommonErrors.

export type Gen = 2 | 3 | 4;

export interface SwitchOptions {
  /** A power meter on this output (the PM models): GetStatus then carries apower, voltage, current… */
  readonly metered?: boolean;
  readonly output?: boolean;
  /** Watts drawn by what is plugged in, shown as `apower` while the output is on. */
  readonly draw?: number;
}

export interface Profile {
  readonly model: string;
  readonly app: string;
  /** The device id's prefix, before "-<mac>"; the id is also the Digest realm. */
  readonly idPrefix: string;
}

/** Real models of each generation: a single plug or relay, and a multi-relay device. */
export function profileOf(gen: Gen, switches: number): Profile {
  const many = switches > 1;
  switch (gen) {
    case 2:
      return many ? { model: "SPSW-104PE16EU", app: "Pro4PM", idPrefix: "shellypro4pm" } : { model: "SNPL-00112EU", app: "PlusPlugS", idPrefix: "shellyplusplugs" };
    case 3:
      return many ? { model: "S3SW-002P16EU", app: "S2PMG3", idPrefix: "shelly2pmg3" } : { model: "S3SW-001P16EU", app: "S1PMG3", idPrefix: "shelly1pmg3" };
    case 4:
      return many ? { model: "S4SW-002P16EU", app: "S2PMG4", idPrefix: "shelly2pmg4" } : { model: "S4SW-001P16EU", app: "S1PMG4", idPrefix: "shelly1pmg4" };
  }
}

/** An RPC error object; code -103 invalid argument, -105 not found, 404 no such method, 401 unauthenticated. */
export class RpcError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

export interface SwitchState {
  readonly id: number;
  readonly metered: boolean;
  output: boolean;
  draw: number;
  /** What last set the output: "init", "HTTP_in", "button"… */
  source: string;
}

export interface Device {
  readonly gen: Gen;
  readonly id: string;
  readonly switches: ReadonlyMap<number, SwitchState>;
  /** Answers one call; throws RpcError. `stuck`: Switch.Set answers but the output does not follow. */
  call(method: string, params: Record<string, unknown>, source: string, stuck: boolean): unknown;
  deviceInfo(): Record<string, unknown>;
  status(id: number): Record<string, unknown>;
}

export interface DeviceOptions {
  readonly gen: Gen;
  readonly mac: string;
  readonly authEnabled: boolean;
  readonly firmware: "1.x" | "2.x";
  readonly switches: readonly SwitchOptions[];
  readonly name?: string;
}

const FIRMWARE: Record<"1.x" | "2.x", { readonly ver: string; readonly fwId: string }> = {
  "1.x": { ver: "1.4.4", fwId: "20241011-114455/1.4.4-g6d2a586" },
  "2.x": { ver: "2.0.1", fwId: "20260310-090112/2.0.1-g3c2e1f0" },
};

function requiredId(params: Record<string, unknown>): number {
  if (!("id" in params)) throw new RpcError(-103, "Missing required 'id'");
  const id = params.id;
  if (typeof id !== "number" || !Number.isInteger(id)) throw new RpcError(-103, "Invalid argument 'id'");
  return id;
}

export function createDevice(opts: DeviceOptions): Device {
  const profile = profileOf(opts.gen, opts.switches.length);
  const id = `${profile.idPrefix}-${opts.mac.toLowerCase()}`;
  const switches = new Map<number, SwitchState>(
    opts.switches.map((s, i) => [i, { id: i, metered: s.metered ?? true, output: s.output ?? false, draw: s.draw ?? 0, source: "init" }]),
  );
  const fw = FIRMWARE[opts.firmware];

  function switchOf(params: Record<string, unknown>): SwitchState {
    const n = requiredId(params);
    const found = switches.get(n);
    if (!found) throw new RpcError(-105, `Bad id=${n}`);
    return found;
  }

  function status(n: number): Record<string, unknown> {
    const s = switches.get(n);
    if (!s) throw new RpcError(-105, `Bad id=${n}`);
    const base = { id: s.id, source: s.source, output: s.output };
    const temperature = { tC: 41.3, tF: 106.3 };
    if (!s.metered) return { ...base, temperature };
    const apower = s.output ? s.draw : 0;
    const voltage = 231.4;
    const minuteTs = Math.floor(Date.now() / 60_000) * 60;
    const aenergy = { total: 0, by_minute: [0, 0, 0], minute_ts: minuteTs };
    const current = Math.round((apower / voltage) * 1000) / 1000;
    // Gen3 and later also report the frequency and the energy returned to the grid.
    return opts.gen === 2
      ? { ...base, apower, voltage, current, aenergy, temperature }
      : { ...base, apower, voltage, freq: 50, current, aenergy, ret_aenergy: { total: 0, by_minute: [0, 0, 0], minute_ts: minuteTs }, temperature };
  }

  function set(s: SwitchState, on: boolean, source: string, stuck: boolean): { was_on: boolean } {
    const wasOn = s.output;
    if (!stuck) {
      s.output = on;
      s.source = source;
    }
    return { was_on: wasOn };
  }

  return {
    gen: opts.gen,
    id,
    switches,
    deviceInfo() {
      return {
        name: opts.name ?? null,
        id,
        mac: opts.mac.toUpperCase(),
        ...(opts.gen === 2 ? {} : { slot: 0 }),
        model: profile.model,
        gen: opts.gen,
        fw_id: fw.fwId,
        ver: fw.ver,
        app: profile.app,
        auth_en: opts.authEnabled,
        auth_domain: null,
        ...(opts.gen === 4 ? { matter: true } : {}),
      };
    },
    status,
    call(method, params, source, stuck) {
      switch (method) {
        case "Shelly.GetDeviceInfo":
          return this.deviceInfo();
        case "Shelly.GetStatus":
          return Object.fromEntries([...switches.keys()].map((n) => [`switch:${n}`, status(n)]));
        case "Switch.GetStatus":
          return status(switchOf(params).id);
        case "Switch.Set": {
          const s = switchOf(params);
          if (!("on" in params)) throw new RpcError(-103, "Missing required 'on'");
          if (typeof params.on !== "boolean") throw new RpcError(-103, "Invalid argument 'on'");
          return set(s, params.on, source, stuck);
        }
        case "Switch.Toggle": {
          const s = switchOf(params);
          return set(s, !s.output, source, stuck);
        }
        default:
          throw new RpcError(404, `No handler for ${method}`);
      }
    },
  };
}
