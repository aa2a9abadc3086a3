// A machine whose OS plugpool asked to shut down may halt even though its power-off is then called off (its taint
// removed, a hold added, the shutdown timeout reached by a late pod): its plug stays on, and nothing would ever
// boot it again. Once the aborted power-off's traces are gone, the job watches for that and brings the machine
// back: a control that shuts down itself (a BMC) is switched on; a plug is power-cycled, off then on at once. The
// cycle is the one cut of a machine whose Node has no ToBeDeleted taint, so the plug takes its own verdict
// (`freshVerdict`, kind "cycle") right before the off.
import type { CallOptions } from "./ports.ts";
import type { Machine, NodeView } from "./model.ts";
import type { PoolContext } from "./context.ts";
import type { PowerOffJob } from "./power-off-job.ts";
import { revivalLeft, revivalTold } from "./power-off-job.ts";
import { isMachineHeld, stateOf } from "./lifecycle.ts";
import { instanceId, nodesOf } from "./matching.ts";
import { deviceMismatchOf } from "./device-identity.ts";
import { notReadySinceRequest, watchShutdownNode } from "./safety.ts";
import { messageOf } from "./errors.ts";
import { powerOnSlotWait, readPlug, restorePower, switchOff, takePowerOnSlot } from "./switching.ts";

/** How a machine was brought back: switched on, or off then on at once. */
export type RevivalHow = "power-on" | "power-cycle";

/** The watch of an aborted power-off's machine, kept on its job. */
export interface Revival {
  /**
   * When the watch began (monotonic ms): the power-off's traces were gone. Its window is time that passes, which a
   * wall clock stepped forward would cut short.
   */
  readonly since: number;
  /**
   * Only the switch-on is left, since `at` (the cycle's off went through, or may have, or a switch-on failed); it
   * is told as `how` once it went through.
   */
  readonly onLeft: { readonly at: number; readonly how: RevivalHow } | undefined;
  /** When the machine was last reported stranded. */
  readonly toldAt: number | undefined;
}

const REVIVAL_POLL_MS = 5000;
/** A held machine left halted is reported again this often, until someone acts. */
const STRANDED_REPORT_MS = 600_000;

/** Where the halt of the machine stands, as the view shows its Nodes. */
type Halt =
  /** Every Node is Ready: the machine runs (a halt may still show within the watch). */
  | { readonly kind: "running" }
  /** The Node that was shut down is gone or replaced, or was NotReady before the request: nothing plugpool can tell. */
  | { readonly kind: "unknown"; readonly node: string; readonly why: string }
  /** The Node shut down went NotReady after the request and is NotReady still. */
  | { readonly kind: "halted"; readonly node: NodeView };

/**
 * One pass of the watch: resolves with the delay after which it wants another, or undefined when it is over (the
 * machine runs, was brought back, or cannot be judged and was reported).
 */
