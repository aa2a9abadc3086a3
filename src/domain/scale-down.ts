// NodeGroupDeleteNodes and NodeGroupDecreaseTargetSize. Neither waits for a shutdown: a registered node gets a
// power-off job (the saga runs later), an unregistered one gets one quick plug call.
import type { CallOptions } from "./ports.ts";
import type { Machine, NodeGroupSpec, NodeRef, NodeView } from "./model.ts";
import type { SafetyRule } from "./events.ts";
import type { PoolContext } from "./context.ts";
import {
  beginMarking,
  bootFailureForgotten,
  dropQueued,
  endMarking,
  instanceOf,
  isMachineHeld,
  isSwitching,
  lifecycleOf,
  powerOffOf,
  powerOnLicence,
  queuedPosition,
  stateOf,
} from "./lifecycle.ts";
import { messageOf, PlugpoolError } from "./errors.ts";
import { targetSizeOf } from "./instances.ts";
import { hasDeletionTaint, nodesOf, resolveRef } from "./matching.ts";
import { throwIfCancelled, untilAborted } from "./lock.ts";
import { switchOff } from "./switching.ts";
import { recordPowerOff, resumePowerOff, startPowerOff, undoPowerOffRecord } from "./power-off.ts";

/**
 * Validates every ref first and acts only if all pass: unknown → `instance-not-found`; held, registered
 * without the ToBeDeleted taint, a power-off being aborted, or going below minSize → `unsafe`. Then a machine
 * already powering off is left alone; a registered (tainted) one gets its power-off recorded on its Nodes (the
 * one cluster write awaited); an unregistered one has its plug switched off. The power-offs start only once the
 * whole call has succeeded: a call that fails (a write refused, a plug failed, the deadline passed) leaves
 * nothing behind, its records are undone and no power-off starts. Throws `cluster-refused`, `plug-unreachable`,
 * `unsafe` (one registered or was refused at the plug meanwhile) or `cancelled`.
 */
export async function deleteNodes(
  ctx: PoolContext,
  group: NodeGroupSpec,
  refs: readonly NodeRef[],
  options?: CallOptions,
): Promise<void> {
  const what = `deleting ${refs.length === 1 ? (refs[0]?.name ?? "") : `${refs.length} nodes`} from node group "${group.id}"`;
  const machines = new Map<string, Machine>();
  for (const ref of refs) {
    const machine = resolveRef(group.machines, ctx.config.providerIDPrefix, ref);
    if (machine === undefined) {
      throw new PlugpoolError(
        "instance-not-found",
        `${what}: node ${ref.name} (providerID "${ref.providerID}") is not a machine of this group`,
      );
    }
    machines.set(machine.name, machine);
  }
  const chosen = [...machines.values()];
  // cluster-autoscaler writes its taint just before it calls: a view a moment behind would refuse the call for a
  // taint it has not shown yet. Before such a refusal the view catches up with the apiserver, and everything below
  // is judged on it.
  if (chosen.some((m) => untaintedNode(ctx, m) !== undefined)) await ctx.deps.lookup.viewCaughtUp(options);
  // A power-off an earlier run recorded (the runner may not have passed since a restart) is taken up first: the
  // call then leaves it alone rather than writing its own record over it.
  for (const machine of chosen) resumePowerOff(ctx, machine);
  for (const machine of chosen) validateDeletion(ctx, machine, what);
  const target = targetSizeOf(ctx, group);
  const lowering = chosen.filter((m) => {
    const instance = instanceOf(ctx, m);
    return instance !== undefined && instance.state !== "deleting";
  }).length;
  if (target - lowering < group.minSize) {
    const detail = `target size ${target} - ${lowering} would go below the minimum size ${group.minSize}`;
    throw refusal(ctx, chosen[0], "min-size", `${what}: ${detail}`);
  }
  const toCut: Machine[] = [];
  const toPowerOff: PowerOffTarget[] = [];
  for (const machine of chosen) {
    if (lifecycleOf(ctx, machine).phase === "powering-off") continue;
    const nodes = nodesOf(ctx, machine).map((n) => n.name);
    const node = nodes[0];
    if (node !== undefined) toPowerOff.push({ machine, node, nodes });
    else if (instanceOf(ctx, machine) !== undefined) toCut.push(machine);
  }
  const startedAt = ctx.deps.clock.now();
  // Until the call's outcome is known, a record that already landed on one machine's Node is this call's.
  for (const { machine } of toPowerOff) beginMarking(ctx, machine);
  try {
    await recordAll(ctx, what, toPowerOff, toCut, startedAt, options);
  } finally {
    for (const { machine } of toPowerOff) endMarking(ctx, machine);
  }
}

