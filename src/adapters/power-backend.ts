// What one kind of power control (a backend: ESPHome plugs, a home-automation hub, a server's BMC, ...) brings to
// plugpool: its section of a node's configuration, parsed and checked; which machines share a device; a switch
// for its controls that keeps the PowerSwitch rules; and a probe for `doctor`. The composition root lists the
// backends in one place (src/app/power/backends.ts) and routes each machine's calls to its own.
import type { PlugReading } from "../domain/model.ts";
import type { CallOptions, CutGuard, DeviceIdentity, ReadOptions, SwitchOptions } from "../domain/ports.ts";
import type { Secret } from "./secret.ts";

/** A location in the configuration file: keys and list indexes from the top. */
export type SectionPath = readonly (string | number)[];

/** `["nodeGroups", 0, "nodes", 2, "plug", "url"]` → `nodeGroups[0].nodes[2].plug.url`. */
export function formatPath(path: SectionPath): string {
  let text = "";
  for (const part of path) {
    if (typeof part === "number") text += `[${part}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(part)) text += text === "" ? part : `.${part}`;
    else text += `[${JSON.stringify(part)}]`;
  }
  return text === "" ? "(top level)" : text;
}

/** Reports a problem of the configuration at a path: what is wrong and what is expected. Never a secret's value. */
export type ReportIssue = (path: SectionPath, message: string) => void;

/** What a backend may use while it parses one node's section. */
export interface SectionContext {
  /** Where the section is, e.g. `["nodeGroups", 0, "nodes", 2, "plug"]`. */
  readonly path: SectionPath;
  readonly report: ReportIssue;
  /**
   * The content of a file the section names (e.g. a key of a mounted Kubernetes Secret), read once and kept as a
   * Secret; a trailing newline is not part of it. Undefined when the file cannot be read (reported at `at`).
   */
  secretFile(file: string, at: SectionPath): Secret | undefined;
  /** The process environment, for secrets every control of the backend shares. */
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** One node's section, parsed. */
export interface ParsedControl<Address> {
  /** Unique per control, however its address is spelled: two nodes with one key are refused (they share it). */
  readonly key: string;
  /** The physical device the control belongs to, for people and for the one-login-per-device rules. */
  readonly device: string;
  /** What and where it is, for people: shown in events, errors and doctor. Never a secret. */
  readonly label: string;
  /** It reports the machine's draw in watts. */
  readonly measuresWatts: boolean;
  /** It shuts the OS down itself (a BMC), and the section asks for it instead of the power-off pod. */
  readonly shutsDown?: boolean;
  /** Everything the backend's switch needs to reach it (secrets as Secrets). */
  readonly address: Address;
}

/** What `doctor` shows of one control. */
export interface BackendProbe {
  readonly state: "on" | "off";
  readonly watts?: number;
  /** Why the power reading failed, when one is configured and the state read did not. */
  readonly sensorError?: string;
  /** How the control was reached (firmware, URL form, auth scheme, ...), in a few words. Never a secret. */
  readonly detail: string;
  /** What the device says it is now; absent for a backend whose address is its identity (a hub's entity). */
  readonly identity?: DeviceIdentity;
}

/**
 * Reads and switches the controls of one backend. The rules of the domain's PowerSwitch port hold: calls to one
 * device are serialised; each call is bounded by `timeoutMs`, its wait behind others included; failures are
 * PlugpoolErrors (`plug-unconfirmed` when a command may have been carried out, `unsafe` when the guard refused
 * and nothing was sent) whose messages name the control, never a secret or text from the wire; `mayCut` is asked
 * with the device's slot held, immediately before the switch-off is sent. Before every switch command, in the same
 * slot, the device is asked what it is and `options.device` is asked with its answer (unless the backend's address is
 * its identity): a refusal sends nothing and throws `device-mismatch`. A state the device cannot tell is a failed
 * read, never "off".
 */
export interface BackendSwitch<Address> {
  read(address: Address, options?: ReadOptions): Promise<PlugReading>;
  turnOn(address: Address, options: SwitchOptions): Promise<PlugReading>;
  turnOff(address: Address, mayCut: CutGuard, options: SwitchOptions): Promise<PlugReading>;
  probe(address: Address, options?: CallOptions): Promise<BackendProbe>;
  /**
   * Asks the OS to shut down (e.g. Redfish `ComputerSystem.Reset` with `GracefulShutdown`), leaving the power on,
   * if `mayShutDown` allows it when asked as `mayCut` is; resolves once the device accepted it. Required when
   * `parse` returns controls with `shutsDown`.
   */
  shutdown?(address: Address, mayShutDown: CutGuard, options: SwitchOptions): Promise<void>;
}

export interface BackendOptions {
  /** Bound on each call, including its wait behind other calls to the same device. */
  readonly timeoutMs: number;
}

/** A kind of power control. `Address` is the backend's own, opaque to everything else. */
export interface PowerBackend<Address> {
  /** Its name in PowerControl.backend, metrics and doctor, e.g. "esphome". */
  readonly name: string;
  /** The node's configuration key that selects it, e.g. "plug"; a node has exactly one. */
  readonly section: string;
  /**
   * Bound on one call to one of its devices when the configuration sets none (`devices.timeouts`): what a device
   * of its kind needs to answer and confirm a switch, wait behind other calls included.
   */
  readonly defaultTimeoutMs: number;
  /** The JSON Schema of that section (ajv, draft 2020-12): every key described, with its default. */
  readonly schema: Readonly<Record<string, unknown>>;
  /** Parses one section the schema accepted; reports every problem through the context. */
  parse(section: unknown, context: SectionContext): ParsedControl<Address> | undefined;
  /** Rules across all of this backend's controls (e.g. one login per device), once every section parsed. */
  check?(controls: readonly { readonly control: ParsedControl<Address>; readonly path: SectionPath }[], context: Pick<SectionContext, "report" | "env">): void;
  create(options: BackendOptions): BackendSwitch<Address>;
}
