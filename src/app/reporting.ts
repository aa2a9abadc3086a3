import type { PoolConfig, PoolEvent, Reporter } from "../domain/index.ts";
import { describeEvent } from "../domain/event-catalogue.ts";
import type { LogFields, Logger } from "./logger.ts";
import type { Metrics, PowerAction } from "./metrics.ts";

/** Turns the domain's outcomes into log lines and metrics, and forwards them to further reporters (Events). */
export function createReporter(options: {
  logger: Logger;
  metrics: Metrics;
  config: PoolConfig;
  forward?: readonly Reporter[];
}): Reporter {
  const { logger, metrics } = options;
  const groupOf = new Map(options.config.groups.flatMap((g) => g.machines.map((m) => [m.name, g.id] as const)));

  return {
    report(event: PoolEvent) {
      const { type, ...rest } = event;
      const group = groupOf.get(event.machine);
      const fields: LogFields = { event: type, group, ...flatten(rest) };
      count(metrics, group ?? "", event);
      const { level, message } = describeEvent(event);
      if (level === "warning") logger.warn(message, fields);
      else if (level === "debug") logger.debug(message, fields);
      else logger.info(message, fields);
      for (const next of options.forward ?? []) next.report(event);
    },
  };
}

/** The metrics an event moves; `group` is its machine's group ("" for a machine in none). */
function count(metrics: Metrics, group: string, event: PoolEvent): void {
  const action = (name: PowerAction) => {
    metrics.powerActions.inc({ group, action: name });
  };
  switch (event.type) {
    case "powered-on":
    case "power-on-queued":
    case "power-restored":
    case "power-off-started":
    case "node-deleted":
    case "power-off-finished":
    case "power-on-failed":
    case "power-off-aborted":
    case "refused":
    case "quarantined":
    case "powered-outside":
    case "hard-cut":
    case "revived":
    case "stranded":
      action(event.type);
      break;
    case "booted":
      metrics.powerOnToReady.observe({ group: event.group }, event.durationMs / 1000);
      break;
    case "plug-off":
      action(event.type);
      if (event.graceEnded) metrics.graceEnded.inc({ how: event.graceEnded });
      break;
    case "power-off-step":
      if (event.outcome === "done" && event.durationMs !== undefined) {
        metrics.powerOffStepDuration.observe({ step: event.step }, event.durationMs / 1000);
      }
      break;
    case "provider-id-mismatch":
    case "duplicate-nodes":
      metrics.configErrors.inc({ kind: event.type });
      break;
    case "plug-read-failed":
    case "unexpected-power":
    case "template-slices-differ":
    case "device-mismatch":
    case "device-duplicate":
    case "device-learned":
    case "device-not-recorded":
    case "device-restarted":
      break;
  }
}

function flatten(rest: object): LogFields {
  return Object.fromEntries(
    Object.entries(rest).map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : (v as string)]),
  );
}
