// Which Node belongs to which machine, in the two senses the domain needs: the one cluster-autoscaler uses
// (exact providerID) and the wider one the safety rules use (any Node that claims the machine).
import type { ClusterView } from "./ports.ts";
import type { Machine, NodeRef, NodeView } from "./model.ts";
import type { PoolContext } from "./context.ts";
import { HOLD_ANNOTATION, TO_BE_DELETED_TAINT } from "./model.ts";

/** The instance id of a machine: what its Node's `spec.providerID` must be. */
export function instanceId(providerIDPrefix: string, machine: Machine): string {
  return providerIDPrefix + machine.name;
}

/**
 * The Node that is this machine as cluster-autoscaler sees it: `spec.providerID` equals the instance id,
 * or the Node has no providerID and carries the machine's name.
 */
export function matchedNode(cluster: ClusterView, providerIDPrefix: string, machine: Machine): NodeView | undefined {
  const byID = cluster.nodesWithProviderID(instanceId(providerIDPrefix, machine))[0];
  if (byID !== undefined) return byID;
  const byName = cluster.nodeNamed(machine.name);
  return byName !== undefined && byName.providerID === "" ? byName : undefined;
}

/**
 * Every Node that may be this machine running: each one matched by providerID, and the one carrying its name
 * whatever its providerID. Empty means the machine is not registered in the safety sense; more than one is a
 * misconfiguration that every safety check must still honour.
 */
export function safetyNodes(cluster: ClusterView, providerIDPrefix: string, machine: Machine): readonly NodeView[] {
  const byID = cluster.nodesWithProviderID(instanceId(providerIDPrefix, machine));
  const byName = cluster.nodeNamed(machine.name);
  return byName === undefined || byID.some((n) => n.name === byName.name) ? byID : [...byID, byName];
}

/** The machine's Nodes in the safety sense, as the pool's view shows them. */
export function nodesOf(ctx: PoolContext, machine: Machine): readonly NodeView[] {
  return safetyNodes(ctx.deps.cluster, ctx.config.providerIDPrefix, machine);
}

/** The Node claims none of `machines`: neither their name nor their instance id as providerID. */
export function claimsNoMachine(node: NodeView, machines: readonly Machine[], providerIDPrefix: string): boolean {
  return !machines.some((m) => node.name === m.name || node.providerID === instanceId(providerIDPrefix, m));
}

/** The node carries cluster-autoscaler's ToBeDeleted taint (CA has drained it). */
export function hasDeletionTaint(node: NodeView): boolean {
  return node.taints.some((t) => t.key === TO_BE_DELETED_TAINT);
}

/** The hold annotation is present (any value but "false"). */
export function hasHoldAnnotation(node: NodeView): boolean {
  const value = node.annotations[HOLD_ANNOTATION];
  return value !== undefined && value !== "false";
}

/** Held in config or by annotation on any of its Nodes: never chosen for scale-up, never powered off. */
export function isHeld(machine: Machine, nodes: readonly NodeView[]): boolean {
  return machine.hold || nodes.some(hasHoldAnnotation);
}

/**
 * The providerID of a Node that carries the machine's name but a providerID of another form, if any: a
 * configuration error (the Node is not matched by cluster-autoscaler's rule, but still protects the machine).
 */
export function foreignProviderID(cluster: ClusterView, providerIDPrefix: string, machine: Machine): string | undefined {
  const node = cluster.nodeNamed(machine.name);
  if (node === undefined || node.providerID === "" || node.providerID === instanceId(providerIDPrefix, machine)) {
    return undefined;
  }
  return node.providerID;
}

/**
 * The machine a node named by cluster-autoscaler stands for. A real Node resolves by providerID (by name
 * only when it has none); CA's fake nodes have name = providerID = instance id, so they resolve by
 * providerID too, and by name as a fallback when the providerID is empty. A providerID of another form
 * never resolves by name.
 */
export function resolveRef(machines: readonly Machine[], providerIDPrefix: string, ref: NodeRef): Machine | undefined {
  if (ref.providerID !== "") {
    return machines.find((m) => instanceId(providerIDPrefix, m) === ref.providerID);
  }
  return (
    machines.find((m) => m.name === ref.name) ?? machines.find((m) => instanceId(providerIDPrefix, m) === ref.name)
  );
}

/** `resolveRef` over all machines, answered from maps built once (cluster-autoscaler asks for every Node in every loop). */
export interface MachineIndex {
  resolve(ref: NodeRef): Machine | undefined;
}

export function createMachineIndex(machines: readonly Machine[], providerIDPrefix: string): MachineIndex {
  const byInstanceId = new Map<string, Machine>();
  const byName = new Map<string, Machine>();
  // Reversed, so that the first machine in config order wins a tie, as `find` does.
  for (const m of machines.toReversed()) {
    byInstanceId.set(instanceId(providerIDPrefix, m), m);
    byName.set(m.name, m);
  }
  return {
    resolve: (ref) => (ref.providerID !== "" ? byInstanceId.get(ref.providerID) : (byName.get(ref.name) ?? byInstanceId.get(ref.name))),
  };
}
