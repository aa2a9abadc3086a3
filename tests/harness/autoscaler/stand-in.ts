// A stand-in for cluster-autoscaler, used only where the real one cannot be built (the Go module proxy refuses
// its module; see tests/harness/autoscaler/build.sh). It is NOT cluster-autoscaler: no scheduling simulation,
// no resource fit, no backoff, one node at a time. It makes the few decisions the sandbox needs, over the same
// externalgrpc API and with an independent gRPC client, so plugpool serves it exactly as it serves CA:
// - scale-up: an unschedulable pod whose nodeSelector the group's template labels satisfy, no instance of the
//   group creating, the group below maxSize → NodeGroupIncreaseSize(1);
// - scale-down: a Ready node of a group without pods (DaemonSet pods and plugpool's power-off pods aside) for
//   `unneededMs` → cordon and ToBeDeletedByClusterAutoscaler taint, as CA does → NodeGroupDeleteNodes;
// - an instance creating for longer than `provisionMs` → NodeGroupDeleteNodes with a fake node, as CA does.
// One klog-style log line per decision, so tests/harness/autoscaler/ca-log.ts narrates it as it narrates CA.
import { appendFileSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fromBinary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { CoreV1Api, KubeConfig, type V1Node, type V1Pod } from "@kubernetes/client-node";
import { CloudProvider, InstanceStatus_InstanceState } from "../../../gen/clusterautoscaler/cloudprovider/v1/externalgrpc/externalgrpc_pb.ts";
import { NodeSchema } from "../../../gen/k8s.io/api/core/v1/generated_pb.ts";
import { callOptions } from "../../../src/adapters/kubernetes/api-errors.ts";
import { isPowerOffPod } from "../../../src/adapters/kubernetes/power-off-pod.ts";
import type { AutoscalerProcess } from "./process.ts";
import { createOwnedTempDir, onAbruptExit } from "../control-plane/process.ts";
import { createCloudProviderClient } from "../grpc-client.ts";

export const STAND_IN_NOTICE = "cluster-autoscaler is not available on this machine (the Go module proxy refuses its module); " +
  "a minimal stand-in drives plugpool over the same externalgrpc API";

export interface StandInOptions {
  /** kubeconfig file of the identity it acts as (CA's). */
  readonly kubeconfigPath: string;
  /** plugpool's gRPC address, host:port. */
  readonly grpcAddress: string;
  /** Between the end of one loop and the start of the next (default 2 s). */
  readonly intervalMs?: number | undefined;
  /** How long a node stays empty before it is removed (default 30 s). */
  readonly unneededMs?: number | undefined;
  /** How long an instance may stay creating before it is removed (default 60 s). */
  readonly provisionMs?: number | undefined;
}

const TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler";
// After a machine registers, the scheduler needs a moment to place the pods that waited for it.
const SETTLE_MS = 10_000;
const MERGE = callOptions({ contentType: "application/merge-patch+json" });
type Methods = typeof CloudProvider.method;

/** Starts the stand-in's loop; its first run is one interval away. `metricsUrl` is empty: it serves nothing. */
export function startAutoscalerStandIn(options: StandInOptions): AutoscalerProcess {
  const { intervalMs = 2000, unneededMs = 30_000, provisionMs = 60_000 } = options;
  const dir = createOwnedTempDir("plugpool-autoscaler-");
  const unregister = onAbruptExit(() => { rmSync(dir, { recursive: true, force: true }); });
  const logPath = join(dir, "autoscaler-stand-in.log");
  const log = (level: "I" | "E", message: string): void => { appendFileSync(logPath, klog(level, message)); };
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(options.kubeconfigPath);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const client = createCloudProviderClient(options.grpcAddress);

  async function rpc<M extends keyof Methods>(
    method: M,
    request: MessageInitShape<Methods[M]["input"]>,
  ): Promise<MessageShape<Methods[M]["output"]>> {
    const { response, error } = await client.call(method, request);
    if (error !== undefined || response === undefined) throw new Error(`${method}: ${error?.details ?? "no response"}`);
    return response;
  }

  const templateLabels = new Map<string, Readonly<Record<string, string>>>();
  const creatingSince = new Map<string, number>();
  const lastCreating = new Map<string, number>();
  const emptySince = new Map<string, number>();
  const toldPods = new Set<string>();

  async function loop(): Promise<void> {
    await rpc("refresh", {});
    const { nodeGroups } = await rpc("nodeGroups", {});
    const [nodes, pods] = await Promise.all([core.listNode(), core.listPodForAllNamespaces()]);
    const unschedulable = pods.items.filter(isUnschedulable);
    // Groups whose nodes may go: above minSize, and no pod waits that they could run.
    const shrinkable = new Set<string>();
    const allCreating: string[] = [];
    for (const group of nodeGroups) {
      const { targetSize } = await rpc("nodeGroupTargetSize", { id: group.id });
      const creating = (await rpc("nodeGroupNodes", { id: group.id })).instances
        .filter((i) => i.status?.instanceState === InstanceStatus_InstanceState.instanceCreating);
      allCreating.push(...creating.map((i) => i.id));
      await removeUnregistered(group.id, creating.map((i) => i.id));
      if (!templateLabels.has(group.id)) {
        const { nodeBytes } = await rpc("nodeGroupTemplateNodeInfo", { id: group.id });
        templateLabels.set(group.id, fromBinary(NodeSchema, nodeBytes).metadata?.labels ?? {});
      }
      const labels = templateLabels.get(group.id) ?? {};
      const waiting = unschedulable.filter((p) => Object.entries(p.spec?.nodeSelector ?? {}).every(([k, v]) => labels[k] === v));
      for (const pod of waiting.filter((p) => !toldPods.has(p.metadata?.uid ?? ""))) {
        toldPods.add(pod.metadata?.uid ?? "");
        log("I", `Pod ${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""} is unschedulable; group ${group.id} would fit it`);
      }
      if (targetSize > group.minSize && waiting.length === 0) shrinkable.add(group.id);
      // No scale-up while an instance of the group is creating, nor for SETTLE_MS after.
      if (creating.length > 0) lastCreating.set(group.id, Date.now());
      const settled = Date.now() - (lastCreating.get(group.id) ?? -Infinity) >= SETTLE_MS;
      if (waiting.length === 0 || !settled || targetSize >= group.maxSize) continue;
      await rpc("nodeGroupIncreaseSize", { id: group.id, delta: 1 });
      lastCreating.set(group.id, Date.now());
      log("I", `Scale-up: setting group ${group.id} size to ${String(targetSize + 1)} instead of ${String(targetSize)} (max: ${String(group.maxSize)})`);
    }
    for (const id of creatingSince.keys()) if (!allCreating.includes(id)) creatingSince.delete(id);
    for (const node of nodes.items) await considerScaleDown(node, pods.items, shrinkable);
  }

  async function removeUnregistered(group: string, creating: readonly string[]): Promise<void> {
    for (const id of creating) {
      const since = creatingSince.get(id) ?? Date.now();
      creatingSince.set(id, since);
      if (Date.now() - since < provisionMs) continue;
      creatingSince.delete(id);
      log("I", `Removing 1 unregistered nodes for node group ${group}: ${id} has not registered within ${String(provisionMs / 1000)} s`);
      await rpc("nodeGroupDeleteNodes", { id: group, nodes: [{ name: id, providerID: id }] });
    }
  }

  async function considerScaleDown(node: V1Node, pods: readonly V1Pod[], shrinkable: ReadonlySet<string>): Promise<void> {
    const name = node.metadata?.name ?? "";
    const ready = node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
    const busy = pods.some((p) => p.spec?.nodeName === name && !["Succeeded", "Failed"].includes(p.status?.phase ?? "") &&
      !isPowerOffPod(p.metadata?.labels ?? {}) && p.metadata?.ownerReferences?.some((o) => o.kind === "DaemonSet") !== true);
    if (!ready || busy || node.spec?.taints?.some((t) => t.key === TO_BE_DELETED) === true) {
      emptySince.delete(name);
      return;
    }
    const ref = { name, providerID: node.spec?.providerID ?? "", labels: node.metadata?.labels ?? {} };
    const group = (await rpc("nodeGroupForNode", { node: ref })).nodeGroup?.id ?? "";
    if (!shrinkable.has(group)) {
      emptySince.delete(name);
      return;
    }
    const since = emptySince.get(name) ?? Date.now();
    if (!emptySince.has(name)) log("I", `Node ${name} is unneeded: no pods but DaemonSet ones; removed after ${String(unneededMs / 1000)} s`);
    emptySince.set(name, since);
    if (Date.now() - since < unneededMs) return;
    emptySince.delete(name);
    log("I", `Scale-down: removing empty node "${name}"`);
    const taint = { key: TO_BE_DELETED, value: String(Math.floor(Date.now() / 1000)), effect: "NoSchedule" };
    await core.patchNode({ name, body: { spec: { unschedulable: true, taints: [...(node.spec?.taints ?? []), taint] } } }, MERGE);
    log("I", `Successfully added ${TO_BE_DELETED} on node ${name}`);
    // As CA's --node-delete-delay-after-taint: plugpool's watch sees the taint before DeleteNodes asks for it.
    await sleep(1000);
    try {
      await rpc("nodeGroupDeleteNodes", { id: group, nodes: [ref] });
    } catch (error) {
      // As CA: a node that could not be deleted is given back to the scheduler.
      const untainted = { unschedulable: node.spec?.unschedulable === true ? true : null, taints: node.spec?.taints ?? [] };
      await core.patchNode({ name, body: { spec: untainted } }, MERGE);
      throw error;
    }
  }

  let stopping = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const schedule = (): void => {
    timer = setTimeout(() => {
      running = loop()
        .catch((error: unknown) => { log("E", `Loop failed: ${error instanceof Error ? error.message : String(error)}`); })
        .finally(() => { if (!stopping) schedule(); });
    }, intervalMs);
  };
  log("I", STAND_IN_NOTICE);
  schedule();

  let stopped: Promise<void> | undefined;
  const stop = async (): Promise<void> => {
    stopping = true;
    clearTimeout(timer);
    await running;
    // As CA on exit.
    await client.call("cleanup", {}, { deadlineMs: 2000 });
    client.close();
    rmSync(dir, { recursive: true, force: true });
    unregister();
  };
  const read = (): string => { try { return readFileSync(logPath, "utf8"); } catch { return ""; } };
  return {
    logPath,
    metricsUrl: "",
    running: () => !stopping,
    log: read,
    logTail: (lines = 60) => read().split("\n").slice(-lines - 1).join("\n"),
    stop: () => (stopped ??= stop()),
  };
}

function isUnschedulable(pod: V1Pod): boolean {
  return pod.status?.phase === "Pending" && pod.status.conditions?.some((c) =>
    c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable") === true;
}

/** `I1130 09:00:00.000000       1 standin.go:1] message`, as klog writes (local time); one line whatever the message. */
function klog(level: "I" | "E", message: string): string {
  const now = new Date();
  const two = (n: number): string => String(n).padStart(2, "0");
  const time = `${two(now.getHours())}:${two(now.getMinutes())}:${two(now.getSeconds())}.${String(now.getMilliseconds() * 1000).padStart(6, "0")}`;
  return `${level}${two(now.getMonth() + 1)}${two(now.getDate())} ${time} ${String(process.pid).padStart(7)} standin.go:1] ${message.replaceAll("\n", " ")}\n`;
}
