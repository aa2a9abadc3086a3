// What cluster-autoscaler sees of a group (SPEC §3), derived afresh on every call from memory and the
// ClusterView, so target size and instance list can never disagree.
import type { Instance, Machine, NodeGroupSpec } from "./model.ts";
import type { PoolContext } from "./state.ts";
import { stateOf } from "./state.ts";
import { instanceId, matchedNode } from "./matching.ts";

/**
 * The instance a machine is, or undefined when it is none (off, unregistered, no power-off):
 * a power-off not being aborted → deleting; registered (CA matching) → running; plug known on or
 * switched on by IncreaseSize → creating, with an error once plugpool knows the boot failed.
 */
export function instanceOf(ctx: PoolContext, machine: Machine): Instance | undefined {
  const st = stateOf(ctx, machine);
  const id = instanceId(ctx.config.providerIDPrefix, machine);
  if (st.job !== undefined && st.job.aborting === undefined) return { id, state: "deleting" };
  if (matchedNode(ctx.deps.cluster, ctx.config.providerIDPrefix, machine) !== undefined) return { id, state: "running" };
  if (st.plug === "on" || st.wantedOn) {
    return st.bootFailure === undefined ? { id, state: "creating" } : { id, state: "creating", error: st.bootFailure };
  }
  return undefined;
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
