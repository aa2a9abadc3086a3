// plugpool's power-off pod, both ways: the manifest it creates, and how a pod is recognised as one of
// its own (by labels, never by name alone) and read back into the domain's view.
import { createHash } from "node:crypto";
import type { V1Pod } from "@kubernetes/client-node";
import { POWER_OFF_ANNOTATION, type PowerOffPodView } from "../../domain/model.ts";
import { list, metaOf, record, text, type Json } from "./wire.ts";

export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
export const COMPONENT_LABEL = "app.kubernetes.io/component";
/** The machine's name, shortened to a valid label value when it is longer than 63 characters. */
export const MACHINE_LABEL = "plugpool.io/machine";
/** The machine's full name (a label value cannot hold every node name). */
export const MACHINE_ANNOTATION = "plugpool.io/machine";

/** Selects plugpool's power-off pods and nothing else. */
export const POWER_OFF_POD_SELECTOR = `${MANAGED_BY_LABEL}=plugpool,${COMPONENT_LABEL}=power-off`;

const podNamePrefix = "plugpool-power-off-";
const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * `value` when it is a DNS label of at most `max` characters, else a readable prefix of it plus a hash of
 * the whole, so that distinct machines never share a name.
 */
function boundedName(value: string, max: number): string {
  if (value.length <= max && dnsLabel.test(value)) return value;
  const hash = createHash("sha256").update(value).digest("hex").slice(0, 10);
  const readable = value.toLowerCase().replace(/[^a-z0-9-]/g, "-").slice(0, max - hash.length - 1).replace(/-+$/, "");
  return readable === "" ? hash : `${readable}-${hash}`;
}

/** The pod's name for a machine: `plugpool-power-off-<machine>`, kept within 63 characters. */
export function powerOffPodName(machine: string): string {
  return podNamePrefix + boundedName(machine, 63 - podNamePrefix.length);
}

export function machineLabelValue(machine: string): string {
  return boundedName(machine, 63);
}

export interface PowerOffPodSpec {
  readonly namespace: string;
  readonly image: string;
  readonly machine: string;
  readonly nodeName: string;
  readonly startedAt: number;
}

/** A one-shot privileged pod bound to the node that shuts its OS down from the host's namespaces. */
export function powerOffPodManifest(spec: PowerOffPodSpec): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: powerOffPodName(spec.machine),
      namespace: spec.namespace,
      labels: {
        [MANAGED_BY_LABEL]: "plugpool",
        [COMPONENT_LABEL]: "power-off",
        [MACHINE_LABEL]: machineLabelValue(spec.machine),
      },
      annotations: { [POWER_OFF_ANNOTATION]: String(spec.startedAt), [MACHINE_ANNOTATION]: spec.machine },
    },
    spec: {
      // Bound directly: no scheduler decision, and it runs even on a cordoned, tainted node.
      nodeName: spec.nodeName,
      hostPID: true,
      tolerations: [{ operator: "Exists" }],
      restartPolicy: "Never",
      priorityClassName: "system-node-critical",
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 0,
      containers: [
        {
          name: "power-off",
          image: spec.image,
          command: ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "systemctl", "poweroff"],
          securityContext: { privileged: true },
          resources: { requests: { cpu: "10m", memory: "16Mi" }, limits: { memory: "64Mi" } },
        },
      ],
    },
  };
}

/** Carries both of plugpool's power-off labels (a pod without them is never plugpool's). */
export function isPowerOffPod(labels: Readonly<Record<string, string>>): boolean {
  return labels[MANAGED_BY_LABEL] === "plugpool" && labels[COMPONENT_LABEL] === "power-off";
}

const phases: readonly PowerOffPodView["phase"][] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];

/**
 * Waiting reasons of a container that will not start without a change to the pod or the node: a bad image or a
 * container the runtime cannot create. Passing ones (ContainerCreating, PodInitializing) are left out.
 */
const stuckReasons: ReadonlySet<string> = new Set([
  "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
]);

/** Why the pod cannot run, when its status says so. */
function stuckReason(status: Json | undefined): string | undefined {
  const conditions = list(status?.conditions).map(record);
  const scheduled = conditions.find((c) => c?.type === "PodScheduled");
  if (scheduled?.status === "False" && scheduled.reason === "Unschedulable") return "Unschedulable";
  for (const container of list(status?.containerStatuses).map(record)) {
    const waiting = text(record(record(container?.state)?.waiting)?.reason);
    if (waiting !== undefined && stuckReasons.has(waiting)) return waiting;
  }
  return undefined;
}

/** The domain's view of one of plugpool's power-off pods; undefined for any other pod. */
export function toPowerOffPodView(object: unknown): PowerOffPodView | undefined {
  const meta = metaOf(object);
  if (meta === undefined || !isPowerOffPod(meta.labels)) return undefined;
  const machine = meta.annotations[MACHINE_ANNOTATION] ?? meta.labels[MACHINE_LABEL];
  if (machine === undefined) return undefined;
  const started = Number(meta.annotations[POWER_OFF_ANNOTATION]);
  const startedAt = Number.isSafeInteger(started) && started > 0 ? started : meta.creationTimestamp ?? 0;
  const pod = record(object);
  const status = record(pod?.status);
  const phase = text(status?.phase) ?? "Pending";
  const stuck = stuckReason(status);
  return {
    machine,
    nodeName: text(record(pod?.spec)?.nodeName) ?? "",
    startedAt,
    phase: phases.find((p) => p === phase) ?? "Unknown",
    terminating: meta.deleting,
    ...(stuck === undefined ? {} : { stuck }),
  };
}
