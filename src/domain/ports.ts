// What the domain needs from the outside world. Adapters implement these; tests use hand-written fakes.
import type {
  DeviceSlice,
  Machine,
  NodeView,
  PowerControl,
  PlugReading,
  PowerOffPodView,
  PowerOffRecord,
  PowerOnRecord,
  QuarantineRecord,
} from "./model.ts";
import type { PoolEvent } from "./events.ts";

/** Options every port and pool call accepts. */
export interface CallOptions {
  /** Aborts the call (deadline of the RPC, shutdown). */
  readonly signal?: AbortSignal;
}

/** The time. The domain never reads it any other way and never sleeps. */
export interface Clock {
  /** Epoch milliseconds: the wall clock, which may step either way (NTP, a hand set). */
  now(): number;
  /**
   * Milliseconds from an arbitrary origin that never steps and never goes back (as `performance.now()`): for
   * spacing acts apart, which a wall clock stepping back would stall and stepping forward would let through.
   */
  monotonic(): number;
}

/**
 * Asked by the PowerSwitch at the plug: after the device's queue slot is acquired and immediately before the
 * switch-off request is sent. Resolves true to let the request go; false (or a rejection) sends nothing.
 */
export type CutGuard = (options?: CallOptions) => Promise<boolean>;

/**
 * What a device says it is, as it said it just now: ESPHome's friendly name, a Shelly's id and MAC, a Redfish
 * System's UUID and serial number. An address (a URL, a DHCP lease) is not an identity: it may reach another
 * device tomorrow.
 */
export interface DeviceIdentity {
  /** The backend's spelling of the identity, compared whole (e.g. `name "plug-worker-1"`). Never a secret. */
  readonly id: string;
  /** Seconds since the device started, where it tells: less than before means it restarted meanwhile. */
  readonly uptimeSeconds?: number;
}

/**
 * Asked by the PowerSwitch with the device's slot held, immediately before a switch command is sent (and before the
 * CutGuard, where there is one), with what the device said it is in that same slot. Resolves true to let the
 * command go; false (or a rejection) sends nothing, and the call throws `device-mismatch`. A backend whose address
 * is its identity (a hub's entity id) never asks it.
 */
export type DeviceCheck = (seen: DeviceIdentity, options?: CallOptions) => Promise<boolean>;

/**
 * The options of a read. With `device`, the device is asked what it is in the read's own slot, and the check asked
 * with its answer before the state is read (a refusal reads nothing and throws `device-mismatch`): a reading that
 * stands in for a cut (the plug reads off, so the machine has no power) is as checked as the cut. Without it a
 * read stays as cheap as the device allows (a Refresh reads every plug).
 */
export interface ReadOptions extends CallOptions {
  readonly device?: DeviceCheck;
}

/** The options of a switch command: the call's, and the check of the device it goes to. */
export interface SwitchOptions extends CallOptions {
  readonly device: DeviceCheck;
}

/**
 * The power control of a machine (a plug's relay, a hub's entity, a BMC). Calls to one device are serialised by
 * the implementation (it knows which controls share a device), and
 * each call is bounded by its own timeout, including its wait behind other calls to the same device. Failures
 * throw PlugpoolError with a `plug-*` code and a message naming the plug (never credentials, never anything
 * the device sent). `plug-unconfirmed` means the command may have reached the device: its outcome is unknown,
 * never "did not happen"; every other code means the command was not carried out.
 */
export interface PowerSwitch {
  /** Reads the relay (and the power sensor, when configured). Changes nothing. */
  read(control: PowerControl, options?: ReadOptions): Promise<PlugReading>;
  /**
   * Switches the relay on and resolves with the state read back once it reports on. Idempotent: a relay
   * already on is success. Throws `plug-unconfirmed` when the command was sent but the state not confirmed.
   */
  turnOn(control: PowerControl, options: SwitchOptions): Promise<PlugReading>;
  /**
   * As turnOn, for off, and only if `mayCut` allows it when asked at the plug (see CutGuard). A refusal sends
   * nothing and throws `unsafe`.
   */
  turnOff(control: PowerControl, mayCut: CutGuard, options: SwitchOptions): Promise<PlugReading>;
  /**
   * Asks the machine's OS to shut down through the control itself (`PowerControl.shutsDown`); the power stays
   * on. Only if `mayShutDown` allows it when asked at the device, as `turnOff` asks `mayCut`: a refusal sends
   * nothing and throws `unsafe`. Resolves once the control accepted the request; asking a machine already
   * shutting down or off is success. Needed only when some control has `shutsDown`.
   */
  shutdown?(control: PowerControl, mayShutDown: CutGuard, options: SwitchOptions): Promise<void>;
}

/**
 * The cluster as plugpool's watches see it. Synchronous: answers from memory, never from the network,
 * so CA calls never wait on the apiserver.
 */
export interface ClusterView {
  /** The Node with this name, if any. */
  nodeNamed(name: string): NodeView | undefined;
  /** Every Node whose `spec.providerID` equals this (more than one is a misconfiguration). */
  nodesWithProviderID(providerID: string): readonly NodeView[];
  /**
   * Every Node created after `at` (epoch ms), and every Node whose creation time is not known. What they claim is
   * the domain's business: it looks among them for a machine of its own registered under another name.
   */
  nodesCreatedAfter(at: number): readonly NodeView[];
  /** plugpool's power-off pod for this machine, if one exists (including one being deleted). */
  powerOffPod(machine: string): PowerOffPodView | undefined;
  /** Last recorded non-empty set of DRA ResourceSlices published by this machine, if any. */
  templateSlices(machine: string): readonly DeviceSlice[] | undefined;
  /**
   * The view is known to be current: its watches have heard from the apiserver recently. While false no
   * power is cut (the view may be arbitrarily old).
   */
  current(): boolean;
}

