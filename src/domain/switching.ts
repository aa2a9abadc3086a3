// Plug commands and reads, and how their answers update memory. An answer is applied whenever it arrives,
// even after the call that sent it has given up waiting (SPEC §8: every switch answer updates the state).
import type { CallOptions } from "./ports.ts";
import type { Machine, PlugReading } from "./model.ts";
import type { MachineState, PoolContext } from "./state.ts";
import { DEFAULT_SCALE_UP } from "./model.ts";
import { messageOf, stateOf } from "./state.ts";
import { PlugpoolError } from "./errors.ts";
import { recordBootFailure } from "./quarantine.ts";

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
  ctx.memory.powerOnsSent.push(ctx.deps.clock.now());
  return true;
}

/**
 * Milliseconds until `takePowerOnSlot` can succeed again (0 when it can now). The plug-ons of an earlier
 * run of plugpool are not known, so a new pool waits one interval before its first: a restart (even a crash
 * loop) can never exceed the limit.
 */
export function powerOnSlotWait(ctx: PoolContext): number {
  const { maxPowerOnsPerInterval: max, powerOnIntervalMs } = ctx.config.scaleUp ?? DEFAULT_SCALE_UP;
  if (max === 0) return 0;
  const now = ctx.deps.clock.now();
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
 * Switches the machine's plug on for a scale-up. On success the machine is wanted on (a creating instance from
 * now) and `powered-on` is reported; on failure `power-on-failed` is reported and the error rethrown.
 */
export function switchOn(ctx: PoolContext, machine: Machine, options?: CallOptions): Promise<PlugReading> {
  const st = stateOf(ctx, machine);
  return sendOn(ctx, machine, options, () => {
    st.wantedOn = true;
    st.poweredOnAt = ctx.deps.clock.now();
    st.bootFailure = undefined;
    ctx.deps.reporter.report({ type: "powered-on", machine: machine.name, group: machine.group });
  });
}

/**
 * Switches the plug of a registered machine back on (its power was lost). Reports `power-restored`, or
 * `power-on-failed` and rethrows. Wants nothing: the machine is already an instance through its Node.
 */
export function restorePower(ctx: PoolContext, machine: Machine, node: string, options?: CallOptions): Promise<PlugReading> {
  const st = stateOf(ctx, machine);
  return sendOn(ctx, machine, options, () => {
    st.poweredOnAt ??= ctx.deps.clock.now();
    ctx.deps.reporter.report({ type: "power-restored", machine: machine.name, group: machine.group, node });
  });
}

function sendOn(ctx: PoolContext, machine: Machine, options: CallOptions | undefined, confirmed: () => void): Promise<PlugReading> {
  const st = stateOf(ctx, machine);
  const { reporter } = ctx.deps;
  st.switching = "on";
  return ctx.deps.power.turnOn(machine.plug, options).then(
    (reading) => {
      applySwitchAnswer(st, reading);
      if (!reading.on) {
        const error = `plug of ${machine.name} still reads off after turn_on`;
        reporter.report({ type: "power-on-failed", machine: machine.name, group: machine.group, error });
        throw new PlugpoolError("plug-bad-answer", error);
      }
      confirmed();
      return reading;
    },
    (e: unknown) => {
      st.switching = undefined;
      reporter.report({ type: "power-on-failed", machine: machine.name, group: machine.group, error: messageOf(e) });
      throw e;
    },
  );
}

/** How a cut is reported. */
export interface CutReport {
  readonly reason: "power-off" | "unregistered";
  readonly graceEnded?: "elapsed" | "standby";
}

/**
 * Switches the machine's plug off (callers check `mayCutPower` first). On success the machine is no longer
 * wanted on and `plug-off` is reported with the draw last measured; failures are rethrown. A machine plugpool
 * switched on and that is cut unregistered was dropped by cluster-autoscaler: one failed boot (counted here
 * unless its failure was already seen, which then counted it).
 */
export function switchOff(ctx: PoolContext, machine: Machine, cut: CutReport, options?: CallOptions): Promise<PlugReading> {
  const st = stateOf(ctx, machine);
  const watts = st.watts;
  st.switching = "off";
  return ctx.deps.power.turnOff(machine.plug, options).then(
    (reading) => {
      applySwitchAnswer(st, reading);
      if (reading.on) throw new PlugpoolError("plug-bad-answer", `plug of ${machine.name} still reads on after turn_off`);
      const dropped = cut.reason === "unregistered" && st.wantedOn && st.bootFailure === undefined;
      st.wantedOn = false;
      st.bootFailure = undefined;
      st.poweredOnAt = undefined;
      ctx.deps.reporter.report({
        type: "plug-off",
        machine: machine.name,
        reason: cut.reason,
        ...(watts === undefined ? {} : { watts }),
        ...(cut.graceEnded === undefined ? {} : { graceEnded: cut.graceEnded }),
      });
      if (dropped) recordBootFailure(ctx, machine, "cluster-autoscaler dropped it before it registered");
      return reading;
    },
    (e: unknown) => {
      st.switching = undefined;
      throw e;
    },
  );
}

/**
 * Reads the machine's plug and applies the reading, unless a switch answer arrived while it was in flight
 * (then the reading is stale and dropped). Resolves with the applied reading, or undefined when dropped.
 */
export async function readPlug(ctx: PoolContext, machine: Machine, options?: CallOptions): Promise<PlugReading | undefined> {
  const st = stateOf(ctx, machine);
  const version = st.version;
  const reading = await ctx.deps.power.read(machine.plug, options);
  if (st.version !== version || st.switching !== undefined) return undefined;
  st.plug = reading.on ? "on" : "off";
  st.watts = reading.watts;
  st.readError = undefined;
  // Seen on for the first time: it counts as powered from now (decrease cuts the latest first).
  if (reading.on) st.poweredOnAt ??= ctx.deps.clock.now();
  else if (!st.wantedOn) st.poweredOnAt = undefined;
  return reading;
}

/** A switch command's answer is the plug's newest state: reads started before it are stale from now on. */
function applySwitchAnswer(st: MachineState, reading: PlugReading): void {
  st.switching = undefined;
  st.version += 1;
  st.plug = reading.on ? "on" : "off";
  st.watts = reading.watts;
}
