// The runner's plug-ons: scale-ups the inrush limit held back (queued by IncreaseSize) and power restores (a
// plug found off under a Node that should be running). Like the power-off runner it never sleeps: it answers
// how long to wait before the next pass. It never switches anything off.
import type { CallOptions } from "./ports.ts";
import type { Machine, NodeGroupSpec } from "./model.ts";
import type { PoolContext } from "./context.ts";
import { dropQueued, isMachineHeld, lifecycleOf, queuedPosition, restoreSent, stateOf } from "./lifecycle.ts";
import { POWER_OFF_ANNOTATION } from "./model.ts";
import { withGroupLock } from "./context.ts";
import { hasDeletionTaint, nodesOf } from "./matching.ts";
import { powerOnSlotWait, restorePower, switchOn, takePowerOnSlot } from "./switching.ts";
import { plugOnFailed } from "./quarantine.ts";
import { soonest } from "./waits.ts";

/** A machine's power is restored at most this often: a plug someone keeps switching off is not fought over. */
export const RESTORE_INTERVAL_MS = 600_000;

/** How soon to look again at a queued machine that must wait (its power-off pod is going, a command is in flight). */
const QUEUE_POLL_MS = 1000;

/**
 * The Node under which the machine should be running but its plug reads off, if any: registered (in the
 * safety sense), not held, no power-off (job, pod, annotation) and no ToBeDeleted taint, no command in flight.
 */
export function restoreTarget(ctx: PoolContext, machine: Machine): string | undefined {
  const lifecycle = lifecycleOf(ctx, machine);
  if (lifecycle.phase !== "registered" || stateOf(ctx, machine).power.plug !== "off") return undefined;
  const { nodes } = lifecycle;
  if (ctx.deps.cluster.powerOffPod(machine.name) !== undefined || isMachineHeld(ctx, machine, nodes)) return undefined;
  if (nodes.some((n) => hasDeletionTaint(n) || n.annotations[POWER_OFF_ANNOTATION] !== undefined)) return undefined;
  return nodes[0]?.name;
}

/** Milliseconds until the machine's power may be restored again (0: now). */
export function restoreWait(ctx: PoolContext, machine: Machine): number {
  const at = stateOf(ctx, machine).restoredAt;
  return at === undefined ? 0 : Math.max(0, at + RESTORE_INTERVAL_MS - ctx.deps.clock.now());
}

/**
 * Restores power and switches on queued machines, each group under its lock (so CA calls on the group see
 * either queued or switched machines, never one half-way), groups in parallel. A CA call on the group may so
 * wait for one round of the runner's plug calls, each bounded by the plug timeout (and the call's deadline
 * still applies). Resolves with the smallest delay after which something is left to do, or undefined when
 * nothing is.
 */
export async function runPowerOns(ctx: PoolContext, options?: CallOptions): Promise<number | undefined> {
  const busy = ctx.config.groups.filter((g) =>
    g.machines.some((m) => queuedPosition(ctx, m) !== undefined || restoreTarget(ctx, m) !== undefined),
  );
  const waits = await Promise.all(
    busy.map((g) =>
      withGroupLock(ctx, g.id, () => powerOnsOf(ctx, g, options), options?.signal).catch(() => QUEUE_POLL_MS),
    ),
  );
  return soonest(waits);
}

async function powerOnsOf(ctx: PoolContext, group: NodeGroupSpec, options?: CallOptions): Promise<number | undefined> {
  const waits: (number | undefined)[] = [];
  const sends: Promise<unknown>[] = [];
  // Restores first: a registered node without power is worse off than a machine still to come.
  for (const machine of group.machines) {
    const node = restoreTarget(ctx, machine);
    if (node === undefined || restoreWait(ctx, machine) > 0 || !takePowerOnSlot(ctx)) continue;
    restoreSent(ctx, machine);
    // A failure is reported (power-on-failed) and tried again after the interval.
    sends.push(restorePower(ctx, machine, node, options).catch(() => undefined));
  }
  const queue = group.machines
    .filter((m) => queuedPosition(ctx, m) !== undefined)
    .toSorted((a, b) => (queuedPosition(ctx, a) ?? 0) - (queuedPosition(ctx, b) ?? 0));
  for (const machine of queue) {
    const next = recheckQueued(ctx, machine);
    if (next === "wait") {
      waits.push(QUEUE_POLL_MS);
      continue;
    }
    if (next === "go" && !takePowerOnSlot(ctx)) {
      waits.push(powerOnSlotWait(ctx));
      break;
    }
    dropQueued(ctx, machine);
    if (next === "go") {
      sends.push(
        switchOn(ctx, machine, "queued", options).catch((e: unknown) => {
          plugOnFailed(ctx, machine, e);
        }),
      );
    }
  }
  await Promise.all(sends);
  for (const machine of group.machines) {
    if (restoreTarget(ctx, machine) !== undefined) waits.push(Math.max(restoreWait(ctx, machine), powerOnSlotWait(ctx)));
  }
  return soonest(waits);
}

/**
 * What to do with a queued machine now, re-checked just before its plug-on: go; wait (a power-off pod or a
 * command in flight, or its plug not read yet); or leave the queue: it registered meanwhile (it runs), its plug
 * reads on (someone else switched it on: not plugpool's to count or cut), it is held (refused).
 */
function recheckQueued(ctx: PoolContext, machine: Machine): "go" | "wait" | "dequeued" {
  if (isMachineHeld(ctx, machine, nodesOf(ctx, machine))) {
    const detail = `${machine.name} is held; its queued plug-on is dropped`;
    ctx.deps.reporter.report({ type: "refused", machine: machine.name, rule: "held", detail });
    return "dequeued";
  }
  const lifecycle = lifecycleOf(ctx, machine);
  switch (lifecycle.phase) {
    case "powering-off":
    case "switching":
      return "wait";
    case "queued": {
      if (ctx.deps.cluster.powerOffPod(machine.name) !== undefined) return "wait";
      const plug = stateOf(ctx, machine).power.plug;
      return plug === "off" ? "go" : plug === "on" ? "dequeued" : "wait";
    }
    // A Node registered meanwhile, or the machine is no longer queued at all.
    case "registered":
    case "booting":
    case "powered-outside":
    case "off":
    case "unknown":
      return "dequeued";
  }
}
