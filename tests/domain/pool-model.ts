// The world the property test drives (operations in pool-ops.ts) and the invariants checked at the moment of
// every plug and cluster write and after every step.
import type { Machine, NodeRef, NodeView, QuarantineSettings, ScaleUpSettings } from "../../src/domain/index.ts";
import { HOLD_ANNOTATION, POWER_OFF_ANNOTATION, TO_BE_DELETED_TAINT, isPlugpoolError } from "../../src/domain/index.ts";
import type { CaOp, NodeEvent, Op } from "./pool-ops.ts";
import { GROUPS, NAMES } from "./pool-ops.ts";
import { PREFIX, World } from "../fakes/world.ts";

/** Inrush limits a run may use: none (the default), or a tight one that queues most scale-ups. */
export const LIMITS = [0, 1, 2] as const;
const INTERVAL_MS = 10_000;
/** Short enough for the walks' ticks to end quarantines. */
const QUARANTINE: QuarantineSettings = { initialMs: 60_000, maxMs: 240_000 };

/** What a plug command happens during, as the test itself tracks it (independently of the domain). */
interface InFlight {
  /** Machines named by DeleteNodes calls in progress. */
  readonly delete: Map<string, number>;
  /** Groups with a DecreaseTargetSize or IncreaseSize in progress. */
  readonly decrease: Map<string, number>;
  readonly increase: Map<string, number>;
  run: number;
}

/**
 * A world under test, starting with a-1 and b-1 running: the fakes record every breach of an invariant at the
 * moment it happens.
 */
export class Model {
  readonly w: World;
  readonly limit: number;

  static async create(limit = 0): Promise<Model> {
    const model = new Model(limit);
    model.w.register("a-1");
    model.w.register("b-1");
    await model.w.pool.refresh();
    return model;
  }

  readonly violations: string[] = [];
  #armed: { machine: Machine; event: NodeEvent } | undefined;
  readonly #inFlight: InFlight = { delete: new Map(), decrease: new Map(), increase: new Map(), run: 0 };
  /** Machines CA asked to delete since their plug last went on: only their power-offs may cut. */
  readonly #deleteRequested = new Set<string>();
  /** When each turnOn was sent. */
  readonly #powerOns: number[] = [];

