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
  const info = (message: string, reason: string, node = event.machine): EventText =>
    ({ level: "info", message, onNode: { reason, node } });
  const warning = (message: string, reason: string, node = event.machine): EventText =>
    ({ level: "warning", message, onNode: { reason, node } });
  switch (event.type) {
    case "powered-on":
      return info(
        `switched on the plug of ${event.machine} for node group "${event.group}"` +
          (event.confirmed ? "" : " (unconfirmed: its answer was lost; counted as switched on)"),
        "PoweredOn",
      );
    case "power-on-failed":
      return warning(`could not switch on the plug of ${event.machine}: ${event.error}`, "PowerOnFailed");
    case "booted":
      return info(`node ${event.node} is Ready ${seconds(event.durationMs)} after its plug was switched on`, "Booted", event.node);
    case "power-on-queued":
      return info(`queued the plug-on of ${event.machine} for node group "${event.group}": switched on in turn (inrush limit)`, "PowerOnQueued");
    case "power-restored":
      return warning(`switched the plug of ${event.machine} back on: it was off under running node ${event.node}`, "PowerRestored", event.node);
    case "quarantined":
      return warning(
        `${event.machine} failed to boot (${event.failures} in a row): skipped by scale-ups until ` +
          `${isoTime(event.until)}: ${event.reason}`,
        "Quarantined",
      );
    case "power-off-started":
      return info(
        `${event.resumed ? "resuming" : "starting"} the power-off of ${event.machine} (node ${event.node})` +
          (event.resumed ? " after a restart of plugpool" : ""),
        "PowerOffStarted",
        event.node,
      );
    case "power-off-step": {
      const message = `power-off of ${event.machine}: ${event.step} ${event.outcome}${event.detail ? `: ${event.detail}` : ""}`;
      return event.outcome === "failed" ? warning(message, "PowerOffStepFailed") : { level: "debug", message };
    }
    case "plug-off": {
      const draw = event.watts === undefined ? "" : `, drawing ${event.watts} W`;
      const grace = event.graceEnded === "standby" ? ", standby draw reached" : "";
      return info(`switched off the plug of ${event.machine} (${event.reason})${draw}${grace}`, "PlugOff");
    }
    case "node-deleted":
      return info(`deleted node ${event.node} after the power-off of ${event.machine}`, "NodeDeleted", event.node);
    case "power-off-finished":
      return info(`power-off of ${event.machine} finished in ${seconds(event.durationMs)}`, "PowerOffFinished");
    case "power-off-aborted":
      return warning(`power-off of ${event.machine} aborted, power kept: ${event.reason}`, "PowerOffAborted");
    case "refused":
      return warning(`refused to cut power to ${event.machine} (${event.rule}): ${event.detail}`, "PowerOffRefused");
    case "plug-read-failed":
      return warning(`could not read the plug of ${event.machine}: ${event.error}`, "PlugReadFailed");
    case "provider-id-mismatch":
      return warning(
        `node ${event.machine} has providerID "${event.providerID}", expected "${event.expected}": not matched, left alone`,
        "ProviderIDMismatch",
      );
    case "unexpected-power":
      return warning(`unexpected power state of ${event.machine}: ${event.detail}`, "UnexpectedPower");
    case "powered-outside":
      return warning(`${event.machine} is powered outside plugpool: ${event.detail}`, "PoweredOutside");
    case "duplicate-nodes":
      return warning(
        `${event.nodes.length} Nodes claim ${event.machine} (${event.nodes.join(", ")}): none is powered off until all allow it`,
        "DuplicateNodes",
      );
    case "revived":
      return warning(
        event.how === "power-on"
          ? `switched ${event.machine} on again: it halted after its power-off was called off`
          : `power-cycled the plug of ${event.machine} (off, then on at once): it halted after its power-off was called off`,
        "Revived",
        event.node,
      );
    case "stranded":
      return warning(`${event.machine} halted with its power on and is not brought back: ${event.detail}`, "Stranded", event.node);
    case "hard-cut":
      return warning(`hard cut of ${event.machine}: ${event.detail}`, "HardCut", event.node === "" ? event.machine : event.node);
    case "device-mismatch":
      return warning(
        `the power device of ${event.machine} answers as ${event.seen}, not as ${event.expected}: nothing is switched and ` +
          `${event.machine} is held until the identity of its device is pinned in the configuration`,
        "DeviceMismatch",
      );
    case "device-duplicate":
      return warning(
        `the power device of ${event.machine}, met for the first time, answers as ${event.identity}, as the device of ${event.other} ` +
          `does: nothing is switched and ${event.machine} is held; give each device a name of its own and pin it in the configuration`,
        "DeviceDuplicate",
      );
    case "device-learned":
      return info(`the power device of ${event.machine} answers as ${event.identity}: every switch command checks it from now on`, "DeviceLearned");
    case "device-not-recorded":
      return warning(`could not store the identity ${event.identity} of the power device of ${event.machine}, nothing switched: ${event.error}`, "DeviceNotRecorded");
    case "device-restarted":
      return warning(
        `the power device of ${event.machine} restarted (up ${event.uptimeSeconds}s): its relay may have come up off, so plugpool's power-on licenses no cut`,
        "DeviceRestarted",
      );
    case "template-slices-differ":
      return warning(
        `machines of node group "${event.group}" publish different DRA devices (${event.differing.join(", ")}); the ` +
          `template uses those of ${event.machine}: ${event.detail}`,
        "TemplateSlicesDiffer",
      );
  }
}
