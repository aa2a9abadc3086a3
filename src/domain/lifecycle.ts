// A machine's lifecycle: what plugpool remembers of each machine, and where that puts it in its life. The memory is
// private to this module: other modules read it through read-only views and change it only by calling the
// transitions below, each named after what happened. Every "which state is it in" question of the domain, and what
// cluster-autoscaler sees of a machine (its Instance), is derived here, from one order of precedence.
import type { Instance, Machine, NodeView, PlugReading, PlugState, PowerOnRecord } from "./model.ts";
import type { PoolContext, PoolDeps } from "./context.ts";
import type { EnergyMeter } from "./energy.ts";
import type { DeviceMismatch } from "./device-identity.ts";
import type { PowerOffJob } from "./power-off-job.ts";
import { interrupted, newMeter, observe, switched } from "./energy.ts";
import { PlugpoolError } from "./errors.ts";
import { instanceId, isHeld, matchedNode, nodesOf } from "./matching.ts";

/**
 * What plugpool has under way for a machine: one plan at a time, so a queued plug-on, a power-off being
 * recorded and a running power-off can never be written together.
 */
export type Plan =
  /** Nothing: the machine is left as its power and its Nodes are. */
  | { readonly kind: "none" }
  /** IncreaseSize chose it but the inrush limit held it back: the runner switches it on in turn (lower first). */
  | { readonly kind: "queued"; readonly position: number }
  /**
   * DeleteNodes is recording a power-off on its Nodes (`writes` in flight): the runner must not take that record
   * for an earlier run's.
   */
  | { readonly kind: "marking"; readonly writes: number }
  /** A power-off runs, or is being undone (`job.aborting`). */
  | { readonly kind: "powering-off"; readonly job: PowerOffJob };

/** What plugpool knows of the machine's power, from readings and switch answers. */
export interface PowerKnowledge {
  readonly plug: PlugState;
  readonly watts: number | undefined;
  /** The last read's error, until a read succeeds. */
  readonly readError: string | undefined;
  /** Bumped by every applied switch answer: a read started before it is stale. */
  readonly version: number;
  /**
   * A switch command in flight. It is not part of the plan: a power-off's cut and a queued machine's plug-on
   * are commands too. A reading that arrives meanwhile is stale.
   */
  readonly command: "on" | "off" | undefined;
}

/** The machine's boots: the one under way, and the failed ones that quarantine it. */
export interface BootRecord {
  /**
   * When plugpool switched it on for a scale-up, until its Node is seen Ready (the boot's duration is reported)
   * or the plug is seen off. After a restart, the standing power-on record's time.
   */
  readonly startedAt: number | undefined;
  /** Why the boot under way failed; cluster-autoscaler sees it as the creating instance's error. */
  readonly failure: BootFailure | undefined;
  /** Failed boots in a row (quarantine back-off); reset when the machine registers. */
  readonly failures: number;
  /** Left out of scale-ups until then (epoch ms). Recorded on the cluster, so a restart keeps it. */
  readonly quarantinedUntil: number | undefined;
}

export interface BootFailure {
  readonly code: string;
  readonly message: string;
}

/** What plugpool heard its power device say it is (see device-identity.ts). */
export interface DeviceMemory {
  /** It answered as another device at the last switch command: the machine is held meanwhile. */
  readonly mismatch: DeviceMismatch | undefined;
  /** Its uptime at the last switch command, where it tells one. */
  readonly uptimeSeconds: number | undefined;
}

/** What plugpool remembers about one machine, as other modules see it: read-only. */
export interface MachineView {
  readonly plan: Plan;
  readonly power: PowerKnowledge;
  readonly boot: BootRecord;
  readonly device: DeviceMemory;
  /** When plugpool switched it on, or first saw it on. */
  readonly poweredOnAt: number | undefined;
  /** Time on and off and energy drawn, from plugpool's own readings since it started (lost on restart). */
  readonly meter: Readonly<EnergyMeter>;
  /** When plugpool last switched it back on under a Node that should be running (rate limit). */
  readonly restoredAt: number | undefined;
  /**
   * The start of the last power-off this process undid. A view that shows its record after the undo is behind
   * the apiserver (the record landed and was cleared before the view heard of either): it is not resumed.
   */
  readonly undoneRecord: number | undefined;
}

