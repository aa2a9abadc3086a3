// What cluster-autoscaler sees of a group, derived afresh on every call from each machine's lifecycle, plugpool's
// records and the ClusterView, so target size and instance list can never disagree.
import type { Instance, NodeGroupSpec } from "./model.ts";
import type { PoolContext } from "./context.ts";
import { instanceOf } from "./lifecycle.ts";

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
