// Plug commands and reads, and how their answers update memory. An answer is applied whenever it arrives,
// even after the call that sent it has given up waiting (SPEC §8: every switch answer updates the state).
import type { CallOptions } from "./ports.ts";
import type { Machine, PlugReading } from "./model.ts";
import type { PoolContext } from "./state.ts";
import { messageOf, stateOf } from "./state.ts";
import { PlugpoolError } from "./errors.ts";

/**
 * Switches the machine's plug on. On success the machine is wanted on (a creating instance from now) and
 * `powered-on` is reported; on failure `power-on-failed` is reported and the error rethrown.
 */
export function switchOn(ctx: PoolContext, machine: Machine, options?: CallOptions): Promise<PlugReading> {
  const st = stateOf(ctx, machine);
  const { clock, reporter } = ctx.deps;
  st.switching = "on";
  return ctx.deps.power.turnOn(machine.plug, options).then(
    (reading) => {
      st.switching = undefined;
      st.version += 1;
      st.plug = reading.on ? "on" : "off";
      st.watts = reading.watts;
      if (!reading.on) {
        const error = `plug of ${machine.name} still reads off after turn_on`;
        reporter.report({ type: "power-on-failed", machine: machine.name, group: machine.group, error });
        throw new PlugpoolError("plug-bad-answer", error);
      }
      st.wantedOn = true;
      st.poweredOnAt = clock.now();
      st.bootFailure = undefined;
      reporter.report({ type: "powered-on", machine: machine.name, group: machine.group });
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
 * wanted on and `plug-off` is reported with the draw last measured; failures are rethrown.
 */
export function switchOff(ctx: PoolContext, machine: Machine, cut: CutReport, options?: CallOptions): Promise<PlugReading> {
  const st = stateOf(ctx, machine);
  const watts = st.watts;
  st.switching = "off";
  return ctx.deps.power.turnOff(machine.plug, options).then(
    (reading) => {
      st.switching = undefined;
      st.version += 1;
      st.plug = reading.on ? "on" : "off";
      st.watts = reading.watts;
      if (reading.on) throw new PlugpoolError("plug-bad-answer", `plug of ${machine.name} still reads on after turn_off`);
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