type Writable<T> = { -readonly [K in keyof T]: T[K] };

/** The memory itself, which only the transitions of this module write. */
interface MachineState {
  plan: Plan;
  readonly power: Writable<PowerKnowledge>;
  readonly boot: Writable<BootRecord>;
  readonly device: Writable<DeviceMemory>;
  poweredOnAt: number | undefined;
  readonly meter: EnergyMeter;
  restoredAt: number | undefined;
  undoneRecord: number | undefined;
  /** Once-per-change memory for reports. */
  readonly noted: Map<NoteKey, string | undefined>;
}

declare const opaque: unique symbol;

/** Every machine's lifecycle: opaque outside this module, whose functions alone read and change it. */
export interface MachineStates {
  readonly [opaque]: "lifecycle";
}

interface Table {
  readonly byName: ReadonlyMap<string, MachineState>;
  /** The next queue position handed out. */
  nextQueued: number;
}

/** Fresh lifecycles for the configured machines: every plug unknown, nothing wanted, no power-off. */
export function createMachineStates(deps: PoolDeps, machines: readonly Machine[]): MachineStates {
  const table: Table = { byName: new Map(machines.map((m) => [m.name, newMachineState(deps, m)])), nextQueued: 0 };
  return table as unknown as MachineStates;
}

/** A machine's memory at start: nothing known of its power; its power-on and quarantine as recorded on the cluster. */
function newMachineState(deps: PoolDeps, machine: Machine): MachineState {
  const quarantine = deps.records.quarantine(machine.name);
  const poweredOn = deps.records.powerOn(machine.name)?.at;
  return {
    plan: NO_PLAN,
    power: { plug: "unknown", watts: undefined, readError: undefined, version: 0, command: undefined },
    boot: { startedAt: poweredOn, failure: undefined, failures: quarantine?.failures ?? 0, quarantinedUntil: quarantine?.until },
    device: { mismatch: undefined, uptimeSeconds: undefined },
    poweredOnAt: poweredOn,
    meter: newMeter(),
    restoredAt: undefined,
    undoneRecord: undefined,
    noted: new Map(),
  };
}

const NO_PLAN: Plan = { kind: "none" };

function tableOf(ctx: PoolContext): Table {
  return ctx.states as unknown as Table;
}

function memoryOf(ctx: PoolContext, machine: Machine): MachineState {
  const st = tableOf(ctx).byName.get(machine.name);
  if (st === undefined) throw new PlugpoolError("internal", `machine "${machine.name}" has no state`);
  return st;
}

/** What plugpool remembers of one configured machine, read-only. */
export function stateOf(ctx: PoolContext, machine: Machine): MachineView {
  return memoryOf(ctx, machine);
}

// ---- Where the machine is in its life ----

export type Lifecycle =
  /** A power-off runs (or is being stopped: `job.aborting`); nothing else touches the machine meanwhile. */
  | { readonly phase: "powering-off"; readonly job: PowerOffJob }
  /** A switch command is in flight: its outcome decides what comes next. */
  | { readonly phase: "switching"; readonly to: "on" | "off" }
  /** A Node claims it (by providerID or by name): it runs, or booted under that Node. */
  | { readonly phase: "registered"; readonly nodes: readonly NodeView[] }
  /** A scale-up chose it and the inrush limit holds its plug-on back: switched on in turn. */
  | { readonly phase: "queued"; readonly position: number }
  /** plugpool switched it on (its power-on record) and no Node claims it yet. */
  | { readonly phase: "booting"; readonly since: number }
  /** Its power is on, no Node claims it, and plugpool did not switch it on: someone else powered it. */
  | { readonly phase: "powered-outside" }
  /** Its power reads off and nothing is under way. */
  | { readonly phase: "off" }
  /** Its power has not been read yet (or only failed reads since start) and nothing is under way. */
  | { readonly phase: "unknown" };

export type Phase = Lifecycle["phase"];

