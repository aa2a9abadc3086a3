// The cluster writes of a power-off: the mark on the Node, the power-off pod, the Node's
// deletion. Each is idempotent: what is already done or already gone is success. It touches only
// plugpool's own pods and the Nodes of configured machines, checked here again although
// the domain already guarantees it.
import { CoreV1Api, PatchStrategy, type KubeConfig } from "@kubernetes/client-node";
import { PlugpoolError } from "../../domain/errors.ts";
import { formatPowerOffRecord, POWER_OFF_ANNOTATION, type Machine } from "../../domain/model.ts";
import type { CallOptions, NodeTeardown } from "../../domain/ports.ts";
import { apiserverReason, callBound, callOptions, DEFAULT_WRITE_TIMEOUT_MS, statusOf, type CallBound } from "./api-errors.ts";
import { isPowerOffPod, powerOffPodManifest, powerOffPodName } from "./power-off-pod.ts";
import { metaOf, record, text } from "./wire.ts";

export interface KubernetesNodeTeardownOptions {
  /** Namespace of the power-off pods; it must admit privileged pods. */
  readonly namespace: string;
  /** Image of the power-off pod; it must provide `nsenter`. */
  readonly image: string;
  /** The configured machines: only their Nodes are ever deleted. */
  readonly machines: readonly Machine[];
  /** When set, a Node whose providerID is this prefix plus a machine's name is that machine's, whatever its name. */
  readonly providerIDPrefix?: string;
  /** Longest one call may take, all its requests together (default DEFAULT_WRITE_TIMEOUT_MS). */
  readonly writeTimeoutMs?: number;
}

const podSecurityHint = " (power-off pods are privileged: label the namespace pod-security.kubernetes.io/enforce=privileged)";

/** What the cluster writes of a power-off need. */
interface Teardown {
  readonly core: CoreV1Api;
  readonly options: KubernetesNodeTeardownOptions;
  readonly machineNames: ReadonlySet<string>;
  readonly timeoutMs: number;
}

export function createKubernetesNodeTeardown(kc: KubeConfig, options: KubernetesNodeTeardownOptions): NodeTeardown {
  const t: Teardown = {
    core: kc.makeApiClient(CoreV1Api),
    options,
    machineNames: new Set(options.machines.map((m) => m.name)),
    timeoutMs: options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS,
  };
  return {
    markPowerOff: (nodeName, record, call) => annotate(t, nodeName, formatPowerOffRecord(record), "recording the power-off", call),
    clearPowerOffMark: (nodeName, call) => annotate(t, nodeName, null, "clearing the power-off record", call),
    createPowerOffPod: (machine, nodeName, startedAt, call) => createPowerOffPod(t, machine, nodeName, startedAt, call),
    deletePowerOffPod: (machine, call) => deletePowerOffPod(t, machine, call),
    deleteNode: (nodeName, uid, call) => deleteNode(t, nodeName, uid, call),
  };
}

const bound = (t: Teardown, call?: CallOptions): CallBound => callBound(t.timeoutMs, call?.signal);

async function annotate(t: Teardown, nodeName: string, value: string | null, action: string, call?: CallOptions): Promise<void> {
  const body = { metadata: { annotations: { [POWER_OFF_ANNOTATION]: value } } };
  const limits = bound(t, call);
  try {
    await t.core.patchNode({ name: nodeName, body }, callOptions({ signal: limits.signal, contentType: PatchStrategy.MergePatch }));
  } catch (error) {
    if (statusOf(error) === 404) return;
    throw limits.error(`${action} on Node "${nodeName}"`, error);
  }
}

async function createPowerOffPod(t: Teardown, machine: Machine, nodeName: string, startedAt: number, call?: CallOptions): Promise<void> {
  const { namespace } = t.options;
  const body = powerOffPodManifest({ namespace, image: t.options.image, machine: machine.name, nodeName, startedAt });
  const limits = bound(t, call);
  try {
    await t.core.createNamespacedPod({ namespace, body }, callOptions({ signal: limits.signal }));
  } catch (error) {
    if (statusOf(error) === 409) return;
    const hint = apiserverReason(error).includes("PodSecurity") ? podSecurityHint : "";
    throw limits.error(`creating power-off pod "${body.metadata?.name ?? ""}" in namespace "${namespace}"`, error, hint);
  }
}

async function deletePowerOffPod(t: Teardown, machine: Machine, call?: CallOptions): Promise<boolean> {
  const { namespace } = t.options;
  const name = powerOffPodName(machine.name);
  const action = `deleting power-off pod "${name}" in namespace "${namespace}"`;
  const limits = bound(t, call);
  /** The pod as the apiserver has it now; undefined once it is gone. */
  const read = async (): Promise<unknown> => {
    try {
      return await t.core.readNamespacedPod({ name, namespace }, callOptions({ signal: limits.signal }));
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw limits.error(action, error);
    }
  };
  const meta = metaOf(await read());
  if (meta === undefined) return true;
  if (!isPowerOffPod(meta.labels)) {
    throw new PlugpoolError("unsafe", `${action}: refused, the pod does not carry plugpool's power-off labels`);
  }
  try {
    // Grace 0: the node is (being) powered off and its kubelet may never confirm.
    await t.core.deleteNamespacedPod(
      { name, namespace, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid: meta.uid } } },
      callOptions({ signal: limits.signal }),
    );
  } catch (error) {
    if (statusOf(error) === 404) return true;
    throw limits.error(action, error);
  }
  // Read again: the answer to a delete carries a deletionTimestamp whether the pod went at once or stays
  // (a finalizer) until its kubelet or a controller lets it go.
  return (await read()) === undefined;
}

async function deleteNode(t: Teardown, nodeName: string, uid: string, call?: CallOptions): Promise<void> {
  if (uid === "") throw new PlugpoolError("internal", `deleting Node "${nodeName}": no uid to delete it under`);
  const limits = bound(t, call);
  if (!(await configuredNodeThere(t, nodeName, uid, limits))) return;
  try {
    // Only the Node that was judged: one deleted and registered anew since has another uid, and the apiserver
    // then refuses with 409 Conflict (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/).
    await t.core.deleteNode({ name: nodeName, body: { preconditions: { uid } } }, callOptions({ signal: limits.signal }));
  } catch (error) {
    if (statusOf(error) === 404 || statusOf(error) === 409) return;
    throw limits.error(`deleting Node "${nodeName}"`, error);
  }
}

/**
 * Whether the Node named so, with this uid, is still there; throws when it is not a configured machine's (by
 * name, or else by the providerID the apiserver has for it).
 */
async function configuredNodeThere(t: Teardown, nodeName: string, uid: string, limits: CallBound): Promise<boolean> {
  if (t.machineNames.has(nodeName)) return true;
  const prefix = t.options.providerIDPrefix;
  if (prefix === undefined || prefix === "") return refuseNode(nodeName);
  let node: unknown;
  try {
    node = await t.core.readNode({ name: nodeName }, callOptions({ signal: limits.signal }));
  } catch (error) {
    if (statusOf(error) === 404) return false;
    throw limits.error(`reading Node "${nodeName}"`, error);
  }
  if (metaOf(node)?.uid !== uid) return false;
  const providerID = text(record(record(node)?.spec)?.providerID) ?? "";
  if (!providerID.startsWith(prefix) || !t.machineNames.has(providerID.slice(prefix.length))) return refuseNode(nodeName);
  return true;
}

function refuseNode(nodeName: string): never {
  throw new PlugpoolError("unsafe", `refusing to delete Node "${nodeName}": it is not the Node of a configured machine`);
}
