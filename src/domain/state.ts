// The little plugpool keeps in memory. Everything else is derived from the ClusterView on each call, so
// a restart (a new pool over the same plugs and cluster) loses nothing that matters.
import type { Clock, ClusterView, NodeLookup, NodeTeardown, PowerRecords, PowerSwitch, Reporter } from "./ports.ts";
import type { Machine, NodeGroupSpec, NodeView, PlugState, PoolConfig } from "./model.ts";
import type { PowerOffStep, SafetyRule } from "./events.ts";
import type { Lock } from "./lock.ts";
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
}

/**
 * What a power-off has established, each with the time (epoch ms) it became true, as a Kubernetes condition
 * carries its lastTransitionTime. A fact that stops holding is deleted. The steps (power-off-steps.ts) alone
 * set and read them.
 */
export interface PowerOffFacts {
  /**
   * The OS was asked to shut down: this job's power-off pod exists (it created it, or found one an earlier run
   * created), or the power control accepted a shutdown request.
   */
  shutdownRequested?: number;
  /** A failed or stuck power-off pod is being deleted, to be created anew once the apiserver says it is gone. */
  podReplacing?: number;
  /** The Node went NotReady (or the machine is known without power): the grace counts from this time. */
  notReady?: number;
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
  /** Nodes this job asked to delete (each reported once). */
  readonly deletedNodes: Set<string>;
}

/** What plugpool remembers about one machine. */
export interface MachineState {
  plug: PlugState;
  watts: number | undefined;
  readError: string | undefined;
  /** Bumped by every applied switch answer: a read started before it is stale. */
  version: number;
  /** A switch command is in flight. */
  switching: "on" | "off" | undefined;
  /** When plugpool switched it on, or first saw it on. */
  poweredOnAt: number | undefined;
  /**
   * When plugpool switched it on for a scale-up, until its Node is seen Ready (the boot's duration is reported)
   * or the plug is seen off. After a restart, the standing power-on record's time.
   */
  bootStartedAt: number | undefined;
  /** Time on and off and energy drawn, from plugpool's own readings since it started (lost on restart). */
  readonly meter: EnergyMeter;
  /**
   * IncreaseSize chose it but the inrush limit held it back: a creating instance whose plug the runner switches
   * on in turn. The number orders the queue (lower first). Lost on restart, like everything in memory.
   */
  queued: number | undefined;
  bootFailure: { readonly code: string; readonly message: string } | undefined;
  /** Failed boots in a row (quarantine back-off); reset when the machine registers. */
  bootFailures: number;
  /** Left out of scale-ups until then (epoch ms). In memory only: a restart forgets quarantines. */
  quarantinedUntil: number | undefined;
  /** When plugpool last switched it back on under a Node that should be running (rate limit). */
  restoredAt: number | undefined;
  job: PowerOffJob | undefined;
  /** DeleteNodes is recording a power-off on the Node: the runner must not take that record for an earlier run's. */
  beginning: boolean;
  /** Once-per-change memory for reports. */
  notedPower: string | undefined;
  notedProviderID: string | undefined;
  notedDuplicates: string | undefined;
}

/** Memory of the pool as a whole. */
export interface PoolMemory {
  /** When this pool was built (epoch ms): the inrush limit counts a restart as a full window. */
  readonly createdAt: number;
  /** When each recent plug-on was sent (epoch ms), oldest first: the inrush limit's window. */
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
  const memory = { createdAt: deps.clock.now(), powerOnsSent: [], nextQueued: 0 };
  return { deps, config, machines, states, locks, memory };
}

/** Runs `fn` holding the group's lock. */
export function withGroupLock<T>(ctx: PoolContext, groupId: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const lock = ctx.locks.get(groupId);
  if (lock === undefined) throw new PlugpoolError("node-group-not-found", `node group "${groupId}" is not configured`);
  return lock(fn, signal);
}

/** A machine's memory at start: nothing known of its plug; its power-on and quarantine as recorded on the cluster. */
function newMachineState(deps: PoolDeps, machine: Machine): MachineState {
  const quarantine = deps.records.quarantine(machine.name);
  return {
    plug: "unknown",
    watts: undefined,
    readError: undefined,
    version: 0,
    switching: undefined,
    poweredOnAt: deps.records.powerOn(machine.name)?.at,
    bootStartedAt: deps.records.powerOn(machine.name)?.at,
    meter: newMeter(),
    queued: undefined,
    bootFailure: undefined,
    bootFailures: quarantine?.failures ?? 0,
    quarantinedUntil: quarantine?.until,
    restoredAt: undefined,
    job: undefined,
    notedPower: undefined,
    notedProviderID: undefined,
    notedDuplicates: undefined,
    beginning: false,
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