/** The machine's lifecycle now. The order of the checks is the order of precedence of the phases. */
export function lifecycleOf(ctx: PoolContext, machine: Machine): Lifecycle {
  const { plan, power } = memoryOf(ctx, machine);
  if (plan.kind === "powering-off") return { phase: "powering-off", job: plan.job };
  if (power.command !== undefined) return { phase: "switching", to: power.command };
  const nodes = nodesOf(ctx, machine);
  if (nodes.length > 0) return { phase: "registered", nodes };
  if (plan.kind === "queued") return { phase: "queued", position: plan.position };
  const record = ctx.deps.records.powerOn(machine.name);
  if (record !== undefined) return { phase: "booting", since: record.at };
  switch (power.plug) {
    case "on":
      return { phase: "powered-outside" };
    case "off":
      return { phase: "off" };
    case "unknown":
      return { phase: "unknown" };
  }
}

/** The machine's power-off, running or being undone, if it has one. */
export function powerOffOf(ctx: PoolContext, machine: Machine): PowerOffJob | undefined {
  const { plan } = memoryOf(ctx, machine);
  return plan.kind === "powering-off" ? plan.job : undefined;
}

/** The machine's place in the queue of plug-ons, if it has one. */
export function queuedPosition(ctx: PoolContext, machine: Machine): number | undefined {
  const { plan } = memoryOf(ctx, machine);
  return plan.kind === "queued" ? plan.position : undefined;
}

/** DeleteNodes is recording a power-off on the machine's Nodes, or a power-off runs: nothing else may start one. */
export function isPowerOffUnderWay(ctx: PoolContext, machine: Machine): boolean {
  const { kind } = memoryOf(ctx, machine).plan;
  return kind === "powering-off" || kind === "marking";
}

/** A switch command to the machine's plug is in flight. */
export function isSwitching(ctx: PoolContext, machine: Machine): boolean {
  return memoryOf(ctx, machine).power.command !== undefined;
}

/**
 * plugpool's licence to cut the machine while no Node claims it, and the only one: its power-on record on the
 * cluster. plugpool switched the machine on (or is about to) and it has neither registered nor been switched off since.
 */
export function powerOnLicence(ctx: PoolContext, machine: Machine): PowerOnRecord | undefined {
  return ctx.deps.records.powerOn(machine.name);
}

function poweredByPlugpool(ctx: PoolContext, machine: Machine): boolean {
  return powerOnLicence(ctx, machine) !== undefined;
}

// ---- What cluster-autoscaler sees ----

/**
 * The instance a machine is, or undefined when it is none. Derived from the lifecycle in its order of precedence: a
 * power-off not being aborted → deleting; held → none; registered (CA matching) → running; switched on by plugpool
 * (its record, or its plug-on under way), queued for a plug-on, or whose boot failed (its queued plug-on failed, or
 * its plug read off before it registered, which ended the record) → creating, with an error once plugpool knows
 * the boot failed. A plug found on that plugpool did not switch on is none: cluster-autoscaler would remove it as a
 * node that never registered, and that would cut a machine someone else is using.
 */
export function instanceOf(ctx: PoolContext, machine: Machine): Instance | undefined {
  const id = instanceId(ctx.config.providerIDPrefix, machine);
  const lifecycle = lifecycleOf(ctx, machine);
  if (lifecycle.phase === "powering-off" && lifecycle.job.aborting === undefined) return { id, state: "deleting" };
  if (isOutOfView(ctx, machine)) return undefined;
  if (matchedNode(ctx.deps.cluster, ctx.config.providerIDPrefix, machine) !== undefined) return { id, state: "running" };
  const { failure } = memoryOf(ctx, machine).boot;
  if (failure !== undefined) return { id, state: "creating", error: failure };
  return isCreating(ctx, machine, lifecycle) ? { id, state: "creating" } : undefined;
}

/**
 * Switched on by plugpool (its record stands), queued, or its plug-on under way. A scale-up's plug-on under way (its
 * record being written, or the plug's answer awaited) is already the instance it is about to be: without it the
 * target size would dip meanwhile, and cluster-autoscaler, which reads it without the group's lock, would ask for
 * the machine again. (A restore switches on a machine that has a Node.)
 */
function isCreating(ctx: PoolContext, machine: Machine, lifecycle: Lifecycle): boolean {
  switch (lifecycle.phase) {
    case "booting":
    case "queued":
      return true;
    case "powered-outside":
    case "off":
    case "unknown":
      return false;
    // Phases that outrank booting and queued: the record, the queue or a plug-on may stand behind them.
    case "powering-off":
    case "switching":
    case "registered": {
      const switchingOn = memoryOf(ctx, machine).power.command === "on" && !hasNodes(ctx, machine);
      return poweredByPlugpool(ctx, machine) || queuedPosition(ctx, machine) !== undefined || switchingOn;
    }
  }
}

