// Plain readonly data of the domain. No classes: values are compared and copied as data.

/** The taint cluster-autoscaler puts on a node it has drained and is about to delete. */
export const TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler";

/**
 * Node annotation recording a power-off: the epoch ms it started, followed by ";pending" while the DeleteNodes
 * that wrote it has not yet succeeded (see `powerOffRecordOf`).
 */
export const POWER_OFF_ANNOTATION = "plugpool.io/power-off-started-at";

/** A power-off recorded on a Node. */
export interface PowerOffRecord {
  readonly startedAt: number;
  /**
   * Written by a DeleteNodes that had not succeeded yet. Such a record found without the call that wrote it is
   * one cluster-autoscaler was told failed (or never heard the outcome of): it is undone, never resumed.
   */
  readonly pending: boolean;
}

const PENDING_SUFFIX = ";pending";

/** The annotation's value for `record`. */
export function formatPowerOffRecord(record: PowerOffRecord): string {
  return `${record.startedAt}${record.pending ? PENDING_SUFFIX : ""}`;
}

/**
 * The power-off recorded on `node`, if any. Only a plain number is a committed record; anything else plugpool
 * did not write as one (edited by hand, or cut short) counts as pending, so it is undone rather than acted on.
 */
export function powerOffRecordOf(node: NodeView): PowerOffRecord | undefined {
  const value = node.annotations[POWER_OFF_ANNOTATION];
  if (value === undefined) return undefined;
  if (/^\d{1,16}$/.test(value)) return { startedAt: Number(value), pending: false };
  const startedAt = Number(value.endsWith(PENDING_SUFFIX) ? value.slice(0, -PENDING_SUFFIX.length) : Number.NaN);
  return { startedAt, pending: true };
}

/** The error code of a creating instance whose queued plug-on failed: nothing was switched on. */
export const PLUG_ON_FAILED = "plug-on-failed";

/** The error code of a creating instance whose plug read off before it registered. */
export const PLUG_OFF_WHILE_BOOTING = "plug-off-while-booting";

/** Node annotation that holds a running machine: never chosen for scale-up, never powered off. */
export const HOLD_ANNOTATION = "plugpool.io/hold";

/**
 * The power control of one machine, as the domain knows it: an opaque reference that the adapter of its backend
 * (a smart plug, a home-automation hub, a server's BMC, ...) resolves to what it needs. The domain never looks
 * inside; it asks the PowerSwitch port to read and switch it.
 */
export interface PowerControl {
  /** The backend that drives it (e.g. "esphome"); the composition root routes calls by it. */
  readonly backend: string;
  /** Unique across the pool: two machines never share a power control. */
  readonly key: string;
  /** What and where it is, for people (no credentials). */
  readonly label: string;
  /** It reports the machine's draw in watts, so a cut can wait for the draw to fall to standby. */
  readonly measuresWatts: boolean;
  /**
   * It shuts the machine's OS down itself (a BMC's graceful shutdown), and is configured to: a power-off asks it
   * instead of creating the power-off pod. Absent: false.
   */
  readonly shutsDown?: boolean;
  /**
   * The identity its device must answer with (`DeviceIdentity.id`), pinned in the configuration: it wins over the
   * one plugpool learned, so setting it is how an operator accepts a replaced device. Absent: learned on first
   * contact.
   */
  readonly identity?: string;
}

/** A configured machine: one node of one group, powered through one power control. */
export interface Machine {
  readonly name: string;
  readonly group: string;
  readonly power: PowerControl;
  /** Position in config order across all groups; scale-up's `config` order prefers lower positions. */
  readonly index: number;
  /** Held in config: never chosen for scale-up and never powered off by plugpool. */
  readonly hold: boolean;
  /**
   * What the machine draws when on and idle, in watts, when configured: off time times this is the energy
   * avoided, and scale-up order `efficient` prefers the lowest.
   */
  readonly idleWatts?: number;
}

/** The effect of a Node taint, as Kubernetes spells it. */
export type TaintEffect = "NoSchedule" | "PreferNoSchedule" | "NoExecute";

/** A Node taint. */
export interface Taint {
  readonly key: string;
  readonly value: string;
  readonly effect: TaintEffect;
}

/** What a new machine of a group offers, for scale-up from zero. Quantities are Kubernetes quantity strings. */
export interface NodeTemplate {
  readonly cpu: string;
  readonly memory: string;
  readonly pods: string;
  /** Further allocatable resources, e.g. `ephemeral-storage`, `nvidia.com/gpu`. */
  readonly resources: Readonly<Record<string, string>>;
  readonly labels: Readonly<Record<string, string>>;
  readonly taints: readonly Taint[];
}

