// What each PoolEvent means to a person: one place for its words, its severity and the Kubernetes Event it
// becomes on its Node, so a log line and the Event `kubectl describe node` shows always say the same thing.
import type { PoolEvent } from "./events.ts";

/** How a PoolEvent is told. */
export interface EventText {
  /** "warning" for what someone should look at; "debug" for progress worth only a debug log line. */
  readonly level: "info" | "warning" | "debug";
  /** One sentence naming the machine or Node; the log line's message and the Event's. */
  readonly message: string;
  /**
   * The Event recorded on the Node, when the event is worth one: its reason (CamelCase, as Kubernetes spells
   * reasons) and the Node it concerns.
   */
  readonly onNode?: { readonly reason: string; readonly node: string };
}

const seconds = (ms: number): string => `${Math.round(ms / 100) / 10}s`;

/**
 * An epoch time in ms as ISO 8601 UTC (as Date.prototype.toISOString writes it), computed, since the domain never
 * touches Date: days to civil date after https://howardhinnant.github.io/date_algorithms.html#civil_from_days.
 */
export function isoTime(ms: number): string {
  const two = (n: number): string => String(n).padStart(2, "0");
  const days = Math.floor(ms / 86_400_000);
  const inDay = ms - days * 86_400_000;
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  const time = `${two(Math.floor(inDay / 3_600_000))}:${two(Math.floor(inDay / 60_000) % 60)}:${two(Math.floor(inDay / 1000) % 60)}`;
  return `${String(year).padStart(4, "0")}-${two(month)}-${two(day)}T${time}.${String(inDay % 1000).padStart(3, "0")}Z`;
}

export function describeEvent(event: PoolEvent): EventText {
  return describeAs(event.type, event);
}

/** The event's own variant, typed by its `type`, so that each entry of DESCRIPTIONS reads that variant's fields. */
type EventOf<T extends PoolEvent["type"]> = Extract<PoolEvent, { readonly type: T }>;

// Indexing the table with a type parameter, not with the union of all types, lets the compiler match each entry to
// its event without a cast.
function describeAs<T extends PoolEvent["type"]>(type: T, event: EventOf<T>): EventText {
  return DESCRIPTIONS[type](event);
}

const info = (message: string, reason: string, node: string): EventText => ({ level: "info", message, onNode: { reason, node } });
const warning = (message: string, reason: string, node: string): EventText => ({ level: "warning", message, onNode: { reason, node } });