/**
 * A held machine is none of cluster-autoscaler's business: listed, it would be drained for a scale-down that
 * plugpool then refuses, or counted as a creating instance that never registers and cannot be deleted. So it
 * is no instance and its Node belongs to no group, whatever its power; unless a power-off still runs (it
 * stops at its next step, seeing the hold).
 */
export function isOutOfView(ctx: PoolContext, machine: Machine): boolean {
  const job = powerOffOf(ctx, machine);
  return (job === undefined || job.aborting !== undefined) && isMachineHeld(ctx, machine, nodesOf(ctx, machine));
}

/**
 * Held in config, by annotation on any of its Nodes, or because its device answered as another: never chosen for
 * scale-up, never powered off, out of cluster-autoscaler's view.
 */
export function isMachineHeld(ctx: PoolContext, machine: Machine, nodes: readonly NodeView[]): boolean {
  return isHeld(machine, nodes) || memoryOf(ctx, machine).device.mismatch !== undefined;
}

function hasNodes(ctx: PoolContext, machine: Machine): boolean {
  return nodesOf(ctx, machine).length > 0;
}

// ---- Transitions of the plan and of plugpool's power-on ----

/**
 * plugpool's power-on of the machine is over (it registered, or its power-off ended): its record, if it stands,
 * ends, and licenses no cut any more.
 */
export function endPowerOnRecord(ctx: PoolContext, machine: Machine): void {
  if (poweredByPlugpool(ctx, machine)) ctx.deps.records.endPowerOn(machine.name);
}

/**
 * Ends the power-on record of every machine the view shows registered: from the moment a Node was seen, the machine
 * runs an OS and plugpool's power-on licenses no cut (a Node deleted afterwards leaves a machine powered outside).
 * Called before every decision that may cut.
 */
export function noteRegistrations(ctx: PoolContext): void {
  for (const machine of ctx.machines) {
    if (nodesOf(ctx, machine).length > 0) endPowerOnRecord(ctx, machine);
  }
}

/** Queues a plug-on of a machine that has nothing under way. */
export function queuePowerOn(ctx: PoolContext, machine: Machine): void {
  const st = memoryOf(ctx, machine);
  if (st.plan.kind !== "none") throw invalidTransition(machine, st, "queue a plug-on");
  st.plan = { kind: "queued", position: tableOf(ctx).nextQueued++ };
}

/** Drops the machine's queued plug-on, if it has one; any other plan stays. */
export function dropQueued(ctx: PoolContext, machine: Machine): void {
  const st = memoryOf(ctx, machine);
  if (st.plan.kind === "queued") st.plan = NO_PLAN;
}

/** DeleteNodes begins to record a power-off on the machine's Nodes; a queued plug-on is dropped. */
export function beginMarking(ctx: PoolContext, machine: Machine): void {
  const st = memoryOf(ctx, machine);
  switch (st.plan.kind) {
    case "none":
    case "queued":
      st.plan = { kind: "marking", writes: 1 };
      return;
    case "marking":
      st.plan = { kind: "marking", writes: st.plan.writes + 1 };
      return;
    case "powering-off":
      throw invalidTransition(machine, st, "record a power-off");
  }
}

/** One write begun by `beginMarking` has settled. A power-off that started meanwhile stays. */
export function endMarking(ctx: PoolContext, machine: Machine): void {
  const st = memoryOf(ctx, machine);
  if (st.plan.kind !== "marking") return;
  st.plan = st.plan.writes > 1 ? { kind: "marking", writes: st.plan.writes - 1 } : NO_PLAN;
}

/** A power-off starts (or an undo of one): whatever else was planned is dropped. One runs at a time. */
export function beginPowerOff(ctx: PoolContext, machine: Machine, job: PowerOffJob): void {
  const st = memoryOf(ctx, machine);
  if (st.plan.kind === "powering-off") throw invalidTransition(machine, st, "start a second power-off");
  st.plan = { kind: "powering-off", job };
}

