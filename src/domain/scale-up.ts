// NodeGroupIncreaseSize: switch plugs on in the configured order, skipping plugs that fail; beyond the inrush
// limit, queue them for the runner.
import type { CallOptions } from "./ports.ts";
import type { Machine, NodeGroupSpec } from "./model.ts";
import type { PoolContext } from "./context.ts";
import { isMachineHeld, lifecycleOf, queuePowerOn, stateOf } from "./lifecycle.ts";
import { DEFAULT_SCALE_UP } from "./model.ts";
import { messageOf, PlugpoolError } from "./errors.ts";
import { targetSizeOf } from "./instances.ts";
import { untilAborted } from "./lock.ts";
import { switchOn, takePowerOnSlot } from "./switching.ts";
import { isQuarantined, plugOnFailed } from "./quarantine.ts";

/**
 * May this machine be switched on for a scale-up? Its plug is known off, no power-off (job or pod) holds it,
 * it is not held, not quarantined, not already wanted on or queued, no command is in flight, no Node may
 * be it, and it is no instance still (a failed boot cluster-autoscaler has not deleted yet: taking it again would
 * count one machine for two).
 */
export function isScaleUpCandidate(ctx: PoolContext, machine: Machine): boolean {
  if (lifecycleOf(ctx, machine).phase !== "off" || stateOf(ctx, machine).boot.failure !== undefined) return false;
  return !isQuarantined(ctx, machine) && ctx.deps.cluster.powerOffPod(machine.name) === undefined && !isMachineHeld(ctx, machine, []);
}

/**
 * Switches on `delta` candidates in parallel rounds: each round takes as many further candidates as are
 * still missing, in `scaleUp.order` (see `scaleUpOrder`); a plug that fails is skipped and the next round tries
 * others. A candidate beyond the inrush limit is queued instead (a creating instance at once; the runner switches
 * it on in turn, and `wake` asks for a run). Stops when done, out of candidates, or when the signal aborts.
 *
 * The signal bounds the answer, not the switch-ons: a device slower than cluster-autoscaler's deadline (a BMC that
 * confirms in seconds) goes on switching, bounded by its own timeout. One still switching when the signal aborts
 * counts as underway (a creating instance, as a queued one); if it fails later, its instance shows the error and
 * cluster-autoscaler drops it and backs off. Throws `invalid-argument` for a bad delta, `plug-unreachable` naming
 * the failed plugs when fewer than `delta` went on, are underway or were queued (those stay), `unsafe` when there
 * were simply not enough usable machines.
 */
export async function increaseSize(
  ctx: PoolContext,
  group: NodeGroupSpec,
  delta: number,
  options?: CallOptions,
): Promise<void> {
  const what = `increasing node group "${group.id}" by ${delta}`;
  const target = targetSizeOf(ctx, group);
  if (!Number.isInteger(delta) || delta <= 0) {
    throw new PlugpoolError("invalid-argument", `${what}: delta must be a positive integer`);
  }
  if (target + delta > group.maxSize) {
    throw new PlugpoolError(
      "invalid-argument",
      `${what}: target size ${target} + ${delta} would exceed the maximum size ${group.maxSize}`,
    );
  }
  const signal = options?.signal;
  const outcome: Outcome = { delta, tried: new Set(), switchedOn: new Set(), queued: new Set(), failed: new Map(), cancelled: false };
  const { tried, switchedOn, queued, failed } = outcome;
  // Once the call has its answer, a switch-on that fails can only be told through its instance.
  let answered = false;
  try {
    while (switchedOn.size + queued.size < delta && signal?.aborted !== true) {
      const round = scaleUpOrder(
        ctx,
        group.machines.filter((m) => !tried.has(m.name) && isScaleUpCandidate(ctx, m)),
      ).slice(0, delta - switchedOn.size - queued.size);
      if (round.length === 0) break;
      const answers: Promise<unknown>[] = [];
      for (const m of round) {
        tried.add(m.name);
        if (!takePowerOnSlot(ctx)) {
          enqueue(ctx, m);
          queued.add(m.name);
          continue;
        }
        answers.push(
          switchOn(ctx, m, "scale-up").then(
            () => switchedOn.add(m.name),
            (e: unknown) => {
              if (answered) plugOnFailed(ctx, m, e);
              else failed.set(m.name, messageOf(e));
            },
          ),
        );
      }
      try {
        await untilAborted(Promise.all(answers), signal);
      } catch {
        break;
      }
    }
  } finally {
    answered = true;
    if (queued.size > 0) ctx.deps.wake?.();
  }
  if (switchedOn.size + queued.size + underway(outcome).length >= delta) return;
  throw shortfall(ctx, group, what, { ...outcome, cancelled: signal?.aborted === true });
}

