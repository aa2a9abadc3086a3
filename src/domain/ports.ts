// What the domain needs from the outside world. Adapters implement these; tests use hand-written fakes.
import type { Machine, NodeView, PlugAddress, PlugReading, PowerOffPodView, DeviceSlice } from "./model.ts";
import type { PoolEvent } from "./events.ts";

/** Options every port and pool call accepts. */
export interface CallOptions {
  /** Aborts the call (deadline of the RPC, shutdown). */
  readonly signal?: AbortSignal;
}

/** Epoch milliseconds. The domain never reads the time any other way and never sleeps. */
export interface Clock {
  now(): number;
}

/**
 * The relay of one plug. Calls to one device are serialised by the implementation, and each call is
 * bounded by its own timeout. Failures throw PlugpoolError with a `plug-*` code and a message naming
 * the plug and its URL (never credentials).
 */
export interface PowerSwitch {
  /** Reads the relay (and the power sensor, when configured). Changes nothing. */
  read(plug: PlugAddress, options?: CallOptions): Promise<PlugReading>;
  /**
   * Switches the relay on and resolves with the state read back once it reports on. Idempotent: a relay
   * already on is success. Throws `plug-unreachable` if the state is not confirmed within the timeout.
   */
  turnOn(plug: PlugAddress, options?: CallOptions): Promise<PlugReading>;
  /** As turnOn, for off. */
  turnOff(plug: PlugAddress, options?: CallOptions): Promise<PlugReading>;
}

/**
 * The cluster as plugpool's watches see it. Synchronous: answers from memory, never from the network,
 * so CA calls never wait on the apiserver.
 */
export interface ClusterView {
  /** The Node with this name, if any. */
  nodeNamed(name: string): NodeView | undefined;
  /** The Node whose `spec.providerID` equals this, if any. */
  nodeWithProviderID(providerID: string): NodeView | undefined;
  /** plugpool's power-off pod for this machine, if one exists (including one being deleted). */
  powerOffPod(machine: string): PowerOffPodView | undefined;
  /** Last recorded non-empty set of DRA ResourceSlices published by this machine, if any. */
  templateSlices(machine: string): readonly DeviceSlice[] | undefined;
}

/**
 * The cluster writes a power-off needs. Every method is idempotent: what is already done is success,
 * what is already gone is success. None waits for the effect; the ClusterView shows it when it happens.
 * Failures throw PlugpoolError (`cluster-refused` when the apiserver rejected the request, with its reason).
 */
export interface NodeTeardown {
  /** Records on the Node that a power-off started at `startedAt` (annotation). A missing Node is success. */
  markPowerOff(nodeName: string, startedAt: number, options?: CallOptions): Promise<void>;
  /** Removes that record. A missing Node or record is success. */
  clearPowerOffMark(nodeName: string, options?: CallOptions): Promise<void>;
  /** Creates the power-off pod bound to `nodeName` (shuts the OS down). An existing one is success. */
  createPowerOffPod(machine: Machine, nodeName: string, startedAt: number, options?: CallOptions): Promise<void>;
  /** Requests deletion of the machine's power-off pod. A missing pod is success. */
  deletePowerOffPod(machine: Machine, options?: CallOptions): Promise<void>;
  /** Deletes the Node object. A missing Node is success. */
  deleteNode(nodeName: string, options?: CallOptions): Promise<void>;
}

/** Where the domain reports what it did and saw; adapters turn these into Events, metrics and logs. */
export interface Reporter {
  report(event: PoolEvent): void;
}