export async function revive(ctx: PoolContext, machine: Machine, job: PowerOffJob, options?: CallOptions): Promise<number | undefined> {
  const { revival } = job;
  const asked = job.facts.shutdownRequested;
  if (revival === undefined || asked === undefined || job.facts.plugOff !== undefined) return undefined;
  const now = ctx.deps.clock.now();
  if (job.facts.cutUnconfirmed !== undefined) {
    // Called off (a device answering as another, the taint gone) while a switch-off's answer was lost: the cut may or
    // may not have happened, and nothing plugpool may read settles it. Told, never cycled.
    const detail = "a switch-off whose answer was lost came before the power-off was called off: if the machine is halted with power on, switch it off and on by hand";
    ctx.deps.reporter.report({ type: "stranded", machine: machine.name, node: job.node, detail });
    return undefined;
  }
  if (job.facts.onAfterUnconfirmedCut !== undefined) {
    // It may run again, switched on by someone after a cut whose answer was lost: told, never cycled.
    const detail = "a switch-off whose answer was lost was followed by the plug reading on: if the machine is halted, switch it off and on by hand";
    ctx.deps.reporter.report({ type: "stranded", machine: machine.name, node: job.node, detail });
    return undefined;
  }
  // Behind a device that answers as another, nothing plugpool reads or sends concerns this machine: it is held.
  if (deviceMismatchOf(ctx, machine) !== undefined) return tellHeld(ctx, machine, job, revival, job.node, now);
  const { onLeft } = revival;
  if (onLeft !== undefined) {
    // Held since the cycle's off: it stays off, and is reported until someone acts.
    if (isMachineHeld(ctx, machine, nodesOf(ctx, machine))) return tellHeld(ctx, machine, job, revival, job.node, now);
    return withSlot(ctx, () => switchBackOn(ctx, machine, job, onLeft.how, options));
  }
  const halt = haltOf(ctx, machine, job, asked);
  switch (halt.kind) {
    case "running": {
      // A shutdown asked halts the OS a while after the abort (a pod that ran late, a BMC slow to act), and the view
      // shows it later still: watched as long as a shutdown is waited for. A plug read off is the restore's to mend.
      if (stateOf(ctx, machine).power.plug === "off") return undefined;
      if (ctx.deps.clock.monotonic() < revival.since + ctx.config.powerOff.notReadyTimeoutMs) return REVIVAL_POLL_MS;
      // The watch ends on the apiserver's word, not the view's: a view that lags may still show Ready a Node whose
      // OS has halted since, and nothing would look at that machine again.
      return (await runsNow(ctx, machine, options)) ? undefined : REVIVAL_POLL_MS;
    }
    case "unknown":
      ctx.deps.reporter.report({ type: "stranded", machine: machine.name, node: halt.node, detail: halt.why });
      return undefined;
    case "halted":
      break;
  }
  if (isMachineHeld(ctx, machine, nodesOf(ctx, machine))) {
    // Held and read without power (switched off by hand): nothing of plugpool's to bring back. Told once all the
    // same: a read is not checked against the device's identity, so an address that now reaches another device
    // would read that one's relay.
    if (stateOf(ctx, machine).power.plug === "off") {
      const detail = "it is held and its plug reads off; if the machine still has power, it was left halted: switch it on by hand";
      ctx.deps.reporter.report({ type: "stranded", machine: machine.name, node: halt.node.name, detail });
      return undefined;
    }
    return tellHeld(ctx, machine, job, revival, halt.node.name, now);
  }
  const left = await untilDown(ctx, machine, halt.node, options);
  if (left > 0) return Math.min(left, REVIVAL_POLL_MS);
  return withSlot(ctx, () => bringBack(ctx, machine, job, halt.node.name, options));
}

/** Whether every Node of the machine is Ready as read from the apiserver now (false when it cannot say). */
async function runsNow(ctx: PoolContext, machine: Machine, options?: CallOptions): Promise<boolean> {
  const fresh = await ctx.deps.lookup.nodesClaiming(machine.name, instanceId(ctx.config.providerIDPrefix, machine), options).catch(() => undefined);
  return fresh !== undefined && fresh.length > 0 && fresh.every((n) => n.ready);
}

/** A held machine left halted is reported (again every STRANDED_REPORT_MS) and watched until someone acts. */
function tellHeld(ctx: PoolContext, machine: Machine, job: PowerOffJob, revival: Revival, node: string, now: number): number {
  if (revival.toldAt === undefined || now >= revival.toldAt + STRANDED_REPORT_MS) {
    revivalTold(job, now);
    const detail = `it is held; remove the hold (or pin the identity of its device) to have it power-cycled, or switch it on by hand`;
    ctx.deps.reporter.report({ type: "stranded", machine: machine.name, node, detail });
  }
  return REVIVAL_POLL_MS;
}

/**
 * Runs `bring` once the inrush limit has a plug-on to spare (taken before a cycle's off, so its on follows at once);
 * else resolves with the wait for one.
 */
async function withSlot(ctx: PoolContext, bring: () => Promise<number | undefined>): Promise<number | undefined> {
  return takePowerOnSlot(ctx) ? bring() : Math.max(powerOnSlotWait(ctx), 1);
}

