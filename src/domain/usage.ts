// What the machines' power use adds up to, and how long boots take, from plugpool's own observations.
import type { Machine, MachineUsage } from "./model.ts";
import type { PoolContext } from "./context.ts";
import { bootTimed, stateOf } from "./lifecycle.ts";
import { nodesOf } from "./matching.ts";
import { WATT_MS_PER_KWH } from "./energy.ts";

/** Every machine's usage, config order. */
export function usageOf(ctx: PoolContext): MachineUsage[] {
  return ctx.machines.map((machine) => {
    const st = stateOf(ctx, machine);
    const { meter } = st;
    const sensor = machine.power.measuresWatts;
    return {
      machine: machine.name,
      group: machine.group,
      plug: st.power.plug,
      ...(sensor && st.power.watts !== undefined && { watts: st.power.watts }),
      poweredOnSeconds: meter.onMs / 1000,
      poweredOffSeconds: meter.offMs / 1000,
      ...(sensor && { energyUsedKwh: meter.usedWattMs / WATT_MS_PER_KWH }),
      ...(machine.idleWatts !== undefined && { energyAvoidedKwh: (meter.offMs * machine.idleWatts) / WATT_MS_PER_KWH }),
    };
  });
}

/** A Node condition's time has whole seconds: it may read up to this much before the moment it names. */
const CONDITION_TIME_RESOLUTION_MS = 1000;

/**
 * Reports `booted` once a machine plugpool switched on has a Ready Node, timed from the plug-on to the moment
 * the Node's Ready condition turned True (or now, when the Node does not say). A Ready condition older than the
 * plug-on (by more than its time's resolution) belongs to an earlier boot: nothing is reported for it.
 */
export function noteBoot(ctx: PoolContext, machine: Machine): void {
  const { boot } = stateOf(ctx, machine);
  const started = boot.startedAt;
  if (started === undefined) return;
  const node = nodesOf(ctx, machine).find((n) => n.ready);
  if (node === undefined) return;
  bootTimed(ctx, machine);
  const now = ctx.deps.clock.now();
  const readyAt = Math.min(node.readyChangedAt ?? now, now);
  if (readyAt <= started - CONDITION_TIME_RESOLUTION_MS) return;
  const durationMs = Math.max(0, readyAt - started);
  ctx.deps.reporter.report({ type: "booted", machine: machine.name, group: machine.group, node: node.name, durationMs });
}
