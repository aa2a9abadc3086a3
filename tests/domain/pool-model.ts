// The world the property test drives: operations (CA calls, cluster and plug events, time, restarts) and
// the invariants checked at the moment of every plug and cluster write and after every step.
import fc from "fast-check";
import type { Machine, NodeRef, NodeView } from "../../src/domain/index.ts";
import { HOLD_ANNOTATION, POWER_OFF_ANNOTATION, TO_BE_DELETED_TAINT, isPlugpoolError } from "../../src/domain/index.ts";
import type { PowerOp } from "../fakes/power-switch.ts";
import type { TeardownOp } from "../fakes/cluster.ts";
import { PREFIX, World } from "../fakes/world.ts";

export const GROUPS = [
  { id: "a", machines: ["a-1", "a-2", "a-3", "a-4"], hold: ["a-4"] },
  { id: "b", machines: ["b-1", "b-2", "b-3"], minSize: 1, sensors: ["b-1"] },
];
const NAMES = GROUPS.flatMap((g) => g.machines);

type NodeEvent = "register" | "taint" | "untaint" | "remove-node";

export type CaOp =
  | { readonly kind: "increase"; readonly group: string; readonly delta: number }
  | { readonly kind: "delete"; readonly picks: readonly number[]; readonly fake: boolean; readonly taint: boolean }
  | { readonly kind: "decrease"; readonly group: string; readonly delta: number }
  | { readonly kind: "refresh" }
  | { readonly kind: "run" };

export type Op =
  | CaOp
  | { readonly kind: "parallel"; readonly a: CaOp; readonly b: CaOp }
  | { readonly kind: "register"; readonly m: number; readonly mode: "normal" | "name-only" | "foreign" }
  | { readonly kind: "node"; readonly m: number; readonly event: NodeEvent }
  | { readonly kind: "ready"; readonly m: number; readonly ready: boolean }
  | { readonly kind: "hold"; readonly m: number; readonly on: boolean }
  | { readonly kind: "armed"; readonly m: number; readonly event: NodeEvent }
  | { readonly kind: "plug-fail-next"; readonly op: PowerOp }
  | { readonly kind: "plug-fault"; readonly m: number; readonly on: boolean }
  | { readonly kind: "flip"; readonly m: number; readonly on: boolean }
  | { readonly kind: "cluster-fail-next"; readonly op: TeardownOp }
  | { readonly kind: "tick"; readonly ms: number }
  | { readonly kind: "pods-go" }
  | { readonly kind: "shutdowns" }
  | { readonly kind: "restart" };

const m = fc.integer({ min: 0, max: NAMES.length - 1 });
const group = fc.constantFrom(...GROUPS.map((g) => g.id));
const nodeEvent = fc.constantFrom<NodeEvent>("register", "taint", "untaint", "remove-node");

const caOp: fc.Arbitrary<CaOp> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("increase"), group, delta: fc.integer({ min: -1, max: 3 }) }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("delete"),
      picks: fc.uniqueArray(m, { minLength: 1, maxLength: 2 }),
      fake: fc.boolean(),
      taint: fc.constantFrom(true, true, true, false),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("decrease"), group, delta: fc.integer({ min: -3, max: 0 }) }) },
  { weight: 4, arbitrary: fc.constant({ kind: "refresh" as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: "run" as const }) },
);

export const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 14, arbitrary: caOp },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("parallel"), a: caOp, b: caOp }) },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant("register"),
      m,
      mode: fc.constantFrom<"normal" | "name-only" | "foreign">("normal", "normal", "normal", "name-only", "foreign"),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("node"), m, event: nodeEvent }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("ready"), m, ready: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("hold"), m, on: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("armed"), m, event: nodeEvent }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("plug-fail-next"), op: fc.constantFrom<PowerOp>("read", "turnOn", "turnOff") }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("plug-fault"), m, on: fc.constantFrom(true, false, false) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("flip"), m, on: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("cluster-fail-next"),
      op: fc.constantFrom<TeardownOp>("markPowerOff", "clearPowerOffMark", "createPowerOffPod", "deletePowerOffPod", "deleteNode"),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("tick"),
      ms: fc.constantFrom(0, 500, 1000, 2000, 5000, 10_000, 60_000, 130_000, 310_000),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ kind: "pods-go" as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: "shutdowns" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "restart" as const }) },
);

