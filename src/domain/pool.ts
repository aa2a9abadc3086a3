import type { CallOptions } from "./ports.ts";
import type { DeviceSlice, Instance, NodeGroupInfo, NodeRef, TemplateNode } from "./model.ts";

/**
 * cluster-autoscaler's view of the machines (SPEC §4). Every operation answers without waiting for a boot
 * or a shutdown: it reads memory, or records intent and makes at most one quick plug call per machine.
 * Failures throw PlugpoolError; the gRPC adapter maps codes to status codes.
 */
export interface Pool {
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
  instances(groupId: string): readonly Instance[];
  template(groupId: string): { readonly node: TemplateNode; readonly slices: readonly DeviceSlice[] };
  gpuLabel(): string;
  gpuTypes(): readonly string[];
  /** Re-reads every plug in parallel. Never throws because of a plug. */
  refresh(options?: CallOptions): Promise<void>;
  /**
   * Picks up power-offs recorded on the cluster (pods, annotations) and advances every power-off as far as it
   * can go now. Resolves with the delay in ms after which it wants to run again, or undefined when idle.
   * The caller owns the timer; calls are not concurrent (the caller serialises them).
   */
  runPowerOffs(options?: CallOptions): Promise<number | undefined>;
}
