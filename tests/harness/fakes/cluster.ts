import type {
  ClusterView,
  DeviceSlice,
  Machine,
  NodeLookup,
  NodeTeardown,
  NodeView,
  PowerOffPodView,
  PowerOffRecord,
} from "../../../src/domain/index.ts";
import { formatPowerOffRecord, POWER_OFF_ANNOTATION, PlugpoolError, TO_BE_DELETED_TAINT } from "../../../src/domain/index.ts";

export type TeardownOp =
  | "markPowerOff"
  | "clearPowerOffMark"
  | "createPowerOffPod"
  | "deletePowerOffPod"
  | "deleteNode"
  | "nodesClaiming"
  | "viewCaughtUp";

export interface TeardownCall {
  readonly op: TeardownOp;
  /** The node name, or the machine name for pod operations. */
  readonly target: string;
}

/** A Node to add; everything but the name has a default (no providerID, Ready, no taints). */
export type NodeSpec = Partial<NodeView> & { readonly name: string };

/**
 * The cluster as plugpool sees it, with real state: Nodes, power-off pods, template slices. Teardown writes
 * change that state at once (a deleted pod turns terminating until `finishPodDeletion`). Every write and fresh
 * read is logged and passed to `onCall` at the moment it is made (a fresh read answers what the state is after
 * `onCall`). Each call lands after `latency()` turns of the event loop (default: one microtask), so calls made
 * together may land in any order with other work between them. As a ClusterView it shows the truth;
 * `LaggingView` shows it late.
 */
export class FakeCluster implements ClusterView, NodeTeardown, NodeLookup {
  readonly calls: TeardownCall[] = [];
  onCall: ((call: TeardownCall) => void) | undefined;
  /** What `current()` answers: false plays watches that have not heard from the apiserver for too long. */
  viewCurrent = true;
  /** Event-loop turns each call takes to land (0: one microtask). */
  latency: () => number = () => 0;
  /** The apiserver's clock: a Node added without `createdAt` is created now (absent: its creation time is unknown). */
  now: (() => number) | undefined;
  /** What `viewCaughtUp` does to the view that lags (a `LaggingView`'s sync); by default nothing, as a view given up on. */
  catchUpView: (() => void) | undefined;
  readonly #nodes = new Map<string, NodeView>();
  readonly #pods = new Map<string, PowerOffPodView>();
  readonly #slices = new Map<string, readonly DeviceSlice[]>();
  readonly #failNext = new Map<TeardownOp, (Error | undefined)[]>();
  readonly #held = new Map<string, Promise<void>>();
  #created = 0;

  /** Adds the Node, or registers it anew (another uid) when one of that name exists. */
  addNode(spec: NodeSpec): NodeView {
    const createdAt = this.now?.();
    // Each Node object created gets a uid of its own, as the apiserver gives one.
    const uid = `uid-${spec.name}-${++this.#created}`;
    const node: NodeView = { providerID: "", ready: true, taints: [], annotations: {}, labels: {}, uid, ...(createdAt !== undefined && { createdAt }), ...spec };
    this.#nodes.set(node.name, node);
    return node;
  }

  removeNode(name: string): void {
    this.#nodes.delete(name);
  }