/** A configured node group: its size bounds, its template and its machines. */
export interface NodeGroupSpec {
  readonly id: string;
  readonly minSize: number;
  readonly maxSize: number;
  readonly template: NodeTemplate;
  /** In config order. */
  readonly machines: readonly Machine[];
}

/** Timings of the power-off saga. */
export interface PowerOffSettings {
  /** Longest wait for the node to go NotReady after the power-off pod was created. */
  readonly notReadyTimeoutMs: number;
  /**
   * When the node is still Ready after `notReadyTimeoutMs` (the OS did not shut down): "keep-power" aborts the
   * power-off and reports it; "cut" switches the plug off anyway (a hard cut, reported as such).
   */
  readonly onShutdownTimeout: "keep-power" | "cut";
  /** How many times a power-off pod that failed or cannot run is replaced before the shutdown counts as failed. */
  readonly maxPodAttempts: number;
  /** Wait after NotReady (or after the timeout) before the plug is cut. */
  readonly graceMs: number;
  /** With a power sensor: the draw at or below which the machine counts as off. */
  readonly standbyWatts: number;
  /** With a power sensor: how long the draw must stay at or below standby before the cut. */
  readonly standbyWindowMs: number;
  /** First retry delay for a failing step (doubles up to `maxRetryMs`). */
  readonly retryMs: number;
  readonly maxRetryMs: number;
}

/**
 * Which usable machines a scale-up switches on first: `config` in config order; `least-used` those with the
 * fewest seconds powered on (as plugpool saw them since it started); `efficient` the lowest `idleWatts` (machines
 * without it last). Ties keep config order, and plugs whose last read failed always come last.
 */
export type ScaleUpOrder = "config" | "least-used" | "efficient";

/** Inrush protection: plug-ons are staggered across the whole pool (machines often share a circuit). */
export interface ScaleUpSettings {
  /** At most this many plug-ons in any window of `powerOnIntervalMs`, across the pool; 0 means no limit. */
  readonly maxPowerOnsPerInterval: number;
  readonly powerOnIntervalMs: number;
  /** Absent: `config`. */
  readonly order?: ScaleUpOrder;
}

/** Applies when `PoolConfig.scaleUp` is absent: no limit. */
export const DEFAULT_SCALE_UP: ScaleUpSettings = { maxPowerOnsPerInterval: 0, powerOnIntervalMs: 10_000 };

/** How long a machine whose boot failed is left out of scale-ups: `initialMs`, doubling per failure up to `maxMs`. */
export interface QuarantineSettings {
  /** 0 turns the quarantine off. */
  readonly initialMs: number;
  readonly maxMs: number;
}

/** Applies when `PoolConfig.quarantine` is absent: 10 minutes, doubling up to 4 hours. */
export const DEFAULT_QUARANTINE: QuarantineSettings = { initialMs: 600_000, maxMs: 14_400_000 };

/** Everything a pool needs from the configuration, validated and normalised. */
export interface PoolConfig {
  /** `spec.providerID` of a machine's Node is this prefix followed by the machine name. */
  readonly providerIDPrefix: string;
  readonly gpuLabel: string;
  readonly gpuTypes: readonly string[];
  readonly powerOff: PowerOffSettings;
  /** Absent: DEFAULT_SCALE_UP. */
  readonly scaleUp?: ScaleUpSettings;
  /** Absent: DEFAULT_QUARANTINE. */
  readonly quarantine?: QuarantineSettings;
  readonly groups: readonly NodeGroupSpec[];
}

/** A plug as last read: `unknown` until it has been read successfully once. */
export type PlugState = "on" | "off" | "unknown";

/** One successful read of a plug. */
export interface PlugReading {
  readonly on: boolean;
  /** Present when the plug has a power sensor and it answered. */
  readonly watts?: number;
}

/** A Node as the cluster shows it (from a watch). */
export interface NodeView {
  readonly name: string;
  /** The object's uid: a Node deleted and registered again under the same name has another. */
  readonly uid: string;
  /** `spec.providerID`, "" when unset. */
  readonly providerID: string;
  /** The Ready condition is True. */
  readonly ready: boolean;
  /** When the Ready condition last changed (epoch ms), when known. */
  readonly readyChangedAt?: number;
  /** When the Node object was created (`metadata.creationTimestamp`, epoch ms), when known. */
  readonly createdAt?: number;
  readonly taints: readonly Taint[];
  readonly annotations: Readonly<Record<string, string>>;
  readonly labels: Readonly<Record<string, string>>;
}

