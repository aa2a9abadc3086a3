// Runs the power-off saga: starts and resumes jobs, walks each job's steps from the top, and undoes what
// others can see when a job is aborted. Never sleeps: it answers how long to wait before the next pass.
import type { CallOptions } from "./ports.ts";
import type { Machine } from "./model.ts";
import type { PoolContext } from "./context.ts";
import type { PowerOffJob } from "./power-off-job.ts";
import { aborted, newJob, newUndo, revivalStarted, shutdownAdopted, stepDone, stepEntered, stepFailed, undoWritesSettled, waiting } from "./power-off-job.ts";
import type { StepOutcome } from "./power-off-steps.ts";
import { POWER_OFF_ANNOTATION, powerOffRecordOf } from "./model.ts";
import { beginPowerOff, endPowerOff, endPowerOnRecord, isPowerOffUnderWay, powerOffOf, powerOffUndone, stateOf } from "./lifecycle.ts";
import { nodesOf } from "./matching.ts";
import { messageOf } from "./errors.ts";
import { POWER_OFF_STEPS } from "./power-off-steps.ts";
import { clearBootFailures } from "./quarantine.ts";
import { revive } from "./revival.ts";
import { soonest } from "./waits.ts";

const COMPENSATION_POLL_MS = 1000;

/**
 * Records a power-off of `machine` as started at `startedAt` and reports it. No-op if one is in progress. A
 * queued plug-on is dropped; a machine that has a Node has registered, which ends its quarantine.
 */
export function startPowerOff(ctx: PoolContext, machine: Machine, node: string, startedAt: number, resumed: boolean): void {
  if (powerOffOf(ctx, machine) !== undefined) return;
  if (node !== "") clearBootFailures(ctx, machine);
  beginPowerOff(ctx, machine, newJob(node, startedAt));
  ctx.deps.reporter.report({ type: "power-off-started", machine: machine.name, node, resumed });
  if (!resumed) ctx.deps.wake?.();
}

/** What an undo of a power-off record is given. */
export interface RecordUndo {
  /** The Nodes the record was written to: each is cleared, whatever the view shows. */
  readonly nodes: readonly string[];
  readonly startedAt: number;
  /** Why, as PowerOffAborted tells it. */
  readonly reason: string;
  /** Settles once no write of the record is still out: the undo waits for it. */
  readonly writes: Promise<unknown>;
  /** Tells nothing: what it undoes was undone and told already (a view behind the apiserver shows it again). */
  readonly quiet: boolean;
}

/**
 * A DeleteNodes that failed towards cluster-autoscaler leaves nothing behind: the power-off it had begun to
 * record is a job that only undoes that record, once every write of the call has settled, and is forgotten once
 * the view shows it gone.
 */
export function undoPowerOffRecord(ctx: PoolContext, machine: Machine, undo: RecordUndo): void {
  if (powerOffOf(ctx, machine) !== undefined) return;
  const job = newUndo(undo.startedAt, undo);
  beginPowerOff(ctx, machine, job);
  void undo.writes.finally(() => {
    undoWritesSettled(job);
    ctx.deps.wake?.();
  });
  ctx.deps.wake?.();
}

/**
 * Records a pending power-off on `nodes` (the annotation), the way DeleteNodes begins one. Starts no job: the
 * caller does, once the whole call has succeeded, and the job's first step commits the record (so a restart
 * resumes it). A pending record a restart finds is one whose call failed or may have: it is undone. The caller
 * marks the machine (`beginMarking`) for the whole call, so the runner does not take the record meanwhile.
 */
export async function recordPowerOff(ctx: PoolContext, nodes: readonly string[], startedAt: number, options?: CallOptions): Promise<void> {
  // Settles only once every write has: the undo of a failed call waits for all of them.
  const writes = await Promise.allSettled(nodes.map((node) => ctx.deps.teardown.markPowerOff(node, { startedAt, pending: true }, options)));
  const failed = writes.find((w) => w.status === "rejected");
  if (failed !== undefined) throw failed.reason;
}

