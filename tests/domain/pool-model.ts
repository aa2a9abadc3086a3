// The world the property test drives (operations in pool-ops.ts) and the invariants checked at the moment a
// command reaches its plug, a power-off pod is created or a Node deleted, and after every step. The pool sees the
// cluster through a view that lags the truth; the invariants are judged on the truth. The oracle imports nothing
// from src/: its names and numbers are written out here, so a change to the domain's cannot move the rules too.
import type { CaOp, NodeEvent, Op, RegisterMode } from "./pool-ops.ts";
import { GROUPS, NAMES } from "./pool-ops.ts";
import type { Machine, NodeRef, NodeView, PoolDeps, PowerControl, QuarantineSettings, ScaleUpSettings } from "../harness/fakes/world.ts";
import { PREFIX, World } from "../harness/fakes/world.ts";
import { FakeLeadership } from "../harness/fakes/leadership.ts";

const TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler";
const HOLD_ANNOTATION = "plugpool.io/hold";
const POWER_OFF_ANNOTATION = "plugpool.io/power-off-started-at";
/** The walks' standby draw (tests/harness/fakes/world.ts POWER_OFF). */
const STANDBY_WATTS = 5;
/** The walks' powerOff.notReadyTimeout (the World's default). */
const SHUTDOWN_TIMEOUT_MS = 300_000;

/** A domain error crossing towards CA (checked by name and code, as a client across module copies would). */
function isDomainError(e: unknown): boolean {
  return e instanceof Error && e.name === "PlugpoolError" && typeof (e as { code?: unknown }).code === "string";
}

/** A refusal of an instance that no longer acts: its calls in flight may end so, whatever they were. */
function isNotLeader(e: unknown): boolean {
  return isDomainError(e) && (e as { code: string }).code === "not-leader";
}

/** Inrush limits a run may use: none (the default), or a tight one that queues most scale-ups. */
export const LIMITS = [0, 1, 2] as const;
const INTERVAL_MS = 10_000;
/** Registered at the start: two in one group, so one DeleteNodes can name two running machines. */
const RUNNING = ["a-1", "a-3", "b-1"];
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
 * A world under test, starting with RUNNING running: the fakes record every breach of an invariant at the
 * moment it happens.
 */
export class Model {
  readonly w: World;
  readonly limit: number;

  static async create(limit = 0, latencySeed = 1): Promise<Model> {
    const model = new Model(limit, latencySeed);
    for (const name of RUNNING) model.w.register(name);
    model.#sync();
    await model.w.pool.refresh();
    return model;
  }

  readonly violations: string[] = [];
  /** Draws 0–3 from the walk's latency sequence. */
  readonly #draw: () => number;
  /** A runner pass started between cluster writes, until it ends. */
  #between: Promise<void> | undefined;
  #armed: { machine: Machine; event: NodeEvent } | undefined;
  readonly #inFlight: InFlight = { delete: new Map(), decrease: new Map(), increase: new Map(), run: 0 };
  /** Machines CA asked to delete since their plug last went on: only their power-offs may cut. */
  readonly #deleteRequested = new Set<string>();
  /** For each machine, how many events had been reported when a DeleteNodes naming it last succeeded. */
  readonly #deleteSucceeded = new Map<string, number>();
  /** When each turnOn was sent. */
  readonly #powerOns: number[] = [];

  /** Machines whose plug plugpool's own switch-on reached (and not off since): the licence to cut without a Node. */
  readonly #switchedOnByPool = new Set<string>();
  /**
   * Machines whose OS a power-off pod has shut down, or whose drained Node went NotReady and was deleted (until
   * their plug goes off or on again): the rules let a power-off cut them without a Node.
   */
  readonly #osDown = new Set<string>();
  /** When each accepted shutdown was asked (by its control: a BMC; monotonic ms), until the machine's plug is switched again. */
  readonly #shutdownAsked = new Map<string, number>();
  /**
   * Machines whose OS plugpool asked to shut down (a power-off pod created, a BMC's shutdown accepted) since their
   * plug was last switched: when, and the uids of their Nodes then. Only these may be power-cycled.
   */
  readonly #shutdownRequested = new Map<string, { readonly at: number; readonly uids: readonly (string | undefined)[] }>();
  /** Machines switched off under the power-cycle exception: they must be on again by the end. */
  readonly #cycled = new Set<string>();
  /** Cycled machines whose cycle a restart of plugpool forgot (its watch lives in memory only). */
  readonly #cycleForgotten = new Set<string>();
  /** Machines whose shutdown request a wall clock step followed: their Nodes' times say nothing of the order. */
  readonly #steppedSinceRequest = new Set<string>();
  /** Machines whose OS a power-off pod or a BMC's shutdown (plugpool's requests) halted, until their plug is switched. */
  readonly #haltedByPlugpool = new Set<string>();
  /** When each machine's plug was last switched on by plugpool (wall ms). */
  readonly #switchedOnAt = new Map<string, number>();
  /** Nodes that claim no machine, with when each was created (wall ms). */
  readonly #strangers = new Map<string, number>();
  /** What IncreaseSize calls in flight may still start per group: the sum of their deltas, less what they started. */
  readonly #budget = new Map<string, number>();
  /** Machines queued for a plug-on (power-on-queued), until their plug-on reaches the plug or a restart drops them. */
  readonly #queued = new Set<string>();
  /** Machines switched on after plugpool asked their OS to shut down, until a power-off starts again. */
  readonly #revived = new Set<string>();
  /** Machines whose last power-off was aborted (a cut from now on is a power cycle's). */
  readonly #aborted = new Set<string>();
  /** Machines whose OS shutdown was asked before a restart of plugpool (until their plug is switched again). */
  readonly #restartedSince = new Set<string>();
  /** Machines reported stranded since their plug was last switched. */
  readonly #stranded = new Set<string>();
  /** Machines whose device answered as another in this run of plugpool: held by it, as much as by a hold. */
  readonly #mismatched = new Set<string>();
  /** The Lease of the instance acting now; each handover builds a new one and ends the last. */
  #leadership = new FakeLeadership(true);
  /** Pools of instances that acted before: their runners go on, and must do nothing. */
  readonly #retired: Model["w"]["pool"][] = [];
  /** The instance whose device check or cut guard last said yes: the next command to arrive is its. */
  #sender: FakeLeadership | undefined;