  constructor(limit = 0) {
    this.limit = limit;
    const scaleUp: ScaleUpSettings | undefined =
      limit === 0 ? undefined : { maxPowerOnsPerInterval: limit, powerOnIntervalMs: INTERVAL_MS };
    this.w = new World({ groups: GROUPS, on: ["a-1", "b-1"], quarantine: QUARANTINE, ...(scaleUp && { scaleUp }) });
    this.w.power.onCall = (call) => {
      const machine = this.w.machines().find((x) => x.plug.url === call.plug.url && x.plug.switch === call.plug.switch);
      if (machine === undefined) {
        this.violations.push(`${call.op} of an unconfigured plug ${call.plug.url}`);
        return;
      }
      if (call.op === "turnOff") this.#checkCut(machine);
      if (call.op === "turnOn") this.#checkOn(machine);
      this.#fireArmed();
    };
    this.w.cluster.onCall = (call) => {
      if (call.op === "createPowerOffPod" && this.w.cluster.powerOffPod(call.target) !== undefined) {
        this.violations.push(`second createPowerOffPod for ${call.target} while one exists`);
      }
      if (call.op === "deleteNode") {
        const owner = this.w.machines().find((x) => this.#nodesOf(x).some((n) => n.name === call.target));
        if (owner === undefined) this.violations.push(`deleteNode of ${call.target}, which is no machine's`);
        else if (this.w.cluster.powerOffPod(owner.name) !== undefined) {
          this.violations.push(`deleteNode of ${call.target} while the power-off pod of ${owner.name} exists`);
        }
      }
      this.#fireArmed();
    };
  }

  machine(i: number): Machine {
    return this.w.machine(NAMES[i] ?? "a-1");
  }

  async apply(o: Op): Promise<void> {
    const { w } = this;
    switch (o.kind) {
      case "parallel":
        await Promise.all([this.#ca(o.a), this.#ca(o.b)]);
        return;
      case "increase":
      case "delete":
      case "decrease":
      case "refresh":
      case "run":
        await this.#ca(o);
        return;
      case "register":
        this.#register(this.machine(o.m), o.mode);
        return;
      case "node":
        this.#nodeEvent(this.machine(o.m), o.event);
        return;
      case "ready":
        for (const n of this.#nodesOf(this.machine(o.m))) w.cluster.setReady(n.name, o.ready, w.clock.now());
        return;
      case "hold":
        for (const n of this.#nodesOf(this.machine(o.m))) w.cluster.annotate(n.name, HOLD_ANNOTATION, o.on ? "true" : undefined);
        return;
      case "armed":
        this.#armed = { machine: this.machine(o.m), event: o.event };
        return;
      case "plug-fail-next":
        w.power.failNext(o.op);
        return;
      case "plug-fault":
        w.power.setFault(this.machine(o.m).plug, o.on ? "unreachable" : undefined);
        return;
      case "flip":
        w.power.set(this.machine(o.m).plug, o.on);
        return;
      case "cluster-fail-next":
        w.cluster.failNext(o.op);
        return;
      case "tick":
        w.clock.advance(o.ms);
        await this.#ca({ kind: "run" });
        return;
      case "pods-go":
        w.cluster.finishPodDeletion();
        return;
      case "shutdowns":
        this.#shutdowns();
        return;
      case "restart":
        w.restart();
        return;
    }
  }

  /** Invariants that hold between steps. */
  check(): void {
    const { pool, clock } = this.w;
    for (const g of GROUPS) {
      const instances = pool.instances(g.id);
      const target = pool.targetSize(g.id);
      const notDeleting = instances.filter((i) => i.state !== "deleting").length;
      if (target !== notDeleting) this.violations.push(`targetSize(${g.id}) ${target} != ${notDeleting} instances not deleting`);
      const ids = instances.map((i) => i.id);
      if (new Set(ids).size !== ids.length) this.violations.push(`duplicate instance ids in ${g.id}: ${ids.join(",")}`);
      if (ids.some((id) => !g.machines.some((name) => PREFIX + name === id))) this.violations.push(`foreign id in ${g.id}`);
    }
    // A held machine is outside CA's view (a power-off still running stops at its next step).
    for (const machine of this.w.machines()) {
      if (!this.#held(machine)) continue;
      const instance = pool.instances(machine.group).find((i) => i.id === PREFIX + machine.name);
      if (instance !== undefined && instance.state !== "deleting") {
        this.violations.push(`held ${machine.name} reported to CA as ${instance.state}`);
      }
      if (instance === undefined && pool.nodeGroupForNode({ name: machine.name, providerID: PREFIX + machine.name }) !== undefined) {
        this.violations.push(`held ${machine.name} given a node group`);
      }
    }
    for (const q of pool.quarantine()) {
      if (q.until <= clock.now() || q.failures < 1) this.violations.push(`stale quarantine entry ${JSON.stringify(q)}`);
    }
  }

  /** Every fault cleared and time running: every power-off must end, leaving no pod and no annotation. */
  async settle(): Promise<void> {
    const { w } = this;
    this.#armed = undefined;
    w.power.clearFaults();
    w.cluster.clearFaults();
    let wait: number | undefined = 0;
    for (let i = 0; i < 300 && wait !== undefined; i++) {
      w.cluster.finishPodDeletion();
      this.#shutdowns();
      wait = await this.#run();
      w.clock.advance(Math.max(wait ?? 0, 1));
    }
    if (wait !== undefined) this.violations.push("the runner still has work after settling");
    if (w.cluster.pods().length > 0) this.violations.push(`pods left: ${w.cluster.pods().map((p) => p.machine).join(",")}`);
    const marked = w.cluster.nodes().filter((n) => n.annotations[POWER_OFF_ANNOTATION] !== undefined);
    if (marked.length > 0) this.violations.push(`power-off annotations left on ${marked.map((n) => n.name).join(",")}`);
  }

  async #ca(o: CaOp): Promise<void> {
    const { w } = this;
    const inFlight = this.#inFlight;
    try {
      switch (o.kind) {
        case "increase":
          await this.#during(inFlight.increase, [o.group], () => w.pool.increaseSize(o.group, o.delta));
          return;
        case "decrease":
          await this.#during(inFlight.decrease, [o.group], () => w.pool.decreaseTargetSize(o.group, o.delta));
          return;
        case "delete":
          await this.#delete(o);
          return;
        case "refresh":
          await w.pool.refresh();
          return;
        case "run":
          await this.#run();
          return;
      }
    } catch (e) {
      // CA calls may fail with a domain error; refresh and runPowerOffs never fail; nothing throws anything else.
      if (!isPlugpoolError(e) || o.kind === "refresh" || o.kind === "run") {
        this.violations.push(`${o.kind} threw ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      }
    }
  }

  async #delete(o: Extract<CaOp, { kind: "delete" }>): Promise<void> {
    const machines = o.picks.map((i) => this.machine(i));
    const refs: NodeRef[] = machines.map((x) => {
      const node = this.#nodesOf(x)[0];
      if (node !== undefined && o.taint) this.w.cluster.taint(node.name);
      return node === undefined || o.fake ? { name: PREFIX + x.name, providerID: PREFIX + x.name } : node;
    });
    const names = machines.map((x) => x.name);
    for (const name of names) this.#deleteRequested.add(name);
    await this.#during(this.#inFlight.delete, names, () => this.w.pool.deleteNodes(machines[0]?.group ?? "a", refs));
  }

  /** Runs a CA call with its keys counted as in flight meanwhile. */
  async #during(counts: Map<string, number>, keys: readonly string[], call: () => Promise<void>): Promise<void> {
    for (const k of keys) counts.set(k, (counts.get(k) ?? 0) + 1);
    try {
      await call();
    } finally {
      for (const k of keys) counts.set(k, (counts.get(k) ?? 1) - 1);
    }
  }

  /** One pass of the runner, counted as in flight meanwhile. */
  async #run(): Promise<number | undefined> {
    this.#inFlight.run++;
    try {
      return await this.w.pool.runPowerOffs();
    } finally {
      this.#inFlight.run--;
    }
  }

  #register(machine: Machine, mode: "normal" | "name-only" | "foreign"): void {
    const { w } = this;
    if (!w.power.isOn(machine.plug) || this.#nodesOf(machine).length > 0) return;
    const providerID = mode === "normal" ? PREFIX + machine.name : mode === "foreign" ? `metal://${machine.name}` : "";
    w.cluster.addNode({ name: machine.name, providerID, readyChangedAt: w.clock.now() });
  }

  #nodeEvent(machine: Machine, event: NodeEvent): void {
    const { cluster } = this.w;
    if (event === "register") this.#register(machine, "normal");
    for (const n of this.#nodesOf(machine)) {
      if (event === "taint") cluster.taint(n.name);
      if (event === "untaint") cluster.untaint(n.name);
      if (event === "remove-node") cluster.removeNode(n.name);
    }
  }

  /** Power-off pods shut their nodes down; nodes of machines without power go NotReady. */
  #shutdowns(): void {
    const { w } = this;
    for (const machine of w.machines()) {
      const pod = w.cluster.powerOffPod(machine.name);
      for (const n of this.#nodesOf(machine)) {
        if (n.ready && (pod !== undefined || !w.power.isOn(machine.plug))) w.cluster.setReady(n.name, false, w.clock.now());
      }
    }
  }

  #fireArmed(): void {
    const armed = this.#armed;
    this.#armed = undefined;
    if (armed !== undefined) this.#nodeEvent(armed.machine, armed.event);
  }

  /** Judged by the test itself, independently of the domain's matching code. */
  #nodesOf(machine: Machine): NodeView[] {
    return this.w.cluster.nodes().filter((n) => n.providerID === PREFIX + machine.name || n.name === machine.name);
  }

  #held(machine: Machine): boolean {
    return machine.hold || this.#nodesOf(machine).some((n) => n.annotations[HOLD_ANNOTATION] !== undefined);
  }

  /** A plug goes on only for IncreaseSize or the runner, for a machine that may be powered, within the inrush limit. */
  #checkOn(machine: Machine): void {
    const { w } = this;
    const now = w.clock.now();
    const name = machine.name;
    if ((this.#inFlight.increase.get(machine.group) ?? 0) === 0 && this.#inFlight.run === 0) {
      this.violations.push(`turnOn of ${name} outside IncreaseSize and the runner`);
    }
    if (w.cluster.powerOffPod(name) !== undefined) this.violations.push(`turnOn of ${name} while its power-off pod exists`);
    if (this.#held(machine)) this.violations.push(`turnOn of held ${name}`);
    const nodes = this.#nodesOf(machine);
    if (nodes.some((n) => n.annotations[POWER_OFF_ANNOTATION] !== undefined || n.taints.some((t) => t.key === TO_BE_DELETED_TAINT))) {
      this.violations.push(`turnOn of ${name} while its Node is being deleted`);
    }
    // A quarantine keeps a machine out of scale-ups; restoring the power of a registered one is still right.
    if (nodes.length === 0 && w.pool.quarantine().some((q) => q.machine === name)) {
      this.violations.push(`turnOn of quarantined ${name}`);
    }
    this.#powerOns.push(now);
    const inWindow = this.#powerOns.filter((t) => t > now - INTERVAL_MS).length;
    if (this.limit > 0 && inWindow > this.limit) {
      this.violations.push(`turnOn of ${name}: ${inWindow} plug-ons within ${INTERVAL_MS} ms, limit ${this.limit}`);
    }
    this.#deleteRequested.delete(name);
  }

  #checkCut(machine: Machine): void {
    const inFlight = this.#inFlight;
    const asked =
      (inFlight.delete.get(machine.name) ?? 0) > 0 ||
      (inFlight.decrease.get(machine.group) ?? 0) > 0 ||
      (inFlight.run > 0 && this.#deleteRequested.has(machine.name));
    if (!asked) this.violations.push(`turnOff of ${machine.name} outside a CA request and a power-off`);
    if (machine.hold) this.violations.push(`turnOff of ${machine.name}, held in config`);
    for (const n of this.#nodesOf(machine)) {
      if (!n.taints.some((t) => t.key === TO_BE_DELETED_TAINT)) {
        this.violations.push(`turnOff of ${machine.name} while node ${n.name} is registered without the taint`);
      }
      if (n.annotations[HOLD_ANNOTATION] !== undefined) this.violations.push(`turnOff of ${machine.name}, held by annotation`);
    }
  }
}
