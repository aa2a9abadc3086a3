import type { CallOptions } from "./ports.ts";
import type {
  DeviceSlice,
  Instance,
  MachineUsage,
  NodeGroupInfo,
  NodeGroupSpec,
  NodeRef,
  PoolConfig,
  QuarantineEntry,
  TemplateNode,
} from "./model.ts";
import type { PoolDeps } from "./context.ts";
import { createContext, groupOf, withGroupLock } from "./context.ts";
import { isOutOfView, noteRegistrations } from "./lifecycle.ts";
import { createLock } from "./lock.ts";
import { instancesOf, targetSizeOf } from "./instances.ts";
import { createMachineIndex } from "./matching.ts";
import { increaseSize } from "./scale-up.ts";
import { decreaseTargetSize, deleteNodes } from "./scale-down.ts";
import { isPoweredOutside, refresh } from "./refresh.ts";
import { runPowerOffs } from "./power-off.ts";
import { runPowerOns } from "./power-on.ts";
import { quarantineOf } from "./quarantine.ts";
import { soonest } from "./waits.ts";
import { createTemplateSource } from "./template.ts";
import { noteBoot, usageOf } from "./usage.ts";
import { deviceMismatchOf } from "./device-identity.ts";
import { actingOnly, whileActing } from "./leadership.ts";

export type { PoolDeps } from "./context.ts";

/**
 * cluster-autoscaler's view of the machines. Every operation answers without waiting for a boot
 * or a shutdown: it reads memory, or records intent and makes at most one quick plug call per machine.
 * Failures throw PlugpoolError; the gRPC adapter maps codes to status codes.
 */
export interface Pool {
  /** The configured groups, config order. */
  nodeGroups(): readonly NodeGroupInfo[];
  /**
   * The group of a machine matched by providerID (or name, when the Node has none); undefined if not ours, or
   * if the machine is held (a held machine is outside cluster-autoscaler's view: no instance, no group).
   */
  nodeGroupForNode(node: NodeRef): NodeGroupInfo | undefined;
  /** Number of instances not being deleted. Throws `node-group-not-found`. */
  targetSize(groupId: string): number;
  /**
   * Switches on `delta` usable machines (not held, not quarantined), in `scaleUp.order`; beyond the inrush limit
   * (`scaleUp`) they are queued as creating instances and `reconcile` switches them on in turn. Throws
   * `invalid-argument`, or `plug-unreachable` naming the plugs that failed.
   */
  increaseSize(groupId: string, delta: number, options?: CallOptions): Promise<void>;
  /**
   * Starts power-offs (registered + tainted) or cuts unregistered machines (a queued one only leaves the queue).
   * Throws `unsafe`, `instance-not-found`.
   */
  deleteNodes(groupId: string, nodes: readonly NodeRef[], options?: CallOptions): Promise<void>;
  /**
   * Removes `-delta` unregistered instances: queued ones first (no plug call), then switched-on ones, latest
   * powered first. Throws `invalid-argument` and changes nothing if there are fewer.
   */
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
   * The background runner. Picks up power-offs recorded on the cluster (pods, annotations) and advances every
   * power-off as far as it can go now; switches on queued machines as the inrush limit allows (each re-checked
   * first); switches back on a plug found off under a Node that should be running (at most once per 10 minutes
   * per machine). Resolves with the delay in ms after which it wants to run again, or undefined when idle.
   * The caller owns the timer; calls are not concurrent (the caller serialises them; overlapping calls are
   * queued anyway). `wake` may fire while a pass is running: run again once it ends.
   */
  reconcile(options?: CallOptions): Promise<number | undefined>;
  /**
   * The machines left out of scale-ups right now after failed boots, config order (for doctor and metrics).
   * Recorded on the cluster, so a restart keeps them.
   */
  quarantine(): readonly QuarantineEntry[];
  /**
   * The machines whose plug reads on with no Node and no record of plugpool switching them on, config order:
   * outside cluster-autoscaler's view and never cut (for doctor and metrics).
   */
  poweredOutside(): readonly string[];
  /**
   * The machines whose power device answered as another device (or, met for the first time, as another machine's
   * device), config order: held, switched by nothing, until an operator pins the identity their device should
   * answer with (for doctor and metrics).
   */
  deviceMismatches(): readonly { readonly machine: string; readonly expected: string; readonly seen: string }[];
  /**
   * Every machine's plug state, draw, time on and off and energy (used, from the power sensor; avoided, from
   * `idleWatts`), config order, as observed by this pool since it was built (for metrics).
   */
  usage(): readonly MachineUsage[];
  /**
   * Tells the pool the ClusterView changed (call it on every change the watches deliver): a machine seen
   * registered even for a moment ends plugpool's record of its power-on, so a Node deleted right after never
   * leaves that record behind as a licence to cut. A machine plugpool switched on whose Node turns Ready is
   * reported `booted`.
   */
  clusterChanged(): void;
}

