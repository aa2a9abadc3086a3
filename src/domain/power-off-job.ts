// A power-off job: what one power-off of a machine has established so far, in memory (the cluster holds the rest).
// The machine's lifecycle holds the job while it runs (lifecycle.ts); the saga's steps (power-off-steps.ts) and its
// runner (power-off.ts) move it on.
import type { PowerOffStep, SafetyRule } from "./events.ts";
import type { Revival } from "./revival.ts";

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