/**
 * Picks up power-offs recorded on the cluster by an earlier run: a machine without a job whose power-off
 * pod exists and is not terminating (started when the pod says) or whose Node carries a committed power-off
 * record (started at its value). A pending record (its DeleteNodes failed, or plugpool stopped before it knew)
 * is undone instead; so is anything the view shows of a power-off this process already undid.
 */
export function resumePowerOffs(ctx: PoolContext): void {
  for (const machine of ctx.machines) resumePowerOff(ctx, machine);
}

/** `resumePowerOffs` for one machine. */
export function resumePowerOff(ctx: PoolContext, machine: Machine): void {
  // Only a machine with nothing else under way: a queued plug-on gives way to a power-off found recorded.
  if (isPowerOffUnderWay(ctx, machine)) return;
  // A terminating pod alone is a power-off being undone (or done): nothing to resume.
  const found = ctx.deps.cluster.powerOffPod(machine.name);
  const pod = found?.terminating === true ? undefined : found;
  const nodes = nodesOf(ctx, machine);
  const records = nodes.flatMap((n) => {
    const record = powerOffRecordOf(n);
    return record === undefined ? [] : [{ node: n.name, record }];
  });
  if (pod === undefined && records.length === 0) return;
  const committed = records.find((r) => !r.record.pending)?.record;
  const startedAt = pod?.startedAt ?? committed?.startedAt;
  const { undoneRecord } = stateOf(ctx, machine);
  const replayed = undoneRecord !== undefined && (pod?.startedAt === undoneRecord || records.some((r) => r.record.startedAt === undoneRecord));
  if (startedAt === undefined || replayed) {
    undoPowerOffRecord(ctx, machine, {
      nodes: records.map((r) => r.node),
      startedAt: startedAt ?? records[0]?.record.startedAt ?? ctx.deps.clock.now(),
      reason: "its DeleteNodes did not succeed",
      writes: Promise.resolve(),
      quiet: replayed,
    });
    return;
  }
  startPowerOff(ctx, machine, nodes[0]?.name ?? pod?.nodeName ?? "", startedAt, true);
  const job = powerOffOf(ctx, machine);
  if (pod !== undefined && job !== undefined) {
    // plugpool asked for this OS shutdown, no later than its pod says the power-off started: should the power-off be
    // called off before its steps get that far, a halt is still its to bring back.
    shutdownAdopted(job, pod.startedAt, nodes.find((n) => n.name === pod.nodeName)?.uid);
  }
}

/**
 * Resumes recorded power-offs, then advances every job as far as it can go now, in parallel. Resolves with
 * the smallest delay after which a job wants another pass, or undefined when no job is left.
 */
export async function runPowerOffs(ctx: PoolContext, options?: CallOptions): Promise<number | undefined> {
  resumePowerOffs(ctx);
  const running = ctx.machines.filter((m) => powerOffOf(ctx, m) !== undefined);
  const wait = soonest(await Promise.all(running.map((m) => advance(ctx, m, options))));
  if (wait !== undefined) return wait;
  // A job started while this pass ran has not been looked at yet.
  return ctx.machines.some((m) => powerOffOf(ctx, m) !== undefined) ? 0 : undefined;
}

async function advance(ctx: PoolContext, machine: Machine, options?: CallOptions): Promise<number | undefined> {
  const job = powerOffOf(ctx, machine);
  if (job === undefined) return undefined;
  if (job.aborting !== undefined) return compensate(ctx, machine, job, options);
  const held = job.notBefore === undefined ? 0 : job.notBefore - ctx.deps.clock.now();
  if (held > 0) return held;
  for (const step of POWER_OFF_STEPS) {
    const now = ctx.deps.clock.now();
    const enteredAt = stepEntered(job, step.name, now);
    const outcome = await step.run({ pool: ctx, machine, job, now, options }).catch(
      (e: unknown): StepOutcome => ({ kind: "retry", error: messageOf(e) }),
    );
    const report = (outcome: "done" | "waiting" | "failed", detail: string, durationMs?: number): void => {
      ctx.deps.reporter.report({
        type: "power-off-step",
        machine: machine.name,
        step: step.name,
        outcome,
        detail,
        ...(durationMs === undefined ? {} : { durationMs }),
      });
    };
    switch (outcome.kind) {
      case "done":
        if (stepDone(job, step.name)) report("done", outcome.detail ?? "", ctx.deps.clock.now() - enteredAt);
        continue;
      case "wait": {
        if (waiting(job, `${step.name}: ${outcome.why}`)) report("waiting", outcome.why);
        return outcome.afterMs;
      }
      case "retry": {
        const delay = stepFailed(job, step.name, (attempt) => backoff(ctx, attempt), now);
        report("failed", `${outcome.error}; retrying in ${delay} ms`);
        return delay;
      }
      case "abort":
        report("failed", outcome.reason);
        if (outcome.rule !== undefined) {
          ctx.deps.reporter.report({ type: "refused", machine: machine.name, rule: outcome.rule, detail: outcome.reason });
        }
        aborted(job, { step: step.name, reason: outcome.reason, ...(outcome.rule ? { rule: outcome.rule } : {}) });
        return compensate(ctx, machine, job, options);
    }
  }
  ctx.deps.reporter.report({
    type: "power-off-finished",
    machine: machine.name,
    durationMs: ctx.deps.clock.now() - job.startedAt,
  });
  endPowerOff(ctx, machine);
  endPowerOnRecord(ctx, machine);
  return undefined;
}

