// A power-off job: what one power-off of a machine has established so far, in memory (the cluster holds the rest).
// The machine's lifecycle holds the job while it runs (lifecycle.ts); the saga's steps (power-off-steps.ts), its
// runner (power-off.ts) and the revival watch move it on, through the transitions below: elsewhere a job is read-only.
import type { NodeView } from "./model.ts";
import type { PowerOffStep, SafetyRule } from "./events.ts";
import type { Revival, RevivalHow } from "./revival.ts";
import { PlugpoolError } from "./errors.ts";

/**
 * What a power-off has established, each with the time (epoch ms) it became true, as a Kubernetes condition
 * carries its lastTransitionTime. A fact that stops holding is retracted. A fact is established only once the one it
 * builds on holds (`FACT_BUILDS_ON`), and retracting one retracts what builds on it.
 */
export interface PowerOffFacts {
  /** The power-off's record on its Nodes is committed: a restart resumes it. */
  readonly recordCommitted?: number;
  /**
   * The OS was asked to shut down: this job's power-off pod exists (it created it, or found one an earlier run
   * created), or the power control accepted a shutdown request.
   */
  readonly shutdownRequested?: number;
  /** A failed or stuck power-off pod is being deleted, to be created anew once the apiserver says it is gone. */
  readonly podReplacing?: number;
  /**
   * The Node went NotReady (or the machine is known without power): the grace counts from this time. Dropped
   * when a Node of the machine is seen Ready again before the cut, unless its power was seen off.
   */
  readonly notReady?: number;
  /**
   * The plug read off while the Node still showed Ready. While it stays so, a Ready Node is checked against the
   * plug: read off, it is known off (`plugOff`); read on, the machine has power again and this fact is dropped.
   */
  readonly powerSeenOff?: number;
  /** The Node never went NotReady and `onShutdownTimeout` is "cut": the cut is a hard one. */
  readonly hardCut?: number;
  /** With a power sensor: the draw has been at or below standby since. */
  readonly standby?: number;
  /** The draw stayed at standby for the whole window: the grace ended early. */
  readonly standbyReached?: number;
  /** The grace ran its full time. */
  readonly graceElapsed?: number;
  /** The plug is known off (confirmed by the switch's answer or a reading). */
  readonly plugOff?: number;
  /** A switch-off may have reached the plug but was not confirmed: the power may be cut, so nothing is undone. */
  readonly cutUnconfirmed?: number;
  /**
   * After an unconfirmed switch-off the plug read on: either the switch-off never went through, or it did and
   * someone switched the machine on since. Nothing tells which, so the machine is never power-cycled after it.
   */
  readonly onAfterUnconfirmedCut?: number;
  /** The power-off pod is gone. */
  readonly podRemoved?: number;
}


/** Why a power-off was stopped: at which step, and which rule refused it, if one did. */
export interface Aborting {
  readonly step: PowerOffStep;
  readonly reason: string;
  readonly rule?: SafetyRule;
}

/** What every job has. */
interface JobCommon {
  /** Name of the Node when the job started ("" if there was none). */
  readonly node: string;
  readonly startedAt: number;
  /** Set once the saga was stopped; the job lives on until its visible traces are gone. */
  readonly aborting: Aborting | undefined;
  readonly stepEnteredAt: Readonly<Partial<Record<PowerOffStep, number>>>;
  /** Steps whose completion has been reported. */
  readonly reportedDone: ReadonlySet<PowerOffStep>;
  /** Failures of each step so far, for the backoff. */
  readonly attempts: Readonly<Partial<Record<PowerOffStep, number>>>;
  /** No step runs before this time (backoff after a failure). */
  readonly notBefore: number | undefined;
  /** Last "waiting" reported, so a long wait is reported once. */
  readonly lastWaiting: string | undefined;
  /** Power-off pods created by this job (a failed or stuck one is replaced, up to `maxPodAttempts`). */
  readonly podAttempts: number;
  /** What the job has established so far. */
  readonly facts: PowerOffFacts;
  /** The uid of the Node whose OS this job asked to shut down (`facts.shutdownRequested`), when known. */
  readonly shutdownNodeUid: string | undefined;
  /**
   * That Node's Ready condition as plugpool saw it when it asked (unknown for a pod an earlier run created): a later
   * NotReady is told from it without setting the control plane's clock against plugpool's own.
   */
  readonly shutdownNodeReady: { readonly ready: boolean; readonly changedAt: number | undefined } | undefined;
  /**
   * What this process has seen of that Node since the request (safety.ts `watchShutdownNode`): the time of its
   * Ready condition when first seen NotReady, and whether it was seen Ready after that (its OS ran again).
   */
  readonly shutdownNodeSeen: { readonly notReadyAt: number | undefined; readonly readyAgain: boolean };
  /** Once an aborted power-off's traces are gone: watching whether its machine halted, to bring it back. */
  readonly revival: Revival | undefined;
  /** Nodes this job asked to delete (each reported once). */
  readonly deletedNodes: ReadonlySet<string>;
}

