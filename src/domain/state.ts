// The little plugpool keeps in memory. Everything else is derived from the ClusterView on each call, so
// a restart (a new pool over the same plugs and cluster) loses nothing that matters.
import type { Clock, ClusterView, Leadership, NodeLookup, NodeTeardown, PowerRecords, PowerSwitch, Reporter } from "./ports.ts";
import type { Machine, NodeGroupSpec, NodeView, PlugState, PoolConfig } from "./model.ts";
import type { PowerOffStep, SafetyRule } from "./events.ts";
import type { Lock } from "./lock.ts";
import type { Revival } from "./revival.ts";
import type { EnergyMeter } from "./energy.ts";
import { newMeter } from "./energy.ts";
import { PlugpoolError } from "./errors.ts";
import { createLock } from "./lock.ts";
import { safetyNodes } from "./matching.ts";

/** The outside world a pool works with. */
export interface PoolDeps {
  readonly clock: Clock;
  readonly power: PowerSwitch;
  readonly cluster: ClusterView;
  /** Fresh reads of the Nodes that claim a machine, right before an irreversible act. */
  readonly lookup: NodeLookup;
  readonly teardown: NodeTeardown;
  /** plugpool's own power-ons and quarantines, kept on the cluster. */
  readonly records: PowerRecords;
  readonly reporter: Reporter;
  /** Called when a power-off was started, so the owner of the timer runs `reconcile` soon. */
  readonly wake?: () => void;
  /**
   * When given, the pool acts only while this says so: every irreversible act asks it right before it is made
   * (see leadership.ts), and while it does not, the pool answers `not-leader` and its runner does nothing.
   */
  readonly leadership?: Leadership;
}

/**
 * What a power-off has established, each with the time (epoch ms) it became true, as a Kubernetes condition
 * carries its lastTransitionTime. A fact that stops holding is deleted. The steps (power-off-steps.ts) alone
 * set and read them.
 */
export interface PowerOffFacts {
  /** The power-off's record on its Nodes is committed: a restart resumes it. */
  recordCommitted?: number;
  /**
   * The OS was asked to shut down: this job's power-off pod exists (it created it, or found one an earlier run
   * created), or the power control accepted a shutdown request.
   */
  shutdownRequested?: number;
  /** A failed or stuck power-off pod is being deleted, to be created anew once the apiserver says it is gone. */
  podReplacing?: number;
  /**
   * The Node went NotReady (or the machine is known without power): the grace counts from this time. Dropped
   * when a Node of the machine is seen Ready again before the cut, unless its power was seen off.
   */
  notReady?: number;
  /**
   * The plug read off while the Node still showed Ready. While it stays so, a Ready Node is checked against the
   * plug: read off, it is known off (`plugOff`); read on, the machine has power again and this fact is dropped.
   */
  powerSeenOff?: number;
  /** The Node never went NotReady and `onShutdownTimeout` is "cut": the cut is a hard one. */
  hardCut?: number;
  /** With a power sensor: the draw has been at or below standby since. */
  standby?: number;
  /** The draw stayed at standby for the whole window: the grace ended early. */
  standbyReached?: number;
  /** The grace ran its full time. */
  graceElapsed?: number;
  /** The plug is known off (confirmed by the switch's answer or a reading). */
  plugOff?: number;
  /** A switch-off may have reached the plug but was not confirmed: the power may be cut, so nothing is undone. */
  cutUnconfirmed?: number;
  /**
   * After an unconfirmed switch-off the plug read on: either the switch-off never went through, or it did and
   * someone switched the machine on since. Nothing tells which, so the machine is never power-cycled after it.
   */
  onAfterUnconfirmedCut?: number;
  /** The power-off pod is gone. */
  podRemoved?: number;
}

/** A power-off in progress, with the facts it has established (in memory; the cluster holds the rest). */
export interface PowerOffJob {
  /** Name of the Node when the job started ("" if there was none). */
  readonly node: string;
  readonly startedAt: number;
  /** Set once the saga was stopped; the job lives on until its visible traces are gone. */
  aborting: { readonly step: PowerOffStep; readonly reason: string; readonly rule?: SafetyRule } | undefined;
  readonly stepEnteredAt: Partial<Record<PowerOffStep, number>>;
  /** Steps whose completion has been reported. */
  readonly reportedDone: Set<PowerOffStep>;
  /** Failures of each step so far, for the backoff. */
  readonly attempts: Partial<Record<PowerOffStep, number>>;
  /** No step runs before this time (backoff after a failure). */
  notBefore: number | undefined;
  /** Last "waiting" reported, so a long wait is reported once. */
  lastWaiting: string | undefined;
  /** Power-off pods created by this job (a failed or stuck one is replaced, up to `maxPodAttempts`). */
  podAttempts: number;
  /** What the job has established so far. */
  readonly facts: PowerOffFacts;
  /** The uid of the Node whose OS this job asked to shut down (`facts.shutdownRequested`), when known. */
  shutdownNodeUid: string | undefined;
  /**
   * What this process has seen of that Node since the request (revival.ts `watchShutdownNode`): the time of its
   * Ready condition when first seen NotReady, and whether it was seen Ready after that (its OS ran again).
   */
  readonly shutdownNodeSeen: { notReadyAt: number | undefined; readyAgain: boolean };
  /** Once an aborted power-off's traces are gone: watching whether its machine halted, to bring it back. */
  revival: Revival | undefined;
  /** Nodes this job asked to delete (each reported once). */
  readonly deletedNodes: Set<string>;
  /**
   * Set on a job that only undoes a power-off record (see RecordUndo): the Nodes it was written on, whether a
   * write of it is still out (one that lands after the undo would leave the record), and whether the undo is told.
   */
  readonly undoing?: { readonly nodes: readonly string[]; writesOut: boolean; readonly quiet: boolean };
}

