// What every power backend's switch does around a switch command: hear the device say what it is and ask the
// domain's device check, then (for a switch-off) ask the cut guard, both with the device's slot held, right before
// the request is sent (a checked read asks the device check the same way); and wait between read-backs without
// outliving the call.
import { setTimeout as sleep } from "node:timers/promises";
import type { CutGuard, DeviceCheck, DeviceIdentity } from "../domain/ports.ts";
import { isPlugpoolError } from "../domain/errors.ts";

/**
 * A guard or check that found this instance no longer acting (another holds plugpool's Lease): its refusal is passed
 * on as it is, since nothing is wrong with the device or the machine and cluster-autoscaler is to be told who acts.
 */
function passedOn(error: unknown): boolean {
  return isPlugpoolError(error) && error.code === "not-leader";
}

/** The cut guard said no (or failed): nothing was sent. */
export class CutRefused extends Error {
  override readonly name = "CutRefused";
}

/** What a device check stands before: a switch command, or the read of a state. */
export type Checked = "command" | "read";

/** The device check said no to what the device answered as (or failed): nothing was sent, or no state read. */
export class DeviceRefused extends Error {
  override readonly name = "DeviceRefused";
  readonly seen: DeviceIdentity;
  readonly before: Checked;
  /** The check failed rather than said no. */
  readonly failed: boolean;

  constructor(seen: DeviceIdentity, before: Checked, options: { cause?: unknown } = {}) {
    super(options.cause === undefined ? "the device check refused" : "the device check failed", options);
    this.seen = seen;
    this.before = before;
    this.failed = options.cause !== undefined;
  }
}

/** Resolves when the guard allows the cut; throws CutRefused when it refuses or fails, the abort when the call ended. */
export async function askGuard(mayCut: CutGuard, signal: AbortSignal): Promise<void> {
  let allowed: boolean;
  try {
    allowed = await mayCut({ signal });
  } catch (error) {
    signal.throwIfAborted();
    if (passedOn(error)) throw error;
    throw new CutRefused("the cut guard failed", { cause: error });
  }
  if (!allowed) throw new CutRefused("the cut guard refused");
}

/** Resolves when the check accepts `seen`; throws DeviceRefused when it refuses or fails, the abort when the call ended. */
export async function askDevice(check: DeviceCheck, seen: DeviceIdentity, before: Checked, signal: AbortSignal): Promise<void> {
  let accepted: boolean;
  try {
    accepted = await check(seen, { signal });
  } catch (error) {
    signal.throwIfAborted();
    if (passedOn(error)) throw error;
    throw new DeviceRefused(seen, before, { cause: error });
  }
  if (!accepted) throw new DeviceRefused(seen, before);
}

/** Waits `ms`; false when the signal aborted first. */
export async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}
