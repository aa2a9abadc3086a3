// What cluster-autoscaler sees of a group, derived afresh on every call from memory, plugpool's records and the
// ClusterView, so target size and instance list can never disagree.
import type { Instance, Machine, NodeGroupSpec } from "./model.ts";
import type { PoolContext } from "./state.ts";
import { jobOf, nodesOf, poweredByPlugpool, stateOf } from "./state.ts";
import { instanceId, matchedNode } from "./matching.ts";
import { isMachineHeld } from "./device-identity.ts";

/**
 * The instance a machine is, or undefined when it is none (off and unregistered, held, or powered outside
 * plugpool): a power-off not being aborted → deleting; held → none; registered (CA matching) → running;
 * switched on by plugpool (its record, or its plug-on under way), queued for a plug-on, or whose boot failed (its queued plug-on failed, or
 * its plug read off before it registered, which ended the record) → creating, with an error once plugpool knows
 * the boot failed. A plug found on that plugpool did not switch on is none: cluster-autoscaler would remove it
 * as a node that never registered, and that would cut a machine someone else is using.
 */
export function instanceOf(ctx: PoolContext, machine: Machine): Instance | undefined {
  const st = stateOf(ctx, machine);
  const id = instanceId(ctx.config.providerIDPrefix, machine);
  const job = jobOf(st);
  if (job !== undefined && job.aborting === undefined) return { id, state: "deleting" };
  if (isOutOfView(ctx, machine)) return undefined;
  if (matchedNode(ctx.deps.cluster, ctx.config.providerIDPrefix, machine) !== undefined) return { id, state: "running" };
  const failure = st.boot.failure;
  if (poweredByPlugpool(ctx, machine) || st.plan.kind === "queued" || failure !== undefined || isSwitchingOn(ctx, machine)) {
    return failure === undefined ? { id, state: "creating" } : { id, state: "creating", error: failure };
  }
  return undefined;
}

/**
 * A scale-up's plug-on is under way (its record being written, or the plug's answer awaited): it is already the
 * instance it is about to be. Without it the target size would dip meanwhile, and cluster-autoscaler, which reads
 * it without the group's lock, would ask for the machine again. (A restore switches on a machine that has a Node.)
 */
function isSwitchingOn(ctx: PoolContext, machine: Machine): boolean {
  return stateOf(ctx, machine).power.command === "on" && nodesOf(ctx, machine).length === 0;
}

/**
 * A held machine is none of cluster-autoscaler's business: listed, it would be drained for a scale-down that
 * plugpool then refuses, or counted as a creating instance that never registers and cannot be deleted. So it
 * is no instance and its Node belongs to no group, whatever its power; unless a power-off still runs (it
 * stops at its next step, seeing the hold).
 */
export function isOutOfView(ctx: PoolContext, machine: Machine): boolean {
  const job = jobOf(stateOf(ctx, machine));
  return (job === undefined || job.aborting !== undefined) && isMachineHeld(ctx, machine, nodesOf(ctx, machine));
}

/** The group's instances in config order. */
export function instancesOf(ctx: PoolContext, group: NodeGroupSpec): readonly Instance[] {
  return group.machines.flatMap((m) => {
    const instance = instanceOf(ctx, m);
    return instance === undefined ? [] : [instance];
  });
}

/** The number of instances not being deleted. */
export function targetSizeOf(ctx: PoolContext, group: NodeGroupSpec): number {
  return instancesOf(ctx, group).filter((i) => i.state !== "deleting").length;
}