/**
 * What plugpool has under way for a machine: one plan at a time, so a queued plug-on, a power-off being
 * recorded and a running power-off can never be written together. Only the transitions below change it.
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
  plug: PlugState;
  watts: number | undefined;
  /** The last read's error, until a read succeeds. */
  readError: string | undefined;
  /** Bumped by every applied switch answer: a read started before it is stale. */
  version: number;
  /**
   * A switch command in flight. It is not part of the plan: a power-off's cut and a queued machine's plug-on
   * are commands too. A reading that arrives meanwhile is stale.
   */
  command: "on" | "off" | undefined;
}

/** The machine's boots: the one under way, and the failed ones that quarantine it. */
export interface BootRecord {
  /**
   * When plugpool switched it on for a scale-up, until its Node is seen Ready (the boot's duration is reported)
   * or the plug is seen off. After a restart, the standing power-on record's time.
   */
  startedAt: number | undefined;
  /** Why the boot under way failed; cluster-autoscaler sees it as the creating instance's error. */
  failure: { readonly code: string; readonly message: string } | undefined;
  /** Failed boots in a row (quarantine back-off); reset when the machine registers. */
  failures: number;
  /** Left out of scale-ups until then (epoch ms). Recorded on the cluster, so a restart keeps it. */
  quarantinedUntil: number | undefined;
}

/** What plugpool heard its power device say it is (see device-identity.ts). */
export interface DeviceMemory {
  /** It answered as another device at the last switch command: the machine is held meanwhile. */
  mismatch: { readonly expected: string; readonly seen: string } | undefined;
  /** Its uptime at the last switch command, where it tells one. */
  uptimeSeconds: number | undefined;
}

/** What plugpool remembers about one machine. */
export interface MachineState {
  /** Changed only by the transitions below. */
  plan: Plan;
  readonly power: PowerKnowledge;
  readonly boot: BootRecord;
  readonly device: DeviceMemory;
  /** When plugpool switched it on, or first saw it on. */
  poweredOnAt: number | undefined;
  /** Time on and off and energy drawn, from plugpool's own readings since it started (lost on restart). */
  readonly meter: EnergyMeter;
  /** When plugpool last switched it back on under a Node that should be running (rate limit). */
  restoredAt: number | undefined;
  /**
   * The start of the last power-off this process undid. A view that shows its record after the undo is behind
   * the apiserver (the record landed and was cleared before the view heard of either): it is not resumed.
   */
  undoneRecord: number | undefined;
  /** Once-per-change memory for reports. */
  notedPower: string | undefined;
  notedProviderID: string | undefined;
  notedDuplicates: string | undefined;
}

const NO_PLAN: Plan = { kind: "none" };

/** The running (or aborting) power-off of the machine, if any. */
export function jobOf(st: MachineState): PowerOffJob | undefined {
  return st.plan.kind === "powering-off" ? st.plan.job : undefined;
}

/** The machine's queue position, if a plug-on of it is queued. */
export function queuedPosition(st: MachineState): number | undefined {
  return st.plan.kind === "queued" ? st.plan.position : undefined;
}

/** Queues a plug-on of a machine that has nothing under way. */
export function queuePowerOn(ctx: PoolContext, machine: Machine): void {
  const st = stateOf(ctx, machine);
  if (st.plan.kind !== "none") throw invalidTransition(machine, st, "queue a plug-on");
  st.plan = { kind: "queued", position: ctx.memory.nextQueued++ };
}

/** Drops the machine's queued plug-on, if it has one; any other plan stays. */
export function dropQueued(st: MachineState): void {
  if (st.plan.kind === "queued") st.plan = NO_PLAN;
}

