// What every power backend's switch does around a switch-off: ask the domain's cut guard with the device's slot
// held, right before the request is sent, and wait between read-backs without outliving the call.
import { setTimeout as sleep } from "node:timers/promises";
import type { CutGuard } from "../domain/ports.ts";

/** The cut guard said no (or failed): nothing was sent. */
export class CutRefused extends Error {
  override readonly name = "CutRefused";
}

/** Resolves when the guard allows the cut; throws CutRefused when it refuses or fails, the abort when the call ended. */
export async function askGuard(mayCut: CutGuard, signal: AbortSignal): Promise<void> {
  let allowed: boolean;
  try {
    allowed = await mayCut({ signal });
  } catch (error) {
    signal.throwIfAborted();
    throw new CutRefused("the cut guard failed", { cause: error });
  }
  if (!allowed) throw new CutRefused("the cut guard refused");
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
