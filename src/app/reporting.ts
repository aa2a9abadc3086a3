import type { PoolConfig, PoolEvent, Reporter } from "../domain/index.ts";
import type { LogFields, Logger } from "./logger.ts";
import type { Metrics } from "./metrics.ts";

/** Turns the domain's outcomes into log lines and metrics, and forwards them to further reporters (Events). */
export function createReporter(options: {
  logger: Logger;
  metrics: Metrics;
  config: PoolConfig;
  forward?: readonly Reporter[];
}): Reporter {
  const { logger, metrics } = options;
  const groupOf = new Map(options.config.groups.flatMap((g) => g.machines.map((m) => [m.name, g.id] as const)));
  const action = (machine: string, name: string) => {
    metrics.powerActions.inc({ group: groupOf.get(machine) ?? "", action: name });
  };

  return {
    report(event: PoolEvent) {
      const { type, ...rest } = event;
      const fields: LogFields = { event: type, group: groupOf.get(event.machine), ...flatten(rest) };
      switch (event.type) {
        case "powered-on":
        case "power-on-queued":
        case "power-restored":
        case "power-off-started":
        case "node-deleted":
        case "power-off-finished":
          action(event.machine, event.type);
          logger.info(describe(event), fields);
          break;
        case "booted":
          metrics.powerOnToReady.observe({ group: event.group }, event.durationMs / 1000);
          logger.info(describe(event), fields);
          break;
        case "plug-off":
          action(event.machine, event.type);
          if (event.graceEnded) metrics.graceEnded.inc({ how: event.graceEnded });
          logger.info(describe(event), fields);
          break;
        case "power-on-failed":
        case "power-off-aborted":
        case "refused":
        case "quarantined":
        case "powered-outside":
        case "hard-cut":
          action(event.machine, event.type);
          logger.warn(describe(event), fields);
          break;
        case "power-off-step":
          if (event.outcome === "done" && event.durationMs !== undefined) {
            metrics.powerOffStepDuration.observe({ step: event.step }, event.durationMs / 1000);
          }
          if (event.outcome === "failed") logger.warn(describe(event), fields);
          else logger.debug(describe(event), fields);
          break;
        case "provider-id-mismatch":
        case "duplicate-nodes":
          metrics.configErrors.inc({ kind: event.type });
          logger.warn(describe(event), fields);
          break;
        default:
          logger.warn(describe(event), fields);
      }
      for (const next of options.forward ?? []) next.report(event);
    },
  };
}

function flatten(rest: object): LogFields {
  return Object.fromEntries(
    Object.entries(rest).map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : (v as string)]),
  );
}

function describe(event: PoolEvent): string {
  switch (event.type) {
    case "powered-on":
      return `switched on the plug of ${event.machine}${event.confirmed ? "" : " (unconfirmed: its answer was lost)"}`;
    case "power-on-failed":
      return `could not switch on the plug of ${event.machine}: ${event.error}`;
    case "power-off-started":
      return `${event.resumed ? "resuming" : "starting"} the power-off of ${event.machine} (node ${event.node})`;
    case "power-off-step":
      return `power-off of ${event.machine}: ${event.step} ${event.outcome}${event.detail ? `: ${event.detail}` : ""}`;
    case "plug-off":
      return `switched off the plug of ${event.machine} (${event.reason})`;
    case "node-deleted":
      return `deleted node ${event.node}`;
    case "power-off-finished":
      return `power-off of ${event.machine} finished`;
    case "power-off-aborted":
      return `power-off of ${event.machine} aborted, power kept: ${event.reason}`;
    case "refused":
      return `refused to cut power to ${event.machine} (${event.rule}): ${event.detail}`;
    case "plug-read-failed":
      return `could not read the plug of ${event.machine}: ${event.error}`;
    case "provider-id-mismatch":
      return `node ${event.machine} has providerID "${event.providerID}", expected "${event.expected}": not matched`;
    case "unexpected-power":
      return `unexpected power state of ${event.machine}: ${event.detail}`;
    case "booted":
      return `node ${event.node} is Ready ${Math.round(event.durationMs / 100) / 10}s after its plug was switched on`;
    case "power-on-queued":
      return `queued the plug-on of ${event.machine} (inrush limit)`;
    case "power-restored":
      return `switched the plug of ${event.machine} back on: it was off under running node ${event.node}`;
    case "quarantined":
      return `${event.machine} failed to boot (${event.failures} in a row): skipped by scale-ups until ${new Date(event.until).toISOString()}: ${event.reason}`;
    case "template-slices-differ":
      return `machines of group ${event.group} publish different devices: ${event.detail}`;
    case "powered-outside":
      return `${event.machine} is powered outside plugpool: ${event.detail}`;
    case "duplicate-nodes":
      return `${event.nodes.length} Nodes claim ${event.machine}: ${event.nodes.join(", ")}`;
    case "hard-cut":
      return `hard cut of ${event.machine}: ${event.detail}`;
  }
}
