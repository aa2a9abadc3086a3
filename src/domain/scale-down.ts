// NodeGroupDeleteNodes and NodeGroupDecreaseTargetSize (SPEC §4). Neither waits for a shutdown: a registered
// node gets a power-off job (the saga runs later), an unregistered one gets one quick plug call.
import type { CallOptions } from "./ports.ts";
import type { Machine, NodeGroupSpec, NodeRef } from "./model.ts";
import type { SafetyRule } from "./events.ts";
import type { PoolContext } from "./state.ts";
import { messageOf, nodesOf, stateOf } from "./state.ts";
import { PlugpoolError } from "./errors.ts";
import { instanceOf, targetSizeOf } from "./instances.ts";
import { hasDeletionTaint, isHeld, resolveRef } from "./matching.ts";
import { mayCutPower } from "./safety.ts";
import { untilAborted } from "./lock.ts";
import { switchOff } from "./switching.ts";
import { beginPowerOff } from "./power-off.ts";

/**
 * Validates every ref first and acts only if all pass: unknown → `instance-not-found`; held, registered
 * without the ToBeDeleted taint, a power-off being aborted, or going below minSize → `unsafe`. Then a machine
 * already powering off is left alone; a registered (tainted) one gets its power-off recorded on its Node
 * (the one cluster write awaited; `cluster-refused` if it fails, and then no power-off starts) and a job; an
 * unregistered one has its plug switched off. Throws `plug-unreachable` (or `unsafe` if one registered
 * without the taint meanwhile) after all cuts have been tried.
 */
export async function deleteNodes(
  ctx: PoolContext,
  group: NodeGroupSpec,
  refs: readonly NodeRef[],
  options?: CallOptions,
): Promise<void> {
  const what = `deleting ${refs.map((r) => r.name || r.providerID).join(", ")} from node group "${group.id}"`;
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
  const toPowerOff: Machine[] = [];
  for (const machine of chosen) {
    if (stateOf(ctx, machine).job !== undefined) continue;
    if (nodesOf(ctx, machine).length > 0) toPowerOff.push(machine);
    else if (instanceOf(ctx, machine) !== undefined) toCut.push(machine);
  }
  const failed = new Map<string, string>();
  const begun = toPowerOff.map((m) =>
    beginPowerOff(ctx, m, options).catch((e: unknown) => {
      failed.set(m.name, messageOf(e));
    }),
  );
  const [cut, marked] = await Promise.allSettled([
    cutUnregistered(ctx, toCut, "power-off", what, options),
    untilAborted(Promise.all(begun), options?.signal),
  ]);
  if (cut.status === "rejected") throw cut.reason;
  if (marked.status === "rejected") throw marked.reason;
  if (failed.size > 0) {
    const problems = [...failed].map(([name, error]) => `recording the power-off of ${name}: ${error}`);
    throw new PlugpoolError("cluster-refused", `${what}: ${problems.join("; ")}`);
  }
}

function validateDeletion(ctx: PoolContext, machine: Machine, what: string): void {
  const st = stateOf(ctx, machine);
  if (st.job?.aborting !== undefined) {
    throw new PlugpoolError("unsafe", `${what}: the power-off of ${machine.name} is being aborted; try again later`);
  }
  if (st.job !== undefined) return;
  const nodes = nodesOf(ctx, machine);
  if (isHeld(machine, nodes)) throw refusal(ctx, machine, "held", `${what}: ${machine.name} is held`);
  const untainted = nodes.find((n) => !hasDeletionTaint(n));
  if (untainted !== undefined) {
    const detail = `node ${untainted.name} is registered without the ToBeDeletedByClusterAutoscaler taint`;
    throw refusal(ctx, machine, "registered-without-taint", `${what}: ${detail}`);
  }
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
      const st = stateOf(ctx, m);
      const nodes = nodesOf(ctx, m);
      return (
        instanceOf(ctx, m)?.state === "creating" && st.switching === undefined && nodes.length === 0 && !isHeld(m, nodes)
      );
    })
    .toSorted((a, b) => queuedAt(ctx, b) - queuedAt(ctx, a) || poweredOnAt(ctx, b) - poweredOnAt(ctx, a) || b.index - a.index);
  if (candidates.length < -delta) {
    throw new PlugpoolError(
      "invalid-argument",
      `${what}: only ${candidates.length} unregistered instances exist; registered nodes are never removed this way`,
    );
  }
  await cutUnregistered(ctx, candidates.slice(0, -delta), "refuse", what, options);
}

function poweredOnAt(ctx: PoolContext, machine: Machine): number {
  return stateOf(ctx, machine).poweredOnAt ?? Number.NEGATIVE_INFINITY;
}

function queuedAt(ctx: PoolContext, machine: Machine): number {
  return stateOf(ctx, machine).queued ?? -1;
}

/**
 * Switches off machines believed unregistered, in parallel. Each is re-checked right before its command: one
 * that registered meanwhile is powered off properly when it carries the taint and `ifRegistered` allows it,
 * otherwise left on and named in the error. A queued machine whose plug is not known on only leaves the queue:
 * it was never switched on, so there is nothing to cut (and no failed boot to count).
 */
async function cutUnregistered(
  ctx: PoolContext,
  machines: readonly Machine[],
  ifRegistered: "power-off" | "refuse",
  what: string,
  options?: CallOptions,
): Promise<void> {
  const refused: string[] = [];
  const failed = new Map<string, string>();
  const answers: Promise<unknown>[] = [];
  for (const machine of machines) {
    const nodes = nodesOf(ctx, machine);
    const st = stateOf(ctx, machine);
    if (st.queued !== undefined && nodes.length === 0) {
      st.queued = undefined;
      if (st.plug !== "on") continue;
    }
    const verdict = mayCutPower(machine, ctx.deps.cluster, ctx.config.providerIDPrefix);
    if (nodes.length > 0 && verdict.allowed && ifRegistered === "power-off") {
      answers.push(
        beginPowerOff(ctx, machine, options).catch((e: unknown) => {
          failed.set(machine.name, messageOf(e));
        }),
      );
    } else if (!verdict.allowed) {
      ctx.deps.reporter.report({ type: "refused", machine: machine.name, rule: verdict.rule, detail: verdict.detail });
      refused.push(verdict.detail);
    } else if (nodes.length > 0) {
      refused.push(`${machine.name} registered meanwhile and keeps its power`);
    } else {
      answers.push(
        switchOff(ctx, machine, { reason: "unregistered" }, options).catch((e: unknown) => {
          failed.set(machine.name, messageOf(e));
        }),
      );
    }
  }
  try {
    await untilAborted(Promise.all(answers), options?.signal);
  } catch {
    throw new PlugpoolError("plug-unreachable", `${what}: no answer from the plugs before the call ended`);
  }
  const problems = [...refused, ...[...failed].map(([name, error]) => `${name}: ${error}`)];
  if (problems.length === 0) return;
  throw new PlugpoolError(refused.length > 0 ? "unsafe" : "plug-unreachable", `${what}: ${problems.join("; ")}`);
}

function refusal(ctx: PoolContext, machine: Machine | undefined, rule: SafetyRule, message: string): PlugpoolError {
  if (machine !== undefined) ctx.deps.reporter.report({ type: "refused", machine: machine.name, rule, detail: message });
  return new PlugpoolError("unsafe", message);
}