/**
 * A registered machine to power off, with the Node it was validated on and every Node of it then: its power-off
 * begins on that Node even when the view has lost it by the time the call's writes land (a Node deleted
 * meanwhile is no sign of a shutdown, and a power-off begun without a Node would take the machine for one that
 * never registered).
 */
interface PowerOffTarget {
  readonly machine: Machine;
  readonly node: string;
  readonly nodes: readonly string[];
}

/**
 * The writes of one DeleteNodes: each power-off recorded as pending, each unregistered machine cut. The power-offs
 * start once all succeeded (each commits its record as its first step); otherwise every record is undone, once
 * every write has settled, and the first failure thrown. Only a call that succeeded leaves a record that a restart
 * resumes: one that fails, or a restart before its outcome, leaves pending records, which are undone.
 */
async function recordAll(
  ctx: PoolContext,
  what: string,
  toPowerOff: readonly PowerOffTarget[],
  toCut: readonly Machine[],
  startedAt: number,
  options?: CallOptions,
): Promise<void> {
  const signal = options?.signal;
  const failed = new Map<string, string>();
  const writes = toPowerOff.map(({ machine, nodes }) =>
    recordPowerOff(ctx, nodes, startedAt, options).catch((e: unknown) => {
      failed.set(machine.name, `recording the power-off: ${messageOf(e)}`);
    }),
  );
  let failure: Error | undefined;
  try {
    // The deadline ends the wait, not the writes: the undo waits for them to settle. One the apiserver applies
    // after its request was given up leaves a pending record, undone when the view shows it.
    await untilAborted(Promise.all(writes), signal);
    if (failed.size > 0) {
      const problems = [...failed].map(([name, error]) => `${name}: ${error}`);
      throw new PlugpoolError("cluster-refused", `${what}: ${problems.join("; ")}`);
    }
    await cutUnregistered(ctx, toCut, what, options);
    // An answer after the deadline never reaches cluster-autoscaler: it counts the call as failed.
    throwIfCancelled(signal);
  } catch (e) {
    failure = e instanceof Error ? e : new PlugpoolError("internal", `${what}: ${String(e)}`);
  }
  if (failure !== undefined) {
    // Nothing may start from a call that failed towards cluster-autoscaler: undo every record it made.
    const settled = Promise.allSettled(writes);
    for (const { machine, nodes } of toPowerOff) {
      undoPowerOffRecord(ctx, machine, { nodes, startedAt, reason: `${what} failed`, writes: settled, quiet: false });
    }
    throw failure;
  }
  for (const { machine, node } of toPowerOff) startPowerOff(ctx, machine, node, startedAt, false);
}

function validateDeletion(ctx: PoolContext, machine: Machine, what: string): void {
  const job = powerOffOf(ctx, machine);
  if (job?.aborting !== undefined) {
    throw new PlugpoolError("unsafe", `${what}: the power-off of ${machine.name} is being aborted; try again later`);
  }
  if (job !== undefined) return;
  if (isMachineHeld(ctx, machine, nodesOf(ctx, machine))) throw refusal(ctx, machine, "held", `${what}: ${machine.name} is held`);
  const untainted = untaintedNode(ctx, machine);
  if (untainted !== undefined) {
    const detail = `node ${untainted.name} is registered without the ToBeDeletedByClusterAutoscaler taint`;
    throw refusal(ctx, machine, "registered-without-taint", `${what}: ${detail}`);
  }
}

/** A Node of the machine without cluster-autoscaler's taint, while no power-off of it runs (one runs on its own). */
function untaintedNode(ctx: PoolContext, machine: Machine): NodeView | undefined {
  if (powerOffOf(ctx, machine) !== undefined) return undefined;
  return nodesOf(ctx, machine).find((n) => !hasDeletionTaint(n));
}