/** How each kind of event is told: a kind without an entry does not compile. */
const DESCRIPTIONS: { readonly [T in PoolEvent["type"]]: (event: EventOf<T>) => EventText } = {
  // Power-ons and their boots.
  "powered-on": (e) =>
    info(
      `switched on the plug of ${e.machine} for node group "${e.group}"` + (e.confirmed ? "" : " (unconfirmed: its answer was lost; counted as switched on)"),
      "PoweredOn",
      e.machine,
    ),
  "power-on-failed": (e) => warning(`could not switch on the plug of ${e.machine}: ${e.error}`, "PowerOnFailed", e.machine),
  booted: (e) => info(`node ${e.node} is Ready ${seconds(e.durationMs)} after its plug was switched on`, "Booted", e.node),
  "power-on-queued": (e) =>
    info(`queued the plug-on of ${e.machine} for node group "${e.group}": switched on in turn (inrush limit)`, "PowerOnQueued", e.machine),
  "power-restored": (e) => warning(`switched the plug of ${e.machine} back on: it was off under running node ${e.node}`, "PowerRestored", e.node),
  quarantined: (e) =>
    warning(
      `${e.machine} failed to boot (${e.failures} in a row): skipped by scale-ups until ${isoTime(e.until)}: ${e.reason}`,
      "Quarantined",
      e.machine,
    ),

  // Power-offs, step by step, and what refused or cut them short.
  "power-off-started": (e) =>
    info(
      `${e.resumed ? "resuming" : "starting"} the power-off of ${e.machine} (node ${e.node})` + (e.resumed ? " after a restart of plugpool" : ""),
      "PowerOffStarted",
      e.node,
    ),
  "power-off-step": (e) => {
    const message = `power-off of ${e.machine}: ${e.step} ${e.outcome}${e.detail ? `: ${e.detail}` : ""}`;
    return e.outcome === "failed" ? warning(message, "PowerOffStepFailed", e.machine) : { level: "debug", message };
  },
  "plug-off": (e) => {
    const draw = e.watts === undefined ? "" : `, drawing ${e.watts} W`;
    const grace = e.graceEnded === "standby" ? ", standby draw reached" : "";
    return info(`switched off the plug of ${e.machine} (${e.reason})${draw}${grace}`, "PlugOff", e.machine);
  },
  "node-deleted": (e) => info(`deleted node ${e.node} after the power-off of ${e.machine}`, "NodeDeleted", e.node),
  "power-off-finished": (e) => info(`power-off of ${e.machine} finished in ${seconds(e.durationMs)}`, "PowerOffFinished", e.machine),
  "power-off-aborted": (e) => warning(`power-off of ${e.machine} aborted, power kept: ${e.reason}`, "PowerOffAborted", e.machine),
  refused: (e) => warning(`refused to cut power to ${e.machine} (${e.rule}): ${e.detail}`, "PowerOffRefused", e.machine),

  // What the pool finds in the plugs and the Nodes.
  "plug-read-failed": (e) => warning(`could not read the plug of ${e.machine}: ${e.error}`, "PlugReadFailed", e.machine),
  "provider-id-mismatch": (e) =>
    warning(`node ${e.machine} has providerID "${e.providerID}", expected "${e.expected}": not matched, left alone`, "ProviderIDMismatch", e.machine),
  "unexpected-power": (e) => warning(`unexpected power state of ${e.machine}: ${e.detail}`, "UnexpectedPower", e.machine),
  "powered-outside": (e) => warning(`${e.machine} is powered outside plugpool: ${e.detail}`, "PoweredOutside", e.machine),
  "duplicate-nodes": (e) =>
    warning(
      `${e.nodes.length} Nodes claim ${e.machine} (${e.nodes.join(", ")}): none is powered off until all allow it`,
      "DuplicateNodes",
      e.machine,
    ),

  // Machines that halted after a called-off power-off, and cuts made anyway.
  revived: (e) =>
    warning(
      e.how === "power-on"
        ? `switched ${e.machine} on again: it halted after its power-off was called off`
        : `power-cycled the plug of ${e.machine} (off, then on at once): it halted after its power-off was called off`,
      "Revived",
      e.node,
    ),
  stranded: (e) => warning(`${e.machine} halted with its power on and is not brought back: ${e.detail}`, "Stranded", e.node),
  "hard-cut": (e) => warning(`hard cut of ${e.machine}: ${e.detail}`, "HardCut", e.node === "" ? e.machine : e.node),

  // The identity of power devices.
  "device-mismatch": (e) =>
    warning(
      `the power device of ${e.machine} answers as ${e.seen}, not as ${e.expected}: nothing is switched and ` +
        `${e.machine} is held until the identity of its device is pinned in the configuration`,
      "DeviceMismatch",
      e.machine,
    ),
  "device-duplicate": (e) =>
    warning(
      `the power device of ${e.machine}, met for the first time, answers as ${e.identity}, as the device of ${e.other} ` +
        `does: nothing is switched and ${e.machine} is held; give each device a name of its own and pin it in the configuration`,
      "DeviceDuplicate",
      e.machine,
    ),
  "device-learned": (e) =>
    info(`the power device of ${e.machine} answers as ${e.identity}: every switch command checks it from now on`, "DeviceLearned", e.machine),
  "device-not-recorded": (e) =>
    warning(`could not store the identity ${e.identity} of the power device of ${e.machine}, nothing switched: ${e.error}`, "DeviceNotRecorded", e.machine),
  "device-restarted": (e) =>
    warning(
      `the power device of ${e.machine} restarted (up ${e.uptimeSeconds}s): its relay may have come up off, so plugpool's power-on licenses no cut`,
      "DeviceRestarted",
      e.machine,
    ),

  // Node groups.
  "template-slices-differ": (e) =>
    warning(
      `machines of node group "${e.group}" publish different DRA devices (${e.differing.join(", ")}); the ` +
        `template uses those of ${e.machine}: ${e.detail}`,
      "TemplateSlicesDiffer",
      e.machine,
    ),
};