/** The power-off is over (done, or undone): the machine has nothing under way. */
export function endPowerOff(ctx: PoolContext, machine: Machine): void {
  const st = memoryOf(ctx, machine);
  if (st.plan.kind === "powering-off") st.plan = NO_PLAN;
}

/** A power-off this process undid, started at `startedAt`: a view that shows its record again is behind. */
export function powerOffUndone(ctx: PoolContext, machine: Machine, startedAt: number): void {
  memoryOf(ctx, machine).undoneRecord = startedAt;
}

function invalidTransition(machine: Machine, st: MachineState, what: string): PlugpoolError {
  return new PlugpoolError("internal", `cannot ${what} for ${machine.name}: its plan is "${st.plan.kind}"`);
}

// ---- Transitions of what is known of the power ----

/** A switch command goes to the plug: a reading that arrives meanwhile is stale. */
export function commandSent(ctx: PoolContext, machine: Machine, to: "on" | "off"): void {
  memoryOf(ctx, machine).power.command = to;
}

/** The command sent nothing, or failed without reaching the plug: what was known of it holds. */
export function commandFailed(ctx: PoolContext, machine: Machine): void {
  memoryOf(ctx, machine).power.command = undefined;
}

/** The plug answered a command with its state: the newest state, so reads started before it are stale from now on. */
export function switchAnswered(ctx: PoolContext, machine: Machine, answer: PlugReading): void {
  const st = memoryOf(ctx, machine);
  const reading = credible(answer);
  const { power } = st;
  power.command = undefined;
  power.version += 1;
  power.plug = reading.on ? "on" : "off";
  power.watts = reading.watts;
  switched(st.meter, ctx.deps.clock.now(), reading);
  if (!reading.on) st.boot.startedAt = undefined;
}

/**
 * A command's answer was lost: it may have reached the plug, so the plug is unknown, never as before, and so is its
 * draw (one read before the command would vouch for a standby that may be over).
 */
export function switchUnconfirmed(ctx: PoolContext, machine: Machine): void {
  const st = memoryOf(ctx, machine);
  const { power } = st;
  power.command = undefined;
  power.plug = "unknown";
  power.watts = undefined;
  power.version += 1;
  interrupted(st.meter, ctx.deps.clock.now());
}

/** A read of the plug begins: what its reading is checked against when it arrives. */
export function readStarted(ctx: PoolContext, machine: Machine): number {
  return memoryOf(ctx, machine).power.version;
}

/**
 * A reading of a read begun at `started` arrived. It is applied unless a switch answer came since or a command is in
 * flight (then it is stale and dropped); the reading as applied, or undefined when dropped.
 */
export function readingArrived(ctx: PoolContext, machine: Machine, started: number, answer: PlugReading): PlugReading | undefined {
  const st = memoryOf(ctx, machine);
  const { power } = st;
  if (power.version !== started || power.command !== undefined) return undefined;
  const reading = credible(answer);
  power.plug = reading.on ? "on" : "off";
  power.watts = reading.watts;
  power.readError = undefined;
  observe(st.meter, ctx.deps.clock.now(), reading);
  if (!reading.on) st.boot.startedAt = undefined;
  return reading;
}

/**
 * The reading with its draw as plugpool takes it: a draw below -1 W is a faulty sensor, so unknown (an unknown
 * draw never counts as standby), and a slightly negative one is a sensor's offset at no load, so 0.
 */
function credible(reading: PlugReading): PlugReading {
  const { watts } = reading;
  if (watts === undefined || watts >= 0) return reading;
  return watts >= -1 ? { on: reading.on, watts: 0 } : { on: reading.on };
}


/**
 * When the machine counts as powered from, after a reading (decrease cuts the latest first): seen on for the first
 * time, from now; seen off, not at all, unless plugpool's power-on record still stands.
 */
export function poweredSeen(ctx: PoolContext, machine: Machine, on: boolean): void {
  const st = memoryOf(ctx, machine);
  if (on) st.poweredOnAt ??= ctx.deps.clock.now();
  else if (!poweredByPlugpool(ctx, machine)) st.poweredOnAt = undefined;
}

/** A read of the plug failed with `error`; true when that is news (the last read did not fail so). */
export function readFailed(ctx: PoolContext, machine: Machine, error: string): boolean {
  const { power } = memoryOf(ctx, machine);
  if (power.readError === error) return false;
  power.readError = error;
  return true;
}

