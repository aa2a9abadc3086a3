// Plug commands and reads, and how their answers update memory. An answer is applied whenever it arrives,
// even after the call that sent it has given up waiting: every switch answer is the plug's newest state.
import type { CallOptions } from "./ports.ts";
import type { Machine, PlugReading } from "./model.ts";
import type { PoolContext } from "./context.ts";
import { DEFAULT_SCALE_UP, PLUG_OFF_WHILE_BOOTING } from "./model.ts";
import type { CutKind, Verdict } from "./safety.ts";
import {
  bootFailed,
  bootStarted,
  commandFailed,
  commandSent,
  lifecycleOf,
  plugCut,
  poweredSeen,
  readingArrived,
  readStarted,
  stateOf,
  switchAnswered,
  switchUnconfirmed,
} from "./lifecycle.ts";
import { isPlugpoolError, messageOf, PlugpoolError } from "./errors.ts";
import { freshVerdict } from "./safety.ts";
import { recordBootFailure } from "./quarantine.ts";
import { deviceCheck } from "./device-identity.ts";

/**
 * Takes one plug-on from the inrush budget: true (and counted from now) when fewer than
 * `maxPowerOnsPerInterval` plug-ons were sent in the last `powerOnIntervalMs`, or when there is no limit.
 * Call it immediately before `switchOn`/`restorePower`, with nothing awaited in between, so that concurrent
 * callers can never overspend it.
 */
export function takePowerOnSlot(ctx: PoolContext): boolean {
  const { maxPowerOnsPerInterval: max } = ctx.config.scaleUp ?? DEFAULT_SCALE_UP;
  if (max === 0) return true;
  if (powerOnSlotWait(ctx) > 0) return false;
  ctx.memory.powerOnsSent.push(ctx.deps.clock.monotonic());
  return true;
}

/**
 * Milliseconds until `takePowerOnSlot` can succeed again (0 when it can now). The plug-ons of an earlier
 * run of plugpool are not known, so a new pool waits one interval before its first: a restart (even a crash
 * loop) can never exceed the limit. Counted on the monotonic clock: a wall clock stepping back would stall
 * plug-ons for as long as the step, and stepping forward would let more through.
 */
export function powerOnSlotWait(ctx: PoolContext): number {
  const { maxPowerOnsPerInterval: max, powerOnIntervalMs } = ctx.config.scaleUp ?? DEFAULT_SCALE_UP;
  if (max === 0) return 0;
  const now = ctx.deps.clock.monotonic();
  const sent = recentPowerOns(ctx, now);
  const oldest = sent[0];
  const slot = sent.length < max || oldest === undefined ? now : oldest + powerOnIntervalMs;
  return Math.max(slot, ctx.memory.createdAt + powerOnIntervalMs) - now;
}

/** The window of sent plug-ons, with those older than the interval dropped. */
function recentPowerOns(ctx: PoolContext, now: number): number[] {
  const { powerOnIntervalMs } = ctx.config.scaleUp ?? DEFAULT_SCALE_UP;
  const sent = ctx.memory.powerOnsSent;
  while (sent[0] !== undefined && sent[0] <= now - powerOnIntervalMs) sent.shift();
  return sent;
}

/**
 * Switches the machine's plug on for a scale-up (`why`: "scale-up" or "queued"). First records the power-on on the
 * cluster (plugpool's licence to cut the machine again while it has no Node); without that record nothing is
 * switched. Resolves once the plug is on, or once the command may have reached it (its answer lost: the record
 * stands and a later reading tells). A failure that switched nothing ends the record: plugpool did not power the
 * machine, so whoever powers it later is not plugpool. Reports `powered-on` or `power-on-failed`, and rethrows
 * failures.
 */
export async function switchOn(ctx: PoolContext, machine: Machine, why: string, options?: CallOptions): Promise<void> {
  const { reporter, records } = ctx.deps;
  commandSent(ctx, machine, "on");
  try {
    await records.recordPowerOn(machine.name, { at: ctx.deps.clock.now(), why }, options);
  } catch (e) {
    commandFailed(ctx, machine);
    reporter.report({ type: "power-on-failed", machine: machine.name, group: machine.group, error: `recording the power-on: ${messageOf(e)}` });
    throw e;
  }
  const poweredOn = (confirmed: boolean): void => {
    bootStarted(ctx, machine);
    reporter.report({ type: "powered-on", machine: machine.name, group: machine.group, confirmed });
  };
  try {
    const reading = await ctx.deps.power.turnOn(machine.power, { ...options, device: deviceCheck(ctx, machine) });
    switchAnswered(ctx, machine, reading);
    if (!reading.on) throw new PlugpoolError("plug-bad-answer", `plug of ${machine.name} still reads off after turn_on`);
    poweredOn(true);
  } catch (e) {
    if (isPlugpoolError(e) && e.code === "plug-unconfirmed") {
      // The plug may be on: it is plugpool's power-on all the same, never a reason to switch on another machine.
      switchUnconfirmed(ctx, machine);
      poweredOn(false);
      return;
    }
    commandFailed(ctx, machine);
    records.endPowerOn(machine.name);
    reporter.report({ type: "power-on-failed", machine: machine.name, group: machine.group, error: messageOf(e) });
    throw e;
  }
}

/**
 * Switches the plug of a registered machine back on (its power was lost). Reports `power-restored` (unless `quiet`:
 * the caller tells why), or `power-on-failed` and rethrows. Records nothing: the machine is already an instance
 * through its Node.
 */