/**
 * A power-off in progress, with the facts it has established; or the undo of a power-off record whose DeleteNodes
 * failed towards cluster-autoscaler (`undo`), which is stopped from its start and only clears what the call wrote.
 */
export type PowerOffJob = PowerOffRun | UndoJob;

export type PowerOffRun = JobCommon & { readonly kind: "power-off" };

export type UndoJob = JobCommon & {
  readonly kind: "undo";
  /** The Nodes the record was written on: each is cleared, whatever the view shows. */
  readonly nodes: readonly string[];
  /** A write of the record is still out: one that lands after the undo would leave the record. */
  readonly writesOut: boolean;
  /** Tells nothing: what it undoes was undone and told already. */
  readonly quiet: boolean;
};

type Writable<T> = { -readonly [K in keyof T]: T[K] };

/** The job itself, which only the transitions of this module write. */
type JobState = Omit<Writable<JobCommon>, "facts" | "stepEnteredAt" | "reportedDone" | "attempts" | "shutdownNodeSeen" | "revival" | "deletedNodes"> & {
  readonly facts: Writable<PowerOffFacts>;
  readonly stepEnteredAt: Partial<Record<PowerOffStep, number>>;
  readonly reportedDone: Set<PowerOffStep>;
  readonly attempts: Partial<Record<PowerOffStep, number>>;
  readonly shutdownNodeSeen: { notReadyAt: number | undefined; readyAgain: boolean };
  revival: Writable<Revival> | undefined;
  readonly deletedNodes: Set<string>;
  writesOut?: boolean;
};

function writable(job: PowerOffJob): JobState {
  return job as unknown as JobState;
}

function common(node: string, startedAt: number): Writable<JobCommon> {
  return {
    node,
    startedAt,
    aborting: undefined,
    stepEnteredAt: {},
    reportedDone: new Set(),
    attempts: {},
    notBefore: undefined,
    lastWaiting: undefined,
    podAttempts: 0,
    facts: {},
    shutdownNodeUid: undefined,
    shutdownNodeReady: undefined,
    shutdownNodeSeen: { notReadyAt: undefined, readyAgain: false },
    revival: undefined,
    deletedNodes: new Set(),
  };
}

/** A power-off job at its start: nothing done, nothing known yet. */
export function newJob(node: string, startedAt: number): PowerOffRun {
  return { ...common(node, startedAt), kind: "power-off" };
}

/** The undo of a power-off record written on `nodes` at `startedAt`, stopped from its start for `reason`. */
export function newUndo(startedAt: number, undo: { readonly nodes: readonly string[]; readonly reason: string; readonly quiet: boolean }): UndoJob {
  const job = common(undo.nodes[0] ?? "", startedAt);
  job.aborting = { step: "check-taint", reason: undo.reason };
  return { ...job, kind: "undo", nodes: undo.nodes, writesOut: true, quiet: undo.quiet };
}

// ---- The facts, in order ----

type Fact = keyof PowerOffFacts;

/**
 * The fact each one builds on: the grace, its standby, a hard cut, the plug seen off and every cut come after the
 * Node went NotReady (or the machine was known without power); the pod is removed once the plug is off. The plug read
 * on after an unconfirmed cut builds on nothing: it outlives everything, so that the machine is never power-cycled.
 */
const FACT_BUILDS_ON: Readonly<Partial<Record<Fact, Fact>>> = {
  powerSeenOff: "notReady",
  hardCut: "notReady",
  standby: "notReady",
  standbyReached: "standby",
  graceElapsed: "notReady",
  plugOff: "notReady",
  cutUnconfirmed: "notReady",
  podRemoved: "plugOff",
};

/** `fact` holds from `at` on (a time it already had is replaced). Refused while the fact it builds on does not hold. */
export function establish(job: PowerOffJob, fact: Fact, at: number): void {
  const base = FACT_BUILDS_ON[fact];
  if (base !== undefined && job.facts[base] === undefined) {
    throw new PlugpoolError("internal", `power-off of node "${job.node}": ${fact} cannot hold before ${base}`);
  }
  writable(job).facts[fact] = at;
}

/** `fact` holds from `at` on, unless it holds already (then it keeps its time). */
export function establishOnce(job: PowerOffJob, fact: Fact, at: number): void {
  if (job.facts[fact] === undefined) establish(job, fact, at);
}

/** `fact` no longer holds, and neither does anything that builds on it. */
export function retract(job: PowerOffJob, fact: Fact): void {
  Reflect.deleteProperty(writable(job).facts, fact);
  for (const [dependent, base] of Object.entries(FACT_BUILDS_ON) as [Fact, Fact][]) {
    if (base === fact && job.facts[dependent] !== undefined) retract(job, dependent);
  }
}