function haltOf(ctx: PoolContext, machine: Machine, job: PowerOffJob, asked: number): Halt {
  const nodes = nodesOf(ctx, machine);
  watchShutdownNode(job, nodes, asked);
  if (nodes.length > 0 && nodes.every((n) => n.ready)) return { kind: "running" };
  const node = nodes.find((n) => !n.ready);
  if (node === undefined) return { kind: "unknown", node: job.node, why: `its Node ${job.node} is gone; no sign it halted` };
  if (job.shutdownNodeUid === undefined || node.uid !== job.shutdownNodeUid) {
    return { kind: "unknown", node: node.name, why: `node ${node.name} is not the Node whose OS plugpool shut down` };
  }
  if (!notReadySinceRequest(job, node, asked)) {
    return { kind: "unknown", node: node.name, why: `node ${node.name} was NotReady before plugpool asked for the shutdown` };
  }
  if (job.shutdownNodeSeen.readyAgain) {
    return { kind: "unknown", node: node.name, why: `node ${node.name} was Ready again after plugpool asked for the shutdown: its OS ran on` };
  }
  if (nodes.some((n) => n.ready)) return { kind: "running" };
  return { kind: "halted", node };
}

/**
 * Milliseconds until the machine counts as down: the grace since its Node went NotReady has passed, or its power
 * sensor reads standby (or its plug reads off) now. 0: down.
 */
async function untilDown(ctx: PoolContext, machine: Machine, node: NodeView, options?: CallOptions): Promise<number> {
  const { graceMs, standbyWatts } = ctx.config.powerOff;
  const left = (node.readyChangedAt ?? ctx.deps.clock.now()) + graceMs - ctx.deps.clock.now();
  if (left <= 0 || !machine.power.measuresWatts) return Math.max(0, left);
  const reading = await readPlug(ctx, machine, options, true).catch(() => undefined);
  const down = reading !== undefined && (!reading.on || (reading.watts !== undefined && reading.watts <= standbyWatts));
  return down ? 0 : left;
}

/**
 * A control that shuts down itself (a BMC, off once the OS halted), or a plug that reads off, is switched on. A plug
 * still on is cycled: off (refused at the plug unless the cycle's verdict allows it), then on at once.
 */
async function bringBack(ctx: PoolContext, machine: Machine, job: PowerOffJob, node: string, options?: CallOptions): Promise<number | undefined> {
  if (machine.power.shutsDown === true || stateOf(ctx, machine).power.plug === "off") {
    return switchBackOn(ctx, machine, job, "power-on", options);
  }
  const outcome = await switchOff(ctx, machine, { reason: "cycle" }, options).catch((e: unknown) => {
    ctx.deps.reporter.report({ type: "power-off-step", machine: machine.name, step: "plug-off", outcome: "failed", detail: `power cycle: ${messageOf(e)}` });
    return undefined;
  });
  if (outcome === undefined) return REVIVAL_POLL_MS;
  if (outcome.kind === "refused") {
    const { rule, detail } = outcome.verdict;
    ctx.deps.reporter.report({ type: "refused", machine: machine.name, rule, detail });
    // Not now (the view), or not yet (held: reported as stranded next pass); a Node Ready runs; anything else
    // cannot be judged.
    if (rule === "view-not-current" || rule === "held") return REVIVAL_POLL_MS;
    if (rule !== "node-ready") ctx.deps.reporter.report({ type: "stranded", machine: machine.name, node, detail });
    return undefined;
  }
  revivalLeft(job, { at: ctx.deps.clock.now(), how: "power-cycle" });
  return switchBackOn(ctx, machine, job, "power-cycle", options);
}

/** The switch-on that brings the machine back; tried again on the next pass if it fails. */
async function switchBackOn(ctx: PoolContext, machine: Machine, job: PowerOffJob, how: RevivalHow, options?: CallOptions): Promise<number | undefined> {
  try {
    await restorePower(ctx, machine, job.node, options, true);
  } catch {
    // Reported as power-on-failed; the machine has no power now, so the switch-on is all that is left to do, and
    // is told as what it began as.
    revivalLeft(job, { at: ctx.deps.clock.now(), how }, true);
    return REVIVAL_POLL_MS;
  }
  ctx.deps.reporter.report({ type: "revived", machine: machine.name, node: job.node, how });
  return undefined;
}