// ---- Transitions of boots, quarantine and the device ----

/** plugpool switched the machine on for a scale-up (or may have): its boot is timed from now, with no failure yet. */
export function bootStarted(ctx: PoolContext, machine: Machine): void {
  const st = memoryOf(ctx, machine);
  st.poweredOnAt = ctx.deps.clock.now();
  st.boot.startedAt = st.poweredOnAt;
  st.boot.failure = undefined;
}

/** The boot was timed (its Node is Ready): nothing more to report of it. */
export function bootTimed(ctx: PoolContext, machine: Machine): void {
  memoryOf(ctx, machine).boot.startedAt = undefined;
}

/**
 * plugpool cut the machine's plug (before it ends the power-on record): it is powered no more, and a failed boot is
 * over with it. True when the cut was of an `unregistered` machine plugpool had switched on and whose boot had not
 * failed yet: cluster-autoscaler dropped it before it registered, which counts as a failed boot.
 */
export function plugCut(ctx: PoolContext, machine: Machine, unregistered: boolean): boolean {
  const st = memoryOf(ctx, machine);
  const dropped = unregistered && poweredByPlugpool(ctx, machine) && st.boot.failure === undefined;
  st.boot.failure = undefined;
  st.poweredOnAt = undefined;
  return dropped;
}

/** The boot under way failed: cluster-autoscaler sees the creating instance with this error. */
export function bootFailed(ctx: PoolContext, machine: Machine, failure: BootFailure): void {
  memoryOf(ctx, machine).boot.failure = failure;
}

/** The failed boot is no longer plugpool's instance (it registered, left, or someone else powered it). */
export function bootFailureForgotten(ctx: PoolContext, machine: Machine): void {
  memoryOf(ctx, machine).boot.failure = undefined;
}

/** A failed boot whose plug now reads on, with no power-on record of plugpool's, was switched on by someone else: no longer plugpool's instance. */
export function failedBootPoweredOutside(ctx: PoolContext, machine: Machine): void {
  const st = memoryOf(ctx, machine);
  if (st.boot.failure !== undefined && st.power.plug === "on" && !poweredByPlugpool(ctx, machine)) st.boot.failure = undefined;
}

/** One more failed boot in a row; its count. */
export function bootFailureCounted(ctx: PoolContext, machine: Machine): number {
  const { boot } = memoryOf(ctx, machine);
  boot.failures += 1;
  return boot.failures;
}

/** Left out of scale-ups until `until` (epoch ms). */
export function quarantined(ctx: PoolContext, machine: Machine, until: number): void {
  memoryOf(ctx, machine).boot.quarantinedUntil = until;
}

/** The machine registered: the count of failed boots starts again and any quarantine ends. True when there was one. */
export function bootFailuresCleared(ctx: PoolContext, machine: Machine): boolean {
  const { boot } = memoryOf(ctx, machine);
  if (boot.failures === 0 && boot.quarantinedUntil === undefined) return false;
  boot.failures = 0;
  boot.quarantinedUntil = undefined;
  return true;
}

/** The device answered as another: the machine is held. */
export function deviceMismatched(ctx: PoolContext, machine: Machine, mismatch: DeviceMismatch): void {
  memoryOf(ctx, machine).device.mismatch = mismatch;
}

/** The device told its uptime (or none); the uptime it told before. */
export function uptimeHeard(ctx: PoolContext, machine: Machine, uptimeSeconds: number | undefined): number | undefined {
  const { device } = memoryOf(ctx, machine);
  const before = device.uptimeSeconds;
  device.uptimeSeconds = uptimeSeconds;
  return before;
}

/** plugpool switches the machine back on under its Node now (the restore's rate limit counts from here). */
export function restoreSent(ctx: PoolContext, machine: Machine): void {
  memoryOf(ctx, machine).restoredAt = ctx.deps.clock.now();
}

/** What a report is made once per change of. */
export type NoteKey = "power" | "providerID" | "duplicates";

/** Notes the value a report is about; true when it differs from the one noted last. */
export function noteChanged(ctx: PoolContext, machine: Machine, key: NoteKey, value: string | undefined): boolean {
  const { noted } = memoryOf(ctx, machine);
  const changed = noted.get(key) !== value;
  noted.set(key, value);
  return changed;
}