/**
 * A world under test, starting with a-1 and b-1 running: the fakes record every breach of an invariant at the
 * moment it happens.
 */
export class Model {
  readonly w = new World({ groups: GROUPS, on: ["a-1", "b-1"] });

  static async create(): Promise<Model> {
    const model = new Model();
    model.w.register("a-1");
    model.w.register("b-1");
    await model.w.pool.refresh();
    return model;
  }

  readonly violations: string[] = [];
  #armed: { machine: Machine; event: NodeEvent } | undefined;

  constructor() {
    this.w.power.onCall = (call) => {
      const machine = this.w.machines().find((x) => x.plug.url === call.plug.url && x.plug.switch === call.plug.switch);
      if (machine === undefined) {
        this.violations.push(`${call.op} of an unconfigured plug ${call.plug.url}`);
        return;
      }
      if (call.op === "turnOff") this.#checkCut(machine);
      if (call.op === "turnOn" && this.w.cluster.powerOffPod(machine.name) !== undefined) {
        this.violations.push(`turnOn of ${machine.name} while its power-off pod exists`);
      }
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
    for (const g of GROUPS) {
      const instances = this.w.pool.instances(g.id);
      const target = this.w.pool.targetSize(g.id);
      const notDeleting = instances.filter((i) => i.state !== "deleting").length;
      if (target !== notDeleting) this.violations.push(`targetSize(${g.id}) ${target} != ${notDeleting} instances not deleting`);
      const ids = instances.map((i) => i.id);
      if (new Set(ids).size !== ids.length) this.violations.push(`duplicate instance ids in ${g.id}: ${ids.join(",")}`);
      if (ids.some((id) => !g.machines.some((name) => PREFIX + name === id))) this.violations.push(`foreign id in ${g.id}`);
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
      wait = await w.pool.runPowerOffs();
      w.clock.advance(Math.max(wait ?? 0, 1));
    }
    if (wait !== undefined) this.violations.push("power-offs still running after settling");
    if (w.cluster.pods().length > 0) this.violations.push(`pods left: ${w.cluster.pods().map((p) => p.machine).join(",")}`);
    const marked = w.cluster.nodes().filter((n) => n.annotations[POWER_OFF_ANNOTATION] !== undefined);
    if (marked.length > 0) this.violations.push(`power-off annotations left on ${marked.map((n) => n.name).join(",")}`);
  }

  async #ca(o: CaOp): Promise<void> {
    const { w } = this;
    try {
      switch (o.kind) {
        case "increase":
          await w.pool.increaseSize(o.group, o.delta);
          return;
        case "decrease":
          await w.pool.decreaseTargetSize(o.group, o.delta);
          return;
        case "delete":
          await this.#delete(o);
          return;
        case "refresh":
          await w.pool.refresh();
          return;
        case "run":
          await w.pool.runPowerOffs();
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
    await this.w.pool.deleteNodes(machines[0]?.group ?? "a", refs);
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

  #checkCut(machine: Machine): void {
    if (machine.hold) this.violations.push(`turnOff of ${machine.name}, held in config`);
    for (const n of this.#nodesOf(machine)) {
      if (!n.taints.some((t) => t.key === TO_BE_DELETED_TAINT)) {
        this.violations.push(`turnOff of ${machine.name} while node ${n.name} is registered without the taint`);
      }
      if (n.annotations[HOLD_ANNOTATION] !== undefined) this.violations.push(`turnOff of ${machine.name}, held by annotation`);
    }
  }
}