/**
 * Removes `-delta` unregistered (creating) instances: queued ones first (latest queued first; they only leave
 * the queue), then switched-on ones, latest powered first (ties: later in config first). Throws
 * `invalid-argument`, changing nothing, when there are fewer; `unsafe` naming a machine that registered
 * meanwhile (it keeps its power); `plug-unreachable` for plugs that failed.
 */
export async function decreaseTargetSize(
  ctx: PoolContext,
  group: NodeGroupSpec,
  delta: number,
  options?: CallOptions,
): Promise<void> {
  const what = `decreasing the target size of node group "${group.id}" by ${-delta}`;
  if (!Number.isInteger(delta) || delta >= 0) {
    throw new PlugpoolError("invalid-argument", `${what}: delta must be a negative integer, got ${delta}`);
  }
  const candidates = group.machines
    .filter((m) => {
      const nodes = nodesOf(ctx, m);
      return instanceOf(ctx, m)?.state === "creating" && !isSwitching(ctx, m) && nodes.length === 0 && !isMachineHeld(ctx, m, nodes);
    })
    .toSorted((a, b) => queuedAt(ctx, b) - queuedAt(ctx, a) || poweredOnAt(ctx, b) - poweredOnAt(ctx, a) || b.index - a.index);
  if (candidates.length < -delta) {
    throw new PlugpoolError(
      "invalid-argument",
      `${what}: only ${candidates.length} unregistered instances exist; registered nodes are never removed this way`,
    );
  }
  await cutUnregistered(ctx, candidates.slice(0, -delta), what, options);
}

function poweredOnAt(ctx: PoolContext, machine: Machine): number {
  return stateOf(ctx, machine).poweredOnAt ?? Number.NEGATIVE_INFINITY;
}

function queuedAt(ctx: PoolContext, machine: Machine): number {
  return queuedPosition(ctx, machine) ?? -1;
}

/**
 * Switches off machines believed unregistered, in parallel. Each is checked again by the plug itself right before
 * its command (no Node claims it, plugpool's record of the power-on stands, the view is current): one that
 * registered meanwhile keeps its power and is named in the error. A machine without that record (queued, or its
 * plug-on failed) only leaves: plugpool switched nothing on, so there is nothing to cut.
 */
async function cutUnregistered(ctx: PoolContext, machines: readonly Machine[], what: string, options?: CallOptions): Promise<void> {
  const refused: string[] = [];
  const failed = new Map<string, string>();
  const answers: Promise<unknown>[] = [];
  for (const machine of machines) {
    const nodes = nodesOf(ctx, machine);
    if (nodes.length === 0 && powerOnLicence(ctx, machine) === undefined) {
      // Queued, or its plug-on failed: plugpool switched nothing on, so the instance only leaves.
      dropQueued(ctx, machine);
      bootFailureForgotten(ctx, machine);
      continue;
    }
    if (nodes.length > 0) {
      refused.push(`${machine.name} registered meanwhile and keeps its power`);
      continue;
    }
    answers.push(
      switchOff(ctx, machine, { reason: "unregistered" }, options).then(
        (outcome) => {
          if (outcome.kind === "refused") {
            ctx.deps.reporter.report({ type: "refused", machine: machine.name, rule: outcome.verdict.rule, detail: outcome.verdict.detail });
            refused.push(outcome.verdict.detail);
          } else if (outcome.kind === "unconfirmed") {
            failed.set(machine.name, `the switch-off was not confirmed (the plug may be off): ${outcome.error}`);
          }
        },
        (e: unknown) => {
          failed.set(machine.name, messageOf(e));
        },
      ),
    );
  }
  await untilAborted(Promise.all(answers), options?.signal);
  const problems = [...refused, ...[...failed].map(([name, error]) => `${name}: ${error}`)];
  if (problems.length === 0) return;
  throw new PlugpoolError(refused.length > 0 ? "unsafe" : "plug-unreachable", `${what}: ${problems.join("; ")}`);
}

function refusal(ctx: PoolContext, machine: Machine | undefined, rule: SafetyRule, message: string): PlugpoolError {
  if (machine !== undefined) ctx.deps.reporter.report({ type: "refused", machine: machine.name, rule, detail: message });
  return new PlugpoolError("unsafe", message);
}