  constructor(limit = 0, latencySeed = 1) {
    this.limit = limit;
    const scaleUp: ScaleUpSettings | undefined =
      limit === 0 ? undefined : { maxPowerOnsPerInterval: limit, powerOnIntervalMs: INTERVAL_MS };
    this.w = new World({
      groups: GROUPS,
      on: [...RUNNING],
      quarantine: QUARANTINE,
      lagging: true,
      leadership: this.#leadership,
      tap: (deps, leadership) => this.#tap(deps, leadership as FakeLeadership),
      ...(scaleUp && { scaleUp }),
    });
    // Every device was met by an earlier run of plugpool, so its identity is on the records: an address that reaches
    // another machine's device is never one plugpool meets for the first time (nothing could tell it apart then).
    for (const machine of this.w.machines()) this.w.records.seedDeviceIdentity(machine.name, this.w.power.identityOf(machine.power));
    // A view that hears from the apiserver catches up when asked to (a DeleteNodes about to refuse a missing taint);
    // one cut off from it cannot.
    this.w.cluster.catchUpView = () => {
      if (this.w.cluster.viewCurrent) this.#sync();
    };
    // Each command waits a few turns at its device, and each cluster write a few turns before it lands, so
    // others act (and the world changes) meanwhile: one call's writes land apart, in any order.
    let state = latencySeed;
    const turns = (): number => {
      state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
      return (state >>> 16) % 4; // the high bits: an LCG's low bits repeat every few draws
    };
    this.w.power.latency = turns;
    this.w.cluster.latency = turns;
    this.#draw = turns;
    this.w.power.onCall = (call) => {
      const machine = this.#machineOf(call.control);
      if (machine === undefined) this.violations.push(`${call.op} of an unconfigured plug ${call.control.key}`);
      else if (call.op === "turnOn") this.#checkOnSent(machine);
      this.#fireArmed();
    };
    // The rules of a cut are judged when it reaches the plug, not when it is called.
    this.w.power.onArrival = (arrival) => {
      const machine = this.#machineOf(arrival.control);
      if (machine === undefined) return;
      const sender = this.#sender;
      this.#sender = undefined;
      if (sender?.acting() !== true) this.violations.push(`${arrival.op} of ${machine.name} sent by an instance that does not act`);
      if (arrival.device !== arrival.control.key) {
        this.violations.push(`${arrival.op} for ${machine.name} reached the device of another machine (${arrival.device})`);
        return;
      }
      if (arrival.op === "shutdown") {
        this.#checkShutdown(machine.name, "OS shutdown through the control");
        this.#shutdownAsked.set(machine.name, this.w.clock.monotonic());
        this.#noteShutdownRequested(machine);
      } else if (arrival.op === "turnOff") {
        this.#checkCut(machine);
        this.#shutdownAsked.delete(machine.name);
        // A power cycle's off: the machine is brought back, its switch-on as much a revival as the off.
        if (!this.#cycled.has(machine.name)) this.#shutdownRequested.delete(machine.name);
        this.#switchedOnByPool.delete(machine.name);
        this.#osDown.delete(machine.name);
        this.#haltedByPlugpool.delete(machine.name);
      } else {
        this.#checkOn(machine);
        // Brought back (its switch-on may be sent again: its answer can be lost) until a power-off starts anew.
        if (this.#shutdownRequested.has(machine.name)) this.#revived.add(machine.name);
        this.#shutdownAsked.delete(machine.name);
        this.#shutdownRequested.delete(machine.name);
        this.#restartedSince.delete(machine.name);
        this.#osDown.delete(machine.name);
        this.#haltedByPlugpool.delete(machine.name);
        this.#cycled.delete(machine.name);
        this.#cycleForgotten.delete(machine.name);
        this.#stranded.delete(machine.name);
        this.#switchedOnByPool.add(machine.name);
        this.#switchedOnAt.set(machine.name, this.w.clock.now());
      }
    };
    this.w.reporter.onReport = (event) => {
      if (event.type === "power-on-queued") {
        this.#spend(event.group, event.machine);
        this.#queued.add(event.machine);
      }
      if (event.type === "stranded") this.#stranded.add(event.machine);
      if (event.type === "device-mismatch" || event.type === "device-duplicate") this.#mismatched.add(event.machine);
      if (event.type === "power-off-aborted") this.#aborted.add(event.machine);
      if (event.type === "power-off-started") {
        this.#aborted.delete(event.machine);
        this.#revived.delete(event.machine);
        // A power-off CA asked for anew ends with the machine off, cycled before or not.
        this.#cycled.delete(event.machine);
        this.#cycleForgotten.delete(event.machine);
      }
    };
    this.w.cluster.onCall = (call) => {
      if (call.op === "createPowerOffPod" && this.w.cluster.powerOffPod(call.target) === undefined) {
        this.#checkShutdown(call.target, "power-off pod");
        this.#noteShutdownRequested(this.w.machine(call.target));
      }
      if (call.op === "deleteNode") {
        const owner = this.w.machines().find((x) => this.#nodesOf(x).some((n) => n.name === call.target));
        // Deleting a Node that is already gone is a no-op (a lagging view still shows it).
        const exists = this.w.cluster.nodeNamed(call.target) !== undefined;
        if (owner === undefined) {
          if (exists) this.violations.push(`deleteNode of ${call.target}, which is no machine's`);
        } else if (this.w.cluster.powerOffPod(owner.name) !== undefined) {
          this.violations.push(`deleteNode of ${call.target} while the power-off pod of ${owner.name} exists`);
        }
      }
      this.#fireArmed();
      this.#maybeRunBetween();
    };
  }

  /**
   * Now and then, while a cluster write is out, the watch delivers and the runner's timer fires: a pass falls
   * between one call's writes, seeing those that landed (as the runner of a real process may).
   */
  #maybeRunBetween(): void {
    if (this.#between !== undefined || this.#draw() !== 0) return;
    const turns = this.#draw() + 1;
    this.#between = (async () => {
      for (let t = turns; t > 0; t--) await new Promise((r) => setImmediate(r));
      this.#sync();
      await this.#ca({ kind: "run" });
    })().finally(() => { this.#between = undefined; });
  }

  /** Waits for a runner pass started between writes, so each step ends quiet. */
  async #quiet(): Promise<void> {
    while (this.#between !== undefined) await this.#between;
  }

  #noteShutdownRequested(machine: Machine): void {
    if (this.#shutdownRequested.has(machine.name)) return;
    this.#shutdownRequested.set(machine.name, { at: this.w.clock.now(), uids: this.#nodesOf(machine).map((n) => n.uid) });
    this.#steppedSinceRequest.delete(machine.name);
  }

  #notePodShutdown(machine: Machine): void {
    const asked = this.#shutdownRequested.get(machine.name);
    const uids = this.#nodesOf(machine).map((n) => n.uid);
    if (asked === undefined) {
      this.#shutdownRequested.set(machine.name, { at: this.w.clock.now(), uids });
      this.#steppedSinceRequest.delete(machine.name);
    } else this.#shutdownRequested.set(machine.name, { at: asked.at, uids: [...asked.uids, ...uids] });
  }

  /** One new power-on (switched on, or queued) of the group: IncreaseSize calls in flight must have asked for it. */
  #spend(group: string, name: string): void {
    const left = (this.#budget.get(group) ?? 0) - 1;
    this.#budget.set(group, left);
    if (left < 0) this.violations.push(`new power-on of ${name}: more than the deltas of the IncreaseSize calls of ${group} in flight`);
  }

  #machineOf(control: PowerControl): Machine | undefined {
    return this.w.machines().find((x) => x.power.key === control.key);
  }

  /**
   * A power-off pod or the control's own shutdown (a BMC) shuts the OS down: at that moment every Node of the
   * machine must allow it.
   */
  #checkShutdown(name: string, how: string): void {
    const machine = this.w.machine(name);
    if (!this.w.cluster.viewCurrent) this.violations.push(`${how} of ${name} while the view is not current`);
    if (this.#held(machine)) this.violations.push(`${how} of held ${name}`);
    if (how !== "power-off pod" && machine.power.shutsDown !== true) this.violations.push(`${how} of ${name}, whose control cannot`);
    if (!this.#deleteRequested.has(name)) this.violations.push(`${how} of ${name}, which CA has not asked to delete (or was told its deletion failed)`);
    for (const n of this.#nodesOf(machine)) {
      if (!n.taints.some((t) => t.key === TO_BE_DELETED_TAINT)) {
        this.violations.push(`${how} of ${name} while node ${n.name} is registered without the taint`);
      }
    }
  }

  machine(i: number): Machine {
    return this.w.machine(NAMES[i] ?? "a-1");
  }

  async apply(o: Op): Promise<void> {
    await this.#step(o);
    await this.#quiet();
    // A power-off pod is a shutdown request for whatever Node carries its name, one registered anew included.
    for (const machine of this.w.machines()) {
      if (this.w.cluster.powerOffPod(machine.name) !== undefined) this.#notePodShutdown(machine);
    }
  }

  async #step(o: Op): Promise<void> {
    const { w } = this;
    switch (o.kind) {
      case "parallel":
        await Promise.all([this.#ca(o.a), this.#staggered(o.stagger, o.synced, o.b)]);
        return;
      case "increase":
      case "delete":
      case "decrease":
      case "refresh":
      case "run":
      case "handover":
        await this.#ca(o);
        return;
      case "register":
        this.#register(this.machine(o.m), o.mode, o.ready);
        return;
      case "node":
        this.#nodeEvent(this.machine(o.m), o.event);
        return;
      case "ready":
        for (const n of this.#nodesOf(this.machine(o.m))) w.cluster.setReady(n.name, o.ready, w.clock.now());
        return;
      case "hold":
        for (const n of this.#nodesOf(this.machine(o.m))) w.cluster.annotate(n.name, HOLD_ANNOTATION, o.value);
        return;
      case "armed":
        this.#armed = { machine: this.machine(o.m), event: o.event };
        return;
      case "plug-fail-next":
        w.power.failNext(o.op);
        return;
      case "plug-fault":
        w.power.setFault(this.machine(o.m).power, o.on ? "unreachable" : undefined);
        return;
      case "flip": {
        // Someone switches the plug by hand: a machine switched on that way is not plugpool's to cut
        // (Switched off and on again by hand, a machine plugpool switched on is still the one it asked for.)
        const machine = this.machine(o.m);
        if (o.on !== w.power.isOn(machine.power)) {
          this.#osDown.delete(machine.name);
          this.#haltedByPlugpool.delete(machine.name);
        }
        w.power.set(machine.power, o.on);
        return;
      }
      case "cluster-fail-next":
        w.cluster.failNext(o.op, undefined, o.after);
        return;
      case "tick":
        w.clock.advance(o.ms);
        // A view that is current has heard from the apiserver within the last minute: a minute or more later it
        // shows what had happened before (shorter ticks leave it lagging as it may).
        if (o.ms >= 60_000 && w.cluster.viewCurrent) this.#sync();
        await this.#ca({ kind: "run" });
        return;
      case "clock-step":
        w.clock.step(o.ms);
        for (const name of this.#shutdownRequested.keys()) this.#steppedSinceRequest.add(name);
        return;
      case "pods-go":
        w.cluster.finishPodDeletion();
        return;
      case "shutdowns":
        this.#shutdowns();
        return;
      case "restart":
        this.#newProcess();
        return;
      case "view-sync":
        this.#sync();
        return;
      case "watch":
        w.cluster.viewCurrent = o.up;
        return;
      case "lose-answer":
        w.power.loseNextAnswer(o.op);
        return;
      case "records-fail-next":
        w.records.failNext();
        return;
      case "swap-addresses": {
        // A Home Assistant entity id is the entity's identity as well as its address: it never reaches another.
        const [a, b] = [this.machine(o.a).power, this.machine(o.b).power];
        if (a.backend !== "home-assistant" && b.backend !== "home-assistant") w.power.swapAddresses(a, b);
        return;
      }
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
    // A held machine is outside CA's view (a power-off still running stops at its next step), as the view shows it.
    for (const machine of this.w.machines()) {
      if (!this.#held(machine, this.#viewNodesOf(machine))) continue;
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
    w.records.clearFaults();
    w.cluster.viewCurrent = true;
    let wait: number | undefined = 0;
    for (let i = 0; i < 300 && wait !== undefined; i++) {
      w.cluster.finishPodDeletion();
      this.#shutdowns();
      this.#sync();
      // cluster-autoscaler's Refresh goes on too: a plug read off under a running Node is restored.
      await this.#ca({ kind: "refresh" });
      wait = await this.#run();
      await this.#quiet();
      w.clock.advance(Math.max(wait ?? 0, 1));
    }
    // A held machine left halted is watched (and reported) until someone acts: the one work allowed to remain.
    if (wait !== undefined && !this.#strandedHeld()) this.violations.push("the runner still has work after settling");
    if (w.cluster.pods().length > 0) this.violations.push(`pods left: ${w.cluster.pods().map((p) => p.machine).join(",")}`);
    const marked = w.cluster.nodes().filter((n) => n.annotations[POWER_OFF_ANNOTATION] !== undefined);
    if (marked.length > 0) this.violations.push(`power-off annotations left on ${marked.map((n) => n.name).join(",")}`);
    this.#checkHalted();
  }

  #strandedHeld(): boolean {
    return this.w.machines().some((m) => (this.#held(m) || this.#mismatched.has(m.name)) && this.#stranded.has(m.name));
  }

  /**
   * No machine is left halted with its plug on (its OS shut down by plugpool, its Nodes NotReady or gone) unless it
   * is reported stranded: held, or its Node no longer the one shut down (nothing then shows it halted). And a
   * machine cut under the power-cycle exception is on again.
   */
  #checkHalted(): void {
    for (const machine of this.w.machines()) {
      const name = machine.name;
      const on = this.w.power.isOn(machine.power);
      // Held, it is told; held across a restart, which forgets the cycle it was in (a known gap), it is left as it is.
      const held = this.#held(machine) || this.#mismatched.has(name);
      const heldAndTold = held && (this.#stranded.has(name) || this.#restartedSince.has(name));
      // (Off with CA's taint on its Node: CA is deleting it; a restart forgets the cycle, and the restore waits for CA.)
      const deleting = this.#nodesOf(machine).some((n) => n.taints.some((t) => t.key === TO_BE_DELETED_TAINT));
      // (A restart forgets the cycle it was in: with a Node, the power restore switches it on; left without one, it is
      // a machine that is off, no Node counted for it, which CA's next scale-up may take.)
      const forgottenOff = this.#cycleForgotten.has(name) && this.#nodesOf(machine).length === 0;
      if (this.#cycled.has(name) && !on && !heldAndTold && !deleting && !forgottenOff) this.violations.push(`${name} power-cycled but left off`);
      // (A restart while the watch of a called-off power-off ran forgets it: a known gap the README states.)
      const halted = this.#haltedByPlugpool.has(name) && this.#shutdownRequested.has(name) && !this.#restartedSince.has(name);
      if (!halted || !on || this.#nodesOf(machine).some((n) => n.ready)) continue;
      if (!this.#stranded.has(name)) this.violations.push(`${name} halted with its plug on at the end, neither brought back nor reported`);
    }
  }

  async #ca(o: CaOp): Promise<void> {
    const { w } = this;
    const inFlight = this.#inFlight;
    try {
      switch (o.kind) {
        case "increase":
          await this.#increase(o.group, o.delta);
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
        case "handover":
          this.#retired.push(w.pool);
          this.#leadership.lose("the next instance");
          this.#leadership = new FakeLeadership(true);
          this.#newProcess(this.#leadership);
          return;
      }
    } catch (e) {
      // CA calls may fail with a domain error; refresh and reconcile never fail (but where their instance stopped
      // acting meanwhile); nothing throws anything else.
      if (!isDomainError(e) || ((o.kind === "refresh" || o.kind === "run") && !isNotLeader(e))) {
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
    if (o.seen) this.#sync();
    const names = machines.map((x) => x.name);
    for (const name of names) this.#deleteRequested.add(name);
    const from = this.w.reporter.events.length;
    // A power-off recorded before this call (by an earlier one, maybe an earlier run of plugpool), or running
    // since an earlier call succeeded (its record may have gone with a Node deleted meanwhile), is not its.
    const recordedBefore = machines
      .filter(
        (x) =>
          this.w.cluster.powerOffPod(x.name) !== undefined ||
          this.#nodesOf(x).some((n) => n.annotations[POWER_OFF_ANNOTATION] !== undefined) ||
          this.#powerOffRunning(x.name),
      )
      .map((x) => x.name);
    try {
      await this.#during(this.#inFlight.delete, names, () => this.w.pool.deleteNodes(machines[0]?.group ?? "a", refs));
      for (const name of names) this.#deleteSucceeded.set(name, this.w.reporter.events.length);
    } catch (e) {
      this.#checkFailedDelete(names.filter((name) => !recordedBefore.includes(name)), from);
      throw e;
    }
  }

  /** An IncreaseSize: while calls of the group are in flight, together they may start no more than their deltas. */
  async #increase(group: string, delta: number): Promise<void> {
    this.#budget.set(group, (this.#budget.get(group) ?? 0) + Math.max(0, delta));
    try {
      await this.#during(this.#inFlight.increase, [group], () => this.w.pool.increaseSize(group, delta));
    } finally {
      if ((this.#inFlight.increase.get(group) ?? 0) === 0) this.#budget.set(group, 0);
    }
  }

  /** A power-off of the machine was reported started, and not yet finished or aborted. */
  #powerOffRunning(name: string): boolean {
    const events = this.w.reporter.events;
    const last = events.findLastIndex((e) => "machine" in e && e.machine === name && (e.type === "power-off-started" || e.type === "power-off-finished" || e.type === "power-off-aborted"));
    return events[last]?.type === "power-off-started";
  }

  /**
   * A DeleteNodes that failed towards CA started no power-off of its machines, neither itself nor by a runner
   * pass that fell between its writes: CA takes them for still running. Nor may one start later (its record
   * landing late, a lagging view, a restart): the request is withdrawn, so a later OS shutdown or cut of the
   * machine breaks the rules until CA asks again. (A power-off started by another DeleteNodes in flight or
   * succeeded meanwhile is not this call's.)
   */
  #checkFailedDelete(names: readonly string[], from: number): void {
    const started = this.w.reporter.events.slice(from).filter((e) => e.type === "power-off-started");
    for (const name of names) {
      if ((this.#inFlight.delete.get(name) ?? 0) > 0 || (this.#deleteSucceeded.get(name) ?? -1) >= from) continue;
      if (started.some((e) => e.machine === name)) this.violations.push(`a power-off of ${name} started from a DeleteNodes that failed`);
      this.#deleteRequested.delete(name);
    }
  }

  /**
   * A CA call sent `turns` turns of the event loop from now, after the view caught up when `synced`: it falls
   * between the writes of a call made before, and may see some of them.
   */
  async #staggered(turns: number, synced: boolean, o: CaOp): Promise<void> {
    for (let t = turns; t > 0; t--) await new Promise((r) => setImmediate(r));
    if (synced) this.#sync();
    await this.#ca(o);
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

  /** One pass of the runner, counted as in flight meanwhile (and of every retired instance's, which does nothing). */
  async #run(): Promise<number | undefined> {
    this.#inFlight.run++;
    try {
      for (const pool of this.#retired) {
        if ((await pool.reconcile()) !== undefined) this.violations.push("the runner of an instance that does not act asked to run again");
      }
      return await this.w.pool.reconcile();
    } finally {
      this.#inFlight.run--;
    }
  }

  /** A new process (a restart, or another instance taking the Lease) lists everything afresh before it serves. */
  #newProcess(leadership?: FakeLeadership): void {
    this.#sync();
    this.w.restart(leadership);
    // Queued plug-ons and what devices answered live in memory only.
    this.#queued.clear();
    this.#mismatched.clear();
    for (const name of this.#shutdownRequested.keys()) this.#restartedSince.add(name);
    for (const name of this.#cycled) this.#cycleForgotten.add(name);
  }

  /**
   * An instance's ports as the oracle watches them: a switch command is its once its device check (and cut guard)
   * said yes, and nothing else changes between that yes and the command's arrival; a Node, pod or record write of
   * an instance that does not act is a violation as it is asked.
   */
  #tap(deps: PoolDeps, leadership: FakeLeadership): PoolDeps {
    const { power, teardown, records } = deps;
    const mine = <A extends unknown[]>(ask: (...args: A) => Promise<boolean>) => async (...args: A): Promise<boolean> => {
      const yes = await ask(...args);
      if (yes) this.#sender = leadership;
      return yes;
    };
    const acting = <T>(what: string, call: () => T): T => {
      if (!leadership.acting()) this.violations.push(`${what} by an instance that does not act`);
      return call();
    };
    const shutdown = power.shutdown?.bind(power);
    return {
      ...deps,
      power: {
        read: (control, options) => power.read(control, options),
        turnOn: (control, options) => power.turnOn(control, { ...options, device: mine(options.device) }),
        turnOff: (control, mayCut, options) => power.turnOff(control, mine(mayCut), { ...options, device: mine(options.device) }),
        ...(shutdown && { shutdown: (control, may, options) => shutdown(control, mine(may), { ...options, device: mine(options.device) }) }),
      },
      teardown: {
        markPowerOff: (node, record, options) => acting(`marking ${node}`, () => teardown.markPowerOff(node, record, options)),
        clearPowerOffMark: (node, options) => acting(`clearing the mark of ${node}`, () => teardown.clearPowerOffMark(node, options)),
        createPowerOffPod: (machine, node, at, options) => acting(`a power-off pod on ${node}`, () => teardown.createPowerOffPod(machine, node, at, options)),
        deletePowerOffPod: (machine, options) => acting(`deleting ${machine.name}'s power-off pod`, () => teardown.deletePowerOffPod(machine, options)),
        deleteNode: (node, uid, options) => acting(`deleting Node ${node}`, () => teardown.deleteNode(node, uid, options)),
      },
      records: {
        powerOn: (machine) => records.powerOn(machine),
        quarantine: (machine) => records.quarantine(machine),
        deviceIdentity: (machine) => records.deviceIdentity(machine),
        recordPowerOn: (machine, record, options) => acting(`recording ${machine}'s power-on`, () => records.recordPowerOn(machine, record, options)),
        // Any instance may end a record: that only takes a licence away.
        endPowerOn: (machine) => { records.endPowerOn(machine); },
        setQuarantine: (machine, record) => { acting(`recording ${machine}'s quarantine`, () => { records.setQuarantine(machine, record); }); },
        recordDeviceIdentity: (machine, id, options) => acting(`recording ${machine}'s device`, () => records.recordDeviceIdentity(machine, id, options)),
        stored: (machine, options) => acting(`storing ${machine}'s records`, () => records.stored(machine, options)),
      },
    };
  }

  /** A machine with power and no Node (and not halted) registers. A stranger is a Node that claims no machine. */
  #register(machine: Machine, mode: RegisterMode, ready = true): void {
    const { w } = this;
    if (!w.power.isOn(machine.power) || this.#nodesOf(machine).length > 0 || this.#osDown.has(machine.name)) return;
    const name = mode === "stranger" ? `${machine.name}-typo` : machine.name;
    if (mode === "stranger" && w.cluster.nodeNamed(name) !== undefined) return;
    const providerID = mode === "normal" ? PREFIX + machine.name : mode === "foreign" ? `metal://${machine.name}` : mode === "stranger" ? PREFIX + name : "";
    w.cluster.addNode({ name, providerID, ready, readyChangedAt: w.clock.now() });
    if (mode === "stranger") this.#strangers.set(name, w.clock.now());
  }

  /**
   * The view catches up. A machine seen registered is running an OS: plugpool's power-on has done its work and
   * licenses no cut from now on. (A Node deleted before any view saw it cannot be known; kubelets re-register.)
   */
  #sync(): void {
    this.w.view?.sync();
    this.w.pool.clusterChanged();
    for (const machine of this.w.machines()) {
      if (this.#nodesOf(machine).length > 0) this.#switchedOnByPool.delete(machine.name);
    }
  }

  #nodeEvent(machine: Machine, event: NodeEvent): void {
    const { cluster } = this.w;
    if (event === "register") this.#register(machine, "normal");
    if (event === "remove-node" && this.#strangers.delete(`${machine.name}-typo`)) this.w.cluster.removeNode(`${machine.name}-typo`);
    const nodes = this.#nodesOf(machine);
    // A drained Node that went NotReady and is then deleted by hand leaves a machine the rules let plugpool cut.
    if (event === "remove-node" && nodes.length > 0 && nodes.every((n) => !n.ready && n.taints.some((t) => t.key === TO_BE_DELETED_TAINT))) {
      this.#osDown.add(machine.name);
    }
    for (const n of nodes) {
      if (event === "taint") cluster.taint(n.name);
      if (event === "untaint") cluster.untaint(n.name);
      if (event === "remove-node") cluster.removeNode(n.name);
    }
  }

  /** Power-off pods and BMC shutdowns shut their nodes down; nodes of machines without power go NotReady. */
  #shutdowns(): void {
    const { w } = this;
    for (const machine of w.machines()) {
      const pod = w.cluster.powerOffPod(machine.name);
      // An OS that did not act on its BMC's graceful shutdown within the shutdown timeout ignored it for good: time
      // that passed, which a wall clock stepped back does not give back.
      const askedAt = this.#shutdownAsked.get(machine.name);
      if (askedAt !== undefined && w.clock.monotonic() > askedAt + SHUTDOWN_TIMEOUT_MS) this.#shutdownAsked.delete(machine.name);
      const asked = this.#shutdownAsked.has(machine.name);
      // A pod runs only on a Node: one whose Node is gone shuts nothing down (a BMC's request needs none).
      const podRuns = pod !== undefined && !pod.terminating && this.#nodesOf(machine).length > 0;
      if (podRuns || asked) {
        this.#osDown.add(machine.name);
        this.#haltedByPlugpool.add(machine.name);
      }
      // A power-off pod runs on whatever Node carries its name: one registered anew is shut down by plugpool too.
      if (pod !== undefined) this.#notePodShutdown(machine);
      for (const n of this.#nodesOf(machine)) {
        if (n.ready && (pod !== undefined || asked || !w.power.isOn(machine.power))) w.cluster.setReady(n.name, false, w.clock.now());
      }
    }
  }

  #fireArmed(): void {
    const armed = this.#armed;
    this.#armed = undefined;
    if (armed !== undefined) this.#nodeEvent(armed.machine, armed.event);
  }

  /** Judged by the test itself, independently of the domain's matching code: the truth, not the view. */
  #nodesOf(machine: Machine): NodeView[] {
    return this.w.cluster.nodes().filter((n) => n.providerID === PREFIX + machine.name || n.name === machine.name);
  }

  /** The same, as the pool's lagging view shows it. */
  #viewNodesOf(machine: Machine): NodeView[] {
    const view = this.w.view;
    if (view === undefined) return this.#nodesOf(machine);
    const byName = view.nodeNamed(machine.name);
    const byID = view.nodesWithProviderID(PREFIX + machine.name).filter((n) => n.name !== machine.name);
    return byName === undefined ? [...byID] : [byName, ...byID];
  }

  #held(machine: Machine, nodes: readonly NodeView[] = this.#nodesOf(machine)): boolean {
    return machine.hold || nodes.some((n) => n.annotations[HOLD_ANNOTATION] !== undefined && n.annotations[HOLD_ANNOTATION] !== "false");
  }

  /**
   * A plug goes on only for IncreaseSize or the runner, for a machine that may be powered, within the inrush
   * limit. Switching on is not the irreversible act: its conditions are judged on what the view showed.
   */
  /**
   * A plug-on is judged on what plugpool could see when it sent it: nothing at the plug checks a plug-on again
   * (one never loses a running machine), so a taint that lands while it is on its way is a race, not a breach.
   */
  #checkOnSent(machine: Machine): void {
    const { w } = this;
    const name = machine.name;
    if ((this.#inFlight.increase.get(machine.group) ?? 0) === 0 && this.#inFlight.run === 0) {
      this.violations.push(`turnOn of ${name} outside IncreaseSize and the runner`);
    }
    if ((w.view ?? w.cluster).powerOffPod(name) !== undefined) this.violations.push(`turnOn of ${name} while its power-off pod exists`);
    const nodes = this.#viewNodesOf(machine);
    if (this.#held(machine, nodes)) this.violations.push(`turnOn of held ${name}`);
    // A machine whose OS plugpool shut down, and whose power-off was called off, is brought back whatever CA's taint.
    // (Its pod gone as the apiserver has it: the revival waits for that, not for a lagging view.)
    const revival = (this.#shutdownRequested.has(name) || this.#revived.has(name)) && w.cluster.powerOffPod(name) === undefined;
    if (nodes.some((n) => n.annotations[POWER_OFF_ANNOTATION] !== undefined || (!revival && n.taints.some((t) => t.key === TO_BE_DELETED_TAINT)))) {
      this.violations.push(`turnOn of ${name} while its Node is being deleted`);
    }
    // A quarantine keeps a machine out of scale-ups; restoring the power of a registered one is still right, and so
    // is the plug-on of one queued before (a wall clock stepping back may move a quarantine over it).
    if (nodes.length === 0 && !this.#queued.has(name) && w.pool.quarantine().some((q) => q.machine === name)) {
      this.violations.push(`turnOn of quarantined ${name}`);
    }
    // A plug-on ends CA's earlier delete requests; one CA makes while it is on its way (a restore racing the
    // request) still stands when it lands.
    this.#deleteRequested.delete(name);
  }

  /** A plug-on that reached its plug: counted against the inrush limit. */
  #checkOn(machine: Machine): void {
    // The limit is on real time: the wall clock may step either way.
    const now = this.w.clock.monotonic();
    const name = machine.name;
    if (this.#queued.delete(name)) {
      // The runner's plug-on of a machine queued (and counted) before.
    } else if (this.#viewNodesOf(machine).length === 0 && (this.#inFlight.increase.get(machine.group) ?? 0) > 0) {
      this.#spend(machine.group, name);
    }
    this.#powerOns.push(now);
    const inWindow = this.#powerOns.filter((t) => t > now - INTERVAL_MS).length;
    if (this.limit > 0 && inWindow > this.limit) {
      this.violations.push(`turnOn of ${name}: ${inWindow} plug-ons within ${INTERVAL_MS} ms, limit ${this.limit}`);
    }
  }

  #checkCut(machine: Machine): void {
    const inFlight = this.#inFlight;
    const asked =
      (inFlight.delete.get(machine.name) ?? 0) > 0 ||
      (inFlight.decrease.get(machine.group) ?? 0) > 0 ||
      (inFlight.run > 0 && this.#deleteRequested.has(machine.name));
    const nodes = this.#nodesOf(machine);
    const untainted = nodes.some((n) => !n.taints.some((t) => t.key === TO_BE_DELETED_TAINT));
    const cycle = this.#mayCycle(machine, nodes) && (untainted || this.#aborted.has(machine.name));
    if (!asked && !cycle) this.violations.push(`turnOff of ${machine.name} outside a CA request and a power-off`);
    if (machine.hold) this.violations.push(`turnOff of ${machine.name}, held in config`);
    if (!this.w.cluster.viewCurrent) this.violations.push(`turnOff of ${machine.name} while the view is not current`);
    if (nodes.length === 0 && this.w.power.isOn(machine.power) && !this.#licensed(machine)) {
      this.violations.push(`turnOff of ${machine.name}, which has no Node and was not switched on by plugpool (or may run under another name)`);
    }
    // A switch-off that reaches a plug already off cuts nothing (a restart that never heard a cut's lost answer
    // may send another): the rules of a cut are about power that is on.
    const on = this.w.power.isOn(machine.power);
    for (const n of nodes) {
      if (!cycle && on && !n.taints.some((t) => t.key === TO_BE_DELETED_TAINT)) {
        this.violations.push(`turnOff of ${machine.name} while node ${n.name} is registered without the taint`);
      }
      // The walks run with onShutdownTimeout keep-power: a Node Ready at the cut is an OS that did not go down.
      if (n.ready && this.w.power.isOn(machine.power)) this.violations.push(`turnOff of ${machine.name} while node ${n.name} is Ready`);
      if (this.#held(machine, [n])) this.violations.push(`turnOff of ${machine.name}, held by annotation`);
    }
    if (cycle) this.#cycled.add(machine.name);
  }

  /**
   * Without a Node, only a machine plugpool itself switched on may be cut, and never one that may run under another
   * name: a Node of no machine created since that plug-on (as the view shows it), unless its sensor reads standby. (Or a machine whose
   * drained Node went NotReady and was deleted.)
   */
  #licensed(machine: Machine): boolean {
    if (this.#osDown.has(machine.name)) return true;
    if (!this.#switchedOnByPool.has(machine.name)) return false;
    const since = this.#switchedOnAt.get(machine.name) ?? Number.NEGATIVE_INFINITY;
    // Judged on the view, as the domain must: finding such a Node fresh would mean listing every Node of the cluster.
    const view = this.w.view ?? this.w.cluster;
    const stranger = [...this.#strangers].some(([name, created]) => created >= since && view.nodeNamed(name) !== undefined);
    const standby = machine.power.measuresWatts && this.w.power.wattsOf(machine.power) <= STANDBY_WATTS;
    return !stranger || standby;
  }

  /**
   * The power-cycle exception as the rule states it: a machine whose OS plugpool asked to shut down, not held, every
   * Node of it the one shut down then (same uid) and NotReady since a moment after the request. (The domain is
   * stricter where it can tell a Node was Ready again in between; a Ready it had no chance to see, it cannot be
   * judged on. tests/domain/safety-reproductions-3.test.ts covers that.)
   */
  #mayCycle(machine: Machine, nodes: readonly NodeView[]): boolean {
    const asked = this.#shutdownRequested.get(machine.name);
    if (asked === undefined || nodes.length === 0 || this.#held(machine, nodes)) return false;
    const stepped = this.#steppedSinceRequest.has(machine.name);
    return nodes.every((n) => !n.ready && asked.uids.includes(n.uid) && (stepped || (n.readyChangedAt ?? Number.NEGATIVE_INFINITY) >= asked.at - 1000));
  }
}
