// Refresh (SPEC §8): read every plug in parallel and bring memory up to date. Never fails: a failed Refresh
// stops cluster-autoscaler's whole loop.
import type { CallOptions } from "./ports.ts";
import type { Machine } from "./model.ts";
import type { PoolContext } from "./state.ts";
import { messageOf, nodesOf, stateOf } from "./state.ts";
import { foreignProviderID, instanceId } from "./matching.ts";
import { readPlug } from "./switching.ts";
import { clearBootFailures, recordBootFailure } from "./quarantine.ts";
import { restoreTarget, restoreWait } from "./power-on.ts";

/**
 * Reads every plug at once (each call bounded by the adapter) and updates what depends on the readings: boot
 * failures (quarantined), registration (ends a quarantine), power nobody asked for (a lost one is restored by
 * the runner, which this wakes). A plug that cannot be read keeps its last state. Also reports Nodes named
 * like a machine with a providerID of another form. Each report is made once per change.
 */
export async function refresh(ctx: PoolContext, options?: CallOptions): Promise<void> {
  await Promise.allSettled(
    ctx.machines.map(async (machine) => {
      try {
        await readPlug(ctx, machine, options);
      } catch (e) {
        noteReadFailure(ctx, machine, messageOf(e));
      }
    }),
  );
  for (const machine of ctx.machines) {
    try {
      reconcile(ctx, machine);
    } catch {
      // A broken view of one machine must not fail the refresh; the next refresh looks again.
    }
  }
}

function noteReadFailure(ctx: PoolContext, machine: Machine, error: string): void {
  const st = stateOf(ctx, machine);
  if (st.readError === error) return;
  st.readError = error;
  ctx.deps.reporter.report({ type: "plug-read-failed", machine: machine.name, error });
}

function reconcile(ctx: PoolContext, machine: Machine): void {
  const st = stateOf(ctx, machine);
  const { reporter } = ctx.deps;
  const nodes = nodesOf(ctx, machine);
  if (nodes.length > 0) {
    st.wantedOn = false;
    st.queued = undefined;
    st.bootFailure = undefined;
    clearBootFailures(st);
  } else if (st.wantedOn && st.plug === "off" && st.switching === undefined && st.bootFailure === undefined) {
    const message = `plug of ${machine.name} reads off again before the machine registered`;
    st.bootFailure = { code: "plug-off-while-booting", message };
    reporter.report({ type: "unexpected-power", machine: machine.name, detail: message });
    recordBootFailure(ctx, machine, message);
  }

  const anomaly = powerAnomaly(ctx, machine);
  if (anomaly !== st.notedPower && anomaly !== undefined) {
    reporter.report({ type: "unexpected-power", machine: machine.name, detail: describe(ctx, machine, anomaly) });
  }
  st.notedPower = anomaly;
  if (restoreTarget(ctx, machine) !== undefined && restoreWait(ctx, machine) === 0) ctx.deps.wake?.();

  const foreign = foreignProviderID(ctx.deps.cluster, ctx.config.providerIDPrefix, machine);
  if (foreign !== undefined && foreign !== st.notedProviderID) {
    reporter.report({
      type: "provider-id-mismatch",
      machine: machine.name,
      providerID: foreign,
      expected: instanceId(ctx.config.providerIDPrefix, machine),
    });
  }
  st.notedProviderID = foreign;
}

/**
 * Power in a state nobody asked for: "on" for a plug found on that no one wanted on, with no Node and no
 * power-off; "off" for a plug found off under a Ready Node without a power-off. Reported; never cut for it.
 */
function powerAnomaly(ctx: PoolContext, machine: Machine): "on" | "off" | undefined {
  const st = stateOf(ctx, machine);
  if (st.job !== undefined || st.switching !== undefined) return undefined;
  const nodes = nodesOf(ctx, machine);
  if (st.plug === "on" && !st.wantedOn && st.queued === undefined && nodes.length === 0) return "on";
  if (st.plug === "off" && nodes.some((n) => n.ready)) return "off";
  return undefined;
}

function describe(ctx: PoolContext, machine: Machine, anomaly: "on" | "off"): string {
  if (anomaly === "on") {
    const counted = machine.hold ? "held, so not reported to cluster-autoscaler" : "counted as a creating instance";
    return `plug of ${machine.name} is on but nobody asked for it; ${counted}`;
  }
  const restoring = restoreTarget(ctx, machine) !== undefined;
  return `plug of ${machine.name} reads off under a Ready node; ${restoring ? "switching it back on" : "left alone"}`;
}
