// Boot-failure quarantine: a machine that was switched on and did not come up is left out of scale-ups for a
// while, longer after each failure in a row, so cluster-autoscaler's next scale-up takes another machine
// instead of the same broken one. Recorded on the cluster too, so a restart keeps it.
import type { Machine, QuarantineEntry, QuarantineSettings } from "./model.ts";
import type { PoolContext } from "./context.ts";
import { DEFAULT_QUARANTINE, PLUG_ON_FAILED } from "./model.ts";
import { bootFailed, bootFailureCounted, bootFailuresCleared, quarantined, stateOf } from "./lifecycle.ts";
import { messageOf } from "./errors.ts";

/** Beyond this many doublings the back-off is at its maximum anyway; the cap keeps the arithmetic finite. */
const MAX_DOUBLINGS = 40;

function settings(ctx: PoolContext): QuarantineSettings {
  return ctx.config.quarantine ?? DEFAULT_QUARANTINE;
}

/**
 * Counts one failed boot of `machine` and quarantines it: `initialMs` after the first failure, doubling after
 * each further one, at most `maxMs`. Reports `quarantined`. Callers count each boot attempt at most once.
 */
export function recordBootFailure(ctx: PoolContext, machine: Machine, reason: string): void {
  const { initialMs, maxMs } = settings(ctx);
  const failures = bootFailureCounted(ctx, machine);
  const backOff = Math.min(initialMs * 2 ** Math.min(failures - 1, MAX_DOUBLINGS), maxMs);
  if (backOff <= 0) return;
  const until = ctx.deps.clock.now() + backOff;
  quarantined(ctx, machine, until);
  ctx.deps.records.setQuarantine(machine.name, { until, failures });
  ctx.deps.reporter.report({
    type: "quarantined",
    machine: machine.name,
    group: machine.group,
    until,
    failures,
    reason,
  });
}

/** The machine registered: its boots work, so the count starts again and any quarantine ends. */
export function clearBootFailures(ctx: PoolContext, machine: Machine): void {
  if (bootFailuresCleared(ctx, machine)) ctx.deps.records.setQuarantine(machine.name, undefined);
}

/** Left out of scale-ups right now. */
export function isQuarantined(ctx: PoolContext, machine: Machine): boolean {
  const until = stateOf(ctx, machine).boot.quarantinedUntil;
  return until !== undefined && until > ctx.deps.clock.now();
}

/** The machines quarantined right now, config order. */
export function quarantineOf(ctx: PoolContext): readonly QuarantineEntry[] {
  return ctx.machines.flatMap((m) => {
    const { boot } = stateOf(ctx, m);
    return boot.quarantinedUntil !== undefined && isQuarantined(ctx, m)
      ? [{ machine: m.name, group: m.group, until: boot.quarantinedUntil, failures: boot.failures }]
      : [];
  });
}

/**
 * A plug-on that failed after cluster-autoscaler was told it goes on (a queued one, or one still switching when
 * IncreaseSize answered): the instance stays, now with an error (`plug-on-failed`), so cluster-autoscaler drops it
 * and backs off. Nothing was switched on, so dropping it cuts nothing.
 */
export function plugOnFailed(ctx: PoolContext, machine: Machine, e: unknown): void {
  const message = `switching on the plug of ${machine.name} failed: ${messageOf(e)}`;
  bootFailed(ctx, machine, { code: PLUG_ON_FAILED, message });
  recordBootFailure(ctx, machine, message);
}