/** Reads straight from the apiserver, for the checks right before an irreversible act. */
export interface NodeLookup {
  /**
   * Every Node that claims a machine, read now: the Node named `name` and every Node whose `spec.providerID`
   * is `providerID`. Throws PlugpoolError (`cluster-refused`) when the apiserver cannot answer.
   */
  nodesClaiming(name: string, providerID: string, options?: CallOptions): Promise<readonly NodeView[]>;
  /**
   * Resolves once the ClusterView shows the cluster as the apiserver has it now (its current version, read when
   * asked), or once that wait is given up: after a short bound, at the call's signal, or when the apiserver cannot
   * answer. Never throws. For a refusal that a view a moment behind would make wrongly: cluster-autoscaler writes
   * its taint just before it calls.
   */
  viewCaughtUp(options?: CallOptions): Promise<void>;
}

/**
 * What plugpool records on the cluster about its own power actions, so that they survive a restart: the
 * power-ons it made (its only licence to cut an unregistered machine) and the quarantine of machines whose boot
 * failed. Reads answer from memory. Another instance's writes are never overwritten: a write that finds one takes
 * the other's records into memory, and a key the other changed keeps the other's value.
 */
export interface PowerRecords {
  /** The power-on plugpool made of this machine that has not ended yet, if any. */
  powerOn(machine: string): PowerOnRecord | undefined;
  /** Records a power-on; resolves once it is stored on the cluster (throws `cluster-refused` if it cannot be). */
  recordPowerOn(machine: string, record: PowerOnRecord, options?: CallOptions): Promise<void>;
  /** Ends the machine's power-on record: `powerOn` answers undefined at once; the store keeps trying to write it. */
  endPowerOn(machine: string): void;
  /** The machine's quarantine as last set, if any. */
  quarantine(machine: string): QuarantineRecord | undefined;
  /** Sets (or with undefined, clears) the machine's quarantine: at once in memory, stored in the background. */
  setQuarantine(machine: string, record: QuarantineRecord | undefined): void;
  /** The identity plugpool learned of the machine's power device (`DeviceIdentity.id`), if it has one. */
  deviceIdentity(machine: string): string | undefined;
  /**
   * Stores the identity learned of the machine's power device; resolves once it is stored on the cluster (throws
   * `cluster-refused` if it cannot be), so that a restart confirms the device against it rather than learning anew.
   */
  recordDeviceIdentity(machine: string, id: string, options?: CallOptions): Promise<void>;
  /**
   * Resolves once every change made so far to the machine's records is stored on the cluster, writing what still
   * waits at once: a background write is lost if plugpool is killed before it lands, and a restart then reads the
   * record as it was. Throws `cluster-refused` when they cannot be stored within the call.
   */
  stored(machine: string, options?: CallOptions): Promise<void>;
}

/**
 * The cluster writes a power-off needs. Every method is idempotent: what is already done is success,
 * what is already gone is success. None waits for the effect; the ClusterView shows it when it happens.
 * Failures throw PlugpoolError (`cluster-refused` when the apiserver rejected the request, with its reason).
 */
export interface NodeTeardown {
  /**
   * Records the power-off on the Node (its annotation, `formatPowerOffRecord`), replacing any record there. A
   * missing Node is success.
   */
  markPowerOff(nodeName: string, record: PowerOffRecord, options?: CallOptions): Promise<void>;
  /** Removes that record. A missing Node or record is success. */
  clearPowerOffMark(nodeName: string, options?: CallOptions): Promise<void>;
  /** Creates the power-off pod bound to `nodeName` (shuts the OS down). An existing one is success. */
  createPowerOffPod(machine: Machine, nodeName: string, startedAt: number, options?: CallOptions): Promise<void>;
  /**
   * Requests deletion of the machine's power-off pod, asking the apiserver (not a view): resolves true when the
   * pod is gone, false while it is still terminating.
   */
  deletePowerOffPod(machine: Machine, options?: CallOptions): Promise<boolean>;
  /**
   * Deletes the Node object if it is still the one with `uid` (a precondition the apiserver checks). A missing
   * Node, or one registered anew meanwhile (another uid, left as it is), is success: the Node judged is gone.
   */
  deleteNode(nodeName: string, uid: string, options?: CallOptions): Promise<void>;
}

/**
 * Whether this process is the one plugpool that may act: switch plugs, create or delete pods and Nodes, write
 * records. Judged by the process on its own monotonic clock, so it turns false by itself, without any call, when
 * the process cannot renew its claim in time. Asked right before every irreversible act.
 */
export interface Leadership {
  /** True while this process may act. */
  acting(): boolean;
  /** Who acts while this process does not (an instance's identity, for messages); undefined when none is known. */
  holder(): string | undefined;
}

/** Where the domain reports what it did and saw; adapters turn these into Events, metrics and logs. */
export interface Reporter {
  report(event: PoolEvent): void;
}
