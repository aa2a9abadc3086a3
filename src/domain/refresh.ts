// Refresh: read every plug in parallel and bring memory up to date. Never fails: a failed Refresh stops
// cluster-autoscaler's whole loop.
import type { CallOptions } from "./ports.ts";
import type { Machine } from "./model.ts";
import type { PoolContext } from "./context.ts";
import { messageOf } from "./errors.ts";
import { foreignProviderID, instanceId, nodesOf } from "./matching.ts";
import { readPlug } from "./switching.ts";
import { expectedIdentity } from "./device-identity.ts";
import { clearBootFailures } from "./quarantine.ts";
import { restoreTarget, restoreWait } from "./power-on.ts";
import { bootFailureForgotten, dropQueued, endPowerOnRecord, failedBootPoweredOutside, lifecycleOf, noteChanged, readFailed, stateOf } from "./lifecycle.ts";
import { noteBoot } from "./usage.ts";
import { untilAborted } from "./lock.ts";

/**
 * Reads every plug at once (each call bounded by the adapter; a device not known yet is also asked what it is, and
 * learned) and updates what depends on the readings: boot
 * failures (quarantined), registration (ends a quarantine and the power-on record), power nobody asked for (a
 * lost one is restored by the runner, which this wakes; one switched on outside plugpool is reported). A plug
 * that cannot be read keeps its last state. Also reports Nodes named like a machine with a providerID of another
 * form, and machines claimed by more than one Node. Each report is made once per change.
 */
export async function refresh(ctx: PoolContext, options?: CallOptions): Promise<void> {
  // Chained, not awaited: every read is in flight at once, and a suspended async function per machine would keep
  // its frame alive until that plug answers. When the call ends first, the answer goes with what is known: a read
  // still out keeps its plug's last state, and is applied when it arrives.
  const reads = Promise.allSettled(
    ctx.machines.map((machine) =>
      // A device met for the first time says what it is at this first contact, and is known by it from then on:
      // an address that reaches another device later (a lease handed out anew) is caught at its next command.
      readPlug(ctx, machine, options, expectedIdentity(ctx, machine) === undefined).then(undefined, (e: unknown) => {
        noteReadFailure(ctx, machine, messageOf(e));
      }),
    ),
  );
  await untilAborted(reads, options?.signal).catch(() => undefined);
  for (const machine of ctx.machines) {
    try {
      reconcile(ctx, machine);
    } catch {
      // A broken view of one machine must not fail the refresh; the next refresh looks again.
    }
  }
}

function noteReadFailure(ctx: PoolContext, machine: Machine, error: string): void {
  if (!readFailed(ctx, machine, error)) return;
  ctx.deps.reporter.report({ type: "plug-read-failed", machine: machine.name, error });
}

function reconcile(ctx: PoolContext, machine: Machine): void {
  const { reporter } = ctx.deps;
  noteBoot(ctx, machine);
  const nodes = nodesOf(ctx, machine);
  if (nodes.length > 0) {
    endPowerOnRecord(ctx, machine);
    dropQueued(ctx, machine);
    bootFailureForgotten(ctx, machine);
    clearBootFailures(ctx, machine);
  }

  const anomaly = powerAnomaly(ctx, machine);
  if (noteChanged(ctx, machine, "power", anomaly) && anomaly !== undefined) {
    const type = anomaly === "on" ? "powered-outside" : "unexpected-power";
    reporter.report({ type, machine: machine.name, detail: describe(ctx, machine, anomaly) });
  }
  if (restoreTarget(ctx, machine) !== undefined && restoreWait(ctx, machine) === 0) ctx.deps.wake?.();

  failedBootPoweredOutside(ctx, machine);

  const duplicates = nodes.length > 1 ? nodes.map((n) => n.name).join(",") : undefined;
  if (noteChanged(ctx, machine, "duplicates", duplicates) && duplicates !== undefined) {
    reporter.report({ type: "duplicate-nodes", machine: machine.name, nodes: nodes.map((n) => n.name) });
  }

  const foreign = foreignProviderID(ctx.deps.cluster, ctx.config.providerIDPrefix, machine);
  if (noteChanged(ctx, machine, "providerID", foreign) && foreign !== undefined) {
    reporter.report({
      type: "provider-id-mismatch",
      machine: machine.name,
      providerID: foreign,
      expected: instanceId(ctx.config.providerIDPrefix, machine),
    });
  }
}

/**
 * Power in a state nobody asked for: "on" for a plug found on with no Node, no power-off and no record of
 * plugpool switching it on (powered outside plugpool); "off" for a plug found off under a Ready Node without a
 * power-off. Reported; never cut for it.
 */
function powerAnomaly(ctx: PoolContext, machine: Machine): "on" | "off" | undefined {
  const lifecycle = lifecycleOf(ctx, machine);
  switch (lifecycle.phase) {
    case "powered-outside":
      return "on";
    case "registered":
      return stateOf(ctx, machine).power.plug === "off" && lifecycle.nodes.some((n) => n.ready) ? "off" : undefined;
    case "powering-off":
    case "switching":
    case "queued":
    case "booting":
    case "off":
    case "unknown":
      return undefined;
  }
}

function describe(ctx: PoolContext, machine: Machine, anomaly: "on" | "off"): string {
  if (anomaly === "on") {
    return `plug of ${machine.name} is on with no Node, and plugpool did not switch it on: powered outside plugpool (by hand, or its Node registered under another name); not reported to cluster-autoscaler and never switched off by plugpool`;
  }
  const restoring = restoreTarget(ctx, machine) !== undefined;
  return `plug of ${machine.name} reads off under a Ready node; ${restoring ? "switching it back on" : "left alone"}`;
}

/**
 * The plug reads on, no Node claims the machine, and plugpool neither switched it on (no record) nor is about to
 * (queued, a command in flight) nor is powering it off: someone else powered it.
 */
export function isPoweredOutside(ctx: PoolContext, machine: Machine): boolean {
  return lifecycleOf(ctx, machine).phase === "powered-outside";
}
