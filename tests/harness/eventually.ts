import { setTimeout as sleep } from "node:timers/promises";

/**
 * Retries `check` (which throws while its condition does not hold) until it passes or `timeoutMs` runs out;
 * then rethrows the last failure, prefixed with what was awaited.
 */
export async function eventually(what: string, check: () => Promise<void> | void, timeoutMs = 10_000, everyMs = 100): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (e) {
      if (performance.now() > deadline) {
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      }
    }
    await sleep(everyMs);
  }
}