/** The machines tried whose switch-on had not answered when the call ended: they go on switching. */
function underway(outcome: Outcome): string[] {
  const { tried, switchedOn, queued, failed } = outcome;
  return [...tried].filter((n) => !switchedOn.has(n) && !queued.has(n) && !failed.has(n));
}

/**
 * The candidates (given in config order) in the order a scale-up tries them. Plugs whose last read failed go
 * last, whatever the order: a switch-on sent to a plug that does not answer has an unknown outcome, counts as
 * switched on, and would hold the scale-up until cluster-autoscaler gives up on it. Then `least-used` puts the
 * fewest seconds powered on first (spreading wear; the seconds are this pool's own observations, so after a
 * restart all start equal), `efficient` the lowest `idleWatts` (machines without it last); ties, and `config`,
 * keep config order.
 */
export function scaleUpOrder(ctx: PoolContext, candidates: readonly Machine[]): Machine[] {
  const order = (ctx.config.scaleUp ?? DEFAULT_SCALE_UP).order ?? "config";
  const key = (m: Machine): number => {
    if (order === "least-used") return stateOf(ctx, m).meter.onMs;
    if (order === "efficient") return m.idleWatts ?? Number.POSITIVE_INFINITY;
    return 0;
  };
  const failing = (m: Machine): number => Number(stateOf(ctx, m).power.readError !== undefined);
  return candidates.toSorted((a, b) => failing(a) - failing(b) || key(a) - key(b));
}

/** Puts the machine last in the queue of plug-ons held back by the inrush limit. */
function enqueue(ctx: PoolContext, machine: Machine): void {
  queuePowerOn(ctx, machine);
  ctx.deps.reporter.report({ type: "power-on-queued", machine: machine.name, group: machine.group });
}

interface Outcome {
  readonly delta: number;
  readonly tried: Set<string>;
  readonly switchedOn: Set<string>;
  readonly queued: Set<string>;
  readonly failed: Map<string, string>;
  readonly cancelled: boolean;
}

function shortfall(ctx: PoolContext, group: NodeGroupSpec, what: string, outcome: Outcome): PlugpoolError {
  const { delta, tried, switchedOn, queued, failed, cancelled } = outcome;
  const going = underway(outcome);
  const parts = [`switched on ${switchedOn.size}${queued.size > 0 ? ` and queued ${queued.size}` : ""} of ${delta}`];
  if (going.length > 0) parts.push(`still switching on when the call ended (they go on): ${going.join(", ")}`);
  for (const [name, error] of failed) parts.push(`${name}: ${error}`);
  const neverRead = group.machines.filter((m) => !tried.has(m.name) && stateOf(ctx, m).power.plug === "unknown");
  if (neverRead.length > 0) parts.push(`never read successfully: ${neverRead.map((m) => m.name).join(", ")}`);
  if (failed.size + neverRead.length > 0) {
    return new PlugpoolError("plug-unreachable", `${what}: ${parts.join("; ")}`);
  }
  if (cancelled) return new PlugpoolError("cancelled", `${what}: ${parts.join("; ")}; the call ended before more were tried`);
  const quarantined = group.machines.filter((m) => !tried.has(m.name) && isQuarantined(ctx, m));
  if (quarantined.length > 0) parts.push(`quarantined after failed boots: ${quarantined.map((m) => m.name).join(", ")}`);
  parts.push("no further machine is usable (held, registered, being powered off, quarantined, or already on)");
  return new PlugpoolError("unsafe", `${what}: ${parts.join("; ")}`);
}