function backoff(ctx: PoolContext, attempt: number): number {
  const { retryMs, maxRetryMs } = ctx.config.powerOff;
  return Math.min(retryMs * 2 ** attempt, maxRetryMs);
}

/**
 * Undoes what others can see of an aborted power-off: deletes the power-off pod (left bound to the node it
 * would power the machine off again when it re-registers) and clears the annotation. The job is forgotten
 * only once the ClusterView shows both gone, so a lagging view cannot resume it.
 */
async function compensate(ctx: PoolContext, machine: Machine, job: PowerOffJob, options?: CallOptions): Promise<number | undefined> {
  const aborting = job.aborting;
  if (aborting === undefined) return undefined;
  const held = job.notBefore === undefined ? 0 : job.notBefore - ctx.deps.clock.now();
  if (held > 0) return held;
  // A write of the failed call still out may land after the undo: wait for it (its settling wakes the runner).
  if (job.kind === "undo" && job.writesOut) return COMPENSATION_POLL_MS;
  // The Nodes the record was written to are cleared whatever the view shows: it may not show the record yet.
  const marked = new Set([
    ...(job.kind === "undo" ? job.nodes : []),
    ...(job.node === "" ? [] : [job.node]),
    ...nodesOf(ctx, machine).filter((n) => n.annotations[POWER_OFF_ANNOTATION] !== undefined).map((n) => n.name),
  ]);
  let podGone: boolean;
  try {
    // Asked of the apiserver, not the view: a pod created a moment ago may not be in the view yet.
    podGone = await ctx.deps.teardown.deletePowerOffPod(machine, options);
    for (const node of marked) await ctx.deps.teardown.clearPowerOffMark(node, options);
  } catch (e) {
    const delay = stepFailed(job, aborting.step, (attempt) => backoff(ctx, attempt), ctx.deps.clock.now());
    ctx.deps.reporter.report({
      type: "power-off-step",
      machine: machine.name,
      step: aborting.step,
      outcome: "failed",
      detail: `undoing the power-off: ${messageOf(e)}; retrying in ${delay} ms`,
    });
    return delay;
  }
  const traces =
    !podGone ||
    ctx.deps.cluster.powerOffPod(machine.name) !== undefined ||
    nodesOf(ctx, machine).some((n) => n.annotations[POWER_OFF_ANNOTATION] !== undefined);
  if (traces) return COMPENSATION_POLL_MS;
  if (job.revival === undefined) {
    powerOffUndone(ctx, machine, job.startedAt);
    revivalStarted(job, ctx.deps.clock.monotonic());
    if (job.kind !== "undo" || !job.quiet) ctx.deps.reporter.report({ type: "power-off-aborted", machine: machine.name, reason: aborting.reason });
  }
  // Its OS may have halted all the same: the job lives on until the machine is known to run, or is brought back.
  const revival = await revive(ctx, machine, job, options);
  if (revival !== undefined) return revival;
  endPowerOff(ctx, machine);
  // Look again at once: the machine that keeps its power may need it restored.
  return 0;
}