  nodes(): NodeView[] {
    return [...this.#nodes.values()];
  }

  update(name: string, change: (node: NodeView) => Partial<NodeView>): void {
    const node = this.#nodes.get(name);
    if (node !== undefined) this.#nodes.set(name, { ...node, ...change(node) });
  }

  /** Adds cluster-autoscaler's ToBeDeleted taint. */
  taint(name: string): void {
    this.update(name, (n) =>
      n.taints.some((t) => t.key === TO_BE_DELETED_TAINT)
        ? {}
        : { taints: [...n.taints, { key: TO_BE_DELETED_TAINT, value: "1800000000", effect: "NoSchedule" }] },
    );
  }

  untaint(name: string): void {
    this.update(name, (n) => ({ taints: n.taints.filter((t) => t.key !== TO_BE_DELETED_TAINT) }));
  }

  setReady(name: string, ready: boolean, at?: number): void {
    this.update(name, () => (at === undefined ? { ready } : { ready, readyChangedAt: at }));
  }

  annotate(name: string, key: string, value: string | undefined): void {
    this.update(name, (n) => {
      const others = Object.entries(n.annotations).filter(([k]) => k !== key);
      return { annotations: Object.fromEntries(value === undefined ? others : [...others, [key, value]]) };
    });
  }

  setSlices(machine: string, slices: readonly DeviceSlice[] | undefined): void {
    if (slices === undefined) this.#slices.delete(machine);
    else this.#slices.set(machine, slices);
  }

  /** Puts a power-off pod in place directly (as left by an earlier run). */
  addPod(pod: PowerOffPodView): void {
    this.#pods.set(pod.machine, pod);
  }

  pods(): PowerOffPodView[] {
    return [...this.#pods.values()];
  }

  /** Terminating pods are gone now. */
  finishPodDeletion(): void {
    for (const [machine, pod] of this.#pods) if (pod.terminating) this.#pods.delete(machine);
  }

  /** Of the next calls of `op` (after any failures already planned), `after` land and the one after them fails. */
  failNext(op: TeardownOp, error: Error = new PlugpoolError("cluster-refused", `${op}: the apiserver said no`), after = 0): void {
    this.#failNext.set(op, [...(this.#failNext.get(op) ?? []), ...Array<undefined>(after).fill(undefined), error]);
  }

  /**
   * The next `op` on `target` waits until the returned function is called (an apiserver slow to answer one
   * write while others land).
   */
  hold(op: TeardownOp, target: string): () => void {
    let release = (): void => undefined;
    this.#held.set(`${op} ${target}`, new Promise<void>((resolve) => { release = resolve; }));
    return () => { release(); };
  }

  /** Pending one-shot failures are dropped. */
  clearFaults(): void {
    this.#failNext.clear();
  }

  callsOf(op: TeardownOp): TeardownCall[] {
    return this.calls.filter((c) => c.op === op);
  }

  nodeNamed(name: string): NodeView | undefined {
    return this.#nodes.get(name);
  }

  nodesWithProviderID(providerID: string): readonly NodeView[] {
    return providerID === "" ? [] : [...this.#nodes.values()].filter((n) => n.providerID === providerID);
  }

  nodesCreatedAfter(at: number): readonly NodeView[] {
    return [...this.#nodes.values()].filter((n) => n.createdAt === undefined || n.createdAt > at);
  }

  current(): boolean {
    return this.viewCurrent;
  }

  async viewCaughtUp(): Promise<void> {
    try {
      await this.#call("viewCaughtUp", "");
    } catch {
      return; // given up: the view stays as it is
    }
    this.catchUpView?.();
  }

  async nodesClaiming(name: string, providerID: string): Promise<readonly NodeView[]> {
    await this.#call("nodesClaiming", name);
    return [...this.#nodes.values()].filter((n) => n.name === name || (providerID !== "" && n.providerID === providerID));
  }

  powerOffPod(machine: string): PowerOffPodView | undefined {
    return this.#pods.get(machine);
  }

  templateSlices(machine: string): readonly DeviceSlice[] | undefined {
    return this.#slices.get(machine);
  }

  async markPowerOff(nodeName: string, record: PowerOffRecord): Promise<void> {
    await this.#call("markPowerOff", nodeName);
    this.annotate(nodeName, POWER_OFF_ANNOTATION, formatPowerOffRecord(record));
  }

  async clearPowerOffMark(nodeName: string): Promise<void> {
    await this.#call("clearPowerOffMark", nodeName);
    this.annotate(nodeName, POWER_OFF_ANNOTATION, undefined);
  }

  async createPowerOffPod(machine: Machine, nodeName: string, startedAt: number): Promise<void> {
    await this.#call("createPowerOffPod", machine.name);
    if (this.#pods.has(machine.name)) return;
    this.#pods.set(machine.name, { machine: machine.name, nodeName, startedAt, phase: "Pending", terminating: false });
  }

  async deletePowerOffPod(machine: Machine): Promise<boolean> {
    await this.#call("deletePowerOffPod", machine.name);
    const pod = this.#pods.get(machine.name);
    if (pod !== undefined) this.#pods.set(machine.name, { ...pod, terminating: true });
    return pod === undefined;
  }

  /** As the apiserver with a uid precondition: a Node of that name with another uid stays. */
  async deleteNode(nodeName: string, uid: string): Promise<void> {
    await this.#call("deleteNode", nodeName);
    if (this.#nodes.get(nodeName)?.uid === uid) this.#nodes.delete(nodeName);
  }

  async #call(op: TeardownOp, target: string): Promise<void> {
    const call = { op, target };
    this.calls.push(call);
    this.onCall?.(call);
    await Promise.resolve();
    for (let turns = this.latency(); turns > 0; turns--) await new Promise((r) => setImmediate(r));
    const held = this.#held.get(`${op} ${target}`);
    this.#held.delete(`${op} ${target}`);
    if (held !== undefined) await held;
    const next = this.#failNext.get(op)?.shift();
    if (next !== undefined) throw next;
  }
}
