// Which device a machine's power control reaches. An address is not a device: a DHCP lease handed out anew, a
// replaced plug or a reset router makes one machine's URL reach another machine's plug. So every switch command
// first hears the device say what it is, in the command's own slot, and goes only to the device plugpool knows.
import type { CallOptions, DeviceCheck, DeviceIdentity } from "./ports.ts";
import type { Machine } from "./model.ts";
import type { PoolContext } from "./context.ts";
import { deviceMismatched, stateOf, uptimeHeard } from "./lifecycle.ts";
import { messageOf } from "./errors.ts";

/**
 * A device that answered as another: its machine is held for the rest of this process's life, or until an operator
 * pins the identity the device should answer with (a change of configuration, so a restart).
 */
export interface DeviceMismatch {
  readonly expected: string;
  readonly seen: string;
}

/** The identity the machine's device must answer with: pinned in the configuration, else learned. */
export function expectedIdentity(ctx: PoolContext, machine: Machine): string | undefined {
  return machine.power.identity ?? ctx.deps.records.deviceIdentity(machine.name);
}

/** The device of the machine answered as another at its last switch command, and nothing was sent since. */
export function deviceMismatchOf(ctx: PoolContext, machine: Machine): DeviceMismatch | undefined {
  return stateOf(ctx, machine).device.mismatch;
}

/**
 * The DeviceCheck of the machine's switch commands and of the reads that stand in for one (and of the first read of
 * a device not known yet). A device that answers as expected goes ahead. With nothing expected yet (first contact),
 * the identity it gives is stored on the cluster first: a command goes only once a restart would confirm the same
 * device. A device that answers as another gets nothing, and its machine is held
 * (reported once per identity seen): no further command is sent to it, so nothing would ever confirm it again. A device whose uptime went back restarted (see `noteUptime`).
 */
export function deviceCheck(ctx: PoolContext, machine: Machine): DeviceCheck {
  return async (seen: DeviceIdentity, options?: CallOptions): Promise<boolean> => {
    const { device } = stateOf(ctx, machine);
    const expected = expectedIdentity(ctx, machine);
    if (expected !== undefined && seen.id !== expected) {
      if (device.mismatch?.seen !== seen.id) {
        ctx.deps.reporter.report({ type: "device-mismatch", machine: machine.name, expected, seen: seen.id });
      }
      deviceMismatched(ctx, machine, { expected, seen: seen.id });
      return false;
    }
    if (expected === undefined) {
      // Met for the first time, it answers as the device of another machine: either two devices share one name (the
      // check could not tell them apart) or this address now reaches that machine's device. Neither is switched.
      const other = ctx.machines.find((m) => m !== machine && expectedIdentity(ctx, m) === seen.id);
      if (other !== undefined) {
        if (device.mismatch?.seen !== seen.id) {
          ctx.deps.reporter.report({ type: "device-duplicate", machine: machine.name, identity: seen.id, other: other.name });
        }
        deviceMismatched(ctx, machine, { expected: `a device of its own (${other.name}'s answers as ${seen.id})`, seen: seen.id });
        return false;
      }
      try {
        await ctx.deps.records.recordDeviceIdentity(machine.name, seen.id, options);
      } catch (e) {
        ctx.deps.reporter.report({ type: "device-not-recorded", machine: machine.name, identity: seen.id, error: messageOf(e) });
        return false;
      }
      ctx.deps.reporter.report({ type: "device-learned", machine: machine.name, identity: seen.id });
    }
    noteUptime(ctx, machine, seen);
    return true;
  };
}

/**
 * A device that restarted since plugpool last heard it may have come up with its relay off, and been switched on by
 * someone since: plugpool's power-on no longer tells who powered the machine, so it licenses no cut any more.
 */
function noteUptime(ctx: PoolContext, machine: Machine, seen: DeviceIdentity): void {
  const before = uptimeHeard(ctx, machine, seen.uptimeSeconds);
  if (before === undefined || seen.uptimeSeconds === undefined || seen.uptimeSeconds >= before) return;
  ctx.deps.reporter.report({ type: "device-restarted", machine: machine.name, uptimeSeconds: seen.uptimeSeconds });
  if (ctx.deps.records.powerOn(machine.name) !== undefined) ctx.deps.records.endPowerOn(machine.name);
}