/** A wall clock stepped back put the NotReady time ahead of `now`: the grace counts from `now` instead. */
export function notReadyNoLaterThan(job: PowerOffJob, now: number): void {
  const { facts } = writable(job);
  if (facts.notReady !== undefined && facts.notReady > now) facts.notReady = now;
}

/**
 * The OS of `node` was asked to shut down at `at`: a halt seen later on that very Node is this job's doing. `read`
 * is that Node as read fresh right before the request, when it was (its Ready condition then).
 */
export function shutdownAsked(job: PowerOffJob, at: number, node: NodeView | undefined, read: NodeView | undefined): void {
  establish(job, "shutdownRequested", at);
  writable(job).shutdownNodeUid = node?.uid;
  writable(job).shutdownNodeReady = read === undefined ? undefined : { ready: read.ready, changedAt: read.readyChangedAt };
}

/** A power-off pod an earlier run created, started at `at` on the Node with `uid`: this job asked for that shutdown. */
export function shutdownAdopted(job: PowerOffJob, at: number, uid: string | undefined): void {
  const state = writable(job);
  establishOnce(job, "shutdownRequested", at);
  state.shutdownNodeUid ??= uid;
  state.podAttempts = Math.max(state.podAttempts, 1);
}

/** The Node shut down was first seen NotReady, its Ready condition changed at `since`. */
export function shutdownNodeNotReady(job: PowerOffJob, since: number): void {
  writable(job).shutdownNodeSeen.notReadyAt = since;
}

/** The Node shut down ran again after the request: no later NotReady of it is this job's doing. */
export function shutdownNodeRanAgain(job: PowerOffJob): void {
  writable(job).shutdownNodeSeen.readyAgain = true;
}

// ---- The runner's bookkeeping ----

/** The power-off is stopped: it only undoes what others can see from now on. */
export function aborted(job: PowerOffJob, why: Aborting): void {
  writable(job).aborting = why;
}

/** The step runs now; when it first did. */
export function stepEntered(job: PowerOffJob, step: PowerOffStep, now: number): number {
  return (writable(job).stepEnteredAt[step] ??= now);
}

/** The step is done; true the first time (its completion is reported once). */
export function stepDone(job: PowerOffJob, step: PowerOffStep): boolean {
  const { reportedDone } = writable(job);
  if (reportedDone.has(step)) return false;
  reportedDone.add(step);
  return true;
}

/** The job waits for `why`; true when that is news (a long wait is reported once). */
export function waiting(job: PowerOffJob, why: string): boolean {
  const state = writable(job);
  const changed = state.lastWaiting !== why;
  state.lastWaiting = why;
  return changed;
}

/** The step failed: nothing runs for a backoff, by the step's failures before this one. The backoff, in ms. */
export function stepFailed(job: PowerOffJob, step: PowerOffStep, backoffMs: (attempt: number) => number, now: number): number {
  const state = writable(job);
  const attempt = state.attempts[step] ?? 0;
  state.attempts[step] = attempt + 1;
  const delay = backoffMs(attempt);
  state.notBefore = now + delay;
  return delay;
}

/** The job found a power-off pod an earlier run created, and takes it for its own. */
export function podAdopted(job: PowerOffJob): void {
  writable(job).podAttempts = 1;
}

/** The job created a power-off pod. */
export function podCreated(job: PowerOffJob): void {
  writable(job).podAttempts += 1;
}

/** The job asked for the Node to be deleted; true the first time (each is reported once). */
export function nodeDeleted(job: PowerOffJob, node: string): boolean {
  const { deletedNodes } = writable(job);
  if (deletedNodes.has(node)) return false;
  deletedNodes.add(node);
  return true;
}

/** Every write of the record an undo clears has settled. */
export function undoWritesSettled(job: PowerOffJob): void {
  writable(job).writesOut = false;
}

// ---- The revival watch ----

/** The aborted power-off's traces are gone at `now` (monotonic ms): the watch of its machine begins. */
export function revivalStarted(job: PowerOffJob, now: number): void {
  writable(job).revival = { since: now, onLeft: undefined, toldAt: undefined };
}

/** Only the switch-on is left since `at`, to be told as `how` (`keep`: unless something was left already). */
export function revivalLeft(job: PowerOffJob, left: { readonly at: number; readonly how: RevivalHow }, keep = false): void {
  const { revival } = writable(job);
  if (revival === undefined || (keep && revival.onLeft !== undefined)) return;
  revival.onLeft = left;
}

/** The machine left halted was reported stranded at `now`. */
export function revivalTold(job: PowerOffJob, now: number): void {
  const { revival } = writable(job);
  if (revival !== undefined) revival.toldAt = now;
}