export function restorePower(ctx: PoolContext, machine: Machine, node: string, options?: CallOptions, quiet = false): Promise<PlugReading> {
  const { reporter } = ctx.deps;
  commandSent(ctx, machine, "on");
  return ctx.deps.power.turnOn(machine.power, { ...options, device: deviceCheck(ctx, machine) }).then(
    (reading) => {
      switchAnswered(ctx, machine, reading);
      poweredSeen(ctx, machine, true);
      if (!quiet) reporter.report({ type: "power-restored", machine: machine.name, group: machine.group, node });
      return reading;
    },
    (e: unknown) => {
      if (isPlugpoolError(e) && e.code === "plug-unconfirmed") switchUnconfirmed(ctx, machine);
      else commandFailed(ctx, machine);
      reporter.report({ type: "power-on-failed", machine: machine.name, group: machine.group, error: messageOf(e) });
      throw e;
    },
  );
}

/** How a cut is reported. */
export interface CutReport {
  readonly reason: CutKind;
  readonly graceEnded?: "elapsed" | "standby";
}

/** How a cut ended: done (the plug reads off), refused at the plug (nothing sent), or unconfirmed (may be off). */
export type CutOutcome =
  | { readonly kind: "off" }
  | { readonly kind: "refused"; readonly verdict: Verdict & { readonly allowed: false } }
  | { readonly kind: "unconfirmed"; readonly error: string };

/**
 * Switches the machine's plug off. The verdict is taken again by the plug itself (`freshVerdict`), after the
 * device's queue slot is acquired and right before the request is sent: a refusal there sends nothing. On
 * success the power-on record ends and `plug-off` is reported. A machine plugpool switched on and that is cut
 * unregistered was dropped by cluster-autoscaler: one failed boot (counted here unless its failure was already
 * seen). An unconfirmed command leaves the plug state unknown, never "still on". Other failures are rethrown.
 */
export async function switchOff(ctx: PoolContext, machine: Machine, cut: CutReport, options?: CallOptions): Promise<CutOutcome> {
  const { watts } = stateOf(ctx, machine).power;
  let refusal: (Verdict & { readonly allowed: false }) | undefined;
  const guard = async (o?: CallOptions): Promise<boolean> => {
    const verdict = await freshVerdict(ctx, machine, cut.reason, o);
    if (verdict.allowed) return true;
    refusal = verdict;
    return false;
  };
  commandSent(ctx, machine, "off");
  let reading: PlugReading;
  try {
    reading = await ctx.deps.power.turnOff(machine.power, guard, { ...options, device: deviceCheck(ctx, machine) });
  } catch (e) {
    if (isPlugpoolError(e) && e.code === "device-mismatch") {
      commandFailed(ctx, machine);
      return { kind: "refused", verdict: { allowed: false, rule: "device-mismatch", detail: e.message } };
    }
    if (isPlugpoolError(e) && e.code === "plug-unconfirmed" && refusal === undefined) {
      switchUnconfirmed(ctx, machine);
      // The cut may have happened: plugpool's power-on licenses nothing more (whoever powers it next is not plugpool).
      ctx.deps.records.endPowerOn(machine.name);
      return { kind: "unconfirmed", error: e.message };
    }
    commandFailed(ctx, machine);
    if (refusal !== undefined) return { kind: "refused", verdict: refusal };
    throw e;
  }
  switchAnswered(ctx, machine, reading);
  if (reading.on) throw new PlugpoolError("plug-bad-answer", `plug of ${machine.name} still reads on after turn_off`);
  const dropped = plugCut(ctx, machine, cut.reason === "unregistered");
  ctx.deps.records.endPowerOn(machine.name);
  ctx.deps.reporter.report({
    type: "plug-off",
    machine: machine.name,
    reason: cut.reason,
    ...(watts === undefined ? {} : { watts }),
    ...(cut.graceEnded === undefined ? {} : { graceEnded: cut.graceEnded }),
  });
  if (dropped) recordBootFailure(ctx, machine, "cluster-autoscaler dropped it before it registered");
  return { kind: "off" };
}

/**
 * Reads the machine's plug and applies the reading, unless a switch answer arrived while it was in flight
 * (then the reading is stale and dropped). Resolves with the applied reading, or undefined when dropped. A reading
 * that may stand in for a cut (`checked`: the power-off's "the plug reads off, so the machine has no power") first
 * hears the device say what it is, as a switch command does: an address that now reaches another device would
 * read that device's relay.
 */
export async function readPlug(ctx: PoolContext, machine: Machine, options?: CallOptions, checked = false): Promise<PlugReading | undefined> {
  const started = readStarted(ctx, machine);
  const asked = checked ? { ...options, device: deviceCheck(ctx, machine) } : options;
  const reading = readingArrived(ctx, machine, started, await ctx.deps.power.read(machine.power, asked));
  if (reading === undefined) return undefined;
  if (!reading.on) plugReadOffWhileBooting(ctx, machine);
  poweredSeen(ctx, machine, reading.on);
  return reading;
}

/**
 * A machine plugpool switched on reads off before it registered (a plug reboot, a hand flip): its boot failed, and
 * plugpool's power-on is over, so its record ends here and licenses no cut any more (whoever switches it on next is
 * not plugpool). cluster-autoscaler still sees the creating instance, now with an error, until it deletes it.
 */
function plugReadOffWhileBooting(ctx: PoolContext, machine: Machine): void {
  if (lifecycleOf(ctx, machine).phase !== "booting") return;
  ctx.deps.records.endPowerOn(machine.name);
  if (stateOf(ctx, machine).boot.failure !== undefined) return;
  const message = `plug of ${machine.name} reads off again before the machine registered`;
  bootFailed(ctx, machine, { code: PLUG_OFF_WHILE_BOOTING, message });
  ctx.deps.reporter.report({ type: "unexpected-power", machine: machine.name, detail: message });
  recordBootFailure(ctx, machine, message);
}