/**
 * Builds the pool over the given ports. Starts nothing: no timer, no call until a method is called. Memory
 * holds only plug readings, intents and power-offs in progress; a new pool over the same plugs and cluster
 * picks up where an old one stopped (power-offs resume from the cluster on the first `reconcile`).
 * Increase, delete and decrease of one group run one at a time, so each sees the target size the one
 * before left. With `deps.leadership`, the pool acts only while it says so (see leadership.ts).
 */
export function createPool(deps: PoolDeps, config: PoolConfig): Pool {
  const { leadership } = deps;
  if (leadership === undefined) return createActingPool(deps, config);
  return whileActing(createActingPool(actingOnly(deps, leadership), config), leadership);
}

function createActingPool(deps: PoolDeps, config: PoolConfig): Pool {
  const ctx = createContext(deps, config);
  const templates = createTemplateSource(ctx);
  // The caller should not overlap passes; if it does anyway, they run one after the other.
  const passes = createLock();
  const info = (group: NodeGroupSpec): NodeGroupInfo => ({
    id: group.id,
    minSize: group.minSize,
    maxSize: group.maxSize,
    debug: `${group.id}: ${group.machines.length} machines (${group.machines.map((m) => m.name).join(", ")})`,
  });
  // Built once: they depend on the config alone, and cluster-autoscaler asks NodeGroups, and NodeGroupForNode
  // for every Node, in every loop.
  const infos = new Map(config.groups.map((g) => [g.id, Object.freeze(info(g))]));
  const groupInfos = [...infos.values()];
  const machineIndex = createMachineIndex(ctx.machines, config.providerIDPrefix);
  const serialised = async <T>(groupId: string, options: CallOptions | undefined, fn: (g: NodeGroupSpec) => Promise<T>) => {
    const group = groupOf(ctx, groupId);
    return withGroupLock(
      ctx,
      groupId,
      () => {
        noteRegistrations(ctx);
        return fn(group);
      },
      options?.signal,
    );
  };
  const pass = async (options?: CallOptions): Promise<number | undefined> => {
    noteRegistrations(ctx);
    return soonest(await Promise.all([runPowerOffs(ctx, options), runPowerOns(ctx, options)]));
  };
  return {
    nodeGroups: () => groupInfos,
    nodeGroupForNode(node) {
      const machine = machineIndex.resolve(node);
      return machine === undefined || isOutOfView(ctx, machine) ? undefined : infos.get(machine.group);
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
    reconcile: (options) => passes(() => pass(options), options?.signal),
    quarantine: () => quarantineOf(ctx),
    poweredOutside: () => ctx.machines.filter((m) => isPoweredOutside(ctx, m)).map((m) => m.name),
    deviceMismatches: () =>
      ctx.machines.flatMap((m) => {
        const mismatch = deviceMismatchOf(ctx, m);
        return mismatch === undefined ? [] : [{ machine: m.name, ...mismatch }];
      }),
    usage: () => usageOf(ctx),
    clusterChanged: () => {
      noteRegistrations(ctx);
      for (const machine of ctx.machines) noteBoot(ctx, machine);
    },
  };
}
