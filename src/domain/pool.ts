import type { CallOptions } from "./ports.ts";
import type { DeviceSlice, Instance, NodeGroupInfo, NodeGroupSpec, NodeRef, PoolConfig, TemplateNode } from "./model.ts";
import type { PoolDeps } from "./state.ts";
import { createContext, groupOf } from "./state.ts";
import { createLock } from "./lock.ts";
import { instancesOf, targetSizeOf } from "./instances.ts";
import { resolveRef } from "./matching.ts";
import { increaseSize } from "./scale-up.ts";
import { decreaseTargetSize, deleteNodes } from "./scale-down.ts";
import { refresh } from "./refresh.ts";
import { runPowerOffs } from "./power-off.ts";
import { createTemplateSource } from "./template.ts";

export type { PoolDeps } from "./state.ts";

/**
 * cluster-autoscaler's view of the machines (SPEC §4). Every operation answers without waiting for a boot
 * or a shutdown: it reads memory, or records intent and makes at most one quick plug call per machine.
 * Failures throw PlugpoolError; the gRPC adapter maps codes to status codes.
 */
export interface Pool {
  /** The configured groups, config order. */
  nodeGroups(): readonly NodeGroupInfo[];
  /** The group of a machine matched by providerID (or name, when the Node has none); undefined if not ours. */
  nodeGroupForNode(node: NodeRef): NodeGroupInfo | undefined;
  /** Number of instances not being deleted. Throws `node-group-not-found`. */
  targetSize(groupId: string): number;
  /** Switches on `delta` usable machines, in config order. Throws `invalid-argument`, or `plug-unreachable` naming the plugs that failed. */
  increaseSize(groupId: string, delta: number, options?: CallOptions): Promise<void>;
  /** Starts power-offs (registered + tainted) or cuts unregistered machines. Throws `unsafe`, `instance-not-found`. */
  deleteNodes(groupId: string, nodes: readonly NodeRef[], options?: CallOptions): Promise<void>;
  /** Cuts `-delta` unregistered machines, latest powered first. Throws `invalid-argument` and changes nothing if there are fewer. */
  decreaseTargetSize(groupId: string, delta: number, options?: CallOptions): Promise<void>;
  /** The group's instances in config order, with state (and error). Throws `node-group-not-found`. */
  instances(groupId: string): readonly Instance[];
  /** The group's template Node and DRA slices (possibly none). Throws `node-group-not-found`. */
  template(groupId: string): { readonly node: TemplateNode; readonly slices: readonly DeviceSlice[] };
  /** The configured GPU label key. */
  gpuLabel(): string;
  /** The configured GPU types (possibly none). */
  gpuTypes(): readonly string[];
  /** Re-reads every plug in parallel. Never throws because of a plug. */
  refresh(options?: CallOptions): Promise<void>;
  /**
   * Picks up power-offs recorded on the cluster (pods, annotations) and advances every power-off as far as it
   * can go now. Resolves with the delay in ms after which it wants to run again, or undefined when idle.
   * The caller owns the timer; calls are not concurrent (the caller serialises them; overlapping calls are
   * queued anyway). `wake` may fire while a pass is running: run again once it ends.
   */
  runPowerOffs(options?: CallOptions): Promise<number | undefined>;
}

/**
 * Builds the pool over the given ports. Starts nothing: no timer, no call until a method is called. Memory
 * holds only plug readings, intents and power-offs in progress; a new pool over the same plugs and cluster
 * picks up where an old one stopped (power-offs resume from the cluster on the first `runPowerOffs`).
 * Increase, delete and decrease of one group run one at a time, so each sees the target size the one
 * before left.
 */
export function createPool(deps: PoolDeps, config: PoolConfig): Pool {
  const ctx = createContext(deps, config);
  const templates = createTemplateSource(ctx);
  const locks = new Map(config.groups.map((g) => [g.id, createLock()]));
  // The caller should not overlap passes; if it does anyway, they run one after the other.
  const passes = createLock();
  const info = (group: NodeGroupSpec): NodeGroupInfo => ({
    id: group.id,
    minSize: group.minSize,
    maxSize: group.maxSize,
    debug: `${group.id}: ${group.machines.length} machines (${group.machines.map((m) => m.name).join(", ")})`,
  });
  const serialised = async <T>(groupId: string, options: CallOptions | undefined, fn: (g: NodeGroupSpec) => Promise<T>) => {
    const group = groupOf(ctx, groupId);
    const lock = locks.get(groupId) ?? createLock();
    return lock(() => fn(group), options?.signal);
  };
  return {
    nodeGroups: () => config.groups.map(info),
    nodeGroupForNode(node) {
      const machine = resolveRef(ctx.machines, config.providerIDPrefix, node);
      return machine === undefined ? undefined : info(groupOf(ctx, machine.group));
    },
    targetSize: (groupId) => targetSizeOf(ctx, groupOf(ctx, groupId)),
    increaseSize: (groupId, delta, options) =>
      serialised(groupId, options, (g) => increaseSize(ctx, g, delta, options)),
    deleteNodes: (groupId, nodes, options) => serialised(groupId, options, (g) => deleteNodes(ctx, g, nodes, options)),
    decreaseTargetSize: (groupId, delta, options) =>
      serialised(groupId, options, (g) => decreaseTargetSize(ctx, g, delta, options)),
    instances: (groupId) => instancesOf(ctx, groupOf(ctx, groupId)),
    template: (groupId) => templates(groupOf(ctx, groupId)),
    gpuLabel: () => config.gpuLabel,
    gpuTypes: () => config.gpuTypes,
    refresh: (options) => refresh(ctx, options),
    runPowerOffs: (options) => passes(() => runPowerOffs(ctx, options), options?.signal),
  };
}