/** plugpool's own power-off pod for a machine, as the cluster shows it. */
export interface PowerOffPodView {
  readonly machine: string;
  readonly nodeName: string;
  /** Epoch ms the power-off started (recorded on the pod). */
  readonly startedAt: number;
  readonly phase: "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";
  /** Deletion has been requested; the pod is on its way out. */
  readonly terminating: boolean;
  /**
   * Why the pod cannot run, when the cluster says so: "Unschedulable", or the waiting reason of its container
   * ("ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", ...). Absent while it runs or may still.
   */
  readonly stuck?: string;
}

/** A power-on plugpool made: its licence to switch the machine off again while it has no Node. */
export interface PowerOnRecord {
  /** Epoch ms the power-on was recorded (just before the plug was switched on). */
  readonly at: number;
  /** Why: "scale-up" for IncreaseSize, "queued" for a plug-on the inrush limit held back. */
  readonly why: string;
}

/** A machine left out of scale-ups after failed boots, as recorded on the cluster. */
export interface QuarantineRecord {
  /** Epoch ms when the machine may be chosen again. */
  readonly until: number;
  /** Failed boots in a row (reset by a registration). */
  readonly failures: number;
}

/** A node as cluster-autoscaler names it in a request (real Node or one of its fake nodes). */
export interface NodeRef {
  readonly name: string;
  readonly providerID: string;
}

/** A group as cluster-autoscaler lists it. */
export interface NodeGroupInfo {
  readonly id: string;
  readonly minSize: number;
  readonly maxSize: number;
  readonly debug: string;
}

/** The state of an instance as cluster-autoscaler sees it (InstanceStatus in externalgrpc.proto). */
export type InstanceState = "creating" | "running" | "deleting";

/** What cluster-autoscaler sees of a machine. `id` is always providerIDPrefix + machine name. */
export interface Instance {
  readonly id: string;
  readonly state: InstanceState;
  /** Set only for a creating instance whose boot plugpool knows has failed. */
  readonly error?: { readonly code: string; readonly message: string };
}

/** A machine left out of scale-ups after failed boots, as `Pool.quarantine()` lists it. */
export interface QuarantineEntry {
  readonly machine: string;
  readonly group: string;
  /** Epoch ms when the machine may be chosen again. */
  readonly until: number;
  /** Failed boots in a row (reset by a registration). */
  readonly failures: number;
}

/**
 * A machine's power use as plugpool observed it since it started (memory only: a restart starts from zero), as
 * `Pool.usage()` lists it. Totals grow at each plug reading, never between them.
 */
export interface MachineUsage {
  readonly machine: string;
  readonly group: string;
  readonly plug: PlugState;
  /** The power sensor's last value; absent without a sensor or before it answered. */
  readonly watts?: number;
  readonly poweredOnSeconds: number;
  readonly poweredOffSeconds: number;
  /** Integrated from the power sensor's readings; absent without a sensor. */
  readonly energyUsedKwh?: number;
  /** Time off times `idleWatts`; absent without `idleWatts`. */
  readonly energyAvoidedKwh?: number;
}

/** A DRA device attribute: exactly one kind of value. */
export type DeviceAttribute =
  | { readonly int: number }
  | { readonly bool: boolean }
  | { readonly string: string }
  | { readonly version: string };

/** One DRA device of a ResourceSlice. */
export interface Device {
  readonly name: string;
  readonly attributes: Readonly<Record<string, DeviceAttribute>>;
  /** Capacity quantities by name. */
  readonly capacity: Readonly<Record<string, string>>;
}

/** The node-local part of a `resource.k8s.io/v1` ResourceSlice that a template needs. */
export interface DeviceSlice {
  readonly driver: string;
  readonly pool: { readonly name: string; readonly generation: number; readonly resourceSliceCount: number };
  readonly nodeName: string;
  readonly devices: readonly Device[];
}

/** A template Node as plain data; the gRPC adapter encodes it. */
export interface TemplateNode {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly capacity: Readonly<Record<string, string>>;
  readonly allocatable: Readonly<Record<string, string>>;
  readonly taints: readonly Taint[];
  readonly conditions: readonly { readonly type: string; readonly status: "True" | "False"; readonly reason: string }[];
}