/** DeleteNodes begins to record a power-off on the machine's Nodes; a queued plug-on is dropped. */
export function beginMarking(ctx: PoolContext, machine: Machine): void {
  const st = stateOf(ctx, machine);
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
export function endMarking(st: MachineState): void {
  if (st.plan.kind !== "marking") return;
  st.plan = st.plan.writes > 1 ? { kind: "marking", writes: st.plan.writes - 1 } : NO_PLAN;
}

/** A power-off starts (or an undo of one): whatever else was planned is dropped. One runs at a time. */
export function beginPowerOff(ctx: PoolContext, machine: Machine, job: PowerOffJob): void {
  const st = stateOf(ctx, machine);
  if (st.plan.kind === "powering-off") throw invalidTransition(machine, st, "start a second power-off");
  st.plan = { kind: "powering-off", job };
}

/** The power-off is over (done, or undone): the machine has nothing under way. */
export function endPowerOff(st: MachineState): void {
  if (st.plan.kind === "powering-off") st.plan = NO_PLAN;
}

function invalidTransition(machine: Machine, st: MachineState, what: string): PlugpoolError {
  return new PlugpoolError("internal", `cannot ${what} for ${machine.name}: its plan is "${st.plan.kind}"`);
}

/** Memory of the pool as a whole. */
export interface PoolMemory {
  /** When this pool was built (monotonic ms): the inrush limit counts a restart as a full window. */
  readonly createdAt: number;
  /** When each recent plug-on was sent (monotonic ms), oldest first: the inrush limit's window. */
  readonly powerOnsSent: number[];
  /** The next queue position handed out. */
  nextQueued: number;
}

/** Everything the domain's functions share. */
export interface PoolContext {
  readonly deps: PoolDeps;
  readonly config: PoolConfig;
  /** All machines, config order. */
  readonly machines: readonly Machine[];
  readonly states: ReadonlyMap<string, MachineState>;
  /** One per group: increase, delete, decrease and the runner's plug-ons of a group run one at a time. */
  readonly locks: ReadonlyMap<string, Lock>;
  readonly memory: PoolMemory;
}

/** Fresh memory for the configured machines: every plug unknown, nothing wanted, no power-off. */
export function createContext(deps: PoolDeps, config: PoolConfig): PoolContext {
  const machines = config.groups.flatMap((g) => g.machines).toSorted((a, b) => a.index - b.index);
  const states = new Map<string, MachineState>(machines.map((m) => [m.name, newMachineState(deps, m)]));
  const locks = new Map(config.groups.map((g) => [g.id, createLock()]));
  const memory = { createdAt: deps.clock.monotonic(), powerOnsSent: [], nextQueued: 0 };
  return { deps, config, machines, states, locks, memory };
}

/** Runs `fn` holding the group's lock. */
export function withGroupLock<T>(ctx: PoolContext, groupId: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const lock = ctx.locks.get(groupId);
  if (lock === undefined) throw new PlugpoolError("node-group-not-found", `node group "${groupId}" is not configured`);
  return lock(fn, signal);
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
    notedPower: undefined,
    notedProviderID: undefined,
    notedDuplicates: undefined,
  };
}

/**
 * plugpool switched the machine on (or is about to) and it has neither registered nor been switched off since:
 * the record on the cluster says so. This is the only licence to cut a machine that has no Node.
 */
export function poweredByPlugpool(ctx: PoolContext, machine: Machine): boolean {
  return ctx.deps.records.powerOn(machine.name) !== undefined;
}

/**
 * Ends the power-on record of every machine the view shows registered: from the moment a Node was seen, the machine
 * runs an OS and plugpool's power-on licenses no cut (a Node deleted afterwards leaves a machine powered outside).
 * Called before every decision that may cut.
 */
export function noteRegistrations(ctx: PoolContext): void {
  for (const machine of ctx.machines) {
    if (poweredByPlugpool(ctx, machine) && nodesOf(ctx, machine).length > 0) ctx.deps.records.endPowerOn(machine.name);
  }
}

/** The memory of one configured machine. */
export function stateOf(ctx: PoolContext, machine: Machine): MachineState {
  const st = ctx.states.get(machine.name);
  if (st === undefined) throw new PlugpoolError("internal", `machine "${machine.name}" has no state`);
  return st;
}

/** The configured group with this id; throws `node-group-not-found`. */
export function groupOf(ctx: PoolContext, groupId: string): NodeGroupSpec {
  const group = ctx.config.groups.find((g) => g.id === groupId);
  if (group === undefined) throw new PlugpoolError("node-group-not-found", `node group "${groupId}" is not configured`);
  return group;
}

/** The machine's Nodes in the safety sense: every Node that claims it, by providerID or by name. */
export function nodesOf(ctx: PoolContext, machine: Machine): readonly NodeView[] {
  return safetyNodes(ctx.deps.cluster, ctx.config.providerIDPrefix, machine);
}
